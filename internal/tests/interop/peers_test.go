package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1listers "open-cluster-management.io/api/client/work/listers/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ocmoptions "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/options"
	ocmwork "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work"
	ocmagentcodec "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/agent/codec"
	ocmsourcecodec "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/source/codec"
	ocmworkstore "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/store"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/work"
)

// ocmResourceVersion is the annotation in which an OCM hub gives a work's
// version (open-cluster-management.io/sdk-go: common.CloudEventsResourceVersionAnnotationKey).
const ocmResourceVersion = "cloudevents.open-cluster-management.io/resourceversion"

// newWork returns work i: one ConfigMap whose data says version.
func newWork(i int, version string) *workv1.ManifestWork {
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: workName(i)}}
	w.Spec.Workload.Manifests = []workv1.Manifest{manifest(i, version)}
	return w
}

func workName(i int) string { return fmt.Sprintf("work-%d", i) }

func manifest(i int, version string) workv1.Manifest {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i), "namespace": "default"},
		"data":     map[string]string{"version": version},
	})
	return workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}

// appliedAt is the generation a work's Applied condition observed; 0 if
// none.
func appliedAt(w *workv1.ManifestWork) int64 {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	if c == nil || c.Status != metav1.ConditionTrue {
		return 0
	}
	return c.ObservedGeneration
}

// hub is a source of works, OCM's or workwire's, as a hub controller uses
// it: its clientset and an informer's lister.
type hub interface {
	// create creates work i on cluster at generation 1.
	create(ctx context.Context, cluster string, i int) error
	// update changes work i's manifest, to generation 2.
	update(ctx context.Context, cluster string, i int) error
	// remove deletes work i.
	remove(ctx context.Context, cluster string, i int) error
	// applied returns the works the hub holds of cluster and the generation
	// each is Applied at (0 for none yet).
	applied(cluster string) map[string]int64
	// restart stops the hub and starts it again, with the works it held.
	restart(t *testing.T)
}

// agent is a work agent, OCM's or workwire's, with an applier.
type agent interface {
	// holds returns the works the agent holds and their generations.
	holds() map[string]int64
	stop(t *testing.T)
}

// wwHub is a workwire hub: a ClientHolder of a source.
type wwHub struct {
	build  func() *work.ClientHolderBuilder
	holder *work.ClientHolder
	// desired is what its controller wants, recreated after a restart: the
	// holder's store is in memory.
	mu      sync.Mutex
	desired map[string]map[int]string // cluster → work → version
}

func startWWHub(t *testing.T, build func() *work.ClientHolderBuilder) *wwHub {
	h := &wwHub{build: build, desired: map[string]map[int]string{}}
	h.start(t)
	return h
}

func (h *wwHub) start(t *testing.T) {
	holder := startHolder(t, h.build())
	h.holder = holder
	t.Cleanup(func() { closeHolder(t, holder) })
}

// startHolder builds and starts a holder; the caller closes it.
func startHolder(t *testing.T, b *work.ClientHolderBuilder) *work.ClientHolder {
	holder, err := b.NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := holder.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return holder
}

