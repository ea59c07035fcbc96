package work

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/store"
	"github.com/workwire/sdk-go/options"
)

// hub is the source side: the store is the truth, writes publish specs, and
// statuses from agents land in the store.
//
// Deletion follows the protocol's handshake: Delete marks the work (a new
// generation with a deletionTimestamp) and publishes a delete_request; the
// work leaves the store when its agent reports the Deleted condition (or at
// once if no agent ever reported on it), and once its finalizers are gone.
type hub struct {
	sourceID string
	st       *store.Store[*workv1.ManifestWork]
	pub      *publisher
	patcher  *patcher
	dataType types.DataType
	log      logr.Logger
	// limit tells the largest event the transport sends; nil if the
	// transport does not tell or the publishing codec does not carry
	// manifests verbatim (see checkSize).
	limit options.EventSizeLimiter

	mu      sync.Mutex
	reports map[kubetypes.UID]bool // present once an agent reported on the work; true once it reported it Deleted
}

var _ backend = (*hub)(nil)

func (h *hub) works() *store.Store[*workv1.ManifestWork] { return h.st }

func (h *hub) traceParent(ctx context.Context, _, _ string) context.Context { return ctx }

func (h *hub) create(ctx context.Context, namespace string, in *workv1.ManifestWork, opts metav1.CreateOptions) (*workv1.ManifestWork, error) {
	if in.ResourceVersion != "" {
		// A kube-apiserver refuses it too (with this message): the object
		// was most likely read back from a store rather than built.
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	w := in.DeepCopy()
	if err := bindNamespace(namespace, w); err != nil {
		return nil, err
	}
	nameOf(w)
	w.UID = uuid.NewUUID()
	w.Generation = 1
	w.CreationTimestamp = metav1.Now()
	w.DeletionTimestamp, w.DeletionGracePeriodSeconds = nil, nil
	w.Status = workv1.ManifestWorkStatus{} // status comes from agents
	if err := validate(w); err != nil {
		return nil, err
	}
	if err := h.checkSize(w.Namespace, w); err != nil {
		return nil, err
	}
	if isDryRun(opts.DryRun) {
		if _, exists := h.st.Peek(w.Namespace, w.Name); exists {
			return nil, apierrors.NewAlreadyExists(manifestWorksResource, w.Name)
		}
		return w, nil
	}
	out, err := h.st.Create(w) // the store owns w from here
	if err != nil {
		return nil, err
	}
	h.pub.enqueue(ctx, w)
	return out, nil
}

// nextVersion is an update of cur to in, as the hub stores it: the client
// sets spec, labels, annotations, finalizers and owner references; status
// is ignored (agents own it). A change agents must see (spec, labels,
// annotations) is a new generation and is published. cur is a copy the
// caller owns; nextVersion changes and returns it.
func (h *hub) nextVersion(cur, in *workv1.ManifestWork, manager string) (next *workv1.ManifestWork, publish bool, err error) {
	if err := checkPreconditions(cur, string(in.UID), in.ResourceVersion); err != nil {
		return nil, false, err
	}
	specChanged := !sameSpec(&cur.Spec, &in.Spec)
	metaChanged := !equality.Semantic.DeepEqual(cur.Labels, in.Labels) || !equality.Semantic.DeepEqual(cur.Annotations, in.Annotations)
	localChanged := !equality.Semantic.DeepEqual(cur.Finalizers, in.Finalizers) || !equality.Semantic.DeepEqual(cur.OwnerReferences, in.OwnerReferences) ||
		(len(in.ManagedFields) > 0 && !equality.Semantic.DeepEqual(cur.ManagedFields, in.ManagedFields))
	if !specChanged && !metaChanged && !localChanged {
		return cur, false, store.ErrNoChange
	}
	if cur.DeletionTimestamp != nil && specChanged {
		return nil, false, apierrors.NewForbidden(manifestWorksResource, cur.Name, errDeleting)
	}
	live := cur
	if len(cur.ManagedFields) > 0 && len(in.ManagedFields) == 0 {
		live = cur.DeepCopy() // the field manager compares against it
	}
	in = in.DeepCopy() // the caller's object stays the caller's
	next = cur
	next.Spec, next.Labels, next.Annotations = in.Spec, in.Labels, in.Annotations
	next.Finalizers, next.OwnerReferences = in.Finalizers, in.OwnerReferences
	if len(in.ManagedFields) > 0 {
		next.ManagedFields = in.ManagedFields
	}
	if specChanged || metaChanged {
		next.Generation++
	}
	if err := validate(next); err != nil {
		return nil, false, err
	}
	if len(in.ManagedFields) == 0 {
		next = h.patcher.track(live, next, manager)
	}
	return next, specChanged || metaChanged, nil
}

func (h *hub) update(ctx context.Context, namespace string, in *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error) {
	if err := checkUpdate(h.st, namespace, in); err != nil {
		return nil, err
	}
	return h.write(ctx, namespace, in, isDryRun(opts.DryRun), opts.FieldManager)
}

// checkSize refuses a work whose spec event would surely be larger than
// the transport sends, with 413 as a kube-apiserver refuses an object
// larger than it stores, rather than storing a work that can never reach
// its agent. The measure is a lower bound of the event's size: workwire's
// codecs carry the manifests' bytes verbatim in the data, and the name,
// namespace, labels and annotations (JSON-escaped, so no shorter) in the
// metadata extension. A work under the limit by it may still make a larger
// event (the envelope, a broker's own lower limit); the publisher reports
// those to the error handler.
func (h *hub) checkSize(namespace string, w *workv1.ManifestWork) error {
	if h.limit == nil {
		return nil
	}
	limit := h.limit.MaxEventBytes()
	if limit <= 0 {
		return nil
	}
	n := len(w.Name) + len(namespace)
	for i := range w.Spec.Workload.Manifests {
		n += len(w.Spec.Workload.Manifests[i].Raw)
	}
	for k, v := range w.Labels {
		n += len(k) + len(v)
	}
	for k, v := range w.Annotations {
		n += len(k) + len(v)
	}
	if n <= limit {
		return nil
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"manifestwork %s/%s: its manifests and metadata alone are %d bytes, more than the largest event the transport sends (%d bytes)",
		namespace, w.Name, n, limit))
}

