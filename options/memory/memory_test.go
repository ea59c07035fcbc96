package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	b := memory.NewBroker()
	transporttest.Run(t, transporttest.Harness{
		New:     func(*testing.T) options.Transport { return b.Transport() },
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

	_, hub, rec = setup(memory.Faults{Delay: 20 * time.Millisecond, Seed: 3})
	send(hub, "d1", "d2", "d3")
	rec.Wait(t, "delayed deliveries", 5*time.Second, func() bool { return len(rec.Deliveries()) == 3 })
}
