package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/store"
	"github.com/workwire/sdk-go/resource/agentstate"
)

// agent is the cluster side: objects arrive from sources into the store;
// the agent's controllers update statuses, which are published back, and
// metadata (finalizers, labels, annotations), which stays local.
//
// Labels and annotations have one rule: a source owns the keys it sends.
// Each spec event sets them to the source's values and removes those the
// source sent before and sends no more; keys the agent set itself stay.
//
// A source's deletion shows as a deletionTimestamp; the object leaves the
// store once its finalizers are gone, and a last status with the Deleted
// condition tells the source it may forget the object.
//
// With a state (agentstate.Store), every change of an object is kept there
// before the store shows it, and the object leaves the state when it leaves
// the store: a new agent over the same state starts with what this one
// held (restore), so a deletion made while no agent ran still reaches the
// controllers. Writes of one object take its lock (lock), so the state and
// the store see them in the same order.
type agent[T Object] struct {
	kind    *Kind[T]
	cluster string
	st      *store.Store[T]
	pub     *publisher[T]
	patcher *patcher[T]
	// client routes each object: it knows the source and the data type
	// each came as.
	client  *generic.AgentClient[T]
	log     logr.Logger
	onError generic.ErrorHandler

	state agentstate.Store // nil: nothing outlives the agent
	seed  maphash.Seed
	locks [objectLocks]sync.Mutex

	mu sync.Mutex
	// keys are the label and annotation keys the source of each object
	// set, shared by every object whose source set the same — only for
	// objects whose keys are not all their source's (the agent set keys of
	// its own or removed some): for the rest, the stored object's keys are
	// its source's (see sourceKeysOf), and an agent holds no entry for them.
	keys      map[kubetypes.UID]unique.Handle[sourceKeys]
	specSpans map[string]trace.SpanContext // by name: the span that handled each object's last spec, while tracing
}

// sourceKeys are the label and annotation keys a source set on an object, each
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

// splitKeys iterates over keys joined by joinKeys, as often as it is
// ranged over (strings.SplitSeq's sequence ends after its first use).
func splitKeys(joined string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if joined == "" {
			return
		}
		for k := range strings.SplitSeq(joined, keySep) {
			if !yield(k) {
				return
			}
		}
	}
}

var (
	_ backend[Object]           = (*agent[Object])(nil)
	_ generic.ConnectionWatcher = (*agent[Object])(nil)
)

func (a *agent[T]) objects() *store.Store[T] { return a.st }

