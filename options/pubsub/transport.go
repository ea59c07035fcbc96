package pubsub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
	"github.com/go-logr/logr"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
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

// WithClientOptions adds options of Google's API client, for what Config
// does not hold (other credentials, a quota project, ...).
func WithClientOptions(opts ...option.ClientOption) Option {
	return func(t *Transport) { t.clientOpts = append(t.clientOpts, opts...) }
}

// Transport carries CloudEvents over Google Cloud Pub/Sub. It implements
// options.Transport; see the package documentation for its topics and
// subscriptions. Start it once; Send is goroutine-safe; Close is
// idempotent and may be called from any goroutine.
type Transport struct {
	cfg        Config
	clientOpts []option.ClientOption
	log        logr.Logger
	logSet     bool
	backoff    options.Backoff
	tracker    *connstate.Tracker

	mu         sync.Mutex
	started    bool
	closed     bool
	up         bool                // Start has returned nil and no loss is reported
	conns      map[uint64]struct{} // open connections to the service, by connWatcher's tags
	lastConn   uint64              // the last tag connWatcher gave
	client     *pubsub.Client
	conn       *grpc.ClientConn // ours when DisableTLS, else nil
	publishers map[options.Role]*pubsub.Publisher
	recv       options.Receiver
	subs       []subscription
	cancel     context.CancelFunc // stops receiving
	receiving  sync.WaitGroup     // the receive loops, and a Redial's restart of them
	redialing  bool
	loops      *sync.WaitGroup // the receive loops that run
	probes     map[string]bool // IDs of the probes sent and not back yet
	// held are the received messages neither acknowledged nor given back
	// yet: those of Deliveries whose Done has not run. Close gives them
	// back (see Close).
	held map[*pubsub.Message]struct{}
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
		return nil, errors.New("pubsub: the config is nil")
	}
	return New(*c)
}

// New returns a Pub/Sub transport for cfg. It validates cfg and does no
// network I/O.
func New(cfg Config, opts ...Option) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Transport{
		cfg:   cfg,
		conns: map[uint64]struct{}{},
		log:   klog.Background(),
		backoff: options.Backoff{
			Min: time.Duration(cfg.ReconnectMinBackoff),
			Max: time.Duration(cfg.ReconnectMaxBackoff),
		},
	}
	for _, o := range opts {
		o(t)
	}
	peer := "Pub/Sub in project " + cfg.ProjectID
	if cfg.Endpoint != "" {
		peer += " at " + cfg.Endpoint
	}
	t.log = t.log.WithValues("project", cfg.ProjectID)
	t.tracker = connstate.New(t.log, peer)
	return t, nil
}

// Healthy implements options.HealthChecker: nil while connected.
func (t *Transport) Healthy() error { return t.tracker.Healthy() }

// MaxEventBytes returns the largest event Send sends: Config.MaxEventBytes.
func (t *Transport) MaxEventBytes() int { return t.cfg.MaxEventBytes }

// subscription is one subscription a transport reads, resolved from an
// options.Subscription.
type subscription struct {
	role  options.Role
	topic string // full name
	name  string // full name
	// filter is what the transport makes it with when it provisions it:
	// only events whose attribute has the client's ID.
	filter    string
	attribute string
	// watch marks a subscription of the transport's own, made at Start
	// and deleted at Close, that copies every event of its topic.
	watch bool
}

