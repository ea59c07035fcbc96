package informer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	workv1listers "open-cluster-management.io/api/client/work/listers/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type works = store.Store[*workv1.ManifestWork]

func newStore() *works {
	gr := schema.GroupResource{Group: "work.open-cluster-management.io", Resource: "manifestworks"}
	return store.New(gr, (*workv1.ManifestWork).DeepCopy, nil, 0)
}

func work(ns, name string, lbls map[string]string) *workv1.ManifestWork {
	return &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: kubetypes.UID(ns + "-" + name), Labels: lbls}}
}

func relabel(st *works, ns, name, app string) {
	if err := st.Modify(ns, name, func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"app": app}
		return cur, nil
	}); err != nil {
		panic(err)
	}
}

// recorder is a handler that writes down each call as a line.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) note(format string, args ...any) {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func name(obj any) string {
	w := obj.(*workv1.ManifestWork)
	return w.Namespace + "/" + w.Name + "@" + w.Labels["app"]
}

func (r *recorder) OnAdd(obj any, initial bool) { r.note("add %s initial=%v", name(obj), initial) }
func (r *recorder) OnUpdate(old, obj any)       { r.note("update %s -> %s", name(old), name(obj)) }
func (r *recorder) OnDelete(obj any)            { r.note("delete %s", name(obj)) }

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// waitFor waits until the recorder has n calls, and returns them.
func (r *recorder) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := r.got()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler got %d calls, want %d:\n%s", len(got), n, strings.Join(got, "\n"))
		}
		time.Sleep(time.Millisecond)
	}
}

func run(t *testing.T, inf *Informer[*workv1.ManifestWork]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if !inf.IsStopped() {
			t.Error("IsStopped is false after Run returned")
		}
	})
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("did not sync")
	}
}

