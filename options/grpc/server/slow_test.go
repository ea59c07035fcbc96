package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
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

// Statuses and spec resync requests from a fleet go to its source: a
// source whose queue is full — by count, or by bytes with more publishers
// waiting than its bytes bound holds — makes the agents' publishes wait for
// room instead of being dropped, and receives everything once it reads
// again.
func TestStatusesWaitForASourceThatFellBehind(t *testing.T) {
	for name, cfg := range map[string]server.Config{
		"by count": {QueueSize: 10, QueueWait: options.Duration(time.Minute)},
		"by bytes": {QueueSize: 10, QueueBytes: 16 << 10, QueueWait: options.Duration(time.Minute)},
	} {
		t.Run(name, func(t *testing.T) { statusesWaitForASourceThatFellBehind(t, cfg) })
	}
}

func statusesWaitForASourceThatFellBehind(t *testing.T, cfg server.Config) {
	srv := grpctest.NewServerWithConfig(t, cfg)
	slow := &stuckReceiver{Recorder: transporttest.NewRecorder(), gate: make(chan struct{})}
	t.Cleanup(slow.open)
	source := newTransport(t, srv.Config())
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := source.Start(ctx, options.SourceSubscriptions("hub", []string{dataType}), slow); err != nil {
		t.Fatal(err)
	}
	agent := newTransport(t, srv.Config())
	mustStart(t, agent, nil)

	// Far more than the queue and the stream's flow-control window hold,
	// from several publishers at once, as an agent's publisher sends.
	const n, publishers = 400, 8
	pad := strings.Repeat("x", 2048)
	var wg sync.WaitGroup
	var published atomic.Int64
	errs := make(chan error, n)
	for p := range publishers {
		wg.Go(func() {
			for i := p; i < n; i += publishers {
				evt := event(fmt.Sprint("s", i), "status.update_request", map[string]string{
					types.ExtClusterName: "cluster1", types.ExtOriginalSource: "hub", "pad": pad})
				if err := send(agent, options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "cluster1"}, evt); err != nil {
					errs <- err
				}
				published.Add(1)
			}
		})
	}
	// The source reads again once the publishers are held up: its queue
	// (10) and stream window (64 KiB, some 30 of these events) are full,
	// and no publish has returned for half a second. (Had the source been
	// dropped instead, every publish would have returned.)
	last, still := published.Load(), 0
	for still < 10 && last < n {
		time.Sleep(50 * time.Millisecond)
		if now := published.Load(); now == last {
			still++
		} else {
			last, still = now, 0
		}
	}
	t.Logf("publishers held up after %d of %d statuses", last, n)
	// An agent's spec resync request meets the full queue too (as the
	// answer to a status resync fills it): it waits as well.
	wg.Go(func() {
		evt := event("resync", "spec.resync_request", map[string]string{types.ExtClusterName: "cluster1"})
		if err := send(agent, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, evt); err != nil {
			errs <- err
		}
	})
	slow.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a publish failed: %v", err)
	}
	slow.Wait(t, "every status and the resync request at the source", 20*time.Second, func() bool { return len(slow.Deliveries()) == n+1 })
	if c := slow.Connects(); c != 1 {
		t.Errorf("the source connected %d times, want 1: it was dropped", c)
	}
}

// A source that does not read for longer than QueueWait has fallen behind:
// it is dropped (and resubscribes), and the publishes go on.
func TestASourceStuckPastQueueWaitIsDropped(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{QueueSize: 10, QueueWait: options.Duration(100 * time.Millisecond)})
	slow := rawSubscribe(t, srv.Addr(), &protocol.SubscriptionRequest{Source: "hub", DataTypes: []string{dataType}})
	agent := newTransport(t, srv.Config())
	mustStart(t, agent, nil)
	// Far more than the queue and the stream's flow-control window hold:
	// the first publish to find the queue full waits QueueWait, then the
	// source is dropped and the rest reach nobody.
	pad := strings.Repeat("x", 4<<10)
	for i := range 100 {
		evt := event(fmt.Sprint("s", i), "status.update_request", map[string]string{
			types.ExtClusterName: "cluster1", types.ExtOriginalSource: "hub", "pad": pad})
		if err := send(agent, options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "cluster1"}, evt); err != nil {
			t.Fatalf("status %d: %v", i, err)
		}
	}
	for {
		if _, err := slow.Recv(); err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("the stuck source's stream ended with %v, want ResourceExhausted", err)
			}
			return
		}
	}
}

// A source whose stream ends lets go of the publishers waiting for room in
// its queue at once, not after QueueWait.
func TestAnEndedSourceReleasesWaitingPublishers(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{QueueSize: 10, QueueWait: options.Duration(time.Hour)})
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()),
		grpclib.WithInitialWindowSize(64<<10), grpclib.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, endSource := context.WithCancel(context.Background())
	defer endSource()
	stream, err := protocol.NewCloudEventServiceClient(conn).Subscribe(ctx, &protocol.SubscriptionRequest{Source: "hub", DataTypes: []string{dataType}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first heartbeat: %v", err)
	}
	agent := newTransport(t, srv.Config())
	mustStart(t, agent, nil)
	pad := strings.Repeat("x", 4<<10)
	var wg sync.WaitGroup
	var published atomic.Int64
	for p := range 4 {
		wg.Go(func() {
			for i := range 100 {
				evt := event(fmt.Sprint("s", p, "-", i), "status.update_request", map[string]string{
					types.ExtClusterName: "cluster1", types.ExtOriginalSource: "hub", "pad": pad})
				_ = send(agent, options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "cluster1"}, evt)
				published.Add(1)
			}
		})
	}
	// The source reads nothing: the publishers are held up...
	last, still := published.Load(), 0
	for still < 10 {
		time.Sleep(50 * time.Millisecond)
		if now := published.Load(); now == last {
			still++
		} else {
			last, still = now, 0
		}
	}
	if last == 400 {
		t.Fatal("every publish returned while the source read nothing")
	}
	// ... until its stream ends.
	endSource()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Well before the publishes' own 10s deadline (send) gives up on them.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("publishers still held up 5s after the source's stream ended (%d of 400 returned)", published.Load())
	}
}
