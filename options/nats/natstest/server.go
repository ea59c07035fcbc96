// Package natstest runs a real NATS server with JetStream
// (github.com/nats-io/nats-server/v2) inside the process, on 127.0.0.1 and
// a port the OS picks, for tests, examples and demos that need one and must
// not depend on one being installed.
//
// In a test, NewServer closes the server when the test ends:
//
//	s := natstest.NewServer(t)
//	cfg := &nats.Config{URL: s.URL()}
//
// In a program, Start returns one to Close. Restart simulates an outage:
// the server goes down and comes back on the same address with the same
// JetStream store, so durable consumers resume.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Option configures a server.
type Option func(*server.Options)

// WithMaxPayload sets the largest message the server accepts (its
// max_payload, which it announces to clients). Default: 1 MiB.
func WithMaxPayload(n int32) Option { return func(o *server.Options) { o.MaxPayload = n } }

// Server is an embedded NATS server with JetStream.
type Server struct {
	mu   sync.Mutex
	opts server.Options
	srv  *server.Server
	dir  string
}

// NewServer starts a server and closes it when t ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a server on a free port of 127.0.0.1, its JetStream store
// in a new temporary directory that Close removes.
func Start(opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	}}
	for _, o := range opts {
		o(&s.opts)
	}
	if err := s.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// Come back on the same port after a restart.
	addr, ok := s.srv.Addr().(*net.TCPAddr)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("natstest: the server listens on %v, not TCP", s.srv.Addr())
	}
	s.opts.Port = addr.Port
	return s, nil
}

func (s *Server) start() error {
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return errors.New("natstest: the server did not become ready in 10s")
	}
	s.srv = srv
	return nil
}

// URL returns the server's nats:// URL.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port)
}

// Restart shuts the server down, dropping every connection, and starts it
// again on the same address with the same store.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return errors.New("natstest: Restart after Close")
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return s.start()
}

// Close shuts the server down and removes its store. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
	_ = os.RemoveAll(s.dir)
}
