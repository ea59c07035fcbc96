package store

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var gr = schema.GroupResource{Group: "work.open-cluster-management.io", Resource: "manifestworks"}

func newStore(history int) *Store[*workv1.ManifestWork] {
	return New(gr, (*workv1.ManifestWork).DeepCopy, nil, history)
}

func work(ns, name string, labels map[string]string) *workv1.ManifestWork {
	return &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: kubetypes.UID(ns + "-" + name), Labels: labels}}
}

func TestCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	a, err := s.Create(work("c1", "a", nil))
	if err != nil || a.ResourceVersion != "1" {
		t.Fatalf("Create: %v %v", a, err)
	}
	if _, err := s.Create(work("c1", "a", nil)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create: %v, want AlreadyExists", err)
	}
	a.Labels = map[string]string{"mutated": "by caller"}
	if got, _ := s.Get("c1", "a"); got.Labels != nil {
		t.Fatal("a caller's change to a returned object reached the store")
	}
	up, err := s.Update("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"x": "1"}
		return cur, nil
	})
	if err != nil || up.ResourceVersion != "2" {
		t.Fatalf("Update: %v %v", up, err)
	}
	if byUID, ok := s.PeekUID("c1-a"); !ok || byUID.ResourceVersion != "2" {
		t.Fatalf("PeekUID after Update: %v %v, want the updated object", byUID, ok)
	}
	same, err := s.Update("c1", "a", func(*workv1.ManifestWork) (*workv1.ManifestWork, error) { return nil, ErrNoChange })
	if err != nil || same.ResourceVersion != "2" {
		t.Fatalf("no-change Update: %v %v", same, err)
	}
	if _, err := s.Update("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Name = "b"
		return cur, nil
	}); !apierrors.IsBadRequest(err) {
		t.Fatalf("renaming Update: %v, want BadRequest", err)
	}
	if _, err := s.Update("c1", "zzz", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("Update of a missing object: %v", err)
	}
	gone, err := s.Delete("c1", "a", nil)
	if err != nil || gone.ResourceVersion != "3" {
		t.Fatalf("Delete: %v %v", gone, err)
	}
	if _, ok := s.PeekUID("c1-a"); ok {
		t.Fatal("the UID index kept a deleted object")
	}
	if _, err := s.Get("c1", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after Delete: %v", err)
	}
}

