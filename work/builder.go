package work

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1informers "open-cluster-management.io/api/client/work/informers/externalversions/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/engine"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/pending"
	"github.com/workwire/sdk-go/resource/agentstate"
)

// Defaults of the builder.
const (
	// DefaultInformerResync is the resync period of the informer factory.
	DefaultInformerResync = 10 * time.Minute
	// DefaultOrphanGracePeriod is how long a hub keeps orphans after it
	// starts: its store is in memory, and its controllers need a moment to
	// create their works again after a restart.
	DefaultOrphanGracePeriod = 2 * time.Minute // the engine's, which package resource's holders use too; a test keeps them equal
	// DefaultMaxWorkBytes is the largest work a hub holder takes
	// (WithMaxWorkBytes): 1.5 MiB, etcd's default --max-request-bytes, over
	// which a kube-apiserver cannot store a ManifestWork either.
	DefaultMaxWorkBytes = 1536 << 10
)

// TransportFunc makes the transport of one holder: for transports defined
// outside workwire, and for tests over options/memory. The holder owns and
// closes what it returns.
type TransportFunc = options.TransportFunc

// ClientHolderBuilder builds a ClientHolder. Its methods set one option
// each and return the builder; NewClientHolder checks them all.
//
// A hub holder answers Create, Update and Patch of a work whose manifests
// and metadata alone exceed DefaultMaxWorkBytes (WithMaxWorkBytes) with 413
// Request Entity Too Large, as a kube-apiserver refuses an object larger
// than it stores, and so does it when they exceed the transport's event size
// limit, if known (options.EventSizeLimiter, which workwire's transports
// implement), instead of storing a work it can never deliver. The latter
// needs the publishing codec to be one of package codec's, which carry
// manifests verbatim. Works too large by a measure only the transport can
// take are reported to the error handler when they fail to publish (see
// ClientHolderBuilder.WithErrorHandler).
type ClientHolderBuilder struct {
	config       any // as given to NewClientHolderBuilder
	kube         *rest.Config
	settings     engine.Settings // as package resource's builder keeps them
	codecs       []generic.Codec[*workv1.ManifestWork]
	resync       time.Duration
	maxWorkBytes int
	informerOpts []workinformers.SharedInformerOption
}

// NewClientHolderBuilder starts a builder for config, which says how the
// holder connects: to a kube-apiserver (a *rest.Config), which gives the
// ordinary clientset, or to a broker (an options.TransportConfig: an
// *mqtt.Config, *kafka.Config or *grpc.Config, or any transport through a
// TransportFunc), which gives the event-based one. Switching a controller
// is changing this one argument. NewClientHolder refuses any other value.
//
// The holder imports no transport itself, so a program links only those it
// configures: one over MQTT links neither Kafka's client nor gRPC.
func NewClientHolderBuilder(config any) *ClientHolderBuilder {
	b := &ClientHolderBuilder{config: config, resync: DefaultInformerResync, maxWorkBytes: DefaultMaxWorkBytes, settings: engine.Settings{Logger: klog.Background()}}
	switch c := config.(type) {
	case *rest.Config:
		b.kube = c
	case options.TransportConfig:
		b.settings.Transport = c
	}
	return b
}

// WithTracerProvider sets where the holder's spans go: one for every write
// through its clientset (Create, Update, UpdateStatus, Patch, Delete),
// parent of the client's span that sends it (see generic.WithTracerProvider),
// whose context the event carries to its peer. An agent's write without a
// span of its own continues the trace of the work's last spec, so a hub's
// Create, its send, the agent's handling, the agent's status and the hub's
// handling of it form one trace. Default: otel.GetTracerProvider(). Over a
// *rest.Config it has no effect (client-go's transport is the caller's).
func (b *ClientHolderBuilder) WithTracerProvider(tp trace.TracerProvider) *ClientHolderBuilder {
	b.settings.Tracing = tp
	return b
}

// WithSourceID makes a hub holder: a source with this ID, whose clientset
// creates, updates and deletes works for clusters (one per namespace). With
// a *rest.Config it has no effect, so switching a hub is one line.
func (b *ClientHolderBuilder) WithSourceID(id string) *ClientHolderBuilder {
	b.settings.SourceID = id
	return b
}

// WithClusterName makes an agent holder: the agent of this cluster, whose
// clientset receives works and updates their status. With a *rest.Config it
// only scopes the informer to the cluster's namespace.
func (b *ClientHolderBuilder) WithClusterName(name string) *ClientHolderBuilder {
	b.settings.ClusterName = name
	return b
}

