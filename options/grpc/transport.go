package grpc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/internal/connstate"
	"github.com/workwire/sdk-go/internal/lifecycle"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
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

// WithDialOptions adds gRPC dial options after the ones the transport
// derives from its Config (later options win), for example per-RPC
// credentials of another kind or a custom resolver. Default: none.
func WithDialOptions(opts ...grpclib.DialOption) Option {
	return func(t *Transport) { t.dialOpts = append(t.dialOpts, opts...) }
}

// Transport carries CloudEvents to and from a gRPC broker of the
// io.cloudevents.v1.CloudEventService — workwire's (options/grpc/server) or
// OCM's: Send is a unary Publish, and Start opens one Subscribe stream per
// side it subscribes for (a source ID, a cluster name), or, at a broker
// that serves one data type per stream (OCM's), one per data type.
// It implements options.Transport: it resubscribes with capped exponential
// backoff when a stream ends or goes silent past its heartbeat timeout, and
// tells its receiver after every resubscription, so the client resyncs.
// A Transport is goroutine-safe.
type Transport struct {
	cfg       Config
	tlsConfig *tls.Config
	dialOpts  []grpclib.DialOption
	log       logr.Logger
	backoff   options.Backoff
	tracker   *connstate.Tracker
	logSet    bool  // by WithLogger; otherwise Start's context's is taken
	logValues []any // what the transport adds to its logger
	maxEvent  int

	mu      sync.Mutex
	started bool
	closed  bool
	conn    *grpclib.ClientConn
	client  protocol.CloudEventServiceClient
	recv    options.Receiver
	subs    []options.Subscription
	reqs    []*protocol.SubscriptionRequest
	session *session // the current one; nil before the first

	probeMu sync.Mutex
	probes  map[*probeWait]struct{}

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
		return nil, errors.New("grpc: the config is nil")
	}
	return New(*c)
}

// New returns a gRPC transport for cfg. It validates cfg and does no
// network I/O: the connection is made by Start.
func New(cfg Config, opts ...Option) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Transport{
		cfg:      cfg,
		log:      klog.Background(),
		backoff:  options.Backoff{Min: time.Duration(cfg.ReconnectMinBackoff), Max: time.Duration(cfg.ReconnectMaxBackoff)},
		maxEvent: cfg.MaxEventBytes,
	}
	for _, o := range opts {
		o(t)
	}
	if t.tlsConfig == nil {
		var err error
		if t.tlsConfig, err = cfg.TLS.Build(cfg.serverHost()); err != nil {
			return nil, err
		}
	}
	t.logValues = []any{"server", cfg.ServerAddress}
	t.log = t.log.WithValues(t.logValues...)
	t.tracker = connstate.New(t.log, "gRPC server "+cfg.ServerAddress)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

func (t *Transport) dialOptions() []grpclib.DialOption {
	cfg := t.cfg
	creds := insecure.NewCredentials()
	if t.tlsConfig != nil {
		creds = credentials.NewTLS(t.tlsConfig)
	}
	opts := []grpclib.DialOption{
		grpclib.WithTransportCredentials(creds),
		// The channel's own reconnects follow the same bounds as ours
		// (gRPC's default waits up to 120s between attempts).
		grpclib.WithConnectParams(grpclib.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: t.backoff.Min, Multiplier: 1.6, Jitter: 0.2, MaxDelay: t.backoff.Max},
			MinConnectTimeout: time.Duration(cfg.DialTimeout),
		}),
		grpclib.WithDefaultCallOptions(
			grpclib.MaxCallRecvMsgSize(cfg.MaxReceiveBytes),
			grpclib.MaxCallSendMsgSize(t.maxEvent),
		),
	}
	if cfg.Compression != "" {
		opts = append(opts, grpclib.WithDefaultCallOptions(grpclib.UseCompressor(cfg.Compression)))
	}
	if ka, ok := keepaliveParams(cfg); ok {
		opts = append(opts, grpclib.WithKeepaliveParams(ka))
	}
	switch {
	case cfg.TokenFile != "":
		opts = append(opts, grpclib.WithPerRPCCredentials(newFileToken(cfg.TokenFile, !cfg.AllowTokenWithoutTLS)))
	case cfg.Token != "":
		opts = append(opts, grpclib.WithPerRPCCredentials(staticToken{token: cfg.Token, requireTLS: !cfg.AllowTokenWithoutTLS}))
	}
	return append(opts, t.dialOpts...)
}

