package grpc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// resyncingAgent records deliveries and, like the generic agent client,
// sends a spec resync after every (re)connect.
type resyncingAgent struct {
	*transporttest.Recorder
	tr      options.Transport
	cluster string
	wg      sync.WaitGroup
}

func (a *resyncingAgent) Connected() {
	a.Recorder.Connected()
	a.wg.Add(1)
	go func() { // Connected must return at once
		defer a.wg.Done()
		evt := cloudevents.New()
		evt.SetID(fmt.Sprint("resync-", time.Now().UnixNano()))
		evt.SetSource(a.cluster)
		evt.SetType(dataType + ".spec.resync_request")
		evt.SetExtension(types.ExtClusterName, a.cluster)
		_ = evt.SetData(cloudevents.ApplicationJSON, types.ResourceVersionList{ResourceVersions: []types.ResourceVersion{}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.tr.Send(ctx, options.Route{Role: options.RoleSpecResync, Cluster: a.cluster}, &evt)
	}()
}

func specEvent(id, cluster string, version int32) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID("evt-" + id + fmt.Sprint(version))
	evt.SetSource(server.DefaultSourceID)
	evt.SetType(dataType + ".spec.create_request")
	evt.SetExtension(types.ExtResourceID, id)
	evt.SetExtension(types.ExtResourceVersion, version)
	evt.SetExtension(types.ExtClusterName, cluster)
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"id": id})
	return &evt
}

func holds(r *transporttest.Recorder, resourceID string) bool {
	for _, d := range r.Deliveries() {
		if id, _, _ := types.StringExtension(d.Event, types.ExtResourceID); id == resourceID && d.Route.Role == options.RoleSpec {
			return true
		}
	}
	return false
}

// Two replicas share one Service (the shared store) behind one address.
// Killing the replica an agent is connected to moves it to the other, which
// answers its resync with what changed meanwhile and serves it from then on.
func TestAgentMovesToAnotherReplicaAndResyncs(t *testing.T) {
	svc := server.NewMemoryService(dataType)
	a := grpctest.NewServer(t, server.WithService(dataType, svc))
	b := grpctest.NewServer(t, server.WithService(dataType, svc))
	lb := newProxy(t, 0, a.Addr(), b.Addr())
	cfg := a.Config()
	cfg.ServerAddress = lb.addr()
	tr := newTransport(t, cfg)
	agent := &resyncingAgent{Recorder: transporttest.NewRecorder(), tr: tr, cluster: "cluster1"}
	t.Cleanup(agent.wg.Wait)
	startTransport(t, tr, options.AgentSubscriptions("cluster1", []string{dataType}), agent)
	if a.Server().Subscribers() != 1 || b.Server().Subscribers() != 0 {
		t.Fatalf("subscribers: a %d, b %d; want the agent on a", a.Server().Subscribers(), b.Server().Subscribers())
	}
	ctx := context.Background()
	if err := svc.Put(ctx, specEvent("r1", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	agent.Wait(t, "r1 from replica a", 10*time.Second, func() bool { return holds(agent.Recorder, "r1") })
	// The server asks a new subscriber for the statuses it lacks.
	agent.Wait(t, "a status resync request", 10*time.Second, func() bool {
		for _, d := range agent.Deliveries() {
			if d.Route.Role == options.RoleStatusResync && d.Route.Source == server.DefaultSourceID {
				return true
			}
		}
		return false
	})

	lb.setBackends() // until r2 is in the store, the agent cannot reconnect
	a.Stop()         // kill the replica
	if err := svc.Put(ctx, specEvent("r2", "cluster1", 1)); err != nil {
		t.Fatal(err) // made while the agent is away: only a resync brings it
	}
	lb.setBackends(a.Addr(), b.Addr())
	agent.Wait(t, "the agent on replica b", 20*time.Second, func() bool { return agent.Connects() >= 2 && b.Server().Subscribers() == 1 })
	agent.Wait(t, "r2 through b's resync answer", 10*time.Second, func() bool { return holds(agent.Recorder, "r2") })

	if err := svc.Put(ctx, specEvent("r3", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	agent.Wait(t, "r3 live from b", 10*time.Second, func() bool { return holds(agent.Recorder, "r3") })

	status := cloudevents.New()
	status.SetID("status-r1")
	status.SetSource("cluster1")
	status.SetType(dataType + ".status.update_request")
	status.SetExtension(types.ExtResourceID, "r1")
	status.SetExtension(types.ExtClusterName, "cluster1")
	status.SetExtension(types.ExtOriginalSource, server.DefaultSourceID)
	_ = status.SetData(cloudevents.ApplicationJSON, map[string]string{"phase": "Applied"})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Send(sctx, options.Route{Role: options.RoleStatus, Source: server.DefaultSourceID, Cluster: "cluster1"}, &status); err != nil {
		t.Fatal(err)
	}
	if got, ok := svc.Status("r1"); !ok || got.ID() != "status-r1" {
		t.Errorf("the service holds status %v, %v", got, ok)
	}
}
