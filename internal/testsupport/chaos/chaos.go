package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// plan is how big and how long a run is.
type plan struct {
	mode     string
	clusters int
	works    int           // the live population the churn keeps, within ±5%
	steps    int           // churn steps under faults
	ops      int           // churn operations per step
	pace     time.Duration // pause after each step
	gap      [2]int        // steps between two faults, at least and at most
	converge time.Duration // deadline to converge, before and after the faults
}

// The environment variables that set a run's size and seed.
const (
	envMode = "WORKWIRE_CHAOS"      // "long" for the long mode
	envSeed = "WORKWIRE_CHAOS_SEED" // a seed to replay
)

func planFor(short bool) plan {
	switch {
	case os.Getenv(envMode) == "long":
		return plan{mode: "long", clusters: 8, works: 5000, steps: 1200, ops: 40, pace: 40 * time.Millisecond,
			gap: [2]int{4, 12}, converge: 5 * time.Minute}
	case testing.Short() || short:
		return plan{mode: "short", clusters: 3, works: 300, steps: 60, ops: 10, pace: 25 * time.Millisecond,
			gap: [2]int{3, 8}, converge: 2 * time.Minute}
	default:
		return plan{mode: "default", clusters: 4, works: 1200, steps: 150, ops: 24, pace: 25 * time.Millisecond,
			gap: [2]int{4, 10}, converge: 2 * time.Minute}
	}
}

// runSeed is WORKWIRE_CHAOS_SEED, or a new seed.
func runSeed(t *testing.T) uint64 {
	if s := os.Getenv(envSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", envSeed, err)
		}
		return n
	}
	return rand.Uint64()
}

// Independent random streams drawn from a run's seed.
const (
	streamChurn = iota + 1
	streamFaults
	streamBroker
)

func stream(seed uint64, s uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, s)) }

// Env is the broker setup of one run: how holders connect, and the faults
// it can inject.
type Env struct {
	// Transport makes the transport of each holder, the hub's and every
	// agent's, at every start and restart. Required.
	Transport work.TransportFunc
	// Faults are the kinds of fault the schedule draws from, each struck
	// in turn, in an order drawn anew for every round. Their order is part
	// of what a seed replays: keep it fixed. At least one.
	Faults []Fault
	// Arm, if set, starts the broker's own faults once the works are
	// placed (the memory broker's drops, duplicates, ...). seed is drawn
	// from the run's seed for the broker's random choices, so the run's
	// seed fixes them too.
	Arm func(seed uint64)
	// Report, if set, says what the broker did, for the final log.
	Report func() string
	// Short runs the short size even without -short (WORKWIRE_CHAOS=long
	// still runs the long one): for a broker too slow for the default
	// size to converge in time on a loaded machine.
	Short bool
}

// Fault is one kind of fault: ProxyCut, ProxyStall, AgentRestart,
// HubRestart, BrokerRestart, or any BrokerFault. Run strikes it on the
// test's goroutine, between churn steps, and goes on when it returns.
type Fault struct {
	name       string
	perCluster bool
	// do gets the cluster the schedule chose (used by faults against one
	// agent) and a number drawn for it (for durations).
	do func(r *run, cluster string, n int)
}

// scheduled is one fault of the schedule: after churn step step.
type scheduled struct {
	step, fault int
	cluster     string
	n           int
}

