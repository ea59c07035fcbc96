package generic_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/memory"
)

// A source and an agent over the in-memory broker: the source publishes a
// widget, the agent applies it and reports a status, the source sees it.
func ExampleNewSourceClient() {
	ctx := context.Background()
	broker := memory.NewBroker()
	quiet := []generic.Option{generic.WithLogger(logr.Discard()), generic.WithErrorHandler(func(context.Context, error, string, ...any) {})}

	hubStore := newStore()
	hub, err := generic.NewSourceClient("hub1", broker.Transport(), hubStore, hashWidget,
		[]generic.Codec[*widget]{widgetCodec{}}, quiet[0], quiet[1])
	if err != nil {
		panic(err)
	}
	statuses := make(chan string, 1)
	_ = hub.Subscribe(func(_ context.Context, _ types.EventType, w *widget) error {
		statuses <- w.Status
		return nil
	})

	agentStore := newStore()
	agent, err := generic.NewAgentClient("cluster1", broker.Transport(), agentStore, hashWidget,
		[]generic.Codec[*widget]{widgetCodec{}}, quiet[0], quiet[1])
	if err != nil {
		panic(err)
	}
	_ = agent.Subscribe(func(ctx context.Context, t types.EventType, w *widget) error {
		w.Status = "applied " + w.Spec
		agentStore.put(w)
		return agent.Publish(ctx, types.EventType{DataType: t.DataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, w)
	})

	for _, start := range []func(context.Context) error{hub.Start, agent.Start} {
		if err := start(ctx); err != nil {
			panic(err)
		}
	}
	defer hub.Close(ctx)
	defer agent.Close(ctx)

	w := newWidget("hub1", "cluster1", "w1", "v1", 1)
	hubStore.put(w)
	if err := hub.Publish(ctx, specCreate, w); err != nil {
		panic(err)
	}
	select {
	case s := <-statuses:
		fmt.Println(s)
	case <-time.After(10 * time.Second):
		fmt.Println("no status")
	}
	// Output: applied v1
}

// The cluster side: the agent's handler applies each spec a source sends
// and publishes its status back to that source. The agent's store is its
// Lister — what it tells sources it holds when it resyncs, and what it
// answers their status resyncs from — so the handler writes it before it
// publishes.
func ExampleNewAgentClient() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broker := memory.NewBroker()
	codecs := []generic.Codec[*widget]{widgetCodec{}}

	applied := newStore()
	agent, err := generic.NewAgentClient("cluster1", broker.Transport(), applied, hashWidget, codecs, generic.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	err = agent.Subscribe(func(ctx context.Context, t types.EventType, w *widget) error {
		if t.Action == types.DeleteRequest {
			applied.remove(string(w.UID))
			return nil
		}
		w.Status = "applied " + w.Spec
		applied.put(w)
		status := types.EventType{DataType: t.DataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
		return agent.Publish(ctx, status, w) // to the source that sent it
	})
	if err != nil {
		panic(err)
	}
	if err := agent.Start(ctx); err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())

	sent := newStore()
	hub, err := generic.NewSourceClient("hub1", broker.Transport(), sent, hashWidget, codecs, generic.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	reported := make(chan string, 1)
	err = hub.Subscribe(func(_ context.Context, _ types.EventType, w *widget) error {
		select {
		case reported <- w.Status:
		default: // a resync may report it again
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	if err := hub.Start(ctx); err != nil {
		panic(err)
	}
	defer hub.Close(context.Background())
	w := newWidget("hub1", "cluster1", "w1", "v1", 1)
	sent.put(w) // a source's Lister holds what it sends, or its resync deletes it on the agent
	if err := hub.Publish(ctx, specCreate, w); err != nil {
		panic(err)
	}

	select {
	case status := <-reported:
		held, _ := applied.get(string(w.UID))
		fmt.Printf("cluster1 holds %s from %s: %s\n", held.Name, held.Annotations[sourceAnnotation], held.Status)
		fmt.Printf("hub1 sees: %s\n", status)
	case <-ctx.Done():
		fmt.Println("no status:", ctx.Err())
	}
	// Output:
	// cluster1 holds w1 from hub1: applied v1
	// hub1 sees: applied v1
}
