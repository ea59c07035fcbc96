package work

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/store"
)

var (
	errDeleting     = errors.New("the work is being deleted: its spec cannot change")
	errNotRemovable = errors.New("the work is not ready to be removed")
	errSpecBySource = errors.New("the spec of a work is set by its source; an agent changes metadata and status only")
)

// agent is the cluster side: works arrive from sources into the store;
// the agent's controllers update statuses, which are published back, and
// metadata (finalizers, labels, annotations), which stays local.
//
// Labels and annotations have one rule: a source owns the keys it sends.
// Each spec event sets them to the source's values and removes those the
// source sent before and sends no more; keys the agent set itself stay.
//
// A source's deletion shows as a deletionTimestamp; the work leaves the
// store once its finalizers are gone, and a last status with the Deleted
// condition tells the source it may forget the work.
type agent struct {
	cluster  string
	st       *store.Store[*workv1.ManifestWork]
	pub      *publisher
	patcher  *patcher
	dataType types.DataType // of works that did not say (the first codec's)
	log      logr.Logger

	mu        sync.Mutex
	held      map[kubetypes.UID]heldWork   // what the agent knows of each work beyond the work itself
	specSpans map[string]trace.SpanContext // by name: the span that handled each work's last spec, while tracing
}

// heldWork is what an agent keeps of a work beside the work: small, as the
// agent keeps one per work.
type heldWork struct {
	// dataType is the data type the work came as, if not the agent's
	// default (its statuses go out as the same).
	dataType unique.Handle[types.DataType]
	// keys are the label and annotation keys its source set (see
	// sourceKeys), shared by every work whose source set the same.
	keys unique.Handle[sourceKeys]
}

// sourceKeys are the label and annotation keys a source set on a work, each
// set sorted and joined by keySep: comparable, so that equal ones are
// interned.
type sourceKeys struct{ labels, annotations string }

// keySep joins keys: no label or annotation key contains it.
const keySep = "\x00"

func newSourceKeys(labels, annotations map[string]string) sourceKeys {
	return sourceKeys{labels: joinKeys(labels), annotations: joinKeys(annotations)}
}

func joinKeys(m map[string]string) string {
	switch len(m) {
	case 0:
		return ""
	case 1:
		for k := range m {
			return k
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), keySep)
}

// splitKeys iterates over keys joined by joinKeys.
func splitKeys(joined string) iter.Seq[string] {
	if joined == "" {
		return func(func(string) bool) {}
	}
	return strings.SplitSeq(joined, keySep)
}

var _ backend = (*agent)(nil)

func (a *agent) works() *store.Store[*workv1.ManifestWork] { return a.st }