// WithCodecs sets the codecs. A hub publishes with the first; both sides
// decode with any. Default: codec.NewManifestBundleCodec().
func (b *ClientHolderBuilder) WithCodecs(codecs ...generic.Codec[*workv1.ManifestWork]) *ClientHolderBuilder {
	b.codecs = codecs
	return b
}

// WithInformerResync sets the resync period of the informer factory.
// Default: DefaultInformerResync.
func (b *ClientHolderBuilder) WithInformerResync(d time.Duration) *ClientHolderBuilder {
	b.resync = d
	return b
}

// WithMaxWorkBytes sets the largest work a hub holder's Create, Update and
// Patch take, measured as its manifests (their bytes as given), name,
// namespace, labels and annotations; larger ones are refused with 413
// Request Entity Too Large naming both sizes. The default,
// DefaultMaxWorkBytes, is what a kube-apiserver over etcd's default
// --max-request-bytes stores, so a controller's works still fit when it
// switches back to one: raise it for a hub that will never run over a
// kube-apiserver, or over one whose etcd takes more. OCM's hub (its
// webhook's manifestLimit) and OCM's agents refuse works whose manifests
// alone exceed 500 KiB: a hub whose works go to OCM's agents keeps to them
// with 500 << 10. n must be positive. It has no effect on an agent holder,
// nor over a *rest.Config, where the kube-apiserver decides.
func (b *ClientHolderBuilder) WithMaxWorkBytes(n int) *ClientHolderBuilder {
	b.maxWorkBytes = n
	return b
}

// WithInformerOptions adds options of the informer factory, such as
// workinformers.WithNamespace or WithTweakListOptions. An agent's informer
// watches its cluster's namespace unless told otherwise. Over events,
// without options, the holder's informer is served from its store itself;
// with them it is client-go's own over the store, whose cache keeps a map
// of its own (about 130 B a work more).
func (b *ClientHolderBuilder) WithInformerOptions(opts ...workinformers.SharedInformerOption) *ClientHolderBuilder {
	b.informerOpts = append(b.informerOpts, opts...)
	return b
}

// WithSourceOptions adds options of the hub's generic.SourceClient, after
// the holder's own (generic.WithOrphanGracePeriod(DefaultOrphanGracePeriod)),
// so they win.
func (b *ClientHolderBuilder) WithSourceOptions(opts ...generic.SourceOption) *ClientHolderBuilder {
	b.settings.SourceOpts = append(b.settings.SourceOpts, opts...)
	return b
}

// WithAgentOptions adds options of the agent's generic.AgentClient.
func (b *ClientHolderBuilder) WithAgentOptions(opts ...generic.AgentOption) *ClientHolderBuilder {
	b.settings.AgentOpts = append(b.settings.AgentOpts, opts...)
	return b
}

// WithStatusResend makes an agent holder send a work's status once more, d
// after the first status it sends for each new generation of the work (not
// the first generation it holds), as the work then stands, and d after its
// Deleted status. Hubs built on OCM's
// sdk-go (open-cluster-management.io/sdk-go v1.3.0) need it: their source
// drops, and never asks again for, a status that arrives before their own
// store has the generation they just published, and keeps a work whose
// Deleted status arrives before their store has its deletion; an agent
// that answers within a few milliseconds hits both (measured on loopback:
// 24 of 500 updates, 7 of 500 deletes; OCM's own agent hits them too). A
// second is ample. It costs one status event per spec change. Default: 0,
// off; it has no effect on a hub holder.
func (b *ClientHolderBuilder) WithStatusResend(d time.Duration) *ClientHolderBuilder {
	b.settings.StatusResend = d
	return b
}

// WithAgentState makes an agent holder keep every work it holds in s, and
// start with what s holds: an agent that restarts over the same state
// still holds the works it held, so a source's delete made while it was
// down reaches its controllers (as a deletionTimestamp on a work that keeps
// their finalizers) and the source hears of it only once they are done.
// Each change of a work is in s before the holder's informer shows it and
// before the write that made it returns (see package agentstate). A
// production agent needs it: agentstate.NewSecrets keeps the state on the
// managed cluster. Default: none, and a restarted agent confirms at once
// the deletes of every work it no longer holds, whatever it applied for
// them. It is refused on a hub holder; over a *rest.Config it has no effect
// (the kube-apiserver keeps the works).
func (b *ClientHolderBuilder) WithAgentState(s agentstate.Store) *ClientHolderBuilder {
	b.settings.State = s
	return b
}

