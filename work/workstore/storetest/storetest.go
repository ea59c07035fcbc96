// Package storetest checks an implementation of workstore.Store against
// the contract every Store keeps: kube-like writes, ordered idempotent
// statuses, label-selected paged lists, and Watch.
package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/work/workstore"
)

// Run runs the suite; open returns an empty Store for one subtest.
func Run(t *testing.T, open func(t *testing.T) workstore.Store) {
	for _, c := range []struct {
		name string
		test func(*testing.T, workstore.Store)
	}{
		{"WritesBehaveAsAKubeAPIServers", writes},
		{"StatusWritesAreOrderedAndIdempotent", statuses},
		{"ListSelectsAndPages", lists},
		{"WatchTellsEveryChangeInOrder", watches},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t)) })
	}
}

// NewWork is a work of cluster with one ConfigMap whose data is data.
func NewWork(cluster, name string, labels map[string]string, data string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster, Labels: labels},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default"},"data":{"k":"` + data + `"}}`)}}}}},
	}
}

// NewWorkAt is cur with its spec's data set to data, at cur's version.
func NewWorkAt(cur *workv1.ManifestWork, data string) *workv1.ManifestWork {
	w := NewWork(cur.Namespace, cur.Name, cur.Labels, data)
	w.ResourceVersion, w.UID = cur.ResourceVersion, cur.UID
	return w
}

// Eventually waits for cond, failing t after 30 s.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Watch watches s until t ends and returns what it tells, once it
// listens.
func Watch(t *testing.T, s workstore.Store) *Changes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := &Changes{}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, got.Add, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("watch: %v", err)
	}
	return got
}

// Changes records what Watch tells.
type Changes struct {
	mu  sync.Mutex
	all []workstore.Change
}

// Add records c: a Watch handler.
func (c *Changes) Add(ch workstore.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, ch)
}

// Of returns what was told of uid, in order.
func (c *Changes) Of(uid string) []workstore.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ops []workstore.Op
	for _, ch := range c.all {
		if ch.UID == uid {
			ops = append(ops, ch.Op)
		}
	}
	return ops
}

// Create, Get, Update and Delete behave as a kube-apiserver's do for a
// work with its agent's finalizer: versions, conflicts, generations, and
// a deletion held until the agent reports the work Deleted.
func writes(t *testing.T, s workstore.Store) {
	ctx := context.Background()
	w, err := s.Create(ctx, NewWork("cluster1", "w1", map[string]string{"app": "a"}, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if w.UID == "" || w.Generation != 1 || w.ResourceVersion == "" || w.CreationTimestamp.IsZero() {
		t.Fatalf("created: %+v", w.ObjectMeta)
	}
	if _, err := s.Create(ctx, NewWork("cluster1", "w1", nil, "x")); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second create: %v, want AlreadyExists", err)
	}
	for _, bad := range []*workv1.ManifestWork{NewWork("Cluster_1", "w", nil, ""), NewWork("cluster1", "W!", nil, "")} {
		if _, err := s.Create(ctx, bad); !apierrors.IsBadRequest(err) {
			t.Errorf("create %s/%s: %v, want BadRequest", bad.Namespace, bad.Name, err)
		}
	}

	labelled := w.DeepCopy()
	labelled.Labels["tier"] = "web"
	// The same spec as a client may send it again: keys reordered, spaced.
	labelled.Spec.Workload.Manifests[0].Raw = []byte(`{ "kind": "ConfigMap", "apiVersion": "v1", "data": {"k": "1"}, "metadata": {"namespace": "default", "name": "cm"} }`)
	relabelled, err := s.Update(ctx, labelled)
	if err != nil {
		t.Fatal(err)
	}
	if relabelled.Generation != 1 || relabelled.ResourceVersion == w.ResourceVersion || relabelled.Labels["tier"] != "web" {
		t.Errorf("a label change: generation %d, version %s (was %s), labels %v", relabelled.Generation, relabelled.ResourceVersion, w.ResourceVersion, relabelled.Labels)
	}
	if _, err := s.Update(ctx, NewWorkAt(w, "stale")); !apierrors.IsConflict(err) {
		t.Errorf("an update from a stale version: %v, want Conflict", err)
	}
	changed, err := s.Update(ctx, NewWorkAt(relabelled, "2"))
	if err != nil {
		t.Fatal(err)
	}
	if changed.Generation != 2 {
		t.Errorf("a spec change: generation %d, want 2", changed.Generation)
	}
	got, err := s.Get(ctx, "cluster1", "w1")
	if err != nil || got.ResourceVersion != changed.ResourceVersion || string(got.Spec.Workload.Manifests[0].Raw) != string(changed.Spec.Workload.Manifests[0].Raw) {
		t.Errorf("get: %+v, %v", got, err)
	}

	deleting, err := s.Delete(ctx, "cluster1", "w1")
	if err != nil || deleting.DeletionTimestamp == nil {
		t.Fatalf("delete: %+v, %v", deleting, err)
	}
	if _, err := s.Update(ctx, NewWorkAt(deleting, "3")); !apierrors.IsConflict(err) {
		t.Errorf("a spec change of a work being deleted: %v, want Conflict", err)
	}
	// Statuses go on until the agent reports it Deleted.
	applied := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}}
	if ok, err := s.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2, Sequence: 1, HasSequence: true}, applied); !ok || err != nil {
		t.Fatalf("a status of a work being deleted: %v, %v", ok, err)
	}
	if _, err := s.Get(ctx, "cluster1", "w1"); err != nil {
		t.Fatalf("the work left before its agent reported it Deleted: %v", err)
	}
	deleted := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "Deleted", LastTransitionTime: metav1.Now()}}}
	if ok, err := s.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2, Sequence: 2, HasSequence: true}, deleted); !ok || err != nil {
		t.Fatalf("the Deleted status: %v, %v", ok, err)
	}
	if _, err := s.Get(ctx, "cluster1", "w1"); !apierrors.IsNotFound(err) {
		t.Errorf("after the Deleted status: %v, want NotFound", err)
	}
	if _, err := s.Delete(ctx, "cluster1", "w1"); !apierrors.IsNotFound(err) {
		t.Errorf("delete of a missing work: %v, want NotFound", err)
	}
}

