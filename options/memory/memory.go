// Package memory is an in-process transport: a Broker routes events between
// the Transports it hands out, by the same roles as a real broker. Use it to
// test code built on workwire's clients without a network; Disconnect,
// Reconnect and Broker.Restart simulate connection loss, Deafen a
// connection that stays up but delivers nothing, SetFaults makes
// the broker drop, duplicate, reorder and delay events, with choices drawn
// from a seed, and WithMaxEventBytes gives it a size limit, as real brokers
// have, so that Send fails with options.ErrTooLarge.
//
// Events cross the broker as CloudEvents JSON, so what a receiver gets has
// the same attribute types a real wire produces.
package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/internal/lifecycle"
	"github.com/workwire/sdk-go/options"
)

// Broker connects memory Transports. It is goroutine-safe; its zero value
// is not usable: call NewBroker.
type Broker struct {
	mu      sync.Mutex
	clients []*Transport // in the order they started: a seed replays fates per subscriber
	maxSize int          // bytes of an event's JSON; 0 = no limit

	faultMu sync.Mutex
	faults  Faults
	rng     *rand.Rand
	stats   FaultStats
}

// BrokerOption configures a Broker at NewBroker.
type BrokerOption func(*Broker)

// WithMaxEventBytes makes Send fail with options.ErrTooLarge, without
// delivering anything, for an event whose encoding on this broker's wire
// (its CloudEvents JSON) is larger than n bytes; the events sent after it
// are not held up. Default 0: no limit. Broker.SetMaxEventBytes changes it
// later.
func WithMaxEventBytes(n int) BrokerOption {
	return func(b *Broker) { b.maxSize = max(n, 0) }
}

// Faults is what the broker does to events in flight. Each probability is
// in [0, 1] and applies to each delivery (one event to one subscriber).
type Faults struct {
	// Drop loses the delivery.
	Drop float64
	// Duplicate delivers it twice.
	Duplicate float64
	// Reorder holds the delivery back and delivers it right after the
	// subscriber's next one or, if none comes, once a hold drawn from the
	// seed in [MaxHold/2, MaxHold] has passed: a reordered event is late,
	// never lost. A transport holds one delivery at a time; while it does,
	// further Reorder choices deliver in order.
	Reorder float64
	// MaxHold bounds how long Reorder holds a delivery back. Default (0):
	// DefaultMaxHold.
	MaxHold time.Duration
	// Delay, if set, delays each delivery by a random duration up to Delay
	// (which also reorders deliveries). A delivery both delayed and
	// reordered is held back once its delay has passed.
	Delay time.Duration
	// Roles, if set, are the only roles whose deliveries meet faults (spec
	// events alone, say); the others are delivered as they are.
	Roles []options.Role
	// Seed seeds the choices. The broker draws them in the order it routes
	// deliveries, so the n-th delivery meets the same fate in every run
	// with the same seed and faults; which event is the n-th depends on the
	// order in which goroutines call Send, which no seed fixes.
	Seed uint64
}

// DefaultMaxHold is how long Reorder holds a delivery back at most when
// Faults.MaxHold is not set.
const DefaultMaxHold = 50 * time.Millisecond

// FaultStats counts the faults a broker drew, so that a seed gives the same
// counts on every run: Reordered counts the deliveries drawn to be held back,
// though one drawn while another is held goes on at once. Flushed counts
// the held deliveries that no later delivery released, so that their hold
// ran out.
type FaultStats struct {
	Delivered, Dropped, Duplicated, Reordered, Delayed, Flushed int
}

// NewBroker returns an empty broker, with no faults and no size limit
// unless options say otherwise.
func NewBroker(opts ...BrokerOption) *Broker {
	b := &Broker{}
	for _, o := range opts {
		o(b)
	}
	return b
}

// SetMaxEventBytes sets the size limit of WithMaxEventBytes from now on; 0
// removes it. It is goroutine-safe.
func (b *Broker) SetMaxEventBytes(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maxSize = max(n, 0)
}

