package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

func specFromService(id, cluster string, version int32) *cloudevents.Event {
	evt := event("svc-"+id, "spec.create_request", map[string]string{types.ExtClusterName: cluster})
	evt.SetSource(server.DefaultSourceID)
	evt.SetExtension(types.ExtResourceID, id)
	evt.SetExtension(types.ExtResourceVersion, version)
	return evt
}

// sendSpecResync sends cluster1's spec resync, attributed to the server,
// naming what the agent holds.
func sendSpecResync(t *testing.T, agent options.Transport, held ...types.ResourceVersion) {
	t.Helper()
	resync := event("resync", "spec.resync_request", map[string]string{
		types.ExtClusterName: "cluster1", types.ExtOriginalSource: server.DefaultSourceID,
	})
	_ = resync.SetData(cloudevents.ApplicationJSON, types.ResourceVersionList{ResourceVersions: held})
	if err := send(agent, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, resync); err != nil {
		t.Fatal(err)
	}
}

func specsOf(r *transporttest.Recorder) map[string]string {
	out := map[string]string{}
	for _, d := range r.Deliveries() {
		if d.Route.Role != options.RoleSpec {
			continue
		}
		id, _, _ := types.StringExtension(d.Event, types.ExtResourceID)
		out[id] = d.Event.Type()
	}
	return out
}

