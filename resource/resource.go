// Package resource carries any Kubernetes resource type — a custom
// resource of your own, or one of the types registration carries — between
// sources and agents, as package work carries ManifestWorks: a holder
// hands out a client-go style typed client and a SharedIndexInformer over
// events, and the type needs nothing but its Go type, its list type and
// its scheme registration.
//
//	holder, err := resource.NewHolderBuilder[*v1.Widget, *v1.WidgetList](&mqtt.Config{BrokerHost: "broker:1883"}, scheme).
//		WithSourceID("hub1").NewHolder()
//	...
//	err = holder.Start(ctx)
//	widgets := holder.Resources("cluster1") // Create, Update, Patch, Delete, Get, List, Watch
//	lister := holder.Lister("cluster1")    // served from the informer's cache
//
// The rules are package work's (see its documentation), written once for
// every type: a hub's client writes specs and metadata, agents' statuses
// come back into its store; an agent's client writes statuses, which go to
// the source the object came from, and local metadata; deletion waits for
// the agent's Deleted condition if the type's status has conditions. The
// spec is every field of T but its TypeMeta, ObjectMeta and Status; the
// status is its field Status. Events carry the object's JSON
// (codec.ObjectCodec) under the data type "<group>.<version>.<resource>".
//
// Each side keeps one copy of each object: the informer's cache is the
// holder's store itself, so objects from the lister or an
// informer's handler must not be changed in place (DeepCopy first), as
// with any informer; KUBE_CACHE_MUTATION_DETECTOR=true catches it.
package resource

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/engine"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/pending"
	"github.com/workwire/sdk-go/resource/agentstate"
)

// Object is what a holder carries: a pointer to a struct that embeds
// metav1.TypeMeta and metav1.ObjectMeta.
type Object = codec.Object

