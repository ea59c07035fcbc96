package generic_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
)

// sarama (the Kafka transport) registers a meter in go-metrics' global
// registry, whose first meter starts a goroutine that lives as long as the
// process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// src is the source ID of the unit tests that run on a private broker.
const src = "hub1"

var (
	specCreate   = types.EventType{DataType: widgets, SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	specUpdate   = types.EventType{DataType: widgets, SubResource: types.SubResourceSpec, Action: types.UpdateRequest}
	specDelete   = types.EventType{DataType: widgets, SubResource: types.SubResourceSpec, Action: types.DeleteRequest}
	statusUpdate = types.EventType{DataType: widgets, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
)

// counter is an Observer that counts what tests assert on.
type counter struct {
	generic.NopObserver
	mu       sync.Mutex
	dropped  map[generic.DropReason]int
	sent     map[string]int
	recv     map[string]int
	answered int
	deaf     int
}

func newCounter() *counter {
	return &counter{dropped: map[generic.DropReason]int{}, sent: map[string]int{}, recv: map[string]int{}}
}

func (c *counter) EventDropped(_ generic.Side, r generic.DropReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropped[r]++
}

func (c *counter) EventSent(_ generic.Side, t types.EventType, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[string(t.SubResource)+"."+string(t.Action)]++
}

func (c *counter) EventReceived(_ generic.Side, t types.EventType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recv[string(t.SubResource)+"."+string(t.Action)]++
}

func (c *counter) ResyncAnswered(generic.Side, types.DataType, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered++
}

func (c *counter) SubscriptionDeaf(generic.Side, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deaf++
}

func (c *counter) deafCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deaf
}

func (c *counter) answers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answered
}

func (c *counter) drops(r generic.DropReason) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped[r]
}

func (c *counter) sends(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[key]
}

func (c *counter) received(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recv[key]
}

// quiet drops background errors: tests assert on counters instead.
func quiet(context.Context, error, string, ...any) {}

func testOpts(obs generic.Observer) []generic.Option {
	return []generic.Option{
		generic.WithResyncInterval(0),
		generic.WithPublishRateLimit(0, 0),
		generic.WithObserver(obs),
		generic.WithErrorHandler(quiet),
		generic.WithLogger(testLogger()),
	}
}

type sourceSide struct {
	client  *generic.SourceClient[*widget]
	store   *store
	obs     *counter
	mu      sync.Mutex
	handled map[string]int                 // statuses received per resource ID
	orders  map[string]generic.StatusOrder // the last status's order per resource ID, as its handler saw it
}

func (s *sourceSide) order(uid string) generic.StatusOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orders[uid]
}

func (s *sourceSide) calls(uid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handled[uid]
}

// close stops the source, as a crash or a restart does.
func (s *sourceSide) close(t testing.TB) { closeClient(t, s.client.Close) }

