package protocol

// Regenerate cloudevents.pb.go from workwire/grpc/v1/cloudevents.proto.
// Nothing needs installing: the generator runs buf and protoc-gen-go at
// pinned versions from the Go module proxy (see internal/gen).
//
//go:generate go run ./internal/gen
