package grpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

const dataType = "io.example.things.v1.things"

func startTransport(t *testing.T, tr options.Transport, subs []options.Subscription, r options.Receiver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Start(ctx, subs, r); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := tr.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func specTo(t *testing.T, tr options.Transport, cluster, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evt := transporttest.NewEvent(id, "spec.create_request")
	evt.SetType(dataType + ".spec.create_request")
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: cluster}
	if err := tr.Send(ctx, route, transporttest.OnRoute(evt, route)); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func delivered(r *transporttest.Recorder, id string) bool {
	for _, d := range r.Deliveries() {
		if d.Event.ID() == id {
			return true
		}
	}
	return false
}

// A proxy that closes connections idle for 400ms keeps a stream whose
// server sends heartbeats every 100ms: no reconnect, events still flow.
func TestHeartbeatsKeepAStreamThroughAnIdleTimeoutProxy(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(100 * time.Millisecond)})
	p := newProxy(t, 400*time.Millisecond, srv.Addr())
	cfg := srv.Config()
	cfg.ServerAddress = p.addr()
	agent := newTransport(t, cfg)
	r := transporttest.NewRecorder()
	startTransport(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}), r)
	hub := newTransport(t, srv.Config())
	startTransport(t, hub, nil, transporttest.NewRecorder())

	deadline := time.Now().Add(2 * time.Second) // five idle timeouts
	for time.Now().Before(deadline) {
		if n := r.Connects(); n != 1 {
			t.Fatalf("the agent connected %d times: the stream did not survive", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	specTo(t, hub, "cluster1", "after-idle")
	r.Wait(t, "the event after the idle period", 10*time.Second, func() bool { return delivered(r, "after-idle") })
	if n := p.idleKills.Load(); n != 0 {
		t.Errorf("the proxy closed %d idle connections", n)
	}
	if n := r.Connects(); n != 1 {
		t.Errorf("the agent connected %d times, want 1", n)
	}
}

// Without heartbeats the same proxy kills the idle stream; the client
// notices, resubscribes and tells its receiver (which resyncs).
func TestWithoutHeartbeatsAnIdleTimeoutProxyForcesAReconnect(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(-1)})
	p := newProxy(t, 400*time.Millisecond, srv.Addr())
	cfg := srv.Config()
	cfg.ServerAddress = p.addr()
	agent := newTransport(t, cfg)
	r := transporttest.NewRecorder()
	startTransport(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}), r)
	r.Wait(t, "a reconnect after the proxy's idle timeout", 10*time.Second, func() bool { return r.Connects() >= 2 })
	if p.idleKills.Load() == 0 {
		t.Error("the proxy killed no idle connection")
	}
}

// A connection that silently stops carrying data (no FIN, no RST) is found
// dead by the missing heartbeats, long before TCP or keep-alive would, by
// the transport's own watch (HeartbeatTimeout, OCM's
// serverHealthinessTimeout); without it, by the clients' delivery check.
func TestMissingHeartbeatsRevealADeadStream(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(50 * time.Millisecond)})
	p := newProxy(t, 0, srv.Addr())
	cfg := srv.Config()
	cfg.ServerAddress = p.addr()
	cfg.DialTimeout = options.Duration(time.Second)
	cfg.HeartbeatTimeout = options.Duration(150 * time.Millisecond)
	agent := newTransport(t, cfg)
	r := transporttest.NewRecorder()
	startTransport(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}), r)
	p.frozen.Store(true)
	time.Sleep(500 * time.Millisecond) // ten heartbeat intervals of silence: the condition under test
	p.frozen.Store(false)
	r.Wait(t, "a resubscription after the silence", 10*time.Second, func() bool { return r.Connects() >= 2 })

	hub := newTransport(t, srv.Config())
	startTransport(t, hub, nil, transporttest.NewRecorder())
	specTo(t, hub, "cluster1", "after-freeze")
	r.Wait(t, "the event after the freeze", 10*time.Second, func() bool { return delivered(r, "after-freeze") })
}
