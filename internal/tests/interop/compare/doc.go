// Command compare measures workwire and OCM's sdk-go
// (open-cluster-management.io/sdk-go, the version this module requires) in
// the same harness: one SDK per process, its hub and its agents in that
// process, over the same embedded MQTT broker (options/mqtt/mqtttest, in
// the process too), with the same works and the same phases. It prints
// works/s per phase, the live heap after each, and the process's peak
// resident set (VmHWM), so that the two SDKs' runs can be set side by side.
//
//	go -C internal/tests/interop run ./compare -sdk ocm -works 10000 -clusters 1
//	go -C internal/tests/interop run ./compare -sdk workwire -works 10000 -clusters 1
//	go -C internal/tests/interop run ./compare -sdk workwire -works 100 -clusters 1 -agent-processes -broker 127.0.0.1:1883
//
// The phases are examples/bench's, in its order, its raw phase aside, and
// so are the works, the status an agent reports and the way arrivals are
// counted (internal/testsupport/benchworks):
//
//	deliver       the hub creates every work (namespace = cluster name) →
//	              every agent's informer holds all of its works
//	agent-resync  every agent restarts with a new client and an empty store →
//	              its informer holds all of its works again
//	status        every agent reports every work Applied → the hub's
//	              informer sees every status
//	hub-resync    the hub restarts with its works but none of their statuses,
//	              as a source over a database does, and asks the agents →
//	              it has every status again
//
// Both SDKs run with their defaults — MQTT's binary content mode, QoS 1 —
// but with no publish rate limit (-rate-limit keeps each SDK's default) and,
// for workwire, no periodic resync, which OCM's clients do not have. Where
// an SDK cannot run a phase the way examples/bench does, the run says how
// it differs, under "notes". Lines the SDKs log are counted by message and
// printed at the end: neither counts what it drops, and that is how each
// tells.
//
// With -agent-processes the agents run as processes of their own, each
// this program built with its SDK alone (so that neither holds the
// other's packages), and the run reports each one's peak resident set and
// CPU time; its phases are deliver and status, the ones an agent's own
// memory depends on. -broker runs over an MQTT broker of one's own (a
// real Mosquitto, say) instead of the embedded one.
//
// Flags: -sdk (workwire or ocm), -works, -clusters, -manifest-bytes (2048),
// -rate-limit, -timeout (per phase, 10m), -json, -cpuprofile, -agent-processes,
// -broker. The table goes to standard output, a progress line to standard
// error. It exits 1 if a phase did not
// complete, 2 on a bad flag.
package main
