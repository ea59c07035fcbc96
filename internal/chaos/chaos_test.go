// Package chaos runs a hub and several agents through churn and faults and
// checks that they converge: every agent holds exactly the works the hub
// wants, at the hub's versions, the hub holds every agent's status, and
// every deletion completed. Runs are reproducible from a seed.
//
//	go test ./internal/chaos                         # short, as CI runs it
//	WORKWIRE_CHAOS=long go test ./internal/chaos -v  # minutes of it
//	WORKWIRE_CHAOS_SEED=42 go test ./internal/chaos  # replay a seed
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// sarama (Kafka) starts go-metrics' process-wide meter goroutine.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// plan is how big and how long a run is.
type plan struct {
	clusters, works int
	chaos           time.Duration
	converge        time.Duration
}

func planFor(t *testing.T) plan {
	if os.Getenv("WORKWIRE_CHAOS") == "long" {
		return plan{clusters: 8, works: 4000, chaos: 2 * time.Minute, converge: 3 * time.Minute}
	}
	if testing.Short() {
		return plan{clusters: 3, works: 300, chaos: 3 * time.Second, converge: time.Minute}
	}
	return plan{clusters: 4, works: 1000, chaos: 8 * time.Second, converge: 90 * time.Second}
}

func seed(t *testing.T) uint64 {
	if s := os.Getenv("WORKWIRE_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WORKWIRE_CHAOS_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// env is the broker setup of one run: how holders connect, and the faults
// it can inject.
type env struct {
	transport work.TransportFunc
	faults    []fault
}

type fault struct {
	name string
	do   func(r *run)
}

// counter is an Observer that counts events for the report.
type counter struct {
	generic.NopObserver
	received, dropped, sent, resyncs, connects atomic.Int64
}

func (c *counter) EventReceived(generic.Side, types.EventType)   { c.received.Add(1) }
func (c *counter) EventDropped(generic.Side, generic.DropReason) { c.dropped.Add(1) }
func (c *counter) EventSent(_ generic.Side, _ types.EventType, err error) {
	if err == nil {
		c.sent.Add(1)
	}
}
func (c *counter) ResyncAnswered(generic.Side, types.DataType, int) { c.resyncs.Add(1) }
func (c *counter) Connected(generic.Side)                           { c.connects.Add(1) }

// run is one chaos run.
type run struct {
	t      *testing.T
	env    env
	plan   plan
	rng    *rand.Rand
	obs    *counter
	faults map[string]int

	mu      sync.Mutex // guards desired, hub, agents
	desired map[string]desiredWork
	hub     *work.ClientHolder
	agents  map[string]*agent
	version int
}

type desiredWork struct {
	cluster string
	value   int
}

func (r *run) clusters() []string {
	out := make([]string, r.plan.clusters)
	for i := range out {
		out[i] = fmt.Sprint("cluster", i)
	}
	return out
}

func (r *run) opts() []generic.Option {
	return []generic.Option{
		generic.WithResyncInterval(2 * time.Second), // heals what faults drop
		generic.WithPublishRateLimit(0, 0),
		generic.WithObserver(r.obs),
		generic.WithErrorHandler(func(context.Context, error, string, ...any) {}),
	}
}

func (r *run) startHub() *work.ClientHolder {
	var opts []generic.SourceOption
	for _, o := range r.opts() {
		opts = append(opts, o)
	}
	opts = append(opts, generic.WithOrphanGracePeriod(3*time.Second))
	h, err := work.NewClientHolderBuilder(r.env.transport).WithSourceID("chaos-hub").WithSourceOptions(opts...).
		WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		r.t.Fatal(err)
	}
	r.start(h)
	return h
}

func (r *run) startAgent(cluster string) *agent {
	var opts []generic.AgentOption
	for _, o := range r.opts() {
		opts = append(opts, o)
	}
	h, err := work.NewClientHolderBuilder(r.env.transport).WithClusterName(cluster).WithAgentOptions(opts...).
		WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		r.t.Fatal(err)
	}
	a := &agent{holder: h, cluster: cluster}
	a.run(r.t)
	r.start(h)
	return a
}

func (r *run) start(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
}

func closeHolder(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = h.Close(ctx)
}

