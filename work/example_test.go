package work_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// A hub controller's holder: its clientset publishes what the controller
// writes, and its informer holds what the agents report. Switching to a
// kube-apiserver is passing a *rest.Config instead.
func ExampleNewClientHolderBuilder() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broker, err := mqtttest.Start()
	if err != nil {
		panic(err)
	}
	defer broker.Close()
	cfg := &mqtt.Config{BrokerHost: broker.Addr()}
	agent := runAgent(ctx, cfg, "cluster1") // see the agent side's example

	hub, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	if err := hub.Start(ctx); err != nil { // connects and syncs the informer
		panic(err)
	}
	defer hub.Close(context.Background())
	defer agent.Close(context.Background())

	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"}, // the namespace is the cluster
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"}}`),
		}}}}},
	}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		got, err := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("web")
		if err == nil && meta.IsStatusConditionTrue(got.Status.Conditions, workv1.WorkApplied) {
			fmt.Println(got.Namespace, got.Name, "is", workv1.WorkApplied)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: cluster1 web is Applied
}

// A work agent's holder: works arrive in its informer, and UpdateStatus
// reports back to the source they came from.
func ExampleNewClientHolderBuilder_agent() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broker, err := mqtttest.Start()
	if err != nil {
		panic(err)
	}
	defer broker.Close()
	cfg := &mqtt.Config{BrokerHost: broker.Addr()}

	agent := runAgent(ctx, cfg, "cluster1")
	defer agent.Close(context.Background())

	// A hub to send it a work.
	hub, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	if err := hub.Start(ctx); err != nil {
		panic(err)
	}
	defer hub.Close(context.Background())
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"}}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		got, err := agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("web")
		if err == nil && meta.IsStatusConditionTrue(got.Status.Conditions, workv1.WorkApplied) {
			fmt.Println("the agent holds", got.Name, "and reported it", workv1.WorkApplied)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: the agent holds web and reported it Applied
}

// runAgent starts the agent of cluster: a holder whose controller reports
// every work it receives Applied (a real agent applies the manifests
// first).
func runAgent(ctx context.Context, cfg *mqtt.Config, cluster string) *work.ClientHolder {
	agent, err := work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	works := agent.WorkInterface().WorkV1().ManifestWorks(cluster)
	apply := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return
		}
		w = w.DeepCopy() // informer objects are shared: never write to them
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation,
		})
		_, _ = works.UpdateStatus(ctx, w, metav1.UpdateOptions{}) // a conflict comes back as an update: retried then
	}
	_, err = agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
	})
	if err != nil {
		panic(err)
	}
	if err := agent.Start(ctx); err != nil {
		panic(err)
	}
	return agent
}