func closeHolder(t *testing.T, h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

func (h *wwHub) want(cluster string, i int, version string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.desired[cluster] == nil {
		h.desired[cluster] = map[int]string{}
	}
	if version == "" {
		delete(h.desired[cluster], i)
		return
	}
	h.desired[cluster][i] = version
}

func (h *wwHub) create(ctx context.Context, cluster string, i int) error {
	h.want(cluster, i, "v1")
	_, err := h.holder.WorkInterface().WorkV1().ManifestWorks(cluster).Create(ctx, newWork(i, "v1"), metav1.CreateOptions{})
	return err
}

func (h *wwHub) update(ctx context.Context, cluster string, i int) error {
	h.want(cluster, i, "v2")
	works := h.holder.WorkInterface().WorkV1().ManifestWorks(cluster)
	return retryConflict(func() error {
		w, err := works.Get(ctx, workName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		w.Spec.Workload.Manifests = []workv1.Manifest{manifest(i, "v2")}
		_, err = works.Update(ctx, w, metav1.UpdateOptions{})
		return err
	})
}

func (h *wwHub) remove(ctx context.Context, cluster string, i int) error {
	h.want(cluster, i, "")
	return h.holder.WorkInterface().WorkV1().ManifestWorks(cluster).Delete(ctx, workName(i), metav1.DeleteOptions{})
}

func (h *wwHub) applied(cluster string) map[string]int64 {
	return appliedOf(h.holder.ManifestWorkInformer().Lister(), cluster)
}

func appliedOf(l workv1listers.ManifestWorkLister, cluster string) map[string]int64 {
	ws, err := l.ManifestWorks(cluster).List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make(map[string]int64, len(ws))
	for _, w := range ws {
		out[w.Name] = appliedAt(w)
	}
	return out
}

func (h *wwHub) describe(cluster, name string) string {
	w, err := h.holder.ManifestWorkInformer().Lister().ManifestWorks(cluster).Get(name)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("uid %s, generation %d, resourceVersion %s, deleting %v, conditions %+v", w.UID, w.Generation, w.ResourceVersion, w.DeletionTimestamp != nil, w.Status.Conditions)
}

// restart closes the holder and starts a new one, whose controller creates
// what it wants again (new works to the agent: new UIDs).
func (h *wwHub) restart(t *testing.T) {
	closeHolder(t, h.holder)
	h.start(t)
	h.mu.Lock()
	desired := h.desired
	h.mu.Unlock()
	ctx := context.Background()
	for cluster, works := range desired {
		for i, version := range works {
			// Generation 1 at v1, and 2 at v2, as before the restart.
			if _, err := h.holder.WorkInterface().WorkV1().ManifestWorks(cluster).Create(ctx, newWork(i, "v1"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if version == "v2" {
				if err := h.update(ctx, cluster, i); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func retryConflict(f func() error) error {
	for {
		err := f()
		if !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
	}
}

// ocmHub is an OCM hub: open-cluster-management.io/sdk-go's ManifestWork
// source client holder over its informer watcher store, as OCM's own
// integration tests build one.
type ocmHub struct {
	config   any
	sourceID string
	logs     *logCounter

	cancel   context.CancelFunc
	holder   *ocmwork.ClientHolder
	store    *ocmworkstore.SourceInformerWatcherStore
	informer cache.SharedIndexInformer
	lister   workv1listers.ManifestWorkLister
	// lost counts the works the hub created that its own informer never
	// saw, or lost later, which create or restoreLost added again.
	lost atomic.Int64
	// held is what restoreLost keeps: each work as the informer last held
	// it, by namespace/name; nil if it does not run.
	heldMu sync.Mutex
	held   map[string]*workv1.ManifestWork
}

func startOCMHub(t *testing.T, config any, sourceID string) *ocmHub {
	h := &ocmHub{config: config, sourceID: sourceID,
		logs: newLogCounter(logBadSequence, logOlderSequence, logNewerGen)}
	h.start(t, nil)
	return h
}

// start starts the hub with works in its store, as a hub with a database
// starts with what it stored.
func (h *ocmHub) start(t *testing.T, works []*workv1.ManifestWork) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), h.logs.logger()))
	h.cancel = cancel
	t.Cleanup(cancel)
	h.store = ocmworkstore.NewSourceInformerWatcherStore(ctx)
	opt := ocmoptions.NewGenericClientOptions(h.config, ocmsourcecodec.NewManifestBundleCodec(), fmt.Sprintf("%s-%d", h.sourceID, rand.N(1<<30))).
		WithClientWatcherStore(h.store).
		WithSourceID(h.sourceID)
	holder, err := ocmwork.NewSourceClientHolder(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	factory := workinformers.NewSharedInformerFactoryWithOptions(holder.WorkInterface(), 5*time.Minute)
	informer := factory.Work().V1().ManifestWorks()
	h.store.SetInformer(informer.Informer())
	go informer.Informer().Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("the OCM hub's informer did not sync")
	}
	for _, w := range works {
		if err := h.store.Add(w); err != nil {
			t.Fatal(err)
		}
	}
	// The store hands what it is given to the informer asynchronously.
	for deadline := time.Now().Add(time.Minute); len(informer.Informer().GetStore().List()) < len(works); {
		if time.Now().After(deadline) {
			t.Fatalf("the OCM hub's informer holds %d of the %d works it started with", len(informer.Informer().GetStore().List()), len(works))
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.holder, h.informer, h.lister = holder, informer.Informer(), informer.Lister()
}

// create creates a work as OCM's hubs do, and makes sure the hub's own
// informer holds it. OCM sdk-go v1.3.0's SourceInformerWatcherStore hands
// its informer every event through one shared Watcher, which drops what it
// is handed once its consumer stopped it; under load (in CI, and with the
// CPU busy) its informer has missed one work of 2,000 it had just created
// and published, and then answered the agent's resync with that work's
// deletion. That is the peer's defect, not the agent's behaviour this
// suite tests: the informer's store takes such a work directly, and the
// run reports how many.
func (h *ocmHub) create(ctx context.Context, cluster string, i int) error {
	w := newWork(i, "v1")
	w.Annotations = map[string]string{ocmResourceVersion: "1"}
	created, err := h.holder.ManifestWorks(cluster).Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, err := h.lister.ManifestWorks(cluster).Get(w.Name); err == nil {
			h.hold(got)
			return nil
		}
	}
	h.lost.Add(1)
	h.hold(created)
	return h.informer.GetStore().Add(created)
}

// hold records w for restoreLost, if it runs.
func (h *ocmHub) hold(w *workv1.ManifestWork) {
	h.heldMu.Lock()
	defer h.heldMu.Unlock()
	if h.held != nil {
		h.held[w.Namespace+"/"+w.Name] = w
	}
}

// update patches the manifest and the version, as OCM's hubs do: their
// source client has no Update.
func (h *ocmHub) update(ctx context.Context, cluster string, i int) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{ocmResourceVersion: "2"}},
		"spec":     map[string]any{"workload": map[string]any{"manifests": []workv1.Manifest{manifest(i, "v2")}}},
	})
	if err != nil {
		return err
	}
	_, err = h.holder.ManifestWorks(cluster).Patch(ctx, workName(i), kubetypes.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (h *ocmHub) remove(ctx context.Context, cluster string, i int) error {
	return h.holder.ManifestWorks(cluster).Delete(ctx, workName(i), metav1.DeleteOptions{})
}

func (h *ocmHub) applied(cluster string) map[string]int64 { return appliedOf(h.lister, cluster) }

// restart stops the hub and starts it with the works it held, status and
// all, as a hub over a database does.
func (h *ocmHub) restart(t *testing.T) {
	ws, err := h.lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	kept := make([]*workv1.ManifestWork, len(ws))
	for i, w := range ws {
		kept[i] = w.DeepCopy()
	}
	h.cancel()
	h.start(t, kept)
}

// restoreLost, for a run that deletes no work, puts every work the hub's
// informer held (or create saw it hold) and no longer holds back into it as
// it last held it, and counts it lost, until the test ends: the defect
// create works around (see there) also strikes after a work's create, and
// the hub then answers the agent's next resync with that work's deletion.
// The agent's next resync then gets the work back.
func (h *ocmHub) restoreLost(t *testing.T) {
	h.heldMu.Lock()
	h.held = map[string]*workv1.ManifestWork{}
	h.heldMu.Unlock()
	ctx := t.Context() // ends before t's cleanups run
	var done sync.WaitGroup
	t.Cleanup(done.Wait)
	store := h.informer.GetStore() // the test does not restart the hub
	done.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := map[string]bool{}
			for _, obj := range store.List() {
				w := obj.(*workv1.ManifestWork)
				now[w.Namespace+"/"+w.Name] = true
				h.hold(w)
			}
			h.heldMu.Lock()
			for key, w := range h.held {
				if now[key] {
					continue
				}
				// Absent still: create may have held it since the listing.
				if _, still, _ := store.Get(w); !still {
					h.lost.Add(1)
					_ = store.Add(w)
				}
			}
			h.heldMu.Unlock()
		}
	})
}

