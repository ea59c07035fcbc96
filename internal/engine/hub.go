package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/store"
	"github.com/workwire/sdk-go/options"
)

var (
	errDeleting     = errors.New("the object is being deleted: its spec cannot change")
	errNotRemovable = errors.New("the object is not ready to be removed")
	errSpecBySource = errors.New("the spec of an object is set by its source; an agent changes metadata and status only")
)

// hub is the source side: the store is the truth, writes publish specs, and
// statuses from agents land in the store.
//
// Deletion follows the protocol's handshake: Delete marks the object (a new
// generation with a deletionTimestamp) and publishes a delete_request; the
// object leaves the store when its agent reports it deleted (or at once if
// no agent ever reported on it, or the kind's status cannot say so), and
// once its finalizers are gone.
type hub[T Object] struct {
	kind     *Kind[T]
	sourceID string
	st       *store.Store[T]
	pub      *publisher[T]
	patcher  *patcher[T]
	dataType types.DataType
	log      logr.Logger
	// limit tells the largest event the transport sends; nil if the
	// transport does not tell or the kind has no lower bound of its events
	// (see checkSize).
	limit options.EventSizeLimiter
	// maxBytes is the largest object the hub takes, by the same measure; 0
	// for no limit. maxBytesWhy says where it comes from (Config.MaxBytes).
	maxBytes    int
	maxBytesWhy string

	mu      sync.Mutex
	reports map[kubetypes.UID]bool // present once an agent reported on the object; true once it reported it deleted
}

var (
	_ backend[Object]           = (*hub[Object])(nil)
	_ generic.ConnectionWatcher = (*hub[Object])(nil)
)

func (h *hub[T]) objects() *store.Store[T] { return h.st }

func (h *hub[T]) traceParent(ctx context.Context, _, _ string) context.Context { return ctx }

