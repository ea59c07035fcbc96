package transporttest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/options"
)

// BenchSenders is how many goroutines BenchSendDeliver sends from: as many
// as the work client's publisher runs.
const BenchSenders = 16

// BenchSendDeliver measures Send on one transport to Deliver on another, for
// spec events of about 2 KB sent from BenchSenders goroutines, and reports
// events/s beside ns/op and allocs/op (of both ends: they share the
// process). newTransport returns an unstarted transport to the broker
// under test; the benchmark closes it.
func BenchSendDeliver(b *testing.B, newTransport func() options.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	recv := &countingReceiver{target: int64(b.N), done: make(chan struct{})}
	agent, hub := newTransport(), newTransport()
	if err := agent.Start(ctx, options.AgentSubscriptions("bench-cluster", nil), recv); err != nil {
		b.Fatal(err)
	}
	defer closeNow(b, agent)
	if err := hub.Start(ctx, nil, NewRecorder()); err != nil {
		b.Fatal(err)
	}
	defer closeNow(b, hub)
	route := options.Route{Role: options.RoleSpec, Source: "bench-hub", Cluster: "bench-cluster"}
	evt := OnRoute(NewEvent("bench", "spec.update_request"), route)
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"manifests": strings.Repeat("x", 1800)})
	b.SetBytes(int64(len(evt.Data())))
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	begin := time.Now()
	for range BenchSenders {
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

// countingReceiver acknowledges deliveries and closes done at the target.
type countingReceiver struct {
	n      atomic.Int64
	target int64
	done   chan struct{}
	once   sync.Once
}

func (c *countingReceiver) Deliver(d *options.Delivery) {
	d.Done()
	if c.n.Add(1) == c.target {
		c.once.Do(func() { close(c.done) })
	}
}
func (c *countingReceiver) Malformed(error) {}
func (c *countingReceiver) Connected()      {}

func closeNow(b *testing.B, tr options.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		b.Error(err)
	}
}
