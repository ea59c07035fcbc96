package pubsub_test

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/internal/testsupport/chaos"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// Over Pub/Sub, the chaos suite of the main module's transports
// (internal/testsupport/chaos, which says how to size a run and replay a
// seed): the embedded server behind a proxy that cuts and stalls
// connections, and agents and the hub restarting. Google's service is not
// restarted by its users, so neither is the server here.
//
// The fake runs in the test's process and hands each pull stream one
// message per 10 ms; under the race detector it falls so far behind the
// default size's churn (6,000 statuses waiting for the hub) that the run
// cannot converge in time, so there it takes the short size (-short), as
// CI runs it, and the default size runs without the race detector.
func TestChaosOverPubSub(t *testing.T) {
	if raceEnabled && !testing.Short() {
		t.Skip("under the race detector the in-process fake carries only the short run: go test -race -short; the default size runs without -race")
	}
	s := pubsubtest.NewServer(t)
	proxy, err := transporttest.NewProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	cfg := fast(s.Config())
	cfg.Endpoint = proxy.Addr()
	chaos.Run(t, chaos.Env{
		Transport: func() (options.Transport, error) { return pubsub.New(cfg, pubsub.WithLogger(logr.Discard())) },
		Faults:    []chaos.Fault{chaos.ProxyCut(proxy), chaos.ProxyStall(proxy), chaos.AgentRestart(), chaos.HubRestart()},
		Report:    func() string { return fmt.Sprintf("proxy cuts %d", proxy.Cuts()) },
	})
}