// counter is an Observer that counts events for the report.
type counter struct {
	generic.NopObserver
	received, dropped, sent, resyncs, connects, errors atomic.Int64
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

// desiredWork is what the hub controller wants of one work: the cluster
// and a variant of every field the protocol carries.
type desiredWork struct {
	cluster  string
	value    int    // the manifest's content
	tier     string // a label; "" = none
	note     string // an annotation; "" = none
	deletion int    // which delete option
	config   int    // which manifest configs
}

// run is one chaos run.
type run struct {
	t      *testing.T
	env    Env
	plan   plan
	churnR *rand.Rand
	obs    *counter
	faults map[string]int

	mu       sync.Mutex // guards what follows
	names    []string   // the live works, in an order the seed fixes
	index    map[string]int
	desired  map[string]desiredWork
	created  int
	ops      map[string]int
	minLive  int
	maxLive  int
	hub      *work.ClientHolder
	agents   map[string]*agent
	clusters []string

	seen map[string]observed // reconcile's; only its goroutine uses it
}

func (r *run) opts() []generic.Option {
	return []generic.Option{
		generic.WithResyncInterval(2 * time.Second), // heals what faults drop
		generic.WithDeliveryCheck(DeliveryCheck),
		generic.WithPublishRateLimit(0, 0),
		generic.WithObserver(r.obs),
	}
}

// DeliveryCheck is the bound of the clients' delivery check in a run: what
// a ProxyDeafen fault costs before they connect again. A gRPC broker's
// heartbeats, which probe its streams, must come more often than a third
// of it.
const DeliveryCheck = 3 * time.Second

// onError counts the errors clients and publishers report in the
// background (sends that fail while a connection is down, ...): faults
// cause them, and resync heals what they lose.
func (r *run) onError(context.Context, error, string, ...any) { r.obs.errors.Add(1) }

func (r *run) startHub() *work.ClientHolder {
	var opts []generic.SourceOption
	for _, o := range r.opts() {
		opts = append(opts, o)
	}
	opts = append(opts, generic.WithOrphanGracePeriod(3*time.Second))
	h, err := work.NewClientHolderBuilder(r.env.Transport).WithSourceID("chaos-hub").WithSourceOptions(opts...).
		WithErrorHandler(r.onError).WithLogger(logr.Discard()).NewClientHolder()
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
	h, err := work.NewClientHolderBuilder(r.env.Transport).WithClusterName(cluster).WithAgentOptions(opts...).
		WithErrorHandler(r.onError).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		r.t.Fatal(err)
	}
	a := &agent{holder: h, cluster: cluster}
	a.run(r.t)
	r.start(h)
	return a
}

// slow is how long a Start or Close may take before the log says so.
const slow = 5 * time.Second

func (r *run) start(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	if err := h.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
	if d := time.Since(begin); d > slow {
		r.t.Logf("a holder took %v to start", d)
	}
}

// closeHolder closes h; Close must return, with every goroutine gone,
// within a minute.
func closeHolder(t *testing.T, h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	if err := h.Close(ctx); err != nil {
		t.Errorf("close after %v: %v", time.Since(begin), err)
	} else if d := time.Since(begin); d > slow {
		t.Logf("a holder took %v to close", d)
	}
}

// Churn: a pure function of the seed and of the churn so far (never of
// the hub's or the agents' state), so a seed replays it.

// churn runs n operations: creates while the population is under 95% of
// the plan's, then a mix of updates, deletes and creates that keeps it
// within ±5%.
func (r *run) churn(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lo, hi := r.plan.works*95/100, r.plan.works*105/100
	for range n {
		live := len(r.names)
		switch x := r.churnR.IntN(100); {
		case live < lo || (x >= 75 && live < hi):
			r.create()
		case x < 50 || live <= lo:
			r.update()
		default:
			r.remove()
		}
	}
}

func (r *run) create() {
	r.created++
	name := fmt.Sprintf("w%06d", r.created)
	r.index[name] = len(r.names)
	r.names = append(r.names, name)
	r.desired[name] = desiredWork{cluster: r.clusters[r.churnR.IntN(len(r.clusters))], value: 1}
	r.ops["create"]++
}

func (r *run) pick() string { return r.names[r.churnR.IntN(len(r.names))] }

func (r *run) update() {
	name := r.pick()
	d := r.desired[name]
	switch k := r.churnR.IntN(10); {
	case k < 5:
		d.value++
		r.ops["update manifests"]++
	case k < 7:
		d.tier = []string{"", "gold", "silver", "bronze"}[r.churnR.IntN(4)]
		r.ops["update labels"]++
	case k < 8:
		d.note = []string{"", "a", "b", strconv.Itoa(r.churnR.IntN(1000))}[r.churnR.IntN(4)]
		r.ops["update annotations"]++
	case k < 9:
		d.deletion = r.churnR.IntN(4)
		r.ops["update delete option"]++
	default:
		d.config = r.churnR.IntN(3)
		r.ops["update manifest configs"]++
	}
	r.desired[name] = d
}

