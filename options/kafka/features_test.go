package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

const wait = 20 * time.Second

func start(t *testing.T, tr *kafka.Transport, subs []options.Subscription) *transporttest.Recorder {
	t.Helper()
	r := transporttest.NewRecorder()
	startWith(t, tr, subs, r)
	return r
}

func startWith(t *testing.T, tr *kafka.Transport, subs []options.Subscription, r options.Receiver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Start(ctx, subs, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeNow(t, tr) })
}

func closeNow(t testing.TB, tr options.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func send(t testing.TB, tr options.Transport, r options.Route, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Send(ctx, r, transporttest.NewEvent(id, "status.update_request")); err != nil {
		t.Fatalf("Send %s: %v", id, err)
	}
}

// holder is a receiver that acknowledges only the events hold lets go, like a
// client whose handlers have not finished.
type holder struct {
	*transporttest.Recorder
	hold func(id string) bool

	mu   sync.Mutex
	held []*options.Delivery
}

func newHolder(hold func(id string) bool) *holder {
	return &holder{Recorder: transporttest.NewRecorder(), hold: hold}
}

func (h *holder) Deliver(d *options.Delivery) {
	if h.hold(d.Event.ID()) {
		h.mu.Lock()
		h.held = append(h.held, d)
		h.mu.Unlock()
		// Recorded but not Done.
		h.Recorder.Deliver(options.NewDelivery(d.Route, d.Event, nil))
		return
	}
	h.Recorder.Deliver(d)
}

func ids(r *transporttest.Recorder) []string {
	var out []string
	for _, d := range r.Deliveries() {
		out = append(out, d.Event.ID())
	}
	return out
}

func has(r *transporttest.Recorder, id string) bool { return slices.Contains(ids(r), id) }

// An event that was delivered but not Done is delivered again to the next
// consumer of the group; one that was Done is not, and neither is one of
// another cluster that shares the partition.
func TestUndoneDeliveryIsRedeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs(), DrainTimeout: options.Duration(500 * time.Millisecond)}
	hub := newTransport(t, cfg)
	start(t, hub, nil)
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}

	first := newHolder(func(id string) bool { return id == "e2" })
	agent := newTransport(t, cfg)
	startWith(t, agent, options.AgentSubscriptions("c1", nil), first)
	for _, id := range []string{"e1", "e2", "e3"} {
		send(t, hub, route, id)
	}
	first.Wait(t, "three events", wait, func() bool { return len(first.Deliveries()) == 3 })
	closeNow(t, agent) // e2 never Done: the commit stops after e1

	second := transporttest.NewRecorder()
	again := newTransport(t, cfg)
	startWith(t, again, options.AgentSubscriptions("c1", nil), second)
	second.Wait(t, "e2 and e3 again", wait, func() bool { return has(second, "e2") && has(second, "e3") })
	send(t, hub, route, "e4")
	second.Wait(t, "e4", wait, func() bool { return has(second, "e4") })
	if got := ids(second); !slices.Equal(got, []string{"e2", "e3", "e4"}) {
		t.Errorf("the restarted agent received %v, want [e2 e3 e4] (e1 was Done and committed)", got)
	}
	if second.Connects() != 1 {
		t.Errorf("Connected %d times, want 1", second.Connects())
	}
}

// Two replicas of one source share its consumer group. Events that one
// replica had not finished when it left go to the other; nothing is lost
// through either rebalance.
func TestRebalanceBetweenSourceReplicasLosesNothing(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs(), DrainTimeout: options.Duration(300 * time.Millisecond)}
	agents := newTransport(t, cfg)
	start(t, agents, nil)
	subs := options.SourceSubscriptions("hub", nil)
	n := 0
	sendBatch := func(count int) {
		for range count {
			// Twenty clusters: the keys spread over every partition.
			send(t, agents, options.Route{Role: options.RoleStatus, Source: "hub", Cluster: fmt.Sprint("c", n%20)}, fmt.Sprint("s", n))
			n++
		}
	}
	// Replica A holds back every third status, as if its handlers were slow.
	ra := newHolder(func(id string) bool {
		var i int
		_, _ = fmt.Sscanf(id, "s%d", &i)
		return i%3 == 0
	})
	a := newTransport(t, cfg)
	startWith(t, a, subs, ra)
	sendBatch(60)

	rb := transporttest.NewRecorder()
	replica := newTransport(t, cfg)
	startWith(t, replica, subs, rb) // the group rebalances over both
	rb.Wait(t, "A rejoined after B joined", wait, func() bool { return a.Stats().Sessions >= 2 })
	sendBatch(60)
	union := func() map[string]bool {
		m := map[string]bool{}
		for _, id := range append(ids(ra.Recorder), ids(rb)...) {
			m[id] = true
		}
		return m
	}
	defer func() {
		if t.Failed() {
			u := union()
			var missing []string
			for i := range n {
				if !u[fmt.Sprint("s", i)] {
					missing = append(missing, fmt.Sprint("s", i))
				}
			}
			t.Logf("missing %v; A connects %d, B connects %d; A got %d, B got %d", missing, ra.Connects(), rb.Connects(), len(ids(ra.Recorder)), len(ids(rb)))
		}
	}()
	rb.Wait(t, "120 statuses between the replicas", wait, func() bool { return len(union()) == 120 })
	if len(ids(rb)) == 0 {
		t.Error("replica B got none of the statuses sent after it joined")
	}

	closeNow(t, a) // A leaves with its held statuses not Done
	sendBatch(60)
	rb.Wait(t, "B has every status A did not finish, and the new ones", wait, func() bool {
		for i := range n {
			id := fmt.Sprint("s", i)
			if i >= 120 || i%3 == 0 {
				if !has(rb, id) {
					return false
				}
			}
		}
		return true
	})
	if len(union()) != n {
		t.Errorf("%d distinct statuses arrived, want %d", len(union()), n)
	}
}

