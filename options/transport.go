package options

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
)

// Sentinel errors every transport returns (wrapped) where they apply.
var (
	// ErrClosed is returned by calls on a transport after Close.
	ErrClosed = errors.New("transport closed")
	// ErrNotConnected is returned by Send while the transport has no
	// connection to its broker; it reconnects by itself.
	ErrNotConnected = errors.New("transport not connected")
	// ErrNotStarted is returned by Send before Start.
	ErrNotStarted = errors.New("transport not started")
	// ErrTooLarge is returned by Send for an event larger than the transport or
	// its broker accepts. The event is not sent; events behind it are unaffected.
	ErrTooLarge = errors.New("event too large")
	// ErrInvalidEvent is returned by Send for an event that is not a valid
	// CloudEvent (nil, or a required attribute missing or malformed), which
	// its receivers would only drop. It is not sent.
	ErrInvalidEvent = errors.New("invalid CloudEvent")
	// ErrInvalidRoute is returned by Send for a route that lacks an ID its
	// role needs or names one no topic can carry ('/', '+', '#'): sending
	// it again cannot succeed. It is not sent.
	ErrInvalidRoute = errors.New("invalid route")
	// ErrDeaf is wrapped by the Healthy of a client one of whose
	// subscriptions delivers nothing while its connection looks up: a probe
	// through it did not come back in time.
	ErrDeaf = errors.New("subscription delivers nothing")
	// ErrProbeUnsupported is returned by Prober.Probe for a subscription
	// the transport cannot probe (a broadcast every peer receives), or
	// whose probe the broker refused (an ACL without the probe's topic).
	ErrProbeUnsupported = errors.New("cannot probe the subscription")
)

// CheckEvent returns an error wrapping ErrInvalidEvent if evt is nil or not
// a valid CloudEvent. Transports call it first thing in Send.
func CheckEvent(evt *cloudevents.Event) error {
	if evt == nil {
		return fmt.Errorf("%w: the event is nil", ErrInvalidEvent)
	}
	if err := evt.Validate(); err != nil {
		return fmt.Errorf("%w: event %q: %v", ErrInvalidEvent, evt.ID(), err)
	}
	return nil
}

// Role is what an event is for, which decides where a transport routes it.
type Role int

const (
	// RoleSpec: a source sends a resource's spec to one cluster.
	RoleSpec Role = iota + 1
	// RoleStatus: an agent sends a resource's status to one source.
	RoleStatus
	// RoleSpecResync: an agent asks every source for the specs it lacks.
	RoleSpecResync
	// RoleStatusResync: a source asks every agent for the statuses it lacks.
	RoleStatusResync
)

// String returns the role's name.
func (r Role) String() string {
	switch r {
	case RoleSpec:
		return "spec"
	case RoleStatus:
		return "status"
	case RoleSpecResync:
		return "specresync"
	case RoleStatusResync:
		return "statusresync"
	default:
		return fmt.Sprintf("Role(%d)", int(r))
	}
}

// Route says where an event goes: its role, the source and the cluster. A
// sent event's route names every ID its role needs (spec and status: both;
// spec resync: Cluster; status resync: Source). A received event's route holds
// what the transport saw, for example in the topic; IDs it could not see are
// empty and the receiver falls back to the event's extensions.
type Route struct {
	Role    Role
	Source  string
	Cluster string
}

