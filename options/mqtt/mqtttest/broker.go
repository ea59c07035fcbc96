// Package mqtttest runs a real MQTT v5 broker (mochi-mqtt) inside the
// process, on 127.0.0.1 and a port the OS picks, in the spirit of
// net/http/httptest: for tests, examples and demos that need a broker and
// must not depend on one being installed.
//
// In a test, NewBroker closes the broker when the test ends:
//
//	b := mqtttest.NewBroker(t)
//	cfg := &mqtt.Config{BrokerHost: b.Addr()}
//
// In a program (a main, a demo), Start returns one to Close:
//
//	b, err := mqtttest.Start()
//	if err != nil {
//		return err
//	}
//	defer b.Close()
//
// Stop and Restart simulate a broker outage on the same address.
//
// It differs from a plain mochi-mqtt server where our clients would trip
// on it: a client that reconnects with its client ID while the broker
// still cleans up the old connection is never left without its messages,
// a subscriber may fall far behind before messages are dropped (see
// Dropped), and Stop never hangs on clients that come and go meanwhile.
package mqtttest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Option configures a Broker.
type Option func(*config)

type config struct {
	addr          string
	tls           *tls.Config
	maxPacketSize uint32
	silentMax     bool // enforce maxPacketSize without announcing it
	logger        *slog.Logger
}

// WithAddress listens on addr instead of 127.0.0.1:0.
func WithAddress(addr string) Option { return func(c *config) { c.addr = addr } }

// WithTLS serves MQTT over TLS with c (set ClientAuth for mutual TLS).
func WithTLS(c *tls.Config) Option { return func(c2 *config) { c2.tls = c } }

// WithMaxPacketSize makes the broker announce a maximum packet size in
// its CONNACK and enforce it, as cloud brokers do (Azure Event Grid's is
// 512 KiB). Default: none.
func WithMaxPacketSize(n uint32) Option {
	return func(c *config) { c.maxPacketSize, c.silentMax = n, false }
}

// WithUnannouncedMaxPacketSize makes the broker enforce a maximum packet
// size without announcing it: it drops the connection of a client that
// sends a larger packet, as brokers configured with a limit their clients
// are not told of do. Default: none.
func WithUnannouncedMaxPacketSize(n uint32) Option {
	return func(c *config) { c.maxPacketSize, c.silentMax = n, true }
}

// WithLogger sends the broker's logs to l. Default: discarded.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Broker is an embedded MQTT broker. It is goroutine-safe.
type Broker struct {
	cfg     config
	mu      sync.Mutex
	srv     *mochi.Server
	addr    string
	dropped int64 // by servers stopped before srv
}

