package nats

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/internal/connstate"
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

// Transport carries CloudEvents over NATS JetStream. It implements
// options.Transport; see the package documentation for its subjects,
// stream and consumers. Start it once; Send is goroutine-safe; Close is
// idempotent and may be called from any goroutine.
type Transport struct {
	cfg       Config
	tlsConfig *tls.Config
	log       logr.Logger
	logSet    bool
	backoff   options.Backoff
	tracker   *connstate.Tracker
	topics    *options.Topics

	mu        sync.Mutex
	started   bool
	closed    bool
	nc        *natsgo.Conn // nil until Start connects
	js        jetstream.JetStream
	subs      []options.Subscription
	filters   []string // of subs
	consumes  []jetstream.ConsumeContext
	consumers map[options.Role]jetstream.Consumer // of the subscriptions kept in the stream
	redialing bool                                // Redial stopped the consumers: the reconnect makes them again
	recv      options.Receiver
	closedCh  chan struct{} // closed by the connection's closed handler

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // probes and resubscriptions
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
		return nil, errors.New("nats: the config is nil")
	}
	return New(*c)
}

// New returns a NATS JetStream transport for cfg. It validates cfg and does
// no network I/O.
func New(cfg Config, opts ...Option) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	topics, err := options.WorkwireLayout.Compile()
	if err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:    cfg,
		log:    klog.Background(),
		topics: topics,
		backoff: options.Backoff{
			Min: time.Duration(cfg.ReconnectMinBackoff),
			Max: time.Duration(cfg.ReconnectMaxBackoff),
		},
		closedCh: make(chan struct{}),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for _, o := range opts {
		o(t)
	}
	if t.tlsConfig == nil {
		tc, err := cfg.TLS.Build("")
		if err != nil {
			return nil, err
		}
		t.tlsConfig = tc
	}
	t.log = t.log.WithValues("url", cfg.URL)
	t.tracker = connstate.New(t.log, "NATS server "+cfg.URL)
	return t, nil
}

// Healthy implements options.HealthChecker: nil while connected.
func (t *Transport) Healthy() error { return t.tracker.Healthy() }

// MaxEventBytes returns the largest event Send sends: Config.MaxEventBytes,
// or once connected the server's max_payload if that is smaller; 0 before
// Start without a configured limit.
func (t *Transport) MaxEventBytes() int {
	t.mu.Lock()
	nc := t.nc
	t.mu.Unlock()
	limit := t.cfg.MaxEventBytes
	if nc != nil {
		if server := int(nc.MaxPayload()); server > 0 && (limit == 0 || server < limit) {
			limit = server
		}
	}
	return limit
}

// Start connects, makes sure the stream exists, and subscribes: a durable
// consumer for an agent's specs and a source's statuses, and a plain NATS
// subscription for resync requests (see the package documentation). It
// blocks until all of that is done, retrying with backoff until ctx ends,
// except for failures retrying cannot fix (credentials, permissions), which
// it reports at once. It calls r.Connected before it returns and after
// every reconnect.
func (t *Transport) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	if r == nil {
		return errors.New("nats: Start needs a receiver")
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return fmt.Errorf("nats: Start: %w", options.ErrClosed)
	case t.started:
		t.mu.Unlock()
		return errors.New("nats: Start called twice")
	}
	t.started, t.recv = true, r
	t.mu.Unlock()
	if !t.logSet {
		t.log = t.tracker.LoggerFrom(ctx, t.log, "url", t.cfg.URL)
	}
	filters := make([]string, len(subs))
	for i, s := range subs {
		f, err := t.subject(s.Role, s.Source, s.Cluster, true)
		if err != nil {
			return fmt.Errorf("nats: subscription %d: %w", i, err)
		}
		filters[i] = f
	}
	t.mu.Lock()
	t.subs, t.filters = subs, filters
	t.mu.Unlock()

	attempt := func(ctx context.Context) (*natsgo.Conn, error) {
		nc, err := t.connect(ctx)
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err == nil {
			err = t.subscribe(ctx, nc, js, subs, filters)
		}
		if err != nil {
			t.stop()
			nc.Close()
			return nil, err
		}
		t.mu.Lock()
		t.js = js
		t.mu.Unlock()
		return nc, nil
	}
	nc, err := connstate.Connect(ctx, t.tracker, t.backoff, attempt, refused)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.stop()
		nc.Close()
		return fmt.Errorf("nats: Start: %w", options.ErrClosed)
	}
	t.nc = nc
	t.mu.Unlock()
	r.Connected()
	return nil
}