// traceParent continues, for a write without a span of its own (a
// controller that does not trace), the trace of the spec the work came
// with: the source's write, its send, this agent's handling, and now the
// status, form one trace.
func (a *agent) traceParent(ctx context.Context, _, name string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	a.mu.Lock()
	sc, ok := a.specSpans[name]
	a.mu.Unlock()
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

func sourceOf(w *workv1.ManifestWork) string { return w.Annotations[codec.OriginalSourceAnnotation] }

func (a *agent) create(context.Context, string, *workv1.ManifestWork, metav1.CreateOptions) (*workv1.ManifestWork, error) {
	return nil, apierrors.NewMethodNotSupported(manifestWorksResource, "create on an agent: works come from sources")
}

func (a *agent) delete(context.Context, string, string, metav1.DeleteOptions) error {
	return apierrors.NewMethodNotSupported(manifestWorksResource, "delete on an agent: sources delete works")
}

func (a *agent) deleteCollection(context.Context, string, metav1.DeleteOptions, metav1.ListOptions) error {
	return apierrors.NewMethodNotSupported(manifestWorksResource, "deletecollection on an agent: sources delete works")
}

// nextMetadata is an update of cur's metadata from in: finalizers, labels,
// annotations and owner references stay on this cluster. The spec belongs
// to the source; status is ignored here (UpdateStatus sets it).
func (a *agent) nextMetadata(cur, in *workv1.ManifestWork, manager string) (*workv1.ManifestWork, error) {
	if err := checkPreconditions(cur, string(in.UID), in.ResourceVersion); err != nil {
		return nil, err
	}
	if !sameSpec(&cur.Spec, &in.Spec) {
		return nil, apierrors.NewForbidden(manifestWorksResource, cur.Name, errSpecBySource)
	}
	if equality.Semantic.DeepEqual(cur.Finalizers, in.Finalizers) && equality.Semantic.DeepEqual(cur.Labels, in.Labels) &&
		equality.Semantic.DeepEqual(cur.Annotations, in.Annotations) && equality.Semantic.DeepEqual(cur.OwnerReferences, in.OwnerReferences) &&
		(len(in.ManagedFields) == 0 || equality.Semantic.DeepEqual(cur.ManagedFields, in.ManagedFields)) {
		return nil, store.ErrNoChange
	}
	live := cur
	if len(cur.ManagedFields) > 0 && len(in.ManagedFields) == 0 {
		live = cur.DeepCopy() // the field manager compares against it
	}
	in = in.DeepCopy()
	next := cur
	next.Finalizers, next.Labels, next.Annotations, next.OwnerReferences = in.Finalizers, in.Labels, in.Annotations, in.OwnerReferences
	if len(in.ManagedFields) > 0 {
		next.ManagedFields = in.ManagedFields
		return next, nil
	}
	return a.patcher.track(live, next, manager), nil
}

func (a *agent) update(ctx context.Context, namespace string, in *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error) {
	if err := checkUpdate(a.st, namespace, in); err != nil {
		return nil, err
	}
	return a.write(ctx, namespace, in, isDryRun(opts.DryRun), opts.FieldManager, false)
}

// nextStatus is an update of cur's status from in; nothing else changes, so
// a status written from an old read never undoes a deletion that came in
// meanwhile.
func (a *agent) nextStatus(cur, in *workv1.ManifestWork, _ string) (*workv1.ManifestWork, error) {
	if err := checkPreconditions(cur, string(in.UID), in.ResourceVersion); err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(cur.Status, in.Status) {
		return nil, store.ErrNoChange
	}
	cur.Status = *in.Status.DeepCopy()
	return cur, nil
}

func (a *agent) updateStatus(ctx context.Context, namespace string, in *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error) {
	if err := checkUpdate(a.st, namespace, in); err != nil {
		return nil, err
	}
	return a.write(ctx, namespace, in, isDryRun(opts.DryRun), opts.FieldManager, true)
}

// write stores in's status (status true) or metadata, publishes a changed
// status, and completes a deletion that a removed finalizer unblocks.
func (a *agent) write(ctx context.Context, namespace string, in *workv1.ManifestWork, dryRun bool, manager string, status bool) (*workv1.ManifestWork, error) {
	next := a.nextMetadata
	if status {
		next = a.nextStatus
	}
	if err := checkNamespace(namespace, in.Namespace); err != nil {
		return nil, err
	}
	if dryRun {
		cur, err := a.st.Get(namespace, in.Name)
		if err != nil {
			return nil, err
		}
		out, err := next(cur, in, manager)
		if errors.Is(err, store.ErrNoChange) {
			return cur, nil
		}
		return out, err
	}
	var changed *workv1.ManifestWork
	out, err := a.st.Update(namespace, in.Name, func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		n, err := next(cur, in, manager)
		changed = n
		return n, err
	})
	if err != nil {
		return nil, err
	}
	if changed != nil && status {
		a.pub.enqueue(ctx, changed) // the store keeps changed as it is: a safe snapshot
	}
	a.completeDeletion(ctx, out.UID)
	return out, nil
}

func (a *agent) patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, sub string) (*workv1.ManifestWork, error) {
	dryRun := isDryRun(opts.DryRun)
	return patchWork(a.st, a.patcher, namespace, name, pt, data, opts, func(patched *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		return a.write(ctx, namespace, patched, dryRun, opts.FieldManager, sub == "status")
	}, nil)
}

// onSpec is the agent client's handler: a spec from a source.
func (a *agent) onSpec(ctx context.Context, t types.EventType, in *workv1.ManifestWork) error {
	var dt unique.Handle[types.DataType]
	if t.DataType != a.dataType {
		dt = unique.Make(t.DataType)
	}
	a.mu.Lock()
	if h, ok := a.held[in.UID]; ok || dt != (unique.Handle[types.DataType]{}) {
		h.dataType = dt
		a.held[in.UID] = h
	}
	a.mu.Unlock()
	in.Namespace = a.cluster
	if t.Action == types.DeleteRequest || in.DeletionTimestamp != nil {
		return a.markDeleted(ctx, in)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		a.mu.Lock()
		a.specSpans[in.Name] = sc
		a.mu.Unlock()
	}
	return a.upsert(in)
}

