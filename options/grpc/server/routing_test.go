package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

const otherDataType = "io.example.secrets.v1.secrets"

func typedEvent(id, dt, typ string, ext map[string]string) *cloudevents.Event {
	evt := event(id, typ, ext)
	evt.SetType(dt + "." + typ)
	return evt
}

// ids returns the IDs of what r received, by role.
func ids(r *transporttest.Recorder, role options.Role) []string {
	var out []string
	for _, d := range r.Deliveries() {
		if d.Route.Role == role {
			out = append(out, d.Event.ID())
		}
	}
	return out
}

// A subscriber gets the data types it subscribed to (both forms of a data
// type being one), or every data type when it names none.
func TestRoutingFiltersByDataType(t *testing.T) {
	srv := grpctest.NewServer(t)
	onlyWorks := mustStart(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", []string{dataType}))
	singular := mustStart(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", []string{strings.TrimSuffix(dataType, "s")}))
	everything := mustStart(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", nil))
	hubRecv := mustStart(t, newTransport(t, srv.Config()), options.SourceSubscriptions("hub", []string{dataType}))
	hub := newTransport(t, srv.Config())
	mustStart(t, hub, nil)
	agent := newTransport(t, srv.Config())
	mustStart(t, agent, nil)

	spec := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}
	for _, e := range []*cloudevents.Event{
		typedEvent("other-spec", otherDataType, "spec.create_request", nil),
		typedEvent("works-spec", dataType, "spec.create_request", nil),
		typedEvent("singular-spec", strings.TrimSuffix(dataType, "s"), "spec.create_request", nil),
	} {
		if err := send(hub, spec, e); err != nil {
			t.Fatal(err)
		}
	}
	statusResync := options.Route{Role: options.RoleStatusResync, Source: "hub"}
	if err := send(hub, statusResync, typedEvent("other-status-resync", otherDataType, "status.resync_request", nil)); err != nil {
		t.Fatal(err)
	}
	specResync := options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}
	if err := send(agent, specResync, typedEvent("other-spec-resync", otherDataType, "spec.resync_request", nil)); err != nil {
		t.Fatal(err)
	}
	// Markers last: a publisher's events keep their order, so once a
	// subscriber has its marker it would have had what came before.
	if err := send(hub, spec, typedEvent("marker", dataType, "spec.update_request", nil)); err != nil {
		t.Fatal(err)
	}
	if err := send(hub, statusResync, typedEvent("marker-status-resync", dataType, "status.resync_request", nil)); err != nil {
		t.Fatal(err)
	}
	if err := send(agent, specResync, typedEvent("marker-spec-resync", dataType, "spec.resync_request", nil)); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*transporttest.Recorder{"plural": onlyWorks, "singular": singular, "everything": everything} {
		r.Wait(t, name+"'s markers", 10*time.Second, func() bool {
			return find(r, "marker") && find(r, "marker-status-resync")
		})
	}
	hubRecv.Wait(t, "the source's marker", 10*time.Second, func() bool { return find(hubRecv, "marker-spec-resync") })

	want := []string{"works-spec", "singular-spec", "marker"}
	for name, r := range map[string]*transporttest.Recorder{"plural": onlyWorks, "singular": singular} {
		if got := ids(r, options.RoleSpec); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the %s subscriber of %s got specs %v, want %v", name, dataType, got, want)
		}
		if find(r, "other-status-resync") {
			t.Errorf("the %s subscriber of %s got a status resync of %s", name, dataType, otherDataType)
		}
	}
	if got, want := ids(everything, options.RoleSpec), []string{"other-spec", "works-spec", "singular-spec", "marker"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the subscriber of every data type got specs %v, want %v", got, want)
	}
	if !find(everything, "other-status-resync") {
		t.Error("the subscriber of every data type missed a status resync")
	}
	if find(hubRecv, "other-spec-resync") {
		t.Errorf("a source of %s got a spec resync of %s", dataType, otherDataType)
	}

	// A malformed data type is refused at once.
	_, err := start(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", []string{"not a data type"}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a subscription to a malformed data type: %v, want InvalidArgument", err)
	}
}