// traceParent continues, for a write without a span of its own (a
// controller that does not trace), the trace of the spec the object came
// with: the source's write, its send, this agent's handling, and now the
// status, form one trace.
func (a *agent[T]) traceParent(ctx context.Context, _, name string) context.Context {
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

// sourceOf is the source obj came from, as its codec recorded it.
func sourceOf(obj Object) string { return obj.GetAnnotations()[codec.OriginalSourceAnnotation] }

func (a *agent[T]) create(context.Context, string, T, metav1.CreateOptions) (T, error) {
	var zero T
	return zero, refused(a.kind.Resource, "an agent cannot create %s: they come from sources")
}

func (a *agent[T]) delete(context.Context, string, string, metav1.DeleteOptions) error {
	return refused(a.kind.Resource, "an agent cannot delete %s: their sources do")
}

func (a *agent[T]) deleteCollection(context.Context, string, metav1.DeleteOptions, metav1.ListOptions) error {
	return refused(a.kind.Resource, "an agent cannot delete a collection of %s: their sources delete them")
}

// nextMetadata is an update of cur's metadata from in: finalizers, labels,
// annotations and owner references stay on this cluster. The spec belongs
// to the source; status is ignored here (UpdateStatus sets it).
func (a *agent[T]) nextMetadata(cur, in T, manager string) (T, error) {
	if err := a.kind.checkPreconditions(cur, string(in.GetUID()), in.GetResourceVersion()); err != nil {
		return cur, err
	}
	if !a.kind.SameSpec(cur, in) {
		return cur, apierrors.NewForbidden(a.kind.Resource, cur.GetName(), errSpecBySource)
	}
	if equality.Semantic.DeepEqual(cur.GetFinalizers(), in.GetFinalizers()) && equality.Semantic.DeepEqual(cur.GetLabels(), in.GetLabels()) &&
		equality.Semantic.DeepEqual(cur.GetAnnotations(), in.GetAnnotations()) && equality.Semantic.DeepEqual(cur.GetOwnerReferences(), in.GetOwnerReferences()) &&
		(len(in.GetManagedFields()) == 0 || equality.Semantic.DeepEqual(cur.GetManagedFields(), in.GetManagedFields())) {
		return cur, store.ErrNoChange
	}
	live := cur
	if len(cur.GetManagedFields()) > 0 && len(in.GetManagedFields()) == 0 {
		live = a.kind.Copy(cur) // the field manager compares against it
	}
	if !sameKeys(cur.GetLabels(), in.GetLabels()) || !sameKeys(cur.GetAnnotations(), in.GetAnnotations()) {
		a.keepSourceKeys(cur)
	}
	in = a.kind.Copy(in)
	next := cur
	next.SetFinalizers(in.GetFinalizers())
	next.SetLabels(in.GetLabels())
	next.SetAnnotations(in.GetAnnotations())
	next.SetOwnerReferences(in.GetOwnerReferences())
	if len(in.GetManagedFields()) > 0 {
		next.SetManagedFields(in.GetManagedFields())
		return next, nil
	}
	return a.patcher.track(live, next, manager), nil
}

func (a *agent[T]) update(ctx context.Context, namespace string, in T, opts metav1.UpdateOptions) (T, error) {
	if err := a.kind.checkUpdate(a.st, namespace, in); err != nil {
		var zero T
		return zero, err
	}
	return a.write(ctx, namespace, in, isDryRun(opts.DryRun), opts.FieldManager, false)
}

// nextStatus is an update of cur's status from in; nothing else changes, so
// a status written from an old read never undoes a deletion that came in
// meanwhile. cur may be the stored object: the new version is a shallow
// copy of it that shares all but the status.
func (a *agent[T]) nextStatus(cur, in T, _ string) (T, error) {
	if err := a.kind.checkPreconditions(cur, string(in.GetUID()), in.GetResourceVersion()); err != nil {
		return cur, err
	}
	if a.kind.SameStatus(cur, in) {
		return cur, store.ErrNoChange
	}
	// in stays the caller's: the new version takes a deep copy of its
	// status alone.
	status := a.kind.New()
	a.kind.SetStatus(status, in)
	next := a.kind.Shallow(cur)
	a.kind.SetStatus(next, a.kind.Copy(status))
	return next, nil
}

func (a *agent[T]) updateStatus(ctx context.Context, namespace string, in T, opts metav1.UpdateOptions) (T, error) {
	var zero T
	if a.kind.SetStatus == nil {
		return zero, refused(a.kind.Resource, "%s have no status to update")
	}
	if err := a.kind.checkUpdate(a.st, namespace, in); err != nil {
		return zero, err
	}
	return a.write(ctx, namespace, in, isDryRun(opts.DryRun), opts.FieldManager, true)
}

// write stores in's status (status true) or metadata, publishes a changed
// status, and completes a deletion that a removed finalizer unblocks.
func (a *agent[T]) write(ctx context.Context, namespace string, in T, dryRun bool, manager string, status bool) (T, error) {
	var zero T
	next := a.nextMetadata
	if status {
		next = a.nextStatus
	}
	if err := checkNamespace(namespace, in.GetNamespace()); err != nil {
		return zero, err
	}
	if dryRun {
		cur, err := a.st.Get(namespace, in.GetName())
		if err != nil {
			return zero, err
		}
		out, err := next(cur, in, manager)
		if errors.Is(err, store.ErrNoChange) {
			return cur, nil
		}
		return out, err
	}
	var changed T
	var didChange bool
	change := func(cur T) (T, error) {
		n, err := next(cur, in, manager)
		changed, didChange = n, err == nil
		return n, err
	}
	if !status {
		// The metadata's changes are made on a copy; a status write
		// changes one part, and needs no deep copy of the rest.
		change = a.onCopy(change)
	}
	out, err := a.change(ctx, namespace, in.GetName(), change)
	if err != nil {
		return zero, err
	}
	out = a.kind.Copy(out) // the caller's
	if didChange && status {
		a.pub.enqueue(ctx, changed) // the store keeps changed as it is: a safe snapshot
	}
	a.completeDeletion(ctx, out.GetUID())
	return out, nil
}

// objectLocks is how many locks the writes of an agent's objects share
// (by the object's name): writes of one object wait for each other, while
// their state is kept.
const objectLocks = 64

// lock takes the lock of the object name and returns it, to unlock.
func (a *agent[T]) lock(name string) *sync.Mutex {
	mu := &a.locks[maphash.String(a.seed, name)%objectLocks]
	mu.Lock()
	return mu
}

// change writes the object namespace/name anew under its lock: change gets the
// stored object, which it must not modify, and returns the new one (or
// store.ErrNoChange); that is kept in the state, then stored. It returns
// the stored object, which the caller must not modify.
func (a *agent[T]) change(ctx context.Context, namespace, name string, change func(cur T) (T, error)) (T, error) {
	defer a.lock(name).Unlock()
	return a.changeLocked(ctx, namespace, name, change)
}

// changeLocked is change for a caller that holds the object's lock.
func (a *agent[T]) changeLocked(ctx context.Context, namespace, name string, change func(cur T) (T, error)) (T, error) {
	for {
		var zero T
		cur, err := a.st.Lookup(namespace, name)
		if err != nil {
			return zero, err
		}
		next, err := change(cur)
		switch {
		case errors.Is(err, store.ErrNoChange):
			return cur, nil
		case err != nil:
			return zero, err
		}
		if err := a.keep(ctx, next); err != nil {
			return zero, err
		}
		out, err := a.st.Swap(cur, next)
		if !errors.Is(err, store.ErrChanged) {
			return out, err
		}
	}
}

// onCopy adapts fn, which changes in place a copy of the stored object
// (Kind.Share's), to change.
func (a *agent[T]) onCopy(fn func(c T) (T, error)) func(cur T) (T, error) {
	return func(cur T) (T, error) {
		next, err := fn(a.kind.Share(cur))
		if errors.Is(err, store.ErrNoChange) {
			return cur, err
		}
		return next, err
	}
}

// record is what the agent keeps of an object in its state: the object,
// and the label and annotation keys its source set where the agent set
// keys of its own (see agent), so that a new agent merges the source's
// next spec as this one would.
type record struct {
	Object     json.RawMessage `json:"object"`
	SourceKeys *recordKeys     `json:"sourceKeys,omitempty"`
}

type recordKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

// keep writes obj, about to be stored, to the state, if the agent has one.
// The caller holds obj's lock.
func (a *agent[T]) keep(ctx context.Context, obj T) error {
	if a.state == nil {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("keep %s %s in the agent's state: %w", a.pub.noun, key(obj), err)
	}
	r := record{Object: data}
	a.mu.Lock()
	h, local := a.keys[obj.GetUID()]
	a.mu.Unlock()
	if local {
		k := h.Value()
		r.SourceKeys = &recordKeys{Labels: slices.Collect(splitKeys(k.labels)), Annotations: slices.Collect(splitKeys(k.annotations))}
	}
	if data, err = json.Marshal(r); err != nil {
		return fmt.Errorf("keep %s %s in the agent's state: %w", a.pub.noun, key(obj), err)
	}
	if err := a.state.Put(ctx, obj.GetName(), data); err != nil {
		return fmt.Errorf("keep %s %s in the agent's state: %w", a.pub.noun, key(obj), err)
	}
	return nil
}

// restore stores what the state holds, before the agent's client starts:
// the objects a previous agent held, which their sources may have deleted
// meanwhile. Those whose deletion only waited for the state to forget them
// (no finalizers left) are completed.
func (a *agent[T]) restore(ctx context.Context) error {
	if a.state == nil {
		return nil
	}
	entries, err := a.state.Load(ctx)
	if err != nil {
		return fmt.Errorf("restore the agent's state: %w", err)
	}
	var done []kubetypes.UID
	for name, data := range entries {
		var r record
		obj := a.kind.New()
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("restore the agent's state: entry %q: %w", name, err)
		}
		if err := json.Unmarshal(r.Object, obj); err != nil {
			return fmt.Errorf("restore the agent's state: entry %q: %w", name, err)
		}
		if obj.GetName() != name || obj.GetNamespace() != a.cluster || obj.GetUID() == "" {
			return fmt.Errorf("restore the agent's state: entry %q holds %s %s/%s (uid %q), not an object of cluster %s by that name",
				name, a.pub.noun, obj.GetNamespace(), obj.GetName(), obj.GetUID(), a.cluster)
		}
		obj.SetResourceVersion("")
		if err := a.st.Put(obj); err != nil {
			return fmt.Errorf("restore the agent's state: entry %q: %w", name, err)
		}
		if k := r.SourceKeys; k != nil {
			slices.Sort(k.Labels)
			slices.Sort(k.Annotations)
			a.mu.Lock()
			a.keys[obj.GetUID()] = unique.Make(sourceKeys{labels: strings.Join(k.Labels, keySep), annotations: strings.Join(k.Annotations, keySep)})
			a.mu.Unlock()
		}
		if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
			done = append(done, obj.GetUID())
		}
	}
	for _, uid := range done {
		a.completeDeletion(ctx, uid)
	}
	a.log.V(2).Info("restored the agent's state", "objects", len(entries))
	return nil
}

