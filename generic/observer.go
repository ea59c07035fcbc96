package generic

import (
	"time"

	"github.com/workwire/sdk-go/generic/types"
)

// Side says which end of the protocol a client is.
type Side string

const (
	// SideSource is a source client (hub controller, service).
	SideSource Side = "source"
	// SideAgent is an agent client (work agent on a cluster).
	SideAgent Side = "agent"
)

// DropReason says why a received event was skipped.
type DropReason string

// Reasons a received event is skipped.
const (
	// DropMalformed: not a CloudEvent, a malformed type or a missing or
	// ill-typed extension.
	DropMalformed DropReason = "malformed"
	// DropUnexpected: a well-formed event this side does not handle (a spec
	// event at a source, for example).
	DropUnexpected DropReason = "unexpected"
	// DropUnknownDataType: no codec for its data type.
	DropUnknownDataType DropReason = "unknown_data_type"
	// DropDecode: the codec could not decode its payload.
	DropDecode DropReason = "decode"
	// DropForeign: it names another cluster or source than this client's, or
	// claims a resource another source owns.
	DropForeign DropReason = "foreign"
	// DropStale: a spec older than what the agent holds, or, within ten
	// minutes of the resource's deletion, one at its version or below that
	// is not a deletion.
	DropStale DropReason = "stale"
	// DropOutOfOrder: a status older (by sequenceid) than one already handled.
	DropOutOfOrder DropReason = "out_of_order"
	// DropHandler: the handlers kept failing and retries ran out.
	DropHandler DropReason = "handler"
)

// Observer receives a client's counters. The default does nothing;
// generic/metrics adapts it to Prometheus. Methods are called from many
// goroutines, on hot paths: they must be goroutine-safe, fast, and must not
// block. Embed NopObserver to implement only some.
type Observer interface {
	// EventReceived is called for every well-formed event taken off the transport.
	EventReceived(side Side, t types.EventType)
	// EventDropped is called for every received event that is skipped.
	EventDropped(side Side, reason DropReason)
	// EventSent is called after every send, with its error (nil on success).
	EventSent(side Side, t types.EventType, err error)
	// ResyncAnswered is called after a resync request is answered, with how
	// many events the answer sent.
	ResyncAnswered(side Side, dataType types.DataType, sent int)
	// Connected is called after every (re)connect of the transport.
	Connected(side Side)
	// SendDuration is called after every send that succeeded, with how
	// long the transport took to send the event (until the broker
	// acknowledged it, where it does).
	SendDuration(side Side, t types.EventType, d time.Duration)
	// EventAge is called for every well-formed event received with a time
	// attribute, with how long ago that was: the delay from the peer's
	// encoding to this side's receipt (clocks apart included).
	EventAge(side Side, t types.EventType, age time.Duration)
	// ResyncAnswerDuration is called after a resync request is answered,
	// with how long since its first batch arrived.
	ResyncAnswerDuration(side Side, dataType types.DataType, d time.Duration)
	// SpecAcknowledged is called on a source when a status acknowledges a
	// spec it sent (WithSpecResend), with how long since the spec's first
	// send: the latency to its first status.
	SpecAcknowledged(dataType types.DataType, d time.Duration)
	// SpecResent is called on a source for every spec it sends again
	// because its agent did not acknowledge it.
	SpecResent(dataType types.DataType)
	// SubscriptionDeaf is called when a subscription is found to deliver
	// nothing while connected (WithDeliveryCheck), with its role's name
	// ("spec", "status", "specresync", "statusresync").
	SubscriptionDeaf(side Side, subscription string)
}

// Stats is a snapshot of a client's state, for gauges (see
// generic/metrics' Observer.Track).
type Stats struct {
	// Connected is true while Healthy returns nil.
	Connected bool
	// Queued counts the received events and resync tasks waiting for the
	// workers.
	Queued int
	// Held counts the resources the client's side holds, where it knows
	// (a work holder knows its store; a generic client does not know its
	// Lister's, and says -1).
	Held int
	// Unacknowledged counts, on a source, the specs sent that no status
	// acknowledged yet (WithSpecResend), and OldestUnacknowledged is how
	// long the oldest of them has waited.
	Unacknowledged       int
	OldestUnacknowledged time.Duration
	// Subscriptions says, of each subscription the client's delivery check
	// watches (WithDeliveryCheck; none with it off), when it last
	// delivered, to the check's tick, and whether it is deaf.
	Subscriptions []SubscriptionStats
}

// SubscriptionStats is what Stats says of one subscription.
type SubscriptionStats struct {
	// Subscription is the name of its role: "spec", "status",
	// "specresync" or "statusresync".
	Subscription string
	// LastEvent is when it last delivered an event or a probe, or when
	// the client started if it has delivered none.
	LastEvent time.Time
	// Deaf is true from when its probe did not come back until it
	// delivers again.
	Deaf bool
}

// NopObserver implements Observer and does nothing.
type NopObserver struct{}

// EventReceived does nothing.
func (NopObserver) EventReceived(Side, types.EventType) {}

// EventDropped does nothing.
func (NopObserver) EventDropped(Side, DropReason) {}

// EventSent does nothing.
func (NopObserver) EventSent(Side, types.EventType, error) {}

// ResyncAnswered does nothing.
func (NopObserver) ResyncAnswered(Side, types.DataType, int) {}

// Connected does nothing.
func (NopObserver) Connected(Side) {}

// SendDuration does nothing.
func (NopObserver) SendDuration(Side, types.EventType, time.Duration) {}

// EventAge does nothing.
func (NopObserver) EventAge(Side, types.EventType, time.Duration) {}

// ResyncAnswerDuration does nothing.
func (NopObserver) ResyncAnswerDuration(Side, types.DataType, time.Duration) {}

// SpecAcknowledged does nothing.
func (NopObserver) SpecAcknowledged(types.DataType, time.Duration) {}

// SpecResent does nothing.
func (NopObserver) SpecResent(types.DataType) {}

// SubscriptionDeaf does nothing.
func (NopObserver) SubscriptionDeaf(Side, string) {}
