// Package protocol is the gRPC protocol of workwire's gRPC transport and
// broker, wire-compatible with OCM's (open-cluster-management.io/sdk-go):
// the io.cloudevents.v1.CloudEventService, whose unary Publish takes a
// PublishRequest and returns google.protobuf.Empty, and whose
// server-streaming Subscribe takes a SubscriptionRequest and streams
// CloudEvents. The messages are generated from
// workwire/grpc/v1/cloudevents.proto under workwire's own protobuf package,
// so OCM's generated code may be linked beside them; service.go serves them
// under OCM's service and method names.
//
// Events are written as OCM's peers write them (ToProto) and read in that
// spelling or the CloudEvents protobuf format's (FromProto). A broker sends
// the response headers HeaderSubscriptionID (OCM's agents refuse a stream
// without it), HeaderHeartbeatInterval and HeaderDataTypes once a
// subscription is in place, and a heartbeat event (HeartbeatType) down
// every stream once per interval, whatever else it sends: OCM's agents
// count only heartbeats toward their health check.
//
// Messages may be compressed with Gzip, which this package registers, so
// every workwire server reads them; a client or a server compresses only
// when its config says so.
//
// A broker routes an event by DeriveRoute, and a client takes what arrives
// as routed by it: the route travels in the event's own attributes.
//
// Most programs use options/grpc (the client transport) and
// options/grpc/server (the broker) instead of this package. Regenerate the
// messages with "go generate" here; it needs only the Go toolchain and the
// module proxy.
package protocol
