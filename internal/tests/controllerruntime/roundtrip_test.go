package controllerruntime

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// A hub whose reconcile requests come from controller-runtime's source and
// handler over workwire's informer: a work created through workwire's
// clientset reaches an agent, whose status comes back and is reconciled.
func TestHubToAgentRoundTripWithControllerRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	broker := mqtttest.NewBroker(t)
	cfg := &mqtt.Config{BrokerHost: broker.Addr()}
	hub := start(ctx, t, work.NewClientHolderBuilder(cfg).WithSourceID("hub"))
	agent := start(ctx, t, work.NewClientHolderBuilder(cfg).WithClusterName("cluster1"))

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	defer context.AfterFunc(ctx, queue.ShutDown)() // a test that fails ends
	src := source.Informer{Informer: hub.ManifestWorkInformer().Informer(), Handler: &handler.EnqueueRequestForObject{}}
	if err := src.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}

	// The agent: apply what arrives, that is, report it Applied.
	works := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	apply := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return
		}
		w = w.DeepCopy()
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation})
		_, _ = works.UpdateStatus(ctx, w, metav1.UpdateOptions{}) // a conflict comes back as an update
	}
	if _, err := agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: apply, UpdateFunc: func(_, obj any) { apply(obj) },
	}); err != nil {
		t.Fatal(err)
	}

	created := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"}}`),
		}}}}},
	}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The hub's reconcile loop, until the work is Applied.
	for {
		req, shutdown := queue.Get()
		if shutdown {
			t.Fatalf("the work was not reported Applied: %v", ctx.Err())
		}
		w, err := hub.ManifestWorkInformer().Lister().ManifestWorks(req.Namespace).Get(req.Name)
		queue.Done(req)
		if err == nil && meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return
		}
	}
}

func start(ctx context.Context, t *testing.T, b *work.ClientHolderBuilder) *work.ClientHolder {
	t.Helper()
	h, err := b.WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}
