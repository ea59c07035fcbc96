package interop

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/generic"
	wwoptions "github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// size is how many works a pairing carries: WORKWIRE_INTEROP_WORKS, or
// def (at most 300 with -short).
func size(t *testing.T, def int) int {
	if s := os.Getenv("WORKWIRE_INTEROP_WORKS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 20 {
			t.Fatalf("WORKWIRE_INTEROP_WORKS=%q: want a number of works, 20 or more", s)
		}
		return n
	}
	if testing.Short() {
		return min(def, 300)
	}
	return def
}

// run is one pairing's lifecycle: create n works, update a tenth, delete
// a tenth (the Deleted handshake), kill the agent while more works are
// created and updated and start it again empty, restart the hub, and
// update again; after each step every work the hub holds must be Applied
// at its generation, and the agent hold exactly those.
type run struct {
	t       *testing.T
	hub     hub
	cluster string
	start   func(t *testing.T) agent
	agent   agent
	want    map[string]int64 // work → generation
}

func newRun(t *testing.T, h hub, cluster string, start func(t *testing.T) agent) *run {
	return &run{t: t, hub: h, cluster: cluster, start: start, want: map[string]int64{}}
}

// do runs f on works from..to-1, eight at a time, and records what they
// want.
func (r *run) do(what string, from, to int, f func(ctx context.Context, cluster string, i int) error, gen int64) {
	r.t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, r.cluster, i); err != nil {
					errs <- fmt.Errorf("%s %s: %w", what, workName(i), err)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		r.t.Fatal(err)
	}
	for i := from; i < to; i++ {
		if gen == 0 {
			delete(r.want, workName(i))
		} else {
			r.want[workName(i)] = gen
		}
	}
}

// converge waits until the hub holds exactly the works wanted, each
// Applied at its generation, and the agent holds exactly those, and logs
// how long that took.
func (r *run) converge(what string, began time.Time) {
	r.t.Helper()
	deadline := time.Now().Add(converged)
	for wait := time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		hubSide, agentSide := r.hub.applied(r.cluster), r.agent.holds()
		if same(hubSide, r.want) && same(agentSide, r.want) {
			break
		}
		if time.Now().After(deadline) {
			keys := maps.Clone(r.want)
			maps.Copy(keys, hubSide)
			maps.Copy(keys, agentSide)
			for k := range keys {
				if v, wanted := r.want[k]; !wanted || hubSide[k] != v || agentSide[k] != v {
					if d, ok := r.hub.(interface {
						describe(cluster, name string) string
					}); ok {
						r.t.Logf("the hub's %s: %s", k, d.describe(r.cluster, k))
					}
					if d, ok := r.agent.(interface{ describe(name string) string }); ok {
						r.t.Logf("the agent's %s: %s", k, d.describe(k))
					}
					break
				}
			}
			r.t.Fatalf("%s: not converged after %v: %s", what, converged, r.diff(hubSide, agentSide))
		}
		time.Sleep(wait)
	}
	extra := ""
	if h, ok := r.hub.(*ocmHub); ok {
		extra = fmt.Sprintf(" (the OCM hub dropped so far: %d for a bad sequenceid, %d older, %d ahead of its store; its informer lost %d works it created)",
			h.logs.count(logBadSequence), h.logs.count(logOlderSequence), h.logs.count(logNewerGen), h.lost.Load())
	}
	r.t.Logf("%s: %d works converged in %v%s", what, len(r.want), time.Since(began).Round(time.Millisecond), extra)
}

