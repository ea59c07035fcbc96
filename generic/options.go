package generic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// Defaults of the client options.
const (
	// DefaultWorkers is how many goroutines run handlers and answer resyncs.
	DefaultWorkers = 4
	// DefaultResyncInterval is how often a client resyncs on its own, on top
	// of resyncing at start and on every reconnect. Brokers drop events when a
	// subscriber falls behind; the periodic resync heals that.
	DefaultResyncInterval = 5 * time.Minute
	// DefaultPublishQPS and DefaultPublishBurst limit Publish, so a runaway
	// controller cannot flood a broker shared with other tenants, while
	// leaving a healthy hub's burst of creates (thousands per second)
	// alone. Brokers that cap each connection lower — cloud IoT brokers
	// allow on the order of 100 publishes/s per connection — need
	// WithPublishRateLimit set to their cap. Resync answers are not
	// limited: they are bounded by what the peer asked for.
	DefaultPublishQPS   = 10000
	DefaultPublishBurst = 1000
	// DefaultMaxRetries is how many times a failing handler is retried.
	DefaultMaxRetries = 5
	// DefaultResyncSessionTTL is how long a client waits for all batches of
	// one resync request before forgetting it.
	DefaultResyncSessionTTL = time.Minute
	// DefaultSpecResendAfter is the least time a source waits for an
	// agent's status at a spec's version before it sends the spec again
	// (WithSpecResend). A healthy agent reports within a second, so a
	// healthy fleet never pays for it.
	DefaultSpecResendAfter = 30 * time.Second // this and the next two are internal/ack's, which the gRPC broker uses too; a test keeps them equal
	// SpecResendMax bounds the time between two re-sends of one spec.
	SpecResendMax = 10 * time.Minute
	// SpecResendPerRound bounds the specs sent again to one agent at once;
	// rounds run every quarter of the resend delay.
	SpecResendPerRound = 500
)

// ErrorHandler receives failures that happen in the background (a handler
// error, a failed resync answer). The default is
// k8s.io/apimachinery/pkg/util/runtime.HandleErrorWithContext.
type ErrorHandler func(ctx context.Context, err error, msg string, keysAndValues ...any)

type config struct {
	logger         logr.Logger
	loggerSet      bool // by WithLogger; otherwise Start's context's is taken
	tracerProvider trace.TracerProvider
	errorHandler   ErrorHandler
	observer       Observer
	workers        int
	resyncInterval time.Duration
	publishQPS     float64
	publishBurst   int
	maxRetries     int
	sessionTTL     time.Duration
	deliveryCheck  time.Duration
}

func defaultConfig() config {
	return config{
		logger:         klog.Background(),
		tracerProvider: otel.GetTracerProvider(),
		errorHandler:   utilruntime.HandleErrorWithContext,
		observer:       NopObserver{},
		workers:        DefaultWorkers,
		resyncInterval: DefaultResyncInterval,
		publishQPS:     DefaultPublishQPS,
		publishBurst:   DefaultPublishBurst,
		maxRetries:     DefaultMaxRetries,
		sessionTTL:     DefaultResyncSessionTTL,
		deliveryCheck:  DefaultDeliveryCheck,
	}
}

func (c *config) validate() error {
	var errs []error
	if c.workers < 1 {
		errs = append(errs, fmt.Errorf("workers: %d, want at least 1", c.workers))
	}
	if c.resyncInterval < 0 {
		errs = append(errs, fmt.Errorf("resync interval: %v, want 0 (off) or more", c.resyncInterval))
	}
	if c.publishQPS < 0 || (c.publishQPS > 0 && c.publishBurst < 1) {
		errs = append(errs, fmt.Errorf("publish rate limit: qps %v burst %d, want qps 0 (off), or qps > 0 and burst >= 1", c.publishQPS, c.publishBurst))
	}
	if c.maxRetries < 0 {
		errs = append(errs, fmt.Errorf("max retries: %d, want 0 or more", c.maxRetries))
	}
	if c.sessionTTL <= 0 {
		errs = append(errs, fmt.Errorf("resync session TTL: %v, want more than 0", c.sessionTTL))
	}
	if c.deliveryCheck < 0 {
		errs = append(errs, fmt.Errorf("delivery check: %v, want 0 (off) or more", c.deliveryCheck))
	}
	if c.observer == nil {
		errs = append(errs, errors.New("observer is nil"))
	}
	if c.errorHandler == nil {
		errs = append(errs, errors.New("error handler is nil"))
	}
	return errors.Join(errs...)
}

