package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/store"
)

// mirror is the agent side of a type the hub keeps whole (registration's
// types: ManagedClusters, CSRs, Leases): the store holds the
// hub's objects as the hub sends them, status included, and a write is
// the agent's request to the hub's Service (generic.AgentClient.Publish),
// whose answer is the write's; the written object comes back as the hub's
// next event. The store gives objects resourceVersions of its own, for its
// watches; the hub's, which a request carries for the hub's optimistic
// lock, are kept beside them.
type mirror[T Object] struct {
	kind    *Kind[T]
	st      *store.Store[T]
	patcher *patcher[T]
	client  *generic.AgentClient[T]

	mu    sync.Mutex
	hubRV map[kubetypes.UID]string
}

var _ backend[Object] = (*mirror[Object])(nil)

func (m *mirror[T]) objects() *store.Store[T] { return m.st }

func (m *mirror[T]) traceParent(ctx context.Context, _, _ string) context.Context { return ctx }

// onSpec is the agent client's handler: the hub's object, or its deletion.
func (m *mirror[T]) onSpec(_ context.Context, _ types.EventType, in T) error {
	uid := in.GetUID()
	// A deletion — without data, naming its object by UID, or of an object
	// no finalizer holds — leaves the object gone.
	if in.GetDeletionTimestamp() != nil && (in.GetName() == "" || len(in.GetFinalizers()) == 0) {
		if cur, ok := m.st.PeekUID(uid); ok {
			if _, err := m.st.Remove(cur.GetNamespace(), cur.GetName(), nil); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		m.mu.Lock()
		delete(m.hubRV, uid)
		m.mu.Unlock()
		return nil
	}
	hubRV := in.GetResourceVersion()
	if cur, ok := m.st.Peek(in.GetNamespace(), in.GetName()); ok {
		if cur.GetUID() == uid {
			if _, err := m.st.Swap(cur, in); err != nil {
				return err // changed meanwhile: the event is handled again
			}
			m.setHubRV(uid, hubRV)
			return nil
		}
		// The hub created it again: the new one replaces the old.
		if _, err := m.st.Remove(cur.GetNamespace(), cur.GetName(), nil); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		m.mu.Lock()
		delete(m.hubRV, cur.GetUID())
		m.mu.Unlock()
	}
	if err := m.st.Put(in); err != nil {
		return err
	}
	m.setHubRV(uid, hubRV)
	return nil
}

func (m *mirror[T]) setHubRV(uid kubetypes.UID, rv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hubRV[uid] = rv
}

// List implements generic.Lister: every object, at the hub's versions, for
// the agent's spec resync.
func (m *mirror[T]) List(generic.ListOptions) ([]T, error) {
	var out []T
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.Range("", func(obj T) bool {
		o := m.kind.Shallow(obj)
		o.SetResourceVersion(m.hubRV[obj.GetUID()])
		out = append(out, o)
		return true
	})
	return out, nil
}

func (m *mirror[T]) create(ctx context.Context, namespace string, obj T, opts metav1.CreateOptions) (T, error) {
	var zero T
	if err := sameNamespace(namespace, obj.GetNamespace()); err != nil {
		return zero, err
	}
	req := m.kind.Copy(obj)
	req.SetNamespace(namespace)
	req.SetResourceVersion("")
	if !isDryRun(opts.DryRun) {
		if err := m.request(ctx, types.SubResourceSpec, types.CreateRequest, req); err != nil {
			return zero, err
		}
	}
	return req, nil
}

func (m *mirror[T]) update(ctx context.Context, namespace string, obj T, opts metav1.UpdateOptions) (T, error) {
	return m.write(ctx, namespace, obj, isDryRun(opts.DryRun), types.SubResourceSpec)
}

func (m *mirror[T]) updateStatus(ctx context.Context, namespace string, obj T, opts metav1.UpdateOptions) (T, error) {
	return m.write(ctx, namespace, obj, isDryRun(opts.DryRun), types.SubResourceStatus)
}

// write asks the hub to update obj from the version the caller read: the
// store's resourceVersion, which it checks here, then the hub's, which the
// hub checks.
func (m *mirror[T]) write(ctx context.Context, namespace string, obj T, dryRun bool, sub types.SubResource) (T, error) {
	var zero T
	if err := sameNamespace(namespace, obj.GetNamespace()); err != nil {
		return zero, err
	}
	cur, ok := m.st.Peek(namespace, obj.GetName())
	if !ok {
		return zero, apierrors.NewNotFound(m.kind.Resource, obj.GetName())
	}
	if err := m.kind.checkPreconditions(cur, string(obj.GetUID()), obj.GetResourceVersion()); err != nil {
		return zero, err
	}
	req := m.kind.Copy(obj)
	req.SetNamespace(namespace)
	req.SetUID(cur.GetUID())
	m.mu.Lock()
	req.SetResourceVersion(m.hubRV[cur.GetUID()])
	m.mu.Unlock()
	if !dryRun {
		if err := m.request(ctx, sub, types.UpdateRequest, req); err != nil {
			return zero, err
		}
	}
	out := m.kind.Copy(obj)
	out.SetResourceVersion(cur.GetResourceVersion())
	return out, nil
}

func (m *mirror[T]) patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, sub string) (T, error) {
	what := types.SubResourceSpec
	if sub == "status" {
		what = types.SubResourceStatus
	}
	return patchObject(m.st, m.patcher, namespace, name, pt, data, opts, func(patched T) (T, error) {
		return m.write(ctx, namespace, patched, isDryRun(opts.DryRun), what)
	}, nil)
}

func (m *mirror[T]) delete(context.Context, string, string, metav1.DeleteOptions) error {
	return refused(m.kind.Resource, "a mirror cannot delete %s: the hub does")
}

func (m *mirror[T]) deleteCollection(context.Context, string, metav1.DeleteOptions, metav1.ListOptions) error {
	return refused(m.kind.Resource, "a mirror cannot delete a collection of %s: the hub deletes them")
}

// request sends obj to the hub's Service and returns its answer: a
// Kubernetes error the Service sent back (a Conflict, a Forbidden), which
// the gRPC transport hands over as the StatusError it was, as it is; any
// other failure as ServiceUnavailable.
func (m *mirror[T]) request(ctx context.Context, sub types.SubResource, action types.Action, obj T) error {
	err := m.client.Publish(ctx, types.EventType{SubResource: sub, Action: action}, obj)
	if err == nil {
		return nil
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	return apierrors.NewServiceUnavailable(err.Error())
}

// sameNamespace checks the object is for the namespace the request names:
// "" for a cluster-scoped object (a ManagedCluster, a CSR), which the hub
// keeps in no namespace.
func sameNamespace(namespace, objNamespace string) error {
	if objNamespace != "" && objNamespace != namespace {
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", objNamespace, namespace))
	}
	return nil
}