// A rebalance costs a resync only on the member it gives status partitions
// it did not read before: the replica already there, which only gives
// partitions up when another joins, resumes at its committed offsets and is
// not told; when the other leaves and its partitions come back, it resyncs.
func TestRebalanceResyncsOnlyTheMemberThatGainsPartitions(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs(), DrainTimeout: options.Duration(300 * time.Millisecond)}
	subs := options.SourceSubscriptions("hub", nil)
	a := newTransport(t, cfg)
	ra := start(t, a, subs)
	if got, want := a.Stats(), (kafka.Stats{Sessions: 1, Connects: 1}); got != want || ra.Connects() != 1 {
		t.Fatalf("after Start: stats %+v, Connected %d times; want %+v, once", got, ra.Connects(), want)
	}

	replica := newTransport(t, cfg)
	rb := start(t, replica, subs)
	ra.Wait(t, "A's session after B joined", wait, func() bool { return a.Stats().Sessions >= 2 })
	if got := a.Stats(); got.Connects != 1 || got.RebalanceResyncs != 0 || ra.Connects() != 1 {
		t.Errorf("A, which only gave partitions up: stats %+v, Connected %d times; want no resync", got, ra.Connects())
	}
	if got := replica.Stats(); got.Connects != 1 || rb.Connects() != 1 {
		t.Errorf("B after Start: stats %+v, Connected %d times", got, rb.Connects())
	}

	closeNow(t, replica)
	ra.Wait(t, "A takes B's partitions back", wait, func() bool { return a.Stats().Sessions >= 3 })
	if got := a.Stats(); got.Connects != 1 || got.RebalanceResyncs != 1 || ra.Connects() != 2 {
		t.Errorf("A, given B's partitions: stats %+v, Connected %d times; want one rebalance resync", got, ra.Connects())
	}
}

// An agent reads only the spec partition its cluster name hashes to, skips
// (and commits) the records of other clusters that share it, and commits
// what it handled.
func TestAgentReadsOnlyItsPartition(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs()}
	agent := newTransport(t, cfg)
	r := start(t, agent, options.AgentSubscriptions("c1", nil))

	info := b.Cluster().GroupInfo("workwire.agent.c1")
	if info == nil || len(info.Members) != 1 {
		t.Fatalf("group %+v", info)
	}
	mine := kafka.PartitionFor("c1", kafkatest.DefaultPartitions)
	if got := info.Members[0].Assignment[kafka.DefaultSpecTopic]; !slices.Equal(got, []int32{mine}) {
		t.Errorf("spec partitions %v, want only %d", got, mine)
	}
	if got := info.Members[0].Assignment[kafka.DefaultStatusResyncTopic]; len(got) != kafkatest.DefaultPartitions {
		t.Errorf("status resync partitions %v, want all", got)
	}

	neighbour := ""
	for i := 0; neighbour == ""; i++ {
		if c := fmt.Sprint("n", i); kafka.PartitionFor(c, kafkatest.DefaultPartitions) == mine {
			neighbour = c
		}
	}
	hub := newTransport(t, cfg)
	start(t, hub, nil)
	send(t, hub, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: neighbour}, "theirs")
	send(t, hub, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}, "mine")
	r.Wait(t, "my spec", wait, func() bool { return has(r, "mine") })
	if got := ids(r); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("received %v, want only mine", got)
	}
	d := r.Deliveries()[0]
	if d.Route != (options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}) {
		t.Errorf("route %+v", d.Route)
	}
	for _, ext := range []string{"kafkaoffset", "kafkapartition", "kafkatopic"} {
		if _, ok := d.Event.Extensions()[ext]; ok {
			t.Errorf("the binding's %s extension reached the receiver", ext)
		}
	}
	closeNow(t, agent) // commits
	info = b.Cluster().GroupInfo("workwire.agent.c1")
	if c := info.Commits[kafka.DefaultSpecTopic][mine]; c.Offset != 2 {
		t.Errorf("committed offset %d of partition %d, want 2 (past both records)", c.Offset, mine)
	}
}

