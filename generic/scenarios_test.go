package generic_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/resync"
	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// The scenarios below are the protocol's integration suite. Each runs on
// every transport: the in-memory broker, the embedded MQTT broker, and a
// real Mosquitto when WORKWIRE_MQTT_BROKER names one.

// env is one transport setup for one scenario. IDs are unique per scenario
// so scenarios can share a real broker.
type env struct {
	src, c1, c2 string
	transport   func(t *testing.T) options.Transport
	restart     func(t *testing.T)
	sendRaw     func(t *testing.T, r options.Route, payload []byte)
	// deafen makes tr, one of transport's, deaf: its connection stays
	// up, but nothing more is delivered on it; a new connection hears.
	// Nil where the transport's tests cannot do it.
	deafen func(t *testing.T, tr options.Transport)
	// filtersDataTypes: the broker delivers a subscriber only the data
	// types it subscribed to, so an unknown one never reaches a client.
	filtersDataTypes bool
}

type scenario struct {
	name        string
	run         func(t *testing.T, e *env)
	needRestart bool
}

var scenarios = []scenario{
	{name: "PublishSubscribeBothWays", run: scenarioPublishSubscribeBothWays},
	{name: "SpecResyncWhenAgentStartsLate", run: scenarioSpecResyncWhenAgentStartsLate},
	{name: "SpecResyncFixesStaleAndOrphanResources", run: scenarioSpecResyncFixesStaleAndOrphanResources},
	{name: "SpecResyncNeverDeletesAnotherSourcesResources", run: scenarioSpecResyncNeverDeletesAnotherSourcesResources},
	{name: "UnattributedResourcesAreKept", run: scenarioUnattributedResourcesAreKept},
	{name: "RestartedSourceRepairsVersions", run: scenarioRestartedSourceRepairsVersions},
	{name: "OrphansWaitForTheGracePeriod", run: scenarioOrphansWaitForTheGracePeriod},
	{name: "StatusResyncWhenSourceRestarts", run: scenarioStatusResyncWhenSourceRestarts},
	{name: "StatusResyncAnswerResumesAfterAFailedSend", run: scenarioStatusResyncAnswerResumesAfterAFailedSend},
	{name: "SpecResyncAnswerResumesAfterAFailedSend", run: scenarioSpecResyncAnswerResumesAfterAFailedSend},
	{name: "AgentRestartResyncsWhatWasMissed", run: scenarioAgentRestartResyncsWhatWasMissed},
	{name: "BrokerRestartMidStreamLosesNothing", run: scenarioBrokerRestartMidStreamLosesNothing, needRestart: true},
	{name: "MalformedEventsDoNotStopTheSubscription", run: scenarioMalformedEventsDoNotStopTheSubscription},
	{name: "StaleAndForeignSpecsAreDropped", run: scenarioStaleAndForeignSpecsAreDropped},
	{name: "ASpecDeliveredLateDoesNotBringBackADeletion", run: scenarioASpecDeliveredLateDoesNotBringBackADeletion},
	{name: "ResyncResponsesOfOCMPeersAreHandled", run: scenarioResyncResponsesOfOCMPeersAreHandled},
	{name: "OutOfOrderStatusIsDropped", run: scenarioOutOfOrderStatusIsDropped},
	{name: "LargeResyncIsOneEventUnlessTheLimitSplitsIt", run: scenarioLargeResyncIsOneEventUnlessTheLimitSplitsIt},
	{name: "FailingHandlerIsRetried", run: scenarioFailingHandlerIsRetried},
	{name: "SingularDataTypeIsAccepted", run: scenarioSingularDataTypeIsAccepted},
	{name: "ADeafSubscriptionIsFoundAndHealed", run: scenarioADeafSubscriptionIsFoundAndHealed},
}

type envMaker struct {
	name string
	make func(t *testing.T, needRestart bool) *env
}

// moreEnvs holds the transports other test files add with registerEnv
// from an init function (one file per transport).
var moreEnvs []envMaker

func registerEnv(m envMaker) { moreEnvs = append(moreEnvs, m) }