func (h *ocmHub) describe(cluster, name string) string {
	w, err := h.lister.ManifestWorks(cluster).Get(name)
	if err != nil {
		return fmt.Sprintf("%v; works its informer lost: %d", err, h.lost.Load())
	}
	return fmt.Sprintf("generation %d, resourceVersion %s, annotations %v, finalizers %v, conditions %+v; statuses dropped: %d (%s); works its informer lost: %d",
		w.Generation, w.ResourceVersion, w.Annotations, w.Finalizers, w.Status.Conditions, h.dropped(), firstDrop(h), h.lost.Load())
}

// dropped is how many statuses the OCM hub dropped for good.
func (h *ocmHub) dropped() int {
	return h.logs.count(logBadSequence) + h.logs.count(logOlderSequence) + h.logs.count(logNewerGen)
}

// applier is an agent's controller: it reports every work it holds Applied
// at its generation, through a status patch (which both OCM's and
// workwire's agent clientsets take). Deletions need nothing from it: with
// no finalizer, the agents complete them and report Deleted themselves.
type applier struct {
	works  workv1client.ManifestWorkInterface
	lister workv1listers.ManifestWorkLister
	ns     string
	queue  workqueue.TypedRateLimitingInterface[string]
	wg     sync.WaitGroup
}

func runApplier(works workv1client.ManifestWorkInterface, informer cache.SharedIndexInformer, cluster string) (*applier, error) {
	a := &applier{
		works: works, lister: workv1listers.NewManifestWorkLister(informer.GetIndexer()), ns: cluster,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, time.Second)),
	}
	enqueue := func(obj any) {
		if w, ok := obj.(*workv1.ManifestWork); ok {
			a.queue.Add(w.Name)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	for range 4 {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for a.next() {
			}
		}()
	}
	return a, nil
}

