package grpc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// wire records the largest message a client sent and received: its size
// before compression and on the wire.
type wire struct {
	mu             sync.Mutex
	sent, received stats.OutPayload // Length and WireLength only
}

func (w *wire) HandleRPC(_ context.Context, s stats.RPCStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch p := s.(type) {
	case *stats.OutPayload:
		if p.Length > w.sent.Length {
			w.sent.Length, w.sent.WireLength = p.Length, p.WireLength
		}
	case *stats.InPayload:
		if p.Length > w.received.Length {
			w.received.Length, w.received.WireLength = p.Length, p.WireLength
		}
	}
}

func (w *wire) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (w *wire) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w *wire) HandleConn(context.Context, stats.ConnStats)                       {}

// compressed reports whether the largest message sent and received went
// compressed: on the wire in less than half its size (its data is one
// letter repeated).
func (w *wire) compressed() (sent, received bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent.WireLength < w.sent.Length/2, w.received.WireLength < w.received.Length/2
}

// A client compresses what it sends when its config says so, and what it
// is streamed comes compressed when either it or the server says so; a
// client and a server that say nothing exchange events as they are.
func TestCompression(t *testing.T) {
	for _, tc := range []struct{ client, server string }{
		{"", ""}, {protocol.Gzip, ""}, {"", protocol.Gzip}, {protocol.Gzip, protocol.Gzip},
	} {
		t.Run(fmt.Sprintf("client=%q,server=%q", tc.client, tc.server), func(t *testing.T) {
			srv := grpctest.NewServerWithConfig(t, server.Config{Compression: tc.server})
			cfg := srv.Config()
			cfg.Compression = tc.client
			hubWire, agentWire := &wire{}, &wire{}
			hub := newTransport(t, cfg, grpc.WithDialOptions(grpclib.WithStatsHandler(hubWire)))
			agent := newTransport(t, cfg, grpc.WithDialOptions(grpclib.WithStatsHandler(agentWire)))
			hubGot, agentGot := transporttest.Start(t, hub, options.SourceSubscriptions("hub", nil)), transporttest.Start(t, agent, options.AgentSubscriptions("c1", nil))

			spec := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
			send(t, hub, spec, transporttest.OnRoute(large("spec", "spec.create_request"), spec))
			agentGot.Wait(t, "the spec", 10*time.Second, func() bool { return len(agentGot.Deliveries()) == 1 })
			status := options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "c1"}
			send(t, agent, status, transporttest.OnRoute(large("status", "status.update_request"), status))
			hubGot.Wait(t, "the status", 10*time.Second, func() bool { return len(hubGot.Deliveries()) == 1 })
			if got, want := string(agentGot.Deliveries()[0].Event.Data()), string(large("", "").Data()); got != want {
				t.Errorf("the agent got %d bytes of data, want %d", len(got), len(want))
			}

			for side, w := range map[string]*wire{"hub": hubWire, "agent": agentWire} {
				sent, received := w.compressed()
				if want := tc.client != ""; sent != want {
					t.Errorf("the %s sent compressed: %v, want %v (%+v)", side, sent, want, w.sent)
				}
				if want := tc.client != "" || tc.server != ""; received != want {
					t.Errorf("the %s was streamed compressed: %v, want %v (%+v)", side, received, want, w.received)
				}
			}
		})
	}
}

func TestCompressionConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "grpc.yaml")
	if err := os.WriteFile(file, []byte("url: 127.0.0.1:8090\ncompression: gzip\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := grpc.LoadConfig(file); err != nil || c.Compression != protocol.Gzip {
		t.Errorf("client file: %+v, %v", c, err)
	}
	if err := os.WriteFile(file, []byte("server_bind_port: 8090\ncompression: gzip\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := server.LoadConfig(file); err != nil || c.Compression != protocol.Gzip {
		t.Errorf("server file: %+v, %v", c, err)
	}
	if err := (grpc.Config{ServerAddress: "127.0.0.1:1", Compression: "zstd"}).Validate(); err == nil || !strings.Contains(err.Error(), `compression "zstd": want "gzip" or "" (none)`) {
		t.Errorf("client: %v", err)
	}
	if err := (server.Config{Compression: "snappy"}).Validate(); err == nil || !strings.Contains(err.Error(), `compression "snappy": want "gzip" or "" (none)`) {
		t.Errorf("server: %v", err)
	}
}

// large returns an event with 8 KB of data that compresses well.
func large(id, typ string) *cloudevents.Event {
	evt := transporttest.NewEvent(id, typ)
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"manifest": strings.Repeat("a", 8<<10)})
	return evt
}

func send(t *testing.T, tr *grpc.Transport, route options.Route, evt *cloudevents.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Send(ctx, route, evt); err != nil {
		t.Fatal(err)
	}
}
