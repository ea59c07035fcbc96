package server

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/binding/format/protobuf/v2/pb"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

func attr(s string) *pb.CloudEventAttributeValue {
	return &pb.CloudEventAttributeValue{Attr: &pb.CloudEventAttributeValue_CeString{CeString: s}}
}

func marshalSeed(f *testing.F, m proto.Message) []byte {
	f.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// subscriberFor returns a subscriber of every data type that route reaches.
func subscriberFor(route options.Route) *subscriber {
	req := &protocol.SubscriptionRequest{ClusterName: route.Cluster}
	if route.Role == options.RoleStatus || route.Role == options.RoleSpecResync {
		req = &protocol.SubscriptionRequest{Source: route.Source}
		if req.Source == "" {
			req.Source = "any-source" // a spec resync reaches every source
		}
	}
	if req.Source == "" && req.ClusterName == "" {
		req.ClusterName = "any-cluster" // a status resync reaches every agent
	}
	return newSubscriber(1, req, nil, Identity{}, 4, DefaultQueueBytes, false)
}

// FuzzPublish feeds the server's Publish handler any publish request, as
// an untrusted client may send it: it never panics and answers only
// InvalidArgument or PermissionDenied for what it refuses; what it accepts
// has a route that names every ID its role needs — the one given, or the
// one the event's attributes give — and reaches a subscriber of that route
// exactly as it was published.
func FuzzPublish(f *testing.F) {
	const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	spec := &pb.CloudEvent{
		Id: "1", Source: "hub", SpecVersion: "1.0", Type: dt + ".spec.create_request",
		Attributes: map[string]*pb.CloudEventAttributeValue{"clustername": attr("cluster1"), "resourceid": attr("r1")},
		Data:       &pb.CloudEvent_BinaryData{BinaryData: []byte(`{}`)},
	}
	specRoute := protocol.RouteToProto(options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"})
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: spec, Route: specRoute}))
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: spec}))
	st := proto.Clone(spec).(*pb.CloudEvent)
	st.Type = dt + ".status.update_request"
	st.Attributes["originalsource"] = attr("hub")
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: st}))
	lying := proto.Clone(st).(*pb.CloudEvent)
	lying.Attributes["clustername"] = attr("cluster2")
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: lying, Route: protocol.RouteToProto(options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "cluster1"})}))
	resync := proto.Clone(spec).(*pb.CloudEvent)
	resync.Type = dt + ".status.resync_request"
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: resync}))
	bogus := proto.Clone(spec).(*pb.CloudEvent)
	bogus.Type = "bogus"
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: bogus, Route: specRoute}))
	f.Add(marshalSeed(f, &protocol.PublishRequest{}))
	f.Add([]byte("\x0a\x02\x0a\x00"))

	f.Fuzz(func(t *testing.T, data []byte) {
		var req protocol.PublishRequest
		if proto.Unmarshal(data, &req) != nil {
			return // gRPC refuses it before the handler sees it
		}
		checkPublish(t, &req)
	})
}

// FuzzPublishRoute is FuzzPublish with the fields routing reads fuzzed
// directly: the route, the type, and the source, clustername and
// originalsource attributes (clustername as a string or not).
func FuzzPublishRoute(f *testing.F) {
	const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	f.Add(int32(1), "hub", "cluster1", "1", "hub", dt+".spec.create_request", "cluster1", "", true)
	f.Add(int32(0), "", "", "2", "agent", dt+".status.update_request", "cluster1", "hub", true)
	f.Add(int32(2), "hub", "cluster1", "3", "agent", dt+".status.update_request", "cluster2", "hub", true)
	f.Add(int32(3), "", "cluster1", "4", "agent", dt+".spec.resync_request", "cluster1", "", false)
	f.Add(int32(0), "", "", "5", "hub", dt+".status.resync_request", "", "", true)
	f.Add(int32(0), "", "", "6", "hub", "bogus", "", "", true)
	f.Add(int32(9), "x", "y", "", "", "", "", "", true)
	f.Fuzz(func(t *testing.T, role int32, routeSource, routeCluster, id, source, typ, clusterName, originalSource string, clusterIsString bool) {
		evt := &pb.CloudEvent{Id: id, Source: source, SpecVersion: "1.0", Type: typ, Attributes: map[string]*pb.CloudEventAttributeValue{}}
		if clusterName != "" {
			evt.Attributes[types.ExtClusterName] = attr(clusterName)
			if !clusterIsString {
				evt.Attributes[types.ExtClusterName] = &pb.CloudEventAttributeValue{Attr: &pb.CloudEventAttributeValue_CeBytes{CeBytes: []byte(clusterName)}}
			}
		}
		if originalSource != "" {
			evt.Attributes[types.ExtOriginalSource] = attr(originalSource)
		}
		req := &protocol.PublishRequest{Event: evt}
		if role != 0 || routeSource != "" || routeCluster != "" {
			req.Route = &protocol.Route{Role: protocol.Role(role), Source: routeSource, ClusterName: routeCluster}
		}
		// Through the wire form, as gRPC hands it over.
		b, err := proto.Marshal(req)
		if err != nil {
			return // invalid UTF-8: no client can send it
		}
		var got protocol.PublishRequest
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		checkPublish(t, &got)
	})
}