// keepaliveParams returns the keep-alive pings cfg asks for; false when
// they are off. Pings go out on idle connections without streams too (a
// source that only publishes), which the server permits.
func keepaliveParams(cfg Config) (keepalive.ClientParameters, bool) {
	if cfg.KeepAliveTime <= 0 {
		return keepalive.ClientParameters{}, false
	}
	return keepalive.ClientParameters{
		Time:                time.Duration(cfg.KeepAliveTime),
		Timeout:             time.Duration(cfg.KeepAliveTimeout),
		PermitWithoutStream: true,
	}, true
}

// Start connects, subscribes to subs and then keeps the subscriptions up
// until Close. Subscriptions map to Subscribe streams by side: a status
// subscription names its source and a spec subscription its cluster; spec
// resync subscriptions ride on the source's stream and status resync
// subscriptions on the agent's. With no subscriptions Start only waits for
// the connection. It retries with backoff until ctx ends, except when the
// broker refuses the credentials or a subscription (Unauthenticated,
// PermissionDenied, InvalidArgument), which it reports at once.
func (t *Transport) Start(ctx context.Context, subs []options.Subscription, r options.Receiver) error {
	if r == nil {
		return errors.New("grpc: receiver is nil")
	}
	reqs, err := subscriptionRequests(subs)
	if err != nil {
		return err
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return options.ErrClosed
	case t.started:
		t.mu.Unlock()
		return errors.New("grpc: started twice")
	}
	conn, err := grpclib.NewClient(t.cfg.ServerAddress, t.dialOptions()...)
	if err != nil {
		t.mu.Unlock()
		return fmt.Errorf("grpc: client for %s: %w", t.cfg.ServerAddress, err)
	}
	t.started, t.recv, t.conn, t.client = true, r, conn, protocol.NewCloudEventServiceClient(conn)
	if !t.logSet {
		t.log = t.tracker.LoggerFrom(ctx, t.log, t.logValues...)
	}
	t.subs, t.reqs = append([]options.Subscription(nil), subs...), reqs
	// The supervisor's WaitGroup entry is taken while Close cannot have
	// begun waiting (it sets closed under mu first).
	t.wg.Add(1)
	t.mu.Unlock()

	// Close ends the first connect too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()

	sess, err := connstate.Connect(ctx, t.tracker, t.backoff, t.subscribe, refused)
	if err != nil {
		t.wg.Done()
		switch {
		case refused(err):
			return err
		case t.ctx.Err() != nil:
			return options.ErrClosed
		}
		return fmt.Errorf("grpc: connect to %s: %w", t.cfg.ServerAddress, err)
	}
	go t.supervise(sess)
	r.Connected()
	return nil
}

// refused reports broker answers that retrying will not change.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.Unimplemented:
		return true
	}
	return false
}

