// Package transporttest is the conformance suite every options.Transport
// passes: sending and receiving per role, routing isolation, concurrent
// sends, sends with a context without a deadline, reconnect after a broker
// restart, context cancellation, health (where options.HealthChecker is
// implemented), and an idempotent Close.
// Transports outside workwire can run it too:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, transporttest.Harness{New: ..., Restart: ...})
//	}
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/options"
)

// Harness says how to make transports for the broker under test.
type Harness struct {
	// New returns a new, unstarted transport to the broker under test. The
	// suite closes it.
	New func(t *testing.T) options.Transport
	// NewUnreachable returns a transport whose broker cannot be reached.
	// Optional: without it the suite skips the connect-timeout test.
	NewUnreachable func(t *testing.T) options.Transport
	// NewLimited returns a transport that rejects events over limit bytes.
	// Optional: without it the suite skips the size-limit test.
	NewLimited func(t *testing.T, limit int) options.Transport
	// Restart makes the broker drop every connection and come back.
	// Optional: without it the suite skips the reconnect test.
	Restart func(t *testing.T)
	// SendRaw publishes bytes that are not a CloudEvent where a transport
	// subscribed to route receives them. Optional.
	SendRaw func(t *testing.T, route options.Route, payload []byte)
}

// Run runs every test of the suite as subtests of t. Subtests share the
// broker, so they do not run in parallel with each other; IDs are unique
// per subtest so that retained or late messages cannot cross over.
func Run(t *testing.T, h Harness) {
	t.Run("SendReceiveEveryRole", func(t *testing.T) { sendReceiveEveryRole(t, h) })
	t.Run("RoutingIsolation", func(t *testing.T) { routingIsolation(t, h) })
	t.Run("ConcurrentSends", func(t *testing.T) { concurrentSends(t, h) })
	t.Run("LifecycleErrors", func(t *testing.T) { lifecycleErrors(t, h) })
	t.Run("ContextCancel", func(t *testing.T) { contextCancel(t, h) })
	t.Run("SendWithoutDeadline", func(t *testing.T) { sendWithoutDeadline(t, h) })
	t.Run("TooLarge", func(t *testing.T) { tooLarge(t, h) })
	t.Run("Malformed", func(t *testing.T) { malformed(t, h) })
	t.Run("Probe", func(t *testing.T) { probe(t, h) })
	// Last: it restarts the broker under everyone.
	t.Run("Reconnect", func(t *testing.T) { reconnect(t, h) })
}

// Recorder is an options.Receiver that records what it gets.
type Recorder struct {
	mu         sync.Mutex
	deliveries []*options.Delivery
	malformed  []error
	connects   int
	changed    chan struct{}
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{changed: make(chan struct{}, 1)} }

// Start starts tr on subs with a new Recorder, failing the test if it is
// not connected within 20 seconds, and closes tr when the test ends.
func Start(t testing.TB, tr options.Transport, subs []options.Subscription) *Recorder {
	t.Helper()
	r := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Start(ctx, subs, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := tr.Close(ctx); err != nil && !errors.Is(err, options.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func (r *Recorder) poke() {
	select {
	case r.changed <- struct{}{}:
	default: // a wake-up is already pending; waiters re-read all state
	}
}

// Deliver records d and acknowledges it.
func (r *Recorder) Deliver(d *options.Delivery) {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	d.Done()
	r.poke()
}

// Malformed records err.
func (r *Recorder) Malformed(err error) {
	r.mu.Lock()
	r.malformed = append(r.malformed, err)
	r.mu.Unlock()
	r.poke()
}

// Connected counts connects.
func (r *Recorder) Connected() {
	r.mu.Lock()
	r.connects++
	r.mu.Unlock()
	r.poke()
}

// Deliveries returns what was delivered so far.
func (r *Recorder) Deliveries() []*options.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*options.Delivery(nil), r.deliveries...)
}

// Connects returns how many times Connected was called.
func (r *Recorder) Connects() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.connects
}

// MalformedCount returns how many malformed messages were reported.
func (r *Recorder) MalformedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.malformed)
}

// Wait polls cond after every change until it holds or d passes.
func (r *Recorder) Wait(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-r.changed:
		case <-tick.C:
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

const wait = 20 * time.Second

// start starts tr with subs and a new recorder, and closes it at cleanup.
func start(t *testing.T, tr options.Transport, subs []options.Subscription) *Recorder {
	t.Helper()
	r := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Start(ctx, subs, r); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { closeTransport(t, tr) })
	return r
}