func (b *Broker) maxEventBytes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxSize
}

// Transport returns a new, unstarted transport on b.
func (b *Broker) Transport() *Transport {
	t := &Transport{broker: b}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// Restart disconnects every started transport and connects them again, as
// a broker restart does: events in flight to them are lost, and each
// receiver's Connected is called.
func (b *Broker) Restart() {
	for _, t := range b.snapshot() {
		t.Disconnect()
	}
	for _, t := range b.snapshot() {
		t.Reconnect()
	}
}

func (b *Broker) snapshot() []*Transport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.clients)
}

// SetFaults makes the broker inject faults from now on; the zero Faults
// turns them off. It is goroutine-safe.
func (b *Broker) SetFaults(f Faults) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.faults = f
	b.rng = rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
}

// FaultStats returns the counts of injected faults so far.
func (b *Broker) FaultStats() FaultStats {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	return b.stats
}

// deliveryFate is what happens to one delivery: how many copies arrive,
// after which delay, and for how long each is held back to reorder it (0:
// not).
type deliveryFate struct {
	copies      int
	delay, hold time.Duration
}

// fate draws the fate of one delivery on route r.
func (b *Broker) fate(r options.Route) deliveryFate {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	f := b.faults
	b.stats.Delivered++
	if b.rng == nil || (len(f.Roles) > 0 && !slices.Contains(f.Roles, r.Role)) {
		return deliveryFate{copies: 1}
	}
	if b.rng.Float64() < f.Drop {
		b.stats.Dropped++
		return deliveryFate{}
	}
	out := deliveryFate{copies: 1}
	if b.rng.Float64() < f.Duplicate {
		b.stats.Duplicated++
		out.copies = 2
	}
	if b.rng.Float64() < f.Reorder {
		b.stats.Reordered++
		maxHold := f.MaxHold
		if maxHold <= 0 {
			maxHold = DefaultMaxHold
		}
		out.hold = maxHold - time.Duration(b.rng.Int64N(int64(maxHold/2)+1))
	}
	if f.Delay > 0 {
		b.stats.Delayed++
		out.delay = time.Duration(b.rng.Int64N(int64(f.Delay)))
	}
	return out
}

func (b *Broker) countFlushed() {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.stats.Flushed++
}

// SendRaw routes data as if a peer had sent it on route: use it to feed
// receivers malformed input. The size limit does not apply to it.
func (b *Broker) SendRaw(r options.Route, data []byte) {
	b.route(r, data)
}

func (b *Broker) route(r options.Route, data []byte) {
	for _, t := range b.snapshot() {
		if !t.wants(r) {
			continue
		}
		f := b.fate(r)
		for range f.copies {
			if f.delay > 0 {
				t.enqueueAfter(r, data, f.delay, f.hold)
			} else {
				t.enqueue(r, data, f.hold)
			}
		}
	}
}

// Transport is one client's connection to a Broker. It implements
// options.Transport.
type Transport struct {
	broker *Broker

	mu        sync.Mutex
	cond      *sync.Cond
	started   bool
	closed    bool
	connected bool
	deaf      bool // connected, but nothing is delivered
	redials   int
	subs      []options.Subscription
	recv      options.Receiver
	inbox     []inMsg
	held      *heldMsg // a delivery held back to reorder it
	timers    map[*time.Timer]struct{}
	wg        sync.WaitGroup
}

// heldMsg is a delivery held back until the next one, or until its timer
// fires.
type heldMsg struct {
	msg   inMsg
	timer *time.Timer
}

type inMsg struct {
	route     options.Route
	data      []byte
	connected bool // a connect notice, not an event
}

var (
	_ options.Transport        = (*Transport)(nil)
	_ options.EventSizeLimiter = (*Transport)(nil)
	_ options.HealthChecker    = (*Transport)(nil)
	_ options.Prober           = (*Transport)(nil)
)

