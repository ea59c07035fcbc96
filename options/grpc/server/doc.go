// Package server is workwire's gRPC broker (docs/protocol.md, "gRPC"): it serves
// io.cloudevents.v1.CloudEventService to sources and agents that use the
// gRPC transport (options/grpc), and to OCM's agents
// (open-cluster-management.io/sdk-go), whose wire it speaks: the same
// service and messages, the subscription-id response header they require,
// and a heartbeat event down every stream each Config.HeartbeatInterval,
// which their health check counts. New builds a Server from a Config; Serve
// runs it on a listener until its context ends. options/grpc/grpctest runs
// one inside a test.
//
// # Routing
//
// Publish routes each event by its type and its source, clustername and
// originalsource attributes (protocol.DeriveRoute): a spec goes to the
// agent of its cluster, a status to the source it names, a spec resync to
// every source and a status resync to every agent. Events go out as they
// were published. A subscription names one
// source or one cluster, and the data types it handles: it gets only the
// events of those data types (the plural and singular forms of a data type
// are one), or of every data type when it names none. Data types are
// authorized one by one, so an identity allowed some data types of a
// cluster never receives the others. An event whose type names no data
// type reaches every subscriber of its route, whose client reports it as
// malformed. Each subscriber has a queue bounded by count and by bytes
// (Config.QueueSize, Config.QueueBytes), and a subscriber whose queue
// overflows either bound has fallen behind: its stream ends with
// ResourceExhausted, and it resubscribes and resyncs, while every other
// subscriber goes on. A publisher of specs and resync requests never waits
// for a subscriber. A status waits up to Config.QueueWait for room in its
// source's queue: a whole fleet publishes to one source, which falls
// behind for a moment as a matter of course, and slowing the agents to its
// pace beats making it resync the fleet (measured: 30,000 statuses from
// 300 agents, 1,100/s with the source dropped and resyncing, 7,900/s with
// the wait). Events published while nobody subscribes for their route are
// not kept: the protocol's resyncs heal the gap.
//
// # Replicas
//
// In plain routing mode — sources and agents both connected as clients —
// the server is one replica: a source and an agent must reach the same
// server, since replicas share no state (put one replica behind the
// address, or use an MQTT or Kafka cluster to scale a relay out). Replicas
// scale out when the server is itself the source of a data type: a Service
// (WithService) over a kube-apiserver or a database holds the resources,
// and every replica serves the agents connected to it from that shared
// store and watches it through the Service's handler. There is no
// replication protocol between replicas. An agent that loses its replica
// reconnects through the same address to another one, which answers the
// agent's spec resync from the store and asks it for the statuses the store
// lacks (a status resync, narrowed to the differing ones when the Service
// implements StatusHasher). It answers a spec resync as a generic source
// does, by the same code; an agent ahead of the store (one that lost its
// versions) is repaired by a Service that implements VersionRepairer and
// logged otherwise. The server speaks for such data types as source
// Config.SourceID, and hands agents' status for them to the Service. It
// hands the Service an agent's spec requests of its data type too (an OCM
// agent creates its ManagedCluster and its CSRs and renews its Lease with
// spec create and update requests): they travel as statuses do, authorized
// as the agent of the cluster they name, and the Service learns the
// agent's verified identity from IdentityFrom. A Service whose agents
// write only statuses refuses them (RequireStatusUpdate).
//
// A spec a Service's change sends can be lost on its way, and an agent that
// asks for specs only when it connects would not ask again. For a Service
// that is an Acknowledger (the work Services are), the server waits for a
// status at each spec's version and sends the spec again when none comes
// (Config.SpecResendAfter), with a backoff per spec, the oldest first, one
// at a time to an agent that has said nothing for as long as it takes to
// acknowledge; an agent's spec resync settles what it lacks. Each replica
// waits for what it sent: an agent's statuses acknowledge at the replica
// it publishes to, so one that publishes elsewhere than it subscribes gets
// what it had once more.
//
// # Security
//
// With WithAuthenticator every call must prove who it is, with a client
// certificate verified against Config.TLS.ClientCAFile or a bearer token:
// CertificateAuthenticator (common name and organizations), a
// StaticAuthenticator, or kubeauth.TokenReview. A call without credentials
// gets Unauthenticated. WithAuthorizer then decides from that verified
// identity — never from what the event claims — whether it may act as the
// source or the cluster's agent that the route names: an agent may publish
// status and spec resyncs, and subscribe, only for its own cluster; a
// source may publish specs and status resyncs, and subscribe, only for its
// own source ID (StaticAuthorizer, kubeauth.SubjectAccessReview; with
// kubeauth.ResourceAttributes, RBAC decides an agent's requests type by type
// and action by action, as OCM's hub does, so a bootstrap identity may join
// and do nothing else). Refusals
// get PermissionDenied. The route authorized is the one the event's own
// attributes give, the one its receivers read. Both answers are
// cached for Config.AuthCacheTTL, and an open Subscribe stream is
// authenticated and authorized again at that interval: a revoked token or
// grant ends it with Unauthenticated or PermissionDenied (a check that
// cannot decide, Unavailable, leaves it open). A connection opened with a
// client certificate ends when the certificate expires, so nothing outlives
// the credentials that opened it, and an agent that rotated its certificate
// (registration/agent) reconnects with the new one. Without an authenticator the
// server trusts every caller: for tests and trusted networks only.
//
// # Metrics
//
// WithRegisterer registers the broker's metrics on the caller's registry
// (never the global one; two servers need two registries):
//
//   - grpc_server_active_connections (gauge; local_addr, remote_addr)
//   - grpc_server_started_total, grpc_server_msg_received_total,
//     grpc_server_msg_sent_total, grpc_server_msg_received_bytes_total,
//     grpc_server_msg_sent_bytes_total (counters; grpc_type, grpc_service,
//     grpc_method)
//   - grpc_server_handled_total (counter; the same and grpc_code)
//   - grpc_server_handling_seconds (histogram; grpc_type, grpc_service,
//     grpc_method)
//   - grpc_server_ce_called_total, grpc_server_ce_msg_received_total,
//     grpc_server_ce_msg_sent_total (counters; cluster, data_type, method:
//     calls, events and subscription requests received, and events sent
//     down streams (method Subscribe) and publishes acknowledged (method
//     Publish))
//   - grpc_server_ce_processed_total (counter) and
//     grpc_server_ce_processed_duration_seconds (histogram) of published
//     events (cluster, data_type, method, grpc_code)
//   - grpc_server_tls_handshake_failures_total (counter; reason: expired,
//     unknown_authority or other): connections refused before any call,
//     such as an agent's with an expired or foreign certificate
//   - grpc_server_ce_first_status_latency_seconds (histogram; data_type):
//     a spec's first send to the status that acknowledged it, and
//     grpc_server_ce_specs_resent_total (counter; data_type): specs sent
//     again for want of it (Acknowledger)
//   - grpc_server_ce_unacknowledged_specs and
//     grpc_server_ce_oldest_unacknowledged_spec_seconds (gauges): the specs
//     that wait for a status, and the age of the oldest
//
// The cluster and data_type labels come from what callers send, so only
// calls that passed authentication and authorization set them: a refused
// Publish counts in grpc_server_ce_processed_total with both labels empty
// and its grpc_code, and a refused Subscribe only in
// grpc_server_handled_total, so clients that are refused cannot create time
// series at will. (Without an authenticator every caller is authorized.)
//
// # Goroutines
//
// Serve runs gRPC's goroutines and one handler goroutine per call; a
// subscription of an agent to a Service-backed data type adds one worker
// that answers its resyncs, and each Serve one that sends unacknowledged
// specs again. All of them end before Serve returns. Service
// handlers (EventHandler) run on the Service's goroutines and never block on
// a subscriber.
package server