// Start connects, provisions what Config.Provision asks for, checks that
// the subscriptions exist, and starts reading them. It blocks until the
// service has answered, retrying with backoff until ctx ends, except for
// failures retrying cannot fix (a missing subscription, refused
// credentials), which it reports at once. It calls r.Connected before it
// returns and whenever a lost connection comes back.
func (t *Transport) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	if r == nil {
		return errors.New("pubsub: Start needs a receiver")
	}
	resolved, err := t.resolve(subs)
	if err != nil {
		return fmt.Errorf("pubsub: %w", err)
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return fmt.Errorf("pubsub: Start: %w", options.ErrClosed)
	case t.started:
		t.mu.Unlock()
		return errors.New("pubsub: Start called twice")
	}
	t.started, t.recv = true, r
	t.mu.Unlock()
	if !t.logSet {
		t.log = t.tracker.LoggerFrom(ctx, t.log, "project", t.cfg.ProjectID)
	}

	client, err := t.newClient(ctx)
	if err != nil {
		return fmt.Errorf("pubsub: %w", err)
	}
	attempt := func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(t.cfg.ConnectTimeout))
		defer cancel()
		return struct{}{}, t.prepare(ctx, client, resolved)
	}
	if _, err := connstate.Connect(ctx, t.tracker, t.backoff, attempt, refused); err != nil {
		t.closeClient(client)
		return fmt.Errorf("pubsub: %w", err)
	}

	publishers := map[options.Role]*pubsub.Publisher{}
	for _, role := range []options.Role{options.RoleSpec, options.RoleStatus, options.RoleStatusResync, options.RoleSpecResync} {
		p := client.Publisher(t.full("topics", t.topicOf(role)))
		// A client sends mostly one event at a time (a controller's
		// write), so waiting the default 10 ms for a batch to fill only
		// delays it; events sent while a batch is in flight still batch.
		p.PublishSettings.DelayThreshold = time.Millisecond
		publishers[role] = p
	}
	recvCtx, cancel := context.WithCancel(context.Background())
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		cancel()
		t.closeClient(client)
		return fmt.Errorf("pubsub: Start: %w", options.ErrClosed)
	}
	t.client, t.publishers, t.cancel, t.subs = client, publishers, cancel, resolved
	// Up unless the connection that answered closed meanwhile; then the
	// next to open counts as the way back.
	t.up = len(t.conns) > 0
	t.receiveLocked(recvCtx, new(sync.WaitGroup))
	t.mu.Unlock()
	r.Connected()
	return nil
}

// resolve names the subscription each of subs reads. Pub/Sub's are per
// client: an agent's to specs for its cluster and to every source's
// status resync requests, a source's to statuses for it and to every
// agent's spec resync requests.
func (t *Transport) resolve(subs []options.Subscription) ([]subscription, error) {
	var cluster, source string
	for _, s := range subs {
		switch {
		case s.Role == options.RoleSpec && s.Cluster != "" && s.Source == "":
			cluster = s.Cluster
		case s.Role == options.RoleStatus && s.Source != "" && s.Cluster == "":
			source = s.Source
		}
	}
	var out []subscription
	for i, s := range subs {
		var sub subscription
		var topic, name, id, kind string
		switch {
		case s.Role == options.RoleSpec && s.Cluster != "" && s.Source == "":
			topic, name, id, kind = t.cfg.Topics.SourceEvents, t.cfg.Subscriptions.SourceEvents, cluster, "cluster"
			sub.attribute = "ce-clustername"
		case s.Role == options.RoleStatus && s.Source != "" && s.Cluster == "":
			topic, name, id, kind = t.cfg.Topics.AgentEvents, t.cfg.Subscriptions.AgentEvents, source, "source"
			sub.attribute = "ce-originalsource"
		case s.Role == options.RoleStatusResync && s.Source == "" && s.Cluster == "" && (cluster != "" || t.cfg.Subscriptions.SourceBroadcast != ""):
			topic, name, id, kind = t.cfg.Topics.SourceBroadcast, t.cfg.Subscriptions.SourceBroadcast, cluster, "cluster"
		case s.Role == options.RoleSpecResync && s.Source == "" && s.Cluster == "" && (source != "" || t.cfg.Subscriptions.AgentBroadcast != ""):
			topic, name, id, kind = t.cfg.Topics.AgentBroadcast, t.cfg.Subscriptions.AgentBroadcast, source, "source"
		case s.Source == "" && s.Cluster == "" && cluster == "" && source == "":
			topic, sub.watch = t.topicOf(s.Role), true
			name = topicID(topic) + "-watch-" + randomID()
		default:
			return nil, fmt.Errorf("subscription %d (%s, source %q, cluster %q): Pub/Sub subscriptions are an agent's (specs for one cluster, status resync requests beside them), a source's (statuses for one source, spec resync requests beside them) or a watcher's (naming no source and no cluster)",
				i, s.Role, s.Source, s.Cluster)
		}
		if id != "" {
			if err := options.ValidateID(kind, id); err != nil {
				return nil, err
			}
		}
		if sub.attribute != "" {
			sub.filter = fmt.Sprintf(`attributes.%q = %q`, sub.attribute, id)
		}
		sub.role = s.Role
		sub.topic = t.full("topics", topic)
		if name == "" {
			name = topicID(topic) + "-" + id
		}
		full, err := fullName(t.cfg.ProjectID, "subscriptions", name)
		if err != nil {
			return nil, fmt.Errorf("subscription of %s: %w", s.Role, err)
		}
		sub.name = full
		out = append(out, sub)
	}
	return out, nil
}

