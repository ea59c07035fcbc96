package protocol_test

import (
	"testing"

	"github.com/cloudevents/sdk-go/binding/format/protobuf/v2/pb"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func str(s string) *pb.CloudEventAttributeValue {
	return &pb.CloudEventAttributeValue{Attr: &pb.CloudEventAttributeValue_CeString{CeString: s}}
}

func TestDeriveRoute(t *testing.T) {
	const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	attrs := map[string]*pb.CloudEventAttributeValue{"clustername": str("c1"), "originalsource": str("hub")}
	for _, tc := range []struct {
		typ     string
		want    options.Route
		wantErr bool
	}{
		{typ: dt + ".spec.create_request", want: options.Route{Role: options.RoleSpec, Source: "ce-source", Cluster: "c1"}},
		{typ: dt + ".status.update_request", want: options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "c1"}},
		{typ: dt + ".spec.resync_request", want: options.Route{Role: options.RoleSpecResync, Cluster: "c1"}},
		{typ: dt + ".status.resync_request", want: options.Route{Role: options.RoleStatusResync, Source: "ce-source"}},
		{typ: "bogus", wantErr: true},
	} {
		got, err := protocol.DeriveRoute(&pb.CloudEvent{Type: tc.typ, Source: "ce-source", Attributes: attrs})
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.typ, got, err, tc.want)
		}
	}
	bad := map[string]*pb.CloudEventAttributeValue{"clustername": {Attr: &pb.CloudEventAttributeValue_CeInteger{CeInteger: 1}}}
	if _, err := protocol.DeriveRoute(&pb.CloudEvent{Type: dt + ".spec.create_request", Attributes: bad}); err == nil {
		t.Error("an integer clustername was accepted")
	}
}

func TestRoleRoundTrip(t *testing.T) {
	for _, r := range []options.Role{options.RoleSpec, options.RoleStatus, options.RoleSpecResync, options.RoleStatusResync} {
		route := options.Route{Role: r, Source: "s", Cluster: "c"}
		if got := protocol.RouteFromProto(protocol.RouteToProto(route)); got != route {
			t.Errorf("%v: round trip gave %+v", r, got)
		}
	}
	if protocol.RoleToProto(options.Role(99)) != protocol.Role_ROLE_UNSPECIFIED || protocol.RouteFromProto(nil) != (options.Route{}) {
		t.Error("unknown roles must map to the zero values")
	}
}
