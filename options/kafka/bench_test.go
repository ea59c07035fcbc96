package kafka_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// counter is a receiver that counts deliveries and acknowledges them.
type counter struct {
	n      atomic.Int64
	target int64
	done   chan struct{}
	once   sync.Once
}

func (c *counter) Deliver(d *options.Delivery) {
	d.Done()
	if c.n.Add(1) == c.target {
		c.once.Do(func() { close(c.done) })
	}
}
func (c *counter) Malformed(error) {}
func (c *counter) Connected()      {}

// benchEvent is a spec event of about 2 KB on the wire.
func benchEvent() *cloudevents.Event {
	evt := transporttest.NewEvent("bench", "spec.update_request")
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"manifests": strings.Repeat("x", 1800)})
	return evt
}

// BenchmarkSendDeliver measures events/s from Send on one transport to
// Deliver on another, for 2 KB events and 16 concurrent senders, through
// the embedded Kafka cluster (kfake) and, measured the same way, the
// embedded MQTT broker (mochi-mqtt, QoS 1).
func BenchmarkSendDeliver(b *testing.B) {
	b.Run("kafka-kfake", func(b *testing.B) {
		cluster := kafkatest.NewBroker(b)
		cfg := kafka.Config{Brokers: cluster.Addrs()}
		benchSendDeliver(b, func() options.Transport { return newTransport(b, cfg) })
	})
	b.Run("mqtt-mochi", func(b *testing.B) {
		broker := mqtttest.NewBroker(b)
		benchSendDeliver(b, func() options.Transport {
			tr, err := mqtt.New(mqtt.Config{BrokerHost: broker.Addr()}, mqtt.WithLogger(logr.Discard()))
			if err != nil {
				b.Fatal(err)
			}
			return tr
		})
	})
}

func benchSendDeliver(b *testing.B, newTr func() options.Transport) {
	const senders = 16
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	recv := &counter{target: int64(b.N), done: make(chan struct{})}
	agent, hub := newTr(), newTr()
	if err := agent.Start(ctx, options.AgentSubscriptions("c1", nil), recv); err != nil {
		b.Fatal(err)
	}
	defer closeNow(b, agent)
	if err := hub.Start(ctx, nil, transporttest.NewRecorder()); err != nil {
		b.Fatal(err)
	}
	defer closeNow(b, hub)
	evt := benchEvent()
	b.SetBytes(int64(len(evt.Data())))
	b.ReportAllocs()
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	begin := time.Now()
	for range senders {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := hub.Send(ctx, route, evt); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-recv.done:
	case <-ctx.Done():
		b.Fatalf("delivered %d of %d", recv.n.Load(), b.N)
	}
	elapsed := time.Since(begin)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
