package mqtttest

import (
	"crypto/tls"
	"log/slog"
	"maps"
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

	// disconnect sends every client of this listener a DISCONNECT and
	// closes it; Close uses it instead of mochi's CloseFn (see Close).
	disconnect func(listenerID string)
}

var _ listeners.Listener = (*listener)(nil)

func newListener(id, addr string, tlsConfig *tls.Config, disconnect func(listenerID string)) *listener {
	return &listener{id: id, addr: addr, tls: tlsConfig, disconnect: disconnect, done: make(chan struct{}), conns: map[net.Conn]chan struct{}{}}
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
// otherwise keep the server's Close waiting for ever), and waits for Serve
// and every connection's goroutine to return. It is idempotent.
//
// It does not call mochi's CloseFn: that reads mochi's client list under
// a read lock it takes twice, and a client connecting or leaving in
// between (its write lock queued) deadlocks the broker's Close for ever
// (mochi-mqtt/server#488, open in v2.7.9); l.disconnect reads it once.
// And it waits for the connections itself because mochi's wait for them
// (a WaitGroup each connection joins once its goroutine runs) panics if a
// connection accepted just before Close joins while it waits.
func (l *listener) Close(listeners.CloseFn) {
	l.once.Do(func() {
		l.disconnect(l.id)
		l.mu.Lock()
		l.closed = true
		ln, serving := l.ln, l.serving
		conns := make(map[net.Conn]chan struct{}, len(l.conns))
		maps.Copy(conns, l.conns)
		l.mu.Unlock()
		if ln != nil {
			_ = ln.Close()
		}
		for c := range conns {
			_ = c.Close()
		}
		if serving {
			<-l.done
		}
		for _, served := range conns {
			<-served
		}
	})
}
