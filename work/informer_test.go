package work_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/store"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

// recorder is an informer event handler that remembers what it saw.
type recorder struct {
	mu      sync.Mutex
	events  []string
	updates [][2]*workv1.ManifestWork // old, new
}

func (r *recorder) add(kind string, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	w := obj.(*workv1.ManifestWork)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, kind+" "+w.Name)
}

func (r *recorder) saw(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == event {
			return true
		}
	}
	return false
}

// sawUpdate reports whether an update event of work name satisfied
// match(old, new).
func (r *recorder) sawUpdate(name string, match func(old, new *workv1.ManifestWork) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.updates {
		if u[1].Name == name && match(u[0], u[1]) {
			return true
		}
	}
	return false
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { r.add("add", o) },
		UpdateFunc: func(old, o any) {
			r.add("update", o)
			r.mu.Lock()
			r.updates = append(r.updates, [2]*workv1.ManifestWork{old.(*workv1.ManifestWork), o.(*workv1.ManifestWork)})
			r.mu.Unlock()
		},
		DeleteFunc: func(o any) { r.add("delete", o) },
	}
}

// newFactory starts a real SharedInformerFactory over a holder's clientset
// and stops it when the test ends.
func newFactory(t *testing.T, h *work.ClientHolder, opts ...workinformers.SharedInformerOption) (workinformers.SharedInformerFactory, *recorder) {
	return newFactoryFor(t, h.WorkInterface(), opts...)
}

func newFactoryFor(t *testing.T, cs versioned.Interface, opts ...workinformers.SharedInformerOption) (workinformers.SharedInformerFactory, *recorder) {
	f := workinformers.NewSharedInformerFactoryWithOptions(cs, time.Minute, opts...)
	rec := &recorder{}
	if _, err := f.Work().V1().ManifestWorks().Informer().AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	return f, rec
}

