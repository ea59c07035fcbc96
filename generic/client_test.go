package generic_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	mu      sync.Mutex
	dropped map[generic.DropReason]int
	sent    map[string]int
	recv    map[string]int
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
		generic.WithLogger(logr.Discard()),
	}
}

type sourceSide struct {
	client *generic.SourceClient[*widget]
	store  *store
	obs    *counter
}

// startSource starts a source whose handler records statuses in its store.
func startSource(t *testing.T, tr options.Transport, st *store, opts ...generic.SourceOption) *sourceSide {
	t.Helper()
	obs := newCounter()
	all := []generic.SourceOption{}
	for _, o := range testOpts(obs) {
		all = append(all, o)
	}
	all = append(all, opts...)
	c, err := generic.NewSourceClient[*widget](src, tr, st, hashWidget, []generic.Codec[*widget]{widgetCodec{}}, all...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(func(_ context.Context, _ types.EventType, got *widget) error {
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
	return &sourceSide{client: c, store: st, obs: obs}
}

type agentSide struct {
	client  *generic.AgentClient[*widget]
	store   *store
	obs     *counter
	mu      sync.Mutex
	handled map[string]int // handler calls per resource ID
}

func (a *agentSide) calls(uid string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handled[uid]
}

// startAgent starts an agent whose handler applies specs to its store.
func startAgent(t *testing.T, tr options.Transport, cluster string, st *store, opts ...generic.AgentOption) *agentSide {
	t.Helper()
	return startAgentWith(t, tr, cluster, st, st, opts...)
}

// startAgentWith starts an agent that lists through lister.
func startAgentWith(t *testing.T, tr options.Transport, cluster string, st *store, lister generic.Lister[*widget], opts ...generic.AgentOption) *agentSide {
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
		st.put(got)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	return a
}

func startClient(t *testing.T, start, close func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
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

func TestPublishSubscribeBothWays(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	w := newWidget(src, "cluster1", "a", "spec-1", 1)
	hub := startSource(t, b.Transport(), newStore(w))
	agent := startAgent(t, b.Transport(), "cluster1", newStore())

	ctx := context.Background()
	if err := hub.client.Publish(ctx, specCreate, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent holds the widget", func() bool {
		got, ok := agent.store.get(string(w.UID))
		return ok && got.Spec == "spec-1" && got.Annotations[sourceAnnotation] == src
	})

	got, _ := agent.store.get(string(w.UID))
	got.Status = "Applied"
	agent.store.put(got)
	if err := agent.client.Publish(ctx, statusUpdate, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "source sees the status", func() bool {
		got, _ := hub.store.get(string(w.UID))
		return got.Status == "Applied"
	})

	w.Spec, w.Generation = "spec-2", 2
	hub.store.put(w)
	if err := hub.client.Publish(ctx, specUpdate, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent holds the update", func() bool {
		got, _ := agent.store.get(string(w.UID))
		return got.Spec == "spec-2" && got.Generation == 2
	})

	w.DeletionTimestamp, w.Generation = &metav1.Time{Time: time.Now()}, 3
	if err := hub.client.Publish(ctx, specDelete, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent deleted the widget", func() bool { return agent.store.len() == 0 })
}

func TestSpecResyncWhenAgentStartsLate(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hubStore := newStore()
	for i := range 5 {
		hubStore.put(newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1))
	}
	for i := range 3 {
		hubStore.put(newWidget(src, "cluster2", fmt.Sprint("w", i), "s", 1))
	}
	startSource(t, b.Transport(), hubStore)
	agent := startAgent(t, b.Transport(), "cluster1", newStore())
	eventually(t, "agent holds cluster1's widgets", sameSpecs(hubStore, agent.store, "cluster1"))
	if n := agent.store.len(); n != 5 {
		t.Fatalf("agent holds %d widgets, want 5 (none of cluster2's)", n)
	}
}

// sourcesStore is an agent store that names its sources (generic.SourceLister).
type sourcesStore struct{ *store }

func (s sourcesStore) Sources(cluster string) ([]string, error) {
	ws, err := s.List(generic.ListOptions{ClusterName: cluster})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.Annotations[sourceAnnotation])
	}
	return out, nil
}