// An event whose type names no data type still reaches every subscriber of
// its route, whose client reports it as malformed rather than losing it
// silently.
func TestAnEventWithoutADataTypeReachesEverySubscriber(t *testing.T) {
	srv := grpctest.NewServer(t)
	r := mustStart(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", []string{dataType}))
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}
	if n := srv.Server().Route(route, &protocol.CloudEvent{Id: "x", Source: "hub", SpecVersion: "1.0", Type: "bogus"}); n != 1 {
		t.Fatalf("an event of type bogus reached %d subscribers, want 1", n)
	}
	if n := srv.Server().Route(route, &protocol.CloudEvent{Id: "y", Source: "hub", SpecVersion: "1.0", Type: otherDataType + ".spec.create_request"}); n != 0 {
		t.Errorf("an event of another data type reached %d subscribers, want 0", n)
	}
	r.Wait(t, "the event without a data type", 10*time.Second, func() bool { return find(r, "x") })
}

// dataTypeAuthorizer lets cluster1's agent act for cluster1, and only for
// the data types it lists.
type dataTypeAuthorizer map[string]bool

func (a dataTypeAuthorizer) Authorize(_ context.Context, _ server.Identity, req server.Request) error {
	if _, cluster := req.ActsAs(); cluster == "cluster1" && a[req.DataType] {
		return nil
	}
	if source, _ := req.ActsAs(); source == "hub" {
		return nil
	}
	return fmt.Errorf("%w: %+v", server.ErrDenied, req)
}

// Authorization per data type holds for delivery too: an agent allowed one
// data type of its cluster never receives another.
func TestAnAgentReceivesOnlyTheDataTypesItMaySubscribeTo(t *testing.T) {
	srv := grpctest.NewServer(t,
		server.WithAuthenticator(server.StaticAuthenticator{Tokens: map[string]server.Identity{"agent": {User: "agent"}, "hub": {User: "hub"}}}),
		server.WithAuthorizer(dataTypeAuthorizer{dataType: true}))
	dir := t.TempDir()
	withToken := func(token string) options.Transport {
		cfg := srv.Config()
		cfg.TokenFile, cfg.AllowTokenWithoutTLS = filepath.Join(dir, token), true
		if err := os.WriteFile(cfg.TokenFile, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		return newTransport(t, cfg)
	}
	if _, err := start(t, withToken("agent"), options.AgentSubscriptions("cluster1", []string{otherDataType})); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("subscribing to a data type not granted: %v, want PermissionDenied", err)
	}
	if _, err := start(t, withToken("agent"), options.AgentSubscriptions("cluster1", nil)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("subscribing to every data type with one granted: %v, want PermissionDenied", err)
	}
	r := mustStart(t, withToken("agent"), options.AgentSubscriptions("cluster1", []string{dataType}))
	hub := withToken("hub")
	mustStart(t, hub, nil)
	spec := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}
	if err := send(hub, spec, typedEvent("secret", otherDataType, "spec.create_request", nil)); err != nil {
		t.Fatal(err)
	}
	if err := send(hub, spec, typedEvent("work", dataType, "spec.create_request", nil)); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, "the granted data type", 10*time.Second, func() bool { return find(r, "work") })
	if find(r, "secret") {
		t.Errorf("the agent received %s, which it may not subscribe to", otherDataType)
	}
}

