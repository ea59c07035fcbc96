// Package mqtt is the MQTT v5 transport: CloudEvents in the CloudEvents MQTT
// binding (github.com/cloudevents/sdk-go/protocol/mqtt_paho) over
// github.com/eclipse/paho.golang. It sends in the binary content mode by
// default, or the structured one (Config.ContentMode), and receives both.
//
// Topics follow a Layout (options.WorkwireLayout by default, options.OCMLayout
// to interoperate with Open Cluster Management deployments, or custom
// templates). Publishes and subscriptions use QoS 1 and a clean start by
// default; the transport reconnects by itself with capped exponential
// backoff and calls its receiver's Connected after every reconnect, so the
// client above resyncs what it missed.
//
// # Brokers drop messages; resync heals, settings avoid
//
// A broker drops QoS 1 messages for a subscriber that falls behind:
// Mosquitto queues at most max_queued_messages (default 1000) per client,
// mochi-mqtt holds MaximumInflight (default 8192). workwire receives fast
// (the receive goroutine only decodes and queues) and heals drops by
// periodic resync, but a large fleet should not rely on healing. For
// Mosquitto:
//
//	max_queued_messages 1000000  # per client, above twice a hub's works; 0 is unlimited
//	max_inflight_messages 1000
//
// and for a packet size limit max_packet_size, not message_size_limit (see
// Size limits).
//
// For replicas of one source, set Config.SharedGroup: the broker then hands
// each status to one replica ($share/<group>/...). Every replica still hears
// every spec resync request and answers it, since a request too large for
// the broker's packet limit comes in batches that only together say what
// the agent lacks; the agent applies the duplicate answers idempotently.
//
// # Subscriptions that deliver nothing
//
// The clients' delivery check (generic.WithDeliveryCheck) probes a quiet
// subscription of a source's statuses or an agent's specs through the
// broker: Probe publishes the probe on the subscription's own topic, under
// the peer options.ProbePeer, which only that client subscribes to (with
// Config.SharedGroup, through a subscription of its own beside the
// group's). A broker whose ACL confines clients to their topics must let
// each write its probe's (docs/mosquitto.md); one that refuses it leaves
// the check off, said once in the log. Redial ends the connection; the
// transport connects again as after any loss.
//
// # Size limits
//
// An event larger than Config.MaxEventBytes, or than the maximum packet size
// the broker announces, fails at Send with options.ErrTooLarge before it is
// sent; the events behind it are not held up. Both bound the whole PUBLISH
// packet: the topic and the event's attributes (MQTT properties in the
// binary content mode) as well as its data. A work's spec event takes
// 640-720 bytes beyond its manifests, name, namespace, labels and
// annotations (measured for a 26-character name in a 20-character
// namespace, in either content mode and topic layout), more with longer
// names and trace context: allow 2 KiB beyond the largest work's.
//
// Mosquitto's max_packet_size (unset by default: the protocol's 256 MB) is
// such an announced limit, and a hub holder of package work refuses at
// Create, with 413, a work whose manifests and metadata alone exceed it.
// Mosquitto 2 logs that message_size_limit should be replaced by
// max_packet_size: it is not announced, and bounds the data alone. The
// broker refuses a larger publish with reason code 0x95 (packet too large),
// which Send returns as options.ErrTooLarge too, but only once the event
// was sent.
package mqtt
