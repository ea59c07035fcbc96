package grpc_test

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTransport(t testing.TB, cfg grpc.Config, opts ...grpc.Option) *grpc.Transport {
	t.Helper()
	tr, err := grpc.New(cfg, append([]grpc.Option{grpc.WithLogger(logr.Discard())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestConformance(t *testing.T) {
	// Heartbeats five times a second: the probes of the streams wait for the next one.
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(200 * time.Millisecond)})
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) options.Transport { return newTransport(t, srv.Config()) },
		NewUnreachable: func(t *testing.T) options.Transport {
			cfg := srv.Config()
			cfg.ServerAddress = transporttest.ClosedAddr(t)
			return newTransport(t, cfg)
		},
		NewLimited: func(t *testing.T, limit int) options.Transport {
			cfg := srv.Config()
			cfg.MaxEventBytes = limit
			return newTransport(t, cfg)
		},
		Restart: func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		},
		SendRaw: func(t *testing.T, route options.Route, payload []byte) {
			if srv.SendRaw(route, payload) == 0 {
				t.Fatalf("no subscriber for %v", route)
			}
		},
	})
}
