// Package nats is the NATS JetStream transport: CloudEvents in the binary
// content mode of the CloudEvents NATS binding (each attribute a "ce-"
// header, the data the message body; structured-mode messages are read
// too) over github.com/nats-io/nats.go. It is a Go module of its own, so a
// program that uses workwire over MQTT, Kafka or gRPC carries none of NATS's
// dependencies.
//
// # Subjects
//
// Subjects follow workwire's topic layout with "." between levels, under
// Config.SubjectPrefix ("workwire" by default):
//
//	workwire.sources.<source>.clusters.<cluster>.spec    a source's spec to one cluster
//	workwire.sources.<source>.clusters.<cluster>.status  an agent's status to one source
//	workwire.sources.clusters.<cluster>.specresync       an agent's resync request, to every source
//	workwire.sources.<source>.clusters.statusresync      a source's resync request, to every agent
//
// Source IDs and cluster names must therefore not contain '.', '*', '>' or
// white space; Send refuses such a route with options.ErrInvalidRoute.
//
// # What JetStream keeps
//
// Specs and statuses go to one stream (Config.Stream, "WORKWIRE" by
// default), which a transport creates when it is missing: file storage,
// events kept for Config.MaxAge (a day by default), room for
// Config.MaxConsumers consumers (100,000 by default; a stream that names
// no limit gets its server's, 1,000 since nats-server 2.15). Send returns once the
// stream has stored the event. Each agent reads its cluster's specs, and
// each source its statuses, through a durable consumer named after it
// ("workwire_spec_<cluster>", "workwire_status_<source>"): a client that
// restarts, or loses its connection, resumes where it stopped, however far
// behind it is, and the server delivers again what was not acknowledged
// (Delivery.Done) within Config.AckWait. Replicas of one source share its
// consumer, and so its statuses. Nothing is dropped for a slow consumer: the
// server holds back what is past Config.MaxAckPending until earlier events
// are acknowledged.
//
// Resync requests are broadcasts that matter only to who listens now: they
// go over plain NATS, to every subscriber connected at the time, and are
// not kept. A client resyncs when it connects and after every reconnect.
//
// A consumer starts at the events sent after it was first made: what was
// sent before a client's first start reaches it through the resync it
// runs then.
//
// # Clusters
//
// Over a cluster, Config.Replicas servers keep the stream and each
// consumer; Config.URL lists the servers. A consumer has a leader, which
// holds its client's waiting pull. A leader killed or hung, or one not yet
// elected when the consumer was just made, tells the client nothing, and
// the client pulls again when it has gone two heartbeats without a word:
// Config.PullHeartbeat (2 s by default) bounds that silence to about 4 s;
// nats.go's own default would let it last 30 s.
//
// # Subscriptions that deliver nothing
//
// The clients' delivery check (generic.WithDeliveryCheck) probes a quiet
// subscription of specs or statuses without sending anything: Probe asks
// the server for its consumer's description, and the probe comes back once
// the consumer holds nothing undelivered or unacknowledged. A consumer that
// delivers into a connection that hears nothing keeps what it delivered
// unacknowledged, and one deleted on the server answers no more: either
// way the probe never comes back. Redial drops the connection and, once
// nats.go has connected again, makes the consumers again. The client must
// be allowed to read its consumer's description (docs/nats.md).
//
// # Authentication
//
// Config takes TLS (with client certificates), a NATS credentials file
// (JWT and NKey seed), a user and password, or a token file. Failures that
// retrying cannot fix — refused credentials, a stream without workwire's
// subjects — end Start at once. docs/nats.md sets up a server on which each
// agent and source reaches only its own subjects and consumer.
//
// natstest runs a NATS server with JetStream in the process, for tests.
package nats
