// Package protocol is the gRPC protocol of workwire's gRPC transport and
// broker: the io.cloudevents.v1.CloudEventService service with a unary
// Publish and a server-streaming Subscribe, generated from
// workwire/cloudevents/v1/service.proto. Events travel as the CloudEvents
// SDK's protobuf CloudEvent (github.com/cloudevents/sdk-go/binding/format/
// protobuf/v2/pb), so this package defines no second io.cloudevents.v1.CloudEvent.
//
// A Subscribe stream carries two kinds of message: a RoutedEvent (an event
// and the route the broker delivered it by) and a Heartbeat, which the
// broker sends first, once the subscription is in place, and then whenever
// the stream has been idle for its interval, so that proxies that end idle
// streams keep it and the client can tell a quiet stream from a dead one.
//
// Most programs use options/grpc (the client transport) and
// options/grpc/server (the broker) instead of this package. Regenerate the
// code with "go generate" here; it needs only the Go toolchain and the
// module proxy.
package protocol

import "github.com/workwire/sdk-go/options"

// RoleToProto returns the protocol's Role for r, ROLE_UNSPECIFIED for an
// unknown role.
func RoleToProto(r options.Role) Role {
	switch r {
	case options.RoleSpec:
		return Role_ROLE_SPEC
	case options.RoleStatus:
		return Role_ROLE_STATUS
	case options.RoleSpecResync:
		return Role_ROLE_SPEC_RESYNC
	case options.RoleStatusResync:
		return Role_ROLE_STATUS_RESYNC
	}
	return Role_ROLE_UNSPECIFIED
}

// RoleFromProto returns the options.Role for r, 0 for ROLE_UNSPECIFIED or an
// unknown value.
func RoleFromProto(r Role) options.Role {
	switch r {
	case Role_ROLE_SPEC:
		return options.RoleSpec
	case Role_ROLE_STATUS:
		return options.RoleStatus
	case Role_ROLE_SPEC_RESYNC:
		return options.RoleSpecResync
	case Role_ROLE_STATUS_RESYNC:
		return options.RoleStatusResync
	}
	return 0
}

// RouteToProto converts r.
func RouteToProto(r options.Route) *Route {
	return &Route{Role: RoleToProto(r.Role), Source: r.Source, ClusterName: r.Cluster}
}

// RouteFromProto converts r; a nil r is the zero Route.
func RouteFromProto(r *Route) options.Route {
	if r == nil {
		return options.Route{}
	}
	return options.Route{Role: RoleFromProto(r.GetRole()), Source: r.GetSource(), Cluster: r.GetClusterName()}
}