// subscriptionRequests maps subscriptions to one Subscribe request per side.
func subscriptionRequests(subs []options.Subscription) ([]*protocol.SubscriptionRequest, error) {
	type side struct{ source, cluster string }
	var order []side
	dataTypes := map[side][]string{}
	all := map[side]bool{}
	add := func(s side, dts []string) {
		if _, ok := dataTypes[s]; !ok {
			order = append(order, s)
			dataTypes[s] = nil
		}
		if len(dts) == 0 {
			all[s] = true
		}
		dataTypes[s] = append(dataTypes[s], dts...)
	}
	var specResync, statusResync []options.Subscription
	for _, s := range subs {
		switch s.Role {
		case options.RoleStatus:
			if s.Source == "" {
				return nil, errors.New("grpc: a status subscription must name its source: the broker sends a source only its own status")
			}
			add(side{source: s.Source}, s.DataTypes)
		case options.RoleSpec:
			if s.Cluster == "" {
				return nil, errors.New("grpc: a spec subscription must name its cluster: the broker sends an agent only its own cluster's specs")
			}
			add(side{cluster: s.Cluster}, s.DataTypes)
		case options.RoleSpecResync:
			specResync = append(specResync, s)
		case options.RoleStatusResync:
			statusResync = append(statusResync, s)
		default:
			return nil, fmt.Errorf("grpc: subscription with unknown role %v", s.Role)
		}
	}
	attach := func(resyncs []options.Subscription, agents bool, what string) error {
		if len(resyncs) == 0 {
			return nil
		}
		found := false
		for _, s := range order {
			if (s.cluster != "") == agents {
				found = true
				for _, r := range resyncs {
					add(s, r.DataTypes)
				}
			}
		}
		if !found {
			return fmt.Errorf("grpc: a %s subscription needs a %s subscription beside it: the broker streams them together", what, map[bool]string{true: "spec", false: "status"}[agents])
		}
		return nil
	}
	if err := attach(specResync, false, "spec resync"); err != nil {
		return nil, err
	}
	if err := attach(statusResync, true, "status resync"); err != nil {
		return nil, err
	}
	reqs := make([]*protocol.SubscriptionRequest, 0, len(order))
	for _, s := range order {
		req := &protocol.SubscriptionRequest{Source: s.source, ClusterName: s.cluster}
		if !all[s] {
			seen := map[string]bool{}
			for _, dt := range dataTypes[s] {
				if !seen[dt] {
					seen[dt] = true
					req.DataTypes = append(req.DataTypes, dt)
				}
			}
		}
		reqs = append(reqs, req)
	}
	return reqs, nil
}

// session is one set of Subscribe streams, up together and torn down
// together.
type session struct {
	ctx     context.Context
	cancel  context.CancelFunc
	streams []*streamState
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error // the first failure
}

type streamState struct {
	req      *protocol.SubscriptionRequest
	stream   grpclib.ServerStreamingClient[protocol.CloudEvent]
	cancel   context.CancelFunc // ends this stream alone
	lastRecv atomic.Int64       // unix nanoseconds
	interval time.Duration      // the heartbeat interval the broker announced; 0 if none
	probed   atomic.Int32       // probes waiting for what the stream receives next
	// servesAll: the broker said which data types the stream carries, as
	// workwire's does for every data type the request names.
	servesAll bool
}

func (s *session) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
}

func (s *session) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// stop ends the session and waits for its receive goroutines.
func (s *session) stop() {
	s.cancel()
	s.wg.Wait()
}