func (a *applier) next() bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if err := a.apply(name); err != nil {
		a.queue.AddRateLimited(name)
		return true
	}
	a.queue.Forget(name)
	return true
}

func (a *applier) apply(name string) error {
	w, err := a.lister.ManifestWorks(a.ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.DeletionTimestamp != nil || appliedAt(w) == w.Generation {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": w.ResourceVersion},
		"status": map[string]any{"conditions": []metav1.Condition{{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
			Message: "applied", LastTransitionTime: metav1.Now(), ObservedGeneration: w.Generation,
		}}},
	})
	if err != nil {
		return err
	}
	_, err = a.works.Patch(context.Background(), name, kubetypes.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (a *applier) stop() {
	a.queue.ShutDown()
	a.wg.Wait()
}

// wwAgent is a workwire agent: a ClientHolder of a cluster, and an applier.
type wwAgent struct {
	holder  *work.ClientHolder
	applier *applier
	drops   *dropCounter
	cluster string
}

func startWWAgent(t *testing.T, build *work.ClientHolderBuilder, cluster string) *wwAgent {
	drops := &dropCounter{reasons: map[generic.DropReason]int{}}
	holder := startHolder(t, build.WithAgentOptions(generic.WithObserver(drops)))
	a, err := runApplier(holder.WorkInterface().WorkV1().ManifestWorks(cluster), holder.ManifestWorkInformer().Informer(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	ag := &wwAgent{holder: holder, applier: a, drops: drops, cluster: cluster}
	t.Cleanup(func() { ag.stop(t) })
	return ag
}

func (a *wwAgent) holds() map[string]int64 {
	return generations(a.holder.ManifestWorkInformer().Informer())
}

func (a *wwAgent) stop(t *testing.T) {
	if a.holder == nil {
		return
	}
	a.applier.stop()
	closeHolder(t, a.holder)
	a.holder = nil
}

func generations(informer cache.SharedIndexInformer) map[string]int64 {
	out := map[string]int64{}
	for _, obj := range informer.GetStore().List() {
		w := obj.(*workv1.ManifestWork)
		out[w.Name] = w.Generation
	}
	return out
}

// dropCounter counts what a workwire client dropped, by reason, and what
// it received and sent, by subresource and action.
type dropCounter struct {
	generic.NopObserver
	mu       sync.Mutex
	reasons  map[generic.DropReason]int
	received map[string]int
	sent     map[string]int
	resent   int
}

func (d *dropCounter) SpecResent(types.DataType) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resent++
}

func (d *dropCounter) resends() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.resent
}

func (d *dropCounter) EventSent(_ generic.Side, t types.EventType, err error) {
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil {
		d.sent = map[string]int{}
	}
	d.sent[string(t.SubResource)+"."+string(t.Action)]++
}

func (d *dropCounter) sentOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent[key]
}

// waitSent waits until n events of key were sent.
func (d *dropCounter) waitSent(t *testing.T, key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(converged); d.sentOf(key) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s events sent, want %d", d.sentOf(key), key, n)
		}
	}
}

