package work_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

// sendOrder records the actions of the spec events a hub sends, in the
// order its publisher hands them to the transport.
type sendOrder struct {
	mu      sync.Mutex
	actions []types.Action
}

func (o *sendOrder) record(evt *cloudevents.Event) {
	et, err := types.ParseEventType(evt.Type())
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

// gate holds every Send until it is released, as a broker that takes
// nothing for a while would: what the hub has to send waits in its
// publisher meanwhile.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while sends pass
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) hold() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }

func (g *gate) release() { g.mu.Lock(); close(g.open); g.mu.Unlock() }

// transport returns b's transports, each passing g, and recording in sent
// what it is given to send.
func (g *gate) transport(b *memory.Broker, sent *sendOrder) work.TransportFunc {
	return func() (options.Transport, error) {
		return gatedTransport{Transport: b.Transport(), g: g, sent: sent}, nil
	}
}

type gatedTransport struct {
	options.Transport
	g    *gate
	sent *sendOrder
}

func (t gatedTransport) Send(ctx context.Context, r options.Route, evt *cloudevents.Event) error {
	t.sent.record(evt)
	t.g.mu.Lock()
	open := t.g.open
	t.g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return t.Transport.Send(ctx, r, evt)
}

// A hub that deletes 10,000 works at once and then creates a few more gets
// every one of them to the agent, the creates among the deletes rather than
// after the storm: deletes have a lane of their own in the hub's publisher
// (TestPublisherSendsDeletesAndCreatesInTurn measures the lanes apart from
// scheduling; generic's TestDeleteStormDoesNotStarveCreates the agent's
// side). The broker takes nothing while the storm and the creates are
// queued, so the whole storm waits in the publisher. Where the creates land
// among the deletes depends on how the publisher's 16 workers are scheduled,
// so it is logged, not asserted: on an idle machine, after about 25.
func TestDeleteStormOnTheHubDoesNotStarveCreates(t *testing.T) {
	t.Parallel()
	const storm, creates = 10000, 10
	b := memory.NewBroker()
	g := newGate()
	sent := &sendOrder{}
	hub := startHolder(t, hubBuilder(g.transport(b, sent), "hub1"))
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

	g.hold()
	for i := range storm {
		if err := works.Delete(ctx, fmt.Sprint("old-", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range creates {
		if _, err := works.Create(ctx, newWork(fmt.Sprint("new-", i), "1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g.release()
	eventually(t, "every create and delete sent", func() bool {
		return sent.count(types.CreateRequest) == storm+creates && sent.count(types.DeleteRequest) == storm
	})
	sent.mu.Lock()
	deletes, before := 0, 0
	for _, a := range sent.actions {
		switch a {
		case types.DeleteRequest:
			deletes++
		case types.CreateRequest:
			before = deletes
		}
	}
	sent.mu.Unlock()
	t.Logf("the last of %d creates queued behind %d deletes went out after %d of them", creates, storm, before)
	if before == storm {
		t.Errorf("the creates went out after the whole storm of %d deletes", storm)
	}
	eventually(t, "the agent holds exactly the new works", func() bool {
		l, _ := lister.List(labels.Everything())
		return len(l) == creates
	})
}