func same(got, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// diff says what the hub and the agent lack or hold too many of.
func (r *run) diff(hubSide, agentSide map[string]int64) string {
	wrongHub, wrongAgent, extraHub, extraAgent := 0, 0, 0, 0
	example := ""
	for k, v := range r.want {
		if hubSide[k] != v {
			wrongHub++
			if example == "" {
				example = fmt.Sprintf("%s: hub at %d, agent holds %d, want %d", k, hubSide[k], agentSide[k], v)
			}
		}
		if agentSide[k] != v {
			wrongAgent++
		}
	}
	for k := range hubSide {
		if _, ok := r.want[k]; !ok {
			extraHub++
		}
	}
	for k := range agentSide {
		if _, ok := r.want[k]; !ok {
			extraAgent++
		}
	}
	return fmt.Sprintf("%d works wanted; hub: %d not applied at their generation, %d not wanted; agent: %d not at their generation, %d not wanted (%s)",
		len(r.want), wrongHub, extraHub, wrongAgent, extraAgent, example)
}

// lifecycle runs the pairing with n works.
func (r *run) lifecycle(n int) {
	t := r.t
	tenth := n / 10
	r.agent = r.start(t)

	began := time.Now()
	r.do("create", 0, n, r.hub.create, 1)
	r.converge("create", began)

	began = time.Now()
	r.do("update", 0, tenth, r.hub.update, 2)
	r.converge("update", began)

	began = time.Now()
	r.do("delete", n-tenth, n, r.hub.remove, 0)
	r.converge("delete (the Deleted handshake)", began)

	// The agent dies while the hub creates and updates; it starts again
	// with an empty store, as an agent without a persistent one does.
	began = time.Now()
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		r.agent.stop(t)
	}()
	r.do("create while the agent restarts", n, n+tenth, r.hub.create, 1)
	<-killed
	r.do("update while the agent is down", tenth, 2*tenth, r.hub.update, 2)
	r.agent = r.start(t)
	r.converge("agent restart", began)

	began = time.Now()
	r.hub.restart(t)
	r.do("update after the hub restart", 2*tenth, 3*tenth, r.hub.update, 2)
	r.converge("hub restart", began)
}

func mqttConfig(t *testing.T, path string) *mqtt.Config {
	c, err := mqtt.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func grpcConfig(t *testing.T, path string) *grpc.Config {
	c, err := grpc.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// An OCM hub drives a workwire agent over MQTT, both on the one config
// file an OCM deployment has. The OCM hub drops no status for its sequence
// ID (it logs each status it drops; see checkOCMHubDrops) and the agent
// drops no event.
func TestOCMHubWorkwireAgentOverMQTT(t *testing.T) {
	for name, broker := range mqttBrokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			works := 5000 // the measure, once
			if name != "mqtt-embedded" {
				works = 1000
			}
			ocmHubWorkwireAgent(t, broker(t), mqtt.ContentModeBinary, works)
		})
	}
}

// ocmHubWorkwireAgent runs an OCM hub and a workwire agent that sends in
// contentMode through broker.
func ocmHubWorkwireAgent(t *testing.T, broker, contentMode string, works int) {
	source, cluster := unique("hub"), unique("cluster")
	file := ocmMQTTFile(t, broker, source)
	h := startOCMHub(t, ocmMQTTOptions(t, file), source)
	var agents []*wwAgent
	r := newRun(t, h, cluster, func(t *testing.T) agent {
		c := mqttConfig(t, file)
		c.ContentMode = contentMode
		a := startWWAgent(t, work.NewClientHolderBuilder(c).WithClusterName(cluster).WithLogger(logr.Discard()).
			WithStatusResend(time.Second), cluster)
		agents = append(agents, a)
		return a
	})
	r.lifecycle(size(t, works))
	checkOCMHubDrops(t, h)
	for i, a := range agents {
		if d := a.drops.dropped(); len(d) != 0 {
			t.Errorf("the workwire agent's run %d dropped events: %v", i+1, d)
		}
	}
}

// checkOCMHubDrops fails the test for every status the OCM hub dropped for
// a sequenceid it could not compare (another node, not a snowflake): the
// wire's to get right, and what it never asks for again. It logs the
// statuses it dropped as older than one it already had — answers to its
// status resync that statuses published after them overtook, dropped as
// they should be — and those it dropped for arriving before its own store
// had the generation it had just published, a race of OCM's source that
// OCM's agents hit too and WithStatusResend heals. Either way the run's
// convergence says no work was left without its newest status.
func checkOCMHubDrops(t *testing.T, h *ocmHub) {
	t.Helper()
	if n := h.logs.count(logBadSequence); n != 0 {
		t.Errorf("the OCM hub dropped %d statuses for a sequenceid it could not compare; the first: %s", n, h.logs.sample(logBadSequence))
	}
	t.Logf("the OCM hub dropped %d statuses older than one it had, and %d that came before it stored their generation (resent)",
		h.logs.count(logOlderSequence), h.logs.count(logNewerGen))
}