func envMakers() []envMaker {
	makers := []envMaker{
		{name: "memory", make: func(t *testing.T, _ bool) *env {
			b := memory.NewBroker()
			return &env{
				transport: func(*testing.T) options.Transport { return b.Transport() },
				restart:   func(*testing.T) { b.Restart() },
				sendRaw:   func(_ *testing.T, r options.Route, p []byte) { b.SendRaw(r, p) },
				deafen:    func(_ *testing.T, tr options.Transport) { tr.(*memory.Transport).Deafen() },
			}
		}},
		{name: "mqtt-embedded", make: func(t *testing.T, _ bool) *env {
			b := mqtttest.NewBroker(t)
			e := mqttEnv(b.Addr())
			e.restart = func(t *testing.T) {
				if err := b.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			return e
		}},
	}
	if addr := os.Getenv(mosquitto.EnvBroker); addr != "" {
		makers = append(makers, envMaker{name: "mqtt-mosquitto", make: func(t *testing.T, needRestart bool) *env {
			if !needRestart {
				return mqttEnv(addr)
			}
			// The shared broker cannot be restarted from a test: use a private one.
			b := mosquitto.Start(t, func(port int) string { return mosquitto.Plain(port, "") })
			e := mqttEnv(b.Addr())
			e.restart = func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := b.Restart(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return e
		}})
	}
	return append(makers, moreEnvs...)
}

func mqttEnv(addr string) *env {
	var mu sync.Mutex
	proxies := map[options.Transport]*transporttest.Proxy{} // each transport's own, to make it deaf
	return &env{
		transport: func(t *testing.T) options.Transport {
			p, err := transporttest.NewProtocolProxy(transporttest.MQTT, addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			tr, err := mqtt.New(mqtt.Config{
				BrokerHost:          p.Addr(),
				ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
				ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
			}, mqtt.WithLogger(logr.Discard()))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			proxies[tr] = p
			mu.Unlock()
			return tr
		},
		deafen: func(_ *testing.T, tr options.Transport) {
			mu.Lock()
			defer mu.Unlock()
			proxies[tr].Deafen()
		},
		sendRaw: func(t *testing.T, r options.Route, payload []byte) {
			topics, err := options.WorkwireLayout.Compile()
			if err != nil {
				t.Fatal(err)
			}
			topic, err := topics.Topic(r)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := mqtttest.Publish(ctx, addr, topic, payload); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func TestScenarios(t *testing.T) {
	for _, m := range envMakers() {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					e := m.make(t, s.needRestart)
					if s.needRestart && e.restart == nil {
						t.Skip("this transport cannot restart its broker")
					}
					var b [4]byte
					_, _ = rand.Read(b[:])
					suffix := hex.EncodeToString(b[:])
					e.src, e.c1, e.c2 = "hub-"+suffix, "cluster1-"+suffix, "cluster2-"+suffix
					s.run(t, e)
				})
			}
		})
	}
}

func scenarioPublishSubscribeBothWays(t *testing.T, e *env) {
	w := newWidget(e.src, e.c1, "a", "spec-1", 1)
	hub := startSource(t, e.src, e.transport(t), newStore(w))
	agent := startAgent(t, e.transport(t), e.c1, newStore())

	ctx := context.Background()
	if err := hub.client.Publish(ctx, specCreate, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent holds the widget", func() bool {
		got, ok := agent.store.get(string(w.UID))
		return ok && got.Spec == "spec-1" && got.Annotations[sourceAnnotation] == e.src
	})

	got, _ := agent.store.get(string(w.UID))
	got.Status = "Applied"
	agent.store.put(got)
	if err := agent.client.Publish(ctx, statusUpdate, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "source sees the status", func() bool {
		got, _ := hub.store.get(string(w.UID))
		return got.Status == "Applied"
	})

	w.Spec, w.Generation = "spec-2", 2
	hub.store.put(w)
	if err := hub.client.Publish(ctx, specUpdate, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent holds the update", func() bool {
		got, _ := agent.store.get(string(w.UID))
		return got.Spec == "spec-2" && got.Generation == 2
	})

	// The source's store is the truth a resync answers from: it holds the
	// deletion before the delete is sent, or a resync racing the delete
	// would send the work again.
	w.DeletionTimestamp, w.Generation = &metav1.Time{Time: time.Now()}, 3
	hub.store.put(w)
	if err := hub.client.Publish(ctx, specDelete, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent deleted the widget", func() bool { return agent.store.len() == 0 })
}

func scenarioSpecResyncWhenAgentStartsLate(t *testing.T, e *env) {
	hubStore := newStore()
	for i := range 5 {
		hubStore.put(newWidget(e.src, e.c1, fmt.Sprint("w", i), "s", 1))
	}
	for i := range 3 {
		hubStore.put(newWidget(e.src, e.c2, fmt.Sprint("w", i), "s", 1))
	}
	startSource(t, e.src, e.transport(t), hubStore)
	agent := startAgent(t, e.transport(t), e.c1, newStore())
	eventually(t, "agent holds cluster1's widgets", sameSpecs(hubStore, agent.store, e.c1))
	if n := agent.store.len(); n != 5 {
		t.Fatalf("agent holds %d widgets, want 5 (none of cluster2's)", n)
	}
}

// sourcesStore is an agent store that names its sources (generic.SourceLister).
type sourcesStore struct{ *store }

func (s sourcesStore) Sources(cluster string) ([]string, error) {
	ws, err := s.List(generic.ListOptions{ClusterName: cluster})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.Annotations[sourceAnnotation])
	}
	return out, nil
}

func scenarioSpecResyncFixesStaleAndOrphanResources(t *testing.T, e *env) {
	stale := newWidget(e.src, e.c1, "stale", "new", 3)
	current := newWidget(e.src, e.c1, "current", "same", 2)
	deleting := newWidget(e.src, e.c1, "deleting", "x", 2)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	missing := newWidget(e.src, e.c1, "missing", "m", 1)
	hubStore := newStore(stale, current, deleting, missing)

	oldStale := stale.copy()
	oldStale.Spec, oldStale.Generation = "old", 1
	orphan := newWidget(e.src, e.c1, "orphan", "o", 4)
	otherSources := newWidget(e.src+"-other", e.c1, "theirs", "t", 1)
	agentStore := newStore(oldStale, current, deleting, orphan, otherSources)

	hub := startSource(t, e.src, e.transport(t), hubStore)
	agent := startAgentWith(t, e.transport(t), e.c1, agentStore, sourcesStore{agentStore})

	eventually(t, "agent converges", func() bool {
		got, ok := agentStore.get(string(stale.UID))
		_, orphanLeft := agentStore.get(string(orphan.UID))
		_, deletingLeft := agentStore.get(string(deleting.UID))
		_, missingThere := agentStore.get(string(missing.UID))
		return ok && got.Spec == "new" && got.Generation == 3 && !orphanLeft && !deletingLeft && missingThere
	})
	if n := agent.calls(string(current.UID)); n != 0 {
		t.Errorf("the up-to-date widget was sent %d times, want 0", n)
	}
	if n := hub.obs.sends("spec.delete_request"); n < 2 {
		t.Errorf("source sent %d deletes, want at least 2 (the orphans and the deleting widget)", n)
	}
	if _, ok := agentStore.get(string(otherSources.UID)); !ok {
		t.Error("the other source's widget was deleted")
	}
}

