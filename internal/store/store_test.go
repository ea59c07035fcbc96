package store

import (
	"fmt"
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