// topicOf is the topic that carries role's events.
func (t *Transport) topicOf(role options.Role) string {
	switch role {
	case options.RoleSpec:
		return t.cfg.Topics.SourceEvents
	case options.RoleStatus:
		return t.cfg.Topics.AgentEvents
	case options.RoleStatusResync:
		return t.cfg.Topics.SourceBroadcast
	}
	return t.cfg.Topics.AgentBroadcast
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// full returns the full name of a validated topic or subscription.
func (t *Transport) full(kind, name string) string {
	n, _ := fullName(t.cfg.ProjectID, kind, name)
	return n
}

// topicID is the last element of a topic's name.
func topicID(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// newClient makes the Pub/Sub client. It connects lazily, on its first
// call; every connection it makes reports to the transport's stats
// handler, which tells the transport when the service is out of reach.
func (t *Transport) newClient(ctx context.Context) (*pubsub.Client, error) {
	dial := []grpc.DialOption{grpc.WithStatsHandler(connWatcher{t})}
	if k := t.cfg.KeepaliveSettings; k != nil {
		dial = append(dial, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: time.Duration(k.Time), Timeout: time.Duration(k.Timeout), PermitWithoutStream: k.PermitWithoutStream,
		}))
	}
	var opts []option.ClientOption
	if t.cfg.DisableTLS {
		conn, err := grpc.NewClient(t.cfg.Endpoint, append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.conn = conn
		t.mu.Unlock()
		opts = append(opts, option.WithGRPCConn(conn))
	} else {
		for _, d := range dial {
			opts = append(opts, option.WithGRPCDialOption(d))
		}
		if t.cfg.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(t.cfg.Endpoint))
		}
		if t.cfg.CredentialsFile != "" {
			opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, t.cfg.CredentialsFile))
		}
	}
	return pubsub.NewClient(ctx, t.cfg.ProjectID, append(opts, t.clientOpts...)...)
}

// prepare provisions the topics and subscriptions if Config.Provision
// asks, and checks that the subscriptions exist. An answer of any kind
// from the service shows it can be reached: a client allowed to read a
// subscription but not to describe it (the Subscriber role) gets
// PermissionDenied, which is fine.
func (t *Transport) prepare(ctx context.Context, client *pubsub.Client, subs []subscription) error {
	if t.cfg.Provision {
		if err := t.provision(ctx, client, subs); err != nil {
			return err
		}
	}
	if err := t.createWatches(ctx, client, subs); err != nil {
		return err
	}
	if len(subs) == 0 {
		_, err := client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: t.full("topics", t.cfg.Topics.SourceEvents)})
		return reached(err)
	}
	for _, s := range subs {
		_, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: s.name})
		if status.Code(err) == codes.NotFound {
			return &refusal{fmt.Errorf("subscription %s of %s does not exist: create it on topic %s (see the package documentation), or set provision", s.name, s.role, s.topic)}
		}
		if err := reached(err); err != nil {
			return fmt.Errorf("subscription %s: %w", s.name, err)
		}
	}
	return nil
}

// reached returns nil if err is an answer of the service (or no error),
// a refusal for refused credentials, and err otherwise.
func reached(err error) error {
	switch status.Code(err) {
	case codes.OK, codes.NotFound, codes.PermissionDenied:
		return nil
	case codes.Unauthenticated:
		return &refusal{err}
	}
	return err
}

