// Package grpctest runs a real workwire gRPC broker (options/grpc/server)
// inside a test, in the spirit of net/http/httptest: NewServer listens on
// 127.0.0.1 at a free port and stops when the test ends. Stop, Start and
// Restart simulate a broker going away on the same address (clients
// resubscribe and resync); SendRaw feeds subscribers malformed events.
//
//	srv := grpctest.NewServer(t)
//	tr, err := grpc.New(srv.Config())
package grpctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// Server is a broker serving on a fixed loopback address. Its methods are
// goroutine-safe.
type Server struct {
	tb   testing.TB
	srv  *server.Server
	addr string

	mu     sync.Mutex
	cancel context.CancelFunc // nil while stopped
	done   chan error
}

// NewServer starts a broker with the default configuration (no TLS, no
// authentication) and opts, and stops it when tb's test ends. It fails tb
// if the broker cannot start.
func NewServer(tb testing.TB, opts ...server.Option) *Server {
	tb.Helper()
	return NewServerWithConfig(tb, server.Config{}, opts...)
}

// NewServerWithConfig is NewServer with a server configuration, for TLS,
// heartbeats or queue sizes. Without a logger option the broker logs nothing.
func NewServerWithConfig(tb testing.TB, cfg server.Config, opts ...server.Option) *Server {
	tb.Helper()
	srv, err := server.New(cfg, append([]server.Option{server.WithLogger(logr.Discard())}, opts...)...)
	if err != nil {
		tb.Fatalf("grpctest: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("grpctest: listen: %v", err)
	}
	s := &Server{tb: tb, srv: srv, addr: lis.Addr().String()}
	s.serve(lis)
	tb.Cleanup(s.Stop)
	return s
}

// Addr returns the broker's address, host:port.
func (s *Server) Addr() string { return s.addr }

// Server returns the broker, for Route and Subscribers.
func (s *Server) Server() *server.Server { return s.srv }

// Config returns a transport configuration for the broker, with reconnect
// backoffs short enough for tests.
func (s *Server) Config() grpc.Config {
	return grpc.Config{
		ServerAddress:       s.addr,
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
}

func (s *Server) serve(lis net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(ctx, lis) }()
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
}

// Stop stops the broker: every stream and connection ends, and calls fail
// until Start. It waits until the broker has stopped. Stopping a stopped
// broker does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if err := <-done; err != nil {
		s.tb.Errorf("grpctest: serve: %v", err)
	}
}

// Start serves again on the same address after Stop. Starting a running
// broker does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	running := s.cancel != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	var lis net.Listener
	var err error
	for range 100 { // the port may be in use for a moment after Stop
		if lis, err = net.Listen("tcp", s.addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("grpctest: listen on %s again: %w", s.addr, err)
	}
	s.serve(lis)
	return nil
}

// Restart stops the broker and serves again on the same address, as a
// broker restart does: every subscription ends, and what is published to
// nobody meanwhile is lost.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

// SendRaw delivers a message that is not a valid CloudEvent (payload as
// its data, no attributes) to the subscribers route reaches, as a broken
// peer might. It returns how many it reached.
func (s *Server) SendRaw(route options.Route, payload []byte) int {
	return s.srv.Route(route, &protocol.CloudEvent{Data: &protocol.CloudEvent_BinaryData{BinaryData: payload}})
}
