package generic_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
)

// resendCounter counts the specs a source sent again, and how many re-sends
// the acknowledgements it got allow (see resendsBefore).
type resendCounter struct {
	*counter
	after   time.Duration // the source's WithSpecResend
	mu      sync.Mutex
	resent  int
	acked   int
	allowed int
}

func (c *resendCounter) SpecResent(types.DataType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resent++
}

func (c *resendCounter) SpecAcknowledged(_ types.DataType, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked++
	c.allowed += resendsBefore(d, c.after)
}

func (c *resendCounter) counts() (resent, acked int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resent, c.acked
}

// resendsAllowed is how many re-sends the acknowledgements so far allow.
func (c *resendCounter) resendsAllowed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allowed
}

// resendsBefore is how many times a spec acknowledged d after its first
// send can have been sent again: the source waits at least after, then
// twice that, and so on (internal/ack), so at after, 3×after, 7×after, …
// (or later) after its first send.
func resendsBefore(d, after time.Duration) int {
	if after <= 0 {
		return 0 // not counted
	}
	k := 0
	for due := after; due < d; due = 2*due + after {
		k++
	}
	return k
}

// startReportingAgent starts an agent that applies each spec to st and
// reports a status at its version, as a work agent does.
func startReportingAgent(t testing.TB, tr options.Transport, cluster string, st *store) *generic.AgentClient[*widget] {
	t.Helper()
	opts := []generic.AgentOption{}
	for _, o := range testOpts(newCounter()) {
		opts = append(opts, o)
	}
	c, err := generic.NewAgentClient[*widget](cluster, tr, st, hashWidget, []generic.Codec[*widget]{widgetCodec{}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(func(ctx context.Context, _ types.EventType, got *widget) error {
		got.Status = "applied " + got.Spec
		st.put(got)
		return c.Publish(ctx, statusUpdate, got)
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	return c
}

// startResendingSource starts a source over st that sends unacknowledged
// specs again after after, and records the statuses it gets in st.
func startResendingSource(t testing.TB, tr options.Transport, st *store, after time.Duration) (*generic.SourceClient[*widget], *resendCounter) {
	t.Helper()
	obs := &resendCounter{counter: newCounter(), after: after}
	side := startSource(t, src, tr, st, generic.WithObserver(obs), generic.WithSpecResend(after))
	return side.client, obs
}

func publishWidgets(t testing.TB, c *generic.SourceClient[*widget], st *store, cluster string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		w := newWidget(src, cluster, fmt.Sprintf("w%d", i), "v1", 1)
		st.put(w)
		if err := c.Publish(context.Background(), specCreate, w); err != nil {
			t.Fatal(err)
		}
	}
}

// allApplied reports whether the source holds every widget of cluster with
// the status its agent reports for its spec.
func allApplied(source *store, cluster string) func() bool {
	return func() bool {
		ws, _ := source.List(generic.ListOptions{ClusterName: cluster})
		for _, w := range ws {
			if w.Status != "applied "+w.Spec {
				return false
			}
		}
		return true
	}
}

// A broker that loses a tenth of the specs, for an agent that asks for
// specs only when it connects: every spec still reaches it, because the
// source sends again what no status acknowledged. Each lost delivery, a
// re-send's included, costs one more send; and no spec goes again before
// the source's backoff says, however late its status (a loaded machine
// acknowledges late, and more specs go twice: a count of them would test
// the machine).
func TestLostSpecsAreSentAgain(t *testing.T) {
	t.Parallel()
	const n, cluster = 500, "c1"
	b := memory.NewBroker()
	b.SetFaults(memory.Faults{Drop: 0.1, Roles: []options.Role{options.RoleSpec}, Seed: 7})
	sourceStore, agentStore := newStore(), newStore()
	startReportingAgent(t, b.Transport(), cluster, agentStore)
	source, obs := startResendingSource(t, b.Transport(), sourceStore, 200*time.Millisecond)
	// The source's start asks the agent for statuses, and the agent then
	// resyncs its specs.
	eventually(t, "the agent's spec resync answered", func() bool { return obs.answers() >= 1 })
	publishWidgets(t, source, sourceStore, cluster, 0, n)

	eventually(t, "every widget applied and reported", allApplied(sourceStore, cluster))
	eventually(t, "no spec waiting for an acknowledgement", func() bool { return source.Stats().Unacknowledged == 0 })
	resent, acked := obs.counts()
	dropped := b.FaultStats().Dropped
	t.Logf("%d specs, %d deliveries lost, %d sent again (%d allowed), %d acknowledged", n, dropped, resent, obs.resendsAllowed(), acked)
	if dropped == 0 {
		t.Fatal("the broker lost nothing: the test tests nothing")
	}
	// A resync of the agent's may still answer some (its request on
	// connecting can cross the source's start).
	if again := obs.sends("spec.create_request") - n; again < dropped {
		t.Errorf("%d specs sent again for %d lost deliveries, want at least as many", again, dropped)
	}
	if allowed := obs.resendsAllowed(); resent > allowed {
		t.Errorf("%d re-sends, want at most the %d the backoff allows before each spec's status", resent, allowed)
	}
}

// With nothing lost, nothing is sent again.
func TestNoSpecIsSentAgainWhenNoneIsLost(t *testing.T) {
	t.Parallel()
	const n, cluster = 500, "c1"
	b := memory.NewBroker()
	sourceStore, agentStore := newStore(), newStore()
	startReportingAgent(t, b.Transport(), cluster, agentStore)
	source, obs := startResendingSource(t, b.Transport(), sourceStore, generic.DefaultSpecResendAfter)
	publishWidgets(t, source, sourceStore, cluster, 0, n)

	eventually(t, "every widget applied and reported", allApplied(sourceStore, cluster))
	// Nothing unacknowledged is left to send again, ever.
	eventually(t, "no spec waiting for an acknowledgement", func() bool { return source.Stats().Unacknowledged == 0 })
	// (A status or the agent's resync acknowledged each.)
	if resent, _ := obs.counts(); resent != 0 {
		t.Errorf("%d specs sent again, want 0", resent)
	}
}

// An agent away costs a probe at a time, backing off, not its specs: the
// source cannot tell an agent away from one that lost the one spec it was
// sent, so it sends one, and waits twice as long before the next. The
// agent back resyncs and gets everything.
func TestAnAgentAwayGetsOnlyProbes(t *testing.T) {
	t.Parallel()
	const after, cluster = 50 * time.Millisecond, "c1"
	b := memory.NewBroker()
	sourceStore, agentStore := newStore(), newStore()
	agentTr := b.Transport()
	agent := startReportingAgent(t, agentTr, cluster, agentStore)
	source, obs := startResendingSource(t, b.Transport(), sourceStore, after)
	publishWidgets(t, source, sourceStore, cluster, 0, 10)
	eventually(t, "the first widgets applied", allApplied(sourceStore, cluster))
	eventually(t, "no spec waiting for an acknowledgement", func() bool { return source.Stats().Unacknowledged == 0 })

	closeClient(t, agent.Close)
	away := time.Now()
	publishWidgets(t, source, sourceStore, cluster, 10, 60)
	// Away for at least three probes' worth.
	eventually(t, "three probes", func() bool { r, _ := obs.counts(); return r >= 3 })
	resent, _ := obs.counts()
	elapsed := time.Since(away)
	// Probes go at after, 3×after, 7×after, …: by elapsed, at most
	// log2(elapsed/after + 1) of them (and one more a round may have
	// started).
	if limit := int(math.Log2(float64(elapsed)/float64(after)+1)) + 1; resent > limit {
		t.Errorf("%d specs sent again to an agent away for %v, want at most %d probes", resent, elapsed, limit)
	}

	startReportingAgent(t, b.Transport(), cluster, agentStore)
	eventually(t, "every widget applied once the agent is back", allApplied(sourceStore, cluster))
	eventually(t, "no spec waiting for an acknowledgement", func() bool { return source.Stats().Unacknowledged == 0 })
}

// slowAgent takes delay to handle each spec on the transport's receive
// goroutine, as an agent that reads no further until it is done does, so a
// backlog builds up in the broker; it reports a status for each spec it
// handles, and records how far the source's sends ran ahead of it.
type slowAgent struct {
	tr      *memory.Transport
	cluster string
	delay   time.Duration
	sent    func() int // specs the source sent so far

	mu         sync.Mutex
	handled    int
	maxBacklog int
}

func (a *slowAgent) Deliver(d *options.Delivery) {
	defer d.Done()
	h, err := types.ParseHeader(d.Event)
	if err != nil || h.Type.SubResource != types.SubResourceSpec {
		return
	}
	time.Sleep(a.delay)
	a.mu.Lock()
	a.handled++
	a.maxBacklog = max(a.maxBacklog, a.sent()-a.handled)
	a.mu.Unlock()
	w := &widget{ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID(h.ResourceID), Generation: h.Version, Namespace: a.cluster,
		Annotations: map[string]string{sourceAnnotation: src}}, Status: "applied v1"}
	evt, err := widgetCodec{}.Encode(a.cluster, statusUpdate, w)
	if err != nil {
		panic(err)
	}
	_ = a.tr.Send(context.Background(), options.Route{Role: options.RoleStatus, Source: src, Cluster: a.cluster}, evt)
}

func (a *slowAgent) Malformed(error) {}
func (a *slowAgent) Connected()      {}

func (a *slowAgent) counts() (handled, maxBacklog int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handled, a.maxBacklog
}

// A source paced by a window keeps no more than about a window in flight
// to an agent that handles 250 specs a second: the broker's queue in
// front of it stays short instead of taking all the source has. Without a
// window it takes everything at once (a source publishes far faster than
// 500 a second, under the race detector on a busy machine too).
func TestAWindowKeepsTheBacklogOfASlowAgentShort(t *testing.T) {
	t.Parallel()
	const n, window, cluster = 1000, 100, "c1"
	for _, tc := range []struct {
		name   string
		window int
		check  func(maxBacklog int) bool
		want   string
	}{
		{"paced", window, func(b int) bool { return b <= 2*window }, fmt.Sprintf("at most %d", 2*window)},
		{"unpaced", 0, func(b int) bool { return b > n/2 }, fmt.Sprintf("more than %d", n/2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := memory.NewBroker()
			sourceStore := newStore()
			obs := &resendCounter{counter: newCounter()}
			side := startSource(t, src, b.Transport(), sourceStore, generic.WithObserver(obs), generic.WithSpecWindow(tc.window))
			agent := &slowAgent{tr: b.Transport(), cluster: cluster, delay: 4 * time.Millisecond,
				sent: func() int { return obs.sends("spec.create_request") }}
			startClient(t, func(ctx context.Context) error {
				return agent.tr.Start(ctx, options.AgentSubscriptions(cluster, []string{widgets.String()}), agent)
			}, agent.tr.Close)
			publishWidgets(t, side.client, sourceStore, cluster, 0, n)
			eventually(t, "every widget applied and reported", func() bool {
				handled, _ := agent.counts()
				return handled >= n && allApplied(sourceStore, cluster)()
			})
			_, backlog := agent.counts()
			t.Logf("window %d: at most %d specs sent ahead of the agent", tc.window, backlog)
			if !tc.check(backlog) {
				t.Errorf("the source ran %d specs ahead of the agent, want %s", backlog, tc.want)
			}
		})
	}
}