// subscribe opens every stream and waits for each one's response headers,
// which the broker sends once the subscription is in place. ctx bounds the
// wait; the session outlives it, until Close or a failure.
func (t *Transport) subscribe(ctx context.Context) (*session, error) {
	t.mu.Lock()
	client, conn, reqs := t.client, t.conn, t.reqs
	t.mu.Unlock()
	sctx, cancel := context.WithCancel(t.ctx)
	sess := &session{ctx: sctx, cancel: cancel}
	if len(reqs) == 0 {
		if err := waitReady(ctx, conn); err != nil {
			cancel()
			return nil, fmt.Errorf("grpc: connect to %s: %w", t.cfg.ServerAddress, err)
		}
		return sess, nil
	}
	// Until every stream is up, ctx (and a handshake timeout) bound the wait.
	stopBound := context.AfterFunc(ctx, cancel)
	handshake := time.AfterFunc(time.Duration(t.cfg.DialTimeout), cancel)
	// A channel that failed to connect fails the attempt at once, with the
	// reason, rather than at the handshake timeout: an operator learns of
	// a dead server when it happens.
	failFast := settle(sctx, conn) == connectivity.TransientFailure
	var err error
	for i := 0; i < len(reqs); i++ {
		var st *streamState
		if st, err = t.open(sctx, client, reqs[i], failFast); err != nil {
			break
		}
		if len(reqs[i].GetDataTypes()) > 1 && !st.servesAll {
			// The broker serves one data type per stream (OCM's does): one
			// stream for each.
			st.cancel()
			for _, dt := range reqs[i].GetDataTypes() {
				reqs = append(reqs, &protocol.SubscriptionRequest{Source: reqs[i].GetSource(), ClusterName: reqs[i].GetClusterName(), DataTypes: []string{dt}})
			}
			continue
		}
		sess.streams = append(sess.streams, st)
	}
	handshake.Stop()
	stopBound()
	if err == nil {
		err = sctx.Err() // ctx, Close or the handshake timer ended it already
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, fmt.Errorf("grpc: subscribe at %s: %w", t.cfg.ServerAddress, err)
	}
	for _, st := range sess.streams {
		sess.wg.Add(1)
		go t.receive(sess, st)
	}
	t.mu.Lock()
	t.session = sess
	t.mu.Unlock()
	return sess, nil
}

// open opens one Subscribe stream and waits for its response headers. A
// broker that refuses the subscription sends none (OCM's agents refuse a
// stream without a subscription-id too): its status comes with the
// stream's end.
func (t *Transport) open(ctx context.Context, client protocol.CloudEventServiceClient, req *protocol.SubscriptionRequest, failFast bool) (*streamState, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := client.Subscribe(sctx, req, grpclib.WaitForReady(!failFast))
	if err != nil {
		cancel()
		return nil, err
	}
	md, err := stream.Header()
	if err != nil {
		cancel()
		return nil, err
	}
	if len(md.Get(protocol.HeaderSubscriptionID)) != 1 {
		_, err := stream.Recv()
		cancel()
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("the broker sent no subscription-id header")
		}
		return nil, err
	}
	st := &streamState{req: req, stream: stream, cancel: cancel, servesAll: len(md.Get(protocol.HeaderDataTypes)) > 0}
	st.interval = announcedInterval(md)
	st.lastRecv.Store(time.Now().UnixNano())
	return st, nil
}