// connect makes one connection. NATS reconnects it by itself from then on,
// with the transport's backoff.
func (t *Transport) connect(ctx context.Context) (*natsgo.Conn, error) {
	opts := []natsgo.Option{
		natsgo.Name("workwire"),
		natsgo.Timeout(time.Duration(t.cfg.ConnectTimeout)),
		natsgo.MaxReconnects(-1),
		natsgo.CustomReconnectDelay(t.backoff.Delay),
		// Sends fail while disconnected (options.ErrNotConnected) rather than
		// wait in a buffer the caller cannot see.
		natsgo.ReconnectBufSize(-1),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if t.receiver() != nil { // not Close's own disconnect
				t.log.Info("connection lost; reconnecting", "to", "NATS server "+t.cfg.URL, "err", t.tracker.Lost(err))
			}
		}),
		natsgo.ReconnectErrHandler(func(_ *natsgo.Conn, err error) { t.tracker.Failed(0, err) }),
		// Without a handler of ours, nats.go writes its asynchronous errors
		// to os.Stderr, whatever logger the transport has: one line per
		// failed write while a broken connection is noticed, for instance.
		natsgo.ErrorHandler(func(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
			var subject string
			if sub != nil {
				subject = sub.Subject
			}
			if errors.Is(err, natsgo.ErrSlowConsumer) {
				// Dropped by the client: JetStream delivers the event again
				// after AckWait, and resync heals a lost resync request.
				t.log.Error(err, "a subscription fell behind and dropped events", "subject", subject)
				return
			}
			t.log.V(2).Info("connection error", "err", err, "subject", subject)
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			t.tracker.Connected()
			t.mu.Lock()
			r := t.recv
			started := t.nc == nc && !t.closed
			redialed := started && t.redialing
			if redialed {
				t.wg.Add(1)
			}
			t.mu.Unlock()
			switch {
			case redialed:
				go func() {
					defer t.wg.Done()
					t.reconsume(nc)
				}()
			case started:
				r.Connected()
			}
		}),
	}
	if t.tlsConfig != nil {
		opts = append(opts, natsgo.Secure(t.tlsConfig))
	}
	switch c := t.cfg; {
	case c.CredsFile != "":
		opts = append(opts, natsgo.UserCredentials(c.CredsFile))
	case c.Username != "":
		password := c.Password
		if c.PasswordFile != "" {
			b, err := os.ReadFile(c.PasswordFile)
			if err != nil {
				return nil, &refusal{err}
			}
			password = strings.TrimSpace(string(b))
		}
		opts = append(opts, natsgo.UserInfo(c.Username, password))
	case c.TokenFile != "":
		opts = append(opts, natsgo.TokenHandler(func() string {
			b, _ := os.ReadFile(c.TokenFile)
			return strings.TrimSpace(string(b))
		}))
	}
	type result struct {
		nc  *natsgo.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := natsgo.Connect(t.cfg.URL, opts...)
		done <- result{nc, err}
	}()
	select {
	case res := <-done:
		if res.err != nil && isAuthError(res.err) {
			return nil, &refusal{res.err}
		}
		return res.nc, res.err
	case <-ctx.Done():
		go func() {
			if res := <-done; res.nc != nil {
				res.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// receiver returns whom to deliver to, nil once the transport is closing.
func (t *Transport) receiver() options.Receiver {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	return t.recv
}

// subscribe makes sure the stream exists and starts receiving each
// subscription.
func (t *Transport) subscribe(ctx context.Context, nc *natsgo.Conn, js jetstream.JetStream, subs []options.Subscription, filters []string) error {
	if err := t.ensureStream(ctx, js); err != nil {
		return err
	}
	for i, s := range subs {
		if !kept(s.Role) {
			// Resync requests are broadcasts that matter only to who is
			// listening now: plain NATS, not kept in the stream.
			if _, err := nc.Subscribe(filters[i], t.onCore); err != nil {
				return fmt.Errorf("subscribe %s: %w", filters[i], err)
			}
		}
	}
	return t.consume(ctx, js, subs, filters)
}

// kept reports whether role's events are kept in the stream, and read
// through a consumer.
func kept(role options.Role) bool { return role == options.RoleSpec || role == options.RoleStatus }

// consume makes (or finds) the consumer of each subscription kept in the
// stream and starts reading it.
func (t *Transport) consume(ctx context.Context, js jetstream.JetStream, subs []options.Subscription, filters []string) error {
	for i, s := range subs {
		if !kept(s.Role) {
			continue
		}
		cc := jetstream.ConsumerConfig{
			FilterSubject: filters[i],
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       time.Duration(t.cfg.AckWait),
			MaxAckPending: t.cfg.MaxAckPending,
			// What was sent before a consumer's first start reaches its
			// client through the resync it runs when it starts.
			DeliverPolicy: jetstream.DeliverNewPolicy,
		}
		if name := t.durable(s); name != "" {
			cc.Durable = name
		} else {
			cc.InactiveThreshold = time.Minute
		}
		cons, err := js.CreateOrUpdateConsumer(ctx, t.cfg.Stream, cc)
		if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
			return fmt.Errorf("consumer %q on %s: %w (one per agent and source: raise the stream's max_consumers, `nats stream edit %s --max-consumers N`, or the servers' default_max_consumers)",
				cc.Durable, filters[i], err, t.cfg.Stream)
		}
		if err != nil {
			return fmt.Errorf("consumer %q on %s: %w", cc.Durable, filters[i], err)
		}
		consume, err := cons.Consume(t.onJetStream,
			jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(time.Duration(t.cfg.PullHeartbeat)),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				t.log.V(2).Info("consume", "consumer", cc.Durable, "err", err)
			}))
		if err != nil {
			return fmt.Errorf("consume %s: %w", filters[i], err)
		}
		t.mu.Lock()
		t.consumes = append(t.consumes, consume)
		if t.consumers == nil {
			t.consumers = make(map[options.Role]jetstream.Consumer)
		}
		t.consumers[s.Role] = cons
		t.mu.Unlock()
	}
	return nil
}