// namesAnotherCluster reports whether an agent's event (status, spec
// resync) names a cluster other than the one its route, which
// authorization checked, names — or a clustername that is not a string.
func namesAnotherCluster(route options.Route, pbe *pb.CloudEvent) bool {
	if route.Role != options.RoleStatus && route.Role != options.RoleSpecResync {
		return false
	}
	c, err := protocol.StringAttribute(pbe, types.ExtClusterName)
	return err != nil || (c != "" && c != route.Cluster)
}

// checkPublish publishes req to a fresh server, as FuzzPublish describes.
func checkPublish(t *testing.T, req *protocol.PublishRequest) {
	route, dt, routeErr := publishRoute(req)
	if routeErr != nil {
		if c := status.Code(routeErr); c != codes.InvalidArgument {
			t.Fatalf("publishRoute refused with %v, want InvalidArgument: %v", c, routeErr)
		}
	} else {
		if err := route.Validate(); err != nil {
			t.Fatalf("publishRoute accepted route %+v: %v", route, err)
		}
		if given := protocol.RouteFromProto(req.GetRoute()); given.Role != 0 {
			if route != given {
				t.Fatalf("route %+v, the caller gave %+v", route, given)
			}
		} else if derived, err := protocol.DeriveRoute(req.GetEvent()); err != nil || derived != route {
			t.Fatalf("route %+v, the event's attributes give %+v (%v)", route, derived, err)
		}
		_, typeErr := types.ParseEventType(req.GetEvent().GetType())
		if dt.IsZero() != (typeErr != nil) {
			t.Fatalf("data type %v for type %q (%v)", dt, req.GetEvent().GetType(), typeErr)
		}
	}

	s, err := New(Config{}, WithLogger(logr.Discard()), WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{s: s, stopping: make(chan struct{})}
	var sub *subscriber
	if routeErr == nil {
		sub = subscriberFor(route)
		s.reg.add(sub)
	}
	_, err = in.Publish(context.Background(), req)
	switch {
	case routeErr != nil:
		if status.Code(err) != status.Code(routeErr) {
			t.Fatalf("Publish: %v; publishRoute: %v", err, routeErr)
		}
		return
	case namesAnotherCluster(route, req.GetEvent()):
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Publish of an event whose clustername differs from its route: %v, want PermissionDenied", err)
		}
		return
	case err != nil:
		t.Fatalf("Publish refused a valid request (route %+v): %v", route, err)
	}
	if len(sub.queue) != 1 {
		t.Fatalf("%d messages reached the subscriber of %+v, want 1", len(sub.queue), route)
	}
	got := (<-sub.queue).msg.GetEvent()
	if !proto.Equal(got.GetEvent(), req.GetEvent()) {
		t.Fatalf("the event changed on its way:\npublished %v\nreceived  %v", req.GetEvent(), got.GetEvent())
	}
	if r := protocol.RouteFromProto(got.GetRoute()); r != route {
		t.Fatalf("delivered by route %+v, want %+v", r, route)
	}
}
