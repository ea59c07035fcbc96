package work_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/memory"
)

// sendOrder records the actions of the spec events a hub sends, in order.
type sendOrder struct {
	generic.NopObserver
	mu      sync.Mutex
	actions []types.Action
}

func (o *sendOrder) EventSent(_ generic.Side, et types.EventType, err error) {
	if err != nil || et.SubResource != types.SubResourceSpec {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.actions = append(o.actions, et.Action)
}

func (o *sendOrder) count(a types.Action) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, got := range o.actions {
		if got == a {
			n++
		}
	}
	return n
}

// A hub that deletes 10,000 works at once and then creates a few more sends
// the creates within about as many deletes, not after the storm: deletes
// have a lane of their own in the hub's publisher, served in turn with
// creates and updates. (The agent's queue does the same on its side:
// generic's TestDeleteStormDoesNotStarveCreates.) The hub publishes at most
// 4,000 events/s here, as a broker that takes them no faster would let it,
// so the storm waits in the hub's publisher; what a broker already holds
// for one subscriber it delivers first in, first out, as brokers do.
func TestDeleteStormOnTheHubDoesNotStarveCreates(t *testing.T) {
	t.Parallel()
	const storm, creates = 10000, 10
	b := memory.NewBroker()
	sent := &sendOrder{}
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1").
		WithSourceOptions(generic.WithPublishRateLimit(4000, 100), generic.WithObserver(sent)))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx := context.Background()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	for i := range storm {
		if _, err := works.Create(ctx, newWork(fmt.Sprint("old-", i), "1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lister := agent.ManifestWorkInformer().Lister()
	eventually(t, "the agent holds every work", func() bool {
		l, _ := lister.List(labels.Everything())
		return len(l) == storm
	})

	for i := range storm {
		if err := works.Delete(ctx, fmt.Sprint("old-", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := sent.count(types.DeleteRequest) // sent while the storm was queued
	for i := range creates {
		if _, err := works.Create(ctx, newWork(fmt.Sprint("new-", i), "1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every create and delete sent", func() bool {
		return sent.count(types.CreateRequest) == storm+creates && sent.count(types.DeleteRequest) == storm
	})
	sent.mu.Lock()
	deletes, between := 0, 0
	for _, a := range sent.actions {
		switch a {
		case types.DeleteRequest:
			deletes++
		case types.CreateRequest:
			if deletes > before {
				between = deletes - before
			}
		}
	}
	sent.mu.Unlock()
	t.Logf("the last of %d creates went out after %d more of the %d deletes left when they were made", creates, between, storm-before)
	// The bound README states: creates made during a delete storm go out
	// within 100 more deletes (about one per create, plus one for each of
	// the publisher's 16 workers already waiting to send), not after the
	// storm. Measured: 10 to 67.
	if between > 100 {
		t.Errorf("the last create went out after %d more deletes, want at most 100", between)
	}
	eventually(t, "the agent holds exactly the new works", func() bool {
		l, _ := lister.List(labels.Everything())
		return len(l) == creates
	})
}
