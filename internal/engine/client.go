package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/workwire/sdk-go/internal/store"
)

// backend is what differs between a hub's client and an agent's: the
// writes. Reads come from the store either way.
type backend[T Object] interface {
	objects() *store.Store[T]
	create(ctx context.Context, namespace string, obj T, opts metav1.CreateOptions) (T, error)
	update(ctx context.Context, namespace string, obj T, opts metav1.UpdateOptions) (T, error)
	updateStatus(ctx context.Context, namespace string, obj T, opts metav1.UpdateOptions) (T, error)
	delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	deleteCollection(ctx context.Context, namespace string, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, subresource string) (T, error)
	// traceParent returns ctx with the span a write of the named object
	// continues: ctx's own if it has one.
	traceParent(ctx context.Context, namespace, name string) context.Context
}

// Namespaced is a client-go style typed client of one namespace (a
// cluster): what a package's clientset hands out, less the list type. It
// is goroutine-safe; no method returns a nil error with a zero object.
type Namespaced[T Object] struct {
	e         *Events[T]
	namespace string
	stored    bool // List and Watch hand out the stored objects (see Events.StoredClient)
}

type spanNames struct{ create, update, updateStatus, delete, patch string }

func newSpanNames(kind string) *spanNames {
	return &spanNames{create: "create " + kind, update: "update " + kind, updateStatus: "update status " + kind,
		delete: "delete " + kind, patch: "patch " + kind}
}

// startSpan starts the span of a write: the parent of the span that sends
// it (see generic.WithTracerProvider).
func (c *Namespaced[T]) startSpan(ctx context.Context, name, objName string) (context.Context, trace.Span) {
	ctx, span := c.e.tracer.Start(c.e.b.traceParent(ctx, c.namespace, objName), name)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("k8s.namespace.name", c.namespace), attribute.String(c.e.attr, objName))
	}
	return ctx, span
}

// endSpan ends span, recording err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (c *Namespaced[T]) isNil(obj T) error {
	if IsNil(obj) {
		return apierrors.NewBadRequest(c.e.noun + " is nil")
	}
	return nil
}

// Create creates obj (a hub; MethodNotAllowed on an agent).
func (c *Namespaced[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	if err := c.isNil(obj); err != nil {
		var zero T
		return zero, err
	}
	ctx, span := c.startSpan(ctx, c.e.spanNames.create, obj.GetName())
	out, err := c.e.b.create(ctx, c.namespace, obj, opts)
	endSpan(span, err)
	return out, err
}

// Update updates obj: its spec and metadata on a hub, its metadata on an
// agent.
func (c *Namespaced[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	if err := c.isNil(obj); err != nil {
		var zero T
		return zero, err
	}
	ctx, span := c.startSpan(ctx, c.e.spanNames.update, obj.GetName())
	out, err := c.e.b.update(ctx, c.namespace, obj, opts)
	endSpan(span, err)
	return out, err
}

// UpdateStatus updates obj's status (an agent; MethodNotAllowed on a hub).
func (c *Namespaced[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	if err := c.isNil(obj); err != nil {
		var zero T
		return zero, err
	}
	ctx, span := c.startSpan(ctx, c.e.spanNames.updateStatus, obj.GetName())
	out, err := c.e.b.updateStatus(ctx, c.namespace, obj, opts)
	endSpan(span, err)
	return out, err
}

// Delete deletes the named object (a hub; MethodNotAllowed on an agent).
func (c *Namespaced[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	ctx, span := c.startSpan(ctx, c.e.spanNames.delete, name)
	err := c.e.b.delete(ctx, c.namespace, name, opts)
	endSpan(span, err)
	return err
}

// DeleteCollection deletes every matching object on a hub, as the
// kube-apiserver does: each through Delete, as if deleted on its own. On an
// agent it is MethodNotAllowed, as Delete is.
func (c *Namespaced[T]) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return c.e.b.deleteCollection(ctx, c.namespace, opts, listOpts)
}

// Get returns a copy of the named object.
func (c *Namespaced[T]) Get(_ context.Context, name string, _ metav1.GetOptions) (T, error) {
	return c.e.b.objects().Get(c.namespace, name)
}

// List returns copies of the objects opts select.
func (c *Namespaced[T]) List(_ context.Context, opts metav1.ListOptions) (List[T], error) {
	return list(c.e.b.objects(), c.namespace, opts, c.stored)
}

// Watch watches the objects opts select.
func (c *Namespaced[T]) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchObjects(c.e.b.objects(), c.namespace, opts, c.stored, c.e.kind.New)
}

// Patch patches the named object, or its status (subresource "status").
func (c *Namespaced[T]) Patch(ctx context.Context, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	var zero T
	sub := ""
	switch len(subresources) {
	case 0:
	case 1:
		sub = subresources[0]
	default:
		return zero, apierrors.NewBadRequest("at most one subresource may be patched")
	}
	if sub != "" && sub != "status" {
		return zero, apierrors.NewNotFound(schema.GroupResource{Group: c.e.kind.Resource.Group, Resource: c.e.kind.Resource.Resource + "/" + sub}, name)
	}
	ctx, span := c.startSpan(ctx, c.e.spanNames.patch, name)
	out, err := c.e.b.patch(ctx, c.namespace, name, pt, data, opts, sub)
	endSpan(span, err)
	return out, err
}
