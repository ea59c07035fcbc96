// Package pubsub is the Google Cloud Pub/Sub transport, with the topics,
// subscriptions and message format of OCM's Pub/Sub option, so workwire's
// sources and agents and OCM's work over one set of topics. It is a Go
// module of its own, so a program that uses workwire over MQTT, Kafka or
// gRPC carries none of Google's dependencies.
//
// # Topics and subscriptions
//
// Four topics carry everyone's events; each client reads through
// subscriptions of its own, named after its cluster or source ID:
//
//	topic            written by                          read by
//	sourceevents     sources: specs                      sourceevents-<cluster>     (filter: attributes."ce-clustername" = "<cluster>")
//	agentevents      agents: statuses                    agentevents-<source>       (filter: attributes."ce-originalsource" = "<source>")
//	sourcebroadcast  sources: status resync requests     sourcebroadcast-<cluster>
//	agentbroadcast   agents: spec resync requests        agentbroadcast-<source>
//
// An administrator usually makes them, and gives each client the
// Subscriber role on its subscriptions and the Publisher role on the
// topics it writes. For cluster1 and source hub1:
//
//	gcloud pubsub topics create sourceevents agentevents sourcebroadcast agentbroadcast
//	gcloud pubsub subscriptions create sourceevents-cluster1 --topic sourceevents \
//	    --message-filter 'attributes."ce-clustername" = "cluster1"'
//	gcloud pubsub subscriptions create sourcebroadcast-cluster1 --topic sourcebroadcast
//	gcloud pubsub subscriptions create agentevents-hub1 --topic agentevents \
//	    --message-filter 'attributes."ce-originalsource" = "hub1"'
//	gcloud pubsub subscriptions create agentbroadcast-hub1 --topic agentbroadcast
//
// With Config.Provision a client makes what is missing itself. Start
// fails at once when a subscription does not exist.
//
// A watcher, a client whose subscriptions name no source and no cluster
// (workwire tail is one), reads a copy of every event: for each
// subscription Config.Subscriptions does not name, Start creates one of
// its own on the topic, unfiltered, "<topic>-watch-<random>", and Close
// deletes it; one left behind by a watcher that was killed expires after
// a day unread. It needs the right to create and delete subscriptions
// (the Pub/Sub Editor role), and takes nothing from the subscriptions of
// sources and agents.
//
// # What Pub/Sub keeps
//
// A subscription keeps what is published to its topic while its client is
// away (seven days by default), and Pub/Sub delivers again what is not
// acknowledged (Delivery.Done) in time: a restarted agent or source reads
// what was sent meanwhile, resync requests included. Replicas of one
// source read through one subscription and share its statuses. Messages
// carry no ordering key, as OCM's carry none: the clients order a
// resource's events by its version and a status's sequence ID, and on an
// ordered subscription a delivery lost to a broken connection would hold
// back every later event of its key until its acknowledgement deadline
// passed, resync included. What was sent before a subscription was made reaches its
// client through the resync it runs when it starts.
//
// # Messages
//
// An event is a message in the binary content mode OCM's peers use: each
// attribute and extension a "ce-" attribute, datacontenttype the
// "Content-Type" attribute, the data the body. Pub/Sub allows at most 100
// attributes of at most 1024 bytes each; an event beyond that (a work with
// long labels or annotations, whose metadata extension is long) goes in
// the structured content mode, the whole event as the body, with the
// attributes the subscriptions filter on beside it. workwire reads both
// modes; OCM's peers read only the binary one.
//
// # Subscriptions that deliver nothing
//
// The clients' delivery check (generic.WithDeliveryCheck) probes a quiet
// subscription of specs or statuses through Pub/Sub: Probe publishes the
// probe to the subscription's topic with the attribute its filter takes
// (the cluster, the source ID), under the peer options.ProbePeer. Replicas
// of a source read one subscription: a replica that receives another's
// probe gives it back, and the subscription hands it on until its sender
// takes it. A client without the Publisher role on that topic leaves the
// check off, said once in the log. Redial ends the receive loops and starts
// them again.
//
// # Connecting
//
// The transport uses Google's application default credentials, or
// Config.CredentialsFile, with TLS to Google's endpoint or Config.Endpoint.
// Config.DisableTLS talks plain text to an emulator. OCM's Pub/Sub config
// file loads as it is (LoadConfig). pubsubtest runs the Pub/Sub client
// library's in-process fake, for tests.
package pubsub
