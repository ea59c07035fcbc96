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
//
// NewCluster starts servers routed to each other, with JetStream
// clustered, for what only a cluster does: streams kept by several
// servers, and consumers whose leader changes.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
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
func Start(opts ...Option) (*Server, error) { return startServer(opts, nil) }

// startServer starts a server with opts, then with cluster's settings when
// it is one of a cluster.
func startServer(opts []Option, cluster func(*server.Options)) (*Server, error) {
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
	if cluster != nil {
		cluster(&s.opts)
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

// Cluster is servers routed to each other, JetStream clustered.
type Cluster struct {
	Servers []*Server
}

// NewCluster starts a cluster of n servers and closes it when t ends.
func NewCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c, err := StartCluster(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// StartCluster starts n servers on free ports of 127.0.0.1, each routed
// to the others, and returns once JetStream has a leader that every
// server follows.
func StartCluster(n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("natstest: a cluster of %d servers", n)
	}
	// A clustered JetStream server needs its routes when it starts, so
	// the route ports are picked first, by the OS.
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	for i := range n {
		s, err := startServer(opts, func(o *server.Options) {
			o.ServerName = fmt.Sprintf("natstest-%d", i)
			o.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: ports[i]}
			for j, p := range ports {
				if j != i {
					o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
				}
			}
		})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.ready() {
		if time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("natstest: the cluster of %d servers had no JetStream leader every server follows after 30s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, nil
}

// freePorts returns n ports of 127.0.0.1 the OS had free.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return ports, nil
}

// ready reports whether JetStream has a leader and every server is
// current with it.
func (c *Cluster) ready() bool {
	leaders := 0
	for _, s := range c.Servers {
		s.mu.Lock()
		srv := s.srv
		s.mu.Unlock()
		if srv == nil || !srv.JetStreamIsCurrent() {
			return false
		}
		if srv.JetStreamIsLeader() {
			leaders++
		}
	}
	return leaders == 1
}

// URL returns every server's nats:// URL, comma-separated, as clients of
// a cluster take them.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// Close shuts every server down and removes their stores.
func (c *Cluster) Close() {
	for _, s := range c.Servers {
		s.Close()
	}
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
