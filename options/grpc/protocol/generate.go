package protocol

// Regenerate service.pb.go and service_grpc.pb.go from
// workwire/cloudevents/v1/service.proto. Nothing needs installing: the
// generator runs buf, protoc-gen-go and protoc-gen-go-grpc at pinned
// versions from the Go module proxy (see internal/gen).
//
//go:generate go run ./internal/gen
