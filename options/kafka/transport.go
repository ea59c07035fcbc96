package kafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
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

// WithSaramaConfig lets fn adjust each sarama.Config the transport builds
// (one for its producer, one for its consumer group), after the transport
// has set its own fields, for settings Config does not cover (buffer sizes,
// fetch sizes, metadata refresh). fn must leave alone what the transport
// relies on: Producer.Return.Successes and Errors, the producer's
// partitioner, and the group's balance strategy (turning
// Consumer.Offsets.AutoCommit off only delays commits to the end of each
// session). With a SASL/PLAIN password file, the transport's dialer is
// Net.Proxy.Dialer (it does TLS and SASL for each connection): leave Net.TLS,
// Net.SASL and Net.Proxy alone then. Set MetricRegistry to collect sarama's
// own metrics (the transport gives it a registry that keeps none). Default:
// none.
func WithSaramaConfig(fn func(*sarama.Config)) Option {
	return func(t *Transport) { t.tune = fn }
}

// Transport carries CloudEvents over Kafka, in the binary content mode of the
// CloudEvents Kafka binding (attributes and extensions as "ce_" record
// headers, the data as the record value), through sarama. It implements
// options.Transport; see the package documentation for its topics, groups
// and offsets. Start it once; Send is goroutine-safe; Close is idempotent
// and may be called from any goroutine.
type Transport struct {
	cfg       Config
	tlsConfig *tls.Config
	tune      func(*sarama.Config)
	log       logr.Logger
	backoff   options.Backoff
	tracker   *connstate.Tracker
	logSet    bool  // by WithLogger; otherwise Start's context's is taken
	logValues []any // what the transport adds to its logger
	maxBytes  int
	prodCfg   *sarama.Config
	consCfg   *sarama.Config

	mu       sync.RWMutex // Send holds it shared while it hands a message to the producer
	started  bool
	closed   bool
	producer sarama.AsyncProducer // nil while not connected
	client   sarama.Client        // the producer's; nil while not connected
	group    *groupHandler        // nil without subscriptions
	runDone  <-chan struct{}      // closed when the producer and consumer stop
	recv     options.Receiver

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // Start while it runs, and every goroutine it started

	stats struct{ sessions, connects, rebalanceResyncs atomic.Uint64 }
}

// Stats counts how often a transport told its receiver Connected, and why,
// for metrics and tests. Each rebalance of a consumer group ends every
// member's session; a session that cost neither a Connect nor a
// RebalanceResync resumed where the last one stopped.
type Stats struct {
	// Sessions is how many consumer group sessions reached the point where
	// every partition assigned to this member is being read: the first
	// one, and one after each rebalance or rejoin.
	Sessions uint64
	// Connects is how many times Connected was called for a connect:
	// Start's, and every rejoin after the membership failed (a lost
	// connection, a membership the coordinator expired, a failed join).
	Connects uint64
	// RebalanceResyncs is how many times Connected was called because a
	// rebalance gave this member a spec or status partition it did not read
	// in the session before, or one without a committed offset: the resyncs
	// rebalances cost.
	RebalanceResyncs uint64
}

// Healthy implements options.HealthChecker: nil once Start connected,
// while the consumer group session (if Start subscribed to anything) runs
// or rebalances, until a session fails.
func (t *Transport) Healthy() error { return t.tracker.Healthy() }

// MaxEventBytes returns the largest event Send sends: Config.MaxEventBytes
// or its default.
func (t *Transport) MaxEventBytes() int { return t.maxBytes }

// Stats returns the transport's counters. It is goroutine-safe and does
// not block.
func (t *Transport) Stats() Stats {
	return Stats{
		Sessions:         t.stats.sessions.Load(),
		Connects:         t.stats.connects.Load(),
		RebalanceResyncs: t.stats.rebalanceResyncs.Load(),
	}
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
		return nil, errors.New("kafka: the config is nil")
	}
	return New(*c)
}