// startSource starts a source whose handler records statuses in its store.
func startSource(t testing.TB, id string, tr options.Transport, st *store, opts ...generic.SourceOption) *sourceSide {
	t.Helper()
	obs := newCounter()
	all := []generic.SourceOption{}
	for _, o := range testOpts(obs) {
		all = append(all, o)
	}
	all = append(all, opts...)
	c, err := generic.NewSourceClient[*widget](id, tr, st, hashWidget, []generic.Codec[*widget]{widgetCodec{}}, all...)
	if err != nil {
		t.Fatal(err)
	}
	side := &sourceSide{client: c, store: st, obs: obs, handled: map[string]int{}, orders: map[string]generic.StatusOrder{}}
	if err := c.Subscribe(func(ctx context.Context, _ types.EventType, got *widget) error {
		order, _ := generic.StatusOrderFrom(ctx)
		side.mu.Lock()
		side.handled[string(got.UID)]++
		side.orders[string(got.UID)] = order
		side.mu.Unlock()
		w, ok := st.get(string(got.UID))
		if !ok {
			return nil
		}
		w.Status = got.Status
		st.put(w)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	return side
}

type agentSide struct {
	client  *generic.AgentClient[*widget]
	store   *store
	obs     *counter
	mu      sync.Mutex
	handled map[string]int // handler calls per resource ID
}

// close stops the agent, as a crash or a restart does.
func (a *agentSide) close(t testing.TB) { closeClient(t, a.client.Close) }

func (a *agentSide) calls(uid string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handled[uid]
}

// startAgent starts an agent whose handler applies specs to its store.
func startAgent(t testing.TB, tr options.Transport, cluster string, st *store, opts ...generic.AgentOption) *agentSide {
	t.Helper()
	return startAgentWith(t, tr, cluster, st, st, opts...)
}

// startAgentWith starts an agent that lists through lister.
func startAgentWith(t testing.TB, tr options.Transport, cluster string, st *store, lister generic.Lister[*widget], opts ...generic.AgentOption) *agentSide {
	t.Helper()
	obs := newCounter()
	all := []generic.AgentOption{}
	for _, o := range testOpts(obs) {
		all = append(all, o)
	}
	all = append(all, opts...)
	c, err := generic.NewAgentClient[*widget](cluster, tr, lister, hashWidget, []generic.Codec[*widget]{widgetCodec{}}, all...)
	if err != nil {
		t.Fatal(err)
	}
	a := &agentSide{client: c, store: st, obs: obs, handled: map[string]int{}}
	if err := c.Subscribe(func(_ context.Context, et types.EventType, got *widget) error {
		a.mu.Lock()
		a.handled[string(got.UID)]++
		a.mu.Unlock()
		if et.Action == types.DeleteRequest {
			st.remove(string(got.UID))
			return nil
		}
		// The status is the agent's own: a spec, even one sent again, does
		// not reset it.
		if cur, ok := st.get(string(got.UID)); ok {
			got.Status = cur.Status
		}
		st.put(got)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	return a
}

func startClient(t testing.TB, start, close func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, close) })
}

func closeClient(t testing.TB, close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// eventually polls cond until it holds. The deadline is generous: every
// transport's scenarios run at once, under the race detector, on 2 cores.
// The poll interval grows, so checking is not what eats the CPU.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 100*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(wait)
	}
}

