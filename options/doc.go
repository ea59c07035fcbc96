// Package options is the contract between workwire's generic clients and the
// brokers that carry their events, and the pieces every transport shares.
//
// A Transport (options/mqtt, options/kafka, options/grpc; options/nats and
// options/pubsub, each a Go module of its own; or the in-memory
// options/memory) routes events by Role — spec to one cluster, status to one
// source, resync requests to all — and never looks inside an event's payload.
// Layout maps roles to MQTT-style topic templates, with the workwire (default) and
// ocm presets. TLSConfig and LoadFile are what every transport's typed Config
// embeds and loads from YAML or JSON.
//
// Of workwire's own packages it imports only internal/tlsfiles, which reads
// TLS files: the transports and the generic clients import it, never the
// other way.
package options