// reconsume makes the consumers again after the reconnect Redial asked
// for, retrying with backoff until it can or the transport closes, and then
// tells the receiver: a consumer deleted on the server is made anew, so
// the subscription delivers again.
func (t *Transport) reconsume(nc *natsgo.Conn) {
	t.mu.Lock()
	js, subs, filters, r := t.js, t.subs, t.filters, t.recv
	t.mu.Unlock()
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(t.ctx, time.Duration(t.cfg.ConnectTimeout))
		err := t.consume(ctx, js, subs, filters)
		cancel()
		if err == nil {
			break
		}
		t.stop()
		delay := t.backoff.Delay(n)
		t.tracker.Failed(delay, err)
		if !connstate.Sleep(t.ctx, delay) {
			return
		}
	}
	t.mu.Lock()
	t.redialing = false
	live := t.nc == nc && !t.closed
	t.mu.Unlock()
	if live {
		r.Connected()
	}
}

// Probe implements options.Prober for the subscriptions kept in the
// stream: evt reaches the receiver once the server says its consumer
// holds nothing undelivered or unacknowledged. A consumer that delivers
// into a connection that hears nothing keeps what it delivered
// unacknowledged, and one deleted on the server answers no more: their
// probes never come back. Resync requests, which go over plain NATS to
// every peer, are not probed.
func (t *Transport) Probe(ctx context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	if !kept(sub.Role) {
		return fmt.Errorf("nats: %s: %w: every peer shares it", sub.Role, options.ErrProbeUnsupported)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cons := t.consumers[sub.Role]
	switch {
	case t.closed:
		return fmt.Errorf("nats: probe: %w", options.ErrClosed)
	case cons == nil || t.redialing:
		return fmt.Errorf("nats: probe: %w", options.ErrNotConnected)
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.awaitProbe(ctx, cons, options.NewDelivery(options.Route{Role: sub.Role}, evt, nil))
	}()
	return nil
}

// probePoll is how often a probe asks the server about its consumer.
const probePoll = 100 * time.Millisecond

// awaitProbe hands d over once cons holds nothing for its client, unless
// ctx or the transport ends first.
func (t *Transport) awaitProbe(ctx context.Context, cons jetstream.Consumer, d *options.Delivery) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	ticker := time.NewTicker(probePoll)
	defer ticker.Stop()
	for {
		if info, err := cons.Info(ctx); err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			if r := t.receiver(); r != nil {
				r.Deliver(d)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Redial implements options.Prober: it stops the consumers, drops the
// connection (its loss logged with cause), and once nats.go has connected
// again makes the consumers again and tells the receiver.
func (t *Transport) Redial(cause error) {
	t.mu.Lock()
	nc := t.nc
	if nc == nil || t.closed || t.redialing || !nc.IsConnected() {
		t.mu.Unlock()
		return
	}
	t.redialing = true
	t.mu.Unlock()
	t.tracker.Lost(cause) // the disconnect handler logs it
	t.stop()
	if err := nc.ForceReconnect(); err != nil {
		t.log.V(2).Info("reconnect", "err", err)
	}
}

// ensureStream creates the stream when it is missing, and otherwise
// checks that it holds the subjects of specs and statuses.
func (t *Transport) ensureStream(ctx context.Context, js jetstream.JetStream) error {
	subjects := t.streamSubjects()
	s, err := js.Stream(ctx, t.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:         t.cfg.Stream,
			Description:  "workwire: specs and statuses",
			Subjects:     subjects,
			Retention:    jetstream.LimitsPolicy,
			MaxAge:       time.Duration(t.cfg.MaxAge),
			Storage:      jetstream.FileStorage,
			Replicas:     t.cfg.Replicas,
			MaxConsumers: t.cfg.MaxConsumers,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil // another client created it meanwhile
		}
		if err != nil {
			return fmt.Errorf("create stream %s: %w", t.cfg.Stream, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", t.cfg.Stream, err)
	}
	for _, want := range subjects {
		found := false
		for _, have := range s.CachedInfo().Config.Subjects {
			found = found || have == want || have == t.cfg.SubjectPrefix+".>"
		}
		if !found {
			return &refusal{fmt.Errorf("stream %s does not hold subject %s (it holds %v)", t.cfg.Stream, want, s.CachedInfo().Config.Subjects)}
		}
	}
	return nil
}

// streamSubjects are the subjects of specs and statuses: the roles a
// client must not miss while it is away.
func (t *Transport) streamSubjects() []string {
	spec, _ := t.subject(options.RoleSpec, "", "", true)
	status, _ := t.subject(options.RoleStatus, "", "", true)
	return []string{spec, status}
}

// durable returns the name of the durable consumer of s, or "" when s is
// not one client's own (a spec subscription of one cluster, a status
// subscription of one source).
func (t *Transport) durable(s options.Subscription) string {
	switch {
	case s.Role == options.RoleSpec && s.Cluster != "" && s.Source == "":
		return t.cfg.ConsumerPrefix + "_spec_" + s.Cluster
	case s.Role == options.RoleStatus && s.Source != "" && s.Cluster == "":
		return t.cfg.ConsumerPrefix + "_status_" + s.Source
	}
	return ""
}

func (t *Transport) onJetStream(msg jetstream.Msg) {
	route, evt, err := t.decode(msg.Subject(), msg.Headers(), msg.Data())
	r := t.receiver()
	if r == nil {
		return // closing: unacknowledged, the server delivers it again
	}
	if err != nil {
		_ = msg.Term() // delivering it again would not make it a CloudEvent
		r.Malformed(err)
		return
	}
	r.Deliver(options.NewDelivery(route, evt, func() { _ = msg.Ack() }))
}

func (t *Transport) onCore(msg *natsgo.Msg) {
	route, evt, err := t.decode(msg.Subject, msg.Header, msg.Data)
	r := t.receiver()
	switch {
	case r == nil:
	case err != nil:
		r.Malformed(err)
	default:
		r.Deliver(options.NewDelivery(route, evt, nil))
	}
}

func (t *Transport) decode(subject string, h natsgo.Header, data []byte) (options.Route, *cloudevents.Event, error) {
	route, ok := t.route(subject)
	if !ok {
		return route, nil, fmt.Errorf("subject %s: not one of workwire's", subject)
	}
	evt, err := decode(h, data)
	if err != nil {
		return route, nil, fmt.Errorf("subject %s: %w", subject, err)
	}
	return route, evt, nil
}

// Send publishes evt to route's subject. Specs and statuses go to the
// stream, and Send returns once the stream has stored the event; resync
// requests go to whoever subscribes now, and Send returns once the server
// has them.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	if err := options.CheckEvent(evt); err != nil {
		return err
	}
	subject, err := t.subject(route.Role, route.Source, route.Cluster, false)
	if err != nil {
		return err
	}
	t.mu.Lock()
	nc, js, closed := t.nc, t.js, t.closed
	t.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("nats: Send: %w", options.ErrClosed)
	case nc == nil:
		return fmt.Errorf("nats: Send: %w", options.ErrNotStarted)
	case !nc.IsConnected():
		return fmt.Errorf("nats: Send: %w (the connection is %s)", options.ErrNotConnected, nc.Status())
	}
	msg, err := encode(subject, evt)
	if err != nil {
		return fmt.Errorf("nats: %w: event %q: %v", options.ErrInvalidEvent, evt.ID(), err)
	}
	if limit := t.MaxEventBytes(); limit > 0 && len(msg.Data) > limit {
		return fmt.Errorf("nats: %w: event %q has %d bytes of data, the limit is %d", options.ErrTooLarge, evt.ID(), len(msg.Data), limit)
	}
	if route.Role == options.RoleSpecResync || route.Role == options.RoleStatusResync {
		err = nc.PublishMsg(msg)
		if err == nil {
			err = flush(ctx, nc, js.Options().DefaultTimeout)
		}
	} else {
		_, err = js.PublishMsg(ctx, msg)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, natsgo.ErrMaxPayload):
		return fmt.Errorf("nats: %w: event %q: %v", options.ErrTooLarge, evt.ID(), err)
	case errors.Is(err, natsgo.ErrConnectionClosed), errors.Is(err, natsgo.ErrConnectionReconnecting),
		errors.Is(err, natsgo.ErrDisconnected):
		return fmt.Errorf("nats: Send: %w: %v", options.ErrNotConnected, err)
	}
	return fmt.Errorf("nats: Send %s: %w", subject, err)
}

