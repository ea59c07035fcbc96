package storeservice_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/pgtest"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/storeservice"
	"github.com/workwire/sdk-go/work/workstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forEachBackend runs test over the in-memory Store and over PostgreSQL
// (when pgtest.DSNEnv names one): open returns a replica's Store over the
// test's one database.
func forEachBackend(t *testing.T, test func(t *testing.T, open func() workstore.Store)) {
	t.Run("memory", func(t *testing.T) {
		m := workstore.NewMemory()
		test(t, func() workstore.Store { return m })
	})
	t.Run("postgres", func(t *testing.T) {
		cfg := pgtest.Config(t)
		test(t, func() workstore.Store {
			s, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func newWork(cluster, name, data string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"k":"` + data + `"}}`)}}}}},
	}
}

// replica is one gRPC broker over the shared database.
type replica struct {
	srv  *grpctest.Server
	stop func()
}

func startReplica(t *testing.T, store workstore.Store) *replica {
	t.Helper()
	svc, err := storeservice.New(store, server.DefaultSourceID, storeservice.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpctest.NewServer(t, server.WithService(codec.ManifestBundlesDataType.String(), svc))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, ready) }()
	<-ready
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
			srv.Stop()
		})
	}
	t.Cleanup(stop)
	return &replica{srv: srv, stop: stop}
}

// startAgent starts cluster's work agent over cfg: it reports every work
// it holds Applied at its generation; a deleted work it lets go (the
// holder reports it Deleted).
func startAgent(t *testing.T, cfg grpc.Config, cluster string) *work.ClientHolder {
	t.Helper()
	h, err := work.NewClientHolderBuilder(&cfg).WithClusterName(cluster).WithLogger(logr.Discard()).
		WithAgentOptions(generic.WithResyncInterval(0)).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	works := h.WorkInterface().WorkV1().ManifestWorks(cluster)
	apply := func(obj any) {
		w, ok := obj.(*workv1.ManifestWork)
		if !ok || w.DeletionTimestamp != nil {
			return
		}
		if c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.ObservedGeneration == w.Generation {
			return
		}
		applied := w.DeepCopy()
		meta.SetStatusCondition(&applied.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", ObservedGeneration: w.Generation})
		if _, err := works.UpdateStatus(context.Background(), applied, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			t.Errorf("update status of %s: %v", w.Name, err)
		}
	}
	if _, err := h.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: apply, UpdateFunc: func(_, obj any) { apply(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close agent: %v", err)
		}
	})
	return h
}

func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func appliedAt(w *workv1.ManifestWork, generation int64) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

// An agent gets its works from the database — created before and after it
// connected — and their updates; the statuses it reports are stored; a
// deleted work leaves the database once the agent reports it Deleted.
func TestAgentsGetTheDatabasesWorksAndTheirStatusesAreStored(t *testing.T) {
	forEachBackend(t, agentsGetWorks)
}

func agentsGetWorks(t *testing.T, open func() workstore.Store) {
	store := open()
	ctx := context.Background()
	before, err := store.Create(ctx, newWork("cluster1", "before", "1"))
	if err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, store)
	agent := startAgent(t, r.srv.Config(), "cluster1")
	after, err := store.Create(ctx, newWork("cluster1", "after", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, newWork("cluster2", "elsewhere", "1")); err != nil {
		t.Fatal(err)
	}
	lister := agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	for _, w := range []*workv1.ManifestWork{before, after} {
		eventually(t, w.Name+"'s status stored", 30*time.Second, func() bool {
			got, err := store.Get(ctx, "cluster1", w.Name)
			return err == nil && appliedAt(got, 1)
		})
	}
	if l, _ := lister.List(labels.Everything()); len(l) != 2 {
		t.Errorf("the agent holds %d works, want its cluster's 2", len(l))
	}

	cur, err := store.Get(ctx, "cluster1", "after")
	if err != nil {
		t.Fatal(err)
	}
	next := newWork("cluster1", "after", "2")
	next.ResourceVersion = cur.ResourceVersion
	if _, err := store.Update(ctx, next); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update applied and its status stored", 30*time.Second, func() bool {
		got, err := store.Get(ctx, "cluster1", "after")
		return err == nil && appliedAt(got, 2)
	})

	if _, err := store.Delete(ctx, "cluster1", "before"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted work gone from the agent and the database", 30*time.Second, func() bool {
		_, err := store.Get(ctx, "cluster1", "before")
		_, lerr := lister.Get("before")
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(lerr)
	})
}

// Two replicas over one database, agents spread over them; one replica
// dies mid-run: every work reaches its agent, and every status is stored.
func TestTwoReplicasOneKilled(t *testing.T) {
	forEachBackend(t, twoReplicasOneKilled)
}

func twoReplicasOneKilled(t *testing.T, open func() workstore.Store) {
	const clusters = 10
	works := 10000
	if testing.Short() {
		works = 1000
	}
	stores := make([]workstore.Store, 2)
	replicas := make([]*replica, 2)
	for i := range replicas {
		stores[i] = open()
		replicas[i] = startReplica(t, stores[i])
	}
	proxy, err := transporttest.NewProxy(replicas[0].srv.Addr(), replicas[1].srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	agentCfg := replicas[0].srv.Config()
	agentCfg.ServerAddress = proxy.Addr()
	agentCfg.ReconnectMaxBackoff = options.Duration(500 * time.Millisecond)
	agents := make([]*work.ClientHolder, clusters)
	for i := range agents {
		agents[i] = startAgent(t, agentCfg, fmt.Sprintf("cluster%d", i))
	}

	// The service's API writes into the database through either replica.
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < works; i += 8 {
				if _, err := stores[i%2].Create(ctx, newWork(fmt.Sprintf("cluster%d", i%clusters), fmt.Sprintf("w%d", i), "1")); err != nil {
					errs <- err
					return
				}
				if i == works/2 {
					proxy.Kill(replicas[0].srv.Addr())
					replicas[0].stop()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stored := func() int {
		l, err := stores[1].List(ctx, workstore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range l.Items {
			if appliedAt(&l.Items[i], 1) {
				n++
			}
		}
		return n
	}
	eventually(t, "every status stored", 5*time.Minute, func() bool { return stored() == works })
	for i, a := range agents {
		l, err := a.ManifestWorkInformer().Lister().ManifestWorks(fmt.Sprintf("cluster%d", i)).List(labels.Everything())
		if err != nil || len(l) != works/clusters {
			t.Errorf("cluster%d's agent holds %d works, want %d (%v)", i, len(l), works/clusters, err)
		}
	}
	t.Logf("%d works over %d clusters, replica 0 killed at the %dth: every work delivered, %d statuses stored", works, clusters, works/2, stored())
}
