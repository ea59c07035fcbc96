// Package memory is an in-process transport: a Broker routes events between
// the Transports it hands out, by the same roles as a real broker. Use it to
// test code built on workwire's clients without a network; Disconnect,
// Reconnect and Broker.Restart simulate connection loss, and SetFaults makes
// the broker drop, duplicate, reorder and delay events, reproducibly from a
// seed.
//
// Events cross the broker as CloudEvents JSON, so what a receiver gets has
// the same attribute types a real wire produces.
package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/workwire/sdk-go/options"
)

// Broker connects memory Transports. It is goroutine-safe; its zero value
// is not usable: call NewBroker.
type Broker struct {
	mu      sync.Mutex
	clients map[*Transport]struct{}

	faultMu sync.Mutex
	faults  Faults
	rng     *rand.Rand
	stats   FaultStats
}

// Faults is what the broker does to events in flight. Each probability is
// in [0, 1] and applies to each delivery (one event to one subscriber).
type Faults struct {
	// Drop loses the delivery.
	Drop float64
	// Duplicate delivers it twice.
	Duplicate float64
	// Reorder holds it back and delivers it after the subscriber's next one.
	Reorder float64
	// Delay, if set, delays each delivery by a random duration up to Delay
	// (which also reorders deliveries).
	Delay time.Duration
	// Seed makes the choices reproducible.
	Seed uint64
}

// FaultStats counts the faults a broker injected.
type FaultStats struct {
	Delivered, Dropped, Duplicated, Reordered, Delayed int
}

// NewBroker returns an empty broker.
func NewBroker() *Broker {
	return &Broker{clients: make(map[*Transport]struct{})}
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
	out := make([]*Transport, 0, len(b.clients))
	for t := range b.clients {
		out = append(out, t)
	}
	return out
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

// fate decides what happens to one delivery.
func (b *Broker) fate() (copies int, reorder bool, delay time.Duration) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	f := b.faults
	b.stats.Delivered++
	if b.rng == nil {
		return 1, false, 0
	}
	if b.rng.Float64() < f.Drop {
		b.stats.Dropped++
		return 0, false, 0
	}
	copies = 1
	if b.rng.Float64() < f.Duplicate {
		b.stats.Duplicated++
		copies = 2
	}
	if b.rng.Float64() < f.Reorder {
		b.stats.Reordered++
		reorder = true
	}
	if f.Delay > 0 {
		b.stats.Delayed++
		delay = time.Duration(b.rng.Int64N(int64(f.Delay)))
	}
	return copies, reorder, delay
}

// SendRaw routes data as if a peer had sent it on route: use it to feed
// receivers malformed input.
func (b *Broker) SendRaw(r options.Route, data []byte) {
	b.route(r, data)
}

func (b *Broker) route(r options.Route, data []byte) {
	for _, t := range b.snapshot() {
		if !t.wants(r) {
			continue
		}
		copies, reorder, delay := b.fate()
		for range copies {
			if delay > 0 {
				t.enqueueAfter(r, data, delay)
			} else {
				t.enqueue(r, data, reorder)
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
	subs      []options.Subscription
	recv      options.Receiver
	inbox     []inMsg
	held      *inMsg // a delivery held back to reorder it
	timers    map[*time.Timer]struct{}
	wg        sync.WaitGroup
}

type inMsg struct {
	route     options.Route
	data      []byte
	connected bool // a connect notice, not an event
}

var _ options.Transport = (*Transport)(nil)

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
	t.broker.clients[t] = struct{}{}
	t.broker.mu.Unlock()
	t.wg.Add(1)
	go t.deliverLoop()
	return nil
}

// Send routes evt to every transport subscribed to route.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
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

// Close stops delivery and waits for it. It is idempotent.
func (t *Transport) Close(ctx context.Context) error {
	t.broker.mu.Lock()
	delete(t.broker.clients, t)
	t.broker.mu.Unlock()
	t.mu.Lock()
	t.closed, t.connected = true, false
	t.dropInFlight()
	t.cond.Broadcast()
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Transport) wants(r options.Route) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected {
		return false
	}
	for _, s := range t.subs {
		if s.Role == r.Role && (s.Source == "" || s.Source == r.Source) && (s.Cluster == "" || s.Cluster == r.Cluster) {
			return true
		}
	}
	return false
}

func (t *Transport) enqueue(r options.Route, data []byte, holdBack bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected {
		return
	}
	m := inMsg{route: r, data: data}
	if holdBack && t.held == nil {
		t.held = &m
		return
	}
	t.inbox = append(t.inbox, m)
	if t.held != nil {
		t.inbox = append(t.inbox, *t.held)
		t.held = nil
	}
	t.cond.Signal()
}

// enqueueAfter delivers after d, unless the transport disconnects or closes
// first.
func (t *Transport) enqueueAfter(r options.Route, data []byte, d time.Duration) {
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
			t.enqueue(r, data, false)
		}
	})
	t.timers[timer] = struct{}{}
}

// dropInFlight forgets deliveries not yet made. The caller holds t.mu.
func (t *Transport) dropInFlight() {
	t.inbox = t.inbox[:0]
	t.held = nil
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
		evt := cloudevents.NewEvent()
		if err := evt.UnmarshalJSON(m.data); err != nil {
			recv.Malformed(fmt.Errorf("memory transport: decode: %w", err))
			continue
		}
		recv.Deliver(options.NewDelivery(m.route, &evt, nil))
	}
}