func closeTransport(t *testing.T, tr options.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

var seq struct {
	sync.Mutex
	n int
}

// unique returns an ID no other subtest uses.
func unique(prefix string) string {
	seq.Lock()
	defer seq.Unlock()
	seq.n++
	return fmt.Sprintf("%s%d-%d", prefix, seq.n, time.Now().UnixNano()%100000)
}

const dataType = "io.example.conformance.v1.things"

// NewEvent returns an event with the extensions of the wire contract.
func NewEvent(id, typ string) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID(id)
	evt.SetSource("conformance")
	evt.SetType(dataType + "." + typ)
	evt.SetTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	evt.SetExtension("resourceid", "r-"+id)
	evt.SetExtension("resourceversion", int32(7))
	evt.SetExtension("deletiontimestamp", time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC))
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]any{"id": id, "n": 1})
	return &evt
}

// OnRoute sets evt's attributes to say r, as the generic clients' events
// do, and returns evt: the source attribute of a spec or a status resync,
// the originalsource of a status, and the clustername of every role but a
// status resync. Transports that route by an event's attributes (gRPC)
// refuse an event whose attributes do not say the route Send is given.
func OnRoute(evt *cloudevents.Event, r options.Route) *cloudevents.Event {
	switch r.Role {
	case options.RoleSpec, options.RoleStatusResync:
		evt.SetSource(r.Source)
	case options.RoleStatus:
		evt.SetExtension("originalsource", r.Source)
	}
	if r.Role != options.RoleStatusResync {
		evt.SetExtension("clustername", r.Cluster)
	}
	return evt
}

// send sends evt on r, its attributes set to say r (OnRoute).
func send(t *testing.T, tr options.Transport, r options.Route, evt *cloudevents.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Send(ctx, r, OnRoute(evt, r)); err != nil {
		t.Fatalf("Send %s: %v", r.Role, err)
	}
}

func find(r *Recorder, id string) *options.Delivery {
	for _, d := range r.Deliveries() {
		if d.Event.ID() == id {
			return d
		}
	}
	return nil
}

// checkDelivered waits for the event with evt's ID and checks what arrived.
func checkDelivered(t *testing.T, r *Recorder, evt *cloudevents.Event, want options.Route) {
	t.Helper()
	r.Wait(t, fmt.Sprintf("%s event %s", want.Role, evt.ID()), wait, func() bool { return find(r, evt.ID()) != nil })
	d := find(r, evt.ID())
	got := d.Route
	if got.Role != want.Role {
		t.Errorf("route role %v, want %v", got.Role, want.Role)
	}
	if got.Source != "" && got.Source != want.Source {
		t.Errorf("route source %q, want %q (or empty)", got.Source, want.Source)
	}
	if got.Cluster != "" && got.Cluster != want.Cluster {
		t.Errorf("route cluster %q, want %q (or empty)", got.Cluster, want.Cluster)
	}
	e := d.Event
	if e.Type() != evt.Type() || e.Source() != evt.Source() || !e.Time().Equal(evt.Time()) {
		t.Errorf("attributes changed: got %s %s %v", e.Type(), e.Source(), e.Time())
	}
	if string(e.Data()) != string(evt.Data()) {
		t.Errorf("data %s, want %s", e.Data(), evt.Data())
	}
	for name, v := range evt.Extensions() {
		gotV, ok := e.Extensions()[name]
		if !ok {
			t.Errorf("extension %s lost", name)
			continue
		}
		if fmt.Sprint(normalize(gotV)) != fmt.Sprint(normalize(v)) {
			t.Errorf("extension %s = %v (%T), want %v", name, gotV, gotV, v)
		}
	}
}

// normalize renders an extension value the way a string-only binding (MQTT
// user properties) carries it, so typed and string forms compare equal.
func normalize(v any) string {
	switch v := v.(type) {
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case fmt.Stringer:
		s := v.String()
		if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return ts.UTC().Format(time.RFC3339Nano)
		}
		return s
	case string:
		if ts, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return ts.UTC().Format(time.RFC3339Nano)
		}
		return v
	default:
		return fmt.Sprint(v)
	}
}

