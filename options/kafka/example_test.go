package kafka_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// A transport is configured with a typed Config (or kafka.LoadConfig from a
// YAML or JSON file) and handed to a generic client, which starts it. Here
// it is used directly, against the embedded cluster.
func ExampleNew() {
	cluster, err := kafkatest.Start()
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	agent, err := kafka.New(kafka.Config{Brokers: cluster.Addrs()}, kafka.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	received := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Joins the consumer group workwire.agent.cluster1 and returns once
	// its partitions are being read.
	if err := agent.Start(ctx, options.AgentSubscriptions("cluster1", nil), received); err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())

	hub, err := kafka.New(kafka.Config{Brokers: cluster.Addrs()}, kafka.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	if err := hub.Start(ctx, nil, transporttest.NewRecorder()); err != nil {
		panic(err)
	}
	defer hub.Close(context.Background())

	evt := transporttest.NewEvent("e1", "spec.create_request")
	if err := hub.Send(ctx, options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}, evt); err != nil {
		panic(err)
	}
	for len(received.Deliveries()) == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	d := received.Deliveries()[0]
	fmt.Println(d.Route.Role, d.Route.Source, d.Route.Cluster, d.Event.ID())
	// Output: spec hub1 cluster1 e1
}
