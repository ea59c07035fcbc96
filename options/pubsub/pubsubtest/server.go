// Package pubsubtest runs a Pub/Sub server inside the process (the Pub/Sub
// client library's own fake, pstest), on 127.0.0.1 and a port the OS
// picks, for tests, examples and demos that must not depend on Google's
// service or an emulator. It keeps topics, subscriptions and messages in
// memory and honours subscription filters.
//
// In a test, NewServer closes the server when the test ends:
//
//	s := pubsubtest.NewServer(t)
//	cfg := s.Config() // a pubsub.Config that reaches it and provisions what it needs
//
// In a program, Start returns one to Close. DropConnections breaks every
// client connection, as a network outage does; the server keeps what it
// holds, as Google's service does, and clients connect again.
package pubsubtest

import (
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/transporttest"
)

// ProjectID is the project of Config.
const ProjectID = "workwire-test"

// Server is an in-process Pub/Sub server behind a proxy that can break
// its clients' connections.
type Server struct {
	fake  *pstest.Server
	proxy *transporttest.Proxy
}

// NewServer starts a server and closes it when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a server on a free port of 127.0.0.1.
func Start() (*Server, error) {
	fake := pstest.NewServerWithAddress("127.0.0.1:0")
	proxy, err := transporttest.NewProxy(fake.Addr)
	if err != nil {
		_ = fake.Close()
		return nil, err
	}
	return &Server{fake: fake, proxy: proxy}, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.proxy.Addr() }

// Config returns a config of the server: project ProjectID, plain text,
// topics and subscriptions made as clients need them, and Streams pull
// streams per subscription.
func (s *Server) Config() pubsub.Config {
	return pubsub.Config{ProjectID: ProjectID, Endpoint: s.Addr(), DisableTLS: true, Provision: true,
		ReceiveSettings: &pubsub.ReceiveSettings{NumGoroutines: Streams}}
}

// Streams is how many pull streams Config opens per subscription. The
// fake hands a stream at most one message every 10 ms, where Google's
// service sends many at once: one stream, the client's default, would
// hold a subscription to about 100 events a second.
const Streams = 16

// DropConnections closes every client connection; clients connect again.
func (s *Server) DropConnections() { s.proxy.Cut() }

// Close stops the server.
func (s *Server) Close() {
	_ = s.proxy.Close()
	_ = s.fake.Close()
}