func sendReceiveEveryRole(t *testing.T, h Harness) {
	source, cluster := unique("src"), unique("cluster")
	hub := h.New(t)
	agent := h.New(t)
	hubRecv := start(t, hub, options.SourceSubscriptions(source, []string{dataType}))
	agentRecv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))

	spec := NewEvent(unique("spec"), "spec.create_request")
	specRoute := options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}
	send(t, hub, specRoute, spec)
	checkDelivered(t, agentRecv, spec, specRoute)

	status := NewEvent(unique("status"), "status.update_request")
	statusRoute := options.Route{Role: options.RoleStatus, Source: source, Cluster: cluster}
	send(t, agent, statusRoute, status)
	checkDelivered(t, hubRecv, status, statusRoute)

	specResync := NewEvent(unique("specresync"), "spec.resync_request")
	specResyncRoute := options.Route{Role: options.RoleSpecResync, Cluster: cluster}
	send(t, agent, specResyncRoute, specResync)
	checkDelivered(t, hubRecv, specResync, specResyncRoute)

	statusResync := NewEvent(unique("statusresync"), "status.resync_request")
	statusResyncRoute := options.Route{Role: options.RoleStatusResync, Source: source}
	send(t, hub, statusResyncRoute, statusResync)
	checkDelivered(t, agentRecv, statusResync, statusResyncRoute)

	if hubRecv.Connects() < 1 || agentRecv.Connects() < 1 {
		t.Errorf("Connected not called after Start: hub %d, agent %d", hubRecv.Connects(), agentRecv.Connects())
	}
}

func routingIsolation(t *testing.T, h Harness) {
	sourceA, sourceB := unique("srcA"), unique("srcB")
	cluster1, cluster2 := unique("c1"), unique("c2")
	hubA, hubB := h.New(t), h.New(t)
	agent1, agent2 := h.New(t), h.New(t)
	recvA := start(t, hubA, options.SourceSubscriptions(sourceA, []string{dataType}))
	recvB := start(t, hubB, options.SourceSubscriptions(sourceB, []string{dataType}))
	recv1 := start(t, agent1, options.AgentSubscriptions(cluster1, []string{dataType}))
	recv2 := start(t, agent2, options.AgentSubscriptions(cluster2, []string{dataType}))

	spec := NewEvent(unique("spec"), "spec.update_request")
	send(t, hubA, options.Route{Role: options.RoleSpec, Source: sourceA, Cluster: cluster1}, spec)
	status := NewEvent(unique("status"), "status.update_request")
	send(t, agent1, options.Route{Role: options.RoleStatus, Source: sourceA, Cluster: cluster1}, status)
	// A marker after each: once it arrives, anything misrouted before it
	// would have arrived too (per-connection ordering).
	marker2 := NewEvent(unique("m2"), "status.resync_request")
	send(t, hubA, options.Route{Role: options.RoleStatusResync, Source: sourceA}, marker2)
	markerB := NewEvent(unique("mB"), "spec.resync_request")
	send(t, agent1, options.Route{Role: options.RoleSpecResync, Cluster: cluster1}, markerB)

	recv1.Wait(t, "spec at cluster1", wait, func() bool { return find(recv1, spec.ID()) != nil })
	recvA.Wait(t, "status at source A", wait, func() bool { return find(recvA, status.ID()) != nil })
	recv2.Wait(t, "marker at cluster2", wait, func() bool { return find(recv2, marker2.ID()) != nil })
	recvB.Wait(t, "marker at source B", wait, func() bool { return find(recvB, markerB.ID()) != nil })
	if find(recv2, spec.ID()) != nil {
		t.Error("cluster2's agent received cluster1's spec")
	}
	if find(recvB, status.ID()) != nil {
		t.Error("source B received source A's status")
	}
}

func concurrentSends(t *testing.T, h Harness) {
	source, cluster := unique("src"), unique("cluster")
	hub, agent := h.New(t), h.New(t)
	start(t, hub, nil)
	recv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))
	const workers, each = 8, 50
	route := options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				errs <- hub.Send(ctx, route, OnRoute(NewEvent(fmt.Sprintf("c-%d-%d", w, i), "spec.update_request"), route))
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Send: %v", err)
		}
	}
	recv.Wait(t, fmt.Sprintf("%d events", workers*each), wait, func() bool { return len(recv.Deliveries()) >= workers*each })
	seen := map[string]bool{}
	for _, d := range recv.Deliveries() {
		seen[d.Event.ID()] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("received %d distinct events, want %d", len(seen), workers*each)
	}
}

