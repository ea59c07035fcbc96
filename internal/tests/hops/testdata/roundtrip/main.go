// Command roundtrip is one work's round trip through two holders over an
// embedded MQTT broker — hub Create, agent informer, agent UpdateStatus, hub
// informer — between two marker functions a tracer looks for.
package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

//go:noinline
func roundTripBegins() { fmt.Fprintln(os.Stderr, "round trip begins") }

//go:noinline
func roundTripEnds() { fmt.Fprintln(os.Stderr, "round trip ends") }

// answers counts the resync requests a client answered.
type answers struct {
	generic.NopObserver
	n atomic.Int64
}

func (a *answers) ResyncAnswered(generic.Side, types.DataType, int) { a.n.Add(1) }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "roundtrip:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	broker, err := mqtttest.Start()
	if err != nil {
		return err
	}
	defer broker.Close()
	cfg := &mqtt.Config{BrokerHost: broker.Addr()}

	var agentAnswers, hubAnswers answers
	agent, err := work.NewClientHolderBuilder(cfg).WithClusterName("cluster1").WithLogger(logr.Discard()).
		WithAgentOptions(generic.WithObserver(&agentAnswers)).NewClientHolder()
	if err != nil {
		return err
	}
	works := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	apply := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return
		}
		w = w.DeepCopy()
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation})
		_, _ = works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	}
	if _, err := agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: apply, UpdateFunc: func(_, o any) { apply(o) }}); err != nil {
		return err
	}
	if err := agent.Start(ctx); err != nil {
		return err
	}
	defer agent.Close(context.Background())

	hub, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub1").WithLogger(logr.Discard()).
		WithSourceOptions(generic.WithObserver(&hubAnswers)).NewClientHolder()
	if err != nil {
		return err
	}
	applied := make(chan struct{}, 1)
	onHub := func(obj any) {
		if meta.IsStatusConditionTrue(obj.(*workv1.ManifestWork).Status.Conditions, workv1.WorkApplied) {
			select {
			case applied <- struct{}{}:
			default:
			}
		}
	}
	if _, err := hub.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onHub, UpdateFunc: func(_, o any) { onHub(o) }}); err != nil {
		return err
	}
	if err := hub.Start(ctx); err != nil {
		return err
	}
	defer hub.Close(context.Background())

	// Fewer calls to leave out: the resyncs of the two starts are answered
	// before the round trip (the test leaves out any resync's calls, so one
	// that a slow machine runs late does not count either).
	for agentAnswers.n.Load() < 1 || hubAnswers.n.Load() < 1 || agent.Stats().Queued > 0 || hub.Stats().Queued > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("the starts' resyncs: %w", ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}

	roundTripBegins()
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"}}`),
		}}}}},
	}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		return err
	}
	select {
	case <-applied:
	case <-ctx.Done():
		return fmt.Errorf("the round trip: %w", ctx.Err())
	}
	roundTripEnds()
	return nil
}