// rawSubscribe opens a Subscribe stream with a small, fixed flow-control
// window (which turns gRPC's window growth off) and returns it once the
// broker's headers say the subscription is in place; it reads nothing more
// unless the test does.
func rawSubscribe(t *testing.T, addr string, req *protocol.SubscriptionRequest) grpclib.ServerStreamingClient[protocol.CloudEvent] {
	t.Helper()
	conn, err := grpclib.NewClient(addr,
		grpclib.WithTransportCredentials(insecure.NewCredentials()),
		grpclib.WithInitialWindowSize(64<<10), grpclib.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := protocol.NewCloudEventServiceClient(conn).Subscribe(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	md, err := stream.Header()
	if err != nil || len(md.Get(protocol.HeaderSubscriptionID)) != 1 {
		t.Fatalf("headers %v, %v: want a subscription-id", md, err)
	}
	return stream
}

// A subscriber that stops reading is dropped once the bytes queued for it
// pass Config.QueueBytes, long before Config.QueueSize events: large events
// cannot pile up without bound. Other subscribers get everything.
func TestASlowSubscriberIsDroppedByQueuedBytes(t *testing.T) {
	const queueBytes = 256 << 10
	srv := grpctest.NewServerWithConfig(t, server.Config{QueueSize: 100000, QueueBytes: queueBytes})
	slow := rawSubscribe(t, srv.Addr(), &protocol.SubscriptionRequest{ClusterName: "cluster1"})
	fast := mustStart(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", []string{dataType}))
	hub := newTransport(t, srv.Config())
	mustStart(t, hub, nil)
	if n := srv.Server().Subscribers(); n != 2 {
		t.Fatalf("%d subscribers, want 2", n)
	}

	// 200 events of 4 KiB: 800 KiB, three times the byte bound plus what
	// flow control lets the stream hold, and 0.2% of the count bound. Each
	// is sent once the fast subscriber holds the one before, so its own
	// queue never nears the byte bound however loaded the machine is (CI
	// once dropped it too, sending as fast as the hub could).
	const n = 200
	pad := strings.Repeat("x", 4<<10)
	for i := range n {
		evt := event(fmt.Sprint("e", i), "spec.update_request", map[string]string{types.ExtClusterName: "cluster1", "pad": pad})
		if err := send(hub, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}, evt); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		fast.Wait(t, fmt.Sprintf("event %d at the fast subscriber", i), 20*time.Second, func() bool { return len(fast.Deliveries()) == i+1 })
	}
	// The slow stream holds what flow control let through before it was
	// dropped, then ends.
	got := 0
	for got < n {
		msg, err := slow.Recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "bytes queued") {
				t.Errorf("the slow stream ended with %v, want ResourceExhausted naming the byte bound", err)
			}
			break
		}
		if msg.GetType() != protocol.HeartbeatType {
			got++
		}
	}
	if got >= n {
		t.Fatalf("the slow subscriber got all %d events: it was never dropped", got)
	}
	fast.Wait(t, "the slow subscriber gone", 10*time.Second, func() bool { return srv.Server().Subscribers() == 1 })
	if fast.Connects() != 1 {
		t.Errorf("the fast subscriber connected %d times, want 1", fast.Connects())
	}
}

// Heartbeats go out every interval however busy the stream is: OCM's
// agents count only heartbeats toward their health check, so a stream
// never idle would otherwise fail it.
func TestHeartbeatsGoOutWhileEventsFlow(t *testing.T) {
	const interval = 100 * time.Millisecond
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(interval)})
	stream := rawSubscribe(t, srv.Addr(), &protocol.SubscriptionRequest{ClusterName: "cluster1", DataTypes: []string{dataType}})
	pbe, err := protocol.ToProto(typedEvent("e", dataType, "spec.create_request", map[string]string{types.ExtClusterName: "cluster1"}))
	if err != nil {
		t.Fatal(err)
	}
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}
	// Each event goes out once the one before has arrived: the stream is
	// never idle for an interval unless the machine stalls.
	heartbeats, events := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for heartbeats < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats among %d events, want 3", heartbeats, events)
		}
		if n := srv.Server().Route(route, pbe); n != 1 {
			t.Fatalf("the event reached %d subscribers, want 1", n)
		}
		for {
			msg, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if msg.GetType() != protocol.HeartbeatType {
				events++
				break
			}
			heartbeats++
			if msg.GetSpecVersion() != "1.0" || msg.GetId() == "" {
				t.Errorf("heartbeat %v: want specversion 1.0 and an ID, as OCM's", msg)
			}
		}
	}
	if events < 3 {
		t.Errorf("only %d events went out between 3 heartbeats", events)
	}
}

// The headers of a subscription name it (OCM's agents refuse a stream
// without exactly one subscription-id), its heartbeat interval and its data
// types.
func TestSubscriptionHeaders(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(7 * time.Second)})
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		dataTypes []string
		want      string
	}{{[]string{dataType, otherDataType}, dataType + "," + otherDataType}, {nil, "*"}} {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := protocol.NewCloudEventServiceClient(conn).Subscribe(ctx, &protocol.SubscriptionRequest{ClusterName: "cluster1", DataTypes: tc.dataTypes})
		if err != nil {
			t.Fatal(err)
		}
		md, err := stream.Header()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ids := md.Get(protocol.HeaderSubscriptionID); len(ids) != 1 || ids[0] == "" {
			t.Errorf("subscription-id %q, want one", ids)
		}
		if got := md.Get(protocol.HeaderHeartbeatInterval); len(got) != 1 || got[0] != "7s" {
			t.Errorf("heartbeat-interval %q, want 7s", got)
		}
		if got := md.Get(protocol.HeaderDataTypes); len(got) != 1 || got[0] != tc.want {
			t.Errorf("data-types %q, want %q", got, tc.want)
		}
	}
}