func TestSpecResyncFixesStaleAndOrphanResources(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	stale := newWidget(src, "cluster1", "stale", "new", 3)
	current := newWidget(src, "cluster1", "current", "same", 2)
	deleting := newWidget(src, "cluster1", "deleting", "x", 2)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	missing := newWidget(src, "cluster1", "missing", "m", 1)
	hubStore := newStore(stale, current, deleting, missing)

	oldStale := stale.copy()
	oldStale.Spec, oldStale.Generation = "old", 1
	orphan := newWidget(src, "cluster1", "orphan", "o", 4)
	otherSources := newWidget("other-hub", "cluster1", "theirs", "t", 1)
	agentStore := newStore(oldStale, current, deleting, orphan, otherSources)

	hub := startSource(t, b.Transport(), hubStore)
	agent := startAgent(t, b.Transport(), "cluster1", agentStore)

	eventually(t, "agent converges", func() bool {
		got, ok := agentStore.get(string(stale.UID))
		_, orphanLeft := agentStore.get(string(orphan.UID))
		_, deletingLeft := agentStore.get(string(deleting.UID))
		_, missingThere := agentStore.get(string(missing.UID))
		return ok && got.Spec == "new" && got.Generation == 3 && !orphanLeft && !deletingLeft && missingThere
	})
	if n := agent.calls(string(current.UID)); n != 0 {
		t.Errorf("the up-to-date widget was sent %d times, want 0", n)
	}
	if n := hub.obs.sends("spec.delete_request"); n < 2 {
		t.Errorf("source sent %d deletes, want at least 2 (the orphans and the deleting widget)", n)
	}
}

func TestSpecResyncNeverDeletesAnotherSourcesResources(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hubStore := newStore(newWidget(src, "cluster1", "mine", "m", 1))
	orphan := newWidget(src, "cluster1", "orphan", "o", 1)
	theirs := newWidget("other-hub", "cluster1", "theirs", "t", 1)
	agentStore := newStore(orphan, theirs)

	startSource(t, b.Transport(), hubStore)
	startAgentWith(t, b.Transport(), "cluster1", agentStore, sourcesStore{agentStore})
	eventually(t, "orphan deleted and mine created", func() bool {
		_, orphanLeft := agentStore.get(string(orphan.UID))
		_, mine := agentStore.get("uid-cluster1-mine")
		return !orphanLeft && mine
	})
	if _, ok := agentStore.get(string(theirs.UID)); !ok {
		t.Fatal("the other source's widget was deleted")
	}
}

func TestStatusResyncWhenSourceRestarts(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	var hubWidgets, agentWidgets []*widget
	for i := range 3 {
		w := newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1)
		hubWidgets = append(hubWidgets, w.copy())
		w.Status = fmt.Sprint("status-", i)
		agentWidgets = append(agentWidgets, w)
	}
	hubWidgets[1].Status = "status-1" // already up to date: must not be resent
	agent := startAgent(t, b.Transport(), "cluster1", newStore(agentWidgets...))
	hubStore := newStore(hubWidgets...)
	hub := startSource(t, b.Transport(), hubStore)

	eventually(t, "source has every status", func() bool {
		ws, _ := hubStore.List(generic.ListOptions{})
		for i, w := range ws {
			if w.Status != fmt.Sprint("status-", i) {
				return false
			}
		}
		return true
	})
	eventually(t, "agent answered the status resync", func() bool { return agent.obs.sends("status.update_request") >= 2 })
	if n := agent.obs.sends("status.update_request"); n != 2 {
		t.Errorf("agent sent %d statuses, want 2 (one hash matched)", n)
	}
	_ = hub
}

func TestReconnectResyncsWhatWasMissed(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hubStore := newStore()
	hub := startSource(t, b.Transport(), hubStore)
	agentTr := b.Transport()
	agent := startAgent(t, agentTr, "cluster1", newStore())

	agentTr.Disconnect()
	for i := range 10 {
		w := newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		if err := hub.client.Publish(context.Background(), specCreate, w); err != nil {
			t.Fatal(err)
		}
	}
	if n := agent.store.len(); n != 0 {
		t.Fatalf("a disconnected agent received %d widgets", n)
	}
	agentTr.Reconnect()
	eventually(t, "agent caught up after reconnect", sameSpecs(hubStore, agent.store, "cluster1"))
}

func TestBrokerRestartMidStreamLosesNothing(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hubStore := newStore()
	hub := startSource(t, b.Transport(), hubStore)
	agent := startAgent(t, b.Transport(), "cluster1", newStore())

	for i := range 500 {
		w := newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		err := hub.client.Publish(context.Background(), specCreate, w)
		if err != nil && !errors.Is(err, options.ErrNotConnected) {
			t.Fatal(err)
		}
		if i == 250 {
			b.Restart()
		}
	}
	eventually(t, "agent holds all 500", sameSpecs(hubStore, agent.store, "cluster1"))
}

