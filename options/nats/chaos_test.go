package nats_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/internal/testsupport/chaos"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// Over NATS JetStream, the chaos suite of the main module's transports
// (internal/testsupport/chaos, which says how to size a run and replay a
// seed): the embedded server behind a proxy that cuts and stalls
// connections; the server restarts (keeping its store, so the durable
// consumers resume where they were), and agents and the hub restart.
func TestChaosOverNATS(t *testing.T) {
	s := natstest.NewServer(t)
	chaosOverNATS(t, s.URL(), chaos.BrokerRestart(s.Restart))
}

// The same against the server WORKWIRE_NATS_URL names, in a stream and
// under subjects of the run's own, through a proxy that cuts and stalls
// connections; a shared server is not restarted from here.
func TestChaosOverRealNATS(t *testing.T) {
	url := os.Getenv(URLEnv)
	if url == "" {
		t.Skipf("%s is not set", URLEnv)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replay needs %s=%s too", URLEnv, url)
		}
	})
	chaosOverNATS(t, url)
}

// chaosOverNATS runs the chaos suite over the server at url, behind a
// proxy, with the proxy's faults, the agents' and the hub's restarts, and
// the server's faults before them.
func chaosOverNATS(t *testing.T, url string, serverFaults ...chaos.Fault) {
	proxy, err := transporttest.NewProtocolProxy(transporttest.NATS, strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	cfg := isolated(t, url) // reconnects within 20 to 500 ms
	cfg.URL = "nats://" + proxy.Addr()
	// A delivery a cut or a restart took from a client in flight comes
	// back after AckWait, by then maybe older than what resync has sent
	// since: a spec redelivered after its work's deletion brings the work
	// back to its agent until the source's next resync answer deletes it
	// again. With the default minute, a run could not converge sooner than
	// that after its last fault.
	cfg.AckWait = options.Duration(5 * time.Second)
	chaos.Run(t, chaos.Env{
		Transport: func() (options.Transport, error) { return nats.New(cfg, nats.WithLogger(logr.Discard())) },
		Faults: append(serverFaults,
			chaos.ProxyCut(proxy), chaos.ProxyStall(proxy), chaos.ProxyDeafen(proxy), chaos.AgentRestart(), chaos.HubRestart()),
		Report: func() string {
			return fmt.Sprintf("proxy cuts %d, frames dropped deaf %d", proxy.Cuts(), proxy.Deafened())
		},
	})
}