// sameSpecs reports whether the agent holds exactly the source's widgets for
// cluster, at the source's versions.
func sameSpecs(source, agent *store, cluster string) func() bool {
	return func() bool {
		want, _ := source.List(generic.ListOptions{ClusterName: cluster})
		got, _ := agent.List(generic.ListOptions{ClusterName: cluster})
		if len(want) != len(got) {
			return false
		}
		for i := range want {
			if want[i].UID != got[i].UID || want[i].Generation != got[i].Generation || want[i].Spec != got[i].Spec {
				return false
			}
		}
		return true
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	tr := b.Transport()
	c, err := generic.NewSourceClient[*widget](src, tr, newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}}, generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := newWidget(src, "c1", "a", "s", 1)
	if err := c.Healthy(); !errors.Is(err, generic.ErrNotStarted) {
		t.Errorf("Healthy before Start: %v, want ErrNotStarted", err)
	}
	if err := c.Publish(ctx, specCreate, w); !errors.Is(err, generic.ErrNotStarted) {
		t.Errorf("Publish before Start: %v, want ErrNotStarted", err)
	}
	if err := c.Resync(ctx, types.DataType{}); !errors.Is(err, generic.ErrNotStarted) {
		t.Errorf("Resync before Start: %v, want ErrNotStarted", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy after Start: %v", err)
	}
	tr.Disconnect()
	if err := c.Healthy(); !errors.Is(err, options.ErrNotConnected) {
		t.Errorf("Healthy while disconnected: %v, want options.ErrNotConnected", err)
	}
	tr.Reconnect()
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy after reconnecting: %v", err)
	}
	if err := c.Start(ctx); !errors.Is(err, generic.ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	if err := c.Subscribe(func(context.Context, types.EventType, *widget) error { return nil }); !errors.Is(err, generic.ErrStarted) {
		t.Errorf("Subscribe after Start: %v, want ErrStarted", err)
	}
	if err := c.Publish(ctx, statusUpdate, w); !errors.Is(err, generic.ErrWrongEventType) {
		t.Errorf("source publishing status: %v, want ErrWrongEventType", err)
	}
	other := types.EventType{DataType: types.DataType{Group: "a.b", Version: "v1", Resource: "cs"}, SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	if err := c.Publish(ctx, other, w); !errors.Is(err, generic.ErrUnknownDataType) {
		t.Errorf("unknown data type: %v, want ErrUnknownDataType", err)
	}
	if err := c.Resync(ctx, types.DataType{}); err != nil {
		t.Errorf("Resync: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Publish(ctx, specCreate, w); !errors.Is(err, generic.ErrClosed) {
		t.Errorf("Publish after Close: %v, want ErrClosed", err)
	}
	if err := c.Start(ctx); !errors.Is(err, generic.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	if err := c.Healthy(); !errors.Is(err, generic.ErrClosed) {
		t.Errorf("Healthy after Close: %v, want ErrClosed", err)
	}
}

// connectCounter is a Lister told of every connect
// (generic.ConnectionWatcher).
type connectCounter struct {
	*store
	connects chan struct{}
}

func (c connectCounter) Connected() { c.connects <- struct{}{} }

// A Lister that watches the connection is told of the first connect and of
// every reconnect, as many times as they happen.
func TestAListerIsToldOfEveryConnect(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	tr := b.Transport()
	lister := connectCounter{store: newStore(), connects: make(chan struct{}, 10)}
	c, err := generic.NewAgentClient[*widget]("c1", tr, lister, hashWidget, []generic.Codec[*widget]{widgetCodec{}}, generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	const reconnects = 3
	timeout := time.After(time.Minute)
	for i := range 1 + reconnects {
		select {
		case <-lister.connects:
		case <-timeout:
			t.Fatalf("the lister was told of %d connects, want %d", i, 1+reconnects)
		}
		if i < reconnects {
			tr.Disconnect()
			tr.Reconnect()
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(lister.connects); n != 0 {
		t.Errorf("the lister was told of %d connects more than happened", n)
	}
}

// refusingTransport fails every Start, as a broker that refuses the
// client does.
type refusingTransport struct{ options.Transport }

func (refusingTransport) Start(context.Context, []options.Subscription, options.Receiver) error {
	return errors.New("not authorized")
}

// A client whose Start failed is closed for good, and Healthy says so and
// why, not just that it is closed.
func TestAFailedStartIsFinal(t *testing.T) {
	t.Parallel()
	c, err := generic.NewSourceClient[*widget](src, refusingTransport{memory.NewBroker().Transport()}, newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}}, generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err == nil {
		t.Fatal("Start succeeded over a transport that refuses it")
	}
	want := "source client: client closed by its failed Start, for good (a new client can start again): start source client: not authorized"
	if err := c.Healthy(); !errors.Is(err, generic.ErrClosed) || err.Error() != want {
		t.Errorf("Healthy after a failed Start: %v\nwant: %s", err, want)
	}
	if err := c.Start(ctx); !errors.Is(err, generic.ErrClosed) {
		t.Errorf("Start again: %v, want ErrClosed", err)
	}
}

func TestConstructorsReportEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := generic.NewSourceClient[*widget]("bad/id", nil, nil, nil, nil, generic.WithWorkers(0), generic.WithResyncInterval(-1))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"source ID", "transport is nil", "lister is nil", "status hash getter is nil", "codecs: none given", "workers", "resync interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	for _, opts := range [][]generic.SourceOption{
		{generic.WithSpecResend(-time.Second)},
		{generic.WithSpecWindow(-1)},
		{generic.WithSpecWindow(100), generic.WithSpecResend(0)},
		{generic.WithDeliveryCheck(-time.Second)},
	} {
		if _, err := generic.NewSourceClient[*widget]("hub", memory.NewBroker().Transport(), newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}}, opts...); err == nil {
			t.Errorf("%d options: no error", len(opts))
		}
	}
	_, err = generic.NewAgentClient[*widget]("c1", memory.NewBroker().Transport(), newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}, widgetCodec{}})
	if err == nil || !strings.Contains(err.Error(), "second codec") {
		t.Errorf("duplicate codec: %v", err)
	}
	_, err = generic.NewAgentClient[*widget](options.ProbePeer, memory.NewBroker().Transport(), newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}})
	if err == nil || !strings.Contains(err.Error(), "peer of probes") {
		t.Errorf("an agent named after the probes' peer: %v", err)
	}
}

