package work_test

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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

// sarama (the Kafka transport) registers a meter in go-metrics' global
// registry, whose first meter starts a goroutine that lives as long as the
// process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

func memoryTransport(b *memory.Broker) work.TransportFunc {
	return func() (options.Transport, error) { return b.Transport(), nil }
}

func quiet() []generic.Option {
	return []generic.Option{
		generic.WithResyncInterval(0),
		generic.WithErrorHandler(func(context.Context, error, string, ...any) {}),
		generic.WithPublishRateLimit(0, 0),
	}
}

// startHolder builds and starts a holder and closes it when the test ends.
func startHolder(t testing.TB, b *work.ClientHolderBuilder) *work.ClientHolder {
	t.Helper()
	h, err := b.WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeHolder(t, h) })
	return h
}

func closeHolder(t testing.TB, h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

func hubBuilder(cfg any, source string) *work.ClientHolderBuilder {
	var opts []generic.SourceOption
	for _, o := range quiet() {
		opts = append(opts, o)
	}
	return work.NewClientHolderBuilder(cfg).WithSourceID(source).WithSourceOptions(opts...)
}

func agentBuilder(cfg any, cluster string) *work.ClientHolderBuilder {
	var opts []generic.AgentOption
	for _, o := range quiet() {
		opts = append(opts, o)
	}
	return work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithAgentOptions(opts...)
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func configMap(name, value string) workv1.Manifest {
	return workv1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(fmt.Sprintf(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"value":%q}}`, name, value))}}
}

func newWork(name, value string, labels map[string]string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{configMap(name, value)}}},
	}
}

const cleanupFinalizer = "test.workwire.io/cleanup"

// runAgentController is a small work agent over an agent holder: it holds a
// finalizer on every work, reports every generation Applied, and on
// deletion removes the finalizer (its "cleanup"). It stops with ctx.
func runAgentController(ctx context.Context, t *testing.T, h *work.ClientHolder, cluster string) *sync.WaitGroup {
	return runAgentControllerOn(ctx, t, h, cluster, nil)
}

// appliedSet is a cluster as runAgentControllerOn sees it: the works whose
// manifests it applied and has not cleaned up. It is goroutine-safe.
type appliedSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func newAppliedSet() *appliedSet { return &appliedSet{names: make(map[string]bool)} }

func (s *appliedSet) set(name string, applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if applied {
		s.names[name] = true
	} else {
		delete(s.names, name)
	}
}

func (s *appliedSet) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[name]
}

func (s *appliedSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names)
}

// runAgentControllerOn is runAgentController applying to cluster, if it is
// not nil: a work's manifests once it holds the finalizer, and their
// removal before it lets the finalizer go.
func runAgentControllerOn(ctx context.Context, t *testing.T, h *work.ClientHolder, cluster string, applied *appliedSet) *sync.WaitGroup {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 100*time.Millisecond))
	inf := h.ManifestWorkInformer()
	enqueue := func(obj any) {
		if w, ok := obj.(*workv1.ManifestWork); ok {
			q.Add(w.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) },
	}); err != nil {
		t.Fatal(err)
	}
	client := h.WorkInterface().WorkV1().ManifestWorks(cluster)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		q.ShutDown()
	}()
	go func() {
		defer wg.Done()
		for {
			name, shutdown := q.Get()
			if shutdown {
				return
			}
			err := reconcileAgent(ctx, inf.Lister().ManifestWorks(cluster), client, name, applied)
			if err != nil && ctx.Err() == nil {
				q.AddRateLimited(name)
			} else {
				q.Forget(name)
			}
			q.Done(name)
		}
	}()
	return &wg
}

type workLister interface {
	Get(name string) (*workv1.ManifestWork, error)
}

type workClient interface {
	Update(context.Context, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error)
	UpdateStatus(context.Context, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error)
}

func reconcileAgent(ctx context.Context, lister workLister, client workClient, name string, applied *appliedSet) error {
	w, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	w = w.DeepCopy()
	if w.DeletionTimestamp != nil {
		if len(w.Finalizers) == 0 {
			return nil
		}
		if applied != nil {
			applied.set(w.Name, false)
		}
		w.Finalizers = nil
		_, err := client.Update(ctx, w, metav1.UpdateOptions{})
		return err
	}
	if len(w.Finalizers) == 0 {
		w.Finalizers = []string{cleanupFinalizer}
		_, err := client.Update(ctx, w, metav1.UpdateOptions{})
		return err // the update event brings it back
	}
	if applied != nil {
		applied.set(w.Name, true)
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.ObservedGeneration == w.Generation {
		return nil
	}
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation,
	})
	_, err = client.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	return err
}

// appliedAt reports whether the hub sees work name Applied at its
// current generation.
func appliedAt(lister workLister, name string) bool {
	w, err := lister.Get(name)
	if err != nil {
		return false
	}
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
}