func scenarioSpecResyncNeverDeletesAnotherSourcesResources(t *testing.T, e *env) {
	hubStore := newStore(newWidget(e.src, e.c1, "mine", "m", 1))
	orphan := newWidget(e.src, e.c1, "orphan", "o", 1)
	theirs := newWidget(e.src+"-other", e.c1, "theirs", "t", 1)
	agentStore := newStore(orphan, theirs)

	startSource(t, e.src, e.transport(t), hubStore)
	startAgentWith(t, e.transport(t), e.c1, agentStore, sourcesStore{agentStore})
	eventually(t, "orphan deleted and mine created", func() bool {
		_, orphanLeft := agentStore.get(string(orphan.UID))
		_, mine := agentStore.get("uid-" + e.c1 + "-mine")
		return !orphanLeft && mine
	})
	if _, ok := agentStore.get(string(theirs.UID)); !ok {
		t.Fatal("the other source's widget was deleted")
	}
}

// An agent that cannot say whose resources it holds (a restart with a store
// that does not implement generic.SourceLister, before any event taught it
// the source) keeps them: every source hears the resync, and a source must
// never delete another's resources.
func scenarioUnattributedResourcesAreKept(t *testing.T, e *env) {
	hubStore := newStore(newWidget(e.src, e.c1, "mine", "m", 1))
	theirs := newWidget(e.src+"-other", e.c1, "theirs", "t", 1)
	agentStore := newStore(theirs)

	hub := startSource(t, e.src, e.transport(t), hubStore)
	agent := startAgent(t, e.transport(t), e.c1, agentStore)
	eventually(t, "mine created", func() bool { _, ok := agentStore.get("uid-" + e.c1 + "-mine"); return ok })
	// Now the agent knows this source: its next resync attributes "mine"
	// and still cannot attribute "theirs".
	if err := agent.client.Resync(context.Background(), types.DataType{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second resync answered", func() bool { return hub.obs.received("spec.resync_request") >= 2 })
	if n := hub.obs.sends("spec.delete_request"); n != 0 {
		t.Errorf("source sent %d deletes for resources that are not its own", n)
	}
	if _, ok := agentStore.get(string(theirs.UID)); !ok {
		t.Error("the other source's widget was deleted")
	}
}

// repairingStore is a source store that implements generic.VersionRepairer.
type repairingStore struct{ *store }

func (r repairingStore) RepairVersion(_ context.Context, w *widget, agentVersion int64) (*widget, error) {
	w = w.copy()
	w.Generation = agentVersion + 1
	r.put(w)
	return w, nil
}

// A source that lost its versions (an in-memory store re-created after a
// restart) learns from the agent's resync that the agent is ahead, moves
// past it, and sends its spec again: nothing is deleted and re-created.
func scenarioRestartedSourceRepairsVersions(t *testing.T, e *env) {
	held := newWidget(e.src, e.c1, "a", "old", 5)
	agentStore := newStore(held)
	agent := startAgentWith(t, e.transport(t), e.c1, agentStore, sourcesStore{agentStore})
	hubStore := newStore(newWidget(e.src, e.c1, "a", "new", 1)) // re-created at generation 1
	var opts []generic.SourceOption
	for _, o := range testOpts(newCounter()) {
		opts = append(opts, o)
	}
	c, err := generic.NewSourceClient[*widget](e.src, e.transport(t), repairingStore{hubStore}, hashWidget,
		[]generic.Codec[*widget]{widgetCodec{}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	eventually(t, "agent holds the source's spec past its old version", func() bool {
		w, ok := agentStore.get(string(held.UID))
		return ok && w.Spec == "new" && w.Generation == 6
	})
	if n := agent.obs.drops(generic.DropStale); n != 0 {
		t.Errorf("%d specs were dropped as stale", n)
	}
}

// A source that starts with an incomplete store keeps orphans during its
// grace period and deletes them at the first resync after it.
func scenarioOrphansWaitForTheGracePeriod(t *testing.T, e *env) {
	orphan := newWidget(e.src, e.c1, "orphan", "o", 1)
	agentStore := newStore(orphan)
	agent := startAgentWith(t, e.transport(t), e.c1, agentStore, sourcesStore{agentStore})
	const grace = 500 * time.Millisecond
	hub := startSource(t, e.src, e.transport(t), newStore(), generic.WithOrphanGracePeriod(grace))
	eventually(t, "the source answered a resync", func() bool { return hub.obs.answers() >= 1 })
	if n := hub.obs.sends("spec.delete_request"); n != 0 {
		t.Fatalf("the source sent %d deletes during its grace period", n)
	}
	time.Sleep(grace) // the grace period is wall-clock time by definition
	if err := agent.client.Resync(context.Background(), types.DataType{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "orphan deleted after the grace period", func() bool { _, ok := agentStore.get(string(orphan.UID)); return !ok })
}

func scenarioStatusResyncWhenSourceRestarts(t *testing.T, e *env) {
	hubStore, agentStore := newStore(), newStore()
	var uids []string
	for i := range 3 {
		w := newWidget(e.src, e.c1, fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		agentStore.put(w)
		uids = append(uids, string(w.UID))
	}
	// The agent first, so it hears the source's status resync, and answers it
	// before the test goes on: no answer is left in flight to confuse the
	// count below.
	agent := startAgent(t, e.transport(t), e.c1, agentStore)
	hub := startSource(t, e.src, e.transport(t), hubStore)
	eventually(t, "agent answered the first status resync", func() bool { return agent.obs.answers() >= 1 })
	report := func(uid, status string) {
		w, _ := agentStore.get(uid)
		w.Status = status
		agentStore.put(w)
		if err := agent.client.Publish(context.Background(), statusUpdate, w); err != nil {
			t.Fatal(err)
		}
	}
	statuses := func(want ...string) func() bool {
		return func() bool {
			for i, uid := range uids {
				if w, _ := hubStore.get(uid); w.Status != want[i] {
					return false
				}
			}
			return true
		}
	}
	for _, uid := range uids {
		report(uid, "first")
	}
	eventually(t, "source has the first statuses", statuses("first", "first", "first"))

	hub.close(t)
	report(uids[0], "second") // nobody listens: lost
	report(uids[2], "second")
	restarted := startSource(t, e.src, e.transport(t), hubStore) // over the same (persistent) store
	eventually(t, "restarted source has the statuses it missed", statuses("second", "first", "second"))
	if n := restarted.calls(uids[1]); n != 0 {
		t.Errorf("the status whose hash matched was resent %d times", n)
	}
}

// A source that restarted with no status at all asks for every one; the
// agent's answer sends each without being named. A send that fails midway
// (a broker that did not acknowledge in time) stops the answer, and its
// retry sends the rest.
func scenarioStatusResyncAnswerResumesAfterAFailedSend(t *testing.T, e *env) {
	hubStore, agentStore := newStore(), newStore()
	const n = 3 * resync.Senders // more than one round of sends: the failure stops the answer midway
	for i := range n {
		w := newWidget(e.src, e.c1, fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		applied := *w
		applied.Status = "applied"
		agentStore.put(&applied)
	}
	startAgent(t, &failOnce{Transport: e.transport(t), role: options.RoleStatus, nth: 2}, e.c1, agentStore)
	startSource(t, e.src, e.transport(t), hubStore)
	eventually(t, "the source has every status", func() bool {
		for i := range n {
			if w, _ := hubStore.get(fmt.Sprint("uid-", e.c1, "-w", i)); w.Status != "applied" {
				return false
			}
		}
		return true
	})
}

// An agent that starts with nothing asks for every spec; the source's
// answer sends each without being named. A send that fails midway stops
// the answer, and its retry sends the rest.
func scenarioSpecResyncAnswerResumesAfterAFailedSend(t *testing.T, e *env) {
	hubStore := newStore()
	const n = 3 * resync.Senders
	for i := range n {
		hubStore.put(newWidget(e.src, e.c1, fmt.Sprint("w", i), "s", 1))
	}
	startSource(t, e.src, &failOnce{Transport: e.transport(t), role: options.RoleSpec, nth: 2}, hubStore)
	agent := startAgent(t, e.transport(t), e.c1, newStore())
	eventually(t, "the agent has every spec", func() bool { return agent.store.len() == n })
}

// failOnce fails the nth send of role once, as a broker that does not
// acknowledge in time does.
type failOnce struct {
	options.Transport
	role options.Role
	nth  int
	sent atomic.Int32
}

func (f *failOnce) Send(ctx context.Context, r options.Route, evt *cloudevents.Event) error {
	if r.Role == f.role && int(f.sent.Add(1)) == f.nth {
		return errors.New("no acknowledgement in time")
	}
	return f.Transport.Send(ctx, r, evt)
}

func scenarioAgentRestartResyncsWhatWasMissed(t *testing.T, e *env) {
	hubStore, agentStore := newStore(), newStore()
	hub := startSource(t, e.src, e.transport(t), hubStore)
	agent := startAgent(t, e.transport(t), e.c1, agentStore)
	publish := func(i int) {
		w := newWidget(e.src, e.c1, fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		if err := hub.client.Publish(context.Background(), specCreate, w); err != nil {
			t.Fatal(err)
		}
	}
	publish(0)
	eventually(t, "agent holds the first widget", func() bool { return agentStore.len() == 1 })
	agent.close(t)
	for i := 1; i <= 10; i++ {
		publish(i) // the agent is down: lost
	}
	startAgent(t, e.transport(t), e.c1, agentStore)
	eventually(t, "restarted agent caught up", sameSpecs(hubStore, agentStore, e.c1))
}

func scenarioBrokerRestartMidStreamLosesNothing(t *testing.T, e *env) {
	hubStore := newStore()
	hub := startSource(t, e.src, e.transport(t), hubStore)
	agent := startAgent(t, e.transport(t), e.c1, newStore())

	for i := range 500 {
		w := newWidget(e.src, e.c1, fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		err := hub.client.Publish(context.Background(), specCreate, w)
		if err != nil && !errors.Is(err, options.ErrNotConnected) {
			t.Fatal(err)
		}
		if i == 250 {
			e.restart(t)
		}
	}
	eventually(t, "agent holds all 500", sameSpecs(hubStore, agent.store, e.c1))
}

func scenarioMalformedEventsDoNotStopTheSubscription(t *testing.T, e *env) {
	agent := startAgent(t, e.transport(t), e.c1, newStore())
	route := options.Route{Role: options.RoleSpec, Source: e.src, Cluster: e.c1}
	good := newWidget(e.src, e.c1, "good", "s", 1)

	raw := e.transport(t)
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)

	e.sendRaw(t, route, []byte("not json at all"))
	e.sendRaw(t, route, []byte(`{"specversion":"1.0","id":"1","source":"x","type":"bogus"}`))
	want := map[generic.DropReason]int{generic.DropMalformed: 2}
	for _, bad := range []struct {
		mutate func(ev *cloudevents.Event)
		reason generic.DropReason
	}{
		{func(ev *cloudevents.Event) { ev.SetType("io.example.widgets.v1.widgets.spec.explode") }, generic.DropMalformed},
		{func(ev *cloudevents.Event) { ev.SetType("io.example.other.v1.things.spec.create_request") }, generic.DropUnknownDataType},
		{func(ev *cloudevents.Event) { ev.SetExtension(types.ExtResourceID, nil) }, generic.DropMalformed},
		{func(ev *cloudevents.Event) { ev.SetExtension(types.ExtResourceVersion, "abc") }, generic.DropMalformed},
		{func(ev *cloudevents.Event) { ev.SetExtension(types.ExtClusterName, e.c2) }, generic.DropForeign},
		{func(ev *cloudevents.Event) { _ = ev.SetData(cloudevents.ApplicationJSON, []int{1, 2}) }, generic.DropDecode},
	} {
		evt, err := widgetCodec{}.Encode(e.src, specCreate, newWidget(e.src, e.c1, "bad", "s", 1))
		if err != nil {
			t.Fatal(err)
		}
		bad.mutate(evt)
		switch err := raw.Send(context.Background(), route, evt); {
		case errors.Is(err, options.ErrInvalidEvent):
			// A transport whose broker routes by the attributes (gRPC)
			// refuses what they route nowhere or elsewhere: it never
			// reaches the agent.
		case err != nil:
			t.Fatal(err)
		case bad.reason == generic.DropUnknownDataType && e.filtersDataTypes:
			// The broker sends the agent only the data types it decodes.
		default:
			want[bad.reason]++
		}
	}
	evt, err := widgetCodec{}.Encode(e.src, specCreate, good)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Send(context.Background(), route, evt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the good event after the bad ones", func() bool {
		_, ok := agent.store.get(string(good.UID))
		return ok
	})
	if _, ok := agent.store.get("uid-" + e.c1 + "-bad"); ok {
		t.Error("a malformed event was applied")
	}
	for _, reason := range []generic.DropReason{generic.DropMalformed, generic.DropUnknownDataType, generic.DropForeign, generic.DropDecode} {
		eventually(t, fmt.Sprintf("%d %s drops", want[reason], reason), func() bool { return agent.obs.drops(reason) == want[reason] })
	}
}

type nopReceiver struct{}

func (nopReceiver) Deliver(d *options.Delivery) { d.Done() }
func (nopReceiver) Malformed(error)             {}
func (nopReceiver) Connected()                  {}

func scenarioStaleAndForeignSpecsAreDropped(t *testing.T, e *env) {
	agentStore := newStore()
	agent := startAgent(t, e.transport(t), e.c1, agentStore)
	raw := e.transport(t)
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)

	send := func(source string, gen int64, spec string) {
		w := newWidget(source, e.c1, "a", spec, gen)
		evt, err := widgetCodec{}.Encode(source, specUpdate, w)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: source, Cluster: e.c1}, evt); err != nil {
			t.Fatal(err)
		}
	}
	send(e.src, 3, "v3")
	eventually(t, "v3 applied", func() bool { w, ok := agentStore.get("uid-" + e.c1 + "-a"); return ok && w.Spec == "v3" })
	send(e.src, 2, "v2") // stale
	eventually(t, "stale dropped", func() bool { return agent.obs.drops(generic.DropStale) == 1 })
	send(e.src+"-intruder", 9, "evil") // another source claiming the resource
	eventually(t, "foreign dropped", func() bool { return agent.obs.drops(generic.DropForeign) == 1 })
	send(e.src, 3, "v3-again") // same version: idempotent, applied
	eventually(t, "same version re-applied", func() bool { w, _ := agentStore.get("uid-" + e.c1 + "-a"); return w.Spec == "v3-again" })
}

// A broker that keeps what is not acknowledged (NATS JetStream, Pub/Sub)
// can deliver a spec again after the resource's deletion, and after the
// agent's spec resync forgot the resource: the agent does not bring it
// back, and takes a deletion again or a newer spec of the same ID (a
// resource keyed by name, created again).
func scenarioASpecDeliveredLateDoesNotBringBackADeletion(t *testing.T, e *env) {
	agentStore := newStore()
	agent := startAgent(t, e.transport(t), e.c1, agentStore)
	raw := e.transport(t)
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)
	id := "uid-" + e.c1 + "-a"
	send := func(et types.EventType, gen int64, spec string) {
		t.Helper()
		w := newWidget(e.src, e.c1, "a", spec, gen)
		if et.Action == types.DeleteRequest {
			w.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		evt, err := widgetCodec{}.Encode(e.src, et, w)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: e.src, Cluster: e.c1}, evt); err != nil {
			t.Fatal(err)
		}
	}
	send(specUpdate, 3, "v3")
	eventually(t, "v3 applied", func() bool { _, ok := agentStore.get(id); return ok })
	send(specDelete, 3, "v3")
	eventually(t, "deleted", func() bool { _, ok := agentStore.get(id); return !ok })
	if err := agent.client.Resync(context.Background(), widgets); err != nil {
		t.Fatal(err) // its index forgets what its Lister no longer lists
	}
	send(specUpdate, 3, "v3") // delivered again, late
	eventually(t, "the late spec dropped", func() bool { return agent.obs.drops(generic.DropStale) == 1 })
	if _, ok := agentStore.get(id); ok {
		t.Fatal("a spec delivered after the deletion brought the resource back")
	}
	send(specDelete, 3, "v3")
	eventually(t, "the deletion taken again", func() bool { return agent.calls(id) == 3 })
	send(specUpdate, 4, "v4")
	eventually(t, "a newer spec applied", func() bool { w, ok := agentStore.get(id); return ok && w.Spec == "v4" })
	// An OCM source's answer to a resync is what it holds now, not a spec
	// delivered late: it brings back what the source deleted and has again
	// at that version (OCM's hub does, when its informer lost a work and
	// got it back), as the next resync would delete it again otherwise.
	send(specDelete, 4, "v4")
	eventually(t, "deleted at v4", func() bool { _, ok := agentStore.get(id); return !ok })
	answer := specUpdate
	answer.Action = types.ResyncResponse
	send(answer, 4, "v4")
	eventually(t, "the source's answer applied", func() bool { w, ok := agentStore.get(id); return ok && w.Spec == "v4" })
	if n := agent.obs.drops(generic.DropStale); n != 1 {
		t.Errorf("%d specs dropped as stale, want 1", n)
	}
}

// OCM peers answer a resync with resync_response events: a source's are
// upserts (deletes when they carry a deletiontimestamp), an agent's status
// updates. Handlers see them as update and delete requests.
func scenarioResyncResponsesOfOCMPeersAreHandled(t *testing.T, e *env) {
	raw := e.transport(t)
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)
	send := func(action types.Action, sub types.SubResource, route options.Route, w *widget, source string) {
		t.Helper()
		evt, err := widgetCodec{}.Encode(source, types.EventType{DataType: widgets, SubResource: sub, Action: action}, w)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Send(context.Background(), route, evt); err != nil {
			t.Fatal(err)
		}
	}

	// A source, and no agent whose own answers could race the one sent here.
	w := newWidget(e.src, e.c1, "a", "s", 1)
	hubStore := newStore(w)
	hub := startSource(t, e.src, e.transport(t), hubStore)
	status := w.copy()
	status.Status = "Applied"
	send(types.ResyncResponse, types.SubResourceStatus, options.Route{Role: options.RoleStatus, Source: e.src, Cluster: e.c1}, status, e.c1)
	eventually(t, "a status answer handled", func() bool { got, _ := hubStore.get(string(w.UID)); return got.Status == "Applied" })
	hub.close(t)

	// An agent, whose handler removes a widget on a DeleteRequest only.
	agentStore := newStore()
	startAgent(t, e.transport(t), e.c1, agentStore)
	toAgent := options.Route{Role: options.RoleSpec, Source: e.src, Cluster: e.c1}
	send(types.ResyncResponse, types.SubResourceSpec, toAgent, w, e.src)
	eventually(t, "an upsert applied", func() bool { got, ok := agentStore.get(string(w.UID)); return ok && got.Spec == "s" })
	gone := w.copy()
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	send(types.ResyncResponse, types.SubResourceSpec, toAgent, gone, e.src)
	eventually(t, "a delete applied", func() bool { _, ok := agentStore.get(string(w.UID)); return !ok })
}

func scenarioOutOfOrderStatusIsDropped(t *testing.T, e *env) {
	w := newWidget(e.src, e.c1, "a", "s", 2)
	hubStore := newStore(w)
	hub := startSource(t, e.src, e.transport(t), hubStore)
	raw := e.transport(t)
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)

	send := func(gen int64, seq string, status string) {
		s := w.copy()
		s.Generation, s.Status = gen, status
		evt, err := widgetCodec{}.Encode(e.c1, statusUpdate, s)
		if err != nil {
			t.Fatal(err)
		}
		evt.SetExtension(types.ExtSequenceID, seq)
		if err := raw.Send(context.Background(), options.Route{Role: options.RoleStatus, Source: e.src, Cluster: e.c1}, evt); err != nil {
			t.Fatal(err)
		}
	}
	send(2, "100", "second")
	eventually(t, "first status", func() bool { got, _ := hubStore.get(string(w.UID)); return got.Status == "second" })
	// Each send waits for the previous one to be handled: queued events for
	// one resource merge, newest first, before they reach this check.
	send(2, "50", "first-late") // older sequence, same version: dropped
	eventually(t, "older sequence dropped", func() bool { return hub.obs.drops(generic.DropOutOfOrder) == 1 })
	send(1, "200", "old-gen") // older resource version: dropped
	eventually(t, "older version dropped", func() bool { return hub.obs.drops(generic.DropOutOfOrder) == 2 })
	send(3, "10", "new-gen") // newer resource version wins whatever its sequence
	eventually(t, "newer generation applied", func() bool { got, _ := hubStore.get(string(w.UID)); return got.Status == "new-gen" })
	if got, _ := hubStore.get(string(w.UID)); got.Status != "new-gen" {
		t.Errorf("status %q", got.Status)
	}
	if got, want := hub.order(string(w.UID)), (generic.StatusOrder{Version: 3, Sequence: 10, HasSequence: true}); got != want {
		t.Errorf("the handler saw order %+v, want %+v", got, want)
	}

	// The agent's spec resyncs tell where its sequence stands.
	resync := func(seq string) {
		evt := cloudevents.New()
		evt.SetID(uuid.NewString())
		evt.SetSource(e.c1)
		evt.SetType(widgets.String() + ".spec.resync_request")
		evt.SetExtension(types.ExtClusterName, e.c1)
		evt.SetExtension(types.ExtOriginalSource, e.src)
		if seq != "" {
			evt.SetExtension(types.ExtSequenceID, seq)
		}
		_ = evt.SetData(cloudevents.ApplicationJSON, types.ResourceVersionList{ResourceVersions: []types.ResourceVersion{{ResourceID: string(w.UID), ResourceVersion: 2}}})
		answered := hub.obs.answers()
		if err := raw.Send(context.Background(), options.Route{Role: options.RoleSpecResync, Cluster: e.c1}, &evt); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the resync answered", func() bool { return hub.obs.answers() > answered })
	}
	status := func(want string) func() bool {
		return func() bool { got, _ := hubStore.get(string(w.UID)); return got.Status == want }
	}
	// A periodic resync, the agent's sequence past every status it sent: a
	// status delayed across it is still older than the one handled.
	resync("1000")
	send(3, "5", "delayed")
	eventually(t, "a delayed status dropped after a resync", func() bool { return hub.obs.drops(generic.DropOutOfOrder) == 3 })
	// A restarted agent whose clock went back: its resync is below the
	// marks its earlier run left, and its statuses are heard again.
	resync("1")
	send(3, "2", "restarted")
	eventually(t, "the restarted agent's status applied", status("restarted"))
	// An agent that does not tell its sequence: every mark goes.
	send(3, "100", "before")
	eventually(t, "a newer status applied", status("before"))
	resync("")
	send(3, "50", "foreign")
	eventually(t, "a status after a resync without a sequence applied", status("foreign"))
}

