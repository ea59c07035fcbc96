package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	mqttpaho "github.com/cloudevents/sdk-go/protocol/mqtt_paho/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/internal/connstate"
	"github.com/workwire/sdk-go/internal/lifecycle"
	"github.com/workwire/sdk-go/options"
)

// Option configures what a config file cannot hold.
type Option func(*Transport)

// WithLogger sets the transport's logger. Default: the logger of the
// context given to Start (klog.FromContext), which is klog.Background()
// unless the caller put one there.
func WithLogger(l logr.Logger) Option { return func(t *Transport) { t.log, t.logSet = l, true } }

// WithTLSConfig sets the TLS configuration directly (for certificates held
// in memory); it replaces Config.TLS. Default: built from Config.TLS.
func WithTLSConfig(c *tls.Config) Option { return func(t *Transport) { t.tlsConfig = c } }

// Transport carries CloudEvents over MQTT v5, in the content mode of the
// CloudEvents MQTT binding its Config names (binary, attributes and
// extensions as user properties, by default). It implements options.Transport: it reconnects by itself with
// capped exponential backoff and tells its receiver after every reconnect.
type Transport struct {
	cfg       Config
	topics    *options.Topics
	tlsConfig *tls.Config
	log       logr.Logger
	clientID  string
	backoff   options.Backoff
	tracker   *connstate.Tracker
	logSet    bool  // by WithLogger; otherwise Start's context's is taken
	logValues []any // what the transport adds to its logger

	mu        sync.Mutex
	started   bool
	closed    bool
	client    *paho.Client // nil while disconnected
	ending    *ending      // how client's connection ended
	connDone  context.Context
	maxPacket uint32 // the broker's announced limit, 0 if none
	silent    silentLimit
	recv      options.Receiver
	subs      []paho.SubscribeOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ options.Transport        = (*Transport)(nil)
	_ options.EventSizeLimiter = (*Transport)(nil)
	_ options.HealthChecker    = (*Transport)(nil)
	_ options.Prober           = (*Transport)(nil)
	_ options.TransportConfig  = (*Config)(nil)
)

// NewTransport implements options.TransportConfig: it returns New(*c).
func (c *Config) NewTransport() (options.Transport, error) {
	if c == nil {
		return nil, errors.New("mqtt: the config is nil")
	}
	return New(*c)
}

// New returns an MQTT transport for cfg. It validates cfg and does no
// network I/O.
func New(cfg Config, opts ...Option) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	layout, _ := cfg.layout()
	topics, err := layout.Compile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Transport{
		cfg:     cfg,
		topics:  topics,
		log:     klog.Background(),
		backoff: options.Backoff{Min: time.Duration(cfg.ReconnectMinBackoff), Max: time.Duration(cfg.ReconnectMaxBackoff)},
	}
	for _, o := range opts {
		o(t)
	}
	if t.tlsConfig == nil {
		host, _, _ := net.SplitHostPort(cfg.BrokerHost)
		if t.tlsConfig, err = cfg.TLS.Build(host); err != nil {
			return nil, err
		}
	}
	t.clientID = cfg.ClientID
	if t.clientID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		t.clientID = "workwire-" + hex.EncodeToString(b[:])
	}
	t.logValues = []any{"broker", cfg.BrokerHost, "clientID", t.clientID}
	t.log = t.log.WithValues(t.logValues...)
	t.tracker = connstate.New(t.log, "MQTT broker "+cfg.BrokerHost)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// ClientID returns the MQTT client ID the transport connects with.
func (t *Transport) ClientID() string { return t.clientID }

// Healthy implements options.HealthChecker: nil while connected and
// subscribed.
func (t *Transport) Healthy() error { return t.tracker.Healthy() }

// MaxEventBytes returns the largest event Send sends: Config.MaxEventBytes,
// or the broker's maximum packet size once it announced a lower one; 0 if
// neither is known yet.
func (t *Transport) MaxEventBytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limit(t.maxPacket)
}