func (a *agent[T]) patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, sub string) (T, error) {
	if sub == "status" && a.kind.SetStatus == nil {
		var zero T
		return zero, refused(a.kind.Resource, "%s have no status to patch")
	}
	dryRun := isDryRun(opts.DryRun)
	return patchObject(a.st, a.patcher, namespace, name, pt, data, opts, func(patched T) (T, error) {
		return a.write(ctx, namespace, patched, dryRun, opts.FieldManager, sub == "status")
	}, nil)
}

// onSpec is the agent client's handler: a spec from a source.
func (a *agent[T]) onSpec(ctx context.Context, t types.EventType, in T) error {
	in.SetNamespace(a.cluster)
	if t.Action == types.DeleteRequest || in.GetDeletionTimestamp() != nil {
		return a.markDeleted(ctx, in)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		a.mu.Lock()
		a.specSpans[in.GetName()] = sc
		a.mu.Unlock()
	}
	return a.upsert(ctx, in)
}

// upsert stores a spec from a source: a new object, or a new version of
// one the agent holds, whose spec and generation it takes, and whose
// labels and annotations it merges (see agent). A spec the agent holds as
// it is, it answers with the status it has, if any: the source sent it
// again because no status acknowledged it (it may have lost the one the
// agent sent).
//
// It holds the object's lock, so the source keys read before the write are
// still the current ones when it replaces them.
func (a *agent[T]) upsert(ctx context.Context, in T) error {
	defer a.lock(in.GetName()).Unlock()
	if cur, ok := a.st.PeekUID(in.GetUID()); ok && cur.GetName() == in.GetName() {
		prevLabels, prevAnnotations := a.sourceKeysOf(cur)
		same := false
		var unchanged T
		_, err := a.changeLocked(ctx, cur.GetNamespace(), cur.GetName(), a.onCopy(func(c T) (T, error) {
			if c.GetUID() != in.GetUID() {
				return c, store.ErrNoChange
			}
			// c is a copy, ours to change; what decides whether anything
			// changes is compared without reflection.
			labels, labelsChanged := mergeSourceKeys(c.GetLabels(), in.GetLabels(), prevLabels)
			annotations, annotationsChanged := mergeSourceKeys(c.GetAnnotations(), in.GetAnnotations(), prevAnnotations)
			if !labelsChanged && !annotationsChanged && c.GetGeneration() == in.GetGeneration() && a.kind.SameSpec(c, in) {
				same, unchanged = true, c
				return c, store.ErrNoChange
			}
			// The merge holds every key of the source's: more means some
			// are the agent's. Recorded before the state keeps c.
			a.setSourceKeys(in, len(labels) != len(in.GetLabels()) || len(annotations) != len(in.GetAnnotations()))
			a.kind.SetSpec(c, in)
			c.SetGeneration(in.GetGeneration())
			c.SetLabels(labels)
			c.SetAnnotations(annotations)
			return c, nil
		}))
		if same {
			if h, herr := a.kind.StatusHash(unchanged); herr == nil && h != generic.NoStatus {
				a.pub.enqueue(ctx, unchanged) // a discarded copy: a safe snapshot
			}
		}
		return ignoreNotFound(err)
	}
	old, replaces := a.st.Peek(in.GetNamespace(), in.GetName())
	if replaces && sourceOf(old) != sourceOf(in) {
		a.log.Error(nil, "dropping an object whose name another source's object has", a.pub.noun, key(in),
			"source", sourceOf(in), "holder", sourceOf(old))
		return nil
	}
	in.SetResourceVersion("")
	if ts := in.GetCreationTimestamp(); ts.IsZero() {
		in.SetCreationTimestamp(metav1.Now())
	}
	a.setSourceKeys(in, false)
	if err := a.keep(ctx, in); err != nil {
		return err
	}
	if replaces {
		// The source created the object again (a new UID): the new one
		// replaces the old, which the source no longer knows.
		if _, err := a.st.Remove(old.GetNamespace(), old.GetName(), func(c T) error {
			if c.GetUID() != old.GetUID() {
				return errNotRemovable
			}
			return nil
		}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		a.forget(old.GetUID())
	}
	return a.st.Put(in)
}

// sourceKeysOf returns the label and annotation keys the source of cur, a
// stored object, set: those recorded for it, else its own (stored objects
// are never changed, so their maps can be read without a copy).
func (a *agent[T]) sourceKeysOf(cur T) (labels, annotations iter.Seq[string]) {
	a.mu.Lock()
	h, ok := a.keys[cur.GetUID()]
	a.mu.Unlock()
	if ok {
		k := h.Value()
		return splitKeys(k.labels), splitKeys(k.annotations)
	}
	return maps.Keys(cur.GetLabels()), maps.Keys(cur.GetAnnotations())
}

// setSourceKeys records the keys of in, a spec the agent stored, as its
// source's, if the stored object has keys of the agent's too (local).
func (a *agent[T]) setSourceKeys(in T, local bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if local {
		a.keys[in.GetUID()] = unique.Make(newSourceKeys(in.GetLabels(), in.GetAnnotations()))
	} else {
		delete(a.keys, in.GetUID())
	}
}

// keepSourceKeys records cur's keys as its source's before the agent
// changes them, unless they are recorded already. It runs within the
// store's write of the change, so upsert never reads the agent's keys as
// the source's.
func (a *agent[T]) keepSourceKeys(cur T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.keys[cur.GetUID()]; !ok {
		a.keys[cur.GetUID()] = unique.Make(newSourceKeys(cur.GetLabels(), cur.GetAnnotations()))
	}
}

// sameKeys reports whether a and b have the same keys.
func sameKeys(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// forget drops what the agent knows of an object it no longer holds.
func (a *agent[T]) forget(uid kubetypes.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.keys, uid)
}

// mergeSourceKeys returns cur with the source's entries set and the keys
// the source set before (prev) but sends no more removed; other keys stay.
// changed reports whether that differs from cur, which is not modified.
func mergeSourceKeys(cur, source map[string]string, prev iter.Seq[string]) (merged map[string]string, changed bool) {
	for k, v := range source {
		if have, ok := cur[k]; !ok || have != v {
			changed = true
			break
		}
	}
	dropped := 0
	for k := range prev {
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
	for k := range prev {
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

// markDeleted shows a source's deletion to the agent's controllers, and
// completes it at once if nothing holds the object.
func (a *agent[T]) markDeleted(ctx context.Context, in T) error {
	cur, ok := a.st.PeekUID(in.GetUID())
	if !ok {
		// Never had it, or already gone: say so, so the source forgets
		// it. What an agent held before it restarted it holds again by now
		// (restore), if it keeps a state.
		a.sendDeleted(ctx, in)
		return nil
	}
	_, err := a.change(ctx, cur.GetNamespace(), cur.GetName(), a.onCopy(func(c T) (T, error) {
		if c.GetUID() != in.GetUID() || (c.GetDeletionTimestamp() != nil && c.GetGeneration() >= in.GetGeneration()) {
			return c, store.ErrNoChange
		}
		if c.GetDeletionTimestamp() == nil {
			ts := in.GetDeletionTimestamp()
			if ts == nil {
				now := metav1.Now()
				ts = &now
			}
			c.SetDeletionTimestamp(ts)
		}
		c.SetGeneration(max(c.GetGeneration(), in.GetGeneration()))
		return c, nil
	}))
	if err := ignoreNotFound(err); err != nil {
		return err
	}
	a.completeDeletion(ctx, in.GetUID())
	return nil
}

// completeDeletion removes an object the source deleted once its
// finalizers are gone, from the store and then the state, and reports it
// deleted.
func (a *agent[T]) completeDeletion(ctx context.Context, uid kubetypes.UID) {
	obj, ok := a.st.PeekUID(uid)
	if !ok || obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return
	}
	mu := a.lock(obj.GetName())
	// gone is the removed object itself; sendDeleted copies it.
	gone, err := a.st.Remove(obj.GetNamespace(), obj.GetName(), func(cur T) error {
		if cur.GetUID() != uid || cur.GetDeletionTimestamp() == nil || len(cur.GetFinalizers()) > 0 {
			return errNotRemovable
		}
		return nil
	})
	if err == nil && a.state != nil {
		// Past the caller's cancellation: the object is gone from the
		// store. An entry left behind comes back at the next start as
		// deleted and without finalizers, and is reported deleted again.
		if derr := a.state.Delete(context.WithoutCancel(ctx), gone.GetName()); derr != nil {
			a.onError(ctx, derr, "cannot remove a deleted object from the agent's state", a.pub.noun, key(gone))
		}
	}
	mu.Unlock()
	if err != nil {
		return
	}
	a.forget(uid)
	a.mu.Lock()
	delete(a.specSpans, gone.GetName())
	a.mu.Unlock()
	a.sendDeleted(ctx, gone)
}

// sendDeleted publishes obj's last status: what it was, and deleted,
// unless the kind's status cannot say so (its source does not wait for
// it).
func (a *agent[T]) sendDeleted(ctx context.Context, obj T) {
	if a.kind.MarkDeleted == nil {
		return
	}
	final := a.kind.Copy(obj)
	a.kind.MarkDeleted(final)
	a.pub.enqueue(ctx, final)
}

// publish is the publisher's send: a status event for obj, as the data
// type obj came as (the zero DataType: the client knows it).
func (a *agent[T]) publish(ctx context.Context, obj T) error {
	return a.client.Publish(ctx, types.EventType{SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, obj)
}

// Connected implements generic.ConnectionWatcher.
func (a *agent[T]) Connected() { a.pub.connected() }

// List implements generic.Lister: the objects of one source, or of all, of
// every data type (the client keeps those of the data type it lists).
func (a *agent[T]) List(opts generic.ListOptions) ([]T, error) {
	var out []T
	a.st.Range(a.cluster, func(obj T) bool {
		if opts.Source != "" && sourceOf(obj) != opts.Source {
			return true
		}
		out = append(out, obj)
		return true
	})
	return out, nil
}

// Sources implements generic.SourceLister.
func (a *agent[T]) Sources(string) ([]string, error) {
	seen := map[string]struct{}{}
	a.st.Range(a.cluster, func(obj T) bool {
		if s := sourceOf(obj); s != "" {
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