func (h *hub[T]) create(ctx context.Context, namespace string, in T, opts metav1.CreateOptions) (T, error) {
	var zero T
	if in.GetResourceVersion() != "" {
		// A kube-apiserver refuses it too (with this message): the object
		// was most likely read back from a store rather than built.
		return zero, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	obj := h.kind.Copy(in)
	if err := bindNamespace(namespace, obj); err != nil {
		return zero, err
	}
	generateName(obj)
	obj.SetUID(uuid.NewUUID())
	obj.SetGeneration(1)
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	if h.kind.SetStatus != nil {
		h.kind.SetStatus(obj, h.kind.New()) // status comes from agents
	}
	if err := h.kind.validate(obj); err != nil {
		return zero, err
	}
	if err := h.checkSize(obj.GetNamespace(), obj); err != nil {
		return zero, err
	}
	if isDryRun(opts.DryRun) {
		if _, exists := h.st.Peek(obj.GetNamespace(), obj.GetName()); exists {
			return zero, apierrors.NewAlreadyExists(h.kind.Resource, obj.GetName())
		}
		return obj, nil
	}
	out, err := h.st.Create(obj) // the store owns obj from here
	if err != nil {
		return zero, err
	}
	h.pub.enqueue(ctx, obj)
	return out, nil
}

// nextVersion is an update of cur to in, as the hub stores it: the client
// sets spec, labels, annotations, finalizers and owner references; status
// is ignored (agents own it). A change agents must see (spec, labels,
// annotations) is a new generation and is published. cur is a copy the
// caller owns; nextVersion changes and returns it.
func (h *hub[T]) nextVersion(cur, in T, manager string) (next T, publish bool, err error) {
	var zero T
	if err := h.kind.checkPreconditions(cur, string(in.GetUID()), in.GetResourceVersion()); err != nil {
		return zero, false, err
	}
	specChanged := !h.kind.SameSpec(cur, in)
	metaChanged := !equality.Semantic.DeepEqual(cur.GetLabels(), in.GetLabels()) || !equality.Semantic.DeepEqual(cur.GetAnnotations(), in.GetAnnotations())
	localChanged := !equality.Semantic.DeepEqual(cur.GetFinalizers(), in.GetFinalizers()) || !equality.Semantic.DeepEqual(cur.GetOwnerReferences(), in.GetOwnerReferences()) ||
		(len(in.GetManagedFields()) > 0 && !equality.Semantic.DeepEqual(cur.GetManagedFields(), in.GetManagedFields()))
	if !specChanged && !metaChanged && !localChanged {
		return cur, false, store.ErrNoChange
	}
	if cur.GetDeletionTimestamp() != nil && specChanged {
		return zero, false, apierrors.NewForbidden(h.kind.Resource, cur.GetName(), errDeleting)
	}
	live := cur
	if len(cur.GetManagedFields()) > 0 && len(in.GetManagedFields()) == 0 {
		live = h.kind.Copy(cur) // the field manager compares against it
	}
	in = h.kind.Copy(in) // the caller's object stays the caller's
	next = cur
	h.kind.SetSpec(next, in)
	next.SetLabels(in.GetLabels())
	next.SetAnnotations(in.GetAnnotations())
	next.SetFinalizers(in.GetFinalizers())
	next.SetOwnerReferences(in.GetOwnerReferences())
	if len(in.GetManagedFields()) > 0 {
		next.SetManagedFields(in.GetManagedFields())
	}
	if specChanged || metaChanged {
		next.SetGeneration(next.GetGeneration() + 1)
	}
	if err := h.kind.validate(next); err != nil {
		return zero, false, err
	}
	if len(in.GetManagedFields()) == 0 {
		next = h.patcher.track(live, next, manager)
	}
	return next, specChanged || metaChanged, nil
}

func (h *hub[T]) update(ctx context.Context, namespace string, in T, opts metav1.UpdateOptions) (T, error) {
	if err := h.kind.checkUpdate(h.st, namespace, in); err != nil {
		var zero T
		return zero, err
	}
	return h.write(ctx, namespace, in, isDryRun(opts.DryRun), opts.FieldManager)
}

// checkSize refuses an object larger than the hub takes (Config.MaxBytes),
// or whose spec event would surely be larger than the transport sends, with
// 413 as a kube-apiserver refuses an object larger than it stores, rather
// than storing an object that no kube-apiserver would, or that can never
// reach its agent. The measure is the kind's lower bound of the event's
// size (Kind.MinEventBytes), which is one of the object's too. An object
// under the transport's limit by it may still make a larger event (the
// envelope, a broker's own lower limit); the publisher reports those to the
// error handler. The refusal names each limit the object exceeds.
func (h *hub[T]) checkSize(namespace string, obj T) error {
	if h.kind.MinEventBytes == nil {
		return nil
	}
	limit := 0
	if h.limit != nil {
		limit = h.limit.MaxEventBytes()
	}
	if limit <= 0 && h.maxBytes <= 0 {
		return nil
	}
	n := h.kind.MinEventBytes(obj)
	var over []string
	if h.maxBytes > 0 && n > h.maxBytes {
		over = append(over, fmt.Sprintf("more than a hub takes (%d bytes: %s)", h.maxBytes, h.maxBytesWhy))
	}
	if limit > 0 && n > limit {
		over = append(over, fmt.Sprintf("more than the largest event the transport sends (%d bytes: its maxEventBytes, or a lower limit its broker announced)", limit))
	}
	if len(over) == 0 {
		return nil
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("%s %s/%s: its content alone is %d bytes, %s",
		h.pub.noun, namespace, obj.GetName(), n, strings.Join(over, ", and ")))
}

// write stores the update of the object named by in, publishes it if
// agents must see it, and completes a deletion it unblocks.
func (h *hub[T]) write(ctx context.Context, namespace string, in T, dryRun bool, manager string) (T, error) {
	var zero T
	if err := h.checkSize(namespace, in); err != nil {
		return zero, err
	}
	if dryRun {
		cur, err := h.st.Get(namespace, in.GetName())
		if err != nil {
			return zero, err
		}
		next, _, err := h.nextVersion(cur, in, manager)
		if errors.Is(err, store.ErrNoChange) {
			return cur, nil
		}
		return next, err
	}
	var published T
	var publish bool
	out, err := h.st.Update(namespace, in.GetName(), func(cur T) (T, error) {
		next, changed, err := h.nextVersion(cur, in, manager)
		if changed {
			published, publish = next, true // the store keeps next as it is: a safe snapshot
		}
		return next, err
	})
	if err != nil {
		return zero, err
	}
	if publish {
		h.pub.enqueue(ctx, published)
	}
	h.completeDeletion(out.GetUID())
	return out, nil
}

func (h *hub[T]) updateStatus(context.Context, string, T, metav1.UpdateOptions) (T, error) {
	var zero T
	return zero, refused(h.kind.Resource, "a source cannot update the status of %s: their agents report it")
}

func (h *hub[T]) patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, sub string) (T, error) {
	if sub == "status" {
		var zero T
		return zero, refused(h.kind.Resource, "a source cannot patch the status of %s: their agents report it")
	}
	dryRun := isDryRun(opts.DryRun)
	return patchObject(h.st, h.patcher, namespace, name, pt, data, opts,
		func(patched T) (T, error) {
			return h.write(ctx, namespace, patched, dryRun, opts.FieldManager)
		},
		func(applied T) (T, error) {
			return h.create(ctx, namespace, applied, metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager})
		})
}

