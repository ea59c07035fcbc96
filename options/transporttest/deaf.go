package transporttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
)

// Protocol frames a protocol's connections, so that a Proxy can make them
// deaf (see Proxy.Deafen).
type Protocol interface {
	// NewConn returns the framing of one new connection.
	NewConn() ProtocolConn
}

// ProtocolConn frames one connection, both ways. A Proxy calls FromClient
// on one goroutine and FromBroker on another, from the first byte of the
// connection on.
type ProtocolConn interface {
	// FromClient reads what the client sends next from r (a whole frame,
	// or any chunk where the protocol needs no framing that way) and
	// returns the bytes to pass to the broker.
	FromClient(r *bufio.Reader) ([]byte, error)
	// FromBroker reads the broker's next frame from r and returns what to
	// pass to the client and what to send the broker in answer (nil for
	// nothing). With deaf true it drops what the broker delivers on a
	// subscription and passes the rest.
	FromBroker(r *bufio.Reader, deaf bool) (toClient, toBroker []byte, err error)
}

// The protocols a Proxy can deafen.
var (
	MQTT  Protocol = mqttProtocol{}  // MQTT 3.1.1 and 5: drops PUBLISH packets to the client
	NATS  Protocol = natsProtocol{}  // drops MSG and HMSG to the client but replies to its requests
	GRPC  Protocol = grpcProtocol{}  // HTTP/2 without TLS: drops DATA frames on the streams of calls to a Subscribe method
	Kafka Protocol = kafkaProtocol{} // empties the records of Fetch responses, keeping their high watermarks
)

// NewProtocolProxy is NewProxy for connections of protocol p, which Deafen can make deaf.
//
// The proxy reads the frames of p, so the connections must be in the
// clear (no TLS). A side that sends what does not parse as p loses its
// connection, both sides of it, as a middlebox that cannot make sense of
// a stream would drop it.
func NewProtocolProxy(p Protocol, target string, more ...string) (*Proxy, error) {
	if p == nil {
		return nil, errors.New("transporttest: a protocol proxy needs a protocol")
	}
	return newProxy(p, target, more...)
}

// Deafen makes the connections open now deaf from now on (for gRPC: the
// Subscribe streams open now); connections (streams) opened later are not.
// It panics on a proxy not made by NewProtocolProxy (a test's mistake).
//
// A frame counts as arriving when its first byte reaches the proxy: one
// that starts to arrive after Deafen returns is treated as deaf, even if
// the proxy was already waiting for it.
func (p *Proxy) Deafen() {
	if p.protocol == nil {
		panic("transporttest: Deafen on a proxy made by NewProxy, which does not frame its connections")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		if d, ok := l.conn.(deafener); ok {
			d.deafen()
		}
		l.deaf.Store(true)
	}
}

// Deafened returns how many frames the proxy has dropped as deaf. For
// Kafka it counts the Fetch responses it emptied of records: a consumer
// fetches what it never gets again and again, so the count keeps growing
// while the connection is deaf and the consumer behind the high watermark.
func (p *Proxy) Deafened() int { return int(p.deafened.Load()) }

// A deafener is a ProtocolConn that is deaf per stream rather than per
// connection: Deafen tells it when it is called, so that the streams open
// at that moment, and no stream opened after it, go deaf.
type deafener interface{ deafen() }

// A dropReporter is a ProtocolConn that says whether its last FromBroker
// dropped what the broker delivered, where what it returned does not tell:
// Kafka passes a Fetch response emptied of its records, since the client
// waits for an answer to each request. Without one, a deaf FromBroker that
// passes nothing to the client counts as a drop.
type dropReporter interface{ droppedLast() bool }

// link is one connection of a protocol proxy: its two sides, its framing,
// and whether it is deaf.
type link struct {
	client, broker net.Conn
	conn           ProtocolConn
	deaf           atomic.Bool

	wmu sync.Mutex // serializes writes to broker: both loops write there
}

func (l *link) toBroker(b []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, err := l.broker.Write(b)
	return err
}

// fromClient passes what the client sends through l's framing to the
// broker, pausing while the proxy is stalled, until either side closes or
// the framing fails; then it closes both.
func (p *Proxy) fromClient(l *link) {
	defer p.wg.Done()
	defer p.untrack(l, l.client, l.broker)
	r := bufio.NewReaderSize(l.client, 32<<10)
	for {
		b, err := l.conn.FromClient(r)
		if err != nil {
			return
		}
		if len(b) == 0 {
			continue
		}
		p.hold()
		if l.toBroker(b) != nil {
			return
		}
	}
}

