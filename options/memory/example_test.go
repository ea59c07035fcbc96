package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/transporttest"
)

// Transports from one Broker reach each other by role; Disconnect and
// Reconnect simulate a connection loss.
func ExampleNewBroker() {
	ctx := context.Background()
	b := memory.NewBroker()
	agent, hub := b.Transport(), b.Transport()
	got := transporttest.NewRecorder()
	_ = agent.Start(ctx, options.AgentSubscriptions("cluster1", nil), got)
	_ = hub.Start(ctx, nil, transporttest.NewRecorder())
	defer agent.Close(ctx)
	defer hub.Close(ctx)

	agent.Disconnect()
	route := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	_ = hub.Send(ctx, route, transporttest.NewEvent("lost", "spec.create_request"))
	agent.Reconnect()
	_ = hub.Send(ctx, route, transporttest.NewEvent("kept", "spec.create_request"))

	for len(got.Deliveries()) == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(got.Deliveries()[0].Event.ID())
	// Output: kept
}

// A broker with a size limit refuses larger events at Send, as a real
// broker with a packet size limit does; the events after it go through.
func ExampleWithMaxEventBytes() {
	ctx := context.Background()
	b := memory.NewBroker(memory.WithMaxEventBytes(1024))
	hub := b.Transport()
	_ = hub.Start(ctx, nil, transporttest.NewRecorder())
	defer hub.Close(ctx)

	big := transporttest.NewEvent("big", "spec.create_request")
	_ = big.SetData("application/json", map[string]string{"pad": strings.Repeat("x", 2048)})
	route := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	err := hub.Send(ctx, route, big)
	fmt.Println(errors.Is(err, options.ErrTooLarge))
	fmt.Println(hub.Send(ctx, route, transporttest.NewEvent("small", "spec.create_request")))
	// Output:
	// true
	// <nil>
}
