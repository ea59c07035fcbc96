package grpc_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy for tests. It forwards each connection to the first
// backend that accepts it (a load balancer in front of replicas), closes a
// connection that carried no byte either way for idle (a proxy with an idle
// timeout, as Istio's), and can freeze: stop forwarding while keeping
// connections open (a network that silently drops packets).
type proxy struct {
	lis      net.Listener
	idle     time.Duration // 0: no idle timeout
	backends []string      // guarded by mu

	frozen      atomic.Bool
	connections atomic.Int32 // connections accepted so far
	idleKills   atomic.Int32

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, idle time.Duration, backends ...string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, backends: backends, idle: idle, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.lis.Addr().String() }

// setBackends replaces the backends new connections go to (none: refuse).
func (p *proxy) setBackends(backends ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = backends
}

func (p *proxy) close() {
	p.lis.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.connections.Add(1)
		var out net.Conn
		p.mu.Lock()
		backends := p.backends
		p.mu.Unlock()
		for _, b := range backends {
			if out, err = net.DialTimeout("tcp", b, time.Second); err == nil {
				break
			}
		}
		if out == nil {
			in.Close()
			continue
		}
		p.track(in)
		p.track(out)
		p.wg.Add(1)
		go p.pipe(in, out)
	}
}

// pipe copies both ways until either side closes or the pair is idle too long.
func (p *proxy) pipe(a, b net.Conn) {
	defer p.wg.Done()
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			for p.frozen.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			_ = src.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					if p.idle > 0 && time.Since(time.Unix(0, last.Load())) > p.idle {
						p.idleKills.Add(1)
						break
					}
					continue
				}
				if err != io.EOF {
					break
				}
				break
			}
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
}