// Start connects, subscribes to subs and then keeps the connection up until
// Close. It retries the first connection with backoff until ctx ends, except
// when the broker refuses the credentials or a subscription, which it
// reports at once.
func (t *Transport) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	if r == nil {
		return errors.New("mqtt: receiver is nil")
	}
	filters := make([]paho.SubscribeOptions, 0, len(subs))
	for _, s := range subs {
		f, err := t.topics.Filter(s)
		if err != nil {
			return fmt.Errorf("mqtt: subscription: %w", err)
		}
		// Resync requests are never shared: a large one arrives as several
		// batches, and only a replica that sees every batch can tell what
		// the peer lacks. Every replica answers; answers are idempotent.
		if t.cfg.SharedGroup != "" && (s.Role == options.RoleSpec || s.Role == options.RoleStatus) {
			f = "$share/" + t.cfg.SharedGroup + "/" + f
			// The group hands a probe to any one replica: each takes its
			// own through a subscription of its own too.
			if r, ok := options.ProbeRoute(s); ok {
				probe, err := t.topics.Topic(r)
				if err != nil {
					return fmt.Errorf("mqtt: subscription: %w", err)
				}
				filters = append(filters, paho.SubscribeOptions{Topic: probe, QoS: t.cfg.qos()})
			}
		}
		filters = append(filters, paho.SubscribeOptions{Topic: f, QoS: t.cfg.qos()})
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return options.ErrClosed
	case t.started:
		t.mu.Unlock()
		return errors.New("mqtt: started twice")
	}
	t.started, t.recv, t.subs = true, r, filters
	if !t.logSet {
		t.log = t.tracker.LoggerFrom(ctx, t.log, t.logValues...)
	}
	t.mu.Unlock()

	// Close ends the first connect too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()

	// The supervisor's WaitGroup entry is taken now, so goroutines that
	// connect starts are always added while the count is positive.
	t.wg.Add(1)
	cli, err := connstate.Connect(ctx, t.tracker, t.backoff, t.connect, func(err error) bool { return errors.Is(err, errRefused) })
	if err != nil {
		t.wg.Done()
		if errors.Is(err, errRefused) {
			return err
		}
		return fmt.Errorf("mqtt: connect to %s: %w", t.cfg.BrokerHost, err)
	}
	go t.supervise(cli)
	r.Connected()
	return nil
}

// errRefused marks a broker's refusal that retrying will not change.
var errRefused = errors.New("refused by broker")

// errPublishRefused marks a publish the broker acknowledged with a reason
// code of failure (an ACL's "not authorized", say) other than
// reasonPacketTooLarge.
var errPublishRefused = errors.New("the broker refused the publish")

// reasonPacketTooLarge is the reason code of a PUBACK that refuses a
// publish as too large: Mosquitto's, for one over its message_size_limit.
// Send makes it options.ErrTooLarge, which the clients do not send again.
const reasonPacketTooLarge = 0x95