func TestMalformedEventsDoNotStopTheSubscription(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	agent := startAgent(t, b.Transport(), "cluster1", newStore())
	route := options.Route{Role: options.RoleSpec, Source: src, Cluster: "cluster1"}
	good := newWidget(src, "cluster1", "good", "s", 1)

	raw := b.Transport()
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)

	b.SendRaw(route, []byte("not json at all"))
	b.SendRaw(route, []byte(`{"specversion":"1.0","id":"1","source":"x","type":"bogus"}`))
	for _, mutate := range []func(e *cloudevents.Event){
		func(e *cloudevents.Event) { e.SetType("io.example.widgets.v1.widgets.spec.explode") },
		func(e *cloudevents.Event) { e.SetType("io.example.other.v1.things.spec.create_request") },
		func(e *cloudevents.Event) { e.SetExtension(types.ExtResourceID, nil) },
		func(e *cloudevents.Event) { e.SetExtension(types.ExtResourceVersion, "abc") },
		func(e *cloudevents.Event) { e.SetExtension(types.ExtClusterName, "cluster2") },
		func(e *cloudevents.Event) { _ = e.SetData(cloudevents.ApplicationJSON, []int{1, 2}) },
	} {
		evt, err := widgetCodec{}.Encode(src, specCreate, newWidget(src, "cluster1", "bad", "s", 1))
		if err != nil {
			t.Fatal(err)
		}
		mutate(evt)
		if err := raw.Send(context.Background(), route, evt); err != nil {
			t.Fatal(err)
		}
	}
	evt, err := widgetCodec{}.Encode(src, specCreate, good)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Send(context.Background(), route, evt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the good event after the bad ones", func() bool {
		_, ok := agent.store.get(string(good.UID))
		return ok
	})
	if _, ok := agent.store.get("uid-cluster1-bad"); ok {
		t.Error("a malformed event was applied")
	}
	for reason, want := range map[generic.DropReason]int{
		generic.DropMalformed: 5, generic.DropUnknownDataType: 1, generic.DropForeign: 1, generic.DropDecode: 1,
	} {
		eventually(t, fmt.Sprintf("%d %s drops", want, reason), func() bool { return agent.obs.drops(reason) == want })
	}
}

type nopReceiver struct{}

func (nopReceiver) Deliver(d *options.Delivery) { d.Done() }
func (nopReceiver) Malformed(error)             {}
func (nopReceiver) Connected()                  {}

func TestStaleAndForeignSpecsAreDropped(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	agentStore := newStore()
	agent := startAgent(t, b.Transport(), "cluster1", agentStore)
	raw := b.Transport()
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)

	send := func(source string, gen int64, spec string) {
		w := newWidget(source, "cluster1", "a", spec, gen)
		evt, err := widgetCodec{}.Encode(source, specUpdate, w)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: source, Cluster: "cluster1"}, evt); err != nil {
			t.Fatal(err)
		}
	}
	send(src, 3, "v3")
	eventually(t, "v3 applied", func() bool { w, ok := agentStore.get("uid-cluster1-a"); return ok && w.Spec == "v3" })
	send(src, 2, "v2") // stale
	eventually(t, "stale dropped", func() bool { return agent.obs.drops(generic.DropStale) == 1 })
	send("intruder", 9, "evil") // another source claiming the resource
	eventually(t, "foreign dropped", func() bool { return agent.obs.drops(generic.DropForeign) == 1 })
	send(src, 3, "v3-again") // same version: idempotent, applied
	eventually(t, "same version re-applied", func() bool { w, _ := agentStore.get("uid-cluster1-a"); return w.Spec == "v3-again" })
}

func TestOutOfOrderStatusIsDropped(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	w := newWidget(src, "cluster1", "a", "s", 2)
	hubStore := newStore(w)
	hub := startSource(t, b.Transport(), hubStore)
	raw := b.Transport()
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)

	send := func(gen int64, seq string, status string) {
		s := w.copy()
		s.Generation, s.Status = gen, status
		evt, err := widgetCodec{}.Encode("cluster1", statusUpdate, s)
		if err != nil {
			t.Fatal(err)
		}
		evt.SetExtension(types.ExtSequenceID, seq)
		if err := raw.Send(context.Background(), options.Route{Role: options.RoleStatus, Source: src, Cluster: "cluster1"}, evt); err != nil {
			t.Fatal(err)
		}
	}
	send(2, "100", "second")
	eventually(t, "first status", func() bool { got, _ := hubStore.get(string(w.UID)); return got.Status == "second" })
	// Each send waits for the previous one to be handled: queued events for
	// one resource merge, newest first, before they reach this check.
	send(2, "50", "first-late") // older sequence, same version: dropped
	eventually(t, "older sequence dropped", func() bool { return hub.obs.drops(generic.DropOutOfOrder) == 1 })
	send(1, "200", "old-gen") // older resource version: dropped
	eventually(t, "older version dropped", func() bool { return hub.obs.drops(generic.DropOutOfOrder) == 2 })
	send(3, "10", "new-gen") // newer resource version wins whatever its sequence
	eventually(t, "newer generation applied", func() bool { got, _ := hubStore.get(string(w.UID)); return got.Status == "new-gen" })
	if got, _ := hubStore.get(string(w.UID)); got.Status != "new-gen" {
		t.Errorf("status %q", got.Status)
	}
}