// New returns a Kafka transport for cfg. It validates cfg and does no
// network I/O.
func New(cfg Config, opts ...Option) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Transport{
		cfg:      cfg,
		log:      klog.Background(),
		maxBytes: cfg.MaxEventBytes,
		backoff: options.Backoff{
			Min: time.Duration(cfg.ReconnectMinBackoff),
			Max: time.Duration(cfg.ReconnectMaxBackoff),
		},
	}
	for _, o := range opts {
		o(t)
	}
	if t.tlsConfig == nil {
		// An empty server name: each broker is verified against its own host.
		tc, err := cfg.TLS.Build("")
		if err != nil {
			return nil, err
		}
		t.tlsConfig = tc
	}
	var err error
	if t.prodCfg, err = t.saramaConfig(true); err != nil {
		return nil, fmt.Errorf("kafka: producer config: %w", err)
	}
	if t.consCfg, err = t.saramaConfig(false); err != nil {
		return nil, fmt.Errorf("kafka: consumer config: %w", err)
	}
	t.logValues = []any{"brokers", cfg.Brokers}
	t.log = t.log.WithValues(t.logValues...)
	t.tracker = connstate.New(t.log, "Kafka brokers "+strings.Join(cfg.Brokers, ","))
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

func (t *Transport) saramaConfig(producer bool) (*sarama.Config, error) {
	c := t.cfg
	sc := sarama.NewConfig()
	sc.ClientID = c.ClientID
	sc.Version, _ = c.version()
	sc.MetricRegistry = nopRegistry{}
	sc.Net.DialTimeout = time.Duration(c.DialTimeout)
	if t.tlsConfig != nil {
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = t.tlsConfig
	}
	if s := c.SASL; s != nil && s.PasswordFile != "" && s.Mechanism == SASLPlain {
		// sarama would send the password its config holds on every
		// connection: the dialer authenticates each one itself instead,
		// with the file read then, and does TLS under it.
		sc.Net.Proxy.Enable = true
		sc.Net.Proxy.Dialer = &plainDialer{user: s.Username, password: s.readPassword, tls: sc.Net.TLS.Config, sarama: sc}
		sc.Net.TLS.Enable, sc.Net.TLS.Config = false, nil
	} else if s != nil {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.User = s.Username
		sc.Net.SASL.Password = s.Password
		sc.Net.SASL.Mechanism = sarama.SASLMechanism(s.Mechanism)
		if s.Mechanism != SASLPlain {
			var password func() (string, error)
			if s.PasswordFile != "" {
				// The SCRAM client reads the file at every authentication.
				sc.Net.SASL.Password, password = filePasswordPlaceholder, s.readPassword
			}
			sc.Net.SASL.SCRAMClientGeneratorFunc = newSCRAMClient(s.Mechanism, password)
		}
	}
	// Only the topics in use, not every topic of a large cluster.
	sc.Metadata.Full = false
	if producer {
		sc.Producer.Return.Successes = true
		sc.Producer.Return.Errors = true
		sc.Producer.RequiredAcks = sarama.WaitForAll
		sc.Producer.MaxMessageBytes = t.maxBytes
		sc.Producer.Partitioner = newKeyPartitioner
		sc.Producer.Compression, _ = c.compression()
		// One request in flight per broker keeps a key's events in order
		// across retries.
		sc.Net.MaxOpenRequests = 1
	} else {
		sc.Consumer.Return.Errors = true
		sc.Consumer.Offsets.Initial = sarama.OffsetNewest
		if c.InitialOffset == "oldest" {
			sc.Consumer.Offsets.Initial = sarama.OffsetOldest
		}
		sc.Consumer.Offsets.AutoCommit.Enable = true
		sc.Consumer.Group.Session.Timeout = time.Duration(c.SessionTimeout)
		sc.Consumer.Group.Heartbeat.Interval = time.Duration(c.HeartbeatInterval)
		sc.Consumer.Group.Rebalance.Timeout = time.Duration(c.RebalanceTimeout)
		sc.Consumer.Group.Rebalance.Retry.Backoff = t.backoff.Min
	}
	if t.tune != nil {
		t.tune(sc)
	}
	return sc, sc.Validate()
}

