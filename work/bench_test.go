package work_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/resource/agentstate"
	"github.com/workwire/sdk-go/work"
)

// The engine's cost per work on the paths the bench floods, over the
// in-process transport: a Create until the agent's informer has the work,
// and an agent's UpdateStatus until the hub's informer has the status.
// allocs/op and B/op count both sides and the transport.

func BenchmarkCreateToAgentInformer(b *testing.B) {
	benchCreate(b, nil)
}

// What an agent state adds to each work's arrival: it is written before the
// agent's informer has the work.
func BenchmarkCreateToAgentInformerWithState(b *testing.B) {
	b.Run("state=memory", func(b *testing.B) { benchCreate(b, agentstate.NewMemory()) })
	b.Run("state=dir", func(b *testing.B) {
		dir, err := agentstate.NewDir(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		benchCreate(b, dir)
	})
}

func benchCreate(b *testing.B, state agentstate.Store) {
	hub, agent := benchHolders(b, state)
	arrived := make(chan struct{}, 1)
	if _, err := agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { arrived <- struct{}{} },
	}); err != nil {
		b.Fatal(err)
	}
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := works.Create(ctx, newWork(fmt.Sprint("w", i), "v", map[string]string{"app": "bench"}), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		<-arrived
		i++
	}
}

func BenchmarkUpdateStatusToHubInformer(b *testing.B) {
	hub, agent := benchHolders(b, nil)
	ctx := context.Background()
	const n = 100
	for i := range n {
		if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, newWork(fmt.Sprint("w", i), "v", map[string]string{"app": "bench"}), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	lister := agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	eventually(b, "the agent to hold every work", func() bool { l, _ := lister.List(labels.Everything()); return len(l) == n })
	reported := make(chan struct{}, 1)
	if _, err := hub.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if len(obj.(*workv1.ManifestWork).Status.Conditions) > 0 {
				select {
				case reported <- struct{}{}:
				default:
				}
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	works := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	i := 0
	for b.Loop() {
		w, err := works.Get(ctx, fmt.Sprint("w", i%n), metav1.GetOptions{}) // a copy, and current
		if err != nil {
			b.Fatal(err)
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: fmt.Sprint("report ", i), ObservedGeneration: w.Generation})
		if _, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-reported:
		case <-time.After(20 * time.Second):
			b.Fatal("the hub did not see the status")
		}
		i++
	}
}

// benchHolders starts a hub and an agent over one broker, the agent with
// state (nil for none).
func benchHolders(b *testing.B, state agentstate.Store) (hub, agent *work.ClientHolder) {
	broker := memory.NewBroker()
	hub = startHolder(b, hubBuilder(memoryTransport(broker), "hub1"))
	ab := agentBuilder(memoryTransport(broker), "cluster1")
	if state != nil {
		ab = ab.WithAgentState(state)
	}
	agent = startHolder(b, ab)
	return hub, agent
}