func TestInformersOverBothSides(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx := context.Background()

	// One work before the informers start, so their initial list has it.
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, newWork("before", "1", map[string]string{"tier": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent store has the first work", func() bool {
		_, err := agent.WorkInterface().WorkV1().ManifestWorks("cluster1").Get(ctx, "before", metav1.GetOptions{})
		return err == nil
	})
	hubF, hubRec := newFactory(t, hub)
	agentF, agentRec := newFactory(t, agent, workinformers.WithNamespace("cluster1"))
	hubLister := hubF.Work().V1().ManifestWorks().Lister()
	agentLister := agentF.Work().V1().ManifestWorks().Lister()

	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	agentWorks := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	if _, err := hubWorks.Create(ctx, newWork("after", "1", map[string]string{"tier": "db"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*recorder{hubRec, agentRec} {
		eventually(t, "add events", func() bool { return rec.saw("add before") && rec.saw("add after") })
	}

	// Spec update on the hub reaches the agent's informer.
	w, _ := hubWorks.Get(ctx, "after", metav1.GetOptions{})
	w.Spec.Workload.Manifests[0] = configMap("after", "2")
	if _, err := hubWorks.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent sees the new generation", func() bool {
		got, err := agentLister.ManifestWorks("cluster1").Get("after")
		return err == nil && got.Generation == 2 && agentRec.saw("update after")
	})
	// ... and both sides' handlers see it as an update from generation 1.
	for side, rec := range map[string]*recorder{"hub": hubRec, "agent": agentRec} {
		eventually(t, side+" handler sees the spec update", func() bool {
			return rec.sawUpdate("after", func(old, new *workv1.ManifestWork) bool {
				return old.Generation == 1 && new.Generation == 2 && string(new.Spec.Workload.Manifests[0].Raw) != string(old.Spec.Workload.Manifests[0].Raw)
			})
		})
	}

	// Status update on the agent reaches the hub's informer.
	aw, _ := agentWorks.Get(ctx, "after", metav1.GetOptions{})
	meta.SetStatusCondition(&aw.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: 2})
	if _, err := agentWorks.UpdateStatus(ctx, aw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hub sees the status", func() bool { return appliedAt(hubLister.ManifestWorks("cluster1"), "after") })
	// ... as an update event of both sides' handlers (the agent's own
	// informer sees its write): the status changed, nothing else (a status
	// is no new generation).
	applied := func(w *workv1.ManifestWork) bool {
		c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == 2
	}
	for side, rec := range map[string]*recorder{"hub": hubRec, "agent": agentRec} {
		eventually(t, side+" handler sees the status update", func() bool {
			return rec.sawUpdate("after", func(old, new *workv1.ManifestWork) bool {
				return !applied(old) && applied(new) && old.Generation == 2 && new.Generation == 2 && old.ResourceVersion != new.ResourceVersion
			})
		})
	}

	// Listers answer by name and by label selector, on both sides.
	for side, l := range map[string]interface {
		List(labels.Selector) ([]*workv1.ManifestWork, error)
	}{"hub": hubLister.ManifestWorks("cluster1"), "agent": agentLister.ManifestWorks("cluster1")} {
		web, err := l.List(labels.SelectorFromSet(labels.Set{"tier": "web"}))
		if err != nil || len(web) != 1 || web[0].Name != "before" {
			t.Errorf("%s lister by label: %v %v", side, web, err)
		}
	}

	// Delete on the hub: the agent sees the deletion, then both see it gone
	// (the agent has no finalizer here, so it reports Deleted at once).
	if err := hubWorks.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for side, rec := range map[string]*recorder{"hub": hubRec, "agent": agentRec} {
		eventually(t, side+" delete event", func() bool { return rec.saw("delete before") })
	}
	if _, err := hubLister.ManifestWorks("cluster1").Get("before"); err == nil {
		t.Error("hub lister still has the deleted work")
	}
	// The holders' own informers tell the same story.
	eventually(t, "holder informer synced", func() bool {
		_, err := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("after")
		return err == nil
	})
}

// countingClientset wraps a clientset for informers: it counts their full
// lists (List calls, and watch-list requests, which stream one) and their
// watches, and gives every watch a timeout of watchTimeout seconds, so
// watches restart often.
type countingClientset struct {
	versioned.Interface
	watchTimeout   int64
	lists, watches atomic.Int64
}

func (c *countingClientset) WorkV1() workv1client.WorkV1Interface {
	return countingWorkV1{c.Interface.WorkV1(), c}
}

type countingWorkV1 struct {
	workv1client.WorkV1Interface
	c *countingClientset
}

func (v countingWorkV1) ManifestWorks(namespace string) workv1client.ManifestWorkInterface {
	return countingWorks{v.WorkV1Interface.ManifestWorks(namespace), v.c}
}

type countingWorks struct {
	workv1client.ManifestWorkInterface
	c *countingClientset
}

func (w countingWorks) List(ctx context.Context, opts metav1.ListOptions) (*workv1.ManifestWorkList, error) {
	w.c.lists.Add(1)
	return w.ManifestWorkInterface.List(ctx, opts)
}

func (w countingWorks) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		w.c.lists.Add(1)
	}
	opts.TimeoutSeconds = &w.c.watchTimeout
	wi, err := w.ManifestWorkInterface.Watch(ctx, opts)
	if err == nil {
		w.c.watches.Add(1) // a watch that failed (410) is followed by a list
	}
	return wi, err
}

// An informer limited to one namespace of a busy hub resumes each watch
// from the bookmark it got at the watch's end, however many events (more
// than the store's history holds) happened in other namespaces since the
// last change it saw: it never relists.
func TestNamespacedInformerOnABusyHubDoesNotRelist(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	ctx := context.Background()
	busy := hub.WorkInterface().WorkV1().ManifestWorks("busy")
	churn, err := busy.Create(ctx, newWork("churn", "1", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingClientset{Interface: hub.WorkInterface(), watchTimeout: 1}
	_, rec := newFactoryFor(t, cs, workinformers.WithNamespace("quiet"))
	if n := cs.lists.Load(); n != 1 {
		t.Fatalf("%d lists to sync, want 1", n)
	}
	// Each round starts right after a watch started (after the sync, then
	// after the last round's restart), so its burst most likely ends
	// within that watch, and the restart after it is one that must not
	// relist.
	for round := range 2 {
		// More events than the history holds, none the informer sees:
		// finalizer changes, which are no new generation and publish
		// nothing.
		for i := range store.DefaultHistory + 500 {
			churn.Finalizers = nil
			if i%2 == 0 {
				churn.Finalizers = []string{"test/churn"}
			}
			if churn, err = busy.Update(ctx, churn, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		after := cs.watches.Load()
		eventually(t, "the watch restarts after the burst", func() bool { return cs.watches.Load() > after })
		if n := cs.lists.Load(); n != 1 {
			t.Fatalf("round %d: the informer relisted (%d lists)", round, n)
		}
	}
	// And it still sees what happens in its namespace.
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("quiet").Create(ctx, newWork("mine", "1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer sees its namespace", func() bool { return rec.saw("add mine") })
	if n := cs.lists.Load(); n != 1 {
		t.Fatalf("the informer relisted (%d lists)", n)
	}
}