// Start connects the producer and, when subs is not empty, joins the
// consumer group subs call for, then keeps both up until Close. It blocks
// until the group has assigned its partitions and every one is being read,
// retrying with backoff until ctx ends, except for failures that retrying
// cannot fix (credentials, certificates), which it reports at once. It calls
// r.Connected before it returns and after every later reconnect (see the
// package documentation for when a rebalance counts as one).
//
// Start and Close are linearizable: a Start called after Close, or still
// connecting when Close begins, returns an error wrapping options.ErrClosed
// and leaves nothing running; Close waits for a Start in progress to return
// (at most one connect attempt, bounded by Config.DialTimeout) and for every
// goroutine it started. A Start that fails for another reason stops what it
// started before it returns.
func (t *Transport) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	if r == nil {
		return errors.New("kafka: receiver is nil")
	}
	p, err := t.planFor(subs)
	if err != nil {
		return err
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return errStartClosed
	case t.started:
		t.mu.Unlock()
		return errors.New("kafka: started twice")
	}
	t.started, t.recv = true, r
	if !t.logSet {
		t.log = t.tracker.LoggerFrom(ctx, t.log, t.logValues...)
	}
	// Start itself holds an entry, taken before Close can wait: Close
	// returns only after Start has, so Start never leaves a goroutine or a
	// client behind a Close that already returned.
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()

	// Close ends the first connect too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()

	runCtx, stopRun := context.WithCancel(t.ctx)
	var run sync.WaitGroup // the goroutines this Start started
	ok := false
	defer func() {
		if !ok {
			stopRun()
			run.Wait()
		}
	}()

	t.tracker.Connecting()
	var client sarama.Client
	if err := t.retry(ctx, "connect producer", func() error {
		c, err := sarama.NewClient(t.cfg.Brokers, t.prodCfg)
		if err != nil {
			return err
		}
		// NewClient does not talk to the brokers when it does not fetch the
		// whole cluster's metadata: fetching the topics' proves the brokers
		// reachable (and our credentials good) and the topics there.
		if err := c.RefreshMetadata(t.cfg.Topics.Names()...); err != nil {
			_ = c.Close()
			return err
		}
		client = c
		return nil
	}); err != nil {
		return err
	}
	producer, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("kafka: producer: %w", err)
	}
	t.mu.Lock()
	if t.closingLocked() {
		t.mu.Unlock()
		_ = producer.Close()
		_ = client.Close()
		return errStartClosed
	}
	t.producer, t.client, t.runDone = producer, client, runCtx.Done()
	t.goLocked(&run, func() { t.dispatch(runCtx, client, producer) })
	if len(subs) == 0 {
		// Started: a Close from now on stops what runs.
		ok = true
		t.mu.Unlock()
		t.tracker.Connected()
		t.stats.connects.Add(1)
		r.Connected()
		return nil
	}
	t.mu.Unlock()

	cc := *t.consCfg
	cc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{&balancer{pins: p.pins}}
	var group sarama.ConsumerGroup
	if err := t.retry(ctx, "connect consumer group "+p.groupID, func() (err error) {
		group, err = sarama.NewConsumerGroup(t.cfg.Brokers, p.groupID, &cc)
		return err
	}); err != nil {
		return err
	}
	h := newGroupHandler(t, p)
	t.mu.Lock()
	if t.closingLocked() {
		t.mu.Unlock()
		_ = group.Close()
		return errStartClosed
	}
	t.group = h
	t.goLocked(&run, func() { t.consume(runCtx, group, h, &cc) })
	t.mu.Unlock()

	select {
	case <-h.joined:
	case <-ctx.Done():
		if t.ctx.Err() != nil {
			return errStartClosed
		}
		return fmt.Errorf("kafka: join consumer group %s: %w (last error: %v)", p.groupID, ctx.Err(), h.lastError())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closingLocked() {
		// The group was joined (and the receiver told), but Close began
		// first: report the Start as the Close saw it.
		return errStartClosed
	}
	ok = true
	t.log.V(2).Info("connected", "group", p.groupID, "topics", p.topics)
	return nil
}

var errStartClosed = fmt.Errorf("kafka: start: %w", options.ErrClosed)

// closingLocked reports whether Close has begun. t.mu must be held.
func (t *Transport) closingLocked() bool { return t.closed || t.ctx.Err() != nil }

