package server

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

func attr(s string) *protocol.CloudEventAttributeValue {
	return &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeString{CeString: s}}
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
// InvalidArgument for what it refuses; what it accepts has the route the
// event's type and attributes give, which names every ID its role needs,
// and reaches a subscriber of that route exactly as it was published.
func FuzzPublish(f *testing.F) {
	const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	spec := &protocol.CloudEvent{
		Id: "1", Source: "hub", SpecVersion: "1.0", Type: dt + ".spec.create_request",
		Attributes: map[string]*protocol.CloudEventAttributeValue{"ce-clustername": attr("cluster1"), "ce-resourceid": attr("r1")},
		Data:       &protocol.CloudEvent_BinaryData{BinaryData: []byte(`{}`)},
	}
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: spec}))
	st := proto.Clone(spec).(*protocol.CloudEvent)
	st.Type = dt + ".status.update_request"
	st.Attributes["ce-originalsource"] = attr("hub")
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: st}))
	bare := proto.Clone(st).(*protocol.CloudEvent) // the protobuf format's spelling
	bare.Attributes = map[string]*protocol.CloudEventAttributeValue{"clustername": attr("cluster1"), "originalsource": attr("hub")}
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: bare}))
	resync := proto.Clone(spec).(*protocol.CloudEvent)
	resync.Type = dt + ".status.resync_request"
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: resync}))
	bogus := proto.Clone(spec).(*protocol.CloudEvent)
	bogus.Type = "bogus"
	f.Add(marshalSeed(f, &protocol.PublishRequest{Event: bogus}))
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
// directly: the type, and the source, clustername and originalsource
// attributes (clustername as a string or not, in OCM's spelling or the
// protobuf format's).
func FuzzPublishRoute(f *testing.F) {
	const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	f.Add("1", "hub", dt+".spec.create_request", "cluster1", "", true, true)
	f.Add("2", "agent", dt+".status.update_request", "cluster1", "hub", true, false)
	f.Add("3", "agent", dt+".status.resync_response", "cluster2", "hub", true, true)
	f.Add("4", "agent", dt+".spec.resync_request", "cluster1", "", false, true)
	f.Add("5", "hub", dt+".status.resync_request", "", "", true, true)
	f.Add("6", "hub", "bogus", "", "", true, true)
	f.Add("", "", "", "", "", true, false)
	f.Fuzz(func(t *testing.T, id, source, typ, clusterName, originalSource string, clusterIsString, ocmSpelling bool) {
		prefix := ""
		if ocmSpelling {
			prefix = "ce-"
		}
		evt := &protocol.CloudEvent{Id: id, Source: source, SpecVersion: "1.0", Type: typ, Attributes: map[string]*protocol.CloudEventAttributeValue{}}
		if clusterName != "" {
			evt.Attributes[prefix+types.ExtClusterName] = attr(clusterName)
			if !clusterIsString {
				evt.Attributes[prefix+types.ExtClusterName] = &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeBytes{CeBytes: []byte(clusterName)}}
			}
		}
		if originalSource != "" {
			evt.Attributes[prefix+types.ExtOriginalSource] = attr(originalSource)
		}
		// Through the wire form, as gRPC hands it over.
		b, err := proto.Marshal(&protocol.PublishRequest{Event: evt})
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

// checkPublish publishes req to a fresh server, as FuzzPublish describes.
func checkPublish(t *testing.T, req *protocol.PublishRequest) {
	route, dt, routeErr := (&Server{}).publishRoute(req) // no Service: the route is the attributes'
	if routeErr != nil {
		if c := status.Code(routeErr); c != codes.InvalidArgument {
			t.Fatalf("publishRoute refused with %v, want InvalidArgument: %v", c, routeErr)
		}
	} else {
		if err := route.Validate(); err != nil {
			t.Fatalf("publishRoute accepted route %+v: %v", route, err)
		}
		if derived, err := protocol.DeriveRoute(req.GetEvent()); err != nil || derived != route {
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
	case err != nil:
		t.Fatalf("Publish refused a valid request (route %+v): %v", route, err)
	}
	if len(sub.queue) != 1 {
		t.Fatalf("%d messages reached the subscriber of %+v, want 1", len(sub.queue), route)
	}
	if got := (<-sub.queue).msg; !proto.Equal(got, req.GetEvent()) {
		t.Fatalf("the event changed on its way:\npublished %v\nreceived  %v", req.GetEvent(), got)
	}
}