// write stores the update of the work named by in, publishes it if agents
// must see it, and completes a deletion it unblocks.
func (h *hub) write(ctx context.Context, namespace string, in *workv1.ManifestWork, dryRun bool, manager string) (*workv1.ManifestWork, error) {
	if err := h.checkSize(namespace, in); err != nil {
		return nil, err
	}
	if dryRun {
		cur, err := h.st.Get(namespace, in.Name)
		if err != nil {
			return nil, err
		}
		next, _, err := h.nextVersion(cur, in, manager)
		if errors.Is(err, store.ErrNoChange) {
			return cur, nil
		}
		return next, err
	}
	var published *workv1.ManifestWork
	out, err := h.st.Update(namespace, in.Name, func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		next, publish, err := h.nextVersion(cur, in, manager)
		if publish {
			published = next // the store keeps next as it is: a safe snapshot
		}
		return next, err
	})
	if err != nil {
		return nil, err
	}
	if published != nil {
		h.pub.enqueue(ctx, published)
	}
	h.completeDeletion(out.UID)
	return out, nil
}

func (h *hub) updateStatus(context.Context, string, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error) {
	return nil, apierrors.NewMethodNotSupported(manifestWorksResource, "update status on a source: agents report it")
}

func (h *hub) patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, sub string) (*workv1.ManifestWork, error) {
	if sub == "status" {
		return nil, apierrors.NewMethodNotSupported(manifestWorksResource, "patch status on a source: agents report it")
	}
	dryRun := isDryRun(opts.DryRun)
	return patchWork(h.st, h.patcher, namespace, name, pt, data, opts,
		func(patched *workv1.ManifestWork) (*workv1.ManifestWork, error) {
			return h.write(ctx, namespace, patched, dryRun, opts.FieldManager)
		},
		func(applied *workv1.ManifestWork) (*workv1.ManifestWork, error) {
			return h.create(ctx, namespace, applied, metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager})
		})
}