// provision creates the four topics and subs when missing. A
// subscription of specs or statuses is filtered to its client's events,
// as OCM's layout has them.
func (t *Transport) provision(ctx context.Context, client *pubsub.Client, subs []subscription) error {
	for _, topic := range []string{t.cfg.Topics.SourceEvents, t.cfg.Topics.AgentEvents, t.cfg.Topics.SourceBroadcast, t.cfg.Topics.AgentBroadcast} {
		_, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: t.full("topics", topic)})
		if err != nil && status.Code(err) != codes.AlreadyExists {
			return provisionError("topic", t.full("topics", topic), err)
		}
	}
	for _, s := range subs {
		sub := &pubsubpb.Subscription{Name: s.name, Topic: s.topic, Filter: s.filter}
		_, err := client.SubscriptionAdminClient.CreateSubscription(ctx, sub)
		if status.Code(err) == codes.InvalidArgument && s.filter != "" {
			// Google's service needs the attribute's name quoted (it holds
			// a '-'); the client library's fake (pstest) parses only the
			// name unquoted.
			sub.Filter = strings.Replace(s.filter, `"`+s.attribute+`"`, s.attribute, 1)
			_, err = client.SubscriptionAdminClient.CreateSubscription(ctx, sub)
		}
		if err != nil && status.Code(err) != codes.AlreadyExists {
			return provisionError("subscription", s.name, err)
		}
	}
	return nil
}

// watchLife is how long Pub/Sub keeps a watcher's subscription that no
// one reads (its least expiration) and retention what such a subscription
// keeps: a watcher that was killed before it deleted them leaves little
// behind, and not for long.
const (
	watchLife      = 24 * time.Hour
	watchRetention = 10 * time.Minute
)

// createWatches makes the watcher's subscriptions among subs, which copy
// every event of their topics.
func (t *Transport) createWatches(ctx context.Context, client *pubsub.Client, subs []subscription) error {
	for _, s := range subs {
		if !s.watch {
			continue
		}
		_, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: s.name, Topic: s.topic,
			ExpirationPolicy:         &pubsubpb.ExpirationPolicy{Ttl: durationpb.New(watchLife)},
			MessageRetentionDuration: durationpb.New(watchRetention),
		})
		if status.Code(err) == codes.NotFound {
			return &refusal{fmt.Errorf("create subscription %s: topic %s does not exist: %w", s.name, s.topic, err)}
		}
		if err != nil && status.Code(err) != codes.AlreadyExists {
			return provisionError("subscription", s.name, err)
		}
	}
	return nil
}

// deleteWatches deletes the watcher's subscriptions, logging what it could
// not (they expire by themselves, unread, after watchLife, as do those of
// a Start that failed after it made some).
func (t *Transport) deleteWatches(client *pubsub.Client, subs []subscription) {
	for _, s := range subs {
		if !s.watch {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(t.cfg.ConnectTimeout))
		err := client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: s.name})
		cancel()
		if err != nil && status.Code(err) != codes.NotFound {
			t.log.Error(err, "could not delete a subscription of this watcher; Pub/Sub deletes it when it has been unread for a day", "subscription", s.name)
		}
	}
}

func provisionError(kind, name string, err error) error {
	err = fmt.Errorf("create %s %s: %w", kind, name, err)
	if c := status.Code(err); c == codes.PermissionDenied || c == codes.InvalidArgument {
		return &refusal{err}
	}
	return err
}

// receive reads one subscription until ctx ends. The Pub/Sub client
// retries what it can by itself; what it gives up on (the subscription
// deleted, permission taken away) is retried here with backoff.
// receiveLocked starts a receive loop of each subscription, counted in
// loops too. t.mu must be held.
func (t *Transport) receiveLocked(ctx context.Context, loops *sync.WaitGroup) {
	for _, s := range t.subs {
		t.receiving.Add(1)
		loops.Add(1)
		go func() {
			defer loops.Done()
			t.receive(ctx, t.client, s)
		}()
	}
	t.loops = loops
}

