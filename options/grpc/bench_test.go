package grpc_test

import (
	"testing"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// BenchmarkSendDeliver measures 2 KB events from a source's Send, through
// the broker server, to an agent's Deliver, on loopback. The subscriber's
// queue holds the whole run: the benchmark measures throughput, not the
// overflow policy.
func BenchmarkSendDeliver(b *testing.B) {
	srv := grpctest.NewServerWithConfig(b, server.Config{QueueSize: 1 << 20})
	transporttest.BenchSendDeliver(b, func() options.Transport { return newTransport(b, srv.Config()) })
}
