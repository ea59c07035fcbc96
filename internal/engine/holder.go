package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	kubetypes "k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/informer"
	"github.com/workwire/sdk-go/internal/store"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/pending"
	"github.com/workwire/sdk-go/resource/agentstate"
)

// Defaults.
const (
	// DefaultOrphanGracePeriod is how long a hub keeps orphans after it
	// starts: its store is in memory, and its controllers need a moment to
	// create their objects again after a restart. work.DefaultOrphanGracePeriod
	// writes it out, so that its documentation shows it; a test keeps the
	// two equal.
	DefaultOrphanGracePeriod = 2 * time.Minute
	// publishWorkers is how many goroutines publish a holder's writes.
	publishWorkers = 16
)

// Settings are what the builders of package work and package resource
// set through their With… methods, whatever the type: each keeps one, and
// New checks it.
type Settings struct {
	Transport options.TransportConfig
	// SourceID makes a hub, ClusterName an agent; exactly one is set.
	SourceID, ClusterName string
	SourceOpts            []generic.SourceOption
	AgentOpts             []generic.AgentOption
	StatusResend          time.Duration // see work.ClientHolderBuilder.WithStatusResend
	// Mirror makes an agent a mirror of objects the hub keeps whole (see
	// mirror).
	Mirror bool
	// State keeps what an agent holds across its restarts; nil for none.
	State     agentstate.Store
	Logger    logr.Logger
	LoggerSet bool // Logger was given; otherwise Start's context's is taken
	OnError   generic.ErrorHandler
	Tracing   trace.TracerProvider
}

// Config is what Events needs: a builder's Settings, and what its package
// knows of the type.
type Config[T Object] struct {
	Settings
	Kind   *Kind[T]
	Scheme *runtime.Scheme // knows T, for the field manager of apply patches
	// Codecs: a hub publishes with the first; both sides decode with any.
	Codecs []generic.Codec[T]
	// CheckSize makes a hub refuse at once an object whose Kind.MinEventBytes
	// exceeds the transport's event size limit; set it only if the first
	// codec's events are at least that large.
	CheckSize bool
	// MaxBytes makes a hub refuse at once, whatever the codec, an object
	// whose Kind.MinEventBytes exceeds it (0: no limit); MaxBytesWhy ends
	// the refusal with where the limit comes from and what raises it.
	MaxBytes    int
	MaxBytesWhy string
	// SpanAttribute names the object in the spans of writes.
	SpanAttribute string
}

// Events is the event side of a holder: a store, a generic client over the
// transport, the side's backend and its publisher.
type Events[T Object] struct {
	kind      *Kind[T]
	noun      string // what errors call an object: its kind, lower-case
	b         backend[T]
	st        *store.Store[T]
	pub       *publisher[T] // nil for a mirror, which publishes on the caller's goroutine
	tracer    trace.Tracer
	spanNames *spanNames
	attr      string
	client    eventClient
	useLogger func(logr.Logger)           // nil if Config.LoggerSet
	restore   func(context.Context) error // nil but for an agent with a state
}

// eventClient is what Events runs of its generic client, a source's or an
// agent's.
type eventClient interface {
	Start(context.Context) error
	Close(context.Context) error
	Healthy() error
	Stats() generic.Stats
}