// WithErrorHandler sets where the holder's background failures go: a work
// (hub) or a status (agent) its publisher could not send, named by
// namespace/name — at once for a permanent error such as
// options.ErrTooLarge or generic.ErrEncode, after its retries for others.
// The holder's generic client gets it too, unless WithSourceOptions or
// WithAgentOptions set one of its own. Default:
// utilruntime.HandleErrorWithContext. The handler runs on a publisher
// goroutine and should not block.
func (b *ClientHolderBuilder) WithErrorHandler(h generic.ErrorHandler) *ClientHolderBuilder {
	b.settings.OnError = h
	return b
}

// WithLogger sets the logger of the holder, its client and its transport.
// Default: the logger of the context given to Start (klog.FromContext),
// which is klog.Background() unless the caller put one there.
func (b *ClientHolderBuilder) WithLogger(l logr.Logger) *ClientHolderBuilder {
	b.settings.Logger, b.settings.LoggerSet = l, true
	return b
}

// ClientHolder holds a workv1 clientset and an informer over it, and what
// they need to run: a store, a generic client and its transport. Build it
// with a ClientHolderBuilder, Start it, Close it.
type ClientHolder struct {
	clientset versioned.Interface
	factory   workinformers.SharedInformerFactory
	informer  workv1informers.ManifestWorkInformer
	events    *engine.Events[*workv1.ManifestWork] // nil over a kube-apiserver
	life      *engine.Lifecycle
}

// NewClientHolder checks the builder's settings and builds the holder. It
// does no network I/O.
func (b *ClientHolderBuilder) NewClientHolder() (*ClientHolder, error) {
	var errs []error
	switch {
	case engine.IsNil(b.config):
		errs = append(errs, fmt.Errorf("no config: %T is nil", b.config))
	case b.kube == nil && b.settings.Transport == nil:
		errs = append(errs, fmt.Errorf("config %T: want a *rest.Config or an options.TransportConfig (*mqtt.Config, *kafka.Config, *grpc.Config, a TransportFunc)", b.config))
	case b.kube == nil && (b.settings.SourceID == "") == (b.settings.ClusterName == ""):
		errs = append(errs, errors.New("set exactly one of WithSourceID (a hub) and WithClusterName (an agent)"))
	}
	for i, c := range b.codecs {
		if c == nil {
			errs = append(errs, fmt.Errorf("codec %d is nil", i))
		}
	}
	if b.maxWorkBytes <= 0 {
		errs = append(errs, fmt.Errorf("max work bytes %d: want more than 0 (default %d)", b.maxWorkBytes, DefaultMaxWorkBytes))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("work client holder: %w", errors.Join(errs...))
	}
	h := &ClientHolder{life: &engine.Lifecycle{}}
	informerClient := versioned.Interface(nil)
	if b.kube != nil {
		cs, err := versioned.NewForConfig(b.kube)
		if err != nil {
			return nil, fmt.Errorf("work client holder: %w", err)
		}
		h.clientset, informerClient = cs, cs
	} else {
		cs, err := b.buildEvents(h)
		if err != nil {
			return nil, fmt.Errorf("work client holder: %w", err)
		}
		// The informers cache the store's own objects: one copy of each
		// work per side (see engine.Events.StoredClient).
		h.clientset, informerClient = cs, cs.stored()
		h.life.Events = h.events
	}
	opts := b.informerOpts
	if b.settings.ClusterName != "" {
		opts = append([]workinformers.SharedInformerOption{workinformers.WithNamespace(b.settings.ClusterName)}, opts...)
	}
	h.factory = workinformers.NewSharedInformerFactoryWithOptions(informerClient, b.resync, opts...)
	if h.events != nil && len(b.informerOpts) == 0 {
		// The factory's informer of works, and so every lister it makes,
		// is served from the store itself: no second map of the works.
		// Options the factory keeps to itself (a namespace, list options,
		// a transform) need client-go's own informer over the store.
		h.factory.InformerFor(&workv1.ManifestWork{}, func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
			return h.events.Informer(b.settings.ClusterName, resync)
		})
	}
	h.informer = h.factory.Work().V1().ManifestWorks()
	h.informer.Informer() // registered now, so Start starts it
	h.life.StartInformers = h.factory.Start
	h.life.WaitForSync = func(ctx context.Context) error {
		for typ, ok := range h.factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("informer of %v did not sync: %w", typ, context.Cause(ctx))
			}
		}
		return nil
	}
	h.life.ShutdownInformers = h.factory.Shutdown
	return h, nil
}