// A status is kept only where generic.StatusOrder.Replaces says: over an
// older one; a redelivered or reordered status changes nothing.
func statuses(t *testing.T, s workstore.Store) {
	ctx := context.Background()
	w, err := s.Create(ctx, NewWork("cluster1", "w1", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	status := func(reason string) workv1.ManifestWorkStatus {
		return workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Now()}}}
	}
	seq := func(version int64, sequence uint64) generic.StatusOrder {
		return generic.StatusOrder{Version: version, Sequence: sequence, HasSequence: true}
	}
	var last generic.StatusOrder // of a work with no status yet
	var lastReason string
	for i, step := range []struct {
		order  generic.StatusOrder
		reason string
		kept   bool
	}{
		{seq(1, 5), "first", true},
		{seq(1, 5), "redelivered", false},
		{seq(1, 4), "older-sequence", false},
		{seq(1, 6), "newer-sequence", true},
		{seq(0, 99), "older-generation", false},
		{seq(2, 1), "newer-generation", true},
		{generic.StatusOrder{Version: 2}, "no-sequence-same-generation", true},
		{generic.StatusOrder{Version: 1}, "no-sequence-older-generation", false},
		{seq(2, 3), "sequence-after-none", true},
		{seq(2, 2), "older-sequence-again", false},
		{seq(2, 0), "sequence-zero", false},
		{seq(3, 0), "newer-generation-sequence-zero", true},
		{seq(3, 1992000000000000001), "a-snowflake", true}, // as agents send them: 63 bits
		{seq(3, 1992000000000000000), "an-older-snowflake", false},
	} {
		// The store keeps what the one rule says it keeps.
		if rule := step.order.Replaces(last); rule != step.kept {
			t.Fatalf("step %d (%s): generic.StatusOrder.Replaces says %v; the table %v", i, step.reason, rule, step.kept)
		}
		kept, err := s.ApplyStatus(ctx, string(w.UID), step.order, status(step.reason))
		if err != nil || kept != step.kept {
			t.Errorf("step %d (%s): kept %v, %v; want %v", i, step.reason, kept, err, step.kept)
		}
		if step.kept {
			last, lastReason = step.order, step.reason
		}
	}
	got, err := s.Get(ctx, "cluster1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, workv1.WorkApplied); c == nil || c.Reason != lastReason {
		t.Errorf("stored status: %+v, want the last kept, %s", got.Status, lastReason)
	}
	if kept, err := s.ApplyStatus(ctx, "not-a-uid", seq(9, 9), status("x")); kept || err != nil {
		t.Errorf("a status of no work: %v, %v", kept, err)
	}
}