// New builds the event side. It does no network I/O.
func New[T Object](cfg Config[T]) (*Events[T], error) {
	var errs []error
	switch {
	case cfg.Transport == nil:
		errs = append(errs, errors.New("no transport"))
	case (cfg.SourceID == "") == (cfg.ClusterName == ""):
		errs = append(errs, errors.New("set exactly one of WithSourceID (a hub) and WithClusterName (an agent)"))
	case cfg.Mirror && cfg.SourceID != "":
		errs = append(errs, errors.New("a mirror is an agent's: set WithClusterName, not WithSourceID"))
	case cfg.State != nil && cfg.SourceID != "":
		errs = append(errs, errors.New("an agent state is an agent's: set WithClusterName, not WithSourceID"))
	case cfg.State != nil && cfg.Mirror:
		errs = append(errs, errors.New("a mirror keeps no agent state: its objects are the hub's, whole"))
	}
	if cfg.ClusterName != "" {
		// A hub sends a cluster what is in the cluster's namespace: a name
		// no namespace can have would start, report healthy and wait for
		// ever.
		if msgs := validation.IsDNS1123Label(cfg.ClusterName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("cluster name %q: it is the namespace of the cluster's objects on the hub: %s", cfg.ClusterName, strings.Join(msgs, "; ")))
		}
	}
	if len(cfg.Codecs) == 0 {
		errs = append(errs, errors.New("no codec"))
	}
	for i, c := range cfg.Codecs {
		if c == nil {
			errs = append(errs, fmt.Errorf("codec %d is nil", i))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	kind := cfg.Kind
	p, err := newPatcher(kind, cfg.Scheme)
	if err != nil {
		return nil, err
	}
	tr, err := cfg.Transport.NewTransport()
	if err != nil {
		return nil, err
	}
	st := store.New(kind.Resource, kind.Copy, kind.Share, store.DefaultHistory)
	onError := generic.ErrorHandler(utilruntime.HandleErrorWithContext)
	tracing := cfg.Tracing
	if tracing == nil {
		tracing = otel.GetTracerProvider()
	}
	clientOpts := []generic.Option{generic.WithTracerProvider(tracing)}
	if cfg.LoggerSet {
		clientOpts = append(clientOpts, generic.WithLogger(cfg.Logger))
	}
	if cfg.OnError != nil {
		onError = cfg.OnError
		clientOpts = append(clientOpts, generic.WithErrorHandler(cfg.OnError))
	}
	noun := strings.ToLower(kind.GVK.Kind)
	e := &Events[T]{kind: kind, noun: noun, st: st, tracer: tracing.Tracer(generic.TracerName), spanNames: newSpanNames(kind.GVK.Kind), attr: cfg.SpanAttribute}
	if e.attr == "" {
		e.attr = "workwire.name"
	}

	if cfg.SourceID != "" {
		hb := &hub[T]{kind: kind, sourceID: cfg.SourceID, st: st, patcher: p, dataType: cfg.Codecs[0].DataType(),
			log: cfg.Logger.WithValues("source", cfg.SourceID), reports: make(map[kubetypes.UID]bool)}
		if l, ok := tr.(options.EventSizeLimiter); ok && cfg.CheckSize {
			hb.limit = l
		}
		hb.maxBytes, hb.maxBytesWhy = cfg.MaxBytes, cfg.MaxBytesWhy
		opts := []generic.SourceOption{generic.WithOrphanGracePeriod(DefaultOrphanGracePeriod)}
		for _, o := range clientOpts {
			opts = append(opts, o)
		}
		opts = append(opts, cfg.SourceOpts...)
		client, err := generic.NewSourceClient(cfg.SourceID, tr, hb, kind.StatusHash, cfg.Codecs, opts...)
		if err != nil {
			_ = tr.Close(context.Background())
			return nil, err
		}
		if err := client.Subscribe(hb.onStatus); err != nil {
			_ = tr.Close(context.Background())
			return nil, err
		}
		hb.pub = newPublisher(noun, func(ctx context.Context, obj T) error { return hb.publish(ctx, client, obj) }, hb.log, onError)
		e.b, e.pub, e.client = hb, hb.pub, client
		if !cfg.LoggerSet {
			e.useLogger = func(l logr.Logger) { hb.log = l.WithValues("source", cfg.SourceID); hb.pub.log = hb.log }
		}
		return e, nil
	}
	var opts []generic.AgentOption
	for _, o := range clientOpts {
		opts = append(opts, o)
	}
	opts = append(opts, cfg.AgentOpts...)
	if cfg.Mirror {
		mb := &mirror[T]{kind: kind, st: st, patcher: p, hubRV: make(map[kubetypes.UID]string)}
		client, err := generic.NewAgentClient(cfg.ClusterName, tr, mb, kind.StatusHash, cfg.Codecs, opts...)
		if err != nil {
			_ = tr.Close(context.Background())
			return nil, err
		}
		mb.client = client
		if err := client.Subscribe(mb.onSpec); err != nil {
			_ = tr.Close(context.Background())
			return nil, err
		}
		e.b, e.client = mb, client
		return e, nil
	}
	ab := &agent[T]{kind: kind, cluster: cfg.ClusterName, st: st, patcher: p, onError: onError, state: cfg.State, seed: maphash.MakeSeed(),
		log: cfg.Logger.WithValues("cluster", cfg.ClusterName), keys: make(map[kubetypes.UID]unique.Handle[sourceKeys])}
	ab.specSpans = make(map[string]trace.SpanContext)
	client, err := generic.NewAgentClient(cfg.ClusterName, tr, ab, kind.StatusHash, cfg.Codecs, opts...)
	if err != nil {
		_ = tr.Close(context.Background())
		return nil, err
	}
	ab.client = client
	if err := client.Subscribe(ab.onSpec); err != nil {
		_ = tr.Close(context.Background())
		return nil, err
	}
	ab.pub = newPublisher(noun, ab.publish, ab.log, onError)
	if cfg.StatusResend > 0 {
		ab.pub.withResend(cfg.StatusResend, st.PeekUID)
	}
	e.b, e.pub, e.client = ab, ab.pub, client
	if cfg.State != nil {
		e.restore = ab.restore
	}
	if !cfg.LoggerSet {
		e.useLogger = func(l logr.Logger) { ab.log = l.WithValues("cluster", cfg.ClusterName); ab.pub.log = ab.log }
	}
	return e, nil
}

// Client returns the typed client of namespace: copies in, copies out.
func (e *Events[T]) Client(namespace string) *Namespaced[T] {
	return &Namespaced[T]{e: e, namespace: namespace}
}

// StoredClient is Client for the holder's own informers: its List and Watch
// hand out the store's objects themselves, so an informer's cache costs no
// copy of what the store holds. Its consumer must not change them —
// client-go's rule for every informer cache, which its cache mutation
// detector (KUBE_CACHE_MUTATION_DETECTOR) checks — for here a change would
// also reach what the holder publishes.
func (e *Events[T]) StoredClient(namespace string) *Namespaced[T] {
	c := e.Client(namespace)
	c.stored = true
	return c
}

// Informer returns an informer served from the store itself (see package
// informer): its cache costs no second map of what the store holds. It
// informs of namespace ("" for all), and its handlers resync every resync
// unless they ask otherwise.
func (e *Events[T]) Informer(namespace string, resync time.Duration) *informer.Informer[T] {
	return informer.New(e.st, namespace, resync, e.kind.Resource.String())
}

// Peek returns the stored object of uid, which the caller must not change.
func (e *Events[T]) Peek(uid kubetypes.UID) (T, bool) { return e.st.PeekUID(uid) }

// Stats is the client's, with the objects the store holds.
func (e *Events[T]) Stats() generic.Stats {
	s := e.client.Stats()
	s.Held = e.st.Len()
	return s
}

// Pending is the source client's report of the specs it waits for, each
// named by the namespace and name of the object the store holds: an
// agent's, or a source's with spec re-sends off, is empty.
func (e *Events[T]) Pending(q pending.Query) pending.Report {
	src, ok := e.client.(pending.Reporter)
	if !ok {
		return pending.Report{Time: time.Now()}
	}
	r := src.Pending(q)
	for i, s := range r.Specs {
		if obj, ok := e.st.PeekUID(kubetypes.UID(s.ResourceID)); ok {
			r.Specs[i].Name = obj.GetName()
			if ns := obj.GetNamespace(); ns != "" {
				r.Specs[i].Name = ns + "/" + obj.GetName()
			}
		}
	}
	return r
}

// Lifecycle runs a holder: the event side (nil over a kube-apiserver) and
// its informers, in order.
type Lifecycle struct {
	Events eventSide
	// StartInformers starts the informers, WaitForSync waits for their
	// caches (nil once they synced), ShutdownInformers stops them and waits.
	StartInformers    func(stop <-chan struct{})
	WaitForSync       func(ctx context.Context) error
	ShutdownInformers func()

	mu      sync.Mutex
	stop    chan struct{}
	started bool
	synced  bool // Start returned nil
	closed  bool
}

// eventSide is what a Lifecycle runs of an Events.
type eventSide interface {
	startEvents(context.Context) error
	closeEvents(context.Context) error
	healthyEvents() error
	setLogger(logr.Logger)
}

// startEvents starts the publisher, restores an agent's state, then starts
// the client (which connects).
func (e *Events[T]) startEvents(ctx context.Context) error {
	if e.pub != nil {
		e.pub.start(publishWorkers)
	}
	if e.restore != nil {
		if err := e.restore(ctx); err != nil {
			return err
		}
	}
	return e.client.Start(ctx)
}

// closeEvents stops the parts in order: the store's watches (informers are
// stopped by now), the publisher, the client.
func (e *Events[T]) closeEvents(ctx context.Context) error {
	e.st.Close()
	if e.pub != nil {
		e.pub.stop()
	}
	return e.client.Close(ctx)
}

func (e *Events[T]) healthyEvents() error { return e.client.Healthy() }

// setLogger takes Start's context's logger, unless Config.LoggerSet.
func (e *Events[T]) setLogger(l logr.Logger) {
	if e.useLogger != nil {
		e.useLogger(l)
	}
}

// Start connects (over events: until the transport is connected and
// subscribed) and starts the informers, and returns once their caches
// synced or ctx ends. It runs until Close.
func (l *Lifecycle) Start(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return generic.ErrClosed
	case l.started:
		l.mu.Unlock()
		return generic.ErrStarted
	}
	l.started = true
	l.stop = make(chan struct{})
	l.mu.Unlock()
	if l.Events != nil {
		if lg, err := logr.FromContext(ctx); err == nil {
			l.Events.setLogger(lg)
		}
		if err := l.Events.startEvents(ctx); err != nil {
			return err
		}
	}
	l.StartInformers(l.stop)
	if err := l.WaitForSync(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.synced = true
	l.mu.Unlock()
	return nil
}

// Healthy returns nil once Start returned nil, until Close, while the
// transport is connected (over a kube-apiserver: from Start on; client-go
// reconnects by itself); otherwise an error wrapping generic.ErrNotStarted,
// generic.ErrClosed or options.ErrNotConnected that says why.
func (l *Lifecycle) Healthy() error {
	l.mu.Lock()
	started, synced, closed := l.started, l.synced, l.closed
	l.mu.Unlock()
	switch {
	case closed:
		return generic.ErrClosed
	case !started:
		return generic.ErrNotStarted
	}
	if l.Events != nil {
		if err := l.Events.healthyEvents(); err != nil {
			return err
		}
	}
	if !synced {
		return fmt.Errorf("%w: starting", options.ErrNotConnected)
	}
	return nil
}

// Close stops the informers, then the event side, and waits for their
// goroutines or ctx. It is idempotent.
func (l *Lifecycle) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.stop != nil {
		close(l.stop)
	}
	l.mu.Unlock()
	l.ShutdownInformers()
	if l.Events != nil {
		return l.Events.closeEvents(ctx)
	}
	return nil
}