func lifecycleErrors(t *testing.T, h Harness) {
	tr := h.New(t)
	route := options.Route{Role: options.RoleSpec, Source: unique("s"), Cluster: unique("c")}
	ctx := context.Background()
	if err := tr.Send(ctx, route, OnRoute(NewEvent("x", "spec.create_request"), route)); err == nil {
		t.Error("Send before Start succeeded")
	}
	hc, _ := tr.(options.HealthChecker)
	if hc != nil {
		if err := hc.Healthy(); !errors.Is(err, options.ErrNotConnected) {
			t.Errorf("Healthy before Start: %v, want ErrNotConnected", err)
		}
	}
	start(t, tr, nil)
	if hc != nil {
		if err := hc.Healthy(); err != nil {
			t.Errorf("Healthy after Start: %v", err)
		}
	}
	if err := tr.Send(ctx, options.Route{Role: options.RoleSpec, Source: "s"}, NewEvent("y", "spec.create_request")); err == nil {
		t.Error("Send on a route without a cluster succeeded")
	}
	// What receivers would only drop as malformed fails at Send.
	if err := tr.Send(ctx, route, OnRoute(NewEvent("", "spec.create_request"), route)); !errors.Is(err, options.ErrInvalidEvent) {
		t.Errorf("Send of an event without an ID: %v, want ErrInvalidEvent", err)
	}
	if err := tr.Send(ctx, route, nil); !errors.Is(err, options.ErrInvalidEvent) {
		t.Errorf("Send of a nil event: %v, want ErrInvalidEvent", err)
	}
	closeTransport(t, tr)
	closeTransport(t, tr) // idempotent
	if err := tr.Send(ctx, route, OnRoute(NewEvent("z", "spec.create_request"), route)); !errors.Is(err, options.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	if hc != nil {
		if err := hc.Healthy(); !errors.Is(err, options.ErrClosed) {
			t.Errorf("Healthy after Close: %v, want ErrClosed", err)
		}
	}
}

func contextCancel(t *testing.T, h Harness) {
	tr := h.New(t)
	start(t, tr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	route := options.Route{Role: options.RoleSpec, Source: unique("s"), Cluster: unique("c")}
	err := tr.Send(ctx, route, OnRoute(NewEvent(unique("e"), "spec.create_request"), route))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a cancelled context: %v, want context.Canceled", err)
	}
	if h.NewUnreachable == nil {
		return
	}
	un := h.NewUnreachable(t)
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err = un.Start(ctx, nil, NewRecorder())
	if err == nil {
		t.Fatal("Start against an unreachable broker succeeded")
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Start returned %v after its context ended", d)
	}
	if hc, ok := un.(options.HealthChecker); ok {
		if err := hc.Healthy(); !errors.Is(err, options.ErrNotConnected) {
			t.Errorf("Healthy after a failed Start: %v, want ErrNotConnected", err)
		}
	}
	closeTransport(t, un)
}

// sendWithoutDeadline sends every role with a context that has no
// deadline, as the generic clients do: each is sent once and arrives.
func sendWithoutDeadline(t *testing.T, h Harness) {
	source, cluster := unique("src"), unique("cluster")
	hub, agent := h.New(t), h.New(t)
	hubRecv := start(t, hub, options.SourceSubscriptions(source, []string{dataType}))
	agentRecv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))
	for _, c := range []struct {
		from  options.Transport
		to    *Recorder
		route options.Route
		typ   string
	}{
		{hub, agentRecv, options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}, "spec.create_request"},
		{agent, hubRecv, options.Route{Role: options.RoleStatus, Source: source, Cluster: cluster}, "status.update_request"},
		{agent, hubRecv, options.Route{Role: options.RoleSpecResync, Cluster: cluster}, "spec.resync_request"},
		{hub, agentRecv, options.Route{Role: options.RoleStatusResync, Source: source}, "status.resync_request"},
	} {
		evt := NewEvent(unique(c.route.Role.String()), c.typ)
		if err := c.from.Send(context.Background(), c.route, OnRoute(evt, c.route)); err != nil {
			t.Errorf("Send %s without a deadline: %v", c.route.Role, err)
			continue
		}
		checkDelivered(t, c.to, evt, c.route)
	}
}

func tooLarge(t *testing.T, h Harness) {
	if h.NewLimited == nil {
		t.Skip("harness has no NewLimited")
	}
	source, cluster := unique("src"), unique("cluster")
	tr := h.NewLimited(t, 4096)
	start(t, tr, nil)
	agent := h.New(t)
	recv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))
	route := options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}
	big := NewEvent(unique("big"), "spec.create_request")
	_ = big.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", 8192)})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Send(ctx, route, OnRoute(big, route)); !errors.Is(err, options.ErrTooLarge) {
		t.Fatalf("oversize Send: %v, want ErrTooLarge", err)
	}
	small := NewEvent(unique("small"), "spec.create_request")
	send(t, tr, route, small) // the next event is not blocked
	checkDelivered(t, recv, small, route)
}