// upsert stores a spec from a source: a new work, or a new version of one
// the agent holds, whose spec and generation it takes, and whose labels
// and annotations it merges (see agent).
//
// The generic client hands a resource's events over one at a time, so the
// source keys read before the store write are still the current ones when
// they are replaced after it.
func (a *agent) upsert(in *workv1.ManifestWork) error {
	keys := unique.Make(newSourceKeys(in.Labels, in.Annotations))
	if cur, ok := a.st.PeekUID(in.UID); ok {
		var prev sourceKeys
		a.mu.Lock()
		if h := a.held[in.UID].keys; h != (unique.Handle[sourceKeys]{}) {
			prev = h.Value()
		}
		a.mu.Unlock()
		held := false
		err := a.st.Modify(cur.Namespace, cur.Name, func(c *workv1.ManifestWork) (*workv1.ManifestWork, error) {
			if c.UID != in.UID {
				return nil, store.ErrNoChange
			}
			held = true
			// c is the store's copy, the caller's to change; what decides
			// whether anything changes is compared without reflection.
			labels, labelsChanged := mergeSourceKeys(c.Labels, in.Labels, prev.labels)
			annotations, annotationsChanged := mergeSourceKeys(c.Annotations, in.Annotations, prev.annotations)
			if !labelsChanged && !annotationsChanged && c.Generation == in.Generation && sameSpec(&c.Spec, &in.Spec) {
				return nil, store.ErrNoChange
			}
			c.Spec, c.Generation, c.Labels, c.Annotations = in.Spec, in.Generation, labels, annotations
			return c, nil
		})
		if err == nil && held {
			a.setSourceKeys(in.UID, keys)
		}
		return ignoreNotFound(err)
	}
	if old, ok := a.st.Peek(in.Namespace, in.Name); ok {
		if sourceOf(old) != sourceOf(in) {
			a.log.Error(nil, "dropping a work whose name another source's work has", "work", in.Namespace+"/"+in.Name,
				"source", sourceOf(in), "holder", sourceOf(old))
			return nil
		}
		// The source created the work again (a new UID): the new one
		// replaces the old, which the source no longer knows.
		if _, err := a.st.Remove(old.Namespace, old.Name, func(c *workv1.ManifestWork) error {
			if c.UID != old.UID {
				return errNotRemovable
			}
			return nil
		}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		a.forget(old.UID)
	}
	in.ResourceVersion = ""
	if in.CreationTimestamp.IsZero() {
		in.CreationTimestamp = metav1.Now()
	}
	if err := a.st.Put(in); err != nil {
		return err
	}
	a.setSourceKeys(in.UID, keys)
	return nil
}

// setSourceKeys records the keys the source of uid set.
func (a *agent) setSourceKeys(uid kubetypes.UID, keys unique.Handle[sourceKeys]) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.held[uid]
	h.keys = keys
	a.held[uid] = h
}

// forget drops what the agent knows of a work it no longer holds, but the
// data type its last status goes out as (see publish).
func (a *agent) forget(uid kubetypes.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch h, ok := a.held[uid]; {
	case !ok:
	case h.dataType == unique.Handle[types.DataType]{}:
		delete(a.held, uid)
	default:
		h.keys = unique.Handle[sourceKeys]{}
		a.held[uid] = h
	}
}

// mergeSourceKeys returns cur with the source's entries set and the keys
// the source set before (prev) but sends no more removed; other keys stay.
// changed reports whether that differs from cur, which is not modified.
func mergeSourceKeys(cur, source map[string]string, prev string) (merged map[string]string, changed bool) {
	for k, v := range source {
		if have, ok := cur[k]; !ok || have != v {
			changed = true
			break
		}
	}
	dropped := 0
	for k := range splitKeys(prev) {
		if _, still := source[k]; !still {
			if _, ok := cur[k]; ok {
				dropped++
			}
		}
	}
	if !changed && dropped == 0 {
		return cur, false
	}
	merged = make(map[string]string, len(cur)+len(source)-dropped)
	for k, v := range cur {
		merged[k] = v
	}
	for k := range splitKeys(prev) {
		if _, still := source[k]; !still {
			delete(merged, k)
		}
	}
	for k, v := range source {
		merged[k] = v
	}
	if len(merged) == 0 {
		merged = nil
	}
	return merged, true
}

// sameSpec reports whether two specs are equal, comparing the manifests,
// most of a work, by their bytes, and reflecting only over the small rest.
func sameSpec(a, b *workv1.ManifestWorkSpec) bool {
	ma, mb := a.Workload.Manifests, b.Workload.Manifests
	if len(ma) != len(mb) {
		return false
	}
	for i := range ma {
		if !bytes.Equal(ma[i].Raw, mb[i].Raw) {
			return false
		}
		if (ma[i].Object != nil || mb[i].Object != nil) && !equality.Semantic.DeepEqual(ma[i].Object, mb[i].Object) {
			return false
		}
	}
	restA, restB := *a, *b
	restA.Workload.Manifests, restB.Workload.Manifests = nil, nil
	return equality.Semantic.DeepEqual(restA, restB)
}

