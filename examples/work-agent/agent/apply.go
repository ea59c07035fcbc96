package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/work-agent/feedback"
)

// ManifestStatusFeedbackSynced is the manifest condition that says whether
// every status feedback value the work asks for could be reported.
const ManifestStatusFeedbackSynced = "StatusFeedbackSynced"

// ManifestHashAnnotation records, on each resource the agent creates or
// updates, a hash of the manifest it came from: the Update strategy updates
// the resource only when the manifest changed.
const ManifestHashAnnotation = "workwire.io/manifest-hash"

// resource is one resource on the cluster.
type resource struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// sameAs says whether r and o are one object, whatever version each names
// it by.
func (r resource) sameAs(o resource) bool {
	return r.gvr.GroupResource() == o.gvr.GroupResource() && r.namespace == o.namespace && r.name == o.name
}

func (r resource) String() string {
	gr := r.gvr.GroupResource().String()
	if r.namespace == "" {
		return gr + " " + r.name
	}
	return gr + " " + r.namespace + "/" + r.name
}

func (c *controller) resourceClient(r resource) dynamic.ResourceInterface {
	if r.namespace == "" {
		return c.client.Resource(r.gvr)
	}
	return c.client.Resource(r.gvr).Namespace(r.namespace)
}

// apply applies every manifest of w and returns the status w should have:
// one manifest condition per manifest (its resource, Applied, Available
// and, when the work asks for feedback, the values and
// StatusFeedbackSynced), and the work's own Applied and Available, all at
// w's generation. Resources an earlier generation applied and this one no
// longer names are deleted, unless the DeleteOption orphans them; if one
// cannot be, apply returns an error, and the caller keeps the old status
// (which still names it) and retries.
func (c *controller) apply(ctx context.Context, w *workv1.ManifestWork) (workv1.ManifestWorkStatus, error) {
	status := workv1.ManifestWorkStatus{Conditions: slices.Clone(w.Status.Conditions)}
	var failed []string
	available := 0
	var current []resource
	for i, m := range w.Spec.Workload.Manifests {
		mc, r, err := c.applyManifest(ctx, w, int32(i), m)
		if err != nil {
			failed = append(failed, fmt.Sprintf("manifest %d: %v", i, err))
		}
		if r != nil {
			current = append(current, *r)
		}
		if meta.IsStatusConditionTrue(mc.Conditions, workv1.ManifestAvailable) {
			available++
		}
		status.ResourceStatus.Manifests = append(status.ResourceStatus.Manifests, mc)
	}

	// What an earlier generation applied and this one dropped.
	for _, r := range appliedIn(w.Status) {
		if slices.ContainsFunc(current, r.sameAs) || isOrphaned(w.Spec.DeleteOption, r) {
			continue
		}
		if _, err := c.deleteResource(ctx, r, metav1.DeletePropagationBackground); err != nil {
			return workv1.ManifestWorkStatus{}, fmt.Errorf("%s is no longer in the work: %w", r, err)
		}
	}

	n := len(w.Spec.Workload.Manifests)
	applied := metav1.Condition{Type: workv1.WorkApplied, ObservedGeneration: w.Generation,
		Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", Message: "Apply manifest work complete"}
	if len(failed) > 0 {
		applied.Status, applied.Reason = metav1.ConditionFalse, "AppliedManifestWorkFailed"
		applied.Message = "Failed to apply manifest work: " + strings.Join(failed, "; ")
	}
	avail := metav1.Condition{Type: workv1.WorkAvailable, ObservedGeneration: w.Generation,
		Status: metav1.ConditionTrue, Reason: "ResourcesAvailable", Message: "All resources are available"}
	if available < n {
		avail.Status, avail.Reason = metav1.ConditionFalse, "ResourcesNotAvailable"
		avail.Message = fmt.Sprintf("%d of %d resources are not available", n-available, n)
	}
	meta.SetStatusCondition(&status.Conditions, applied)
	meta.SetStatusCondition(&status.Conditions, avail)
	return status, nil
}

// applyManifest applies manifest i of w and returns its condition, the
// resource it names (nil if the manifest could not be mapped), and why it
// failed to apply. The condition keeps the transition times of the
// manifest's previous condition.
func (c *controller) applyManifest(ctx context.Context, w *workv1.ManifestWork, i int32, m workv1.Manifest) (workv1.ManifestCondition, *resource, error) {
	mc := workv1.ManifestCondition{ResourceMeta: workv1.ManifestResourceMeta{Ordinal: i}}
	setApplied := func(err error) {
		cond := metav1.Condition{Type: workv1.ManifestApplied, ObservedGeneration: w.Generation,
			Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", Message: "Apply manifest complete"}
		if err != nil {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "AppliedManifestFailed", "Failed to apply manifest: "+err.Error()
		}
		meta.SetStatusCondition(&mc.Conditions, cond)
	}

	obj, r, err := c.resolve(m)
	if obj != nil {
		gvk := obj.GroupVersionKind()
		mc.ResourceMeta.Group, mc.ResourceMeta.Version, mc.ResourceMeta.Kind = gvk.Group, gvk.Version, gvk.Kind
		mc.ResourceMeta.Name, mc.ResourceMeta.Namespace = obj.GetName(), obj.GetNamespace()
	}
	// Keep the transition times of what this manifest reported before.
	if prev := previous(w.Status, mc.ResourceMeta); prev != nil {
		mc.Conditions = slices.Clone(prev.Conditions)
	}
	if err != nil {
		setApplied(err)
		meta.RemoveStatusCondition(&mc.Conditions, workv1.ManifestAvailable)
		meta.RemoveStatusCondition(&mc.Conditions, ManifestStatusFeedbackSynced)
		return mc, nil, err
	}
	mc.ResourceMeta.Resource = r.gvr.Resource

	config := configFor(w.Spec.ManifestConfigs, r)
	var strategy *workv1.UpdateStrategy
	if config != nil {
		strategy = config.UpdateStrategy
	}
	live, applyErr := c.applyObject(ctx, c.resourceClient(r), obj, m.Raw, strategy)
	setApplied(applyErr)
	if applyErr != nil {
		live, _ = c.resourceClient(r).Get(ctx, r.name, metav1.GetOptions{}) // it may exist all the same
	}

	availableCond := metav1.Condition{Type: workv1.ManifestAvailable, ObservedGeneration: w.Generation,
		Status: metav1.ConditionTrue, Reason: "ResourceAvailable", Message: "Resource is available"}
	if live == nil {
		availableCond.Status, availableCond.Reason, availableCond.Message = metav1.ConditionFalse, "ResourceNotAvailable", "Resource is not available"
	}
	meta.SetStatusCondition(&mc.Conditions, availableCond)

	if config == nil || len(config.FeedbackRules) == 0 {
		meta.RemoveStatusCondition(&mc.Conditions, ManifestStatusFeedbackSynced)
		return mc, &r, applyErr
	}
	synced := metav1.Condition{Type: ManifestStatusFeedbackSynced, ObservedGeneration: w.Generation,
		Status: metav1.ConditionTrue, Reason: "StatusFeedbackSynced", Message: "Status feedback is synced"}
	if live != nil {
		values, err := feedback.Evaluate(live.Object, config.FeedbackRules)
		mc.StatusFeedbacks.Values = values
		if err != nil {
			synced.Status, synced.Reason = metav1.ConditionFalse, "StatusFeedbackSyncFailed"
			synced.Message = "Some status feedback values cannot be reported: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		}
	}
	meta.SetStatusCondition(&mc.Conditions, synced)
	return mc, &r, applyErr
}

// applyObject writes obj to the cluster as strategy says, and returns the
// resource as the cluster has it:
//
//   - Update (the default): create it, or replace it when the manifest
//     changed since the agent last wrote it (ManifestHashAnnotation);
//   - CreateOnly: create it if it does not exist, never update it;
//   - ServerSideApply: apply it with the strategy's field manager (default
//     FieldManager) on every refresh;
//   - ReadOnly: only read it.
func (c *controller) applyObject(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, raw []byte, strategy *workv1.UpdateStrategy) (*unstructured.Unstructured, error) {
	typ := workv1.UpdateStrategyTypeUpdate
	if strategy != nil && strategy.Type != "" {
		typ = strategy.Type
	}
	switch typ {
	case workv1.UpdateStrategyTypeReadOnly:
		return client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	case workv1.UpdateStrategyTypeServerSideApply:
		opts := metav1.ApplyOptions{FieldManager: FieldManager}
		if ssa := strategy.ServerSideApply; ssa != nil {
			opts.Force = ssa.Force
			if ssa.FieldManager != "" {
				opts.FieldManager = ssa.FieldManager
			}
		}
		return client.Apply(ctx, obj.GetName(), obj, opts)
	case workv1.UpdateStrategyTypeUpdate, workv1.UpdateStrategyTypeCreateOnly:
	default:
		return nil, fmt.Errorf("update strategy %q is not supported", typ)
	}

	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:16])
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ManifestHashAnnotation] = hash
	obj.SetAnnotations(annotations)

	cur, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return client.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	case err != nil:
		return nil, err
	case typ == workv1.UpdateStrategyTypeCreateOnly || cur.GetAnnotations()[ManifestHashAnnotation] == hash:
		return cur, nil
	}
	obj.SetResourceVersion(cur.GetResourceVersion()) // a concurrent change is a Conflict, retried
	return client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
}