func (b *ClientHolderBuilder) buildEvents(h *ClientHolder) (*clientset, error) {
	codecs := b.codecs
	if len(codecs) == 0 {
		codecs = []generic.Codec[*workv1.ManifestWork]{codec.NewManifestBundleCodec()}
	}
	unsupported, err := newUnsupportedClients()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := workv1.Install(scheme); err != nil {
		return nil, err
	}
	events, err := engine.New(engine.Config[*workv1.ManifestWork]{
		Settings:      b.settings,
		Kind:          manifestWorkKind(),
		Scheme:        scheme,
		Codecs:        codecs,
		CheckSize:     carriesManifestsVerbatim(codecs[0]),
		MaxBytes:      b.maxWorkBytes,
		MaxBytesWhy:   maxWorkBytesWhy(b.maxWorkBytes),
		SpanAttribute: "workwire.manifestwork",
	})
	if err != nil {
		return nil, err
	}
	h.events = events
	return &clientset{events: events, unsupported: unsupported}, nil
}

// maxWorkBytesWhy says in a refusal where a hub's limit of n bytes comes
// from, and what raises it.
func maxWorkBytesWhy(n int) string {
	if n == DefaultMaxWorkBytes {
		return "the most a kube-apiserver stores with etcd's default --max-request-bytes; WithMaxWorkBytes raises it"
	}
	return "set with WithMaxWorkBytes"
}

// carriesManifestsVerbatim reports whether c is one of package codec's,
// whose spec events carry the manifests' bytes as they are (what
// manifests.MinBytes measures).
func carriesManifestsVerbatim(c generic.Codec[*workv1.ManifestWork]) bool {
	switch c.(type) {
	case *codec.ManifestBundleCodec, *codec.ManifestCodec:
		return true
	}
	return false
}

// WorkInterface returns the clientset: over events, or the ordinary one
// over a kube-apiserver. It is goroutine-safe and never nil.
func (h *ClientHolder) WorkInterface() versioned.Interface { return h.clientset }

// ManifestWorkInformer returns the holder's ManifestWork informer. Start
// runs it; its lister serves from its own cache, like any informer's.
func (h *ClientHolder) ManifestWorkInformer() workv1informers.ManifestWorkInformer { return h.informer }

// Start connects (over events: until the transport is connected and
// subscribed, see options.Transport.Start) and starts the informers, and
// returns once their caches synced or ctx ends. It runs until Close.
func (h *ClientHolder) Start(ctx context.Context) error { return h.life.Start(ctx) }

// Stats returns a snapshot of the holder for gauges (see generic/metrics'
// Observer.Track): whether it is connected (Healthy), the events waiting
// for its client's workers, and the works it holds. It is goroutine-safe.
func (h *ClientHolder) Stats() generic.Stats {
	if h.events != nil {
		return h.events.Stats()
	}
	return generic.Stats{Connected: h.Healthy() == nil, Held: len(h.informer.Informer().GetStore().ListKeys())}
}

// Pending reports the works a hub's holder sent that no status at their
// generation acknowledged yet, named by namespace and name
// (pending.Reporter; serve it with pending.Handler). An agent's holder,
// or one over a kube-apiserver, reports none. It is goroutine-safe.
func (h *ClientHolder) Pending(q pending.Query) pending.Report {
	if h.events != nil {
		return h.events.Pending(q)
	}
	return pending.Report{Time: time.Now()}
}

// Healthy returns nil once Start returned nil, until Close, while the
// holder's transport is connected (over a kube-apiserver: from Start on;
// client-go reconnects by itself); otherwise an error wrapping
// generic.ErrNotStarted, generic.ErrClosed or options.ErrNotConnected that
// says why. It is goroutine-safe and does not block: wire it to a readiness
// probe, as examples/hub-controller does.
func (h *ClientHolder) Healthy() error {
	if err := h.life.Healthy(); err != nil {
		return fmt.Errorf("work client holder: %w", err)
	}
	return nil
}

// Close stops the informers, then the client and its transport, and waits
// for their goroutines or ctx. It is idempotent.
func (h *ClientHolder) Close(ctx context.Context) error { return h.life.Close(ctx) }
