package mqtttest

import (
	"crypto/tls"
	"log/slog"
	"net"
	"sync"

	"github.com/mochi-mqtt/server/v2/listeners"
)

// listener is a TCP (or TLS) listener for mochi. mochi's own listeners.TCP
// shares one error variable between its accept loop and every connection's
// goroutine, a data race whenever a connection fails, as a TLS handshake
// with the wrong certificate does. This one keeps each error to its own
// connection, knows which connections mochi still serves (see
// takeoverHook), and Close closes them all and waits for the accept loop.
type listener struct {
	id   string
	addr string
	tls  *tls.Config

	mu      sync.Mutex
	ln      net.Listener
	log     *slog.Logger
	serving bool                       // Serve has started; Close waits for done
	closed  bool                       // Close has run; a late Serve returns at once
	done    chan struct{}              // closed when a started Serve returns
	conns   map[net.Conn]chan struct{} // served now; each closed when mochi is done with it
	once    sync.Once
}

var _ listeners.Listener = (*listener)(nil)

func newListener(id, addr string, tlsConfig *tls.Config) *listener {
	return &listener{id: id, addr: addr, tls: tlsConfig, done: make(chan struct{}), conns: map[net.Conn]chan struct{}{}}
}

func (l *listener) Init(log *slog.Logger) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return err
	}
	if l.tls != nil {
		ln = tls.NewListener(ln, l.tls)
	}
	l.mu.Lock()
	l.ln, l.log = ln, log
	l.mu.Unlock()
	return nil
}

// Serve accepts connections until Close. mochi runs it on a goroutine of
// its own; each connection is served on one more, until it ends.
func (l *listener) Serve(establish listeners.EstablishFn) {
	l.mu.Lock()
	if l.closed || l.ln == nil {
		l.mu.Unlock()
		return
	}
	l.serving = true
	ln, log := l.ln, l.log
	l.mu.Unlock()
	defer close(l.done)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		served := make(chan struct{})
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = conn.Close()
			return
		}
		l.conns[conn] = served
		l.mu.Unlock()
		go func() {
			defer func() {
				l.mu.Lock()
				delete(l.conns, conn)
				l.mu.Unlock()
				close(served)
			}()
			if err := establish(l.id, conn); err != nil {
				log.Debug("connection ended", "listener", l.id, "error", err)
			}
		}()
	}
}

// served returns a channel closed once mochi is done with conn (its client
// goroutine has returned), or nil if it already is or conn is not ours.
func (l *listener) served(conn net.Conn) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.conns[conn]; ok {
		return ch
	}
	return nil
}

func (l *listener) ID() string       { return l.id }
func (l *listener) Protocol() string { return "tcp" }

// Address returns the address the listener is bound to, with the port the
// OS chose once Init has run.
func (l *listener) Address() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.addr
}

// Close stops accepting, closes the listener's clients and every
// connection mochi still serves (a client mochi lost track of would
// otherwise keep the server's Close waiting for ever) and, if Serve has
// started, waits for it to return. It is idempotent.
func (l *listener) Close(closeClients listeners.CloseFn) {
	l.once.Do(func() {
		closeClients(l.id)
		l.mu.Lock()
		l.closed = true
		ln, serving := l.ln, l.serving
		conns := make([]net.Conn, 0, len(l.conns))
		for c := range l.conns {
			conns = append(conns, c)
		}
		l.mu.Unlock()
		if ln != nil {
			_ = ln.Close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
		if serving {
			<-l.done
		}
	})
}