// goLocked runs f on a goroutine that Close waits for, and run too. t.mu
// must be held and Close not begun (closingLocked false): taking the
// WaitGroup entry under the lock is what keeps it from racing with Close's
// Wait.
func (t *Transport) goLocked(run *sync.WaitGroup, f func()) {
	t.wg.Add(1)
	run.Add(1)
	go func() {
		defer t.wg.Done()
		defer run.Done()
		f()
	}()
}

// retry calls fn with backoff until it succeeds, fails for good, or ctx ends.
func (t *Transport) retry(ctx context.Context, what string, fn func() error) error {
	_, err := connstate.Retry(ctx, t.tracker, t.backoff, func(context.Context) (struct{}, error) {
		if err := fn(); err != nil {
			return struct{}{}, fmt.Errorf("%s: %w", what, err)
		}
		return struct{}{}, nil
	}, permanent)
	switch {
	case err == nil:
		return nil
	case !permanent(err) && t.ctx.Err() != nil:
		return fmt.Errorf("kafka: %s: %w", what, options.ErrClosed)
	}
	return fmt.Errorf("kafka: %w", err)
}

// permanent reports failures to connect that retrying cannot fix.
func permanent(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	return errors.Is(err, sarama.ErrSASLAuthenticationFailed) || errors.Is(err, sarama.ErrUnsupportedSASLMechanism) ||
		errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// dispatch owns the producer: it hands each result to the Send waiting for
// it, and when the run ends it closes the producer (which first flushes what
// it holds) and the client.
func (t *Transport) dispatch(ctx context.Context, client sarama.Client, p sarama.AsyncProducer) {
	successes, errs, stop := p.Successes(), p.Errors(), ctx.Done()
	for successes != nil || errs != nil {
		select {
		case m, ok := <-successes:
			if !ok {
				successes = nil
				continue
			}
			reply(m, nil)
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			reply(pe.Msg, pe.Err)
		case <-stop:
			stop = nil
			// No Send is between its state check and its hand-over once
			// the lock is ours: closing the input is safe.
			t.mu.Lock()
			t.producer = nil
			t.mu.Unlock()
			p.AsyncClose()
		}
	}
	if err := client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
		t.log.V(2).Info("closing producer client", "err", err)
	}
}

func reply(m *sarama.ProducerMessage, err error) {
	if m == nil {
		return
	}
	if ch, ok := m.Metadata.(chan error); ok {
		ch <- err // buffered: one result per message
	}
}

// consume owns the consumer group: it rejoins after every session until
// the run ends, then leaves the group. A membership Redial ended leaves
// the group and joins it anew, with connections of its own.
func (t *Transport) consume(ctx context.Context, group sarama.ConsumerGroup, h *groupHandler, cc *sarama.Config) {
	errsDone := t.consumerErrors(group, h)
	defer func() {
		if err := group.Close(); err != nil {
			t.log.V(2).Info("leaving consumer group", "group", h.plan.groupID, "err", err)
		}
		<-errsDone
	}()
	for attempt := 0; ; {
		mctx, leave := h.newSession(ctx)
		err := group.Consume(mctx, h.plan.topics, h)
		leave(nil)
		if ctx.Err() != nil {
			return
		}
		if redial := (*redialError)(nil); errors.As(context.Cause(mctx), &redial) {
			h.ended(errors.New("redial")) // whatever the session did: the next join is a connect
			t.log.Info("connection lost; reconnecting", "to", "Kafka brokers", "group", h.plan.groupID, "err", t.tracker.Lost(redial.cause))
			if err := group.Close(); err != nil {
				t.log.V(2).Info("leaving consumer group", "group", h.plan.groupID, "err", err)
			}
			<-errsDone
			if err := t.retry(ctx, "connect consumer group "+h.plan.groupID, func() (err error) {
				group, err = sarama.NewConsumerGroup(t.cfg.Brokers, h.plan.groupID, cc)
				return err
			}); err != nil {
				group = closedGroup{}
				return
			}
			errsDone = t.consumerErrors(group, h)
			attempt = 0
			continue
		}
		if complete, rebalanced := h.ended(err); complete {
			if !rebalanced {
				t.log.V(2).Info("consumer group session ended; rejoining", "group", h.plan.groupID, "cause", h.lastCause())
			}
			attempt = 0 // rejoin at once
			continue
		}
		if err == nil {
			err = h.lastError()
		} else {
			h.setLastErr(err)
		}
		if err == nil {
			err = errors.New("the session ended before it consumed")
		}
		err = fmt.Errorf("consumer group %s: %w", h.plan.groupID, err)
		t.tracker.Lost(err)
		delay := t.backoff.Delay(attempt)
		t.tracker.Failed(delay, err)
		if !connstate.Sleep(ctx, delay) {
			return
		}
		attempt++
	}
}