// connect dials, connects and subscribes once. On success the new client is
// the current one.
func (t *Transport) connect(ctx context.Context) (*paho.Client, error) {
	conn, err := t.dial(ctx)
	if err != nil {
		return nil, err
	}
	end := &ending{SessionManager: state.NewInMemory()}
	cfg := paho.ClientConfig{
		ClientID:          t.clientID,
		Conn:              packets.NewThreadSafeConn(conn),
		Session:           end,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){t.onPublish},
		OnClientError: func(err error) {
			t.log.V(2).Info("connection error", "err", err)
			end.failed(err)
		},
		// The broker's DISCONNECT reaches end first: paho calls this only
		// once the connection is done, on a goroutine of its own.
		OnServerDisconnect: func(*paho.Disconnect) {},
	}
	cli := paho.NewClient(cfg)
	connected := false
	defer func() {
		if !connected {
			_ = end.Close() // a session of ours: paho leaves it to us
		}
	}()
	cp := &paho.Connect{
		ClientID:   t.clientID,
		KeepAlive:  uint16(time.Duration(t.cfg.KeepAlive) / time.Second),
		CleanStart: !t.cfg.PersistentSession,
	}
	if t.cfg.PersistentSession || t.cfg.ReceiveMaximum > 0 {
		// RequestProblemInfo must stay true (MQTT's default, which a
		// non-nil Properties would turn off): mochi-mqtt then also strips
		// the user properties of PUBLISH packets, where the binding carries
		// every CloudEvents attribute.
		cp.Properties = &paho.ConnectProperties{RequestProblemInfo: true}
	}
	if t.cfg.ReceiveMaximum > 0 {
		receiveMax := uint16(t.cfg.ReceiveMaximum)
		cp.Properties.ReceiveMaximum = &receiveMax
	}
	if t.cfg.PersistentSession {
		expiry := uint32(time.Duration(t.cfg.SessionExpiry) / time.Second)
		cp.Properties.SessionExpiryInterval = &expiry
	}
	if t.cfg.Username != "" {
		cp.Username, cp.UsernameFlag = t.cfg.Username, true
	}
	if t.cfg.Password != "" {
		cp.Password, cp.PasswordFlag = []byte(t.cfg.Password), true
	}
	if w := t.cfg.Will; w != nil {
		cp.WillMessage = &paho.WillMessage{Topic: w.Topic, Payload: []byte(w.Payload), QoS: byte(w.QoS), Retain: w.Retain}
	}
	ack, err := cli.Connect(ctx, cp)
	if err != nil {
		_ = conn.Close()
		if ack != nil && isRefusal(ack.ReasonCode) {
			return nil, fmt.Errorf("mqtt: connect to %s: %w: reason code 0x%02x %s", t.cfg.BrokerHost, errRefused, ack.ReasonCode, reasonString(ack))
		}
		return nil, fmt.Errorf("mqtt: connect to %s: %w", t.cfg.BrokerHost, err)
	}
	var maxPacket uint32
	if ack.Properties != nil && ack.Properties.MaximumPacketSize != nil {
		maxPacket = *ack.Properties.MaximumPacketSize
	}
	if len(t.subs) > 0 {
		sa, err := cli.Subscribe(ctx, &paho.Subscribe{Subscriptions: t.subs})
		if err != nil {
			_ = cli.Disconnect(&paho.Disconnect{})
			return nil, fmt.Errorf("mqtt: subscribe: %w", err)
		}
		for i, code := range sa.Reasons {
			if code >= 0x80 && i < len(t.subs) {
				_ = cli.Disconnect(&paho.Disconnect{})
				return nil, fmt.Errorf("mqtt: subscribe to %q: %w: reason code 0x%02x", t.subs[i].Topic, errRefused, code)
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = cli.Disconnect(&paho.Disconnect{})
		return nil, options.ErrClosed
	}
	t.client, t.ending, t.maxPacket = cli, end, maxPacket
	connected = true
	// connDone ends with the connection, so publishes waiting for an
	// acknowledgement fail at once instead of after paho's packet timeout.
	t.connDone = t.connContext(cli)
	return cli, nil
}

// disconnected is the error of the broker's DISCONNECT d: its reason code,
// and what the code means where a user can act on it.
func disconnected(d *paho.Disconnect, clientID string) error {
	why := ""
	switch d.ReasonCode {
	case 0x8e: // Session taken over
		why = fmt.Sprintf(": session taken over: another connection uses client ID %q, and each connection needs one of its own", clientID)
	case 0x87:
		why = ": not authorized"
	case 0x8b:
		why = ": the broker is shutting down"
	case 0x8d:
		why = ": keep-alive timeout"
	case 0x95:
		why = ": packet too large"
	}
	if d.Properties != nil && d.Properties.ReasonString != "" {
		why += " (" + d.Properties.ReasonString + ")"
	}
	return fmt.Errorf("the broker disconnected us: reason code 0x%02x%s", d.ReasonCode, why)
}

// connContext returns a context cancelled when cli shuts down. Its
// goroutine ends with the connection; Close waits for it.
func (t *Transport) connContext(cli *paho.Client) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		<-cli.Done()
		cancel()
	}()
	return ctx
}

// isRefusal reports CONNACK reason codes that retrying cannot fix.
func isRefusal(code byte) bool {
	switch code {
	case 0x84, 0x85, 0x86, 0x87, 0x8C: // protocol version, client ID, credentials, not authorized, bad auth method
		return true
	}
	return false
}