// List selects by cluster and label, and pages.
func lists(t *testing.T, s workstore.Store) {
	ctx := context.Background()
	for i := range 25 {
		cluster := "cluster1"
		if i%2 == 1 {
			cluster = "cluster2"
		}
		lbl := map[string]string{"app": []string{"a", "b", "c"}[i%3]}
		if i%5 == 0 {
			lbl["canary"] = "true"
		}
		if _, err := s.Create(ctx, NewWork(cluster, "w"+string(rune('a'+i)), lbl, "x")); err != nil {
			t.Fatal(err)
		}
	}
	count := func(opts workstore.ListOptions) int {
		t.Helper()
		l, err := s.List(ctx, opts)
		if err != nil {
			t.Fatalf("list %+v: %v", opts, err)
		}
		return len(l.Items)
	}
	sel := func(s string) labels.Selector {
		t.Helper()
		l, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		opts workstore.ListOptions
		want int
	}{
		{workstore.ListOptions{}, 25},
		{workstore.ListOptions{Cluster: "cluster1"}, 13},
		{workstore.ListOptions{Selector: sel("app=a")}, 9},
		{workstore.ListOptions{Selector: sel("app!=a")}, 16},
		{workstore.ListOptions{Selector: sel("app in (a,b)")}, 17},
		{workstore.ListOptions{Selector: sel("app notin (a,b)")}, 8},
		{workstore.ListOptions{Selector: sel("canary")}, 5},
		{workstore.ListOptions{Selector: sel("!canary")}, 20},
		{workstore.ListOptions{Cluster: "cluster1", Selector: sel("app=a,canary")}, 1},
	} {
		if got := count(c.opts); got != c.want {
			t.Errorf("%+v: %d works, want %d", c.opts, got, c.want)
		}
	}
	seen := map[string]bool{}
	opts := workstore.ListOptions{Limit: 10}
	for pages := 0; ; pages++ {
		l, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range l.Items {
			if seen[w.Namespace+"/"+w.Name] {
				t.Errorf("%s/%s on two pages", w.Namespace, w.Name)
			}
			seen[w.Namespace+"/"+w.Name] = true
		}
		if l.Continue == "" {
			if pages != 2 || len(seen) != 25 {
				t.Errorf("%d pages, %d works; want 3 pages of all 25", pages+1, len(seen))
			}
			break
		}
		opts.Continue = l.Continue
	}
	// Names in byte order, whatever a database's collation says.
	for _, name := range []string{"ab", "web1", "a-c", "web-2"} {
		if _, err := s.Create(ctx, NewWork("cluster3", name, nil, "x")); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for opts := (workstore.ListOptions{Cluster: "cluster3", Limit: 1}); ; {
		l, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range l.Items {
			names = append(names, w.Name)
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	if got := strings.Join(names, " "); got != "a-c ab web-2 web1" {
		t.Errorf("cluster3's works page by page: %s, want a-c ab web-2 web1", got)
	}
	if _, err := s.List(ctx, workstore.ListOptions{Continue: "garbage"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a forged continue: %v, want BadRequest", err)
	}
	if _, err := s.List(ctx, workstore.ListOptions{Selector: sel("replicas>2")}); !apierrors.IsBadRequest(err) {
		t.Errorf("an unsupported operator: %v, want BadRequest", err)
	}
}

// Watch tells every change, in order.
func watches(t *testing.T, s workstore.Store) {
	got := Watch(t, s)
	ctx := context.Background()
	w, err := s.Create(ctx, NewWork("cluster1", "w1", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, NewWorkAt(w, "2")); err != nil {
		t.Fatal(err)
	}
	applied := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}}
	if _, err := s.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2, Sequence: 1, HasSequence: true}, applied); err != nil {
		t.Fatal(err)
	}
	// The same status again, newer: a write, but not of the spec.
	if _, err := s.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2, Sequence: 2, HasSequence: true}, applied); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, "cluster1", "w1"); err != nil {
		t.Fatal(err)
	}
	deleted := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "Deleted", LastTransitionTime: metav1.Now()}}}
	if _, err := s.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2}, deleted); err != nil {
		t.Fatal(err)
	}
	want := []workstore.Op{workstore.Created, workstore.SpecChanged, workstore.StatusChanged, workstore.StatusChanged, workstore.SpecChanged, workstore.Deleted}
	Eventually(t, "every change told", func() bool { return len(got.Of(string(w.UID))) == len(want) })
	if ops := got.Of(string(w.UID)); !equalOps(ops, want) {
		t.Errorf("told %v, want %v", ops, want)
	}
}

func equalOps(a, b []workstore.Op) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