// churn changes the desired state: creates, updates and deletes.
func (r *run) churn() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version++
	switch n := r.rng.IntN(10); {
	case n < 4 || len(r.desired) < r.plan.works/2:
		for range 10 {
			name := fmt.Sprintf("w%d-%d", r.version, r.rng.IntN(1_000_000))
			r.desired[name] = desiredWork{cluster: r.clusters()[r.rng.IntN(r.plan.clusters)], value: 1}
		}
	case n < 8:
		for name, d := range r.desired {
			if r.rng.IntN(4) == 0 {
				d.value++
				r.desired[name] = d
			}
		}
	default:
		for name := range r.desired {
			if r.rng.IntN(8) == 0 {
				delete(r.desired, name)
			}
		}
	}
}

// reconcile makes the hub's store what is desired, as a hub controller
// does: creates what is missing, updates what differs, deletes the rest.
func (r *run) reconcile() {
	r.mu.Lock()
	desired := make(map[string]desiredWork, len(r.desired))
	for k, v := range r.desired {
		desired[k] = v
	}
	hub := r.hub
	r.mu.Unlock()
	ctx := context.Background()
	have := map[string]bool{}
	for _, cluster := range r.clusters() {
		works := hub.WorkInterface().WorkV1().ManifestWorks(cluster)
		list, err := works.List(ctx, metav1.ListOptions{})
		if err != nil {
			return // the hub is restarting
		}
		for _, w := range list.Items {
			d, ok := desired[w.Name]
			if !ok || d.cluster != cluster {
				if w.DeletionTimestamp == nil {
					_ = works.Delete(ctx, w.Name, metav1.DeleteOptions{})
				}
				continue
			}
			have[w.Name] = true
			want := manifest(w.Name, d.value)
			if w.DeletionTimestamp == nil && !equality.Semantic.DeepEqual(w.Spec.Workload.Manifests, want) {
				w.Spec.Workload.Manifests = want
				_, _ = works.Update(ctx, &w, metav1.UpdateOptions{}) // a conflict is retried next round
			}
		}
	}
	for name, d := range desired {
		if have[name] {
			continue
		}
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: manifest(name, d.value)}}}
		_, _ = hub.WorkInterface().WorkV1().ManifestWorks(d.cluster).Create(ctx, w, metav1.CreateOptions{})
	}
}