// Validate reports a route that lacks an ID its role needs.
func (r Route) Validate() error {
	var errs []error
	switch r.Role {
	case RoleSpec, RoleStatus:
		if r.Source == "" {
			errs = append(errs, errors.New("source is empty"))
		}
		if r.Cluster == "" {
			errs = append(errs, errors.New("cluster is empty"))
		}
	case RoleSpecResync:
		if r.Cluster == "" {
			errs = append(errs, errors.New("cluster is empty"))
		}
	case RoleStatusResync:
		if r.Source == "" {
			errs = append(errs, errors.New("source is empty"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown role %d", int(r.Role)))
	}
	for _, id := range []struct{ kind, id string }{{"source", r.Source}, {"cluster", r.Cluster}} {
		if id.id != "" {
			if err := ValidateID(id.kind, id.id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w %s: %w", ErrInvalidRoute, r.Role, errors.Join(errs...))
	}
	return nil
}

// Subscription asks a transport for the events of one role. An empty Source
// or Cluster matches any. DataTypes lists the data types the subscriber
// decodes, for transports that route by data type (gRPC); others ignore it.
type Subscription struct {
	Role      Role
	Source    string
	Cluster   string
	DataTypes []string
}

// SourceSubscriptions are what a source with sourceID receives: status from
// any cluster, and spec resync requests from any cluster.
func SourceSubscriptions(sourceID string, dataTypes []string) []Subscription {
	return []Subscription{
		{Role: RoleStatus, Source: sourceID, DataTypes: dataTypes},
		{Role: RoleSpecResync, DataTypes: dataTypes},
	}
}

// AgentSubscriptions are what the agent of clusterName receives: specs from
// any source, and status resync requests from any source.
func AgentSubscriptions(clusterName string, dataTypes []string) []Subscription {
	return []Subscription{
		{Role: RoleSpec, Cluster: clusterName, DataTypes: dataTypes},
		{Role: RoleStatusResync, DataTypes: dataTypes},
	}
}

// Delivery is one received event.
type Delivery struct {
	// Route is the role and IDs the transport saw, e.g. in the MQTT topic.
	Route Route
	// Event is the received event; the receiver owns it.
	Event *cloudevents.Event

	once sync.Once
	done func()
}

// NewDelivery returns a delivery whose Done calls done once (done may be nil).
func NewDelivery(route Route, evt *cloudevents.Event, done func()) *Delivery {
	return &Delivery{Route: route, Event: evt, done: done}
}

// Done tells the transport the event is handled, or superseded by a newer one
// for the same resource, so it may acknowledge it (transports that commit
// offsets, such as Kafka, wait for it; others ignore it). Only the first call
// counts; it is goroutine-safe.
func (d *Delivery) Done() {
	d.once.Do(func() {
		if d.done != nil {
			d.done()
		}
	})
}

// Receiver is what a transport delivers to; the generic clients implement it.
// A transport calls it from its own receive goroutines; each method must
// return quickly and must not call back into the transport's Close.
type Receiver interface {
	// Deliver hands over one received event.
	Deliver(d *Delivery)
	// Malformed reports a received message that is not a CloudEvent; the
	// transport has dropped it and goes on.
	Malformed(err error)
	// Connected is called after every successful connect and subscribe,
	// the first and each reconnect, so the receiver can resync.
	Connected()
}

// Transport is the contract every broker binding implements. It routes
// events by Role and never parses their payloads.
//
// A Transport is used by one client: Start once, Send from any goroutine,
// Close once (further Closes are no-ops).
type Transport interface {
	// Start connects, subscribes to subs and delivers what arrives to r. It
	// blocks until the first connection is up and subscribed, retrying with
	// backoff, or until ctx ends. After it returns nil the transport keeps its
	// connection up, reconnecting with backoff and calling r.Connected after
	// each reconnect, until Close; ctx bounds only the first connection.
	Start(ctx context.Context, subs []Subscription, r Receiver) error
	// Send sends evt to where route points. The event's attributes must say
	// the same route, as the generic clients' events do (the source
	// attribute of a spec or a status resync, the originalsource of a
	// status, the clustername of every role but a status resync): a
	// transport whose broker routes by them (gRPC) refuses one that does
	// not with ErrInvalidEvent. It blocks until the broker has accepted the
	// event (as far as the transport can tell) or ctx ends.
	// It returns an error wrapping ErrInvalidEvent, ErrInvalidRoute,
	// ErrNotConnected, ErrTooLarge, ErrClosed or ErrNotStarted where those
	// apply. It is
	// goroutine-safe.
	Send(ctx context.Context, route Route, evt *cloudevents.Event) error
	// Close disconnects and returns once every goroutine the transport started
	// has stopped, or ctx ends. It is idempotent.
	Close(ctx context.Context) error
}

// TransportConfig is a transport's configuration, which makes the
// transport. The configs of workwire's MQTT, Kafka and gRPC transports
// implement it (as *mqtt.Config, *kafka.Config, *grpc.Config), so that
// package work takes any of them and a program links only the transports it
// configures.
type TransportConfig interface {
	// NewTransport validates the config and returns a new transport of it,
	// with no network I/O. The transport logs to the logger of its Start's
	// context.
	NewTransport() (Transport, error)
}

// TransportFunc makes a transport: a TransportConfig for transports
// defined outside workwire, and for tests over options/memory. Whoever
// calls it owns and closes what it returns.
type TransportFunc func() (Transport, error)

// NewTransport implements TransportConfig: it returns f().
func (f TransportFunc) NewTransport() (Transport, error) { return f() }

// EventSizeLimiter is implemented by transports that know the largest event
// they send; workwire's MQTT, Kafka, gRPC and memory transports do (MQTT's
// is its config's, or the smaller one its broker announces when it
// connects). The clients split a resync request into batches only on a
// transport whose limit is known, and a hub holder of package work refuses
// works too large for it at once.
type EventSizeLimiter interface {
	// MaxEventBytes returns the largest event Send sends, 0 if unknown. It
	// is goroutine-safe and may change once the transport has connected.
	MaxEventBytes() int
}

// ProbeType is the CloudEvents type of a probe (see Prober). Receivers take
// an event of this type as a sign that its subscription delivers, and
// handle it no further.
const ProbeType = "io.workwire.probe"

// Prober is implemented by transports that can tell whether a subscription
// still delivers while the connection looks up — a broker that lost the
// subscription, a proxy that keeps the connection but not its deliveries,
// a receive loop that died. The generic clients probe each subscription
// that has been quiet for a while (generic.WithDeliveryCheck) and call
// Redial when a probe does not come back; workwire's transports all
// implement it.
type Prober interface {
	// Probe arranges for evt, an event of ProbeType, to reach the
	// receiver on a delivery whose route has sub's role, once sub is
	// shown to deliver: sent through the broker to this transport's own
	// subscription (and to no other client's), or handed over once the
	// broker shows it has delivered everything it held for sub (a
	// heartbeat on sub's stream, the consumer caught up with what the
	// broker had when probed). It returns once the probe is on its way,
	// and gives up on it when ctx ends. It returns ErrProbeUnsupported for
	// a subscription it cannot probe, or whose probe the broker refuses;
	// ErrNotConnected while it has no connection. It is goroutine-safe.
	Probe(ctx context.Context, sub Subscription, evt *cloudevents.Event) error
	// Redial ends the transport's connection to the broker (or the
	// subscriptions' streams), giving cause as the reason, and connects
	// and subscribes again as after any loss: the receiver's Connected
	// follows, so the client resyncs. It does not block; while the
	// transport is not connected it does nothing.
	Redial(cause error)
}

// ProbePeer is the peer ID a probe's route names where a transport sends
// the probe through the broker (ProbeRoute): no cluster is called so (a
// cluster's name is a DNS label), and the generic clients refuse it as an
// ID, so no agent or source subscribes to it but the prober itself. An
// ACL that confines clients to their own topics must let each write the
// probe's (docs/mosquitto.md).
const ProbePeer = "_probe"

// ProbeRoute returns the route of a probe through sub, which only the
// subscriber of sub (or its replicas) receives: for a source's statuses,
// a status to it from ProbePeer; for an agent's specs, a spec to it from
// ProbePeer. It returns false for the subscriptions that every peer shares
// (resync requests), through which a probe would reach the whole fleet.
func ProbeRoute(sub Subscription) (Route, bool) {
	switch {
	case sub.Role == RoleStatus && sub.Source != "" && sub.Cluster == "":
		return Route{Role: RoleStatus, Source: sub.Source, Cluster: ProbePeer}, true
	case sub.Role == RoleSpec && sub.Cluster != "" && sub.Source == "":
		return Route{Role: RoleSpec, Source: ProbePeer, Cluster: sub.Cluster}, true
	}
	return Route{}, false
}

// NewProbe returns a probe event from source (the client's ID), with a
// fresh random ID and the time it was made.
func NewProbe(source string) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetType(ProbeType)
	evt.SetSource(source)
	evt.SetTime(time.Now())
	return &evt
}

// HealthChecker is implemented by transports that can tell whether they are
// connected; workwire's MQTT, Kafka, gRPC and memory transports do. The
// generic clients and package work's holders report it through their own
// Healthy, for an operator's readiness or liveness probe.
type HealthChecker interface {
	// Healthy returns nil while the transport is connected to its broker,
	// and otherwise an error wrapping ErrNotConnected (before Start and
	// while reconnecting) or ErrClosed that says why. It is goroutine-safe
	// and does not block.
	Healthy() error
}
