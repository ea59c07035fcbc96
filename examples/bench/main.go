// Command bench measures workwire the same way every time: one hub and
// many agents in one process, through a real broker, phase by phase, each
// against the ceiling of the bare transport.
//
//	go run ./examples/bench -works 10000 -clusters 100
//	go run ./examples/bench -transport mqtt -broker 127.0.0.1:1883 -json
//
// Phases (-phases, default all, in this order):
//
//	raw           the same number of same-size CloudEvents through the same
//	              transport and broker, with no SDK logic: the ceiling
//	deliver       hub Create of every work → every agent's informer holds it
//	agent-resync  agents restart with empty caches → hold everything again
//	status        every agent updates every status → the hub's informer sees it
//	hub-resync    the hub restarts (its works persisted, no statuses) → has
//	              every status again
//
// Every phase but raw needs deliver; hub-resync needs status.
//
// It prints a table — works/s per phase and its ratio to raw, create→agent
// latency, heap per work, peak RSS, goroutines at the end — and with -json
// the same as JSON. A progress line runs on stderr.
//
// Its code is examples/internal/bench, which the module examples/brokers
// runs over NATS JetStream and Pub/Sub too:
//
//	go -C examples/brokers run ./bench -transport pubsub -works 10000 -clusters 100
package main

import "github.com/workwire/sdk-go/examples/internal/bench"

func main() { bench.Main() }
