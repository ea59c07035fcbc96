package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// stuckReceiver blocks every delivery until its gate opens.
type stuckReceiver struct {
	*transporttest.Recorder
	gate chan struct{}
	once sync.Once
}

func (s *stuckReceiver) Deliver(d *options.Delivery) {
	<-s.gate
	s.Recorder.Deliver(d)
}

func (s *stuckReceiver) open() { s.once.Do(func() { close(s.gate) }) }

// A subscriber that stops reading never slows the publisher or the other
// subscribers; once its queue overflows its stream is ended, and it
// resubscribes (and would resync) when it reads again.
func TestASlowSubscriberIsDroppedWithoutBlockingOthers(t *testing.T) {
	// The stuck subscriber overflows after its queue and its stream's flow
	// control window (64 KiB, which a client that never reads does not
	// grow) fill up: about 1,030 of the 1,500 events. The fast one may lag
	// by up to 1,000 on a busy machine without being dropped.
	srv := grpctest.NewServerWithConfig(t, server.Config{QueueSize: 1000})
	slow := &stuckReceiver{Recorder: transporttest.NewRecorder(), gate: make(chan struct{})}
	t.Cleanup(slow.open) // before the transport's Close, which waits for Deliver
	slowTr := newTransport(t, srv.Config())
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := slowTr.Start(ctx, options.AgentSubscriptions("cluster1", []string{dataType}), slow); err != nil {
		t.Fatal(err)
	}
	fast := mustStart(t, newTransport(t, srv.Config()), options.AgentSubscriptions("cluster1", []string{dataType}))
	hub := newTransport(t, srv.Config())
	mustStart(t, hub, nil)

	const n = 1500
	pad := strings.Repeat("x", 2048)
	begin := time.Now()
	for i := range n {
		evt := event(fmt.Sprint("e", i), "spec.update_request", map[string]string{types.ExtClusterName: "cluster1", "pad": pad})
		if err := send(hub, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}, evt); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	sendTime := time.Since(begin)
	fast.Wait(t, "every event at the fast subscriber", 20*time.Second, func() bool { return len(fast.Deliveries()) == n })
	slow.open()
	slow.Wait(t, "the slow subscriber resubscribed", 20*time.Second, func() bool { return slow.Connects() >= 2 })
	if got := len(slow.Deliveries()); got >= n {
		t.Errorf("the slow subscriber got all %d events: its queue never overflowed", got)
	}
	t.Logf("%d sends took %v while a subscriber was stuck", n, sendTime)
}
