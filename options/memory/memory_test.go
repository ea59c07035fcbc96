package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	b := memory.NewBroker()
	transporttest.Run(t, transporttest.Harness{
		New: func(*testing.T) options.Transport { return b.Transport() },
		// The limit is the broker's, as on a real one: set for the subtest.
		NewLimited: func(t *testing.T, limit int) options.Transport {
			b.SetMaxEventBytes(limit)
			t.Cleanup(func() { b.SetMaxEventBytes(0) })
			return b.Transport()
		},
		Restart: func(*testing.T) { b.Restart() },
		SendRaw: func(_ *testing.T, r options.Route, payload []byte) { b.SendRaw(r, payload) },
	})
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	setup := func(f memory.Faults) (*memory.Broker, *memory.Transport, *transporttest.Recorder) {
		b := memory.NewBroker()
		b.SetFaults(f)
		agent, hub := b.Transport(), b.Transport()
		rec := transporttest.NewRecorder()
		if err := agent.Start(ctx, options.AgentSubscriptions("c1", nil), rec); err != nil {
			t.Fatal(err)
		}
		if err := hub.Start(ctx, nil, transporttest.NewRecorder()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = agent.Close(ctx); _ = hub.Close(ctx) })
		return b, hub, rec
	}
	send := func(tr *memory.Transport, ids ...string) {
		for _, id := range ids {
			if err := tr.Send(ctx, route, transporttest.NewEvent(id, "spec.update_request")); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := func(rec *transporttest.Recorder) []string {
		var out []string
		for _, d := range rec.Deliveries() {
			out = append(out, d.Event.ID())
		}
		return out
	}

	b, hub, rec := setup(memory.Faults{Duplicate: 1, Seed: 1})
	send(hub, "a")
	rec.Wait(t, "two copies", 5*time.Second, func() bool { return len(rec.Deliveries()) == 2 })
	if s := b.FaultStats(); s.Duplicated != 1 {
		t.Errorf("stats %+v", s)
	}

	_, hub, rec = setup(memory.Faults{Reorder: 0.5, Seed: 7})
	send(hub, "1", "2", "3", "4", "5", "6", "7", "8")
	rec.Wait(t, "deliveries", 5*time.Second, func() bool { return len(rec.Deliveries()) >= 6 })
	if got := ids(rec); fmt.Sprint(got) == "[1 2 3 4 5 6 7 8]" {
		t.Errorf("nothing was reordered: %v", got)
	}

	b, hub, rec = setup(memory.Faults{Drop: 1, Seed: 1})
	send(hub, "x", "y")
	b.SetFaults(memory.Faults{})
	send(hub, "z")
	rec.Wait(t, "the undropped event", 5*time.Second, func() bool { return len(rec.Deliveries()) == 1 })
	if got := ids(rec); got[0] != "z" {
		t.Errorf("delivered %v", got)
	}

	delayed, hub, rec := setup(memory.Faults{Delay: 20 * time.Millisecond, Seed: 3})
	send(hub, "d1", "d2", "d3")
	rec.Wait(t, "delayed deliveries", 5*time.Second, func() bool { return len(rec.Deliveries()) == 3 })
	if s := delayed.FaultStats(); s.Delayed != 3 {
		t.Errorf("%d deliveries delayed, want 3: %+v", s.Delayed, s)
	}
}

var specRoute = options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}

// pair starts an agent of c1 and a hub on b, closed at cleanup.
func pair(t *testing.T, b *memory.Broker) (hub *memory.Transport, agent *transporttest.Recorder) {
	t.Helper()
	ctx := context.Background()
	a, h := b.Transport(), b.Transport()
	rec := transporttest.NewRecorder()
	if err := a.Start(ctx, options.AgentSubscriptions("c1", nil), rec); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, nil, transporttest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(ctx); _ = h.Close(ctx) })
	return h, rec
}