func (h *hub[T]) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if isDryRun(opts.DryRun) {
		cur, err := h.st.Get(namespace, name)
		if err != nil {
			return err
		}
		return h.kind.deletePreconditions(cur, opts.Preconditions)
	}
	var (
		published T
		publish   bool
		uid       kubetypes.UID
	)
	err := h.st.Modify(namespace, name, func(cur T) (T, error) {
		uid = cur.GetUID()
		if err := h.kind.deletePreconditions(cur, opts.Preconditions); err != nil {
			return cur, err
		}
		if cur.GetDeletionTimestamp() != nil {
			return cur, store.ErrNoChange // already being deleted
		}
		now := metav1.Now()
		zero := int64(0)
		cur.SetDeletionTimestamp(&now)
		cur.SetDeletionGracePeriodSeconds(&zero)
		cur.SetGeneration(cur.GetGeneration() + 1) // agents must see the deletion: a new version
		published, publish = cur, true
		return cur, nil
	})
	if err != nil {
		return err
	}
	if publish {
		h.pub.enqueue(ctx, published)
	}
	h.completeDeletion(uid)
	return nil
}

// deleteCollection deletes the matching objects one by one through delete,
// as a kube-apiserver does: an object gone meanwhile is no error, and the
// first other error is returned as it is, after the others are tried.
func (h *hub[T]) deleteCollection(ctx context.Context, namespace string, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	l, err := list(h.st, namespace, listOpts, true) // only their names are read
	if err != nil {
		return err
	}
	var first error
	for _, obj := range l.Items {
		if err := h.delete(ctx, obj.GetNamespace(), obj.GetName(), opts); err != nil && !apierrors.IsNotFound(err) && first == nil {
			first = err
		}
	}
	return first
}

// completeDeletion removes an object being deleted once nothing holds it:
// no finalizers, and its agent confirmed (or no agent ever reported on it).
func (h *hub[T]) completeDeletion(uid kubetypes.UID) {
	obj, ok := h.st.PeekUID(uid)
	if !ok || obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return
	}
	h.mu.Lock()
	confirmed, reported := h.reports[uid]
	h.mu.Unlock()
	if reported && !confirmed && h.kind.Deleted != nil {
		return
	}
	_, err := h.st.Remove(obj.GetNamespace(), obj.GetName(), func(cur T) error {
		if cur.GetUID() != uid || cur.GetDeletionTimestamp() == nil || len(cur.GetFinalizers()) > 0 {
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
func (h *hub[T]) onStatus(_ context.Context, _ types.EventType, status T) error {
	cur, ok := h.st.PeekUID(status.GetUID())
	if !ok {
		h.log.V(4).Info("status of an object this source does not hold", "uid", status.GetUID(), "cluster", status.GetNamespace())
		return nil
	}
	if cur.GetNamespace() != status.GetNamespace() {
		// A status names its object by UID alone; only the object's own
		// cluster (the namespace the transport's route gave the status)
		// reports on it.
		h.log.Info("a status from another cluster than its object's; dropped", "uid", status.GetUID(), "cluster", status.GetNamespace(), "objectCluster", cur.GetNamespace())
		return nil
	}
	deleted := h.kind.Deleted != nil && h.kind.Deleted(status)
	h.mu.Lock()
	h.reports[status.GetUID()] = h.reports[status.GetUID()] || deleted
	h.mu.Unlock()
	if deleted {
		h.completeDeletion(status.GetUID())
		return nil
	}
	if h.kind.SetStatus == nil {
		return nil
	}
	// cur is the stored object, immutable: it is read and copied without
	// the store's lock, and swapped for its next version only if it is
	// still the one stored; else read again.
	for !h.kind.SameStatus(cur, status) {
		// The new version shares all but its status with the stored one.
		next := h.kind.Shallow(cur)
		h.kind.SetStatus(next, status) // status is the decoded event's: ours
		_, err := h.st.Swap(cur, next)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case !errors.Is(err, store.ErrChanged):
			return err
		}
		if cur, ok = h.st.PeekUID(status.GetUID()); !ok {
			return nil
		}
	}
	return nil
}

// publish is the publisher's send: a spec event for obj.
func (h *hub[T]) publish(ctx context.Context, client *generic.SourceClient[T], obj T) error {
	action := types.UpdateRequest
	switch {
	case obj.GetDeletionTimestamp() != nil:
		action = types.DeleteRequest
	case obj.GetGeneration() == 1:
		action = types.CreateRequest
	}
	return client.Publish(ctx, types.EventType{DataType: h.dataType, SubResource: types.SubResourceSpec, Action: action}, obj)
}

// Connected implements generic.ConnectionWatcher.
func (h *hub[T]) Connected() { h.pub.connected() }

// List implements generic.Lister: the objects of a cluster. Every object
// of the hub's store belongs to this source, under the data type it
// publishes.
func (h *hub[T]) List(opts generic.ListOptions) ([]T, error) {
	if !opts.DataType.IsZero() && opts.DataType != h.dataType {
		return nil, nil
	}
	if opts.Source != "" && opts.Source != h.sourceID {
		return nil, nil
	}
	var out []T
	h.st.Range(opts.ClusterName, func(obj T) bool {
		out = append(out, obj)
		return true
	})
	return out, nil
}
