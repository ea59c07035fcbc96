package generic_test

import (
	"testing"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
)

// The scenarios over the gRPC transport, each against its own embedded
// broker (options/grpc/grpctest) in plain routing mode.
func init() {
	registerEnv(envMaker{name: "grpc", make: func(t *testing.T, _ bool) *env {
		srv := grpctest.NewServer(t)
		return &env{
			transport: func(t *testing.T) options.Transport {
				tr, err := grpc.New(srv.Config(), grpc.WithLogger(logr.Discard()))
				if err != nil {
					t.Fatal(err)
				}
				return tr
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