// The server answers an agent's spec resync from its Service as a source
// does: newer resources, a delete for what it no longer holds, and what
// the agent lacks; nothing the agent holds current.
func TestServiceAnswersSpecResync(t *testing.T) {
	svc := server.NewMemoryService(dataType)
	srv := grpctest.NewServer(t, server.WithService(dataType, svc))
	ctx := context.Background()
	for _, e := range []*cloudevents.Event{
		specFromService("newer", "cluster1", 2),
		specFromService("current", "cluster1", 5),
		specFromService("missing", "cluster1", 1),
		specFromService("elsewhere", "cluster2", 1),
	} {
		if err := svc.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	sendSpecResync(t, agent, types.ResourceVersion{ResourceID: "newer", ResourceVersion: 1}, types.ResourceVersion{ResourceID: "current", ResourceVersion: 5}, types.ResourceVersion{ResourceID: "orphan", ResourceVersion: 3})
	recv.Wait(t, "the resync answer", 10*time.Second, func() bool { return len(specsOf(recv)) >= 3 })
	// A marker through the same queue: anything else of the answer came before it.
	if err := svc.Put(ctx, specFromService("marker", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the marker", 10*time.Second, func() bool { _, ok := specsOf(recv)["marker"]; return ok })
	got := specsOf(recv)
	want := map[string]string{
		"newer":   dataType + ".spec.create_request",
		"missing": dataType + ".spec.create_request",
		"orphan":  dataType + ".spec.delete_request",
		"marker":  dataType + ".spec.create_request",
	}
	for id, typ := range want {
		if got[id] != typ {
			t.Errorf("%s: got %q, want %q", id, got[id], typ)
		}
	}
	for _, id := range []string{"current", "elsewhere"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s was sent", id)
		}
	}

	// Status for the server goes to the Service; one it refuses fails the publish.
	st := event("st", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: server.DefaultSourceID})
	st.SetExtension(types.ExtResourceID, "newer")
	if err := send(agent, options.Route{Role: options.RoleStatus, Source: server.DefaultSourceID, Cluster: "cluster1"}, st); err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.Status("newer"); !ok {
		t.Error("the service has no status")
	}
	st.SetExtension(types.ExtResourceID, "unknown")
	if err := send(agent, options.Route{Role: options.RoleStatus, Source: server.DefaultSourceID, Cluster: "cluster1"}, st); status.Code(err) != codes.Internal {
		t.Errorf("status of an unknown resource: %v, want Internal", err)
	}
}

// As a generic source does, the server keeps orphans when told to, and
// during its grace period after it began serving: a Service still loading
// must not have agents delete what it has not read yet.
func TestServiceKeepsOrphansWhenToldTo(t *testing.T) {
	for name, cfg := range map[string]server.Config{
		"KeepOrphans":       {KeepOrphans: true},
		"OrphanGracePeriod": {OrphanGracePeriod: options.Duration(time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			svc := server.NewMemoryService(dataType)
			srv := grpctest.NewServerWithConfig(t, cfg, server.WithService(dataType, svc))
			agent := newTransport(t, srv.Config())
			recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
			sendSpecResync(t, agent, types.ResourceVersion{ResourceID: "orphan", ResourceVersion: 3})
			// A marker through the same queue: an answer would come before it.
			if err := svc.Put(context.Background(), specFromService("marker", "cluster1", 1)); err != nil {
				t.Fatal(err)
			}
			recv.Wait(t, "the marker", 10*time.Second, func() bool { _, ok := specsOf(recv)["marker"]; return ok })
			if typ, ok := specsOf(recv)["orphan"]; ok {
				t.Errorf("the orphan was sent a %s", typ)
			}
		})
	}
}

// A peer that sends only the event (no route) is routed by the event's own
// attributes; a request without the required attributes is refused.
func TestPublishWithoutARoute(t *testing.T) {
	srv := grpctest.NewServer(t)
	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := protocol.NewCloudEventServiceClient(conn)
	evt := event("bare", "spec.create_request", map[string]string{types.ExtClusterName: "cluster1"})
	evt.SetSource("hub")
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Publish(ctx, &protocol.PublishRequest{Event: pbe}); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the event routed by its attributes", 10*time.Second, func() bool { return find(recv, "bare") })
	if d := recv.Deliveries()[0]; d.Route != (options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}) {
		t.Errorf("route %+v", d.Route)
	}
	for name, req := range map[string]*protocol.PublishRequest{
		"no event":           {},
		"no id":              {Event: withID(pbe, "")},
		"malformed type":     {Event: withType(pbe, "nonsense")},
		"no original source": {Event: withType(pbe, dataType+".status.update_request")},
	} {
		if _, err := client.Publish(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

func withType(e *protocol.CloudEvent, typ string) *protocol.CloudEvent {
	c := proto.Clone(e).(*protocol.CloudEvent)
	c.Type = typ
	return c
}

func withID(e *protocol.CloudEvent, id string) *protocol.CloudEvent {
	c := proto.Clone(e).(*protocol.CloudEvent)
	c.Id = id
	return c
}

// noResync is a Service whose resources agents keep nothing of.
type noResync struct{ *server.MemoryService }

func (noResync) Resyncs() bool { return false }

// A Service that does not resync (token requests, say) has its agents sent
// no status resync request and its agents' spec resyncs unanswered; what
// it tells of still goes out.
func TestServiceWithoutResyncs(t *testing.T) {
	svc := noResync{server.NewMemoryService(dataType)}
	srv := grpctest.NewServer(t, server.WithService(dataType, svc))
	ctx := context.Background()
	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	resync := event("resync", "spec.resync_request", map[string]string{
		types.ExtClusterName: "cluster1", types.ExtOriginalSource: server.DefaultSourceID,
	})
	_ = resync.SetData(cloudevents.ApplicationJSON, types.ResourceVersionList{ResourceVersions: []types.ResourceVersion{types.ResourceVersion{ResourceID: "orphan", ResourceVersion: 3}}})
	if err := send(agent, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, resync); err != nil {
		t.Fatal(err)
	}
	// A marker through the same queue: a resync request or answer would
	// have come before it.
	if err := svc.Put(ctx, specFromService("marker", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the marker", 10*time.Second, func() bool { _, ok := specsOf(recv)["marker"]; return ok })
	for _, d := range recv.Deliveries() {
		if id, _, _ := types.StringExtension(d.Event, types.ExtResourceID); id != "marker" {
			t.Errorf("got %s (resource %q) on role %s", d.Event.Type(), id, d.Route.Role)
		}
	}
}

// repairing is a Service that moves a resource past a version an agent
// holds (server.VersionRepairer), as a store that lost its versions does.
type repairing struct{ *server.MemoryService }

func (r repairing) RepairVersion(ctx context.Context, resourceID string, agentVersion int64) (*cloudevents.Event, error) {
	evt, err := r.Get(ctx, resourceID)
	if err != nil {
		return nil, err
	}
	repaired := evt.Clone()
	repaired.SetExtension(types.ExtResourceVersion, int32(agentVersion+1))
	return &repaired, nil
}

// An agent ahead of the Service is answered as a generic source answers it:
// a Service that can repair its version has the repaired spec sent; one
// that cannot leaves the agent's as it is.
func TestServiceRepairsAVersionTheAgentIsAheadOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wrap    func(*server.MemoryService) server.Service
		version string // of "ahead" sent to the agent, "" for none
	}{
		{"repairing", func(m *server.MemoryService) server.Service { return repairing{m} }, "8"},
		{"not repairing", func(m *server.MemoryService) server.Service { return m }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := server.NewMemoryService(dataType)
			srv := grpctest.NewServer(t, server.WithService(dataType, tc.wrap(mem)))
			ctx := context.Background()
			for _, id := range []string{"ahead", "unnamed"} {
				if err := mem.Put(ctx, specFromService(id, "cluster1", 2)); err != nil {
					t.Fatal(err)
				}
			}
			agent := newTransport(t, srv.Config())
			recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
			sendSpecResync(t, agent, types.ResourceVersion{ResourceID: "ahead", ResourceVersion: 7})
			// What no batch named is sent once the batch's answer was.
			recv.Wait(t, "the unnamed resource", 10*time.Second, func() bool { _, ok := specsOf(recv)["unnamed"]; return ok })
			var version string
			for _, d := range recv.Deliveries() {
				if id, _, _ := types.StringExtension(d.Event, types.ExtResourceID); id == "ahead" {
					v, _, _ := types.Int64Extension(d.Event, types.ExtResourceVersion)
					version = fmt.Sprint(v)
				}
			}
			if version != tc.version {
				t.Errorf("ahead sent at version %q, want %q", version, tc.version)
			}
		})
	}
}

// A spec the server cannot read (a Service that stored a bad version) is
// never taken for an orphan: the agent that holds it is not told to delete
// it, and gets it as the Service has it.
func TestAnUnreadableSpecIsNoOrphan(t *testing.T) {
	mem := server.NewMemoryService(dataType)
	srv := grpctest.NewServer(t, server.WithService(dataType, mem))
	bad := specFromService("bad", "cluster1", 1)
	bad.SetExtension(types.ExtResourceVersion, "not a number")
	if err := mem.Put(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	sendSpecResync(t, agent, types.ResourceVersion{ResourceID: "bad", ResourceVersion: 1})
	recv.Wait(t, "the answer", 10*time.Second, func() bool { _, ok := specsOf(recv)["bad"]; return ok })
	if got := specsOf(recv)["bad"]; got != dataType+".spec.create_request" {
		t.Errorf("bad: got %q, want the Service's own create_request", got)
	}
}