// A resync request is one event, which OCM peers read as the complete
// list; only a transport that tells its size limit has it split into
// batches that fit.
func scenarioLargeResyncIsOneEventUnlessTheLimitSplitsIt(t *testing.T, e *env) {
	const n = 2500
	hubStore := newStore()
	for _, cluster := range []string{e.c1, e.c2} {
		for i := range n {
			hubStore.put(newWidget(e.src, cluster, fmt.Sprint("w", i), "s", 1))
		}
	}
	startSource(t, e.src, e.transport(t), hubStore)
	const limit = 16 << 10
	for _, tc := range []struct {
		cluster string
		limit   int
	}{{e.c1, 0}, {e.c2, limit}} {
		agentStore := newStore()
		for i := 0; i < n; i += 2 { // the agent already holds half
			w, _ := hubStore.get(fmt.Sprint("uid-"+tc.cluster+"-w", i))
			agentStore.put(w)
		}
		spy := &spyTransport{Transport: e.transport(t), limit: tc.limit}
		agent := startAgent(t, spy, tc.cluster, agentStore)
		eventually(t, "agent holds all", sameSpecs(hubStore, agentStore, tc.cluster))
		for i := 0; i < n; i += 2 {
			if uid := fmt.Sprint("uid-"+tc.cluster+"-w", i); agent.calls(uid) != 0 {
				t.Fatalf("%s was sent although the agent held it", uid)
			}
		}
		events, entries, first := 0, 0, ""
		for _, evt := range spy.sentEvents() {
			if evt.Type() != "io.example.widgets.v1.widgets.spec.resync_request" {
				continue
			}
			id, _, _ := types.StringExtension(evt, types.ExtResyncID)
			if first == "" {
				first = id
			}
			if id != first {
				continue // a later resync: the agent answers the source's status resync with one
			}
			events++
			l, err := types.DecodeResourceVersionList(evt.Data())
			if err != nil {
				t.Fatal(err)
			}
			entries += len(l.ResourceVersions)
			if tc.limit > 0 && len(evt.Data()) > types.BatchBytes(tc.limit) {
				t.Errorf("a batch of %d bytes, limit %d", len(evt.Data()), tc.limit)
			}
		}
		switch {
		case entries != n/2:
			t.Errorf("limit %d: the agent's first resync listed %d entries, want %d", tc.limit, entries, n/2)
		case tc.limit == 0 && events != 1:
			t.Errorf("without a limit %d entries went out in %d spec resync events, want 1", entries, events)
		case tc.limit > 0 && events < 5:
			t.Errorf("with a %d-byte limit %d entries went out in %d events, want several", tc.limit, entries, events)
		}
		agent.close(t)
	}
}

