package grpc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// counter is a receiver that counts deliveries.
type counter struct {
	n      atomic.Int64
	target atomic.Int64
	done   chan struct{}
}

func (c *counter) Deliver(d *options.Delivery) {
	d.Done()
	if c.n.Add(1) == c.target.Load() {
		c.done <- struct{}{}
	}
}
func (c *counter) Malformed(error) {}
func (c *counter) Connected()      {}

// BenchmarkSendDeliver2KB measures events with 2 KB of data from a source's
// Send, through the broker, to an agent's Deliver, on loopback.
func BenchmarkSendDeliver2KB(b *testing.B) {
	for _, mode := range []string{"sequential", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			srv := grpctest.NewServerWithConfig(b, server.Config{QueueSize: 1 << 20})
			agent, hub := newTransport(b, srv.Config()), newTransport(b, srv.Config())
			recv := &counter{done: make(chan struct{}, 1)}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := agent.Start(ctx, options.AgentSubscriptions("cluster1", []string{dataType}), recv); err != nil {
				b.Fatal(err)
			}
			defer agent.Close(context.Background())
			if err := hub.Start(ctx, nil, &counter{}); err != nil {
				b.Fatal(err)
			}
			defer hub.Close(context.Background())
			evt := cloudevents.NewEvent()
			evt.SetID("bench")
			evt.SetSource("hub")
			evt.SetType(dataType + ".spec.update_request")
			evt.SetExtension("resourceid", "r1")
			evt.SetExtension("resourceversion", int32(1))
			evt.SetExtension("clustername", "cluster1")
			_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", 2048)})
			route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}
			recv.target.Store(int64(b.N))
			b.ReportAllocs()
			b.ResetTimer()
			begin := time.Now()
			if mode == "sequential" {
				for range b.N {
					if err := hub.Send(context.Background(), route, &evt); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := hub.Send(context.Background(), route, &evt); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			select {
			case <-recv.done:
			case <-time.After(time.Minute):
				b.Fatalf("delivered %d of %d", recv.n.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "events/s")
		})
	}
}
