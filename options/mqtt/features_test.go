package mqtt_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestSharedSubscriptionSplitsTheLoad(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	subs := options.SourceSubscriptions("hub", nil)
	r1 := transporttest.Start(t, newTransport(t, mqtt.Config{BrokerHost: b.Addr(), SharedGroup: "hub"}), subs)
	r2 := transporttest.Start(t, newTransport(t, mqtt.Config{BrokerHost: b.Addr(), SharedGroup: "hub"}), subs)
	agent := newTransport(t, mqtt.Config{BrokerHost: b.Addr()})
	transporttest.Start(t, agent, nil)
	const n = 40
	for i := range n {
		evt := transporttest.NewEvent(fmt.Sprint("s", i), "status.update_request")
		if err := agent.Send(context.Background(), options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "c1"}, evt); err != nil {
			t.Fatal(err)
		}
	}
	r1.Wait(t, "every status delivered once", 10*time.Second, func() bool {
		return len(r1.Deliveries())+len(r2.Deliveries()) >= n
	})
	if got := len(r1.Deliveries()) + len(r2.Deliveries()); got != n {
		t.Fatalf("replicas received %d statuses in all, want %d (each once)", got, n)
	}
	if len(r1.Deliveries()) == 0 || len(r2.Deliveries()) == 0 {
		t.Errorf("one replica got everything: %d and %d", len(r1.Deliveries()), len(r2.Deliveries()))
	}
	// A resync request reaches every replica: its batches must all reach
	// whichever replica answers it.
	before1, before2 := len(r1.Deliveries()), len(r2.Deliveries())
	resync := transporttest.NewEvent("resync", "spec.resync_request")
	if err := agent.Send(context.Background(), options.Route{Role: options.RoleSpecResync, Cluster: "c1"}, resync); err != nil {
		t.Fatal(err)
	}
	r1.Wait(t, "the resync request at both replicas", 10*time.Second, func() bool {
		return len(r1.Deliveries()) == before1+1 && len(r2.Deliveries()) == before2+1
	})
}

func TestWillAndReconnectAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	watcher := newTransport(t, mqtt.Config{BrokerHost: b.Addr()})
	// The will goes to the spec topic of a cluster the watcher listens on,
	// so the watcher's receiver sees it (as a malformed message: the will
	// payload is not a CloudEvent).
	wr := transporttest.Start(t, watcher, options.AgentSubscriptions("watch", nil))
	agent := newTransport(t, mqtt.Config{
		BrokerHost: b.Addr(), ClientID: "agent-1",
		Will: &mqtt.Will{Topic: "sources/x/clusters/watch/spec", Payload: "agent-1 is gone", QoS: 1},
	})
	ar := transporttest.Start(t, agent, options.AgentSubscriptions("c1", nil))
	connects := ar.Connects()
	if !b.DropClient("agent-1") {
		t.Fatal("agent-1 is not connected")
	}
	wr.Wait(t, "the will", 10*time.Second, func() bool { return wr.MalformedCount() == 1 })
	ar.Wait(t, "the agent reconnects", 10*time.Second, func() bool { return ar.Connects() > connects })
	evt := transporttest.NewEvent("after", "spec.update_request")
	if err := watcher.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}, evt); err != nil {
		t.Fatal(err)
	}
	ar.Wait(t, "delivery after the reconnect", 10*time.Second, func() bool { return len(ar.Deliveries()) == 1 })
}

// Two clients with one client ID take the connection from each other as
// soon as either reconnects. Each connection ends at once, so the backoff
// must keep growing across them rather than start again at its minimum:
// without that, each client reconnects (and its receiver resyncs) about
// every ReconnectMinBackoff.
func TestBackoffGrowsAcrossConnectionsThatDoNotLast(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	cfg := mqtt.Config{
		BrokerHost: b.Addr(), ClientID: "twin",
		ReconnectMinBackoff: options.Duration(100 * time.Millisecond), ReconnectMaxBackoff: options.Duration(time.Minute),
	}
	r1 := transporttest.Start(t, newTransport(t, cfg), nil)
	r2 := transporttest.Start(t, newTransport(t, cfg), nil)
	time.Sleep(3 * time.Second) // the span whose reconnects the test counts
	// Measured: 180 connects when the backoff starts again each time, 20
	// when it grows.
	n := r1.Connects() + r2.Connects()
	t.Logf("%d connects in 3s", n)
	if n > 60 {
		t.Errorf("%d connects in 3s: the backoff starts again at its minimum after each connection", n)
	}
}
