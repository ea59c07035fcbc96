// Package chaos runs a hub and several agents through churn and faults and
// checks that they converge: every agent holds exactly the works the hub
// wants, with the hub's spec (manifests, delete option, manifest configs),
// labels, annotations and generation; the hub holds every agent's status,
// which reports the desired content applied; and every deletion completed.
// The churn keeps a population of works live throughout (over a thousand
// by default, thousands in the long mode). A transport's test calls Run
// with an Env: how a holder makes its transport, and the faults the
// broker can suffer (ProxyCut, ProxyStall, BrokerRestart, ...) beside
// AgentRestart and HubRestart. internal/tests/chaos runs it over the
// transports of the main module; a transport that is a module of its own
// (options/nats) runs it from its own tests.
//
// A run is a fixed number of churn steps, not a span of wall-clock time.
// The churn (which works are created, which are updated and how, which are
// deleted), the fault schedule (which fault, against which cluster, after
// which step, for how long) and the seed of the broker's own faults (Arm)
// are all drawn from the run's seed, so a seed replays the same sequence
// of operations and faults; a failing run prints its seed and the command
// that replays it, naming the test's package (and module). A seed does
// not replay goroutine interleavings, network and broker timing, which
// events the memory broker's fault choices meet, or what the periodic
// resyncs find: a failure that depends on those may take a few runs of its
// seed to show again.
//
// The run's size comes from the environment, for every test that calls
// Run:
//
//	go test ./internal/tests/chaos                         # default, as CI runs it
//	go test -short ./internal/tests/chaos                  # smaller
//	WORKWIRE_CHAOS=long go test ./internal/tests/chaos -v  # thousands of works, minutes
//	WORKWIRE_CHAOS_SEED=42 go test ./internal/tests/chaos  # replay a seed
package chaos
