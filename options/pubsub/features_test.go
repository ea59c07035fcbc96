package pubsub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
	"github.com/workwire/sdk-go/options/transporttest"
)

const wait = 20 * time.Second

func start(t *testing.T, cfg pubsub.Config, subs []options.Subscription) (*pubsub.Transport, *transporttest.Recorder) {
	t.Helper()
	tr := newTransport(t, cfg)
	r := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Start(ctx, subs, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeNow(t, tr) })
	return tr, r
}

func closeNow(t *testing.T, tr *pubsub.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Error(err)
	}
}

func send(t *testing.T, tr *pubsub.Transport, r options.Route, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Send(ctx, r, transporttest.OnRoute(transporttest.NewEvent(id, "spec.create_request"), r)); err != nil {
		t.Fatal(err)
	}
}

func received(r *transporttest.Recorder, id string) bool {
	for _, d := range r.Deliveries() {
		if d.Event.ID() == id {
			return true
		}
	}
	return false
}

// Without Provision, a missing subscription ends Start at once, naming it
// and its topic, rather than retrying until the context ends.
func TestMissingSubscriptionEndsStart(t *testing.T) {
	s := pubsubtest.NewServer(t)
	cfg := fast(s.Config())
	cfg.Provision = false
	tr := newTransport(t, cfg)
	defer closeNow(t, tr)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := tr.Start(ctx, options.AgentSubscriptions("cluster1", nil), transporttest.NewRecorder())
	if err == nil || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "subscription projects/workwire-test/subscriptions/sourceevents-cluster1 of spec does not exist") ||
		!strings.Contains(err.Error(), "topic projects/workwire-test/topics/sourceevents") {
		t.Errorf("Start: %v", err)
	}
}

// Subscriptions filter on the clustername of a spec and the originalsource
// of a status, so Send refuses an event whose extensions do not say its
// route rather than let it go to the wrong client or none.
func TestSendRefusesAnEventOffItsRoute(t *testing.T) {
	s := pubsubtest.NewServer(t)
	tr, _ := start(t, fast(s.Config()), nil)
	ctx := context.Background()
	spec := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	evt := transporttest.OnRoute(transporttest.NewEvent("e1", "spec.create_request"), options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster2"})
	if err := tr.Send(ctx, spec, evt); !errors.Is(err, options.ErrInvalidEvent) || !strings.Contains(err.Error(), `clustername extension cluster2, but the route says "cluster1"`) {
		t.Errorf("spec for another cluster: %v", err)
	}
	status := options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster1"}
	if err := tr.Send(ctx, status, transporttest.NewEvent("e2", "status.update_request")); !errors.Is(err, options.ErrInvalidEvent) || !strings.Contains(err.Error(), "no originalsource extension") {
		t.Errorf("status without originalsource: %v", err)
	}
}

// A subscription keeps what is sent while its client is away: an agent
// that restarts reads the specs sent meanwhile.
func TestAnAgentReadsWhatWasSentWhileItWasAway(t *testing.T) {
	s := pubsubtest.NewServer(t)
	cfg := fast(s.Config())
	hub, _ := start(t, cfg, nil)
	agent, _ := start(t, cfg, options.AgentSubscriptions("cluster1", nil))
	closeNow(t, agent)
	route := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	send(t, hub, route, "while-away")
	_, r := start(t, cfg, options.AgentSubscriptions("cluster1", nil))
	r.Wait(t, "the spec sent while the agent was away", wait, func() bool { return received(r, "while-away") })
}

// An event whose attributes Pub/Sub could not take (a long metadata
// extension) travels in the structured content mode and arrives whole.
func TestALongAttributeTravelsStructured(t *testing.T) {
	s := pubsubtest.NewServer(t)
	cfg := fast(s.Config())
	hub, _ := start(t, cfg, nil)
	_, r := start(t, cfg, options.AgentSubscriptions("cluster1", nil))
	route := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	evt := transporttest.OnRoute(transporttest.NewEvent("long", "spec.create_request"), route)
	long := `{"labels":{"a":"` + strings.Repeat("x", 2000) + `"}}`
	evt.SetExtension("metadata", long)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := hub.Send(ctx, route, evt); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, "the long event", wait, func() bool { return received(r, "long") })
	for _, d := range r.Deliveries() {
		if d.Event.ID() == "long" && d.Event.Extensions()["metadata"] != long {
			t.Errorf("metadata arrived as %.60v...", d.Event.Extensions()["metadata"])
		}
	}
}