func reasonString(ack *paho.Connack) string {
	if ack.Properties != nil {
		return ack.Properties.ReasonString
	}
	return ""
}

func (t *Transport) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: time.Duration(t.cfg.DialTimeout)}
	if t.tlsConfig != nil {
		td := &tls.Dialer{NetDialer: d, Config: t.tlsConfig}
		conn, err := td.DialContext(ctx, "tcp", t.cfg.BrokerHost)
		if err != nil {
			return nil, fmt.Errorf("mqtt: dial %s (tls): %w", t.cfg.BrokerHost, err)
		}
		return conn, nil
	}
	conn, err := d.DialContext(ctx, "tcp", t.cfg.BrokerHost)
	if err != nil {
		return nil, fmt.Errorf("mqtt: dial %s: %w", t.cfg.BrokerHost, err)
	}
	return conn, nil
}

// supervise owns the connection: when it drops, it reconnects with backoff
// and tells the receiver, until Close.
func (t *Transport) supervise(cli *paho.Client) {
	defer t.wg.Done()
	connstate.Supervise(t.ctx, t.tracker, t.backoff, cli, t.waitEnd, t.connect, func(*paho.Client) { t.recv.Connected() })
}

// waitEnd returns when cli's connection ends, or, once the transport
// closes, after disconnecting it; then with why it ended, nil if it cannot
// tell.
func (t *Transport) waitEnd(cli *paho.Client) error {
	t.mu.Lock()
	end := t.ending
	t.mu.Unlock()
	defer end.Close() // a session of ours: paho leaves it to us
	select {
	case <-t.ctx.Done():
		_ = cli.Disconnect(&paho.Disconnect{})
		<-cli.Done()
		return nil
	case <-cli.Done():
	}
	t.mu.Lock()
	if t.client == cli {
		t.client = nil
	}
	t.mu.Unlock()
	return end.cause(t.clientID)
}

// ending is a connection's session that keeps how the connection ended:
// the broker's DISCONNECT, which paho hands the session before it closes
// the connection, or else the first error the client reported.
type ending struct {
	session.SessionManager
	mu         sync.Mutex
	disconnect *packets.Disconnect
	err        error
}

func (e *ending) ConnectionLost(d *packets.Disconnect) error {
	if d != nil {
		e.mu.Lock()
		e.disconnect = d
		e.mu.Unlock()
	}
	return e.SessionManager.ConnectionLost(d)
}

func (e *ending) failed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

// cause is why the connection ended, nil if it cannot tell.
func (e *ending) cause(clientID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disconnect != nil {
		return disconnected(paho.DisconnectFromPacketDisconnect(e.disconnect), clientID)
	}
	return e.err
}

// onPublish runs on paho's receive goroutine: decode and hand over, nothing
// more. A message that is not a CloudEvent is reported and acknowledged, so
// it is not redelivered forever.
func (t *Transport) onPublish(pr paho.PublishReceived) (handled bool, err error) {
	p := pr.Packet
	defer func() {
		// The binding is third-party code fed by the network: a panic in it
		// must cost one message, not the process.
		if r := recover(); r != nil {
			t.recv.Malformed(fmt.Errorf("mqtt: message on %q: decoder panic: %v", p.Topic, r))
			handled, err = true, nil
		}
	}()
	route, ok := t.topics.Match(p.Topic)
	if !ok {
		t.recv.Malformed(fmt.Errorf("mqtt: message on unexpected topic %q", p.Topic))
		return true, nil
	}
	evt, err := decode(p)
	if err != nil {
		t.recv.Malformed(fmt.Errorf("mqtt: message on %q: %w", p.Topic, err))
		return true, nil
	}
	t.recv.Deliver(options.NewDelivery(route, evt, nil))
	return true, nil
}

func decode(p *paho.Publish) (*cloudevents.Event, error) {
	if p.Properties == nil {
		return nil, errors.New("not a CloudEvent: no MQTT properties")
	}
	evt, err := binding.ToEvent(context.Background(), mqttpaho.NewMessage(p))
	if err != nil {
		return nil, fmt.Errorf("not a CloudEvent: %w", err)
	}
	if err := evt.Validate(); err != nil {
		return nil, fmt.Errorf("invalid CloudEvent: %w", err)
	}
	return evt, nil
}