func firstDrop(h *ocmHub) string {
	for _, p := range []string{logBadSequence, logOlderSequence, logNewerGen} {
		if s := h.logs.sample(p); s != "" {
			return s
		}
	}
	return ""
}

// A workwire hub drives an OCM agent over MQTT.
func TestWorkwireHubOCMAgentOverMQTT(t *testing.T) {
	for name, broker := range mqttBrokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			workwireHubOCMAgent(t, broker(t), mqtt.ContentModeBinary, 500) // OCM's agent takes about 18ms an event
		})
	}
}

// workwireHubOCMAgent runs a workwire hub that sends in contentMode and an
// OCM agent through broker.
func workwireHubOCMAgent(t *testing.T, broker, contentMode string, works int) {
	source, cluster := unique("hub"), unique("cluster")
	file := ocmMQTTFile(t, broker, source)
	hubDrops := &dropCounter{reasons: map[generic.DropReason]int{}}
	h := startWWHub(t, func() *work.ClientHolderBuilder {
		c := mqttConfig(t, file)
		c.ContentMode = contentMode
		return work.NewClientHolderBuilder(c).WithSourceID(source).WithLogger(logr.Discard()).
			WithSourceOptions(generic.WithObserver(hubDrops))
	})
	r := newRun(t, h, cluster, func(t *testing.T) agent { return startOCMAgent(t, ocmMQTTOptions(t, file), cluster) })
	r.lifecycle(size(t, works))
	if d := hubDrops.dropped(); len(d) != 0 {
		t.Errorf("the workwire hub dropped events: %v", d)
	}
	// OCM's agent handles each event on a goroutine of its own: an update
	// that loses the race to its create is lost, and the hub sends it
	// again.
	t.Logf("the workwire hub sent %d specs again", hubDrops.resends())
}

// OCM's peers read the structured content mode: a workwire hub and a
// workwire agent that send it drive an OCM agent and an OCM hub, over the
// embedded broker (the mode is the client's, not the broker's).
func TestOCMPeersReadStructuredMQTT(t *testing.T) {
	t.Run("ocm-agent", func(t *testing.T) {
		t.Parallel()
		workwireHubOCMAgent(t, mqtttest.NewBroker(t).Addr(), mqtt.ContentModeStructured, 200)
	})
	t.Run("ocm-hub", func(t *testing.T) {
		t.Parallel()
		ocmHubWorkwireAgent(t, mqtttest.NewBroker(t).Addr(), mqtt.ContentModeStructured, 1000)
	})
}