// NewBroker starts a broker and closes it when t ends. It fails t if the
// broker cannot start.
func NewBroker(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	b, err := Start(opts...)
	if err != nil {
		t.Fatalf("mqtttest: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Start starts a broker. Close it when done.
func Start(opts ...Option) (*Broker, error) {
	cfg := config{addr: "127.0.0.1:0", logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	b := &Broker{cfg: cfg}
	if err := b.serve(cfg.addr); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Broker) serve(addr string) error {
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = b.cfg.maxPacketSize
	// mochi copies a PUBLISH's user properties — every CloudEvents
	// attribute, here — into its PUBACK by default; the publisher only
	// pays for parsing them.
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	// mochi drops a QoS 1 message for a subscriber that already has
	// MaximumInflight unacknowledged, or MaximumClientWritesPending unwritten,
	// messages (8,192 each by default), and allocates the pending-writes
	// queue up front: 8 bytes a slot for every client. A hub subscribed to
	// a thousand agents' statuses falls behind in a burst, so the test
	// broker allows as many in flight as MQTT's packet IDs do, and 16,384
	// pending writes (128 KiB a client): the bench's 100,000 works over
	// 1,000 clusters go through it with nothing dropped. Dropped counts
	// what it still drops.
	caps.MaximumInflight = math.MaxUint16
	caps.MaximumClientWritesPending = 1 << 14
	srv := mochi.New(&mochi.Options{Capabilities: caps, Logger: b.cfg.logger, ClientNetWriteBufferSize: 64 << 10})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return fmt.Errorf("mqtttest: %w", err)
	}
	if b.cfg.maxPacketSize > 0 && !b.cfg.silentMax {
		if err := srv.AddHook(&announceHook{max: b.cfg.maxPacketSize}, nil); err != nil {
			return fmt.Errorf("mqtttest: %w", err)
		}
	}
	l := newListener("tcp", addr, b.cfg.tls, func(id string) { disconnectClients(srv, id) })
	if err := srv.AddHook(&takeoverHook{srv: srv, ln: l}, nil); err != nil {
		return fmt.Errorf("mqtttest: %w", err)
	}
	if err := srv.AddListener(l); err != nil {
		return fmt.Errorf("mqtttest: listen on %s: %w", addr, err)
	}
	if err := srv.Serve(); err != nil {
		_ = srv.Close()
		return fmt.Errorf("mqtttest: serve: %w", err)
	}
	b.mu.Lock()
	b.srv, b.addr = srv, l.Address()
	b.mu.Unlock()
	return nil
}

// disconnectClients sends a DISCONNECT (server shutting down) to every
// client of the listener and closes it, as mochi's own Close does.
func disconnectClients(srv *mochi.Server, listenerID string) {
	for _, cl := range srv.Clients.GetAll() {
		if cl.Net.Listener == listenerID && !cl.Closed() {
			_ = srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}

// Addr returns the broker's host:port.
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// Stop closes the listener and every client connection, as a broker crash
// does. Restart brings it back on the same address.
func (b *Broker) Stop() error {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	if srv != nil {
		b.dropped += droppedBy(srv)
	}
	b.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Dropped returns how many messages the broker has dropped for subscribers
// that fell behind, across restarts. Tests that must lose nothing check it
// is 0; the resync protocol heals what it counts.
func (b *Broker) Dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.dropped
	if b.srv != nil {
		n += droppedBy(b.srv)
	}
	return n
}

func droppedBy(srv *mochi.Server) int64 {
	info := srv.Info.Clone()
	return info.MessagesDropped + info.InflightDropped
}

// Restart stops the broker if it runs and starts a fresh one (no sessions,
// no retained messages) on the same address.
func (b *Broker) Restart() error {
	if err := b.Stop(); err != nil {
		return err
	}
	// The old listener's port may take a moment to be free again.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = b.serve(b.Addr()); err == nil || !isAddrInUse(err) {
			return err
		}
	}
	return err
}

func isAddrInUse(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "listen"
}

// Close stops the broker. It is idempotent.
func (b *Broker) Close() error { return b.Stop() }

// Publish connects to the broker at addr as a plain MQTT client and
// publishes payload on topic at QoS 1, as a foreign or broken peer would:
// use it to feed subscribers messages that are not CloudEvents.
func Publish(ctx context.Context, addr, topic string, payload []byte) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("mqtttest: publish: %w", err)
	}
	cli := paho.NewClient(paho.ClientConfig{Conn: conn})
	var id [6]byte
	_, _ = rand.Read(id[:])
	if _, err := cli.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("mqtttest-%x", id), CleanStart: true, KeepAlive: 30}); err != nil {
		_ = conn.Close()
		return fmt.Errorf("mqtttest: publish: connect: %w", err)
	}
	defer func() {
		_ = cli.Disconnect(&paho.Disconnect{})
		<-cli.Done()
	}()
	if _, err := cli.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: payload}); err != nil {
		return fmt.Errorf("mqtttest: publish: %w", err)
	}
	return nil
}

// DropClient closes the network connection of the client with clientID, as
// a network failure would: the broker publishes its will, and the client
// must notice and reconnect. It reports whether the client was connected.
func (b *Broker) DropClient(clientID string) bool {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	if srv == nil {
		return false
	}
	cl, ok := srv.Clients.Get(clientID)
	if !ok || cl.Closed() {
		return false
	}
	_ = cl.Net.Conn.Close()
	return true
}