// Send publishes evt on the topic of route and, at QoS 1 or 2, waits for
// the broker's acknowledgement.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mqtt: send: %w", err)
	}
	if err := options.CheckEvent(evt); err != nil {
		return fmt.Errorf("mqtt: send: %w", err)
	}
	topic, err := t.topics.Topic(route)
	if err != nil {
		return fmt.Errorf("mqtt: %w", err)
	}
	t.mu.Lock()
	cli, maxPacket, connDone, inferred := t.client, t.maxPacket, t.connDone, t.silent.inferred
	var state error
	switch {
	case t.closed:
		state = options.ErrClosed
	case !t.started:
		state = options.ErrNotStarted
	case cli == nil:
		state = options.ErrNotConnected
	}
	t.mu.Unlock()
	if state != nil {
		return fmt.Errorf("mqtt: send to %s: %w", topic, state)
	}
	pub, err := t.encode(ctx, topic, evt)
	if err != nil {
		return err
	}
	size := packetSize(pub)
	if limit := t.limit(maxPacket); limit > 0 && size > limit {
		return fmt.Errorf("mqtt: event %s of type %s: %w: %d bytes, limit %d", evt.ID(), evt.Type(), options.ErrTooLarge, size, limit)
	}
	if inferred > 0 && size >= inferred {
		return fmt.Errorf("mqtt: event %s of type %s: %w", evt.ID(), evt.Type(), silentLimitError(size, inferred))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(connDone, cancel)()
	if pr, err := cli.Publish(ctx, pub); err != nil {
		if pr != nil && pr.ReasonCode == reasonPacketTooLarge {
			return fmt.Errorf("mqtt: publish to %s: %w: %d bytes, refused with reason code 0x95 (packet too large) by a broker that announced no limit, such as Mosquitto with message_size_limit (raise it, or set max_packet_size instead, which the broker announces): %w",
				topic, options.ErrTooLarge, size, err)
		}
		if pr != nil && pr.ReasonCode >= 0x80 {
			return fmt.Errorf("mqtt: publish to %s: %w: %w", topic, errPublishRefused, err)
		}
		if !lostConnection(cli, err) {
			return fmt.Errorf("mqtt: publish to %s: %w", topic, err)
		}
		t.mu.Lock()
		inferred := t.silent.dropped(size)
		t.mu.Unlock()
		if inferred > 0 {
			return fmt.Errorf("mqtt: publish to %s: %w (%w)", topic, silentLimitError(size, inferred), err)
		}
		return fmt.Errorf("mqtt: publish to %s: %w: %w", topic, options.ErrNotConnected, err)
	}
	if size > minSilentLimit { // smaller packets tell silentLimit nothing: no lock
		t.mu.Lock()
		t.silent.sent(size)
		t.mu.Unlock()
	}
	return nil
}

// encode lays evt out in a PUBLISH packet for topic, in the configured
// content mode.
func (t *Transport) encode(ctx context.Context, topic string, evt *cloudevents.Event) (*paho.Publish, error) {
	if t.cfg.ContentMode == ContentModeStructured {
		ctx = binding.WithForceStructured(ctx)
	}
	pub := &paho.Publish{Topic: topic, QoS: t.cfg.qos()}
	if err := mqttpaho.WritePubMessage(ctx, binding.ToMessage(evt), pub); err != nil {
		return nil, fmt.Errorf("mqtt: encode event %s: %w", evt.ID(), err)
	}
	return pub, nil
}

// silentLimitError says why an event is too large for a broker that
// announced no limit.
func silentLimitError(size, limit int) error {
	return fmt.Errorf("%w: %d bytes; the broker announced no limit, but dropped the connection twice when sent %d bytes or more",
		options.ErrTooLarge, size, limit)
}

// minSilentLimit is the smallest packet size silentLimit infers: brokers'
// limits are far larger (AWS IoT's is 128 KiB), and an event smaller than
// this is never suspected.
const minSilentLimit = 64 << 10