// Start subscribes and connects at once.
func (t *Transport) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	if r == nil {
		return fmt.Errorf("memory transport: receiver is nil")
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return options.ErrClosed
	case t.started:
		t.mu.Unlock()
		return fmt.Errorf("memory transport: started twice")
	}
	t.started, t.connected = true, true
	t.subs = append([]options.Subscription(nil), subs...)
	t.recv = r
	t.inbox = append(t.inbox, inMsg{connected: true})
	t.mu.Unlock()

	t.broker.mu.Lock()
	t.broker.clients = append(t.broker.clients, t)
	t.broker.mu.Unlock()
	t.wg.Add(1)
	go t.deliverLoop()
	return nil
}

// MaxEventBytes returns the broker's size limit (WithMaxEventBytes), 0 for
// none.
func (t *Transport) MaxEventBytes() int { return t.broker.maxEventBytes() }

// Send routes evt to every transport subscribed to route. An event larger
// than the broker's size limit (WithMaxEventBytes) fails with an error
// wrapping options.ErrTooLarge and reaches nobody. Send does not wait for
// delivery; it is goroutine-safe.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	if err := options.CheckEvent(evt); err != nil {
		return fmt.Errorf("memory transport: send: %w", err)
	}
	if err := route.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	state := t.stateErr()
	t.mu.Unlock()
	if state != nil {
		return state
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := evt.MarshalJSON()
	if err != nil {
		return fmt.Errorf("memory transport: encode: %w", err)
	}
	if limit := t.broker.maxEventBytes(); limit > 0 && len(data) > limit {
		return fmt.Errorf("memory transport: event %s of type %s: %w: %d bytes, limit %d", evt.ID(), evt.Type(), options.ErrTooLarge, len(data), limit)
	}
	t.broker.route(route, data)
	return nil
}

func (t *Transport) stateErr() error {
	switch {
	case t.closed:
		return options.ErrClosed
	case !t.started:
		return options.ErrNotStarted
	case !t.connected:
		return options.ErrNotConnected
	}
	return nil
}

// Healthy implements options.HealthChecker: nil from Start until Close
// while not disconnected.
func (t *Transport) Healthy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return fmt.Errorf("memory transport: %w", options.ErrClosed)
	case !t.started:
		return fmt.Errorf("memory transport: %w: not started", options.ErrNotConnected)
	case !t.connected:
		return fmt.Errorf("memory transport: %w: disconnected", options.ErrNotConnected)
	}
	return nil
}

// Disconnect drops the connection: sends fail with options.ErrNotConnected
// and events routed to t are lost until Reconnect.
func (t *Transport) Disconnect() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.connected = false
	t.dropInFlight()
}

// Reconnect restores the connection and tells the receiver.
func (t *Transport) Reconnect() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started || t.closed || t.connected {
		return
	}
	t.connected = true
	t.inbox = append(t.inbox, inMsg{connected: true})
	t.cond.Signal()
}

// Deafen keeps the connection up but delivers nothing to t — probes
// included — until Redial: a broker that lost its subscriptions, a proxy
// that passes pings alone.
func (t *Transport) Deafen() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deaf = true
	t.dropInFlight()
}

// Probe implements options.Prober: evt comes back to t alone, on sub's
// role, unless t is deaf or disconnected.
func (t *Transport) Probe(_ context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	t.mu.Lock()
	state := t.stateErr()
	t.mu.Unlock()
	if state != nil {
		return fmt.Errorf("memory transport: probe: %w", state)
	}
	data, err := evt.MarshalJSON()
	if err != nil {
		return fmt.Errorf("memory transport: probe: %w", err)
	}
	t.enqueue(options.Route{Role: sub.Role, Source: sub.Source, Cluster: sub.Cluster}, data, 0)
	return nil
}

// Redial implements options.Prober: a connected transport connects again,
// hearing what is sent from then on, and tells its receiver.
func (t *Transport) Redial(error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected {
		return
	}
	t.deaf = false
	t.redials++
	t.dropInFlight()
	t.inbox = append(t.inbox, inMsg{connected: true})
	t.cond.Signal()
}