// closedGroup stands for a consumer group that could not be made again:
// there is nothing to leave.
type closedGroup struct{ sarama.ConsumerGroup }

func (closedGroup) Close() error { return nil }

// consumerErrors logs group's background errors on a goroutine of its own
// until the group closes, and returns a channel closed then.
func (t *Transport) consumerErrors(group sarama.ConsumerGroup, h *groupHandler) <-chan struct{} {
	done := make(chan struct{})
	errs := group.Errors()
	if errs == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		for err := range errs {
			h.setLastErr(err)
			t.log.V(2).Info("consumer error", "group", h.plan.groupID, "err", err)
		}
	}()
	return done
}

// Probe implements options.Prober: it asks the brokers for the end of each
// partition of sub's topic this member reads, and evt reaches the receiver
// once the member has read that far in every one of them (at once, if it
// reads none). Records of other subscribers that the member skips count:
// a probe asks whether the partitions are read, not whether a record for
// this member came.
func (t *Transport) Probe(ctx context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	t.mu.RLock()
	client, h := t.client, t.group
	t.mu.RUnlock()
	if client == nil || h == nil {
		return fmt.Errorf("kafka: probe: %w", options.ErrNotConnected)
	}
	topic := t.cfg.Topics.Topic(sub.Role)
	claims, ok := h.claims(topic)
	if !ok {
		return fmt.Errorf("kafka: probe: %w: the consumer group is rebalancing", options.ErrNotConnected)
	}
	ends := make(map[int32]int64, len(claims))
	for p := range claims {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("kafka: probe %s/%d: %w: %w", topic, p, options.ErrNotConnected, err)
		}
		ends[p] = end
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closingLocked() {
		return fmt.Errorf("kafka: probe: %w", options.ErrClosed)
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.awaitProbe(ctx, h, topic, ends, options.NewDelivery(options.Route{Role: sub.Role}, evt, nil))
	}()
	return nil
}

// probePoll is how often a probe looks whether the member read far enough.
const probePoll = 20 * time.Millisecond