func (t *Transport) receive(ctx context.Context, client *pubsub.Client, s subscription) {
	defer t.receiving.Done()
	sub := client.Subscriber(s.name)
	if r := t.cfg.ReceiveSettings; r != nil {
		sub.ReceiveSettings.MaxExtension = time.Duration(r.MaxExtension)
		sub.ReceiveSettings.MaxDurationPerAckExtension = time.Duration(r.MaxDurationPerAckExtension)
		sub.ReceiveSettings.MinDurationPerAckExtension = time.Duration(r.MinDurationPerAckExtension)
		sub.ReceiveSettings.MaxOutstandingMessages = r.MaxOutstandingMessages
		sub.ReceiveSettings.MaxOutstandingBytes = r.MaxOutstandingBytes
		sub.ReceiveSettings.NumGoroutines = r.NumGoroutines
	}
	// Receive returns only once each of its stream's iterators has
	// stopped, and an iterator stops only once every message it handed
	// out is acknowledged or given back. A timed shutdown would instead
	// leave the iterators stopping on their own after Receive returned,
	// past Close, for as long as a receiver holds a Delivery (a closing
	// client leaves its queue unacknowledged, up to MaxExtension). So
	// Close gives back what the receiver holds (see Close), and Receive
	// waits.
	sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{
		Behavior: pubsub.ShutdownBehaviorWaitForProcessing,
		Timeout:  -1,
	}
	route := options.Route{Role: s.role}
	handle := func(_ context.Context, m *pubsub.Message) {
		r := t.hold(m)
		if r == nil {
			m.Nack() // closing: back to the subscription at once
			return
		}
		evt, err := decode(m.Attributes, m.Data)
		if err != nil {
			t.settle(m) // delivering it again would not make it a CloudEvent
			r.Malformed(fmt.Errorf("subscription %s, message %s: %w", s.name, m.ID, err))
			return
		}
		if evt.Type() == options.ProbeType && !t.ownProbe(evt) {
			// Another reader's (a replica of this source's): given back,
			// so the subscription hands it on until its own reader takes
			// it, unless it is too old for anyone to wait for it.
			r.Deliver(options.NewDelivery(route, evt, func() { t.giveBack(m, time.Since(evt.Time()) < probeLife) }))
			return
		}
		r.Deliver(options.NewDelivery(route, evt, func() { t.settle(m) }))
	}
	for n := 0; ; n++ {
		err := sub.Receive(ctx, handle)
		if ctx.Err() != nil {
			return
		}
		delay := t.backoff.Delay(n)
		t.log.Error(err, "reading a subscription failed; retrying", "subscription", s.name, "in", delay)
		if !connstate.Sleep(ctx, delay) {
			return
		}
	}
}

// hold records m as held and returns whom to deliver it to, or nil once
// the transport is closing (m is then not held).
func (t *Transport) hold(m *pubsub.Message) options.Receiver {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if t.held == nil {
		t.held = map[*pubsub.Message]struct{}{}
	}
	t.held[m] = struct{}{}
	return t.recv
}

// settle acknowledges m unless Close gave it back already: of a message's
// Ack and Nack only one may run (the library does not guard them against
// each other), so whoever takes m out of held calls it.
func (t *Transport) settle(m *pubsub.Message) {
	t.mu.Lock()
	_, ok := t.held[m]
	delete(t.held, m)
	t.mu.Unlock()
	if ok {
		m.Ack()
	}
}

// giveBack gives m back to its subscription (nack is true) or
// acknowledges it, unless Close gave it back already.
func (t *Transport) giveBack(m *pubsub.Message, nack bool) {
	t.mu.Lock()
	_, ok := t.held[m]
	delete(t.held, m)
	t.mu.Unlock()
	switch {
	case !ok:
	case nack:
		m.Nack()
	default:
		m.Ack()
	}
}

// probeLife is how long a probe goes round the readers of a shared
// subscription looking for the one that sent it.
const probeLife = time.Minute

// ownProbe reports whether probe is one this transport sent, and forgets it.
func (t *Transport) ownProbe(probe *cloudevents.Event) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	own := t.probes[probe.ID()]
	delete(t.probes, probe.ID())
	return own
}

