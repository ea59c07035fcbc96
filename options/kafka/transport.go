package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/options"
)

// Option configures what a config file cannot hold.
type Option func(*Transport)

// WithLogger sets the transport's logger. Default: klog.Background().
func WithLogger(l logr.Logger) Option { return func(t *Transport) { t.log = l } }

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
// session). Set MetricRegistry to collect sarama's own metrics (the
// transport gives it a registry that keeps none). Default: none.
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
	maxBytes  int
	prodCfg   *sarama.Config
	consCfg   *sarama.Config

	mu       sync.RWMutex // Send holds it shared while it hands a message to the producer
	started  bool
	closed   bool
	producer sarama.AsyncProducer // nil while not connected
	runDone  <-chan struct{}      // closed when the producer and consumer stop
	recv     options.Receiver

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ options.Transport = (*Transport)(nil)

// New returns a Kafka transport for cfg. It validates cfg and does no
// network I/O.
func New(cfg Config, opts ...Option) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:      cfg,
		log:      klog.Background(),
		maxBytes: cfg.maxEventBytes(),
		backoff: options.Backoff{
			Min: orDefault(cfg.ReconnectMinBackoff, DefaultReconnectMinBackoff),
			Max: orDefault(cfg.ReconnectMaxBackoff, DefaultReconnectMaxBackoff),
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
	t.log = t.log.WithValues("brokers", cfg.Brokers)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

func (t *Transport) saramaConfig(producer bool) (*sarama.Config, error) {
	c := t.cfg
	sc := sarama.NewConfig()
	sc.ClientID = c.clientID()
	sc.Version, _ = c.version()
	sc.MetricRegistry = nopRegistry{}
	sc.Net.DialTimeout = orDefault(c.DialTimeout, DefaultDialTimeout)
	if t.tlsConfig != nil {
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = t.tlsConfig
	}
	if s := c.SASL; s != nil {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.User = s.Username
		sc.Net.SASL.Password = s.Password
		sc.Net.SASL.Mechanism = sarama.SASLMechanism(s.Mechanism)
		if s.Mechanism != SASLPlain {
			sc.Net.SASL.SCRAMClientGeneratorFunc = newSCRAMClient(s.Mechanism)
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
		sc.Consumer.Group.Session.Timeout = c.sessionTimeout()
		sc.Consumer.Group.Heartbeat.Interval = c.heartbeatInterval()
		sc.Consumer.Group.Rebalance.Timeout = c.rebalanceTimeout()
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
// r.Connected before it returns and after every later (re)join of the group.
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
		return fmt.Errorf("kafka: start: %w", options.ErrClosed)
	case t.started:
		t.mu.Unlock()
		return errors.New("kafka: started twice")
	}
	t.started, t.recv = true, r
	t.mu.Unlock()

	// Close ends the first connect too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()

	runCtx, stopRun := context.WithCancel(t.ctx)
	ok := false
	defer func() {
		if !ok {
			stopRun()
			t.wg.Wait()
		}
	}()

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
	t.producer, t.runDone = producer, runCtx.Done()
	t.mu.Unlock()
	t.wg.Add(1)
	go t.dispatch(runCtx, client, producer)

	if len(subs) == 0 {
		t.log.V(2).Info("connected")
		ok = true
		r.Connected()
		return nil
	}

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
	t.wg.Add(2)
	go t.consume(runCtx, group, h)
	go t.consumerErrors(group, h)
	select {
	case <-h.joined:
		t.log.V(2).Info("connected", "group", p.groupID, "topics", p.topics)
		ok = true
		return nil
	case <-ctx.Done():
		if t.ctx.Err() != nil {
			return fmt.Errorf("kafka: start: %w", options.ErrClosed)
		}
		return fmt.Errorf("kafka: join consumer group %s: %w (last error: %v)", p.groupID, ctx.Err(), h.lastError())
	}
}

// retry calls fn with backoff until it succeeds, fails for good, or ctx ends.
func (t *Transport) retry(ctx context.Context, what string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if permanent(err) {
			return fmt.Errorf("kafka: %s: %w", what, err)
		}
		t.log.V(2).Info("retrying", "what", what, "attempt", attempt, "err", err)
		if !sleep(ctx, t.backoff.Delay(attempt)) {
			if t.ctx.Err() != nil {
				return fmt.Errorf("kafka: %s: %w", what, options.ErrClosed)
			}
			return fmt.Errorf("kafka: %s: %w (last error: %w)", what, ctx.Err(), err)
		}
	}
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

func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// dispatch owns the producer: it hands each result to the Send waiting for
// it, and when the run ends it closes the producer (which first flushes what
// it holds) and the client.
func (t *Transport) dispatch(ctx context.Context, client sarama.Client, p sarama.AsyncProducer) {
	defer t.wg.Done()
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
// the run ends, then leaves the group.
func (t *Transport) consume(ctx context.Context, group sarama.ConsumerGroup, h *groupHandler) {
	defer t.wg.Done()
	for attempt := 0; ; {
		h.newSession()
		err := group.Consume(ctx, h.plan.topics, h)
		if ctx.Err() != nil {
			break
		}
		if err == nil && h.sessionComplete() {
			attempt = 0 // a rebalance: rejoin at once
			continue
		}
		if err == nil {
			err = h.lastError()
		} else {
			h.setLastErr(err)
		}
		if attempt == 0 {
			t.log.Info("consumer group session failed; rejoining", "group", h.plan.groupID, "err", err)
		} else {
			t.log.V(2).Info("rejoin failed", "group", h.plan.groupID, "attempt", attempt, "err", err)
		}
		if !sleep(ctx, t.backoff.Delay(attempt)) {
			break
		}
		attempt++
	}
	if err := group.Close(); err != nil {
		t.log.V(2).Info("leaving consumer group", "group", h.plan.groupID, "err", err)
	}
}

// consumerErrors logs the group's background errors until it closes.
func (t *Transport) consumerErrors(group sarama.ConsumerGroup, h *groupHandler) {
	defer t.wg.Done()
	for err := range group.Errors() {
		h.setLastErr(err)
		t.log.V(2).Info("consumer error", "group", h.plan.groupID, "err", err)
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

// bindingExtensions are the record coordinates the CloudEvents binding adds
// to every event it reads; they are not part of what was sent.
var bindingExtensions = []string{"kafkaoffset", "kafkapartition", "kafkatopic"}

func decode(m *sarama.ConsumerMessage) (evt *cloudevents.Event, err error) {
	defer func() {
		// The binding is third-party code fed by the network: a panic in it
		// must cost one record, not the process.
		if r := recover(); r != nil {
			evt, err = nil, fmt.Errorf("decoder panic: %v", r)
		}
	}()
	msg := kafka_sarama.NewMessageFromConsumerMessage(m)
	if msg.ReadEncoding() == binding.EncodingUnknown {
		return nil, errors.New("not a CloudEvent: no ce_specversion header and no CloudEvents content type")
	}
	evt, err = binding.ToEvent(context.Background(), msg)
	if err != nil {
		return nil, fmt.Errorf("not a CloudEvent: %w", err)
	}
	for _, ext := range bindingExtensions {
		if _, ok := evt.Extensions()[ext]; ok {
			evt.SetExtension(ext, nil) // nil removes it
		}
	}
	if err := evt.Validate(); err != nil {
		return nil, fmt.Errorf("invalid CloudEvent: %w", err)
	}
	return evt, nil
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
	if evt == nil {
		return errors.New("kafka: send: event is nil")
	}
	if err := route.Validate(); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	topic := t.cfg.Topics.Topic(route.Role)
	msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(Key(route))}
	if err := kafka_sarama.WriteProducerMessage(kafka_sarama.WithSkipKeyMapping(ctx), binding.ToMessage(evt), msg); err != nil {
		return fmt.Errorf("kafka: encode event %s: %w", evt.ID(), err)
	}
	if route.Role != options.RoleStatusResync {
		msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(SourceHeader), Value: []byte(route.Source)})
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
// disconnects, and waits for the transport's goroutines, or until ctx ends.
// It is idempotent.
func (t *Transport) Close(ctx context.Context) error {
	t.cancel()
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kafka: close: %w", ctx.Err())
	}
}