// An OCM gRPC agent against workwire's broker, which a workwire hub
// publishes to: works reach it and its statuses reach the hub, and the
// broker's heartbeats keep its health check satisfied through an idle spell
// three times its timeout, so it never reconnects on its own. (Under a
// burst, OCM's agent handles each event before it reads on, heartbeats
// included, so a timeout shorter than a burst takes to handle can fire
// whichever broker it talks to: the test logs those.)
func TestOCMAgentWorkwireBroker(t *testing.T) {
	const heartbeat, healthiness = 200 * time.Millisecond, 2 * time.Second
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: wwoptions.Duration(heartbeat)})
	source, cluster := unique("hub"), unique("cluster")
	h := startWWHub(t, func() *work.ClientHolderBuilder {
		return work.NewClientHolderBuilder(grpcConfig(t, writeFile(t, "hub.yaml", "url: "+srv.Addr()+"\n"))).WithSourceID(source).WithLogger(logr.Discard())
	})
	agentFile := writeFile(t, "agent.yaml", fmt.Sprintf("url: %s\nserverHealthinessTimeout: %s\n", srv.Addr(), healthiness))
	var agents []*ocmAgent
	r := newRun(t, h, cluster, func(t *testing.T) agent {
		a := startOCMAgent(t, ocmGRPCOptions(t, agentFile), cluster)
		agents = append(agents, a)
		return a
	})
	r.lifecycle(size(t, 500))
	last := agents[len(agents)-1]
	timeouts, subscribed := last.logs.count(logStreamTimeout), last.logs.count(logSubscribed)
	t.Logf("the OCM agent's last run: %d health check timeouts, %d subscriptions during the lifecycle", timeouts, subscribed)

	time.Sleep(3 * healthiness) // idle: only heartbeats on the stream
	if n := last.logs.count(logStreamTimeout) - timeouts; n != 0 {
		t.Errorf("the OCM agent's health check timed out %d times while idle", n)
	}
	if n := last.logs.count(logSubscribed) - subscribed; n != 0 {
		t.Errorf("the OCM agent subscribed %d more times while idle", n)
	}
	// Still connected: a work created now arrives and is applied.
	began := time.Now()
	r.do("create after the idle spell", 3*size(t, 500), 3*size(t, 500)+1, r.hub.create, 1)
	r.converge("create after the idle spell", began)
}

// A workwire gRPC agent against OCM's broker and a Service over its store.
func TestWorkwireAgentOCMBroker(t *testing.T) {
	source, cluster := unique("hub"), unique("cluster")
	b := startOCMBroker(t, source, time.Second)
	var agents []*wwAgent
	r := newRun(t, b, cluster, func(t *testing.T) agent {
		cfg := grpcConfig(t, writeFile(t, "agent.yaml", fmt.Sprintf("url: %s\nserverHealthinessTimeout: 5s\n", b.addr)))
		a := startWWAgent(t, work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithLogger(logr.Discard()), cluster)
		agents = append(agents, a)
		return a
	})
	r.lifecycle(size(t, 1000))
	for i, a := range agents {
		if d := a.drops.dropped(); len(d) != 0 {
			t.Errorf("the workwire agent's run %d dropped events: %v", i+1, d)
		}
	}
}

// gzip over gRPC with OCM's peers, which compress nothing themselves: an
// OCM agent at a workwire broker that compresses its streams (a workwire
// hub there compressing what it publishes), and a workwire agent that
// compresses at OCM's broker.
func TestGRPCCompressionWithOCMPeers(t *testing.T) {
	t.Run("ocm-agent", func(t *testing.T) {
		t.Parallel()
		srv := grpctest.NewServerWithConfig(t, server.Config{Compression: protocol.Gzip})
		source, cluster := unique("hub"), unique("cluster")
		h := startWWHub(t, func() *work.ClientHolderBuilder {
			cfg := grpcConfig(t, writeFile(t, "hub.yaml", "url: "+srv.Addr()+"\ncompression: gzip\n"))
			return work.NewClientHolderBuilder(cfg).WithSourceID(source).WithLogger(logr.Discard())
		})
		agentFile := writeFile(t, "agent.yaml", "url: "+srv.Addr()+"\n")
		r := newRun(t, h, cluster, func(t *testing.T) agent { return startOCMAgent(t, ocmGRPCOptions(t, agentFile), cluster) })
		r.lifecycle(size(t, 200))
	})
	t.Run("ocm-broker", func(t *testing.T) {
		t.Parallel()
		source, cluster := unique("hub"), unique("cluster")
		b := startOCMBroker(t, source, time.Second)
		r := newRun(t, b, cluster, func(t *testing.T) agent {
			cfg := grpcConfig(t, writeFile(t, "agent.yaml", fmt.Sprintf("url: %s\ncompression: gzip\n", b.addr)))
			return startWWAgent(t, work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithLogger(logr.Discard()), cluster)
		})
		r.lifecycle(size(t, 200))
	})
}

var uniqueN struct {
	sync.Mutex
	n int
}

// unique returns prefix and a number no other call returned, so pairings
// can share a real broker.
func unique(prefix string) string {
	uniqueN.Lock()
	defer uniqueN.Unlock()
	uniqueN.n++
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), uniqueN.n)
}

