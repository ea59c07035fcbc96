// Package grpc is workwire's gRPC transport: an options.Transport that
// carries CloudEvents between sources and agents through a workwire gRPC
// broker (options/grpc/server; options/grpc/grpctest runs one inside a
// test). The protocol is io.cloudevents.v1.CloudEventService
// (options/grpc/protocol): a unary Publish per event and a server-streaming
// Subscribe per subscriber, with events in the CloudEvents protobuf format.
//
// # Routing
//
// Send publishes the event with its options.Route; the broker checks that
// the caller may publish on that route and delivers the event to the
// subscribers the route reaches (spec: the agent of its cluster; status:
// the source it names; spec resync: every source; status resync: every
// agent). Start opens one Subscribe stream per side it subscribes for: a
// source's stream (options.SourceSubscriptions) carries the status for it
// and every spec resync; an agent's (options.AgentSubscriptions) the specs
// for its cluster and every status resync. The broker sends a stream only
// the data types its subscriptions name (Subscription.DataTypes), or every
// data type when one of them names none. Received events carry the route
// the broker delivered them by, so their Role, Source and Cluster are set.
//
// # Connection, heartbeats and reconnects
//
// The stream starts with a heartbeat once the broker has the subscription
// in place; Start returns only then, so nothing published afterwards is
// missed. The broker then sends a heartbeat whenever the stream has been
// idle for its interval (10s by default), which keeps the stream through
// proxies that end idle streams (Istio, cloud load balancers). A stream
// that ends for any reason — the broker restarting, a proxy resetting it
// (RST_STREAM, reported as Internal), the broker dropping a subscriber that
// fell behind — or that stays silent for DefaultHeartbeatMisses heartbeat
// intervals is opened again with capped exponential backoff, and the
// receiver's Connected is called, so the client resyncs what it missed. A
// merely idle stream is never torn down: a broker that announces no
// heartbeats is never timed out. gRPC keep-alive pings (30s) find dead
// connections too.
//
// # Security
//
// TLS with server verification, mutual TLS (the broker authenticates the
// client certificate's common name), and bearer tokens read from a file and
// re-read when it changes (a projected service account token), sent with
// every call. The broker decides from the verified identity what each
// caller may publish and subscribe to.
//
// # Limits
//
// An event whose publish request exceeds Config.MaxEventBytes (4 MiB by
// default, the broker's default limit) fails at Send with
// options.ErrTooLarge without being sent; the events behind it are
// unaffected. While the broker cannot be reached Send fails with
// options.ErrNotConnected: the generic clients resync after the reconnect.
//
// A config file (LoadConfig) looks like:
//
//	serverAddress: broker.example.com:8090
//	tls:
//	  caFile: /etc/workwire/ca.pem
//	  clientCertFile: /etc/workwire/tls.crt
//	  clientKeyFile: /etc/workwire/tls.key
//	tokenFile: /var/run/secrets/tokens/workwire
//	keepAliveTime: 30s
//	maxEventBytes: 4194304
package grpc