func (r *run) remove() {
	name := r.pick()
	i, last := r.index[name], len(r.names)-1
	r.names[i] = r.names[last]
	r.index[r.names[i]] = i
	r.names = r.names[:last]
	delete(r.index, name)
	delete(r.desired, name)
	r.ops["delete"]++
}

func (r *run) recordLive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.minLive, r.maxLive = min(r.minLive, len(r.names)), max(r.maxLive, len(r.names))
}

// What a desired work looks like on the hub.

func (d desiredWork) spec(name string) workv1.ManifestWorkSpec {
	s := workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: fmt.Appendf(nil,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"value":"%d"}}`, name, d.value)}}}}}
	switch d.deletion {
	case 1:
		s.DeleteOption = &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeOrphan}
	case 2:
		s.DeleteOption = &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeForeground}
	case 3:
		s.DeleteOption = &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
			SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: []workv1.OrphaningRule{{Resource: "configmaps", Name: name, Namespace: "default"}}}}
	}
	id := workv1.ResourceIdentifier{Resource: "configmaps", Name: name, Namespace: "default"}
	switch d.config {
	case 1:
		s.ManifestConfigs = []workv1.ManifestConfigOption{{ResourceIdentifier: id,
			FeedbackRules: []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: "value", Path: ".data.value"}}}}}}
	case 2:
		s.ManifestConfigs = []workv1.ManifestConfigOption{{ResourceIdentifier: id,
			UpdateStrategy: &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeServerSideApply,
				ServerSideApply: &workv1.ServerSideApplyConfig{Force: true, FieldManager: "chaos"}}}}
	}
	return s
}

func (d desiredWork) labels() map[string]string {
	l := map[string]string{"app": "chaos"}
	if d.tier != "" {
		l["tier"] = d.tier
	}
	return l
}

func (d desiredWork) annotations() map[string]string {
	if d.note == "" {
		return nil
	}
	return map[string]string{"chaos.workwire.io/note": d.note}
}

// reconcile makes the hub's store what is desired, as a hub controller
// does: it reads the hub's informer cache, creates what is missing,
// updates what differs, deletes the rest. Like a controller that tracks
// what it observed, it compares a work in full only when its UID,
// generation or desired state changed since it last found the work as
// desired.
func (r *run) reconcile() {
	r.mu.Lock()
	desired := maps.Clone(r.desired)
	names := append([]string(nil), r.names...)
	hub, clusters := r.hub, r.clusters
	r.mu.Unlock()
	ctx := context.Background()
	have := map[string]bool{}
	for _, cluster := range clusters {
		works := hub.WorkInterface().WorkV1().ManifestWorks(cluster)
		list, err := listWorks(hub, cluster, false)
		if err != nil {
			return
		}
		for _, w := range list {
			d, ok := desired[w.Name]
			if !ok || d.cluster != cluster {
				if w.DeletionTimestamp == nil {
					_ = works.Delete(ctx, w.Name, metav1.DeleteOptions{})
				}
				continue
			}
			have[w.Name] = true
			if w.DeletionTimestamp != nil {
				continue // deleted and wanted again: created anew once gone
			}
			seen := observed{uid: string(w.UID), generation: w.Generation, want: d}
			if r.seen[w.Name] == seen {
				continue
			}
			spec, wantLabels, wantAnnotations := d.spec(w.Name), d.labels(), d.annotations()
			if equality.Semantic.DeepEqual(w.Spec, spec) && maps.Equal(w.Labels, wantLabels) && maps.Equal(w.Annotations, wantAnnotations) {
				r.seen[w.Name] = seen
				continue
			}
			w = w.DeepCopy() // the cache's copy is shared
			w.Spec, w.Labels, w.Annotations = spec, wantLabels, wantAnnotations
			if out, err := works.Update(ctx, w, metav1.UpdateOptions{}); err == nil { // a conflict is retried next round
				r.seen[w.Name] = observed{uid: string(out.UID), generation: out.Generation, want: d}
			}
		}
	}
	for _, name := range names {
		if have[name] {
			continue
		}
		d := desired[name]
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: d.labels(), Annotations: d.annotations()}, Spec: d.spec(name)}
		if out, err := hub.WorkInterface().WorkV1().ManifestWorks(d.cluster).Create(ctx, w, metav1.CreateOptions{}); err == nil {
			r.seen[name] = observed{uid: string(out.UID), generation: out.Generation, want: d}
		}
	}
}

// observed is what reconcile last found or made of a work: the hub's UID
// and generation of it, holding the desired state want.
type observed struct {
	uid        string
	generation int64
	want       desiredWork
}

// converged reports what still differs between the desired state, the hub
// and the agents ("" when nothing does). It reads the informer caches
// first, checking what is cheap for every work before it compares specs
// and statuses in full; only when the caches agree does it read the stores
// themselves, to confirm.
func (r *run) converged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if diff := r.differs(false); diff != "" {
		return diff
	}
	return r.differs(true)
}

// differs is converged over the informer caches or the stores. The caller
// holds r.mu.
func (r *run) differs(fromStore bool) string {
	type pair struct {
		hub, agent *workv1.ManifestWork
		want       desiredWork
	}
	var pairs []pair
	for _, cluster := range r.clusters {
		hubList, err := listWorks(r.hub, cluster, fromStore)
		if err != nil {
			return err.Error()
		}
		agentList, err := listWorks(r.agents[cluster].holder, cluster, fromStore)
		if err != nil {
			return err.Error()
		}
		want := 0
		for _, d := range r.desired {
			if d.cluster == cluster {
				want++
			}
		}
		if len(hubList) != want || len(agentList) != want {
			return fmt.Sprintf("%s: desired %d, hub %d, agent %d%s", cluster, want, len(hubList), len(agentList),
				r.strays(cluster, hubList, agentList))
		}
		agentWorks := make(map[string]*workv1.ManifestWork, len(agentList))
		for _, a := range agentList {
			agentWorks[a.Name] = a
		}
		for _, h := range hubList {
			p := pair{h, agentWorks[h.Name], r.desired[h.Name]}
			if diff := compareMeta(p.hub, p.agent, p.want); diff != "" {
				return fmt.Sprintf("%s/%s: %s", cluster, h.Name, diff)
			}
			pairs = append(pairs, p)
		}
	}
	for _, p := range pairs {
		if diff := compareContent(p.hub, p.agent, p.want); diff != "" {
			return fmt.Sprintf("%s/%s: %s", p.hub.Namespace, p.hub.Name, diff)
		}
	}
	return ""
}

// listWorks lists a cluster's works from h's informer cache (shared
// objects: read only) or from its store (copies).
func listWorks(h *work.ClientHolder, cluster string, fromStore bool) ([]*workv1.ManifestWork, error) {
	if !fromStore {
		return h.ManifestWorkInformer().Lister().ManifestWorks(cluster).List(labels.Everything())
	}
	list, err := h.WorkInterface().WorkV1().ManifestWorks(cluster).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*workv1.ManifestWork, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// strays names a few works the hub or the agent holds that are not
// desired, and how they stand. The caller holds r.mu.
func (r *run) strays(cluster string, hub, agent []*workv1.ManifestWork) string {
	var b strings.Builder
	n := 0
	for side, list := range map[string][]*workv1.ManifestWork{"hub": hub, "agent": agent} {
		for _, w := range list {
			if d, ok := r.desired[w.Name]; ok && d.cluster == cluster {
				continue
			}
			if n++; n > 3 {
				return b.String() + "; ..."
			}
			fmt.Fprintf(&b, "; %s holds %s (uid %s, generation %d, deleting %v, finalizers %v)",
				side, w.Name, w.UID, w.Generation, w.DeletionTimestamp != nil, w.Finalizers)
		}
	}
	return b.String()
}

// compareMeta says how hub, its agent's copy a, and the desired state d of
// a work differ in what is cheap to compare ("" when they agree): the hub
// holds the desired labels and annotations, the agent holds the hub's
// copy (UID), at the hub's generation, with the hub's labels and
// annotations, and the hub's status reports the desired content applied
// at that generation.
func compareMeta(h, a *workv1.ManifestWork, d desiredWork) string {
	switch {
	case h.DeletionTimestamp != nil:
		return "hub is deleting a desired work"
	case !maps.Equal(h.Labels, d.labels()) || !maps.Equal(h.Annotations, d.annotations()):
		return fmt.Sprintf("hub metadata is not the desired one: labels %v, annotations %v", h.Labels, h.Annotations)
	case a == nil || a.UID != h.UID:
		return "agent lacks the hub's copy"
	case a.Generation != h.Generation:
		return fmt.Sprintf("agent at generation %d, hub %d", a.Generation, h.Generation)
	case !maps.Equal(a.Labels, h.Labels):
		return fmt.Sprintf("agent labels %v, hub %v", a.Labels, h.Labels)
	case !maps.Equal(sourceAnnotations(a), h.Annotations):
		return fmt.Sprintf("agent annotations %v, hub %v", a.Annotations, h.Annotations)
	case !applied(h):
		return fmt.Sprintf("not applied at generation %d", h.Generation)
	case feedback(h) != strconv.Itoa(d.value):
		return fmt.Sprintf("hub status reports value %q, desired %d", feedback(h), d.value)
	}
	return ""
}

// compareContent says how the specs and statuses of a work differ: the
// hub's spec is the desired one (manifests, delete option, manifest
// configs), the agent's spec is the hub's, and the hub's status is the
// agent's.
func compareContent(h, a *workv1.ManifestWork, d desiredWork) string {
	switch {
	case !equality.Semantic.DeepEqual(h.Spec, d.spec(h.Name)):
		return "hub spec is not the desired one"
	case !equality.Semantic.DeepEqual(a.Spec, h.Spec):
		return "agent spec differs from the hub's"
	case !sameStatus(a, h):
		return "hub status differs from the agent's"
	}
	return ""
}

// sourceAnnotations are a's annotations less the one the agent side adds
// (the original source).
func sourceAnnotations(a *workv1.ManifestWork) map[string]string {
	out := maps.Clone(a.Annotations)
	delete(out, codec.OriginalSourceAnnotation)
	if len(out) == 0 {
		return nil
	}
	return out
}

// sameStatus compares statuses as the protocol does: the hash of their
// JSON, so every field counts, and times count to the second, which is
// what the wire carries (the agent's store keeps nanoseconds).
func sameStatus(a, b *workv1.ManifestWork) bool {
	ha, errA := codec.StatusHash(a)
	hb, errB := codec.StatusHash(b)
	return errA == nil && errB == nil && ha == hb
}

func applied(w *workv1.ManifestWork) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
}

// feedback is the value the status reports for the work's manifest.
func feedback(w *workv1.ManifestWork) string {
	for _, m := range w.Status.ResourceStatus.Manifests {
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name == "value" && v.Value.String != nil {
				return *v.Value.String
			}
		}
	}
	return ""
}

// agent is one cluster's agent: a holder and a controller that holds a
// finalizer, "applies" every generation (reporting Applied and the
// manifest's value as status feedback), and lets go on deletion.
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

func (a *agent) stop(t *testing.T) {
	a.cancel()
	a.wg.Wait()
	closeHolder(t, a.holder)
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
	switch value := manifestValue(w); {
	case w.DeletionTimestamp != nil:
		if len(w.Finalizers) == 0 {
			return nil
		}
		w.Finalizers = nil
		_, err = client.Update(ctx, w, metav1.UpdateOptions{})
	case len(w.Finalizers) == 0:
		w.Finalizers = []string{"chaos/cleanup"}
		_, err = client.Update(ctx, w, metav1.UpdateOptions{})
	case !applied(w) || feedback(w) != value:
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation,
		})
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: 0, Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Name: name, Namespace: "default"},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{Name: "value",
				Value: workv1.FieldValue{Type: workv1.String, String: &value}}}},
			Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "Applied",
				ObservedGeneration: w.Generation, LastTransitionTime: now}},
		}}
		_, err = client.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	}
	return err
}

// manifestValue is data.value of the work's manifest.
func manifestValue(w *workv1.ManifestWork) string {
	if len(w.Spec.Workload.Manifests) == 0 {
		return ""
	}
	var m struct {
		Data map[string]string `json:"data"`
	}
	_ = json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &m)
	return m.Data["value"]
}

// AgentRestart is the fault every environment has against one agent: the
// agent's holder closes, and a new one starts for its cluster.
func AgentRestart() Fault {
	return Fault{"agent restart", true, func(r *run, cluster string, _ int) {
		r.mu.Lock()
		old := r.agents[cluster]
		r.mu.Unlock()
		old.stop(r.t)
		next := r.startAgent(cluster)
		r.mu.Lock()
		r.agents[cluster] = next
		r.mu.Unlock()
	}}
}

// HubRestart is the fault every environment has against the hub: its
// holder closes, and a new one starts with the same source ID.
func HubRestart() Fault {
	return Fault{"hub restart", false, func(r *run, _ string, _ int) {
		r.mu.Lock()
		old := r.hub
		r.mu.Unlock()
		closeHolder(r.t, old)
		next := r.startHub()
		r.mu.Lock()
		r.hub = next
		r.mu.Unlock()
	}}
}

// ProxyStall is the fault that stops p, the proxy between the holders and
// the broker, for 100 to 500 ms.
func ProxyStall(p *transporttest.Proxy) Fault {
	return Fault{"proxy stall", false, func(_ *run, _ string, n int) {
		p.Stall()
		time.Sleep(time.Duration(100+n%400) * time.Millisecond) // the stall is the fault
		p.Resume()
	}}
}

// ProxyDeafen is the fault that makes every connection through p (a
// protocol proxy, transporttest.NewProtocolProxy) deaf: up, and passing
// pings and answers, but none of what the broker delivers. The clients'
// delivery check finds it and connects again.
func ProxyDeafen(p *transporttest.Proxy) Fault {
	return Fault{"proxy deafen", false, func(*run, string, int) { p.Deafen() }}
}

// ProxyCut is the fault that closes every connection through p, the proxy
// between the holders and the broker.
func ProxyCut(p *transporttest.Proxy) Fault {
	return Fault{"proxy cut", false, func(*run, string, int) { p.Cut() }}
}

// BrokerRestart is BrokerFault("broker restart", restart).
func BrokerRestart(restart func() error) Fault { return BrokerFault("broker restart", restart) }

// BrokerFault is a fault against the whole broker, named name: do strikes
// it and returns once it is over; an error from do fails the run.
func BrokerFault(name string, do func() error) Fault {
	return Fault{name, false, func(r *run, _ string, _ int) {
		if err := do(); err != nil {
			r.t.Fatalf("%s: %v", name, err)
		}
	}}
}

// schedule draws the faults of a run: after every gap of steps, the next
// fault of a round that strikes each kind once in an order drawn anew for
// every round, against a cluster drawn for it.
func schedule(seed uint64, p plan, faults []Fault, clusters []string) []scheduled {
	rng := stream(seed, streamFaults)
	var out []scheduled
	var round []int
	for step := p.gap[0] + rng.IntN(p.gap[1]-p.gap[0]+1); step < p.steps; step += p.gap[0] + rng.IntN(p.gap[1]-p.gap[0]+1) {
		if len(round) == 0 {
			round = rng.Perm(len(faults))
		}
		s := scheduled{step: step, fault: round[0], n: rng.IntN(1 << 16)}
		round = round[1:]
		if faults[s.fault].perCluster {
			s.cluster = clusters[rng.IntN(len(clusters))]
		}
		out = append(out, s)
	}
	return out
}

func describe(sched []scheduled, faults []Fault) string {
	var b strings.Builder
	for i, s := range sched {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d:%s", s.step, faults[s.fault].name)
		if s.cluster != "" {
			fmt.Fprintf(&b, "(%s)", s.cluster)
		}
	}
	return b.String()
}

// Run runs a hub and the plan's agents over e.Transport, places the
// plan's works, then runs the plan's churn steps while it strikes the
// seed's fault schedule drawn from e.Faults, and fails t unless the hub
// and the agents converge both before the faults and after them. The seed
// is WORKWIRE_CHAOS_SEED's, or a new one; the plan is the mode's
// (WORKWIRE_CHAOS=long, -short, or the default). Run blocks until the run
// is over and every holder it started is closed: a minute or so by
// default on an idle machine, more under -race or load, and minutes in
// the long mode. A failed run logs the command that replays its seed.
func Run(t *testing.T, e Env) {
	if e.Transport == nil || len(e.Faults) == 0 {
		t.Fatal("chaos.Run: the Env needs a Transport and at least one Fault")
	}
	seed := runSeed(t)
	p := planFor(e.Short)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d failed; replay its operations and faults with:\n\t%s", seed, replayCommand(seed, p.mode, t.Name()))
		}
	})
	r := &run{t: t, env: e, plan: p, churnR: stream(seed, streamChurn), obs: &counter{},
		faults: map[string]int{}, desired: map[string]desiredWork{}, index: map[string]int{}, ops: map[string]int{},
		agents: map[string]*agent{}, seen: map[string]observed{}}
	for i := range p.clusters {
		r.clusters = append(r.clusters, fmt.Sprint("cluster", i))
	}
	sched := schedule(seed, p, e.Faults, r.clusters)
	t.Logf("seed %d (replay with WORKWIRE_CHAOS_SEED=%d), %s mode: %d clusters, %d live works (±5%%), %d steps of %d operations, %d faults",
		seed, seed, p.mode, p.clusters, p.works, p.steps, p.ops, len(sched))
	if testing.Verbose() {
		t.Logf("fault schedule (after step): %s", describe(sched, e.Faults))
	}

	r.hub = r.startHub()
	for _, c := range r.clusters {
		r.agents[c] = r.startAgent(c)
	}
	defer func() {
		defer r.watch("closing the holders", 3*time.Minute)()
		for _, a := range r.agents {
			a.stop(t)
		}
		closeHolder(t, r.hub)
	}()

	// Place the works, then wait until every agent holds them.
	r.churn(p.works)
	begin := time.Now()
	r.await("placing the works", p.converge)
	placed := time.Since(begin)
	r.minLive, r.maxLive = len(r.names), len(r.names)
	if e.Arm != nil {
		e.Arm(stream(seed, streamBroker).Uint64())
	}

	begin = time.Now()
	next := 0
	var reconciling time.Duration
	faulting := map[string]time.Duration{}
	for step := range p.steps {
		r.churn(p.ops)
		r.recordLive()
		t0 := time.Now()
		stop := r.watch(fmt.Sprintf("reconciling at step %d", step), 2*time.Minute)
		r.reconcile()
		stop()
		reconciling += time.Since(t0)
		for ; next < len(sched) && sched[next].step == step; next++ {
			s := sched[next]
			f := e.Faults[s.fault]
			t0 := time.Now()
			stop := r.watch(fmt.Sprintf("in %s after step %d", f.name, step), 3*time.Minute)
			f.do(r, s.cluster, s.n)
			stop()
			d := time.Since(t0)
			if d > slow {
				t.Logf("after step %d, %s took %v", step, f.name, d.Round(time.Millisecond))
			}
			faulting[f.name] += d
			r.faults[f.name]++
		}
		time.Sleep(p.pace)
	}
	chaosTime := time.Since(begin)
	if testing.Verbose() {
		for name, d := range faulting {
			faulting[name] = d.Round(time.Millisecond)
		}
		t.Logf("under faults: %v reconciling, in faults %v", reconciling.Round(time.Millisecond), faulting)
	}

	begin = time.Now()
	r.await("after the faults", p.converge)
	t.Logf("placed %d works in %v; %d steps under faults in %v (live works %d to %d; %v); converged %v after the faults; "+
		"faults %v; events sent %d, received %d, dropped %d; resyncs answered %d; connects %d; background errors %d",
		p.works, placed.Round(time.Millisecond), p.steps, chaosTime.Round(time.Millisecond), r.minLive, r.maxLive, r.ops,
		time.Since(begin).Round(time.Millisecond), r.faults,
		r.obs.sent.Load(), r.obs.received.Load(), r.obs.dropped.Load(), r.obs.resyncs.Load(), r.obs.connects.Load(), r.obs.errors.Load())
	if e.Report != nil {
		t.Log(e.Report())
	}
}

// replayCommand is the command that replays seed in mode for the test
// named name, run from the root of the main module's repository: go test
// runs a test in its package's directory, which names the package, and
// the nearest go.mod above it its module, which may be one of its own
// nested in the main module (options/nats).
func replayCommand(seed uint64, mode, name string) string {
	cd, pkg := packageDir()
	cmd := fmt.Sprintf("%s=%d go test %s -run '^%s$' -v", envSeed, seed, pkg, name)
	switch mode {
	case "long":
		cmd = envMode + "=long " + cmd
	case "short":
		cmd += " -short"
	}
	if cd != "" {
		cmd = "cd " + cd + " && " + cmd
	}
	return cmd
}

// mainModule is the path of the module whose root the replay command
// starts from.
const mainModule = "github.com/workwire/sdk-go"

// packageDir returns the package under test as a go test command run
// from the main module's root names it: "" and "./internal/tests/chaos"
// for a package of the main module; "options/nats" to cd to and "." for
// one of a module nested in it; the package's absolute directory and "."
// when no main module is found above it.
func packageDir() (cd, pkg string) {
	dir, err := os.Getwd()
	if err != nil {
		return "", "."
	}
	mod, root := "", ""
	for d := dir; root == ""; d = filepath.Dir(d) {
		if path, ok := modulePath(filepath.Join(d, "go.mod")); ok {
			if mod == "" {
				mod = d
			}
			if path == mainModule {
				root = d
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	rel := func(base, target string) string {
		r, err := filepath.Rel(base, target)
		if err != nil {
			return target
		}
		return filepath.ToSlash(r)
	}
	local := "."
	if mod != "" && mod != dir {
		local = "./" + rel(mod, dir)
	}
	switch {
	case root == "":
		return dir, "."
	case mod == root:
		return "", local
	default:
		return rel(root, mod), local
	}
}

// modulePath returns the module path a go.mod file declares.
func modulePath(gomod string) (string, bool) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`), true
		}
	}
	return "", false
}

