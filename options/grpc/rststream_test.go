package grpc_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// rstStreamMessage is how grpc-go reports a stream reset by its peer or a
// proxy in between (an HTTP/2 RST_STREAM frame).
const rstStreamMessage = "stream terminated by RST_STREAM with error code: INTERNAL_ERROR"

// resetter makes a real broker abort calls as a proxy resetting streams
// would: open Subscribe streams end with Internal on Reset, and while
// failPublish is set every Publish does.
type resetter struct {
	failPublish atomic.Pointer[error]

	mu     sync.Mutex
	reset  chan struct{} // closed by Reset; replaced for the streams after
	resets atomic.Int32
}

func newResetter() *resetter { return &resetter{reset: make(chan struct{})} }

// Reset ends every Subscribe stream open now with an RST_STREAM error.
func (r *resetter) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.reset)
	r.reset = make(chan struct{})
}

func (r *resetter) options() server.Option {
	return server.WithServerOptions(
		grpclib.ChainStreamInterceptor(r.stream),
		grpclib.ChainUnaryInterceptor(r.unary),
	)
}

func (r *resetter) unary(ctx context.Context, req any, _ *grpclib.UnaryServerInfo, handler grpclib.UnaryHandler) (any, error) {
	if err := r.failPublish.Load(); err != nil {
		return nil, *err
	}
	return handler(ctx, req)
}

// stream runs the handler with a context that Reset cancels, and then
// reports the reset instead of the handler's answer.
func (r *resetter) stream(srv any, ss grpclib.ServerStream, _ *grpclib.StreamServerInfo, handler grpclib.StreamHandler) error {
	r.mu.Lock()
	reset := r.reset
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	var wasReset atomic.Bool
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned by this call: it ends with the handler
		defer wg.Done()
		select {
		case <-reset:
			wasReset.Store(true)
			cancel()
		case <-done:
		}
	}()
	err := handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	close(done)
	wg.Wait()
	if wasReset.Load() {
		r.resets.Add(1)
		return status.Error(codes.Internal, rstStreamMessage)
	}
	return err
}

type ctxStream struct {
	grpclib.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// A Subscribe stream reset mid-way (Internal, RST_STREAM) is resubscribed,
// the receiver is told (so the client resyncs), and events flow again.
func TestSubscribeStreamResetIsResubscribed(t *testing.T) {
	rst := newResetter()
	srv := grpctest.NewServer(t, rst.options())
	agent := newTransport(t, srv.Config())
	r := transporttest.NewRecorder()
	startTransport(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}), r)
	hub := newTransport(t, srv.Config())
	startTransport(t, hub, nil, transporttest.NewRecorder())
	specTo(t, hub, "cluster1", "before-reset")
	r.Wait(t, "the event before the reset", 10*time.Second, func() bool { return delivered(r, "before-reset") })

	rst.Reset()
	r.Wait(t, "a resubscription after the reset", 10*time.Second, func() bool { return r.Connects() >= 2 })
	if n := rst.resets.Load(); n != 1 {
		t.Fatalf("%d streams were reset, want 1", n)
	}
	if n := r.MalformedCount(); n != 0 {
		t.Errorf("the reset was reported as %d malformed events", n)
	}
	specTo(t, hub, "cluster1", "after-reset")
	r.Wait(t, "the event after the reset", 10*time.Second, func() bool { return delivered(r, "after-reset") })
}

// A Publish reset on the way (Internal, RST_STREAM) is a lost connection,
// which the generic clients heal by resync: ErrNotConnected. Another
// Internal error is not.
func TestPublishResetIsNotConnected(t *testing.T) {
	rst := newResetter()
	srv := grpctest.NewServer(t, rst.options())
	hub := newTransport(t, srv.Config())
	startTransport(t, hub, nil, transporttest.NewRecorder())
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}
	sendOne := func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		evt := transporttest.NewEvent(id, "spec.create_request")
		return hub.Send(ctx, route, transporttest.OnRoute(evt, route))
	}

	reset := status.Error(codes.Internal, rstStreamMessage)
	rst.failPublish.Store(&reset)
	err := sendOne("reset")
	if !errors.Is(err, options.ErrNotConnected) {
		t.Errorf("Send reset by RST_STREAM: %v, want ErrNotConnected", err)
	}
	if status.Code(err) != codes.Internal {
		t.Errorf("Send reset by RST_STREAM: %v; the gRPC error should stay in the chain", err)
	}

	other := status.Error(codes.Internal, "grpc: error while marshaling")
	rst.failPublish.Store(&other)
	if err := sendOne("internal"); err == nil || errors.Is(err, options.ErrNotConnected) {
		t.Errorf("Send failed with another Internal error: %v, want an error other than ErrNotConnected", err)
	}

	rst.failPublish.Store(nil)
	if err := sendOne("ok"); err != nil {
		t.Errorf("Send after the resets: %v", err)
	}
}