// Replicas of one source read through one subscription: each status
// reaches one of them, and together they have them all.
func TestReplicasOfASourceShareItsStatuses(t *testing.T) {
	s := pubsubtest.NewServer(t)
	cfg := fast(s.Config())
	_, a := start(t, cfg, options.SourceSubscriptions("hub1", nil))
	_, b := start(t, cfg, options.SourceSubscriptions("hub1", nil))
	agent, _ := start(t, cfg, nil)
	const n = 40
	route := options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster1"}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "status-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		send(t, agent, route, ids[i])
	}
	a.Wait(t, "every status at one replica or the other", wait, func() bool {
		for _, id := range ids {
			if !received(a, id) && !received(b, id) {
				return false
			}
		}
		return true
	})
	// Pub/Sub delivers at least once, so a status may reach both; but not
	// every status reaches both, as it would if each replica had a
	// subscription of its own.
	if both := len(a.Deliveries()) + len(b.Deliveries()); both >= 2*n {
		t.Errorf("the replicas received %d deliveries of %d statuses: each has them all", both, n)
	}
}

// A watcher, whose subscriptions name no source and no cluster, reads a
// copy of every event through subscriptions of its own, which it makes at
// Start and deletes at Close: the agent and the source it watches still
// receive theirs.
func TestAWatcherCopiesEveryEventAndLeavesNothingBehind(t *testing.T) {
	s := pubsubtest.NewServer(t)
	cfg := fast(s.Config())
	_, hub := start(t, cfg, options.SourceSubscriptions("hub1", nil))
	_, agent := start(t, cfg, options.AgentSubscriptions("cluster1", nil))
	watchCfg := cfg
	watchCfg.Provision = false
	every := []options.Subscription{{Role: options.RoleSpec}, {Role: options.RoleStatus}, {Role: options.RoleSpecResync}, {Role: options.RoleStatusResync}}
	watcher, w := start(t, watchCfg, every)
	if got := watchSubscriptions(t, s); len(got) != 4 {
		t.Fatalf("the watcher's subscriptions: %v, want one per topic", got)
	}

	sender, _ := start(t, cfg, nil)
	spec := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	send(t, sender, spec, "spec")
	status := options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster1"}
	send(t, sender, status, "status")
	send(t, sender, options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster2"}, "spec-of-cluster2")
	w.Wait(t, "the watcher's copies", wait, func() bool {
		return received(w, "spec") && received(w, "status") && received(w, "spec-of-cluster2")
	})
	agent.Wait(t, "the agent's spec", wait, func() bool { return received(agent, "spec") })
	hub.Wait(t, "the source's status", wait, func() bool { return received(hub, "status") })

	closeNow(t, watcher)
	if got := watchSubscriptions(t, s); len(got) != 0 {
		t.Errorf("after Close, the watcher's subscriptions are still there: %v", got)
	}
}

// watchSubscriptions lists the subscriptions of watchers on s.
func watchSubscriptions(t *testing.T, s *pubsubtest.Server) []string {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	client, err := gpubsub.NewClient(ctx, pubsubtest.ProjectID, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var names []string
	it := client.SubscriptionAdminClient.ListSubscriptions(ctx, &pubsubpb.ListSubscriptionsRequest{Project: "projects/" + pubsubtest.ProjectID})
	for {
		sub, err := it.Next()
		if err == iterator.Done {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sub.Name, "-watch-") {
			names = append(names, sub.Name)
		}
	}
}
