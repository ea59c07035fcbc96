// Package kafka is the Kafka transport: CloudEvents in the binary content
// mode of the CloudEvents Kafka binding
// (github.com/cloudevents/sdk-go/protocol/kafka_sarama: attributes and
// extensions as "ce_" record headers, the data as the record value) over
// github.com/IBM/sarama, which is pure Go: no cgo, no librdkafka. It sends
// in binary mode and receives either mode; a record that is not a
// CloudEvent goes to the receiver's Malformed, with what was wrong, and is
// committed.
//
// A Transport is configured with a typed Config (or LoadConfig from a YAML
// or JSON file), handed to a generic client, and started by it. Start
// connects and joins a consumer group; the transport then rejoins by itself
// with capped exponential backoff and calls its receiver's Connected after
// every reconnect, so the client above resyncs what it may have missed, and
// after a rebalance that gives it partitions it did not read before (see
// Rebalances and resyncs).
//
// # Topics and keys
//
// One topic carries every event of one role (Config.Topics; defaults
// DefaultSpecTopic, DefaultStatusTopic, DefaultSpecResyncTopic,
// DefaultStatusResyncTopic). Create them before use, with as many partitions
// as you want parallelism and the retention you want to survive an outage,
// or let the brokers create them (auto.create.topics.enable); Start waits,
// retrying, until all four exist. The message key
// is the cluster name (for status resync requests, which name no cluster,
// the source ID): Kafka keeps one key's events in one partition, in order,
// and the producer keeps one request in flight per broker so retries do not
// reorder them. Spec and status records also carry the source ID in the
// SourceHeader header. A received event's Route has the role of its topic,
// the cluster from the key and the source from that header; a record without
// them leaves the IDs empty and the generic clients fall back to the event's
// extensions (clustername, originalsource, source).
//
// # Consumer groups
//
// The transport derives its consumer group from its subscriptions:
// "<GroupPrefix>.agent.<cluster>" for an agent and
// "<GroupPrefix>.source.<source ID>" for a source, so replicas of one source
// (same source ID) share its status and resync traffic, partition by
// partition, and an agent restarted under the same cluster name continues
// where it left off. Config.GroupID overrides the derivation; transports in
// one group must subscribe alike.
//
// # How an agent avoids other clusters' events
//
// An agent reads one partition of the spec topic: the one its cluster name
// hashes to with Kafka's default partitioner (PartitionFor, murmur2 of the
// key, as the Java client and franz-go compute it), which the group's
// assignment gives to one of its members. The records of other clusters that
// share the partition are skipped by key, before they are decoded, and
// committed. The trade-offs and limits:
//
//   - An agent still receives the spec traffic of every cluster that hashes
//     to its partition: about N/P clusters' worth for N clusters and P
//     partitions. More partitions cut it, at the cost of more partitions per
//     topic; per-cluster topics would cut it to nothing but make the topic
//     count grow with the fleet and need a topic created for every cluster
//     that joins, which is why this transport does not use them.
//   - Producers of spec events that are not this transport must partition by
//     murmur2 of the cluster name, or agents must set
//     Config.ReadAllPartitions, which reads every partition and filters by
//     key: then every agent reads every cluster's spec traffic.
//   - Adding partitions to the spec topic moves clusters to other partitions.
//     The group leader notices within Metadata.RefreshFrequency (sarama's
//     default: 10 minutes) and the group rebalances onto the new partition;
//     specs sent in between are missed until the resync that follows the
//     rebalance.
//   - Only one member of an agent's group reads the spec partition: replicas
//     of one agent stand by rather than share its spec traffic.
//
// The other roles cannot be narrowed by partition: a source reads the whole
// status topic (keyed by cluster, so the group spreads it over replicas) and
// skips other sources' statuses by SourceHeader, so every source reads every
// source's status traffic; every source reads every spec resync request and
// every agent every status resync request, which are broadcasts by design
// and small.
//
// # Offsets: at least once
//
// An offset is committed only after the event and every event before it in
// its partition are Done (options.Delivery.Done): a handler that has not
// finished, a crash or a rebalance never skips an event, and the next owner
// of the partition receives again what was not Done. Records that are not
// for this subscriber, or not CloudEvents, are Done at once. At most
// Config.MaxPending events of a partition wait for Done; then the partition
// pauses. When a rebalance or Close takes partitions away, the transport
// waits up to Config.DrainTimeout for deliveries in flight (less once none
// has finished for 250ms), commits, and gives them up; what was not Done is
// delivered again to the next owner, and the generic clients drop such
// repeats as stale or apply them again idempotently.
//
// A group without a committed offset for a partition (its first start, or
// after retention removed the offset) starts there at the newest record
// (Config.InitialOffset) and commits that position at once: what was sent
// before reaches the client through the resync it runs when Connected, and
// a later owner of the partition starts where this one did, not at the
// newest record of its own time.
//
// # Rebalances and resyncs
//
// Every time a member joins or leaves a consumer group (a source replica
// starts, an agent's standby takes over, a member crashes) the group
// rebalances and every member starts a new session. Committed offsets keep
// the group as a whole from losing anything (see above): whichever member
// reads a partition next starts where the last one stopped. Whether the
// receiver must resync is a question about the member, not the group:
//
//   - A spec or status partition a member did not read in its last session
//     carries events from before the rebalance that went to another member,
//     or to nobody; the state the receiver builds from them (an agent's
//     works, a source's statuses) lacks them. The transport calls Connected,
//     and the client resyncs. This is what makes an agent standby that takes
//     over the spec partition complete, and a source replica that takes over
//     status partitions current. The answers to the resync are keyed by
//     cluster, like all spec and status traffic, so they reach whichever
//     member reads each partition: the one that asked, for the partitions it
//     just gained.
//   - A partition the member read before resumes at the committed offset:
//     nothing was missed, and no resync follows. Nor does one follow for
//     partitions taken away, or for spec resync and status resync partitions,
//     whose requests are answered as they come and leave no state behind.
//   - A partition without a committed offset (new, or its offset expired)
//     starts at Config.InitialOffset, past what was sent before: Connected.
//   - A session that ended for another reason than a rebalance (heartbeats
//     lost, the coordinator expired the membership, a join failed) is a
//     reconnect: Connected, whatever the partitions.
//
// So a source replica joining costs one resync on itself (it starts) and
// one on each replica the new assignment gives partitions it did not have;
// replicas that only give partitions up pay nothing. A resync is not cheap
// at scale: a source's status resync request lists the hash of every status
// it holds and goes to every agent, which compares and answers with each
// status that differs; an agent's spec resync request goes to every source.
// Transport.Stats counts Connects and RebalanceResyncs apart, so the cost
// of rebalances shows; keep group membership stable (static replica counts,
// SessionTimeout above the pauses a member can have) where it matters.
//
// # Subscriptions that deliver nothing
//
// The clients' delivery check (generic.WithDeliveryCheck) probes a quiet
// subscription without sending anything: Probe asks the brokers for the
// end of each partition of its topic this member reads, and the probe
// comes back once the member has read that far. A member whose fetches come
// back empty while the partitions grow never gets there. Redial ends the
// membership and joins again with connections of its own: a reconnect.
//
// # Credentials
//
// SASLConfig.PasswordFile keeps the password out of the config, in a
// mounted Kubernetes Secret for example. The transport reads the file again
// for every broker connection it opens, so a rotated password takes effect
// at the next connection (and existing ones stay up). For SCRAM the
// transport's SCRAM client reads it at each authentication; for PLAIN,
// where sarama sends the password of its config, the transport's dialer
// opens each connection, does TLS, and authenticates before sarama uses it.
//
// # Size limits
//
// An event whose record is larger than Config.MaxEventBytes (default
// DefaultMaxEventBytes) fails at Send with options.ErrTooLarge before it is
// sent; the events behind it are not held up. Keep MaxEventBytes at or below
// the broker's message.max.bytes (and the topic's max.message.bytes): an
// event the brokers refuse as too large fails with options.ErrTooLarge too,
// but so do the events the producer had put in the same batch.
//
// # Protocol version
//
// Config.Version defaults to DefaultVersion, the newest sarama knows; sarama
// lowers each request to what the broker announces, so it works against
// Kafka 2.4 and newer. Set an older Version (2.1.0 at least) for older
// brokers.
//
// # Goroutines
//
// A started transport runs sarama's producer and consumer group and three
// goroutines of its own (producer results, the group's rejoin loop and its
// error log); Close stops them all and returns when they are gone, and when
// a Start in progress has given up (Start and Close are linearizable: a
// Start that Close overtakes returns options.ErrClosed and leaves nothing
// behind). The
// receiver is called from sarama's claim goroutines, one per partition, so
// events of one partition arrive in order. sarama's own metrics are off (see
// WithSaramaConfig to turn them on), but sarama's consumer still registers one
// fetch meter in go-metrics' global registry, which starts go-metrics'
// process-wide ticker goroutine; set go-metrics' UseNilMetrics before
// starting a transport to avoid it.
package kafka
