package work_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

// recorder is an informer event handler that remembers what it saw.
type recorder struct {
	mu     sync.Mutex
	events []string
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

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.add("add", o) },
		UpdateFunc: func(_, o any) { r.add("update", o) },
		DeleteFunc: func(o any) { r.add("delete", o) },
	}
}

// newFactory starts a real SharedInformerFactory over a holder's clientset
// and stops it when the test ends.
func newFactory(t *testing.T, h *work.ClientHolder, opts ...workinformers.SharedInformerOption) (workinformers.SharedInformerFactory, *recorder) {
	f := workinformers.NewSharedInformerFactoryWithOptions(h.WorkInterface(), time.Minute, opts...)
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

	// Status update on the agent reaches the hub's informer.
	aw, _ := agentWorks.Get(ctx, "after", metav1.GetOptions{})
	meta.SetStatusCondition(&aw.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: 2})
	if _, err := agentWorks.UpdateStatus(ctx, aw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hub sees the status", func() bool { return appliedAt(hubLister.ManifestWorks("cluster1"), "after") })

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