func TestListPagesFromOneSnapshot(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	for i := range 25 {
		ns := "c1"
		if i%5 == 0 {
			ns = "c2"
		}
		labels := map[string]string{"even": fmt.Sprint(i%2 == 0)}
		if _, err := s.Create(work(ns, fmt.Sprintf("w%02d", i), labels)); err != nil {
			t.Fatal(err)
		}
	}
	evens := func(w *workv1.ManifestWork) bool { return w.Labels["even"] == "true" }
	first, err := s.List(ListOptions[*workv1.ManifestWork]{Namespace: "c1", Match: evens, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 4 || first.Continue == "" || *first.RemainingItemCount != 6 {
		t.Fatalf("first page: %d items, continue %q, remaining %v", len(first.Items), first.Continue, first.RemainingItemCount)
	}
	// Changes after the first page do not show in the later ones.
	if _, err := s.Create(work("c1", "w99", map[string]string{"even": "true"})); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range first.Items {
		names = append(names, w.Name)
	}
	for tok := first.Continue; tok != ""; {
		page, err := s.List(ListOptions[*workv1.ManifestWork]{Namespace: "c1", Match: evens, Limit: 4, Continue: tok})
		if err != nil {
			t.Fatal(err)
		}
		if page.ResourceVersion != first.ResourceVersion {
			t.Fatalf("page resourceVersion %d, first page %d", page.ResourceVersion, first.ResourceVersion)
		}
		for _, w := range page.Items {
			names = append(names, w.Name)
		}
		tok = page.Continue
	}
	want := []string{"w02", "w04", "w06", "w08", "w12", "w14", "w16", "w18", "w22", "w24"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("paged %v, want %v", names, want)
	}
	if _, err := s.List(ListOptions[*workv1.ManifestWork]{Continue: "not-a-token"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := s.List(ListOptions[*workv1.ManifestWork]{Continue: encodeToken(continueToken{Snapshot: "gone"})}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("expired token: %v, want Expired (410)", err)
	}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func name(ev watch.Event) string { return ev.Object.(*workv1.ManifestWork).Name }

func TestWatchResumesFromHistory(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	a, _ := s.Create(work("c1", "a", nil))
	_, _ = s.Create(work("c1", "b", nil))
	_, _ = s.Update("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"x": "1"}
		return cur, nil
	})
	w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{ResourceVersion: a.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != watch.Added || name(ev) != "b" {
		t.Fatalf("first replayed event %v %s", ev.Type, name(ev))
	}
	if ev := next(t, w); ev.Type != watch.Modified || name(ev) != "a" {
		t.Fatalf("second replayed event %v %s", ev.Type, name(ev))
	}
	_, _ = s.Delete("c1", "b", nil)
	if ev := next(t, w); ev.Type != watch.Deleted || name(ev) != "b" {
		t.Fatalf("live event %v %s", ev.Type, name(ev))
	}
}

func TestWatchTooOldIsExpired(t *testing.T) {
	t.Parallel()
	s := newStore(3)
	for i := range 6 {
		_, _ = s.Create(work("c1", fmt.Sprint("w", i), nil))
	}
	if _, err := s.Watch(WatchOptions[*workv1.ManifestWork]{ResourceVersion: "1"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from a compacted version: %v, want Expired", err)
	}
	w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{ResourceVersion: "3"})
	if err != nil {
		t.Fatalf("watch from the oldest kept version: %v", err)
	}
	w.Stop()
	if _, err := s.Watch(WatchOptions[*workv1.ManifestWork]{ResourceVersion: "x"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad resourceVersion: %v", err)
	}
}

func TestWatchSelectorTransitionsAndInitialEvents(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	_, _ = s.Create(work("c1", "a", map[string]string{"app": "x"}))
	_, _ = s.Create(work("c2", "b", map[string]string{"app": "x"}))
	isX := func(w *workv1.ManifestWork) bool { return w.Labels["app"] == "x" }
	w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{
		Namespace: "c1", Match: isX, SendInitialEvents: true,
		Bookmark: func() *workv1.ManifestWork { return &workv1.ManifestWork{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != watch.Added || name(ev) != "a" {
		t.Fatalf("initial event %v %s", ev.Type, name(ev))
	}
	if ev := next(t, w); ev.Type != watch.Bookmark || ev.Object.(*workv1.ManifestWork).Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("want the initial-events-end bookmark, got %v", ev.Type)
	}
	relabel := func(app string) {
		_, _ = s.Update("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
			cur.Labels = map[string]string{"app": app}
			return cur, nil
		})
	}
	relabel("y")
	if ev := next(t, w); ev.Type != watch.Deleted {
		t.Fatalf("leaving the selector: %v, want Deleted", ev.Type)
	}
	relabel("x")
	if ev := next(t, w); ev.Type != watch.Added {
		t.Fatalf("entering the selector: %v, want Added", ev.Type)
	}
}

func TestStopAndCloseEndWatches(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	w1, _ := s.Watch(WatchOptions[*workv1.ManifestWork]{})
	w2, _ := s.Watch(WatchOptions[*workv1.ManifestWork]{Timeout: 10 * time.Millisecond})
	w1.Stop()
	w1.Stop()
	for _, w := range []watch.Interface{w1, w2} {
		select {
		case _, ok := <-w.ResultChan():
			if ok {
				t.Fatal("event on a stopped watch")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch not closed")
		}
	}
	w3, _ := s.Watch(WatchOptions[*workv1.ManifestWork]{})
	s.Close()
	if _, ok := <-w3.ResultChan(); ok {
		t.Fatal("Close left a watch open")
	}
	if _, err := s.Watch(WatchOptions[*workv1.ManifestWork]{}); err == nil {
		t.Fatal("watch after Close")
	}
	_, _ = s.Create(work("c1", "a", nil)) // writes still work, and reach no closed watcher
}

func BenchmarkCreate(b *testing.B) {
	s := newStore(0)
	b.ReportAllocs()
	for i := range b.N {
		if _, err := s.Create(work("c1", fmt.Sprint("w", i), nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// The write variants that return nothing behave as Create, Update and
// Delete do; Remove hands back the removed object itself.
func TestPutModifyRemove(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	if err := s.Put(work("c1", "a", nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(work("c1", "a", nil)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Put: %v, want AlreadyExists", err)
	}
	if err := s.Modify("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"x": "1"}
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Modify("c1", "a", func(*workv1.ManifestWork) (*workv1.ManifestWork, error) { return nil, ErrNoChange }); err != nil {
		t.Fatalf("no-change Modify: %v", err)
	}
	if err := s.Modify("c1", "zzz", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("Modify of a missing object: %v", err)
	}
	if got, _ := s.Get("c1", "a"); got.ResourceVersion != "2" || got.Labels["x"] != "1" {
		t.Fatalf("after Modify: %+v", got.ObjectMeta)
	}
	gone, err := s.Remove("c1", "a", nil)
	if err != nil || gone.ResourceVersion != "3" || gone.Labels["x"] != "1" {
		t.Fatalf("Remove: %v %v", gone, err)
	}
	if _, err := s.Remove("c1", "a", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("second Remove: %v", err)
	}
}

// Writers racing on one object each see the one before: none is lost,
// whether its copy was made before the lock (and checked under it) or
// under it after others kept changing the object.
func TestConcurrentUpdatesOfOneObject(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	if _, err := s.Create(work("c1", "a", nil)); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if err := s.Modify("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
					cur.Generation++
					return cur, nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, _ := s.Get("c1", "a")
	if got.Generation != writers*each || got.ResourceVersion != strconv.Itoa(writers*each+1) {
		t.Fatalf("generation %d, resourceVersion %s; want %d, %d", got.Generation, got.ResourceVersion, writers*each, writers*each+1)
	}
	// The watch saw every version, in order.
	for i := 1; i <= writers*each; i++ {
		ev := next(t, w)
		if g := ev.Object.(*workv1.ManifestWork).Generation; g != int64(i) {
			t.Fatalf("event %d has generation %d", i, g)
		}
	}
}

// Swap writes what was made from the stored object only while that object
// is still the one stored: writers racing with Swap each retry from the
// object they lost to, and none is lost.
func TestSwapComparesTheStoredObject(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	if err := s.Put(work("c1", "a", nil)); err != nil {
		t.Fatal(err)
	}
	read, err := s.Lookup("c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Swap(read, read); !apierrors.IsInternalError(err) {
		t.Fatalf("Swap of the stored object itself: %v, want InternalError", err)
	}
	next := read.DeepCopy()
	next.Generation = 1
	if got, err := s.Swap(read, next); err != nil || got.ResourceVersion != "2" || got.Generation != 1 {
		t.Fatalf("Swap: %v %v", got, err)
	}
	stale := read.DeepCopy()
	stale.Generation = 9
	if _, err := s.Swap(read, stale); !errors.Is(err, ErrChanged) {
		t.Fatalf("Swap of an object read before a change: %v, want ErrChanged", err)
	}
	if _, err := s.Lookup("c1", "zzz"); !apierrors.IsNotFound(err) {
		t.Fatalf("Lookup of a missing object: %v", err)
	}
	if _, err := s.Swap(work("c1", "zzz", nil), work("c1", "zzz", nil)); !apierrors.IsNotFound(err) {
		t.Fatalf("Swap of a missing object: %v, want NotFound", err)
	}

	const writers, each = 8, 200
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				for {
					cur, err := s.Lookup("c1", "a")
					if err != nil {
						t.Error(err)
						return
					}
					n := cur.DeepCopy()
					n.Generation++
					if _, err := s.Swap(cur, n); err == nil {
						break
					} else if !errors.Is(err, ErrChanged) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if got, _ := s.Get("c1", "a"); got.Generation != 1+writers*each {
		t.Fatalf("generation %d after %d swaps, want %d", got.Generation, writers*each, 1+writers*each)
	}
}

// bookmarkWatch watches namespace c1 with bookmarks.
func bookmarkWatch(t *testing.T, s *Store[*workv1.ManifestWork], allow bool, timeout time.Duration) watch.Interface {
	t.Helper()
	return bookmarkWatchFrom(t, s, s.ResourceVersion(), allow, timeout)
}

// bookmarkWatchFrom is bookmarkWatch resuming from resourceVersion rv.
func bookmarkWatchFrom(t *testing.T, s *Store[*workv1.ManifestWork], rv uint64, allow bool, timeout time.Duration) watch.Interface {
	t.Helper()
	w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{
		Namespace: "c1", ResourceVersion: strconv.FormatUint(rv, 10),
		AllowBookmarks: allow, Timeout: timeout,
		Bookmark: func() *workv1.ManifestWork { return &workv1.ManifestWork{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A watch that allows bookmarks gets one with the store's resourceVersion
// every interval while other namespaces change; one that does not, none.
func TestPeriodicBookmarks(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	s.SetBookmarkInterval(5 * time.Millisecond)
	with := bookmarkWatch(t, s, true, 0)
	defer with.Stop()
	without := bookmarkWatch(t, s, false, 0)
	defer without.Stop()
	for round := range 3 {
		_, _ = s.Create(work("c2", fmt.Sprint("w", round), nil))
		want := strconv.FormatUint(s.ResourceVersion(), 10)
		ev := next(t, with)
		b, _ := ev.Object.(*workv1.ManifestWork)
		if ev.Type != watch.Bookmark || b.ResourceVersion != want {
			t.Fatalf("round %d: %v at %q, want a bookmark at %s", round, ev.Type, b.ResourceVersion, want)
		}
		if b.Name != "" || b.Namespace != "" || len(b.Annotations) != 0 || len(b.Labels) != 0 {
			t.Errorf("a bookmark carries only the resourceVersion: %+v", b.ObjectMeta)
		}
	}
	// Several intervals passed (three bookmarks came), and the watch that
	// did not ask got none: its next event is the one of its namespace.
	_, _ = s.Create(work("c1", "mine", nil))
	if ev := next(t, without); ev.Type != watch.Added || name(ev) != "mine" {
		t.Fatalf("without bookmarks: %v, want the Added event only", ev.Type)
	}
	if ev := next(t, with); ev.Type != watch.Added || name(ev) != "mine" {
		t.Fatalf("with bookmarks, after a change it sees: %v, want Added", ev.Type)
	}
}

// A watch that allows bookmarks and ends by its timeout gets a last
// bookmark at the store's resourceVersion, after everything queued before
// it; one that does not just ends.
func TestTimeoutBookmark(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	_, _ = s.Create(work("c2", "before", nil)) // so the watches resume from a resourceVersion, not "0"
	from := s.ResourceVersion()
	_, _ = s.Create(work("c1", "mine", nil))
	for i := range 10 {
		_, _ = s.Create(work("c2", fmt.Sprint("w", i), nil))
	}
	want := strconv.FormatUint(s.ResourceVersion(), 10)
	// Resuming from before the writes queues them when the watch starts, so
	// its timeout cannot come first however slow the machine.
	with := bookmarkWatchFrom(t, s, from, true, 200*time.Millisecond)
	defer with.Stop()
	without := bookmarkWatchFrom(t, s, from, false, 200*time.Millisecond)
	defer without.Stop()
	// The watch without bookmarks ends at its timeout (what it had not
	// delivered by then is dropped, as before) and never sends one.
	for ev := range without.ResultChan() {
		if ev.Type == watch.Bookmark {
			t.Fatal("a bookmark to a watch that did not ask for them")
		}
	}
	// The other watch's events wait for its consumer past its timeout.
	if ev := next(t, with); ev.Type != watch.Added || name(ev) != "mine" {
		t.Fatalf("first event %v, want Added", ev.Type)
	}
	ev := next(t, with)
	if ev.Type != watch.Bookmark || ev.Object.(*workv1.ManifestWork).ResourceVersion != want {
		t.Fatalf("at the timeout: %v, want a bookmark at %s", ev.Type, want)
	}
	if _, ok := <-with.ResultChan(); ok {
		t.Fatal("the watch went on after its timeout bookmark")
	}
}

// A watch whose consumer never reads still ends when the store closes,
// also after its timeout (while it would deliver its last bookmark).
func TestCloseEndsDrainingWatches(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	// The watch starts with an event queued, which nobody reads: it is
	// still delivering when it expires, whenever that is.
	from := s.ResourceVersion()
	_, _ = s.Create(work("c1", "a", nil))
	w := bookmarkWatchFrom(t, s, from, true, time.Millisecond)
	eventually(t, "the watch expired", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		_, draining := s.draining[w.(*watcher[*workv1.ManifestWork])]
		return draining
	})
	s.Close()
	for range w.ResultChan() {
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkUpdate(b *testing.B) {
	s := newStore(0)
	if _, err := s.Create(work("c1", "w", nil)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := range b.N {
		if _, err := s.Update("c1", "w", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
			cur.Generation = int64(i)
			return cur, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// An Update in a store of 100,000 works, with a watch on one namespace
// (as an agent's or a namespaced informer's): what a hub's status writes
// cost at scale.
func BenchmarkUpdate100k(b *testing.B) {
	s := benchStore(b)
	w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{Namespace: "cluster-7", ResourceVersion: strconv.FormatUint(s.ResourceVersion(), 10)})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n := i % 100000
		if _, err := s.Update(fmt.Sprint("cluster-", n%1000), fmt.Sprint("w", n), func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
			cur.Generation++
			return cur, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStore holds 100,000 works over 1,000 namespaces; one in ten is
// labelled tier=gold.
func benchStore(b *testing.B) *Store[*workv1.ManifestWork] {
	s := newStore(0)
	for i := range 100000 {
		l := map[string]string{"app": fmt.Sprint("app-", i%100), "tier": "bronze"}
		if i%10 == 0 {
			l["tier"] = "gold"
		}
		if _, err := s.Create(work(fmt.Sprint("cluster-", i%1000), fmt.Sprint("w", i), l)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// A label-selector List over every namespace: 10,000 of 100,000 match.
func BenchmarkListLabelSelector100k(b *testing.B) {
	s := benchStore(b)
	sel, err := labels.Parse("tier=gold")
	if err != nil {
		b.Fatal(err)
	}
	match := func(w *workv1.ManifestWork) bool { return sel.Matches(labels.Set(w.Labels)) }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := s.List(ListOptions[*workv1.ManifestWork]{Match: match})
		if err != nil || len(res.Items) != 10000 {
			b.Fatalf("List: %d items, %v", len(res.Items), err)
		}
	}
}

// One namespace's works (an agent's or a per-cluster resync's listing):
// 100 of 100,000.
func BenchmarkListNamespace100k(b *testing.B) {
	s := benchStore(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := s.List(ListOptions[*workv1.ManifestWork]{Namespace: "cluster-7"})
		if err != nil || len(res.Items) != 100 {
			b.Fatalf("List: %d items, %v", len(res.Items), err)
		}
	}
}

// A List or Watch of the stored objects hands out what Peek returns; any
// other hands out copies, all watchers of an event one copy.
func TestStoredListsAndWatchesShareTheStoredObjects(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	_, _ = s.Create(work("c1", "a", nil))
	watchOf := func(stored bool, rv string) watch.Interface {
		w, err := s.Watch(WatchOptions[*workv1.ManifestWork]{ResourceVersion: rv, Stored: stored})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	initialStored, initialCopy := watchOf(true, "0"), watchOf(false, "0")
	resumedStored, resumedCopy := watchOf(true, "1"), watchOf(false, "1")
	live1, live2 := watchOf(false, "1"), watchOf(false, "1")
	_, _ = s.Update("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"x": "1"}
		return cur, nil
	})
	stored, _ := s.Peek("c1", "a")

	if got := next(t, initialStored).Object; got == nil || got.(*workv1.ManifestWork).Labels != nil {
		t.Fatalf("initial event of a stored watch: %v", got)
	}
	if got := next(t, initialStored).Object; got != stored {
		t.Error("a stored watch got a copy of the modification")
	}
	if got := next(t, resumedStored).Object; got != stored {
		t.Error("a stored watch resumed from history got a copy")
	}
	next(t, initialCopy) // the Added
	for _, w := range []watch.Interface{initialCopy, resumedCopy} {
		if got := next(t, w).Object; got == stored {
			t.Error("a watch got the stored object")
		}
	}
	if a, b := next(t, live1).Object, next(t, live2).Object; a == stored || a != b {
		t.Error("two watches of one event did not share one copy")
	}

	for _, stored := range []bool{true, false} {
		res, err := s.List(ListOptions[*workv1.ManifestWork]{Stored: stored})
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("List: %v %v", res, err)
		}
		if peeked, _ := s.Peek("c1", "a"); (res.Items[0] == peeked) != stored {
			t.Errorf("List with Stored %v returned the stored object: %v", stored, res.Items[0] == peeked)
		}
	}
}
