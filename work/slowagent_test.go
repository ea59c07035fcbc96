package work_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
)

// slowReader is a transport whose client reads one event at a time, each
// taking delay: the broker's queue in front of it fills as its source
// outruns it.
type slowReader struct {
	options.Transport
	delay time.Duration
	read  func()
}

func (s slowReader) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	return s.Transport.Start(ctx, subs, slowReceiver{r, s})
}

type slowReceiver struct {
	options.Receiver
	s slowReader
}

func (r slowReceiver) Deliver(d *options.Delivery) {
	time.Sleep(r.s.delay)
	r.s.read()
	r.Receiver.Deliver(d)
}

// paceCounter counts what pacing is judged by: specs the hub sent, those
// it sent again, and the agent's connects.
type paceCounter struct {
	generic.NopObserver
	mu                     sync.Mutex
	sent, resent, connects int
	read, maxAhead         int
}

func (c *paceCounter) EventSent(_ generic.Side, t types.EventType, err error) {
	if err == nil && t.SubResource == types.SubResourceSpec {
		c.mu.Lock()
		c.sent++
		c.mu.Unlock()
	}
}

func (c *paceCounter) SpecResent(types.DataType) {
	c.mu.Lock()
	c.resent++
	c.mu.Unlock()
}

func (c *paceCounter) Connected(generic.Side) {
	c.mu.Lock()
	c.connects++
	c.mu.Unlock()
}

// agentRead counts a spec event the agent read, and how far the hub had
// run ahead of it then: what the broker held for it.
func (c *paceCounter) agentRead() {
	c.mu.Lock()
	c.read++
	c.maxAhead = max(c.maxAhead, c.sent-c.read)
	c.mu.Unlock()
}

// Through a Mosquitto with its default queue (1,000 messages per client,
// the rest dropped), a hub creates 5,000 works for an agent that takes 20
// ms to read each event. Paced by its agent's statuses
// (generic.WithSpecWindow), the hub keeps the broker's queue short: every
// work is Applied, without the agent reconnecting or resyncing, and no more
// than 5% of the specs go twice. WORKWIRE_PACE_WINDOW=0 runs it unpaced,
// for comparison (the hub then heals the broker's drops by re-sending).
func TestAHubPacesAnAgentSlowerThanItsBroker(t *testing.T) {
	if os.Getenv(mosquitto.EnvBroker) == "" {
		t.Skipf("%s is not set: this test starts a Mosquitto of its own and takes minutes", mosquitto.EnvBroker)
	}
	n, window := 5000, 500
	if testing.Short() {
		n = 1500 // still more than the broker queues
	}
	if s := os.Getenv("WORKWIRE_PACE_WINDOW"); s != "" {
		var err error
		if window, err = strconv.Atoi(s); err != nil || window < 0 {
			t.Fatalf("WORKWIRE_PACE_WINDOW=%q: want a window of 0 or more", s)
		}
	}
	b := mosquitto.Start(t, func(port int) string { return mosquitto.Plain(port, "") })
	cfg := &mqtt.Config{BrokerHost: b.Addr()}
	source, cluster := "hub-pace", "cluster-pace"
	hubObs, agentObs := &paceCounter{}, &paceCounter{}
	hub := startHolder(t, hubBuilder(cfg, source).WithSourceOptions(generic.WithSpecWindow(window), generic.WithObserver(hubObs)))
	slow := options.TransportFunc(func() (options.Transport, error) {
		tr, err := cfg.NewTransport()
		return slowReader{Transport: tr, delay: 20 * time.Millisecond, read: hubObs.agentRead}, err
	})
	agent := startHolder(t, agentBuilder(slow, cluster).WithAgentOptions(generic.WithObserver(agentObs)))
	ctx, cancel := context.WithCancel(context.Background())
	wg := runAgentController(ctx, t, agent, cluster)
	t.Cleanup(func() { cancel(); wg.Wait() })

	began := time.Now()
	works := hub.WorkInterface().WorkV1().ManifestWorks(cluster)
	for i := range n {
		if _, err := works.Create(ctx, newWork(fmt.Sprintf("w%d", i), "v", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lister := hub.ManifestWorkInformer().Lister().ManifestWorks(cluster)
	applied := func() int {
		l, _ := lister.List(labels.Everything())
		k := 0
		for _, w := range l {
			if appliedAt(lister, w.Name) {
				k++
			}
		}
		return k
	}
	// A bound on convergence, not a measure of speed: the agent reads 50
	// events a second at best, so it takes 5,000 works well over a minute.
	deadline := time.Now().Add(10 * time.Minute)
	for k := applied(); k < n; k = applied() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d works Applied after %v", k, n, time.Since(began).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	hubObs.mu.Lock()
	resent, sent, ahead := hubObs.resent, hubObs.sent, hubObs.maxAhead
	hubObs.mu.Unlock()
	agentObs.mu.Lock()
	connects := agentObs.connects
	agentObs.mu.Unlock()
	t.Logf("window %d: %d works Applied in %v; %d specs sent, %d of them again; at most %d specs ahead of the agent",
		window, n, time.Since(began).Round(100*time.Millisecond), sent, resent, ahead)
	if connects != 1 {
		t.Errorf("the agent connected %d times, want once", connects)
	}
	if window > 0 && resent > n/20 {
		t.Errorf("%d of %d specs sent again, want at most 5%%", resent, n)
	}
}
