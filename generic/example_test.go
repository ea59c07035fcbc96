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
