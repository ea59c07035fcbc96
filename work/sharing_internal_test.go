package work

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
)

// Each side keeps one copy of a work: its informer caches the object its
// store holds. What the clientset hands out — Get, List, Watch — stays the
// caller's own.
func TestTheInformerCachesTheStoredObjects(t *testing.T) {
	broker := memory.NewBroker()
	transport := TransportFunc(func() (options.Transport, error) { return broker.Transport(), nil })
	quiet := generic.WithErrorHandler(func(context.Context, error, string, ...any) {})
	hub := startInternal(t, NewClientHolderBuilder(transport).WithSourceID("hub1").WithSourceOptions(quiet))
	agent := startInternal(t, NewClientHolderBuilder(transport).WithClusterName("cluster1").WithAgentOptions(quiet))

	ctx := context.Background()
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"app": "demo"}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`)}}}}},
	}
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	watcher, err := hubWorks.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	if _, err := hubWorks.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, _ := hub.events.StoredClient("cluster1").Get(ctx, "w1", metav1.GetOptions{})
	created, _ = hub.events.Peek(created.UID)
	for name, h := range map[string]*ClientHolder{"hub": hub, "agent": agent} {
		lister := h.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
		deadline := time.Now().Add(20 * time.Second)
		for {
			cached, err := lister.Get("w1")
			var stored *workv1.ManifestWork
			ok := err == nil
			if ok {
				stored, ok = h.events.Peek(cached.UID)
			}
			if err == nil && ok && cached == stored {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the informer does not cache the stored object (cached %p, stored %p)", name, cached, stored)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cached, _ := lister.Get("w1")
		stored, _ := h.events.Peek(cached.UID)
		got, err := h.WorkInterface().WorkV1().ManifestWorks("cluster1").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil || got == stored {
			t.Errorf("%s: Get = %p, %v; want a copy of %p", name, got, err, stored)
		}
		list, err := h.WorkInterface().WorkV1().ManifestWorks("cluster1").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("%s: List = %v, %v", name, list, err)
		} else {
			list.Items[0].Labels["app"] = "mine"
			if stored.Labels["app"] != "demo" {
				t.Errorf("%s: a change to a listed work reached the store", name)
			}
		}
	}
	select {
	case ev := <-watcher.ResultChan():
		if ev.Type != watch.Added || ev.Object == runtime.Object(created) {
			t.Errorf("a watch of the clientset got %v %p, want a copy of %p", ev.Type, ev.Object, created)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the clientset's watch got nothing")
	}
}

func startInternal(t *testing.T, b *ClientHolderBuilder) *ClientHolder {
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return h
}
