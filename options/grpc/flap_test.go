package grpc_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/transporttest"
)

// flappingServer accepts every subscription and ends it right after its
// headers.
type flappingServer struct {
	protocol.UnimplementedCloudEventServiceServer
	subscribes atomic.Int64
}

func (f *flappingServer) Subscribe(_ *protocol.SubscriptionRequest, stream grpclib.ServerStreamingServer[protocol.CloudEvent]) error {
	f.subscribes.Add(1)
	if err := stream.SendHeader(metadata.Pairs(protocol.HeaderSubscriptionID, "1", protocol.HeaderDataTypes, "*")); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "going away")
}

// Every subscription the server accepts ends at once, so the backoff must
// keep growing across them rather than start again at its minimum: without
// that, the transport resubscribes (and its receiver resyncs) about every
// ReconnectMinBackoff.
func TestBackoffGrowsAcrossSubscriptionsThatDoNotLast(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpclib.NewServer()
	flapping := &flappingServer{}
	protocol.RegisterCloudEventServiceServer(gs, flapping)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	tr := newTransport(t, grpc.Config{
		ServerAddress:       lis.Addr().String(),
		ReconnectMinBackoff: options.Duration(100 * time.Millisecond), ReconnectMaxBackoff: options.Duration(time.Minute),
	})
	r := transporttest.NewRecorder()
	startTransport(t, tr, options.AgentSubscriptions("cluster1", nil), r)
	time.Sleep(3 * time.Second) // the span whose resubscriptions the test counts
	// Measured: 38 subscriptions when the backoff starts again each time,
	// 7 when it grows.
	n := r.Connects()
	t.Logf("%d subscriptions in 3s (%d Subscribe calls)", n, flapping.subscribes.Load())
	if n > 20 {
		t.Errorf("%d subscriptions in 3s: the backoff starts again at its minimum after each", n)
	}
}
