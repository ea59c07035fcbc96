package kafkatest_test

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

// A test starts an embedded cluster and points transports at its
// addresses. Restart (or Stop) simulates an outage.
func ExampleStart() {
	b, err := kafkatest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()

	cfg := kafka.Config{Brokers: b.Addrs()}
	agent, err := kafka.New(cfg, kafka.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	received := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := agent.Start(ctx, options.AgentSubscriptions("cluster1", nil), received); err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())

	// A record that is not a CloudEvent, where the agent reads.
	if err := b.Publish(ctx, kafka.DefaultSpecTopic, "cluster1", []byte("garbage")); err != nil {
		panic(err)
	}
	for received.MalformedCount() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("malformed records:", received.MalformedCount())
	// Output: malformed records: 1
}