// Probe implements options.Prober: it publishes evt to the topic of sub
// with the attribute sub's subscription filters on (an agent's cluster, a
// source's ID), so that it reaches sub's subscription alone. Replicas of a
// source read one subscription: a replica that receives another's probe
// gives it back, for the subscription to hand it on. A publish the service
// refuses (no Publisher role on the topic) makes it ErrProbeUnsupported,
// logged once at the default level.
func (t *Transport) Probe(ctx context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	route, ok := options.ProbeRoute(sub)
	if !ok {
		return fmt.Errorf("pubsub: %s: %w: every peer shares it", sub.Role, options.ErrProbeUnsupported)
	}
	if route.Role == options.RoleSpec {
		evt.SetExtension("clustername", route.Cluster)
	} else {
		evt.SetExtension("originalsource", route.Source)
	}
	t.mu.Lock()
	if t.probes == nil {
		t.probes = map[string]bool{}
	}
	t.probes[evt.ID()] = true
	t.mu.Unlock()
	err := t.Send(ctx, route, evt)
	if err == nil {
		return nil
	}
	t.mu.Lock()
	delete(t.probes, evt.ID())
	t.mu.Unlock()
	if code := status.Code(errors.Unwrap(err)); code == codes.PermissionDenied || code == codes.NotFound {
		t.log.Info("cannot check that the subscription delivers: Pub/Sub refused the probe; let the client publish to its topic", "subscription", sub.Role.String(), "err", err)
		return fmt.Errorf("pubsub: %w: %w", options.ErrProbeUnsupported, err)
	}
	return err
}

// Redial implements options.Prober: the receive loops end, giving back
// what they hold, and start again on new streams; the receiver is told
// Connected then. It does not block.
func (t *Transport) Redial(cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.client == nil || t.redialing {
		return
	}
	t.redialing = true
	stop, loops := t.cancel, t.loops
	t.receiving.Add(1)
	t.log.Info("receiving again", "err", cause)
	go func() {
		defer t.receiving.Done()
		stop()
		loops.Wait()
		recvCtx, cancel := context.WithCancel(context.Background())
		t.mu.Lock()
		t.redialing = false
		if t.closed {
			t.mu.Unlock()
			cancel()
			return
		}
		t.cancel = cancel
		t.receiveLocked(recvCtx, new(sync.WaitGroup))
		r := t.recv
		t.mu.Unlock()
		r.Connected()
	}()
}

// Send publishes evt to the topic of route's role and returns once
// Pub/Sub has stored it.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	if err := options.CheckEvent(evt); err != nil {
		return err
	}
	if err := route.Validate(); err != nil {
		return err
	}
	if err := onRoute(evt, route); err != nil {
		return fmt.Errorf("pubsub: %w: event %q: %v", options.ErrInvalidEvent, evt.ID(), err)
	}
	t.mu.Lock()
	p, started, closed := t.publishers[route.Role], t.started, t.closed
	t.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("pubsub: Send: %w", options.ErrClosed)
	case p == nil && started:
		return fmt.Errorf("pubsub: Send: %w (Start has not connected yet)", options.ErrNotConnected)
	case p == nil:
		return fmt.Errorf("pubsub: Send: %w", options.ErrNotStarted)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pubsub: Send: %w", err)
	}
	msg, err := encode(evt)
	if err != nil {
		return fmt.Errorf("pubsub: %w: event %q: %v", options.ErrInvalidEvent, evt.ID(), err)
	}
	if n := size(msg); n > t.cfg.MaxEventBytes {
		return fmt.Errorf("pubsub: %w: event %q has %d bytes, the limit is %d", options.ErrTooLarge, evt.ID(), n, t.cfg.MaxEventBytes)
	}
	_, err = p.Publish(ctx, msg).Get(ctx)
	if err == nil {
		return nil
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("pubsub: Send: %w", ctx.Err())
	case errors.Is(err, pubsub.ErrOversizedMessage):
		return fmt.Errorf("pubsub: %w: event %q: %v", options.ErrTooLarge, evt.ID(), err)
	case status.Code(err) == codes.Unavailable:
		return fmt.Errorf("pubsub: Send: %w: %v", options.ErrNotConnected, err)
	}
	return fmt.Errorf("pubsub: Send to %s: %w", p, err)
}

