package work_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// The README's complete program, with Example_program in place of main:
// readme_test.go keeps every other line of the two the same.
func Example_program() {
	if err := run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output: cluster1/web is Applied
}

// run starts an MQTT broker, the agent of cluster1 and a hub, and sends one
// work from the hub to the agent and its status back.
func run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	broker, err := mqtttest.Start() // an embedded broker; yours is a host:port
	if err != nil {
		return err
	}
	defer broker.Close()
	cfg := &mqtt.Config{BrokerHost: broker.Addr()}

	agent, err := startAgent(ctx, cfg, "cluster1")
	if err != nil {
		return err
	}
	defer agent.Close(context.Background())

	hub, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub1").NewClientHolder()
	if err != nil {
		return err
	}
	applied := make(chan *workv1.ManifestWork, 1)
	onStatus := func(obj any) {
		if w := obj.(*workv1.ManifestWork); meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			select {
			case applied <- w:
			default:
			}
		}
	}
	_, err = hub.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { onStatus(obj) },
	})
	if err != nil {
		return err
	}
	if err := hub.Start(ctx); err != nil { // connects, and returns once the informer has synced
		return err
	}
	defer hub.Close(context.Background())

	web := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"}, // the namespace is the cluster
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{
			RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"}}`)},
		}}}},
	}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		return err
	}
	select {
	case w := <-applied:
		fmt.Printf("%s/%s is %s\n", w.Namespace, w.Name, workv1.WorkApplied)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no Applied status: %w", ctx.Err())
	}
}

// startAgent starts the work agent of cluster: works arrive in its informer,
// and its controller reports each one Applied. A real agent applies the
// manifests to its cluster first; the holder does not.
func startAgent(ctx context.Context, cfg *mqtt.Config, cluster string) (*work.ClientHolder, error) {
	agent, err := work.NewClientHolderBuilder(cfg).WithClusterName(cluster).NewClientHolder()
	if err != nil {
		return nil, err
	}
	works := agent.WorkInterface().WorkV1().ManifestWorks(cluster)
	reportApplied := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return
		}
		w = w.DeepCopy() // the informer's objects are shared: never write to them
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation,
		})
		// A conflict means a newer spec has arrived: its update comes next, and is reported then.
		_, _ = works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	}
	_, err = agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    reportApplied,
		UpdateFunc: func(_, obj any) { reportApplied(obj) },
	})
	if err != nil {
		return nil, err
	}
	if err := agent.Start(ctx); err != nil {
		return nil, err
	}
	return agent, nil
}