// Client is a client-go style typed client of one namespace (a cluster),
// the shape of client-go's generated typed clients: a
// Client[*Widget, *WidgetList] serves where they are expected. Every
// method is goroutine-safe; none returns nil or panics.
type Client[T Object, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// DefaultInformerResync is the resync period of a holder's informer.
const DefaultInformerResync = 10 * time.Minute

// HolderBuilder builds a Holder. Its methods set one option each and
// return the builder; NewHolder checks them all.
type HolderBuilder[T Object, L runtime.Object] struct {
	settings engine.Settings // as package work's builder keeps them
	scheme   *runtime.Scheme
	resource string
	codecs   []generic.Codec[T]
	resync   time.Duration
}

// NewHolderBuilder starts a builder of a holder of T, whose list type is
// L, over the transport config makes (*mqtt.Config, *kafka.Config,
// *grpc.Config, or any options.TransportConfig). scheme must know T and L:
// it gives their group, version and kind.
func NewHolderBuilder[T Object, L runtime.Object](config options.TransportConfig, scheme *runtime.Scheme) *HolderBuilder[T, L] {
	return &HolderBuilder[T, L]{settings: engine.Settings{Transport: config, Logger: klog.Background()}, scheme: scheme, resync: DefaultInformerResync}
}

// WithSourceID makes a hub holder: a source with this ID, whose client
// creates, updates and deletes objects for clusters (one per namespace).
func (b *HolderBuilder[T, L]) WithSourceID(id string) *HolderBuilder[T, L] {
	b.settings.SourceID = id
	return b
}

// WithClusterName makes an agent holder: the agent of this cluster, whose
// client receives objects and updates their status.
func (b *HolderBuilder[T, L]) WithClusterName(name string) *HolderBuilder[T, L] {
	b.settings.ClusterName = name
	return b
}

// WithResource sets T's plural resource name, which names its data type.
// Default: the lower-case kind plus "s", as meta.UnsafeGuessKindToResource
// guesses it.
func (b *HolderBuilder[T, L]) WithResource(plural string) *HolderBuilder[T, L] {
	b.resource = plural
	return b
}

// WithCodecs sets the codecs. A hub publishes with the first; both sides
// decode with any. Default: codec.NewObjectCodec of T.
func (b *HolderBuilder[T, L]) WithCodecs(codecs ...generic.Codec[T]) *HolderBuilder[T, L] {
	b.codecs = codecs
	return b
}

// WithInformerResync sets the resync period of the informer. Default:
// DefaultInformerResync.
func (b *HolderBuilder[T, L]) WithInformerResync(d time.Duration) *HolderBuilder[T, L] {
	b.resync = d
	return b
}

// WithSourceOptions adds options of the hub's generic.SourceClient, after
// the holder's own (generic.WithOrphanGracePeriod of two minutes), so they
// win.
func (b *HolderBuilder[T, L]) WithSourceOptions(opts ...generic.SourceOption) *HolderBuilder[T, L] {
	b.settings.SourceOpts = append(b.settings.SourceOpts, opts...)
	return b
}

// WithAgentOptions adds options of the agent's generic.AgentClient.
func (b *HolderBuilder[T, L]) WithAgentOptions(opts ...generic.AgentOption) *HolderBuilder[T, L] {
	b.settings.AgentOpts = append(b.settings.AgentOpts, opts...)
	return b
}

// WithStatusResend makes an agent holder send an object's status once
// more, d after the first status of each new generation and d after its
// Deleted status (see work.ClientHolderBuilder.WithStatusResend). Default:
// 0, off.
func (b *HolderBuilder[T, L]) WithStatusResend(d time.Duration) *HolderBuilder[T, L] {
	b.settings.StatusResend = d
	return b
}

// WithAgentState makes an agent holder keep every object it holds in s, and
// start with what s holds, so that a delete made while the agent was down
// reaches its controllers (see work.ClientHolderBuilder.WithAgentState and
// package agentstate). Default: none. It is refused on a hub holder and on
// a mirror.
func (b *HolderBuilder[T, L]) WithAgentState(s agentstate.Store) *HolderBuilder[T, L] {
	b.settings.State = s
	return b
}

// Mirror makes an agent holder a mirror of objects the hub keeps whole,
// as the gRPC broker's registration Services do (registration/kubeservice,
// with codecs such as kubeservice.LeaseCodec): its informer holds the hub's
// objects as the hub sends them, status included; Create, Update,
// UpdateStatus and Patch ask the hub's Service, whose answer (a Conflict,
// a Forbidden) is theirs, and return the object asked for — what the hub
// stored arrives through the informer, as with OCM's agent clients. Delete
// is the hub's. Only over the gRPC broker with such Services.
func (b *HolderBuilder[T, L]) Mirror() *HolderBuilder[T, L] {
	b.settings.Mirror = true
	return b
}

// WithErrorHandler sets where the holder's background failures go (see
// work.ClientHolderBuilder.WithErrorHandler). Default:
// utilruntime.HandleErrorWithContext.
func (b *HolderBuilder[T, L]) WithErrorHandler(h generic.ErrorHandler) *HolderBuilder[T, L] {
	b.settings.OnError = h
	return b
}

// WithLogger sets the logger of the holder, its client and its transport.
// Default: the logger of the context given to Start.
func (b *HolderBuilder[T, L]) WithLogger(l logr.Logger) *HolderBuilder[T, L] {
	b.settings.Logger, b.settings.LoggerSet = l, true
	return b
}

// WithTracerProvider sets where the holder's spans go (see
// work.ClientHolderBuilder.WithTracerProvider). Default:
// otel.GetTracerProvider().
func (b *HolderBuilder[T, L]) WithTracerProvider(tp trace.TracerProvider) *HolderBuilder[T, L] {
	b.settings.Tracing = tp
	return b
}

// Holder holds a typed client and an informer over events, and what they
// need to run: a store, a generic client and its transport. Build it with
// a HolderBuilder, Start it, Close it.
type Holder[T Object, L runtime.Object] struct {
	events   *engine.Events[T]
	life     *engine.Lifecycle
	informer cache.SharedIndexInformer
	lister   listers.ResourceIndexer[T]
	newList  func() (L, error)
	listGVK  schema.GroupVersionKind
	wg       sync.WaitGroup // the informer's goroutine
}

// NewHolder checks the builder's settings and builds the holder. It does
// no network I/O.
func (b *HolderBuilder[T, L]) NewHolder() (*Holder[T, L], error) {
	h, err := b.build()
	if err != nil {
		return nil, fmt.Errorf("resource holder: %w", err)
	}
	return h, nil
}

func (b *HolderBuilder[T, L]) build() (*Holder[T, L], error) {
	if b.scheme == nil {
		return nil, errors.New("no scheme: it must know the type and its list")
	}
	var zero T
	typ := reflect.TypeOf(zero)
	if typ == nil || typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%v: want a pointer to a struct", typ)
	}
	gvks, _, err := b.scheme.ObjectKinds(reflect.New(typ.Elem()).Interface().(T))
	if err != nil {
		return nil, fmt.Errorf("the scheme does not know %T: %w", zero, err)
	}
	gvk := gvks[0]
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	newList := func() (L, error) {
		obj, err := b.scheme.New(listGVK)
		if err != nil {
			var none L
			return none, err
		}
		l, ok := obj.(L)
		if !ok {
			var none L
			return none, fmt.Errorf("the scheme's %v is %T, not %T", listGVK, obj, none)
		}
		return l, nil
	}
	if _, err := newList(); err != nil {
		return nil, fmt.Errorf("list type: %w", err)
	}
	resource := b.resource
	if resource == "" {
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		resource = plural.Resource
	}
	kind, err := engine.KindOf[T](gvk, resource)
	if err != nil {
		return nil, err
	}
	codecs := b.codecs
	if len(codecs) == 0 {
		c, err := codec.NewObjectCodec[T](gvk, resource)
		if err != nil {
			return nil, err
		}
		codecs = []generic.Codec[T]{c}
	}
	if engine.IsNil(b.settings.Transport) {
		return nil, errors.New("no transport config")
	}
	events, err := engine.New(engine.Config[T]{Settings: b.settings, Kind: &kind, Scheme: b.scheme, Codecs: codecs})
	if err != nil {
		return nil, err
	}
	h := &Holder[T, L]{events: events, newList: newList, listGVK: listGVK}
	// An agent's informer watches its cluster's namespace; a hub's and a
	// mirror's every namespace (a mirror holds what the hub sends it, of
	// no namespace if cluster-scoped).
	namespace := b.settings.ClusterName
	if b.settings.Mirror {
		namespace = metav1.NamespaceAll
	}
	// The informer is served from the store itself: no second map of the
	// objects.
	h.informer = events.Informer(namespace, b.resync)
	h.lister = listers.New[T](h.informer.GetIndexer(), kind.Resource)
	h.life = &engine.Lifecycle{
		Events: events,
		StartInformers: func(stop <-chan struct{}) {
			h.wg.Go(func() { h.informer.Run(stop) })
		},
		WaitForSync: func(ctx context.Context) error {
			if !cache.WaitForCacheSync(ctx.Done(), h.informer.HasSynced) {
				return fmt.Errorf("informer of %v did not sync: %w", gvk, context.Cause(ctx))
			}
			return nil
		},
		ShutdownInformers: h.wg.Wait,
	}
	return h, nil
}