func testLogger() logr.Logger {
	if os.Getenv("WORKWIRE_TEST_LOG") != "" {
		return funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), prefix, args) }, funcr.Options{Verbosity: 4})
	}
	return logr.Discard()
}

func TestAPanickingHandlerCostsOneEvent(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hubStore := newStore()
	hub := startSource(t, src, b.Transport(), hubStore)
	st := newStore()
	c, err := generic.NewAgentClient[*widget]("cluster1", b.Transport(), st, hashWidget, []generic.Codec[*widget]{widgetCodec{}},
		generic.WithResyncInterval(0), generic.WithMaxRetries(1), generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(func(_ context.Context, _ types.EventType, got *widget) error {
		if got.Spec == "poison" {
			panic("the handler cannot take this")
		}
		st.put(got)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	for _, spec := range []string{"poison", "fine"} {
		w := newWidget(src, "cluster1", spec, spec, 1)
		hubStore.put(w)
		if err := hub.client.Publish(context.Background(), specCreate, w); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the event after the poison", func() bool { _, ok := st.get("uid-cluster1-fine"); return ok })
}

// A delete storm does not starve creates: deletes and creates have lanes of
// their own, served in turn.
func TestDeleteStormDoesNotStarveCreates(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	raw := b.Transport()
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)
	var mu sync.Mutex
	var order []string
	release := make(chan struct{})
	obs := newCounter()
	c, err := generic.NewAgentClient[*widget]("cluster1", b.Transport(), newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}},
		generic.WithResyncInterval(0), generic.WithWorkers(1), generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()),
		generic.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(func(_ context.Context, et types.EventType, got *widget) error {
		<-release // hold the one worker until the storm is queued
		mu.Lock()
		order = append(order, string(et.Action))
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	route := options.Route{Role: options.RoleSpec, Source: src, Cluster: "cluster1"}
	send := func(name string, action types.Action) {
		w := newWidget(src, "cluster1", name, "s", 1)
		evt, err := widgetCodec{}.Encode(src, types.EventType{DataType: widgets, SubResource: types.SubResourceSpec, Action: action}, w)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Send(context.Background(), route, evt); err != nil {
			t.Fatal(err)
		}
	}
	const deletes, creates = 10000, 10
	for i := range deletes {
		send(fmt.Sprint("old-", i), types.DeleteRequest)
	}
	for i := range creates {
		send(fmt.Sprint("new-", i), types.CreateRequest)
	}
	// Everything is queued behind the one held worker before it goes on.
	eventually(t, "the storm queued", func() bool {
		return obs.received("spec.delete_request") == deletes && obs.received("spec.create_request") == creates
	})
	close(release)
	eventually(t, "every create handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range order {
			if a == string(types.CreateRequest) {
				n++
			}
		}
		return n == creates
	})
	mu.Lock()
	defer mu.Unlock()
	last := 0 // how many events were handled up to the last create
	for i, a := range order {
		if a == string(types.CreateRequest) {
			last = i + 1
		}
	}
	// Lanes alternate, so the last create comes within about twice as many
	// events as there are creates, not after 10,000 deletes.
	if last > 2*creates+2 {
		t.Errorf("the last create was event %d of the storm", last)
	}
	t.Logf("%d deletes queued; the last of %d creates was handled as event %d", deletes, creates, last)
}

// Publish reports a codec's failure, whatever the codec's error, as
// ErrEncode, so callers know that publishing the same resource again
// cannot succeed.
func TestPublishReportsEncodeFailures(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	c, err := generic.NewSourceClient[*widget](src, b.Transport(), newStore(), hashWidget, []generic.Codec[*widget]{refusingCodec{}},
		generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()), generic.WithResyncInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	err = c.Publish(context.Background(), specCreate, newWidget(src, "c1", "a", "s", 1))
	if !errors.Is(err, generic.ErrEncode) || !strings.Contains(err.Error(), "the codec's own reason") {
		t.Errorf("Publish with a codec that cannot encode: %v, want ErrEncode with the codec's reason", err)
	}
}

// An event a codec builds that is no CloudEvent is refused before the
// wire, as ErrInvalidEvent (the transport checks it, once), and the agent
// gets nothing.
func TestPublishRefusesAnInvalidEvent(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	agent := startAgent(t, b.Transport(), "c1", newStore())
	c, err := generic.NewSourceClient[*widget](src, b.Transport(), newStore(), hashWidget, []generic.Codec[*widget]{idlessCodec{}},
		generic.WithErrorHandler(quiet), generic.WithLogger(testLogger()), generic.WithResyncInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	w := newWidget(src, "c1", "a", "s", 1)
	if err := c.Publish(context.Background(), specCreate, w); !errors.Is(err, options.ErrInvalidEvent) {
		t.Errorf("Publish of an event without an ID: %v, want ErrInvalidEvent", err)
	}
	if n := agent.calls(string(w.UID)); n != 0 {
		t.Errorf("the agent handled it %d times", n)
	}
}

// A source that holds no status at all sends an empty status resync
// request, which asks for every status, rather than an entry per object to
// every agent; one that holds some sends every entry, NoStatus included,
// and agents answer for both kinds; one whose works are of more than a few
// clusters asks for every status again.
func TestASourceWithoutStatusesAsksForEveryStatus(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	agentStore := newStore()
	hubStore := newStore()
	for i := range 3 {
		w := newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1)
		hubStore.put(w.copy())
		w.Status = "applied"
		agentStore.put(w)
	}
	startAgent(t, b.Transport(), "cluster1", agentStore)
	requests := func(spy *spyTransport) []types.StatusHashList {
		var out []types.StatusHashList
		for _, evt := range spy.sentEvents() {
			if evt.Type() == widgets.String()+".status.resync_request" {
				l, err := types.DecodeStatusHashList(evt.Data())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, l)
			}
		}
		return out
	}
	statuses := func(st *store) int {
		n := 0
		all, _ := st.List(generic.ListOptions{})
		for _, w := range all {
			if w.Status == "applied" {
				n++
			}
		}
		return n
	}

	spy := &spyTransport{Transport: b.Transport()}
	hub := startSource(t, src, spy, hubStore)
	eventually(t, "every status at the source", func() bool { return statuses(hubStore) == 3 })
	if got := requests(spy); len(got) != 1 || len(got[0].StatusHashes) != 0 {
		t.Errorf("a source with no status sent %v, want one empty request", got)
	}
	hub.close(t)

	// One status known, two not: every entry goes, and the agent sends the
	// two the source lacks.
	held, _ := hubStore.List(generic.ListOptions{})
	for i, w := range held {
		if i > 0 {
			w.Status = ""
			hubStore.put(w)
		}
	}
	spy = &spyTransport{Transport: b.Transport()}
	startSource(t, src, spy, hubStore)
	eventually(t, "every status at the source again", func() bool { return statuses(hubStore) == 3 })
	got := requests(spy)
	if len(got) != 1 || len(got[0].StatusHashes) != 3 {
		t.Fatalf("a source with one status of three sent %v, want one request of 3 entries", got)
	}
	noStatus := 0
	for _, e := range got[0].StatusHashes {
		if e.StatusHash == generic.NoStatus {
			noStatus++
		}
	}
	if noStatus != 2 {
		t.Errorf("%d entries of NoStatus, want 2", noStatus)
	}

	// Works of nine clusters: the hashes would go to every agent, each
	// needing an eighth of them or less; it asks for every status instead.
	for i := range 8 {
		w := newWidget(src, fmt.Sprint("other", i), "w", "s", 1)
		w.Status = "applied"
		hubStore.put(w)
	}
	spy = &spyTransport{Transport: b.Transport()}
	startSource(t, src, spy, hubStore)
	eventually(t, "a status resync request", func() bool { return len(requests(spy)) > 0 })
	if got := requests(spy); len(got) != 1 || len(got[0].StatusHashes) != 0 {
		t.Errorf("a source with works of 9 clusters sent %v, want one empty request", got)
	}
}

