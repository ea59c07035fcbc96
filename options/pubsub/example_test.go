package pubsub_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
	"github.com/workwire/sdk-go/work"
)

// A *pubsub.Config is what the work client builder takes, as it takes an MQTT
// or gRPC one: a hub and an agent over Pub/Sub, the agent reporting the
// work it receives Applied.
func ExampleConfig() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server, err := pubsubtest.Start() // in production: your project, with no endpoint
	if err != nil {
		panic(err)
	}
	defer server.Close()
	cfg := &pubsub.Config{ProjectID: pubsubtest.ProjectID, Endpoint: server.Addr(), DisableTLS: true, Provision: true}

	agent, err := work.NewClientHolderBuilder(cfg).WithClusterName("cluster1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	works := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	_, err = agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			w := obj.(*workv1.ManifestWork).DeepCopy()
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied"})
			_, _ = works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
		},
	})
	if err != nil {
		panic(err)
	}
	if err := agent.Start(ctx); err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())

	hub, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	if err := hub.Start(ctx); err != nil {
		panic(err)
	}
	defer hub.Close(context.Background())
	web := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"}}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		got, err := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("web")
		if err == nil && meta.IsStatusConditionTrue(got.Status.Conditions, workv1.WorkApplied) {
			fmt.Println(got.Name, "is", workv1.WorkApplied)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: web is Applied
}