type sourceConfig struct {
	config
	orphanDeletion OrphanDeletion
	orphanGrace    time.Duration
	resendAfter    time.Duration
	window         int
}

type agentConfig struct {
	config
	agentID string
}

// SourceOption configures a source client.
type SourceOption interface{ applySource(*sourceConfig) }

// AgentOption configures an agent client.
type AgentOption interface{ applyAgent(*agentConfig) }

// Option configures either client.
type Option interface {
	SourceOption
	AgentOption
}

type option func(*config)

func (o option) applySource(c *sourceConfig) { o(&c.config) }
func (o option) applyAgent(c *agentConfig)   { o(&c.config) }

type sourceOption func(*sourceConfig)

func (o sourceOption) applySource(c *sourceConfig) { o(c) }

type agentOption func(*agentConfig)

func (o agentOption) applyAgent(c *agentConfig) { o(c) }

// WithLogger sets the client's logger, and its transport's unless the
// transport was given one of its own. Default: the logger of the context
// given to Start (klog.FromContext), which is klog.Background() unless the
// caller put one there. Lifecycle at V(0), connects and resyncs at V(2),
// each event at V(4), payloads at V(5).
func WithLogger(l logr.Logger) Option {
	return option(func(c *config) { c.logger, c.loggerSet = l, true })
}

// WithTracerProvider sets where the client's spans go: a span for every
// event sent, child of the publisher's context, and one for every event
// handled, child of the sender's span, whose context events carry in the
// CloudEvents distributed tracing extension (traceparent, tracestate).
// Default: otel.GetTracerProvider(), which records nothing unless the
// program set one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return option(func(c *config) { c.tracerProvider = tp })
}

// WithErrorHandler sets where background failures go. Default:
// utilruntime.HandleErrorWithContext.
func WithErrorHandler(h ErrorHandler) Option {
	return option(func(c *config) { c.errorHandler = h })
}

// WithObserver sets the observer of the client's counters. Default: none.
func WithObserver(o Observer) Option { return option(func(c *config) { c.observer = o }) }

// WithWorkers sets how many goroutines run handlers and answer resync
// requests. Default: DefaultWorkers.
func WithWorkers(n int) Option { return option(func(c *config) { c.workers = n }) }

// WithResyncInterval sets how often the client resyncs on its own; 0 turns
// periodic resync off (it still resyncs at start and on reconnect). Each
// interval is jittered by up to 10% so a fleet does not resync in step.
// Default: DefaultResyncInterval.
func WithResyncInterval(d time.Duration) Option {
	return option(func(c *config) { c.resyncInterval = d })
}

// WithPublishRateLimit limits Publish to qps events per second with bursts
// of burst; qps 0 turns the limit off. Resync answers are not limited.
// Default: DefaultPublishQPS, DefaultPublishBurst.
func WithPublishRateLimit(qps float64, burst int) Option {
	return option(func(c *config) { c.publishQPS, c.publishBurst = qps, burst })
}

// WithMaxRetries sets how many times an event whose handler failed is
// retried, with exponential backoff, before it is dropped. Default:
// DefaultMaxRetries.
func WithMaxRetries(n int) Option { return option(func(c *config) { c.maxRetries = n }) }

// WithResyncSessionTTL sets how long the client keeps the batches of one
// incomplete resync request. Default: DefaultResyncSessionTTL.
func WithResyncSessionTTL(d time.Duration) Option {
	return option(func(c *config) { c.sessionTTL = d })
}