// A reordered delivery that no later one releases still arrives, once its
// hold runs out.
func TestReorderedDeliveryIsFlushed(t *testing.T) {
	b := memory.NewBroker()
	b.SetFaults(memory.Faults{Reorder: 1, MaxHold: 40 * time.Millisecond, Seed: 5})
	hub, rec := pair(t, b)
	begin := time.Now()
	if err := hub.Send(context.Background(), specRoute, transporttest.NewEvent("alone", "spec.update_request")); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, "the held delivery", 5*time.Second, func() bool { return len(rec.Deliveries()) == 1 })
	if d := time.Since(begin); d < 20*time.Millisecond {
		t.Errorf("delivered after %v: not held for MaxHold/2 at least", d)
	}
	if s := b.FaultStats(); s.Reordered != 1 || s.Flushed != 1 {
		t.Errorf("stats %+v, want one reordered and flushed", s)
	}

	// Released by the next delivery instead, it is not delivered twice.
	b.SetFaults(memory.Faults{Reorder: 1, MaxHold: time.Hour, Seed: 5})
	for _, id := range []string{"first", "second"} {
		if err := hub.Send(context.Background(), specRoute, transporttest.NewEvent(id, "spec.update_request")); err != nil {
			t.Fatal(err)
		}
	}
	b.SetFaults(memory.Faults{})
	if err := hub.Send(context.Background(), specRoute, transporttest.NewEvent("third", "spec.update_request")); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, "the released deliveries", 5*time.Second, func() bool { return len(rec.Deliveries()) == 4 })
	var got []string
	for _, d := range rec.Deliveries() {
		got = append(got, d.Event.ID())
	}
	// "first" is held; one delivery is held at a time, so "second" goes
	// and releases "first".
	if want := []string{"alone", "second", "first", "third"}; !cmp.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
}

// One sender, one seed: every run drops, duplicates and reorders the same
// deliveries.
func TestFaultsReproducibleFromSeed(t *testing.T) {
	runOnce := func(seed uint64) ([]string, memory.FaultStats) {
		b := memory.NewBroker()
		b.SetFaults(memory.Faults{Drop: 0.2, Duplicate: 0.2, Reorder: 0.2, MaxHold: time.Millisecond, Seed: seed})
		hub, rec := pair(t, b)
		for i := range 300 {
			if err := hub.Send(context.Background(), specRoute, transporttest.NewEvent(fmt.Sprint(i), "spec.update_request")); err != nil {
				t.Fatal(err)
			}
		}
		var s memory.FaultStats
		rec.Wait(t, "every surviving delivery", 5*time.Second, func() bool {
			s = b.FaultStats()
			return len(rec.Deliveries()) == s.Delivered-s.Dropped+s.Duplicated
		})
		var ids []string
		for _, d := range rec.Deliveries() {
			ids = append(ids, d.Event.ID())
		}
		return ids, s
	}
	ids1, s1 := runOnce(42)
	ids2, s2 := runOnce(42)
	if s1.Dropped == 0 || s1.Duplicated == 0 || s1.Reordered == 0 {
		t.Fatalf("no faults injected: %+v", s1)
	}
	// Timers (held deliveries that ran out) may flush in another order;
	// which events were lost and doubled may not differ.
	if s1.Dropped != s2.Dropped || s1.Duplicated != s2.Duplicated || s1.Reordered != s2.Reordered {
		t.Errorf("stats differ: %+v and %+v", s1, s2)
	}
	count := func(ids []string) map[string]int {
		m := map[string]int{}
		for _, id := range ids {
			m[id]++
		}
		return m
	}
	if diff := cmp.Diff(count(ids1), count(ids2)); diff != "" {
		t.Errorf("the same seed delivered other events (-first +second):\n%s", diff)
	}
	ids3, _ := runOnce(43)
	if cmp.Equal(count(ids1), count(ids3)) {
		t.Error("another seed injected the same faults")
	}
}

func TestMaxEventBytes(t *testing.T) {
	b := memory.NewBroker(memory.WithMaxEventBytes(2048))
	hub, rec := pair(t, b)
	big := transporttest.NewEvent("big", "spec.update_request")
	if err := big.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", 4096)}); err != nil {
		t.Fatal(err)
	}
	err := hub.Send(context.Background(), specRoute, big)
	if !errors.Is(err, options.ErrTooLarge) || !strings.Contains(err.Error(), "limit 2048") {
		t.Fatalf("oversize Send: %v, want ErrTooLarge naming the limit", err)
	}
	if err := hub.Send(context.Background(), specRoute, transporttest.NewEvent("small", "spec.update_request")); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, "the small event", 5*time.Second, func() bool { return len(rec.Deliveries()) == 1 })
	if id := rec.Deliveries()[0].Event.ID(); id != "small" {
		t.Errorf("delivered %s", id)
	}
	b.SetMaxEventBytes(0)
	if err := hub.Send(context.Background(), specRoute, big); err != nil {
		t.Errorf("without a limit: %v", err)
	}
}