// onRoute checks that evt carries the attributes its role's subscriptions
// filter on, with the route's values: a spec's clustername, a status's
// originalsource.
func onRoute(evt *cloudevents.Event, r options.Route) error {
	check := func(ext, want string) error {
		v, ok := evt.Extensions()[ext]
		if !ok {
			return fmt.Errorf("no %s extension, which Pub/Sub subscriptions filter %s on", ext, r.Role)
		}
		got, err := cetypes.ToString(v)
		if err != nil || got != want {
			return fmt.Errorf("%s extension %v, but the route says %q", ext, v, want)
		}
		return nil
	}
	switch r.Role {
	case options.RoleSpec:
		return check("clustername", r.Cluster)
	case options.RoleStatus:
		return check("originalsource", r.Source)
	}
	return nil
}

// Close stops reading (what is not handled goes back to the
// subscriptions), sends what the publishers hold, and returns once every
// goroutine of the transport has stopped or ctx ends.
func (t *Transport) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	client, cancel, publishers, held, subs := t.client, t.cancel, t.publishers, t.held, t.subs
	t.held = nil
	t.mu.Unlock()
	t.tracker.Closed()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cancel != nil {
			cancel()
		}
		// The receiver will not handle what it holds now (a closing
		// client leaves its queue unacknowledged): give it back, for a
		// replica or the next run, and so that Receive, which waits for
		// every message it handed out (see receive), returns.
		for m := range held {
			m.Nack()
		}
		received := make(chan struct{})
		go func() { t.receiving.Wait(); close(received) }()
		select {
		case <-received:
		case <-time.After(time.Duration(t.cfg.ConnectTimeout)):
			// The last acknowledgements are still on their way, over a
			// connection that stalls: closing the client fails them, and
			// Receive returns.
			if client != nil {
				t.closeClient(client)
				client = nil
			}
			<-received
		}
		for _, p := range publishers {
			p.Stop()
		}
		if client != nil {
			t.deleteWatches(client, subs)
			t.closeClient(client)
		} else {
			t.mu.Lock()
			conn := t.conn
			t.mu.Unlock()
			if conn != nil {
				_ = conn.Close()
			}
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeClient closes client and the connection the transport made for it.
func (t *Transport) closeClient(client *pubsub.Client) {
	_ = client.Close()
	t.mu.Lock()
	conn := t.conn
	t.conn = nil
	t.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// connWatcher is a gRPC stats handler that follows the transport's
// connections to the service. The service is out of reach when a
// connection ends and none opened before it is still open. One opened
// after it proves nothing: gRPC starts a replacement before it reports the
// end of the connection it replaces, so the replacement may well have
// opened after the service was lost, and then the service is back at once.
type connWatcher struct{ t *Transport }

type connTag struct{}

func (c connWatcher) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c connWatcher) HandleRPC(context.Context, stats.RPCStats)                       {}

// TagConn numbers connections in the order gRPC makes them.
func (c connWatcher) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	t := c.t
	t.mu.Lock()
	t.lastConn++
	n := t.lastConn
	t.mu.Unlock()
	return context.WithValue(ctx, connTag{}, n)
}

func (c connWatcher) HandleConn(ctx context.Context, s stats.ConnStats) {
	t := c.t
	n, _ := ctx.Value(connTag{}).(uint64)
	t.mu.Lock()
	var lost, back bool
	switch s.(type) {
	case *stats.ConnBegin:
		t.conns[n] = struct{}{}
		back = t.started && !t.up && t.client != nil && !t.closed
	case *stats.ConnEnd:
		delete(t.conns, n)
		lost = t.up && !t.closed
		for m := range t.conns {
			if m < n { // open all along: the service never went away
				lost = false
				break
			}
		}
		back = lost && len(t.conns) > 0
	}
	if lost || back {
		t.up = back
	}
	r := t.recv
	t.mu.Unlock()
	if lost {
		t.log.Info("connection lost; reconnecting", "to", "Pub/Sub", "err", t.tracker.Lost(errors.New("the connection to the service closed")))
	}
	if back {
		t.tracker.Connected()
		r.Connected()
	}
}

// refusal is a failure retrying cannot fix.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refused(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}
