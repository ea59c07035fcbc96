package work_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/go-logr/logr"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func memoryTransport(b *memory.Broker) work.TransportFunc {
	return func() (options.Transport, error) { return b.Transport(), nil }
}

func TestSmoke(t *testing.T) {
	b := memory.NewBroker()
	hub, err := work.NewClientHolderBuilder(memoryTransport(b)).WithSourceID("hub1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := work.NewClientHolderBuilder(memoryTransport(b)).WithClusterName("cluster1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range []*work.ClientHolder{hub, agent} {
		if err := h.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
	}
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{}}}}}
	w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`)
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("w1")
		if err == nil {
			t.Logf("agent has %s gen %d", got.Name, got.Generation)
			break
		}
		if ctx.Err() != nil {
			t.Fatal("timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
