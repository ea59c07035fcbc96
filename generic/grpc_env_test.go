package generic_test

import (
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// The scenarios over the gRPC transport, each against its own embedded
// broker (options/grpc/grpctest) in plain routing mode, each transport
// through a proxy of its own, which can make its Subscribe streams deaf.
// Heartbeats come every 200ms, so the deafness scenario's probes (which
// wait for the next one) fit in its short bound.
func init() {
	registerEnv(envMaker{name: "grpc", make: func(t *testing.T, _ bool) *env {
		srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(200 * time.Millisecond)})
		var mu sync.Mutex
		proxies := map[options.Transport]*transporttest.Proxy{}
		return &env{
			transport: func(t *testing.T) options.Transport {
				p, err := transporttest.NewProtocolProxy(transporttest.GRPC, srv.Addr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				cfg := srv.Config()
				cfg.ServerAddress = p.Addr()
				tr, err := grpc.New(cfg, grpc.WithLogger(logr.Discard()))
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				proxies[tr] = p
				mu.Unlock()
				return tr
			},
			deafen: func(_ *testing.T, tr options.Transport) {
				mu.Lock()
				defer mu.Unlock()
				proxies[tr].Deafen()
			},
			restart: func(t *testing.T) {
				if err := srv.Restart(); err != nil {
					t.Fatal(err)
				}
			},
			sendRaw:          func(_ *testing.T, r options.Route, payload []byte) { srv.SendRaw(r, payload) },
			filtersDataTypes: true,
		}
	}})
}