// A record in the structured content mode is a CloudEvent too.
func TestStructuredModeIsAccepted(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	r := start(t, newTransport(t, kafka.Config{Brokers: b.Addrs()}), options.AgentSubscriptions("c1", nil))
	evt := transporttest.NewEvent("structured", "spec.create_request")
	body, err := evt.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := b.Publish(ctx, kafka.DefaultSpecTopic, "c1", body,
		sarama.RecordHeader{Key: []byte("content-type"), Value: []byte(cloudevents.ApplicationCloudEventsJSON)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, kafka.DefaultSpecTopic, "c1", []byte(`{"not":"an event"}`),
		sarama.RecordHeader{Key: []byte("content-type"), Value: []byte(cloudevents.ApplicationCloudEventsJSON)}); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, "the structured event and the broken one", wait, func() bool {
		return has(r, "structured") && r.MalformedCount() == 1
	})
}

func TestBrokerRefusesTooLargeEvents(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t, kafkatest.WithKfakeOptions(kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000"})))
	cfg := kafka.Config{Brokers: b.Addrs()}
	r := start(t, newTransport(t, cfg), options.AgentSubscriptions("c1", nil))
	hub := newTransport(t, cfg) // its own limit (1MB) is above the broker's
	start(t, hub, nil)
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	big := transporttest.NewEvent("big", "spec.create_request")
	_ = big.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", 8000)})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := hub.Send(ctx, route, big); !errors.Is(err, options.ErrTooLarge) {
		t.Fatalf("Send of an event the broker refuses: %v, want ErrTooLarge", err)
	}
	send(t, hub, route, "small")
	r.Wait(t, "the event after it", wait, func() bool { return has(r, "small") })
}

// While the cluster is down Send fails with ErrNotConnected; the transports
// come back by themselves, rejoin, and tell their receivers.
func TestOutageAndRecovery(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs()}
	r := start(t, newTransport(t, cfg), options.AgentSubscriptions("c1", nil))
	hub := newTransport(t, cfg)
	start(t, hub, nil)
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	connects := r.Connects()

	b.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := hub.Send(ctx, route, transporttest.NewEvent("lost", "spec.create_request")); !errors.Is(err, options.ErrNotConnected) {
		t.Errorf("Send while the cluster is down: %v, want ErrNotConnected", err)
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, "the agent rejoins", wait, func() bool { return r.Connects() > connects })
	r.Wait(t, "an event after the outage", wait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hub.Send(ctx, route, transporttest.NewEvent("after", "spec.create_request"))
		return has(r, "after")
	})
}

// Cut connections are re-made without losing what the cluster holds.
func TestDroppedConnections(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs()}
	r := start(t, newTransport(t, cfg), options.AgentSubscriptions("c1", nil))
	hub := newTransport(t, cfg)
	start(t, hub, nil)
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	send(t, hub, route, "before")
	r.Wait(t, "before", wait, func() bool { return has(r, "before") })
	if n := b.DropConnections(); n == 0 {
		t.Fatal("no connections to drop")
	}
	r.Wait(t, "an event after the cut", wait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hub.Send(ctx, route, transporttest.NewEvent("after", "spec.create_request"))
		return has(r, "after")
	})
}

// Close while Sends are in flight: no panic, no leak, and every Send returns.
func TestCloseDuringSends(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	hub := newTransport(t, kafka.Config{Brokers: b.Addrs()})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := hub.Start(ctx, nil, transporttest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	var (
		wg   sync.WaitGroup
		sent atomic.Int64
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				err := hub.Send(ctx, route, transporttest.NewEvent(fmt.Sprint(w, "-", i), "spec.create_request"))
				if errors.Is(err, options.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, options.ErrNotConnected) {
					t.Errorf("Send: %v", err)
					return
				}
				sent.Add(1)
			}
		})
	}
	for deadline := time.Now().Add(wait); sent.Load() < 50; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the senders did not get going")
		}
	}
	closeNow(t, hub)
	wg.Wait()
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	tr := newTransport(t, kafka.Config{Brokers: b.Addrs()})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Start(ctx, nil, nil); err == nil {
		t.Error("Start with a nil receiver succeeded")
	}
	if err := tr.Start(ctx, append(options.AgentSubscriptions("c1", nil), options.AgentSubscriptions("c2", nil)...), transporttest.NewRecorder()); err == nil {
		t.Error("Start with two clusters and no group ID succeeded")
	}
	start(t, tr, nil)
	if err := tr.Start(ctx, nil, transporttest.NewRecorder()); err == nil {
		t.Error("second Start succeeded")
	}
	closeNow(t, tr)
	if err := tr.Start(ctx, nil, transporttest.NewRecorder()); !errors.Is(err, options.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}