// silentLimit infers the packet size limit of a broker that enforces one
// it does not announce, by dropping the connection of a client that sends
// a larger packet: an event sent again and again would drop the connection
// again and again, taking every publish in flight with it. Two drops while
// a packet larger than any the broker accepted was in flight — the second
// at least as large as the first — make packets of the first one's size
// and more too large. A packet that large getting through undoes it. Only
// packets over minSilentLimit count. Guarded by the transport's mu.
type silentLimit struct {
	largestSent int // the largest packet the broker acknowledged
	suspect     int // the size of a packet in flight at a drop; 0 for none
	inferred    int // packets this large or larger are refused; 0 for none
}

// dropped records that the connection dropped while a packet of size was
// in flight, and returns the limit this infers, if it does.
func (s *silentLimit) dropped(size int) int {
	if size <= minSilentLimit || size <= s.largestSent {
		return 0
	}
	if s.suspect > 0 && size >= s.suspect {
		s.inferred = s.suspect
		return s.inferred
	}
	if s.suspect == 0 || size < s.suspect {
		s.suspect = size
	}
	return 0
}

// sent records a packet of size the broker acknowledged.
func (s *silentLimit) sent(size int) {
	s.largestSent = max(s.largestSent, size)
	if s.suspect > 0 && size >= s.suspect {
		s.suspect = 0
	}
}

// lostConnection reports whether a publish failed because the connection
// went away (the supervisor reconnects) rather than for the event itself.
func lostConnection(cli *paho.Client, err error) bool {
	select {
	case <-cli.Done():
		return true
	default:
	}
	return errors.Is(err, session.ErrNoConnection) || errors.Is(err, paho.ErrConnectionLost) ||
		errors.Is(err, paho.ErrNetworkErrorAfterStored) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)
}

func (t *Transport) limit(brokerMax uint32) int {
	limit := t.cfg.MaxEventBytes
	if brokerMax > 0 && (limit == 0 || int(brokerMax) < limit) {
		limit = int(brokerMax)
	}
	return limit
}

// packetSize is an upper bound of the encoded PUBLISH packet's size.
func packetSize(p *paho.Publish) int {
	n := 2 + 4 + 2 + len(p.Topic) + 2 + 4 + len(p.Payload)
	if p.Properties != nil {
		n += 3 + len(p.Properties.ContentType)
		for _, u := range p.Properties.User {
			n += 5 + len(u.Key) + len(u.Value)
		}
	}
	return n
}

// Probe implements options.Prober: it publishes evt on the topic of
// options.ProbeRoute(sub), which sub's filter matches and no other
// client's. A broker that refuses the publish (an ACL without the probe's
// topic) makes it ErrProbeUnsupported, logged once at the default level.
func (t *Transport) Probe(ctx context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	route, ok := options.ProbeRoute(sub)
	if !ok {
		return fmt.Errorf("mqtt: %s: %w: every peer shares it", sub.Role, options.ErrProbeUnsupported)
	}
	err := t.Send(ctx, route, evt)
	if !errors.Is(err, errPublishRefused) {
		return err
	}
	topic, _ := t.topics.Topic(route)
	t.log.Info("cannot check that the subscription delivers: the broker refused the probe; let the client write its topic", "subscription", sub.Role.String(), "topic", topic, "err", err)
	return fmt.Errorf("mqtt: %w: %w", options.ErrProbeUnsupported, err)
}

// Redial implements options.Prober: it ends the current connection, whose
// end the supervisor logs with cause, and connects again.
func (t *Transport) Redial(cause error) {
	t.mu.Lock()
	cli, end := t.client, t.ending
	t.mu.Unlock()
	if cli == nil {
		return
	}
	end.failed(cause)
	_ = cli.Disconnect(&paho.Disconnect{})
}

// Close disconnects and waits for the transport's goroutines, or until ctx
// ends. It is idempotent.
func (t *Transport) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.client = nil
	t.mu.Unlock()
	t.tracker.Closed()
	t.cancel()
	if err := lifecycle.Wait(ctx, &t.wg); err != nil {
		return fmt.Errorf("mqtt: close: %w", err)
	}
	return nil
}