// spyTransport records what it sends, and tells limit as its event size
// limit.
type spyTransport struct {
	options.Transport
	limit int
	mu    sync.Mutex
	sent  []*cloudevents.Event
}

func (s *spyTransport) MaxEventBytes() int { return s.limit }

func (s *spyTransport) Send(ctx context.Context, r options.Route, evt *cloudevents.Event) error {
	s.mu.Lock()
	c := evt.Clone()
	s.sent = append(s.sent, &c)
	s.mu.Unlock()
	return s.Transport.Send(ctx, r, evt)
}

func (s *spyTransport) sentEvents() []*cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*cloudevents.Event(nil), s.sent...)
}

func scenarioFailingHandlerIsRetried(t *testing.T, e *env) {
	w := newWidget(e.src, e.c1, "a", "s", 1)
	hub := startSource(t, e.src, e.transport(t), newStore(w))
	obs := newCounter()
	st := newStore()
	c, err := generic.NewAgentClient[*widget](e.c1, e.transport(t), st, hashWidget, []generic.Codec[*widget]{widgetCodec{}},
		generic.WithResyncInterval(0), generic.WithObserver(obs), generic.WithErrorHandler(quiet))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	if err := c.Subscribe(func(_ context.Context, _ types.EventType, got *widget) error {
		if calls.Add(1) <= 2 {
			return errors.New("cluster API unavailable")
		}
		st.put(got)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, c.Start, c.Close)
	if err := hub.client.Publish(context.Background(), specCreate, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "applied after two failures", func() bool { return st.len() == 1 })
}

func scenarioSingularDataTypeIsAccepted(t *testing.T, e *env) {
	agent := startAgent(t, e.transport(t), e.c1, newStore())
	raw := e.transport(t)
	startClient(t, func(ctx context.Context) error { return raw.Start(ctx, nil, nopReceiver{}) }, raw.Close)
	w := newWidget(e.src, e.c1, "a", "s", 1)
	evt, err := widgetCodec{}.Encode(e.src, specCreate, w)
	if err != nil {
		t.Fatal(err)
	}
	evt.SetType("io.example.widgets.v1.widget.spec.create_request")
	evt.SetID(uuid.NewString())
	if err := raw.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: e.src, Cluster: e.c1}, evt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "singular type applied", func() bool { return agent.store.len() == 1 })
}