// resolve decodes a manifest and finds the resource it names. The object's
// namespace is set as the cluster has it: "default" for a namespaced kind
// that names none, none for a cluster-scoped kind. obj is nil only if the
// manifest does not decode.
func (c *controller) resolve(m workv1.Manifest) (*unstructured.Unstructured, resource, error) {
	obj, err := decode(m)
	if err != nil {
		return nil, resource{}, err
	}
	gvk := obj.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if r, ok := c.mapper.(meta.ResettableRESTMapper); ok && meta.IsNoMatchError(err) {
			r.Reset() // the kind may be new (a CRD): rediscover on the next try
		}
		return obj, resource{}, fmt.Errorf("map %s: %w", gvk, err)
	}
	switch {
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		obj.SetNamespace("")
	case obj.GetNamespace() == "":
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	return obj, resource{gvr: mapping.Resource, namespace: obj.GetNamespace(), name: obj.GetName()}, nil
}

// decode reads a manifest as an unstructured object.
func decode(m workv1.Manifest) (*unstructured.Unstructured, error) {
	raw := m.Raw
	if len(raw) == 0 && m.Object != nil {
		var err error
		if raw, err = json.Marshal(m.Object); err != nil {
			return nil, fmt.Errorf("encode manifest: %w", err)
		}
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if obj.GetName() == "" {
		return nil, errors.New("decode manifest: metadata.name is empty")
	}
	return obj, nil
}

// configFor returns the manifest config of the work that names r, if any.
func configFor(configs []workv1.ManifestConfigOption, r resource) *workv1.ManifestConfigOption {
	for i, c := range configs {
		id := c.ResourceIdentifier
		if id.Group == r.gvr.Group && id.Resource == r.gvr.Resource && id.Name == r.name && id.Namespace == r.namespace {
			return &configs[i]
		}
	}
	return nil
}

// previous returns the condition an earlier status reported for the same
// manifest, if any.
func previous(st workv1.ManifestWorkStatus, rm workv1.ManifestResourceMeta) *workv1.ManifestCondition {
	for i, m := range st.ResourceStatus.Manifests {
		p := m.ResourceMeta
		if p.Ordinal == rm.Ordinal && p.Group == rm.Group && p.Kind == rm.Kind && p.Name == rm.Name && p.Namespace == rm.Namespace {
			return &st.ResourceStatus.Manifests[i]
		}
	}
	return nil
}

// appliedIn returns the resources a status says were applied.
func appliedIn(st workv1.ManifestWorkStatus) []resource {
	var out []resource
	for _, m := range st.ResourceStatus.Manifests {
		rm := m.ResourceMeta
		if rm.Resource == "" || !meta.IsStatusConditionTrue(m.Conditions, workv1.ManifestApplied) {
			continue
		}
		out = append(out, resource{gvr: schema.GroupVersionResource{Group: rm.Group, Version: rm.Version, Resource: rm.Resource},
			namespace: rm.Namespace, name: rm.Name})
	}
	return out
}