// watch reports what the run is doing, with every goroutine's stack, if
// it still does it after d, so that a hang says where it is before the
// test binary's timeout kills it. Call the returned func when done.
func (r *run) watch(what string, d time.Duration) (stop func()) {
	t := r.t
	timer := time.AfterFunc(d, func() {
		t.Errorf("still %s after %v; goroutines:\n%s", what, d, goroutines())
	})
	// A t.Fatal between watch and stop must not leave the timer to report
	// into a test that has ended.
	t.Cleanup(func() { timer.Stop() })
	return func() { timer.Stop() }
}

// goroutines is every goroutine's stack: what a stuck run was waiting for.
func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}

// await reconciles until the hub and the agents hold what is desired, or
// fails the test after d.
func (r *run) await(what string, d time.Duration) {
	defer r.watch(what, d+time.Minute)()
	begin := time.Now()
	deadline, report := begin.Add(d), begin.Add(5*time.Second)
	for {
		r.reconcile()
		diff := r.converged()
		if diff == "" {
			return
		}
		if now := time.Now(); now.After(deadline) {
			r.t.Fatalf("%s: not converged after %v: %s\ngoroutines:\n%s", what, d, diff, goroutines())
		} else if testing.Verbose() && now.After(report) {
			r.t.Logf("%s: not converged after %v: %s", what, now.Sub(begin).Round(time.Second), diff)
			report = now.Add(5 * time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