func TestHandlersGetTheInitialListThenEveryChangeInOrder(t *testing.T) {
	st := newStore()
	for _, n := range []string{"a", "b"} {
		if err := st.Put(work("c1", n, map[string]string{"app": "v1"})); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Put(work("c2", "other", nil)); err != nil {
		t.Fatal(err)
	}
	inf := New(st, "c1", 0, "manifestworks")
	before := &recorder{}
	reg, err := inf.AddEventHandler(before)
	if err != nil {
		t.Fatal(err)
	}
	if reg.HasSynced() || inf.HasSynced() {
		t.Fatal("synced before Run")
	}
	run(t, inf)
	initial := before.waitFor(t, 2)
	slices.Sort(initial)
	if want := []string{"add c1/a@v1 initial=true", "add c1/b@v1 initial=true"}; !slices.Equal(initial, want) {
		t.Fatalf("initial list %q, want %q", initial, want)
	}
	if !cache.WaitForCacheSync(t.Context().Done(), reg.HasSynced) {
		t.Fatal("the registration never synced")
	}

	relabel(st, "c1", "a", "v2")
	relabel(st, "c2", "other", "v2") // another namespace: not this informer's
	if _, err := st.Remove("c1", "b", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(work("c1", "c", map[string]string{"app": "v1"})); err != nil {
		t.Fatal(err)
	}
	// A handler added now gets what is stored now as its initial list,
	// then the same changes as every other handler.
	after := &recorder{}
	if _, err := inf.AddEventHandler(after); err != nil {
		t.Fatal(err)
	}
	relabel(st, "c1", "c", "v3")

	want := []string{"update c1/a@v1 -> c1/a@v2", "delete c1/b@v1", "add c1/c@v1 initial=false", "update c1/c@v1 -> c1/c@v3"}
	if got := before.waitFor(t, 6)[2:]; !slices.Equal(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got := after.waitFor(t, 3)
	slices.Sort(got[:2])
	if want := []string{"add c1/a@v2 initial=true", "add c1/c@v1 initial=true", "update c1/c@v1 -> c1/c@v3"}; !slices.Equal(got, want) {
		t.Errorf("a late handler got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestARemovedHandlerGetsNothingMore(t *testing.T) {
	st := newStore()
	inf := New(st, "", 0, "manifestworks")
	run(t, inf)
	// The handler holds its first delivery until released, so the second
	// write is queued for it before it is removed.
	r := &blockingRecorder{entered: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(r.release) }) }
	t.Cleanup(release) // runs before the informer's stop, which waits for the handler
	reg, err := inf.AddEventHandler(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(work("c1", "a", nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler got no delivery")
	}
	if err := st.Put(work("c1", "b", nil)); err != nil {
		t.Fatal(err)
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	release()
	l := reg.(*listener[*workv1.ManifestWork])
	select {
	case <-l.done:
	case <-time.After(20 * time.Second):
		l.stop() // so that the informer's Run can end
		t.Fatalf("a removed handler's deliveries did not end; it got %q", r.got())
	}
	if got := r.got(); len(got) != 1 {
		t.Fatalf("a removed handler got %q", got)
	}
}

// blockingRecorder is a recorder whose first call waits for release.
type blockingRecorder struct {
	recorder
	entered, release chan struct{}
	once             sync.Once
}

func (r *blockingRecorder) OnAdd(obj any, initial bool) {
	r.recorder.OnAdd(obj, initial)
	r.once.Do(func() { close(r.entered); <-r.release })
}

func TestResyncReplaysEveryObjectAsAnUpdate(t *testing.T) {
	st := newStore()
	if err := st.Put(work("c1", "a", map[string]string{"app": "v1"})); err != nil {
		t.Fatal(err)
	}
	inf := New(st, "c1", 0, "manifestworks")
	r := &recorder{}
	if _, err := inf.AddEventHandlerWithResyncPeriod(r, time.Millisecond); err != nil { // raised to a second
		t.Fatal(err)
	}
	run(t, inf)
	got := r.waitFor(t, 2)
	if want := []string{"add c1/a@v1 initial=true", "update c1/a@v1 -> c1/a@v1"}; !slices.Equal(got[:2], want) {
		t.Fatalf("got %q, want %q", got[:2], want)
	}
}

func TestTheCacheIsTheStore(t *testing.T) {
	st := newStore()
	for _, w := range []*workv1.ManifestWork{
		work("c1", "a", map[string]string{"app": "x"}),
		work("c1", "b", map[string]string{"app": "y"}),
		work("c2", "c", map[string]string{"app": "x"}),
	} {
		if err := st.Put(w); err != nil {
			t.Fatal(err)
		}
	}
	byApp := cache.Indexers{"app": func(obj any) ([]string, error) {
		return []string{obj.(*workv1.ManifestWork).Labels["app"]}, nil
	}}
	hub := New(st, "", 0, "manifestworks")
	if err := hub.AddIndexers(byApp); err != nil {
		t.Fatal(err)
	}
	if err := hub.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}); err == nil {
		t.Error("a second namespace index was accepted")
	}
	agent := New(st, "c1", 0, "manifestworks")
	if err := agent.AddIndexers(cache.Indexers{"app2": byApp["app"]}); err != nil {
		t.Fatal(err)
	}

	idx := hub.GetIndexer()
	if got := names(idx.List()); !slices.Equal(got, []string{"c1/a@x", "c1/b@y", "c2/c@x"}) {
		t.Errorf("hub List: %q", got)
	}
	if got := names(agent.GetIndexer().List()); !slices.Equal(got, []string{"c1/a@x", "c1/b@y"}) {
		t.Errorf("agent List: %q", got)
	}
	if got, _ := idx.ByIndex("app", "x"); !slices.Equal(names(got), []string{"c1/a@x", "c2/c@x"}) {
		t.Errorf("hub ByIndex app=x: %q", names(got))
	}
	if got, _ := agent.GetIndexer().ByIndex("app2", "x"); !slices.Equal(names(got), []string{"c1/a@x"}) {
		t.Errorf("agent ByIndex app=x: %q, want only its namespace's", names(got))
	}
	relabel(st, "c1", "a", "y") // indexes follow the store's writes
	if got, _ := idx.ByIndex("app", "y"); !slices.Equal(names(got), []string{"c1/a@y", "c1/b@y"}) {
		t.Errorf("ByIndex app=y after a relabel: %q", names(got))
	}
	if got := idx.ListIndexFuncValues("app"); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("ListIndexFuncValues: %q", got)
	}
	if _, err := idx.ByIndex("nope", "x"); err == nil {
		t.Error("ByIndex of an unknown index: no error")
	}
	if obj, ok, err := agent.GetIndexer().GetByKey("c2/c"); ok || err != nil {
		t.Errorf("the agent's cache has another namespace's object: %v %v", obj, err)
	}
	if obj, ok, _ := idx.GetByKey("c2/c"); !ok || obj.(*workv1.ManifestWork) != mustPeek(t, st, "c2", "c") {
		t.Error("GetByKey does not return the stored object")
	}
	if err := idx.Add(work("c1", "z", nil)); err == nil {
		t.Error("a write to the cache was accepted")
	}

	// The listers OCM's informers hand out work over it unchanged.
	lister := workv1listers.NewManifestWorkLister(idx)
	if got, err := lister.ManifestWorks("c1").List(labels.Everything()); err != nil || len(got) != 2 {
		t.Errorf("lister List of c1: %d works, %v", len(got), err)
	}
	if got, err := lister.ManifestWorks("c2").Get("c"); err != nil || got.Name != "c" {
		t.Errorf("lister Get: %v, %v", got, err)
	}
	if _, err := lister.ManifestWorks("c2").Get("a"); err == nil {
		t.Error("lister Get of another namespace's name: no error")
	}
}

func TestATransformIsRefused(t *testing.T) {
	inf := New(newStore(), "", 0, "manifestworks")
	if err := inf.SetTransform(nil); err != nil {
		t.Errorf("SetTransform(nil): %v", err)
	}
	if err := inf.SetTransform(func(obj any) (any, error) { return obj, nil }); err == nil {
		t.Error("a transform was accepted")
	}
}

func TestNoHandlerAfterStop(t *testing.T) {
	inf := New(newStore(), "", 0, "manifestworks")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inf.RunWithContext(ctx)
	if _, err := inf.AddEventHandler(&recorder{}); err == nil {
		t.Error("a handler was added to a stopped informer")
	}
}

func names(objs []any) []string {
	out := make([]string, len(objs))
	for i, obj := range objs {
		out[i] = name(obj)
	}
	slices.Sort(out)
	return out
}

func mustPeek(t *testing.T, st *works, ns, n string) *workv1.ManifestWork {
	t.Helper()
	w, ok := st.Peek(ns, n)
	if !ok {
		t.Fatalf("%s/%s is not stored", ns, n)
	}
	return w
}