func manifest(name string, value int) []workv1.Manifest {
	return []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: fmt.Appendf(nil,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"value":"%d"}}`, name, value)}}}
}

// converged reports what still differs between the desired state, the hub
// and the agents ("" when nothing does).
func (r *run) converged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx := context.Background()
	for _, cluster := range r.clusters() {
		hubList, err := r.hub.WorkInterface().WorkV1().ManifestWorks(cluster).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		agentList, err := r.agents[cluster].holder.WorkInterface().WorkV1().ManifestWorks(cluster).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		want := 0
		for _, d := range r.desired {
			if d.cluster == cluster {
				want++
			}
		}
		if len(hubList.Items) != want || len(agentList.Items) != want {
			return fmt.Sprintf("%s: desired %d, hub %d, agent %d", cluster, want, len(hubList.Items), len(agentList.Items))
		}
		agentWorks := map[string]workv1.ManifestWork{}
		for _, w := range agentList.Items {
			agentWorks[w.Name] = w
		}
		for _, h := range hubList.Items {
			a, ok := agentWorks[h.Name]
			d := r.desired[h.Name]
			switch {
			case !ok || a.UID != h.UID:
				return fmt.Sprintf("%s/%s: agent lacks the hub's copy", cluster, h.Name)
			case a.Generation != h.Generation:
				return fmt.Sprintf("%s/%s: agent at generation %d, hub %d", cluster, h.Name, a.Generation, h.Generation)
			case !equality.Semantic.DeepEqual(h.Spec.Workload.Manifests, manifest(h.Name, d.value)):
				return fmt.Sprintf("%s/%s: hub spec not the desired one", cluster, h.Name)
			case !sameStatus(&a, &h):
				return fmt.Sprintf("%s/%s: hub status differs from the agent's", cluster, h.Name)
			case !applied(&h):
				return fmt.Sprintf("%s/%s: not applied at generation %d", cluster, h.Name, h.Generation)
			}
		}
	}
	return ""
}

// sameStatus compares statuses as the protocol does, by hash: the wire
// carries times to the second, the agent's store keeps nanoseconds.
func sameStatus(a, b *workv1.ManifestWork) bool {
	ha, errA := codec.StatusHash(a)
	hb, errB := codec.StatusHash(b)
	return errA == nil && errB == nil && ha == hb
}

func applied(w *workv1.ManifestWork) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
}

// agent is one cluster's agent: a holder and a controller that holds a
// finalizer, reports every generation Applied, and lets go on deletion.
type agent struct {
	holder  *work.ClientHolder
	cluster string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func (a *agent) run(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second))
	inf := a.holder.ManifestWorkInformer()
	add := func(obj any) {
		if w, ok := obj.(*workv1.ManifestWork); ok {
			q.Add(w.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	client := a.holder.WorkInterface().WorkV1().ManifestWorks(a.cluster)
	lister := inf.Lister().ManifestWorks(a.cluster)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		<-ctx.Done()
		q.ShutDown()
	}()
	go func() {
		defer a.wg.Done()
		for {
			name, shutdown := q.Get()
			if shutdown {
				return
			}
			if err := reconcileAgent(ctx, lister.Get, client, name); err != nil && ctx.Err() == nil {
				q.AddRateLimited(name)
			} else {
				q.Forget(name)
			}
			q.Done(name)
		}
	}()
}

func (a *agent) stop() {
	a.cancel()
	a.wg.Wait()
	closeHolder(a.holder)
}

type workClient interface {
	Update(context.Context, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error)
	UpdateStatus(context.Context, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error)
}

func reconcileAgent(ctx context.Context, get func(string) (*workv1.ManifestWork, error), client workClient, name string) error {
	w, err := get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	w = w.DeepCopy()
	switch {
	case w.DeletionTimestamp != nil:
		if len(w.Finalizers) == 0 {
			return nil
		}
		w.Finalizers = nil
		_, err = client.Update(ctx, w, metav1.UpdateOptions{})
	case len(w.Finalizers) == 0:
		w.Finalizers = []string{"chaos/cleanup"}
		_, err = client.Update(ctx, w, metav1.UpdateOptions{})
	case !applied(w):
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation,
		})
		_, err = client.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	}
	return err
}

// Faults every environment has.
var (
	agentRestart = fault{"agent restart", func(r *run) {
		r.mu.Lock()
		cluster := r.clusters()[r.rng.IntN(r.plan.clusters)]
		old := r.agents[cluster]
		r.mu.Unlock()
		old.stop()
		next := r.startAgent(cluster)
		r.mu.Lock()
		r.agents[cluster] = next
		r.mu.Unlock()
	}}
	hubRestart = fault{"hub restart", func(r *run) {
		r.mu.Lock()
		old := r.hub
		r.mu.Unlock()
		closeHolder(old)
		next := r.startHub()
		r.mu.Lock()
		r.hub = next
		r.mu.Unlock()
	}}
)

func chaos(t *testing.T, e env) {
	p := planFor(t)
	s := seed(t)
	t.Logf("seed %d (replay with WORKWIRE_CHAOS_SEED=%d), %d clusters, up to %d works, %v of chaos", s, s, p.clusters, p.works, p.chaos)
	r := &run{t: t, env: e, plan: p, rng: rand.New(rand.NewPCG(s, s>>1|1)), obs: &counter{},
		faults: map[string]int{}, desired: map[string]desiredWork{}, agents: map[string]*agent{}}
	r.hub = r.startHub()
	for _, c := range r.clusters() {
		r.agents[c] = r.startAgent(c)
	}
	defer func() {
		for _, a := range r.agents {
			a.stop()
		}
		closeHolder(r.hub)
	}()
	for len(r.desired) < p.works/2 {
		r.churn()
	}

	begin := time.Now()
	nextFault := begin
	for time.Since(begin) < p.chaos {
		r.churn()
		r.reconcile()
		if time.Now().After(nextFault) {
			f := e.faults[r.rng.IntN(len(e.faults))]
			f.do(r)
			r.faults[f.name]++
			nextFault = time.Now().Add(time.Duration(200+r.rng.IntN(400)) * time.Millisecond)
		}
	}

	settle := time.Now()
	var diff string
	for {
		r.reconcile()
		if diff = r.converged(); diff == "" {
			break
		}
		if time.Since(settle) > p.converge {
			t.Fatalf("no convergence after %v: %s", p.converge, diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("converged %v after the chaos: %d works on %d clusters; faults %v; events sent %d, received %d, dropped %d; resyncs answered %d; connects %d",
		time.Since(settle).Round(time.Millisecond), len(r.desired), p.clusters, r.faults,
		r.obs.sent.Load(), r.obs.received.Load(), r.obs.dropped.Load(), r.obs.resyncs.Load(), r.obs.connects.Load())
}

// In memory: the broker drops, duplicates, reorders and delays events and
// restarts, and agents and the hub restart.
func TestChaosInMemory(t *testing.T) {
	b := memory.NewBroker()
	b.SetFaults(memory.Faults{Drop: 0.02, Duplicate: 0.02, Reorder: 0.05, Delay: 5 * time.Millisecond, Seed: 1})
	chaos(t, env{
		transport: func() (options.Transport, error) { return b.Transport(), nil },
		faults: []fault{
			{"broker restart", func(*run) { b.Restart() }},
			agentRestart, hubRestart,
		},
	})
	t.Logf("broker faults: %+v", b.FaultStats())
}

// Over MQTT: a real broker behind a proxy that cuts and stalls connections;
// the broker restarts, and agents and the hub restart.
func TestChaosOverMQTT(t *testing.T) {
	b := mqtttest.NewBroker(t)
	proxy, err := transporttest.NewProxy(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := mqtt.Config{
		BrokerHost:          proxy.Addr(),
		KeepAlive:           options.Duration(2 * time.Second),
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
	chaos(t, env{
		transport: func() (options.Transport, error) { return mqtt.New(cfg, mqtt.WithLogger(logr.Discard())) },
		faults: []fault{
			{"broker restart", func(r *run) {
				if err := b.Restart(); err != nil {
					r.t.Fatal(err)
				}
			}},
			{"proxy cut", func(*run) { proxy.Cut() }},
			{"proxy stall", func(*run) {
				proxy.Stall()
				time.Sleep(300 * time.Millisecond) // the stall is the fault
				proxy.Resume()
			}},
			agentRestart, hubRestart,
		},
	})
}

// Over gRPC: the broker behind a proxy that cuts and stalls connections;
// the broker restarts, and agents and the hub restart.
func TestChaosOverGRPC(t *testing.T) {
	srv := grpctest.NewServer(t)
	proxy, err := transporttest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := srv.Config()
	cfg.ServerAddress = proxy.Addr()
	chaos(t, env{
		transport: func() (options.Transport, error) { return grpc.New(cfg, grpc.WithLogger(logr.Discard())) },
		faults: []fault{
			{"broker restart", func(r *run) {
				if err := srv.Restart(); err != nil {
					r.t.Fatal(err)
				}
			}},
			{"proxy cut", func(*run) { proxy.Cut() }},
			{"proxy stall", func(*run) {
				proxy.Stall()
				time.Sleep(300 * time.Millisecond) // the stall is the fault
				proxy.Resume()
			}},
			agentRestart, hubRestart,
		},
	})
}

// Over Kafka: the cluster drops every connection or restarts empty (no
// records, no committed offsets), and agents and the hub restart.
func TestChaosOverKafka(t *testing.T) {
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{
		Brokers:             b.Addrs(),
		SessionTimeout:      options.Duration(2 * time.Second),
		HeartbeatInterval:   options.Duration(100 * time.Millisecond),
		RebalanceTimeout:    options.Duration(5 * time.Second),
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
	chaos(t, env{
		transport: func() (options.Transport, error) { return kafka.New(cfg, kafka.WithLogger(logr.Discard())) },
		faults: []fault{
			{"cluster restart", func(r *run) {
				if err := b.Restart(); err != nil {
					r.t.Fatal(err)
				}
			}},
			{"connections dropped", func(*run) { b.DropConnections() }},
			agentRestart, hubRestart,
		},
	})
}
