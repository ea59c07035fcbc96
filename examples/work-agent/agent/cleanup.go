package agent

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// resourcesOf returns the resources of w: those its manifests name, and
// those its status says were applied (an earlier generation may have named
// others). A manifest that cannot be decoded or mapped names none: it was
// never applied.
func (c *controller) resourcesOf(w *workv1.ManifestWork) []resource {
	out := appliedIn(w.Status)
	for _, m := range w.Spec.Workload.Manifests {
		if _, r, err := c.resolve(m); err == nil && !slices.ContainsFunc(out, r.sameAs) {
			out = append(out, r)
		}
	}
	return out
}

// isOrphaned says whether the work's DeleteOption leaves r on the cluster
// when the work is deleted or no longer names r. No DeleteOption means
// Foreground: nothing is orphaned.
func isOrphaned(opt *workv1.DeleteOption, r resource) bool {
	if opt == nil {
		return false
	}
	switch opt.PropagationPolicy {
	case workv1.DeletePropagationPolicyTypeOrphan:
		return true
	case workv1.DeletePropagationPolicyTypeSelectivelyOrphan:
		if opt.SelectivelyOrphan == nil {
			return false
		}
		for _, rule := range opt.SelectivelyOrphan.OrphaningRules {
			if rule.Group == r.gvr.Group && rule.Resource == r.gvr.Resource && rule.Name == r.name && rule.Namespace == r.namespace {
				return true
			}
		}
	}
	return false
}

// deleteResource deletes r, and says whether it is gone: with foreground
// propagation an object stays, marked, until its dependents are gone.
func (c *controller) deleteResource(ctx context.Context, r resource, propagation metav1.DeletionPropagation) (gone bool, err error) {
	client := c.resourceClient(r)
	cur, err := client.Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get %s: %w", r, err)
	case cur.GetDeletionTimestamp() != nil:
		return false, nil // on its way
	}
	uid := cur.GetUID()
	err = client.Delete(ctx, r.name, metav1.DeleteOptions{
		PropagationPolicy: &propagation,
		Preconditions:     &metav1.Preconditions{UID: &uid}, // this object, not one created since
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete %s: %w", r, err)
	}
	_, err = client.Get(ctx, r.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, nil
}