// fromBroker passes what the broker sends through l's framing to the
// client, and its answers back to the broker, as fromClient does the other
// way.
func (p *Proxy) fromBroker(l *link) {
	defer p.wg.Done()
	defer p.untrack(l, l.client, l.broker)
	r := bufio.NewReaderSize(l.broker, 32<<10)
	reporter, _ := l.conn.(dropReporter)
	for {
		// Deafness is read once the next frame begins to arrive, not
		// before this loop waits for it: a test that calls Deafen and then
		// publishes must not have its first message pass.
		if _, err := r.Peek(1); err != nil {
			return
		}
		deaf := l.deaf.Load()
		toClient, toBroker, err := l.conn.FromBroker(r, deaf)
		if err != nil {
			return
		}
		if deaf && (reporter != nil && reporter.droppedLast() || reporter == nil && len(toClient) == 0) {
			p.deafened.Add(1)
		}
		p.hold()
		if len(toBroker) > 0 && l.toBroker(toBroker) != nil {
			return
		}
		if len(toClient) > 0 {
			if _, err := l.client.Write(toClient); err != nil {
				return
			}
		}
	}
}

// chunk returns what r holds once it holds anything, for a direction of a
// protocol that needs no framing.
func chunk(r *bufio.Reader) ([]byte, error) {
	if _, err := r.Peek(1); err != nil {
		return nil, err
	}
	b := make([]byte, r.Buffered())
	_, err := io.ReadFull(r, b)
	return b, err
}

// eagerRead is how many bytes of a frame readFrame allocates before they
// arrive.
const eagerRead = 64 << 10

// readFrame reads the n bytes of a frame's body from r and returns them
// after head, the frame's header. Beyond eagerRead it grows its buffer as
// the bytes come rather than trusting n: a length that a malformed frame
// gets wrong costs no more memory than the bytes really sent.
func readFrame(r io.Reader, head []byte, n int) ([]byte, error) {
	if n <= eagerRead {
		b := make([]byte, len(head)+n)
		copy(b, head)
		_, err := io.ReadFull(r, b[len(head):])
		return b, midFrame(err)
	}
	buf := bytes.NewBuffer(make([]byte, 0, len(head)+eagerRead))
	buf.Write(head)
	_, err := io.CopyN(buf, r, int64(n))
	return buf.Bytes(), midFrame(err)
}

// midFrame turns the end of a stream inside a frame into
// io.ErrUnexpectedEOF: only between frames is io.EOF a clean end.
func midFrame(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Fronted puts protocol proxies in front of a broker's listeners, and has
// the broker advertise them as its own addresses: clients that connect
// where the broker's metadata sends them (Kafka's) connect through a proxy
// too. Give Listen to the broker (kfake.ListenFn); Close closes the
// proxies. It is goroutine-safe.
type Fronted struct {
	protocol Protocol
	mu       sync.Mutex
	proxies  []*Proxy
}

// NewFronted returns a Fronted of protocol p.
func NewFronted(p Protocol) *Fronted { return &Fronted{protocol: p} }

// Listen listens on addr, puts a proxy in front, and returns the listener
// with the proxy's address as its own.
func (f *Fronted) Listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	p, err := NewProtocolProxy(f.protocol, l.Addr().String())
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	front, err := net.ResolveTCPAddr("tcp", p.Addr())
	if err != nil {
		_ = p.Close()
		_ = l.Close()
		return nil, err
	}
	f.mu.Lock()
	f.proxies = append(f.proxies, p)
	f.mu.Unlock()
	return fronted{Listener: l, addr: front}, nil
}

// Proxies returns the proxies made so far, one per listener.
func (f *Fronted) Proxies() []*Proxy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.proxies)
}

// Deafen deafens every proxy (see Proxy.Deafen).
func (f *Fronted) Deafen() {
	for _, p := range f.Proxies() {
		p.Deafen()
	}
}

// Close closes every proxy.
func (f *Fronted) Close() error {
	var errs []error
	for _, p := range f.Proxies() {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// fronted is a listener that gives its clients the address of the proxy
// in front of it.
type fronted struct {
	net.Listener
	addr net.Addr
}

func (l fronted) Addr() net.Addr { return l.addr }