// Redials returns how many times Redial connected again.
func (t *Transport) Redials() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.redials
}

// Close stops delivery and waits for it. It is idempotent.
func (t *Transport) Close(ctx context.Context) error {
	t.broker.mu.Lock()
	t.broker.clients = slices.DeleteFunc(t.broker.clients, func(c *Transport) bool { return c == t })
	t.broker.mu.Unlock()
	t.mu.Lock()
	t.closed, t.connected = true, false
	t.dropInFlight()
	t.cond.Broadcast()
	t.mu.Unlock()
	return lifecycle.Wait(ctx, &t.wg)
}

func (t *Transport) wants(r options.Route) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected || t.deaf {
		return false
	}
	for _, s := range t.subs {
		if s.Role == r.Role && (s.Source == "" || s.Source == r.Source) && (s.Cluster == "" || s.Cluster == r.Cluster) {
			return true
		}
	}
	return false
}

// enqueue queues a delivery, or holds it back for up to hold (if not 0 and
// nothing is held yet). A held delivery goes right after the next one.
func (t *Transport) enqueue(r options.Route, data []byte, hold time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected || t.deaf {
		return
	}
	m := inMsg{route: r, data: data}
	if hold > 0 && t.held == nil {
		h := &heldMsg{msg: m}
		h.timer = time.AfterFunc(hold, func() { t.flushHeld(h) })
		t.held = h
		return
	}
	t.inbox = append(t.inbox, m)
	if h := t.held; h != nil {
		h.timer.Stop()
		t.inbox = append(t.inbox, h.msg)
		t.held = nil
	}
	t.cond.Signal()
}

// flushHeld delivers h if it is still held: no delivery came to release it.
func (t *Transport) flushHeld(h *heldMsg) {
	t.mu.Lock()
	if t.held != h {
		t.mu.Unlock()
		return // released, or dropped by a disconnect
	}
	t.held = nil
	// Counted before it can be delivered, so whoever sees the delivery sees
	// the count. faultMu is a leaf lock: nothing takes t.mu under it.
	t.broker.countFlushed()
	t.inbox = append(t.inbox, h.msg)
	t.cond.Signal()
	t.mu.Unlock()
}

// enqueueAfter delivers after d (then holding it back for hold, as enqueue
// does), unless the transport disconnects or closes first.
func (t *Transport) enqueueAfter(r options.Route, data []byte, d, hold time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected {
		return
	}
	if t.timers == nil {
		t.timers = make(map[*time.Timer]struct{})
	}
	var timer *time.Timer
	timer = time.AfterFunc(d, func() {
		t.mu.Lock()
		_, live := t.timers[timer]
		delete(t.timers, timer)
		t.mu.Unlock()
		if live {
			t.enqueue(r, data, hold)
		}
	})
	t.timers[timer] = struct{}{}
}

// dropInFlight forgets deliveries not yet made. The caller holds t.mu.
func (t *Transport) dropInFlight() {
	t.inbox = t.inbox[:0]
	if t.held != nil {
		t.held.timer.Stop()
		t.held = nil
	}
	for timer := range t.timers {
		timer.Stop()
	}
	clear(t.timers)
}

func (t *Transport) deliverLoop() {
	defer t.wg.Done()
	for {
		t.mu.Lock()
		for len(t.inbox) == 0 && !t.closed {
			t.cond.Wait()
		}
		if t.closed {
			t.mu.Unlock()
			return
		}
		m := t.inbox[0]
		t.inbox = t.inbox[1:]
		recv := t.recv
		t.mu.Unlock()

		if m.connected {
			recv.Connected()
			continue
		}
		evt := cloudevents.New()
		if err := evt.UnmarshalJSON(m.data); err != nil {
			recv.Malformed(fmt.Errorf("memory transport: decode: %w", err))
			continue
		}
		recv.Deliver(options.NewDelivery(m.route, &evt, nil))
	}
}
