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
// message per 10 ms, so the run takes the short size: the default size's
// churn outran it on a loaded machine (with two CPU-bound processes
// beside it, 2 runs of 2 did not converge in two minutes; the short size
// converged in 3 to 4 s, 3 runs of 3).
func TestChaosOverPubSub(t *testing.T) {
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
		Short:     true,
	})
}