// deafBound is the delivery check's bound in the deafness scenario: short,
// so the scenario takes seconds, and the bound the check keeps is shown in
// virtual time by TestTheDeliveryCheckFindsADeafSubscriptionWithinItsBound.
const deafBound = 3 * time.Second

// A subscription that stops delivering while its connection stays up is
// found deaf (Healthy says so, and the observer counts it), and healed:
// the transport connects again, the client resyncs, and everything sent
// into the deaf subscription arrives — status updates of specs already
// acknowledged to a deaf source, spec updates to a deaf agent.
func scenarioADeafSubscriptionIsFoundAndHealed(t *testing.T, e *env) {
	if e.deafen == nil {
		t.Skip("this transport's tests cannot make a subscription deaf")
	}
	for _, deaf := range []generic.Side{generic.SideSource, generic.SideAgent} {
		t.Run(string(deaf), func(t *testing.T) {
			cluster := e.c1
			if deaf == generic.SideAgent {
				cluster = e.c2
			}
			const n = 10
			hubStore, agentStore := newStore(), newStore()
			var uids []string
			for i := range n {
				w := newWidget(e.src, cluster, fmt.Sprint("w", i), "s1", 1)
				hubStore.put(w)
				agentStore.put(w)
				uids = append(uids, string(w.UID))
			}
			hubTr, agentTr := e.transport(t), e.transport(t)
			check := generic.WithDeliveryCheck(deafBound)
			agent := startAgent(t, agentTr, cluster, agentStore, check)
			hub := startSource(t, e.src, hubTr, hubStore, check)
			report := func(status string) {
				for _, uid := range uids {
					w, _ := agentStore.get(uid)
					w.Status = status
					agentStore.put(w)
					if err := agent.client.Publish(context.Background(), statusUpdate, w); err != nil {
						t.Fatal(err)
					}
				}
			}
			hubHas := func(status string) func() bool {
				return func() bool {
					for _, uid := range uids {
						if w, _ := hubStore.get(uid); w.Status != status {
							return false
						}
					}
					return true
				}
			}
			// Setup, not what the scenario checks. Over gRPC under -race on
			// a loaded machine this stage has lost a status (twice in CI),
			// most likely when both sides' streams missed heartbeats and
			// resubscribed at once: a status sent while the source
			// resubscribes is lost, and the agent, resubscribing too, can
			// miss the source's status resync; only a periodic resync heals
			// that. Report until the source has every status.
			last := time.Time{}
			eventually(t, "the source to have every first status", func() bool {
				if time.Since(last) > 2*time.Second {
					report("applied")
					last = time.Now()
				}
				return hubHas("applied")()
			})

			began := time.Now()
			healthy, obs := agent.client.Healthy, agent.obs
			healed := func() bool {
				for _, uid := range uids {
					if w, _ := agentStore.get(uid); w.Spec != "s2" {
						return false
					}
				}
				return true
			}
			if deaf == generic.SideSource {
				e.deafen(t, hubTr)
				healthy, obs, healed = hub.client.Healthy, hub.obs, hubHas("available")
				report("available")
			} else {
				e.deafen(t, agentTr)
				for _, uid := range uids {
					w, _ := hubStore.get(uid)
					w.Spec, w.Generation = "s2", 2
					hubStore.put(w)
					if err := hub.client.Publish(context.Background(), specUpdate, w); err != nil {
						t.Fatal(err)
					}
				}
			}
			eventually(t, "Healthy to say the subscription is deaf", func() bool { return errors.Is(healthy(), options.ErrDeaf) })
			found := time.Since(began)
			eventually(t, "everything sent into the deaf subscription to arrive", healed)
			arrived := time.Since(began)
			eventually(t, "Healthy again", func() bool { return healthy() == nil })
			if obs.deafCount() == 0 {
				t.Error("the observer did not count the deaf subscription")
			}
			t.Logf("deaf %s: found after %v, what it missed arrived after %v (bound %v)", deaf,
				found.Round(10*time.Millisecond), arrived.Round(10*time.Millisecond), deafBound)
		})
	}
}