func (d *dropCounter) EventDropped(_ generic.Side, r generic.DropReason) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reasons[r]++
}

func (d *dropCounter) EventReceived(_ generic.Side, t types.EventType) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.received == nil {
		d.received = map[string]int{}
	}
	d.received[string(t.SubResource)+"."+string(t.Action)]++
}

func (d *dropCounter) dropped() map[generic.DropReason]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[generic.DropReason]int, len(d.reasons))
	for r, n := range d.reasons {
		out[r] = n
	}
	return out
}

func (d *dropCounter) receivedOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.received[key]
}

// OCM agents' lines for a gRPC subscription made and a health check that
// timed out (open-cluster-management.io/sdk-go v1.3.0, options/v2/grpc and
// server/grpc/heartbeat).
const (
	logSubscribed    = "subscribed to grpc server"
	logStreamTimeout = "stream timeout"
)

// ocmAgent is an OCM work agent: open-cluster-management.io/sdk-go's agent
// client holder and informer, as OCM's own integration tests build one,
// and an applier.
type ocmAgent struct {
	cancel   context.CancelFunc
	informer cache.SharedIndexInformer
	applier  *applier
	logs     *logCounter
}

func startOCMAgent(t *testing.T, config any, cluster string) *ocmAgent {
	logs := newLogCounter(logSubscribed, logStreamTimeout)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logs.logger()))
	store := ocmworkstore.NewAgentInformerWatcherStore()
	opt := ocmoptions.NewGenericClientOptions(config, ocmagentcodec.NewManifestBundleCodec(), fmt.Sprintf("%s-%d", cluster, rand.N(1<<30))).
		WithClientWatcherStore(store).
		WithClusterName(cluster)
	holder, err := ocmwork.NewAgentClientHolder(ctx, opt)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory := workinformers.NewSharedInformerFactoryWithOptions(holder.WorkInterface(), 5*time.Minute, workinformers.WithNamespace(cluster))
	informer := factory.Work().V1().ManifestWorks().Informer()
	a, err := runApplier(holder.ManifestWorks(cluster), informer, cluster)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go informer.Run(ctx.Done())
	ag := &ocmAgent{cancel: cancel, informer: informer, applier: a, logs: logs}
	t.Cleanup(func() { ag.stop(t) })
	return ag
}

func (a *ocmAgent) holds() map[string]int64 { return generations(a.informer) }

func (a *ocmAgent) describe(name string) string {
	for _, obj := range a.informer.GetStore().List() {
		if w := obj.(*workv1.ManifestWork); w.Name == name {
			return fmt.Sprintf("uid %s, generation %d, resourceVersion %s, conditions %+v", w.UID, w.Generation, w.ResourceVersion, w.Status.Conditions)
		}
	}
	return "not held"
}

func (a *ocmAgent) stop(*testing.T) {
	a.cancel()
	a.applier.stop()
}

// describe says what the agent holds of a work and what its client
// dropped and received, for a run that did not converge.
func (a *wwAgent) describe(name string) string {
	held := "its informer does not hold it"
	if g, ok := a.holds()[name]; ok {
		held = fmt.Sprintf("its informer holds it at generation %d", g)
	}
	// The clientset reads the holder's store itself, which the informer
	// watches: the two differ only while an event is on its way.
	if w, err := a.holder.WorkInterface().WorkV1().ManifestWorks(a.cluster).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		held += fmt.Sprintf(", its store at generation %d (resourceVersion %s)", w.Generation, w.ResourceVersion)
	} else {
		held += fmt.Sprintf(", its store: %v", err)
	}
	a.drops.mu.Lock()
	defer a.drops.mu.Unlock()
	return fmt.Sprintf("%s; its client dropped %v and received %v", held, a.drops.reasons, a.drops.received)
}