// flush waits until the server has what nc sent, until ctx ends or, when
// ctx has no deadline, for at most timeout. nats.go's FlushWithContext
// refuses a context without a deadline, after the event went out: Send
// would report as failed an event it sent, and its caller send it again.
func flush(ctx context.Context, nc *natsgo.Conn, timeout time.Duration) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}

// Close stops receiving, drains the connection (what its subscriptions
// hold is handed to no one, and their callbacks return), and returns once
// the connection is closed or ctx ends.
func (t *Transport) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	nc := t.nc
	t.mu.Unlock()
	t.tracker.Closed()
	t.cancel()
	t.wg.Wait()
	t.stop()
	if nc == nil {
		return nil
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*natsgo.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close() // not connected: nothing to drain
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop stops every consumer and waits for their callbacks to return.
func (t *Transport) stop() {
	t.mu.Lock()
	consumes := t.consumes
	t.consumes, t.consumers = nil, nil
	t.mu.Unlock()
	for _, c := range consumes {
		c.Stop()
	}
	for _, c := range consumes {
		<-c.Closed()
	}
}

// subject returns the NATS subject of a route (wildcard false) or the
// filter of a subscription (wildcard true: "*" where an ID is empty): the
// workwire topic layout with "." between levels, under SubjectPrefix.
func (t *Transport) subject(role options.Role, source, cluster string, wildcard bool) (string, error) {
	for _, id := range []struct{ kind, id string }{{"source", source}, {"cluster", cluster}} {
		if id.id != "" && !validToken(id.id) {
			return "", fmt.Errorf("%w %s: %s %q must not contain '.', '*', '>' or white space", options.ErrInvalidRoute, role, id.kind, id.id)
		}
	}
	var topic string
	var err error
	if wildcard {
		topic, err = t.topics.Filter(options.Subscription{Role: role, Source: source, Cluster: cluster})
	} else {
		topic, err = t.topics.Topic(options.Route{Role: role, Source: source, Cluster: cluster})
	}
	if err != nil {
		return "", err
	}
	topic = strings.ReplaceAll(strings.ReplaceAll(topic, "/", "."), "+", "*")
	return t.cfg.SubjectPrefix + "." + topic, nil
}

// route returns the route a received subject stands for.
func (t *Transport) route(subject string) (options.Route, bool) {
	rest, ok := strings.CutPrefix(subject, t.cfg.SubjectPrefix+".")
	if !ok {
		return options.Route{}, false
	}
	return t.topics.Match(strings.ReplaceAll(rest, ".", "/"))
}

// refusal is a failure retrying cannot fix.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refused(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

func isAuthError(err error) bool {
	return errors.Is(err, natsgo.ErrAuthorization) || errors.Is(err, natsgo.ErrAuthExpired) ||
		errors.Is(err, natsgo.ErrAuthRevoked) || errors.Is(err, natsgo.ErrPermissionViolation)
}
