package transporttest

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 that stands between clients and a real
// broker and breaks their connections on demand: Cut closes them all (the
// clients reconnect through it), Stall stops forwarding bytes without
// closing anything (a network that hangs), Refuse turns new connections
// away. In front of several replicas of a broker it is their load
// balancer: new connections take turns among them, skipping one that does
// not answer, and Kill makes one vanish as a crashed replica does. Made by
// NewProtocolProxy, it frames its connections and Deafen makes them deaf.
// It is goroutine-safe; Close stops it and waits for its goroutines.
type Proxy struct {
	targets  []string // guarded by mu; replaced, never changed in place
	l        net.Listener
	protocol Protocol // nil: bytes are copied as they come
	deafened atomic.Int64

	mu      sync.Mutex
	cond    *sync.Cond
	conns   map[net.Conn]string // each connection, both sides, to its target
	links   map[*link]struct{}  // each connection of a protocol, for Deafen
	dead    map[string]bool
	next    int
	stalled bool
	refuse  bool
	closed  bool
	cuts    int
	wg      sync.WaitGroup
}

// NewProxy listens on 127.0.0.1:0 and forwards to target (host:port), or
// to each of targets in turn.
func NewProxy(target string, more ...string) (*Proxy, error) {
	return newProxy(nil, target, more...)
}

func newProxy(protocol Protocol, target string, more ...string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		targets: append([]string{target}, more...), l: l, protocol: protocol,
		conns: make(map[net.Conn]string), links: make(map[*link]struct{}), dead: make(map[string]bool),
	}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect instead of the broker.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Cuts returns how many times Cut ran.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Cut closes every open connection, both sides.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	for c := range p.conns {
		_ = c.Close()
	}
}

// Add adds a target to those new connections take turns among: a replica
// started (or restarted, on a new address) behind the proxy.
func (p *Proxy) Add(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = append(slices.Clip(p.targets), target)
}

// Kill makes target vanish as a crashed replica does: its connections
// close at once, without a goodbye, and no new one goes to it.
func (p *Proxy) Kill(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead[target] = true
	for c, t := range p.conns {
		if t == target {
			_ = c.Close()
		}
	}
}

// Stall stops forwarding in both directions until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// Resume forwards again what Stall held up.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = false
	p.cond.Broadcast()
}

// Refuse makes the proxy close new connections at once (true) or accept
// them again (false).
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
}

// Close stops the proxy and its connections and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.stalled = false
	p.cond.Broadcast()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.l.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			_ = client.Close()
			continue
		}
		p.wg.Add(1)
		go p.connect(client) // a target that does not answer holds up no other connection
	}
}

// connect pipes client to the next target that answers.
func (p *Proxy) connect(client net.Conn) {
	defer p.wg.Done()
	server, target := p.dial()
	if server == nil {
		_ = client.Close()
		return
	}
	var l *link
	if p.protocol != nil {
		l = &link{client: client, broker: server, conn: p.protocol.NewConn()}
	}
	if !p.track(target, l, client, server) {
		return
	}
	p.wg.Add(2)
	if l != nil {
		go p.fromClient(l)
		go p.fromBroker(l)
		return
	}
	go p.pipe(client, server)
	go p.pipe(server, client)
}

// dialTimeout bounds a connection attempt to one target.
const dialTimeout = 2 * time.Second

// dial connects to the next target that is alive and answers.
func (p *Proxy) dial() (net.Conn, string) {
	p.mu.Lock()
	targets, first := p.targets, p.next
	p.next = (p.next + 1) % len(p.targets)
	p.mu.Unlock()
	for i := range targets {
		target := targets[(first+i)%len(targets)]
		p.mu.Lock()
		dead := p.dead[target]
		p.mu.Unlock()
		if dead {
			continue
		}
		if c, err := net.DialTimeout("tcp", target, dialTimeout); err == nil {
			return c, target
		}
	}
	return nil, ""
}

// track records conns (and l, the framing of a protocol's connection, if
// not nil) for Cut, Kill, Deafen and Close, or closes them if the proxy or
// target is gone.
func (p *Proxy) track(target string, l *link, conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.dead[target] {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = target
	}
	if l != nil {
		p.links[l] = struct{}{}
	}
	return true
}

// untrack closes conns and forgets them and l (nil for a raw connection).
func (p *Proxy) untrack(l *link, conns ...net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
	delete(p.links, l)
}

// hold waits while the proxy is stalled.
func (p *Proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.stalled && !p.closed {
		p.cond.Wait()
	}
}

// pipe copies from src to dst until either side closes, pausing while the
// proxy is stalled; then it closes both.
func (p *Proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer p.untrack(nil, src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.hold()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a side closed
		}
	}
}