// awaitProbe hands d over once the member has read topic up to ends in
// each partition it still reads, unless ctx or the transport ends first.
func (t *Transport) awaitProbe(ctx context.Context, h *groupHandler, topic string, ends map[int32]int64, d *options.Delivery) {
	ticker := time.NewTicker(probePoll)
	defer ticker.Stop()
	for {
		claims, ok := h.claims(topic)
		behind := !ok
		for p, end := range ends {
			if tr, reads := claims[p]; reads && tr.seen.Load() < end {
				behind = true
			}
		}
		if !behind {
			t.recv.Deliver(d)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Redial implements options.Prober: the consumer group's membership ends,
// and the transport joins again with new connections. The producer's
// connections stay.
func (t *Transport) Redial(cause error) {
	t.mu.RLock()
	h := t.group
	t.mu.RUnlock()
	if h != nil {
		h.redial(cause)
	}
}

// receive handles one record on a claim's goroutine: skip what is not for
// this subscriber, report what is not a CloudEvent, deliver the rest. done
// marks the record handled; every path calls it once (Delivery.Done for
// delivered events).
func (t *Transport) receive(p *plan, role options.Role, m *sarama.ConsumerMessage, done func()) {
	route := routeOf(role, m)
	if !p.match(role, route, m) {
		done()
		return
	}
	evt, err := decode(m)
	if err != nil {
		t.recv.Malformed(fmt.Errorf("kafka: record %s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err))
		done()
		return
	}
	if t.log.V(4).Enabled() {
		t.log.V(4).Info("received", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "id", evt.ID(), "type", evt.Type())
	}
	t.recv.Deliver(options.NewDelivery(route, evt, done))
}

// contentTypeHeader is the record header of the CloudEvents Kafka binding
// that holds datacontenttype (binary mode) or the event format (structured
// mode); ceHeaderPrefix starts the headers of attributes and extensions.
const (
	contentTypeHeader = "content-type"
	ceHeaderPrefix    = "ce_"
)

// decode turns a record into the event it carries, in either content mode
// of the CloudEvents Kafka binding. Its errors say what was wrong with the
// record: "not a CloudEvent: …" for records that do not follow the binding,
// "invalid CloudEvent: …" for events that lack what CloudEvents requires.
// Headers are matched without regard to case; other headers (SourceHeader,
// tracing) are not looked at.
func decode(m *sarama.ConsumerMessage) (evt *cloudevents.Event, err error) {
	defer func() {
		// The binding is third-party code fed by the network: a panic in it
		// must cost one record, not the process.
		if r := recover(); r != nil {
			evt, err = nil, fmt.Errorf("decoder panic: %v", r)
		}
	}()
	headers := make(map[string][]byte, len(m.Headers))
	names := make(map[string]string, len(m.Headers)) // as the record spells them
	for _, h := range m.Headers {
		if h == nil {
			continue
		}
		k := strings.ToLower(string(h.Key))
		if k != contentTypeHeader && !strings.HasPrefix(k, ceHeaderPrefix) {
			continue
		}
		if prev, ok := headers[k]; ok && !bytes.Equal(prev, h.Value) {
			// Which one the binding would take is up to map order.
			return nil, fmt.Errorf("not a CloudEvent: headers %q and %q: one attribute, two values", names[k], h.Key)
		}
		headers[k], names[k] = h.Value, string(h.Key)
	}
	contentType := string(headers[contentTypeHeader])
	var msg binding.MessageReader
	mode := "binary mode"
	structured := format.Lookup(contentType) != nil
	if structured {
		// The binding's structured reader; like the binding, a CloudEvents
		// content type wins over ce_ headers.
		msg = kafka_sarama.NewMessage(m.Value, contentType, headers)
		mode = fmt.Sprintf("structured mode (content-type %q)", contentType)
	} else if v := ceSpecs.Version(string(headers[ceHeaderPrefix+"specversion"])); v != nil {
		if err := checkBinaryHeaders(headers, names); err != nil {
			return nil, fmt.Errorf("not a CloudEvent: binary mode: %w", err)
		}
		msg = &binaryRecord{version: v, headers: headers, value: m.Value}
	} else {
		return nil, fmt.Errorf("not a CloudEvent: %w", unknownEncoding(headers, names))
	}
	evt, err = binding.ToEvent(context.Background(), msg)
	if err != nil {
		return nil, fmt.Errorf("not a CloudEvent: %s: %w", mode, err)
	}
	if err := evt.Validate(); err != nil {
		return nil, fmt.Errorf("invalid CloudEvent: %s: %w", mode, err)
	}
	if structured {
		// The SDK's 0.3 events take any extension name from JSON (binary
		// mode's names are checked above); a header cannot carry upper
		// case, so such an event would change on its way on.
		var bad []string
		for name := range evt.Extensions() {
			if !isAttributeName(name) {
				bad = append(bad, strconv.Quote(name))
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			return nil, fmt.Errorf("invalid CloudEvent: %s: extension %s: attribute names are lower-case letters and digits only", mode, strings.Join(bad, ", "))
		}
	}
	return evt, nil
}

// isAttributeName reports whether name is a CloudEvents attribute name:
// lower-case ASCII letters and digits, at least one.
func isAttributeName(name string) bool {
	return name != "" && strings.IndexFunc(name, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }) < 0
}

// ceSpecs are the CloudEvents versions with their binary-mode header names.
var ceSpecs = spec.WithPrefix(ceHeaderPrefix)

// binaryRecord is a record in the binary content mode, read in a fixed
// order: specversion first, then the other headers by name, then the data.
// The binding's own reader walks a map, and the event it builds depends on
// the order (a 0.3 attribute set before specversion is refused), so the
// same record decoded differently from one call to the next.
type binaryRecord struct {
	version spec.Version
	headers map[string][]byte // lower-cased names
	value   []byte
}

var _ binding.MessageMetadataReader = (*binaryRecord)(nil)

func (r *binaryRecord) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	a := r.version.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	name := a.PrefixedName()
	if k == spec.DataContentType {
		if _, ok := r.headers[contentTypeHeader]; ok {
			name = contentTypeHeader
		}
	}
	if v, ok := r.headers[strings.ToLower(name)]; ok {
		return a, string(v)
	}
	return a, nil
}

func (r *binaryRecord) GetExtension(name string) any {
	if v, ok := r.headers[ceHeaderPrefix+name]; ok {
		return string(v)
	}
	return nil
}

func (r *binaryRecord) ReadEncoding() binding.Encoding { return binding.EncodingBinary }

func (r *binaryRecord) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (r *binaryRecord) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	if err := w.SetAttribute(r.version.AttributeFromKind(spec.SpecVersion), r.version.String()); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(r.headers)) {
		v := string(r.headers[k])
		var err error
		switch name, ok := strings.CutPrefix(k, ceHeaderPrefix); {
		case k == contentTypeHeader:
			err = w.SetAttribute(r.version.AttributeFromKind(spec.DataContentType), v)
		case !ok || name == "specversion":
		case r.version.Attribute(k) != nil:
			err = w.SetAttribute(r.version.Attribute(k), v)
		default:
			err = w.SetExtension(name, v)
		}
		if err != nil {
			return err
		}
	}
	if r.value != nil {
		return w.SetData(bytes.NewReader(r.value))
	}
	return nil
}

// unknownEncoding says why a record is in neither content mode.
func unknownEncoding(headers map[string][]byte, names map[string]string) error {
	const sv = ceHeaderPrefix + "specversion"
	if v, ok := headers[sv]; ok {
		return fmt.Errorf("header %s %q: not a CloudEvents version (want 1.0 or 0.3)", names[sv], v)
	}
	if ct, ok := headers[contentTypeHeader]; ok {
		return fmt.Errorf("no %s header, and content-type %q is not a CloudEvents event format (want %s)", sv, ct, cloudevents.ApplicationCloudEventsJSON)
	}
	return fmt.Errorf("no %s header and no content-type header", sv)
}

// checkBinaryHeaders checks what the binding would otherwise report without
// naming the header: every "ce_" header names an attribute or extension in
// lower-case letters and digits, and datacontenttype is given once.
func checkBinaryHeaders(headers map[string][]byte, names map[string]string) error {
	var errs []error
	for k := range headers {
		name, ok := strings.CutPrefix(k, ceHeaderPrefix)
		if !ok {
			continue
		}
		if !isAttributeName(name) {
			errs = append(errs, fmt.Errorf("header %q: attribute names are letters and digits only", names[k]))
		}
	}
	const dct = ceHeaderPrefix + "datacontenttype"
	if v, ok := headers[dct]; ok {
		if ct, ok := headers[contentTypeHeader]; ok && !bytes.Equal(v, ct) {
			errs = append(errs, fmt.Errorf("headers %q and %q: two datacontenttypes", names[contentTypeHeader], names[dct]))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// encode makes the record Send writes for evt on route: binary content
// mode, keyed by Key(route), with SourceHeader for spec and status events.
// decode turns it back into evt.
func encode(ctx context.Context, topic string, route options.Route, evt *cloudevents.Event) (*sarama.ProducerMessage, error) {
	msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(Key(route))}
	if err := kafka_sarama.WriteProducerMessage(kafka_sarama.WithSkipKeyMapping(ctx), binding.ToMessage(evt), msg); err != nil {
		return nil, fmt.Errorf("encode event %s: %w", evt.ID(), err)
	}
	if route.Role != options.RoleStatusResync {
		msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(SourceHeader), Value: []byte(route.Source)})
	}
	return msg, nil
}

// Send writes evt to the topic of route's role, keyed by Key(route), and
// waits until the brokers acknowledged it (acks=all) or ctx ends. An event
// larger than Config.MaxEventBytes fails at once with options.ErrTooLarge;
// failures to reach the brokers wrap options.ErrNotConnected. It is
// goroutine-safe; concurrent Sends are batched together.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: send: %w", err)
	}
	if err := options.CheckEvent(evt); err != nil {
		return fmt.Errorf("kafka: send: %w", err)
	}
	if err := route.Validate(); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	topic := t.cfg.Topics.Topic(route.Role)
	msg, err := encode(ctx, topic, route, evt)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	if size := msg.ByteSize(2); size > t.maxBytes {
		return fmt.Errorf("kafka: event %s of type %s: %w: %d bytes, limit %d", evt.ID(), evt.Type(), options.ErrTooLarge, size, t.maxBytes)
	}
	res := make(chan error, 1)
	msg.Metadata = res

	t.mu.RLock()
	producer, runDone := t.producer, t.runDone
	var state error
	switch {
	case t.closed || t.ctx.Err() != nil:
		state = options.ErrClosed
	case !t.started:
		state = options.ErrNotStarted
	case producer == nil:
		state = options.ErrNotConnected
	}
	if state != nil {
		t.mu.RUnlock()
		return fmt.Errorf("kafka: send to %s: %w", topic, state)
	}
	select {
	case producer.Input() <- msg:
	case <-ctx.Done():
		t.mu.RUnlock()
		return fmt.Errorf("kafka: send to %s: %w", topic, ctx.Err())
	case <-runDone:
		t.mu.RUnlock()
		return fmt.Errorf("kafka: send to %s: %w", topic, options.ErrClosed)
	}
	t.mu.RUnlock()

	select {
	case err := <-res:
		if err != nil {
			return sendError(topic, evt, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kafka: send to %s: %w (the event may still arrive)", topic, ctx.Err())
	}
}

// sendError classifies a producer failure.
func sendError(topic string, evt *cloudevents.Event, err error) error {
	switch {
	case errors.Is(err, sarama.ErrMessageSizeTooLarge), errors.Is(err, sarama.ErrMessageSetSizeTooLarge):
		return fmt.Errorf("kafka: event %s of type %s to %s: %w: %w", evt.ID(), evt.Type(), topic, options.ErrTooLarge, err)
	case errors.Is(err, sarama.ErrShuttingDown), errors.Is(err, sarama.ErrClosedClient):
		return fmt.Errorf("kafka: send to %s: %w: %w", topic, options.ErrClosed, err)
	case fatalSendError(err):
		return fmt.Errorf("kafka: send to %s: %w", topic, err)
	}
	return fmt.Errorf("kafka: send to %s: %w: %w", topic, options.ErrNotConnected, err)
}

// fatalSendError reports failures that reconnecting does not fix.
func fatalSendError(err error) bool {
	var ce sarama.ConfigurationError
	if errors.As(err, &ce) {
		return true
	}
	for _, k := range []sarama.KError{
		sarama.ErrTopicAuthorizationFailed, sarama.ErrClusterAuthorizationFailed, sarama.ErrInvalidTopic,
		sarama.ErrUnsupportedVersion, sarama.ErrSASLAuthenticationFailed, sarama.ErrInvalidRecord,
		sarama.ErrUnsupportedForMessageFormat, sarama.ErrPolicyViolation, sarama.ErrInvalidRequiredAcks,
	} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// Close stops reading (giving the consumer group's partitions up after
// DrainTimeout at most, committing what was Done), flushes the producer,
// disconnects, and waits for a Start in progress to return and for every
// goroutine the transport started, or until ctx ends. It is idempotent and
// goroutine-safe.
func (t *Transport) Close(ctx context.Context) error {
	// Cancel before taking the lock: a Send holds the lock shared while it
	// waits for the producer, and the cancel is what releases it.
	t.cancel()
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.tracker.Closed()
	// No WaitGroup entry is taken after this point (goLocked checks closed
	// under the lock), so the Wait cannot miss one.
	if err := lifecycle.Wait(ctx, &t.wg); err != nil {
		return fmt.Errorf("kafka: close: %w", err)
	}
	return nil
}