// gatedLister lists its store, and while armed, lists it and then waits
// for release before it returns: a List that read before a change and
// returns after it.
type gatedLister struct {
	st      *store
	mu      sync.Mutex
	armed   chan struct{} // closed to release; nil while not armed
	waiting atomic.Int32
}

func (l *gatedLister) List(opts generic.ListOptions) ([]*widget, error) {
	objs, err := l.st.List(opts)
	l.mu.Lock()
	release := l.armed
	l.mu.Unlock()
	if release != nil {
		l.waiting.Add(1)
		<-release
	}
	return objs, err
}

func (l *gatedLister) arm() { l.mu.Lock(); l.armed = make(chan struct{}); l.mu.Unlock() }

func (l *gatedLister) release() { l.mu.Lock(); close(l.armed); l.armed = nil; l.mu.Unlock() }

// An agent answers a status resync from what it listed when the request
// came. A status it publishes after that List is newer, and the answer,
// though sent later, does not overwrite it at the source.
func TestAStaleResyncAnswerDoesNotOverwriteANewerStatus(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	w := newWidget(src, "cluster1", "w", "s", 1)
	// The hub first, so that the widget reaches the agent once, in answer
	// to the agent's spec resync, and nothing else is under way when the
	// test begins: a later copy of the spec would reset the agent's status
	// (this agent's handler stores specs whole).
	hub := startSource(t, src, b.Transport(), newStore(w))
	agentStore := newStore()
	lister := &gatedLister{st: agentStore}
	agent := startAgentWith(t, b.Transport(), "cluster1", agentStore, lister)
	ctx := context.Background()
	eventually(t, "the agent holds the widget", func() bool { _, ok := agentStore.get(string(w.UID)); return ok })

	// A status resync whose answer reads the widget without a status, and
	// is held until a newer status has gone out and arrived.
	lister.arm()
	if err := hub.client.Resync(ctx, widgets); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent listing for its answer", func() bool { return lister.waiting.Load() > 0 })
	got, _ := agentStore.get(string(w.UID))
	got.Status = "Applied"
	agentStore.put(got)
	if err := agent.client.Publish(ctx, statusUpdate, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the source has the status", func() bool { s, _ := hub.store.get(string(w.UID)); return s.Status == "Applied" })
	dropped, handled := hub.obs.drops(generic.DropOutOfOrder), hub.calls(string(w.UID))
	lister.release()
	eventually(t, "the stale answer at the source", func() bool {
		return hub.obs.drops(generic.DropOutOfOrder) > dropped || hub.calls(string(w.UID)) > handled
	})
	if s, _ := hub.store.get(string(w.UID)); s.Status != "Applied" {
		t.Errorf("the source's status is %q: the stale answer overwrote Applied", s.Status)
	}
}
