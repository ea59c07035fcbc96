package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/pgtest"
	"github.com/workwire/sdk-go/work/pgstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgtest.Pool(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newWork(cluster, name string, labels map[string]string, data string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster, Labels: labels},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default"},"data":{"k":"` + data + `"}}`)}}}}},
	}
}

// Replicas that open one database at once migrate it once; a schema newer
// than the program's is refused.
func TestTheSchemaMigratesOnceAndRefusesANewerOne(t *testing.T) {
	cfg := pgtest.Config(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("open: %v", err)
		}
	}
	pool := pgtest.PoolOf(t, cfg)
	var version int
	if err := pool.QueryRow(context.Background(), `SELECT version FROM workwire_schema`).Scan(&version); err != nil || version != pgstore.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", version, err, pgstore.SchemaVersion)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE workwire_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(context.Background(), pool); err == nil || !strings.Contains(err.Error(), "newer than this program's") {
		t.Errorf("open of a newer schema: %v", err)
	}
}

// Create, Get, Update and Delete behave as a kube-apiserver's do for a
// work with its agent's finalizer: versions, conflicts, generations, and
// a deletion held until the agent reports the work Deleted.
func TestWritesBehaveAsAKubeAPIServers(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	w, err := s.Create(ctx, newWork("cluster1", "w1", map[string]string{"app": "a"}, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if w.UID == "" || w.Generation != 1 || w.ResourceVersion == "" || w.CreationTimestamp.IsZero() {
		t.Fatalf("created: %+v", w.ObjectMeta)
	}
	if _, err := s.Create(ctx, newWork("cluster1", "w1", nil, "x")); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second create: %v, want AlreadyExists", err)
	}
	for _, bad := range []*workv1.ManifestWork{newWork("Cluster_1", "w", nil, ""), newWork("cluster1", "W!", nil, "")} {
		if _, err := s.Create(ctx, bad); !apierrors.IsBadRequest(err) {
			t.Errorf("create %s/%s: %v, want BadRequest", bad.Namespace, bad.Name, err)
		}
	}

	labelled := w.DeepCopy()
	labelled.Labels["tier"] = "web"
	relabelled, err := s.Update(ctx, labelled)
	if err != nil {
		t.Fatal(err)
	}
	if relabelled.Generation != 1 || relabelled.ResourceVersion == w.ResourceVersion || relabelled.Labels["tier"] != "web" {
		t.Errorf("a label change: generation %d, version %s (was %s), labels %v", relabelled.Generation, relabelled.ResourceVersion, w.ResourceVersion, relabelled.Labels)
	}
	if _, err := s.Update(ctx, newWorkAt(w, "stale")); !apierrors.IsConflict(err) {
		t.Errorf("an update from a stale version: %v, want Conflict", err)
	}
	changed, err := s.Update(ctx, newWorkAt(relabelled, "2"))
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
	if _, err := s.Update(ctx, newWorkAt(deleting, "3")); !apierrors.IsConflict(err) {
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

// newWorkAt is cur with its spec's data set to data.
func newWorkAt(cur *workv1.ManifestWork, data string) *workv1.ManifestWork {
	w := newWork(cur.Namespace, cur.Name, cur.Labels, data)
	w.ResourceVersion, w.UID = cur.ResourceVersion, cur.UID
	return w
}

// A status is kept only over an older one: a redelivered or reordered
// status changes nothing.
func TestStatusWritesAreOrderedAndIdempotent(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	w, err := s.Create(ctx, newWork("cluster1", "w1", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	status := func(reason string) workv1.ManifestWorkStatus {
		return workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Now()}}}
	}
	seq := func(version int64, sequence uint64) generic.StatusOrder {
		return generic.StatusOrder{Version: version, Sequence: sequence, HasSequence: true}
	}
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
	} {
		kept, err := s.ApplyStatus(ctx, string(w.UID), step.order, status(step.reason))
		if err != nil || kept != step.kept {
			t.Errorf("step %d (%s): kept %v, %v; want %v", i, step.reason, kept, err, step.kept)
		}
	}
	got, err := s.Get(ctx, "cluster1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, workv1.WorkApplied); c == nil || c.Reason != "no-sequence-same-generation" {
		t.Errorf("stored status: %+v", got.Status)
	}
	if kept, err := s.ApplyStatus(ctx, "not-a-uid", seq(9, 9), status("x")); kept || err != nil {
		t.Errorf("a status of no work: %v, %v", kept, err)
	}
}

// List selects by cluster and label, and pages.
func TestListSelectsAndPages(t *testing.T) {
	s := open(t)
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
		if _, err := s.Create(ctx, newWork(cluster, "w"+string(rune('a'+i)), lbl, "x")); err != nil {
			t.Fatal(err)
		}
	}
	count := func(opts pgstore.ListOptions) int {
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
		opts pgstore.ListOptions
		want int
	}{
		{pgstore.ListOptions{}, 25},
		{pgstore.ListOptions{Cluster: "cluster1"}, 13},
		{pgstore.ListOptions{Selector: sel("app=a")}, 9},
		{pgstore.ListOptions{Selector: sel("app!=a")}, 16},
		{pgstore.ListOptions{Selector: sel("app in (a,b)")}, 17},
		{pgstore.ListOptions{Selector: sel("app notin (a,b)")}, 8},
		{pgstore.ListOptions{Selector: sel("canary")}, 5},
		{pgstore.ListOptions{Selector: sel("!canary")}, 20},
		{pgstore.ListOptions{Cluster: "cluster1", Selector: sel("app=a,canary")}, 1},
	} {
		if got := count(c.opts); got != c.want {
			t.Errorf("%+v: %d works, want %d", c.opts, got, c.want)
		}
	}
	seen := map[string]bool{}
	opts := pgstore.ListOptions{Limit: 10}
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
	if _, err := s.List(ctx, pgstore.ListOptions{Continue: "garbage"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a forged continue: %v, want BadRequest", err)
	}
	if _, err := s.List(ctx, pgstore.ListOptions{Selector: sel("replicas>2")}); !apierrors.IsBadRequest(err) {
		t.Errorf("an unsupported operator: %v, want BadRequest", err)
	}
}

// changes records what Watch tells.
type changes struct {
	mu  sync.Mutex
	all []pgstore.Change
}

func (c *changes) add(ch pgstore.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, ch)
}

func (c *changes) of(uid string) []pgstore.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ops []pgstore.Op
	for _, ch := range c.all {
		if ch.UID == uid {
			ops = append(ops, ch.Op)
		}
	}
	return ops
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Watch tells every change, whoever wrote it, in order; after losing its
// connection it tells what changed meanwhile.
func TestWatchTellsEveryChangeAndCatchesUp(t *testing.T) {
	cfg := pgtest.Config(t)
	s, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg)) // another replica
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var got changes
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, got.add, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	<-ready

	w, err := other.Create(ctx, newWork("cluster1", "w1", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Update(ctx, newWorkAt(w, "2")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2}, workv1.ManifestWorkStatus{}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Delete(ctx, "cluster1", "w1"); err != nil {
		t.Fatal(err)
	}
	deleted := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "Deleted", LastTransitionTime: metav1.Now()}}}
	if _, err := other.ApplyStatus(ctx, string(w.UID), generic.StatusOrder{Version: 2}, deleted); err != nil {
		t.Fatal(err)
	}
	want := []pgstore.Op{pgstore.Created, pgstore.SpecChanged, pgstore.StatusChanged, pgstore.SpecChanged, pgstore.Deleted}
	eventually(t, "every change told", func() bool { return len(got.of(string(w.UID))) == len(want) })
	if ops := got.of(string(w.UID)); !equalOps(ops, want) {
		t.Errorf("told %v, want %v", ops, want)
	}

	// The watch loses its connection; meanwhile a work is created and
	// another deleted: it tells both once it is back.
	kept, err := other.Create(ctx, newWork("cluster1", "kept", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := other.Create(ctx, newWork("cluster1", "gone", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both created", func() bool { return len(got.of(string(gone.UID))) == 1 })
	pool := pgtest.PoolOf(t, cfg)
	if n := pgtest.Terminate(t, pool, s.WatchName()); n != 1 {
		t.Fatalf("ended %d watch connections, want 1", n)
	}
	created, err := other.Create(ctx, newWork("cluster2", "meanwhile", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM workwire_works WHERE uid = $1`, gone.UID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "what changed meanwhile told", func() bool {
		return len(got.of(string(created.UID))) == 1 && len(got.of(string(gone.UID))) == 2
	})
	if ops := got.of(string(gone.UID)); ops[1] != pgstore.Deleted {
		t.Errorf("the work deleted meanwhile: told %v", ops)
	}
	if ops := got.of(string(kept.UID)); len(ops) != 1 {
		t.Errorf("a work that did not change: told %v", ops)
	}
}

func equalOps(a, b []pgstore.Op) bool {
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
