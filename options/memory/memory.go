// Package memory is an in-process transport: a Broker routes events between
// the Transports it hands out, by the same roles as a real broker. Use it to
// test code built on workwire's clients without a network; Disconnect,
// Reconnect and Broker.Restart simulate connection loss.
//
// Events cross the broker as CloudEvents JSON, so what a receiver gets has
// the same attribute types a real wire produces.
package memory

import (
	"context"
	"fmt"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/workwire/sdk-go/options"
)

// Broker connects memory Transports. It is goroutine-safe; its zero value
// is not usable: call NewBroker.
type Broker struct {
	mu      sync.Mutex
	clients map[*Transport]struct{}
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

// SendRaw routes data as if a peer had sent it on route: use it to feed
// receivers malformed input.
func (b *Broker) SendRaw(r options.Route, data []byte) {
	b.route(r, data)
}

func (b *Broker) route(r options.Route, data []byte) {
	for _, t := range b.snapshot() {
		if t.wants(r) {
			t.enqueue(r, data)
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
	t.inbox = t.inbox[:0]
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
	t.inbox = nil
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

func (t *Transport) enqueue(r options.Route, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected {
		return
	}
	t.inbox = append(t.inbox, inMsg{route: r, data: data})
	t.cond.Signal()
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