// announcedInterval is the heartbeat interval md announces; 0 for none.
func announcedInterval(md metadata.MD) time.Duration {
	v := md.Get(protocol.HeaderHeartbeatInterval)
	if len(v) != 1 {
		return 0
	}
	d, err := time.ParseDuration(v[0])
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// settle returns conn's state once it is neither idle nor connecting, or
// when ctx ends.
func settle(ctx context.Context, conn *grpclib.ClientConn) connectivity.State {
	conn.Connect()
	for {
		s := conn.GetState()
		if s != connectivity.Idle && s != connectivity.Connecting {
			return s
		}
		if !conn.WaitForStateChange(ctx, s) {
			return conn.GetState()
		}
	}
}

func waitReady(ctx context.Context, conn *grpclib.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// supervise owns the session: when it fails or goes silent it resubscribes
// with backoff and tells the receiver, until Close.
func (t *Transport) supervise(sess *session) {
	defer t.wg.Done()
	connstate.Supervise(t.ctx, t.tracker, t.backoff, sess, func(sess *session) error {
		err := t.watch(sess)
		sess.stop()
		return err
	}, t.subscribe, func(*session) { t.recv.Connected() })
}

// watch returns when sess ends, or when one of its streams has been silent
// past Config.HeartbeatTimeout, if it is set.
func (t *Transport) watch(sess *session) error {
	limit := time.Duration(t.cfg.HeartbeatTimeout)
	var tick <-chan time.Time
	if limit > 0 && len(sess.streams) > 0 {
		ticker := time.NewTicker(limit / 4)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case <-sess.ctx.Done():
			return sess.failure()
		case <-tick:
			now := time.Now().UnixNano()
			for _, st := range sess.streams {
				if time.Duration(now-st.lastRecv.Load()) > limit {
					err := fmt.Errorf("no heartbeat for %v", limit)
					sess.fail(err)
					return err
				}
			}
		}
	}
}

// receive reads one stream until it fails or the session ends.
func (t *Transport) receive(sess *session, st *streamState) {
	defer sess.wg.Done()
	for {
		msg, err := st.stream.Recv()
		if err != nil {
			sess.fail(err)
			return
		}
		st.lastRecv.Store(time.Now().UnixNano())
		if st.probed.Load() > 0 {
			t.heard(st)
		}
		if msg.GetType() == protocol.HeartbeatType {
			continue
		}
		t.deliver(msg)
	}
}

// deliver decodes and hands over one event. What is not a valid CloudEvent
// is reported and skipped; nothing received may stop the stream.
func (t *Transport) deliver(pbe *protocol.CloudEvent) {
	defer func() {
		// The decoder is fed by the network: a panic in it must cost one
		// message, not the process.
		if p := recover(); p != nil {
			t.recv.Malformed(fmt.Errorf("grpc: event: decoder panic: %v", p))
		}
	}()
	route, evt, err := decode(pbe)
	if err != nil {
		t.recv.Malformed(err)
		return
	}
	if route.Role != 0 && !t.wants(route) {
		t.log.V(4).Info("dropped an event no subscription asked for", "id", evt.ID(), "route", route)
		return
	}
	t.recv.Deliver(options.NewDelivery(route, evt, nil))
}

// decode turns a received event into the route and the event the
// transport delivers: the route its own attributes give (a zero route when
// they give none), as the broker routed it, and a valid CloudEvent. It fails
// on what is not one.
func decode(pbe *protocol.CloudEvent) (options.Route, *cloudevents.Event, error) {
	route, _ := protocol.DeriveRoute(pbe)
	evt, err := protocol.FromProto(pbe)
	if err != nil {
		return options.Route{}, nil, fmt.Errorf("grpc: event for %s: not a valid CloudEvent: %w", route.Role, err)
	}
	return route, evt, nil
}

func (t *Transport) wants(r options.Route) bool {
	for _, s := range t.subs { // t.subs is fixed once Start has set it
		if s.Role == r.Role && (s.Source == "" || s.Source == r.Source) && (s.Cluster == "" || s.Cluster == r.Cluster) {
			return true
		}
	}
	return false
}

// probeWait is a probe waiting for each of the streams that carry its
// subscription to receive something: an event or a heartbeat.
type probeWait struct {
	evt  *cloudevents.Event
	role options.Role
	left map[*streamState]bool
}

// carries reports whether st streams sub's events: a source's stream its
// statuses and spec resync requests, an agent's its specs and status
// resync requests.
func carries(st *streamState, sub options.Subscription) bool {
	if sub.Role == options.RoleSpec || sub.Role == options.RoleStatusResync {
		return st.req.GetClusterName() != ""
	}
	return st.req.GetSource() != ""
}

// Probe implements options.Prober: evt reaches the receiver once every
// stream that carries sub has received something more, the broker's next
// heartbeat at the latest. A stream whose broker announced no heartbeat
// interval, or one longer than ctx leaves the probe, cannot be probed.
func (t *Transport) Probe(ctx context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	t.mu.Lock()
	sess := t.session
	t.mu.Unlock()
	if sess == nil || sess.ctx.Err() != nil {
		return fmt.Errorf("grpc: probe: %w", options.ErrNotConnected)
	}
	w := &probeWait{evt: evt, role: sub.Role, left: map[*streamState]bool{}}
	deadline, bounded := ctx.Deadline()
	for _, st := range sess.streams {
		if !carries(st, sub) {
			continue
		}
		if st.interval <= 0 || (bounded && time.Until(deadline) <= st.interval) {
			return fmt.Errorf("grpc: %s: %w: the broker announced a heartbeat interval of %v", sub.Role, options.ErrProbeUnsupported, st.interval)
		}
		w.left[st] = true
	}
	if len(w.left) == 0 {
		return fmt.Errorf("grpc: %s: %w: no stream carries it", sub.Role, options.ErrProbeUnsupported)
	}
	t.probeMu.Lock()
	if t.probes == nil {
		t.probes = make(map[*probeWait]struct{})
	}
	t.probes[w] = struct{}{}
	for st := range w.left {
		st.probed.Add(1)
	}
	t.probeMu.Unlock()
	context.AfterFunc(ctx, func() { t.dropProbe(w) })
	return nil
}

// heard counts what st just received towards the probes waiting for it,
// and hands over those it completes.
func (t *Transport) heard(st *streamState) {
	var done []*probeWait
	t.probeMu.Lock()
	for w := range t.probes {
		if w.left[st] {
			delete(w.left, st)
			st.probed.Add(-1)
			if len(w.left) == 0 {
				delete(t.probes, w)
				done = append(done, w)
			}
		}
	}
	t.probeMu.Unlock()
	for _, w := range done {
		t.recv.Deliver(options.NewDelivery(options.Route{Role: w.role}, w.evt, nil))
	}
}

// dropProbe forgets w, if it is still waiting.
func (t *Transport) dropProbe(w *probeWait) {
	t.probeMu.Lock()
	defer t.probeMu.Unlock()
	if _, ok := t.probes[w]; !ok {
		return
	}
	delete(t.probes, w)
	for st := range w.left {
		st.probed.Add(-1)
	}
}

// Redial implements options.Prober: it ends the current session, whose end
// the supervisor logs with cause, and subscribes again.
func (t *Transport) Redial(cause error) {
	t.mu.Lock()
	sess := t.session
	t.mu.Unlock()
	if sess != nil {
		sess.fail(cause)
	}
}

// Healthy implements options.HealthChecker: nil while every Subscribe
// stream is up (with no subscriptions, once Start connected), until a
// stream ends or goes silent past its heartbeat timeout.
func (t *Transport) Healthy() error { return t.tracker.Healthy() }

// MaxEventBytes returns the largest publish request Send sends:
// Config.MaxEventBytes or its default.
func (t *Transport) MaxEventBytes() int { return t.maxEvent }

// Send publishes evt on route and waits for the broker to accept it. An
// event whose publish request exceeds Config.MaxEventBytes fails with
// options.ErrTooLarge without being sent; while the broker cannot be
// reached Send fails with options.ErrNotConnected.
func (t *Transport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("grpc: send: %w", err)
	}
	if err := options.CheckEvent(evt); err != nil {
		return fmt.Errorf("grpc: send: %w", err)
	}
	if err := route.Validate(); err != nil {
		return fmt.Errorf("grpc: %w", err)
	}
	t.mu.Lock()
	client := t.client
	var state error
	switch {
	case t.closed:
		state = options.ErrClosed
	case !t.started:
		state = options.ErrNotStarted
	}
	t.mu.Unlock()
	if state != nil {
		return fmt.Errorf("grpc: send to %s: %w", route.Role, state)
	}
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		return fmt.Errorf("grpc: encode event %s: %w: %w", evt.ID(), options.ErrInvalidEvent, err)
	}
	// The broker routes by the event's attributes: they must say route.
	if derived, err := protocol.DeriveRoute(pbe); err != nil || !sameRoute(derived, route) {
		return fmt.Errorf("grpc: event %s: %w: its type and attributes route it to %+v, not %+v (%v)", evt.ID(), options.ErrInvalidEvent, derived, route, err)
	}
	req := &protocol.PublishRequest{Event: pbe}
	size := proto.Size(req)
	if size > t.maxEvent {
		return fmt.Errorf("grpc: event %s of type %s: %w: its publish request is %d bytes, more than maxEventBytes (Config.MaxEventBytes), %d: raise it, and the broker's limit with it (maxReceiveBytes on workwire's broker, max_receive_message_size on OCM's)",
			evt.ID(), evt.Type(), options.ErrTooLarge, size, t.maxEvent)
	}
	if _, err := client.Publish(ctx, req); err != nil {
		return t.publishError(ctx, evt, size, err)
	}
	return nil
}

