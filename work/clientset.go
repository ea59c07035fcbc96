package work

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
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1alpha1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/store"
)

var manifestWorksResource = schema.GroupResource{Group: workv1.GroupName, Resource: "manifestworks"}

// backend is what differs between the hub's clientset and an agent's: the
// writes. Reads come from the store either way.
type backend interface {
	works() *store.Store[*workv1.ManifestWork]
	create(ctx context.Context, namespace string, w *workv1.ManifestWork, opts metav1.CreateOptions) (*workv1.ManifestWork, error)
	update(ctx context.Context, namespace string, w *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error)
	updateStatus(ctx context.Context, namespace string, w *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error)
	delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	deleteCollection(ctx context.Context, namespace string, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	patch(ctx context.Context, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, subresource string) (*workv1.ManifestWork, error)
	// traceParent returns ctx with the span a write of the named work
	// continues: ctx's own if it has one.
	traceParent(ctx context.Context, namespace, name string) context.Context
}

// clientset is the versioned.Interface the holder hands out.
type clientset struct {
	b           backend
	unsupported *unsupportedClients
	tracer      trace.Tracer
	// stored makes List and Watch hand out the store's objects instead of
	// copies: set only on the clientset of the holder's own informer
	// factory (see informerClientset).
	stored bool
}

// informerClientset is c for the holder's informer factory: its informers'
// caches hold the store's own objects, so each side of a holder keeps one
// copy of every work. Objects from a lister or an informer's handler
// must not be changed in place — client-go's rule for every informer
// cache, which its cache mutation detector (KUBE_CACHE_MUTATION_DETECTOR)
// checks — and here a change would also reach what the holder publishes.
func (c *clientset) informerClientset() *clientset {
	ic := *c
	ic.stored = true
	return &ic
}

var _ versioned.Interface = (*clientset)(nil)

func (c *clientset) Discovery() discovery.DiscoveryInterface { return c.unsupported.discovery }

func (c *clientset) WorkV1() workv1client.WorkV1Interface { return workV1{c} }

func (c *clientset) WorkV1alpha1() workv1alpha1client.WorkV1alpha1Interface {
	return c.unsupported.v1alpha1
}

type workV1 struct{ c *clientset }

func (v workV1) RESTClient() rest.Interface { return v.c.unsupported.v1.RESTClient() }

func (v workV1) AppliedManifestWorks() workv1client.AppliedManifestWorkInterface {
	return v.c.unsupported.v1.AppliedManifestWorks()
}

// ManifestWorks returns a fresh client per call, bound to namespace.
func (v workV1) ManifestWorks(namespace string) workv1client.ManifestWorkInterface {
	return &manifestWorks{namespace: namespace, b: v.c.b, tracer: v.c.tracer, stored: v.c.stored}
}

// manifestWorks implements the typed ManifestWork client.
type manifestWorks struct {
	namespace string
	b         backend
	tracer    trace.Tracer
	stored    bool // clientset.stored
}

// startSpan starts the span of a write: the parent of the span that sends
// it (see generic.WithTracerProvider).
func (m *manifestWorks) startSpan(ctx context.Context, verb, name string) (context.Context, trace.Span) {
	ctx, span := m.tracer.Start(m.b.traceParent(ctx, m.namespace, name), verb+" ManifestWork")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("k8s.namespace.name", m.namespace), attribute.String("workwire.manifestwork", name))
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

var _ workv1client.ManifestWorkInterface = (*manifestWorks)(nil)

func (m *manifestWorks) Create(ctx context.Context, w *workv1.ManifestWork, opts metav1.CreateOptions) (*workv1.ManifestWork, error) {
	if w == nil {
		return nil, apierrors.NewBadRequest("manifestwork is nil")
	}
	ctx, span := m.startSpan(ctx, "create", w.Name)
	out, err := m.b.create(ctx, m.namespace, w, opts)
	endSpan(span, err)
	return out, err
}

func (m *manifestWorks) Update(ctx context.Context, w *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error) {
	if w == nil {
		return nil, apierrors.NewBadRequest("manifestwork is nil")
	}
	ctx, span := m.startSpan(ctx, "update", w.Name)
	out, err := m.b.update(ctx, m.namespace, w, opts)
	endSpan(span, err)
	return out, err
}

func (m *manifestWorks) UpdateStatus(ctx context.Context, w *workv1.ManifestWork, opts metav1.UpdateOptions) (*workv1.ManifestWork, error) {
	if w == nil {
		return nil, apierrors.NewBadRequest("manifestwork is nil")
	}
	ctx, span := m.startSpan(ctx, "update status", w.Name)
	out, err := m.b.updateStatus(ctx, m.namespace, w, opts)
	endSpan(span, err)
	return out, err
}

func (m *manifestWorks) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	ctx, span := m.startSpan(ctx, "delete", name)
	err := m.b.delete(ctx, m.namespace, name, opts)
	endSpan(span, err)
	return err
}

// DeleteCollection deletes every matching work on a hub, as the
// kube-apiserver does: each through Delete, as if deleted on its own. On an
// agent it is MethodNotAllowed, as Delete is.
func (m *manifestWorks) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return m.b.deleteCollection(ctx, m.namespace, opts, listOpts)
}

func (m *manifestWorks) Get(_ context.Context, name string, _ metav1.GetOptions) (*workv1.ManifestWork, error) {
	return m.b.works().Get(m.namespace, name)
}

func (m *manifestWorks) List(_ context.Context, opts metav1.ListOptions) (*workv1.ManifestWorkList, error) {
	return listWorks(m.b.works(), m.namespace, opts, m.stored)
}

func (m *manifestWorks) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchWorks(m.b.works(), m.namespace, opts, m.stored)
}

func (m *manifestWorks) Patch(ctx context.Context, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*workv1.ManifestWork, error) {
	sub := ""
	switch len(subresources) {
	case 0:
	case 1:
		sub = subresources[0]
	default:
		return nil, apierrors.NewBadRequest("at most one subresource may be patched")
	}
	if sub != "" && sub != "status" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: workv1.GroupName, Resource: "manifestworks/" + sub}, name)
	}
	ctx, span := m.startSpan(ctx, "patch", name)
	out, err := m.b.patch(ctx, m.namespace, name, pt, data, opts, sub)
	endSpan(span, err)
	return out, err
}