// markDeleted shows a source's deletion to the agent's controllers, and
// completes it at once if nothing holds the work.
func (a *agent) markDeleted(ctx context.Context, in *workv1.ManifestWork) error {
	cur, ok := a.st.PeekUID(in.UID)
	if !ok {
		// Never had it, or already gone: say so, so the source forgets it.
		a.pub.enqueue(ctx, deletedStatus(in))
		return nil
	}
	err := a.st.Modify(cur.Namespace, cur.Name, func(c *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		if c.UID != in.UID || (c.DeletionTimestamp != nil && c.Generation >= in.Generation) {
			return nil, store.ErrNoChange
		}
		if c.DeletionTimestamp == nil {
			c.DeletionTimestamp = in.DeletionTimestamp
			if c.DeletionTimestamp == nil {
				now := metav1.Now()
				c.DeletionTimestamp = &now
			}
		}
		c.Generation = max(c.Generation, in.Generation)
		return c, nil
	})
	if err := ignoreNotFound(err); err != nil {
		return err
	}
	a.completeDeletion(ctx, in.UID)
	return nil
}

// completeDeletion removes a work the source deleted once its finalizers
// are gone, and reports it Deleted.
func (a *agent) completeDeletion(ctx context.Context, uid kubetypes.UID) {
	w, ok := a.st.PeekUID(uid)
	if !ok || w.DeletionTimestamp == nil || len(w.Finalizers) > 0 {
		return
	}
	// gone is the removed work itself; deletedStatus copies it.
	gone, err := a.st.Remove(w.Namespace, w.Name, func(cur *workv1.ManifestWork) error {
		if cur.UID != uid || cur.DeletionTimestamp == nil || len(cur.Finalizers) > 0 {
			return errNotRemovable
		}
		return nil
	})
	if err != nil {
		return
	}
	a.forget(uid)
	a.mu.Lock()
	delete(a.specSpans, gone.Name)
	a.mu.Unlock()
	a.pub.enqueue(ctx, deletedStatus(gone))
}

// deletedStatus is w's last status: what it was, and Deleted.
func deletedStatus(w *workv1.ManifestWork) *workv1.ManifestWork {
	final := w.DeepCopy()
	meta.SetStatusCondition(&final.Status.Conditions, metav1.Condition{
		Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "WorkDeleted",
		Message: "the work's resources are removed from the cluster", ObservedGeneration: final.Generation,
	})
	return final
}

// publish is the publisher's send: a status event for w, as the data type
// w came as.
func (a *agent) publish(ctx context.Context, client *generic.AgentClient[*workv1.ManifestWork], w *workv1.ManifestWork) error {
	dt := a.dataType
	a.mu.Lock()
	if h := a.held[w.UID].dataType; h != (unique.Handle[types.DataType]{}) {
		dt = h.Value()
	}
	if _, exists := a.st.PeekUID(w.UID); !exists && meta.IsStatusConditionTrue(w.Status.Conditions, codec.WorkDeleted) {
		delete(a.held, w.UID) // its last status: forget it
	}
	a.mu.Unlock()
	return client.Publish(ctx, types.EventType{DataType: dt, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, w)
}

// List implements generic.Lister: the works of one source, or of all.
func (a *agent) List(opts generic.ListOptions) ([]*workv1.ManifestWork, error) {
	var out []*workv1.ManifestWork
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.Range(a.cluster, func(w *workv1.ManifestWork) bool {
		if opts.Source != "" && sourceOf(w) != opts.Source {
			return true
		}
		if !opts.DataType.IsZero() {
			dt := a.dataType
			if h := a.held[w.UID].dataType; h != (unique.Handle[types.DataType]{}) {
				dt = h.Value()
			}
			if dt != opts.DataType {
				return true
			}
		}
		out = append(out, w)
		return true
	})
	return out, nil
}

// Sources implements generic.SourceLister.
func (a *agent) Sources(string) ([]string, error) {
	seen := map[string]struct{}{}
	a.st.Range(a.cluster, func(w *workv1.ManifestWork) bool {
		if s := sourceOf(w); s != "" {
			seen[s] = struct{}{}
		}
		return true
	})
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	return out, nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
