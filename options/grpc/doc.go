// Package grpc is workwire's gRPC transport: an options.Transport that
// carries CloudEvents between sources and agents through a gRPC broker of
// io.cloudevents.v1.CloudEventService (options/grpc/protocol) — workwire's
// (options/grpc/server; options/grpc/grpctest runs one inside a test) or,
// for an agent, OCM's (open-cluster-management.io/sdk-go): a unary Publish
// per event and a server-streaming Subscribe per subscriber, with events in
// the protobuf message OCM's peers use and spelled as they spell them.
//
// # Routing
//
// Send publishes the event; the broker routes it by its type and its
// source, clustername and originalsource attributes (Send refuses an event
// whose attributes do not say its options.Route), after checking that the
// caller may publish there, to the subscribers it reaches (spec: the agent
// of its cluster; status: the source it names; spec resync: every source;
// status resync: every agent). Start opens one Subscribe stream per side it
// subscribes for: a source's stream (options.SourceSubscriptions) carries
// the status for it and every spec resync; an agent's
// (options.AgentSubscriptions) the specs for its cluster and every status
// resync. The broker sends a stream only the data types its subscriptions
// name (Subscription.DataTypes), or every data type when one of them names
// none; at a broker that serves one data type per stream (OCM's, which
// says nothing of data types in its response headers) the transport opens
// one stream per data type. Received events are delivered with the route
// their attributes give.
//
// # Connection, heartbeats and reconnects
//
// A stream is in place once the broker has sent its response headers
// (with a subscription-id, which OCM's agents require too); Start returns
// only then, so nothing published afterwards is missed. The broker sends
// a heartbeat event down every stream each interval (10s by default),
// which keeps the stream through proxies that end idle streams (Istio,
// cloud load balancers), and announces the interval in its headers. A
// stream that ends for any reason — the broker restarting, a proxy
// resetting it (RST_STREAM, reported as Internal), the broker dropping a
// subscriber that fell behind — is opened again with capped exponential
// backoff, and the receiver's Connected is called, so the client resyncs
// what it missed. One that stays up but delivers nothing, heartbeats
// included, is found by the clients' delivery check
// (generic.WithDeliveryCheck), whose probe of a quiet stream is the
// broker's next heartbeat (options.Prober), and opened again the same way
// (or by the transport itself, after Config.HeartbeatTimeout). A merely
// idle stream is never torn down. gRPC keep-alive pings (30s) find dead
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
// unaffected. One the broker refuses as larger than it accepts (workwire's
// maxReceiveBytes, OCM's max_receive_message_size) fails with
// options.ErrTooLarge too. Both errors give the request's size and name
// the settings to raise: MaxEventBytes alone only moves the refusal to the
// broker. While the broker cannot be reached Send fails with
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