// OrphanDeletion says which resources a source deletes from an agent that
// holds them while the source's Lister no longer lists them.
type OrphanDeletion int

const (
	// DeleteOwnOrphans deletes only resources the agent says are this
	// source's (its spec resync names their source). Resources the agent
	// cannot attribute are left alone: they may be another source's. The
	// default; safe with any number of sources.
	DeleteOwnOrphans OrphanDeletion = iota
	// DeleteAllOrphans also deletes resources the agent does not attribute
	// (agents that predate source attribution). Use it only when this is the
	// only source its agents have.
	DeleteAllOrphans
	// KeepOrphans never deletes orphans: for a source whose Lister may be
	// incomplete. Deletions then rely on the deletion handshake alone.
	KeepOrphans
)

// WithOrphanDeletion sets which orphans a source deletes when it answers a
// spec resync. Resources the source is deleting are re-sent as
// delete_requests whatever the setting, until the agent confirms them.
// Default: DeleteOwnOrphans.
func WithOrphanDeletion(d OrphanDeletion) SourceOption {
	return sourceOption(func(c *sourceConfig) { c.orphanDeletion = d })
}

// WithOrphanGracePeriod keeps a source from deleting orphans during its
// first d after Start: a source whose Lister fills up after it starts (an
// in-memory store its controllers populate again) would otherwise delete
// resources it merely has not re-created yet. Orphans found during the grace
// period are deleted at the first resync after it. Default: 0.
func WithOrphanGracePeriod(d time.Duration) SourceOption {
	return sourceOption(func(c *sourceConfig) { c.orphanGrace = d })
}

// WithSpecResend makes a source send a spec again when its agent has not
// acknowledged it — reported a status at its version or newer, or resynced
// — within d, or within twice the agent's slowest acknowledgement of the
// last minute or two if that is longer (an agent working through a backlog
// is late, not lost). Each re-send of a spec waits twice as long as the
// one before, up to SpecResendMax; the oldest go first, at most
// SpecResendPerRound per agent at a time. An agent that has said nothing
// for as long as it takes to acknowledge may be away, or may have lost the
// one spec it was sent: it gets one spec at a time, with the same backoff,
// until it answers. Brokers drop events a source cannot
// see dropped (a slow subscriber's queue overflowing, a reconnect), and an
// agent that asks for specs only when it connects would otherwise never
// get them. d 0 turns it off. Data types whose codec is a Versioner are
// not tracked: their statuses do not carry the spec's version. Default:
// DefaultSpecResendAfter.
func WithSpecResend(d time.Duration) SourceOption {
	return sourceOption(func(c *sourceConfig) { c.resendAfter = d })
}

// WithSpecWindow paces what a source sends each agent: at most a window
// of specs in flight (sent, and no status at their version yet), the rest
// held back, the newest version of each, and sent oldest first as
// statuses come in. The window starts at n (500 keeps within half of
// Mosquitto's default queue per client); it grows while the agent
// acknowledges about as fast as it has lately, shrinks while
// acknowledgements lag (a backlog builds up in the broker's queue in front
// of the agent), down to 100 (or n if less), and halves when a spec turns
// out lost. A broker's queue for a slow agent then holds about a window,
// not everything the hub has for it, and drops nothing; a fast agent is
// not held back. Resync answers are paced too, and Publish of a spec held
// back returns nil at once.
//
// Statuses are the only acknowledgement the protocol has, so pacing suits
// agents that report a status for every spec they take, soon after, as
// OCM's work agents do: an agent that reports none gets a window's worth
// until it does. It needs WithSpecResend on (NewSourceClient refuses a
// window with WithSpecResend(0)). Default: off (0).
func WithSpecWindow(n int) SourceOption {
	return sourceOption(func(c *sourceConfig) { c.window = n })
}

// WithAgentID sets the CloudEvents source attribute of the agent's events.
// Default: the cluster name.
func WithAgentID(id string) AgentOption {
	return agentOption(func(c *agentConfig) { c.agentID = id })
}