// sameRoute reports whether derived, the route an event's attributes give,
// is route in every ID route's role needs.
func sameRoute(derived, route options.Route) bool {
	if derived.Role != route.Role {
		return false
	}
	switch route.Role {
	case options.RoleSpecResync:
		return derived.Cluster == route.Cluster
	case options.RoleStatusResync:
		return derived.Source == route.Source
	}
	return derived.Source == route.Source && derived.Cluster == route.Cluster
}

// publishError maps a failed Publish of a request of size bytes to the
// transport contract's errors.
func (t *Transport) publishError(ctx context.Context, evt *cloudevents.Event, size int, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("grpc: publish %s: %w", evt.ID(), cerr)
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Errorf("grpc: publish %s: %w: %w", evt.ID(), options.ErrNotConnected, err)
	case codes.ResourceExhausted:
		if strings.Contains(st.Message(), "larger than max") {
			return fmt.Errorf("grpc: publish %s: %w: the broker refused its publish request of %d bytes, which maxEventBytes (Config.MaxEventBytes) allows: raise the broker's limit (maxReceiveBytes on workwire's broker, max_receive_message_size on OCM's), or lower maxEventBytes to it: %w",
				evt.ID(), options.ErrTooLarge, size, err)
		}
	case codes.Canceled:
		t.mu.Lock()
		closed := t.closed
		t.mu.Unlock()
		if closed {
			return fmt.Errorf("grpc: publish %s: %w", evt.ID(), options.ErrClosed)
		}
		return fmt.Errorf("grpc: publish %s: %w: %w", evt.ID(), options.ErrNotConnected, err)
	case codes.FailedPrecondition:
		// A Service's refusal, on OCM's wire: the Kubernetes status as
		// JSON. The caller gets the StatusError it was.
		var body struct{ ErrStatus metav1.Status }
		if json.Unmarshal([]byte(st.Message()), &body) == nil && body.ErrStatus.Code != 0 {
			return fmt.Errorf("grpc: publish %s: %w", evt.ID(), &apierrors.StatusError{ErrStatus: body.ErrStatus})
		}
	case codes.Internal:
		// A stream reset by a proxy or a dying server (RST_STREAM) is a
		// lost connection, not a bad event.
		if strings.Contains(st.Message(), "RST_STREAM") {
			return fmt.Errorf("grpc: publish %s: %w: %w", evt.ID(), options.ErrNotConnected, err)
		}
	}
	return fmt.Errorf("grpc: publish %s: %w", evt.ID(), err)
}

// Close ends the subscriptions and the connection and waits for the
// transport's goroutines, or until ctx ends. It is idempotent.
func (t *Transport) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	conn := t.conn
	t.mu.Unlock()
	t.tracker.Closed()
	t.cancel()
	if err := lifecycle.Wait(ctx, &t.wg); err != nil {
		if conn != nil {
			_ = conn.Close()
		}
		return fmt.Errorf("grpc: close: %w", err)
	}
	if conn != nil {
		if err := conn.Close(); err != nil {
			return fmt.Errorf("grpc: close: %w", err)
		}
	}
	return nil
}