// list makes an L of a page of objects.
func (h *Holder[T, L]) list(page engine.List[T]) (L, error) {
	l, err := h.newList()
	if err != nil {
		return l, err
	}
	items := make([]runtime.Object, len(page.Items))
	for i, obj := range page.Items {
		items[i] = obj
	}
	if err := meta.SetList(l, items); err != nil {
		return l, err
	}
	lm, err := meta.ListAccessor(l)
	if err != nil {
		return l, err
	}
	lm.SetResourceVersion(page.ListMeta.ResourceVersion)
	lm.SetContinue(page.ListMeta.Continue)
	lm.SetRemainingItemCount(page.ListMeta.RemainingItemCount)
	l.GetObjectKind().SetGroupVersionKind(h.listGVK)
	return l, nil
}

// Resources returns the typed client of namespace: the objects of one
// cluster. It is goroutine-safe and never nil.
func (h *Holder[T, L]) Resources(namespace string) Client[T, L] {
	return client[T, L]{Namespaced: h.events.Client(namespace), h: h}
}

// Informer returns the holder's informer: of every cluster on a hub, of
// its cluster on an agent. Start runs it. Handlers may be added before or
// after Start, as with any SharedIndexInformer.
func (h *Holder[T, L]) Informer() cache.SharedIndexInformer { return h.informer }

// Lister returns a lister of namespace's objects ("" for every namespace)
// over the informer's cache.
func (h *Holder[T, L]) Lister(namespace string) listers.ResourceIndexer[T] {
	if namespace == "" {
		return h.lister
	}
	return listers.NewNamespaced(h.lister, namespace)
}

// Start connects (until the transport is connected and subscribed) and
// starts the informer, and returns once its cache synced or ctx ends. It
// runs until Close.
func (h *Holder[T, L]) Start(ctx context.Context) error { return h.life.Start(ctx) }

// Healthy returns nil once Start returned nil, until Close, while the
// transport is connected; otherwise an error wrapping
// generic.ErrNotStarted, generic.ErrClosed or options.ErrNotConnected. It
// is goroutine-safe and does not block.
func (h *Holder[T, L]) Healthy() error {
	if err := h.life.Healthy(); err != nil {
		return fmt.Errorf("resource holder: %w", err)
	}
	return nil
}

// Stats returns a snapshot of the holder for gauges (see generic/metrics'
// Observer.Track). It is goroutine-safe.
func (h *Holder[T, L]) Stats() generic.Stats { return h.events.Stats() }

// Pending reports the objects a source's holder sent that no status at
// their version acknowledged yet, named by namespace and name
// (pending.Reporter; serve it with pending.Handler). An agent's holder
// reports none. It is goroutine-safe.
func (h *Holder[T, L]) Pending(q pending.Query) pending.Report { return h.events.Pending(q) }

// Close stops the informer, then the client and its transport, and waits
// for their goroutines or ctx. It is idempotent.
func (h *Holder[T, L]) Close(ctx context.Context) error { return h.life.Close(ctx) }

// client is a Client: the engine's typed client, with L for lists.
type client[T Object, L runtime.Object] struct {
	*engine.Namespaced[T]
	h *Holder[T, L]
}

func (c client[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	page, err := c.Namespaced.List(ctx, opts)
	if err != nil {
		var none L
		return none, err
	}
	return c.h.list(page)
}