func TestLargeResyncIsBatched(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	const n = 2500
	hubStore := newStore()
	agentStore := newStore()
	for i := range n {
		w := newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		if i%2 == 0 {
			agentStore.put(w) // the agent already holds half
		}
	}
	startSource(t, b.Transport(), hubStore)
	spy := &spyTransport{Transport: b.Transport()}
	agent := startAgent(t, spy, "cluster1", agentStore)
	eventually(t, "agent holds all", sameSpecs(hubStore, agentStore, "cluster1"))
	for i := range n {
		if uid := fmt.Sprint("uid-cluster1-w", i); i%2 == 0 && agent.calls(uid) != 0 {
			t.Fatalf("%s was sent although the agent held it", uid)
		}
	}
	batches := 0
	for _, evt := range spy.sentEvents() {
		if evt.Type() != "io.example.widgets.v1.widgets.spec.resync_request" {
			continue
		}
		batches++
		l, err := types.DecodeResourceVersionList(evt.Data())
		if err != nil {
			t.Fatal(err)
		}
		if len(l.ResourceVersions) > types.MaxBatchEntries || len(evt.Data()) > types.MaxBatchBytes {
			t.Errorf("batch of %d entries, %d bytes", len(l.ResourceVersions), len(evt.Data()))
		}
	}
	if batches < 2 {
		t.Errorf("%d entries went out in %d spec resync events, want at least 2", n/2, batches)
	}
}

// spyTransport records what it sends.
type spyTransport struct {
	options.Transport
	mu   sync.Mutex
	sent []*cloudevents.Event
}

func (s *spyTransport) Send(ctx context.Context, r options.Route, evt *cloudevents.Event) error {
	s.mu.Lock()
	c := evt.Clone()
	s.sent = append(s.sent, &c)
	s.mu.Unlock()
	return s.Transport.Send(ctx, r, evt)
}

func (s *spyTransport) sentEvents() []*cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*cloudevents.Event(nil), s.sent...)
}

func TestFailingHandlerIsRetried(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	w := newWidget(src, "cluster1", "a", "s", 1)
	hub := startSource(t, b.Transport(), newStore(w))
	obs := newCounter()
	st := newStore()
	c, err := generic.NewAgentClient[*widget]("cluster1", b.Transport(), st, hashWidget, []generic.Codec[*widget]{widgetCodec{}},
		generic.WithResyncInterval(0), generic.WithObserver(obs), generic.WithErrorHandler(quiet))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	if err := c.Subscribe(func(_ context.Context, _ types.EventType, got *widget) error {
		if calls.Add(1) <= 2 {
			return errors.New("cluster API unavailable")
		}
		st.put(got)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	if err := hub.client.Publish(context.Background(), specCreate, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "applied after two failures", func() bool { return st.len() == 1 })
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	c, err := generic.NewSourceClient[*widget](src, b.Transport(), newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}}, generic.WithErrorHandler(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := newWidget(src, "c1", "a", "s", 1)
	if err := c.Publish(ctx, specCreate, w); !errors.Is(err, generic.ErrNotStarted) {
		t.Errorf("Publish before Start: %v, want ErrNotStarted", err)
	}
	if err := c.Resync(ctx, types.DataType{}); !errors.Is(err, generic.ErrNotStarted) {
		t.Errorf("Resync before Start: %v, want ErrNotStarted", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
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
	_, err = generic.NewAgentClient[*widget]("c1", memory.NewBroker().Transport(), newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}, widgetCodec{}})
	if err == nil || !strings.Contains(err.Error(), "second codec") {
		t.Errorf("duplicate codec: %v", err)
	}
}

func TestSingularDataTypeIsAccepted(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	agent := startAgent(t, b.Transport(), "cluster1", newStore())
	raw := b.Transport()
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)
	w := newWidget(src, "cluster1", "a", "s", 1)
	evt, err := widgetCodec{}.Encode(src, specCreate, w)
	if err != nil {
		t.Fatal(err)
	}
	evt.SetType("io.example.widgets.v1.widget.spec.create_request")
	evt.SetID(uuid.NewString())
	if err := raw.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: src, Cluster: "cluster1"}, evt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "singular type applied", func() bool { return agent.store.len() == 1 })
}