func malformed(t *testing.T, h Harness) {
	if h.SendRaw == nil {
		t.Skip("harness has no SendRaw")
	}
	source, cluster := unique("src"), unique("cluster")
	agent := h.New(t)
	recv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))
	route := options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}
	h.SendRaw(t, route, []byte("this is not a cloudevent"))
	hub := h.New(t)
	start(t, hub, nil)
	good := NewEvent(unique("good"), "spec.create_request")
	send(t, hub, route, good)
	checkDelivered(t, recv, good, route)
	recv.Wait(t, "the malformed message reported", wait, func() bool { return recv.MalformedCount() >= 1 })
}

// probe probes every subscription of a source and an agent: each probe
// comes back to its prober alone, on a delivery of its subscription's role
// (or the transport says it cannot probe that subscription), and a Redial
// connects again.
func probe(t *testing.T, h Harness) {
	source, cluster := unique("src"), unique("cluster")
	hub, agent := h.New(t), h.New(t)
	if _, ok := hub.(options.Prober); !ok {
		t.Skip("the transport is no options.Prober")
	}
	hubRecv := start(t, hub, options.SourceSubscriptions(source, []string{dataType}))
	agentRecv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))
	probed := 0
	for _, side := range []struct {
		tr     options.Transport
		r, not *Recorder
		subs   []options.Subscription
	}{
		{hub, hubRecv, agentRecv, options.SourceSubscriptions(source, []string{dataType})},
		{agent, agentRecv, hubRecv, options.AgentSubscriptions(cluster, []string{dataType})},
	} {
		for _, sub := range side.subs {
			evt := options.NewProbe(unique("prober"))
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			err := side.tr.(options.Prober).Probe(ctx, sub, evt)
			if errors.Is(err, options.ErrProbeUnsupported) {
				cancel()
				t.Logf("%s subscription: %v", sub.Role, err)
				continue
			}
			if err != nil {
				cancel()
				t.Fatalf("probe the %s subscription: %v", sub.Role, err)
			}
			probed++
			side.r.Wait(t, "the probe of the "+sub.Role.String()+" subscription", wait, func() bool { return find(side.r, evt.ID()) != nil })
			cancel()
			if d := find(side.r, evt.ID()); d.Route.Role != sub.Role || d.Event.Type() != options.ProbeType {
				t.Errorf("the probe of the %s subscription came back on %v, type %q", sub.Role, d.Route, d.Event.Type())
			}
			if find(side.not, evt.ID()) != nil {
				t.Errorf("the probe of the %s subscription reached the other side", sub.Role)
			}
		}
	}
	if probed == 0 {
		t.Error("no subscription could be probed: a source's statuses and an agent's specs can be on every transport")
	}
	connects := agentRecv.Connects()
	agent.(options.Prober).Redial(errors.New("the test asks for it"))
	agentRecv.Wait(t, "the agent to connect again after Redial", wait, func() bool { return agentRecv.Connects() > connects })
}

func reconnect(t *testing.T, h Harness) {
	if h.Restart == nil {
		t.Skip("harness has no Restart")
	}
	source, cluster := unique("src"), unique("cluster")
	hub, agent := h.New(t), h.New(t)
	hubRecv := start(t, hub, options.SourceSubscriptions(source, []string{dataType}))
	agentRecv := start(t, agent, options.AgentSubscriptions(cluster, []string{dataType}))
	hubConnects, agentConnects := hubRecv.Connects(), agentRecv.Connects()

	h.Restart(t)
	hubRecv.Wait(t, "hub reconnect", wait, func() bool { return hubRecv.Connects() > hubConnects })
	agentRecv.Wait(t, "agent reconnect", wait, func() bool { return agentRecv.Connects() > agentConnects })

	spec := NewEvent(unique("spec"), "spec.update_request")
	route := options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}
	send(t, hub, route, spec)
	checkDelivered(t, agentRecv, spec, route)
	status := NewEvent(unique("status"), "status.update_request")
	statusRoute := options.Route{Role: options.RoleStatus, Source: source, Cluster: cluster}
	send(t, agent, statusRoute, status)
	checkDelivered(t, hubRecv, status, statusRoute)
}