func (h *hub) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if isDryRun(opts.DryRun) {
		cur, err := h.st.Get(namespace, name)
		if err != nil {
			return err
		}
		return deletePreconditions(cur, opts.Preconditions)
	}
	var (
		published *workv1.ManifestWork
		uid       kubetypes.UID
	)
	err := h.st.Modify(namespace, name, func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		uid = cur.UID
		if err := deletePreconditions(cur, opts.Preconditions); err != nil {
			return nil, err
		}
		if cur.DeletionTimestamp != nil {
			return nil, store.ErrNoChange // already being deleted
		}
		now := metav1.Now()
		zero := int64(0)
		cur.DeletionTimestamp, cur.DeletionGracePeriodSeconds = &now, &zero
		cur.Generation++ // agents must see the deletion: a new version
		published = cur
		return cur, nil
	})
	if err != nil {
		return err
	}
	if published != nil {
		h.pub.enqueue(ctx, published)
	}
	h.completeDeletion(uid)
	return nil
}

// deleteCollection deletes the matching works one by one through delete,
// as a kube-apiserver does: a work gone meanwhile is no error, and the
// first other error is returned as it is, after the others are tried.
func (h *hub) deleteCollection(ctx context.Context, namespace string, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	list, err := listWorks(h.st, namespace, listOpts, true) // only their names are read
	if err != nil {
		return err
	}
	var first error
	for i := range list.Items {
		w := &list.Items[i]
		if err := h.delete(ctx, w.Namespace, w.Name, opts); err != nil && !apierrors.IsNotFound(err) && first == nil {
			first = err
		}
	}
	return first
}

// completeDeletion removes a work being deleted once nothing holds it: no
// finalizers, and its agent confirmed (or no agent ever reported on it).
func (h *hub) completeDeletion(uid kubetypes.UID) {
	w, ok := h.st.PeekUID(uid)
	if !ok || w.DeletionTimestamp == nil || len(w.Finalizers) > 0 {
		return
	}
	h.mu.Lock()
	confirmed, reported := h.reports[uid]
	h.mu.Unlock()
	if reported && !confirmed {
		return
	}
	_, err := h.st.Remove(w.Namespace, w.Name, func(cur *workv1.ManifestWork) error {
		if cur.UID != uid || cur.DeletionTimestamp == nil || len(cur.Finalizers) > 0 {
			return errNotRemovable
		}
		return nil
	})
	if err == nil {
		h.mu.Lock()
		delete(h.reports, uid)
		h.mu.Unlock()
	}
}

// onStatus is the source client's handler: a status from an agent.
func (h *hub) onStatus(_ context.Context, _ types.EventType, status *workv1.ManifestWork) error {
	cur, ok := h.st.PeekUID(status.UID)
	if !ok {
		h.log.V(4).Info("status for a work this source does not hold", "uid", status.UID, "cluster", status.Namespace)
		return nil
	}
	deleted := meta.IsStatusConditionTrue(status.Status.Conditions, codec.WorkDeleted)
	h.mu.Lock()
	h.reports[status.UID] = h.reports[status.UID] || deleted
	h.mu.Unlock()
	if deleted {
		h.completeDeletion(status.UID)
		return nil
	}
	// cur is the stored work, immutable: the comparison needs no lock, and
	// under the lock is repeated only if the work changed meanwhile.
	if equality.Semantic.DeepEqual(cur.Status, status.Status) {
		return nil
	}
	err := h.st.Modify(cur.Namespace, cur.Name, func(c *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		if c.UID != status.UID || (c.ResourceVersion != cur.ResourceVersion && equality.Semantic.DeepEqual(c.Status, status.Status)) {
			return nil, store.ErrNoChange
		}
		c.Status = status.Status
		return c, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// publish is the publisher's send: a spec event for w.
func (h *hub) publish(ctx context.Context, client *generic.SourceClient[*workv1.ManifestWork], w *workv1.ManifestWork) error {
	action := types.UpdateRequest
	switch {
	case w.DeletionTimestamp != nil:
		action = types.DeleteRequest
	case w.Generation == 1:
		action = types.CreateRequest
	}
	return client.Publish(ctx, types.EventType{DataType: h.dataType, SubResource: types.SubResourceSpec, Action: action}, w)
}

// List implements generic.Lister: the works of a cluster. Every work of the
// hub's store belongs to this source, under the data type it publishes.
func (h *hub) List(opts generic.ListOptions) ([]*workv1.ManifestWork, error) {
	if !opts.DataType.IsZero() && opts.DataType != h.dataType {
		return nil, nil
	}
	if opts.Source != "" && opts.Source != h.sourceID {
		return nil, nil
	}
	var out []*workv1.ManifestWork
	h.st.Range(opts.ClusterName, func(w *workv1.ManifestWork) bool {
		out = append(out, w)
		return true
	})
	return out, nil
}