// converged bounds how long a step may take to converge.
var converged = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("WORKWIRE_INTEROP_WAIT")); err == nil {
		return d
	}
	return 3 * time.Minute
}()

// Periodic resyncs at several thousand works cost nothing once both sides
// agree: a workwire agent's spec resync is one event, which OCM's hub
// reads as the agent's complete list and answers with nothing (it answered
// the batches this SDK used to send with every work each batch lacked).
// Nothing is deleted here, so a work OCM's hub loses (see ocmHub.create)
// is put back.
func TestPeriodicSpecResyncsToAnOCMHub(t *testing.T) {
	n := size(t, 2000)
	source, cluster := unique("hub"), unique("cluster")
	file := ocmMQTTFile(t, mqtttest.NewBroker(t).Addr(), source)
	h := startOCMHub(t, ocmMQTTOptions(t, file), source)
	h.restoreLost(t)
	var a *wwAgent
	r := newRun(t, h, cluster, func(t *testing.T) agent {
		a = startWWAgent(t, work.NewClientHolderBuilder(mqttConfig(t, file)).WithClusterName(cluster).WithLogger(logr.Discard()).
			WithStatusResend(time.Second).WithAgentOptions(generic.WithResyncInterval(time.Second)), cluster)
		return a
	})
	r.agent = r.start(t)
	began := time.Now()
	r.do("create", 0, n, r.hub.create, 1)
	r.converge("create", began)
	resyncs, specs := a.drops.sentOf("spec.resync_request"), a.drops.receivedOf("spec.resync_response")
	a.drops.waitSent(t, "spec.resync_request", resyncs+3)
	if got := a.drops.sentOf("spec.resync_request") - resyncs; got > 4 {
		t.Errorf("%d spec resync events for 3 or 4 resyncs: want one event each", got)
	}
	if got := a.drops.receivedOf("spec.resync_response") - specs; got != 0 {
		t.Errorf("OCM's hub answered the agent's periodic resyncs with %d specs, want none", got)
	}
	checkOCMHubDrops(t, h)
}

// A workwire hub creates 5,000 works at once for an OCM agent, which
// handles about 50 events a second, through a Mosquitto with its default
// queue of 1,000 messages per client: every work reaches the agent and is
// Applied, with no restart, and no more than 5% of the specs go twice. The
// hub paces the agent by its statuses (generic.WithSpecWindow), which
// OCM's agent reports as a workwire agent does; measured here, it
// converges as fast as without a window (OCM sdk-go v1.3.0's agent takes
// every message off its connection at once, a goroutine each, so this
// broker's queue does not fill either way; generic's
// TestAWindowKeepsTheBacklogOfASlowAgentShort shows what the window does
// for an agent that reads one message at a time).
func TestAWorkwireHubPacesASlowOCMAgent(t *testing.T) {
	broker := os.Getenv("WORKWIRE_MQTT_BROKER")
	if broker == "" {
		t.Skip("WORKWIRE_MQTT_BROKER is not set: this test needs a Mosquitto with its default queue settings")
	}
	n := size(t, 5000)
	source, cluster := unique("hub"), unique("cluster")
	file := ocmMQTTFile(t, broker, source)
	obs := &dropCounter{reasons: map[generic.DropReason]int{}}
	h := startWWHub(t, func() *work.ClientHolderBuilder {
		return work.NewClientHolderBuilder(mqttConfig(t, file)).WithSourceID(source).WithLogger(logr.Discard()).
			WithSourceOptions(generic.WithObserver(obs), generic.WithSpecWindow(500))
	})
	r := newRun(t, h, cluster, func(t *testing.T) agent { return startOCMAgent(t, ocmMQTTOptions(t, file), cluster) })
	r.agent = r.start(t)
	began := time.Now()
	r.do("create", 0, n, h.create, 1)
	r.converge("create", began)
	resent := obs.resends()
	t.Logf("%d specs sent again", resent)
	if resent > n/20 {
		t.Errorf("%d of %d specs sent again, want at most 5%%", resent, n)
	}
}
