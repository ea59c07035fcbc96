package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/ack"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/pending"
)

// Option configures what a config file cannot hold.
type Option func(*Server)

// WithLogger sets the server's logger. Default: klog.Background().
func WithLogger(l logr.Logger) Option { return func(s *Server) { s.log = l } }

// WithRegisterer registers the server's metrics (grpc_server_* and
// grpc_server_ce_*, as OCM's broker names them) on r. Default: no metrics.
// The server never registers on the global registry: pass
// prometheus.DefaultRegisterer to get that. Two servers need two registries.
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Server) { s.registerer = r } }

// WithAuthenticator makes every call prove who it is: calls without
// credentials, or whose credentials a fails, get Unauthenticated. It needs
// WithAuthorizer too. Default: no authentication and no authorization, for
// tests and trusted networks only.
func WithAuthenticator(a Authenticator) Option { return func(s *Server) { s.authn = a } }

// WithAuthorizer decides what each authenticated identity may publish and
// subscribe to; refused calls get PermissionDenied. Default: none (see
// WithAuthenticator).
func WithAuthorizer(a Authorizer) Option { return func(s *Server) { s.authz = a } }

// WithService makes the server the source of dataType, backed by svc (see
// Service). It registers a handler with svc when New runs. Default: none;
// the server only relays.
func WithService(dataType string, svc Service) Option {
	return func(s *Server) { s.pending = append(s.pending, pendingService{dataType, svc}) }
}

// WithTLSConfig sets the TLS configuration directly (for certificates held
// in memory); it replaces Config.TLS. Default: built from Config.TLS.
func WithTLSConfig(c *tls.Config) Option { return func(s *Server) { s.tlsConfig = c } }

// WithServerOptions adds gRPC server options after the server's own (later
// options win). Default: none.
func WithServerOptions(opts ...grpc.ServerOption) Option {
	return func(s *Server) { s.grpcOpts = append(s.grpcOpts, opts...) }
}

type pendingService struct {
	dataType string
	svc      Service
}

// Server is workwire's gRPC broker: it serves io.cloudevents.v1.CloudEventService,
// wire-compatible with OCM's, and routes what sources and agents publish to
// the subscribers that should get it. See the package documentation for routing, replicas, security
// and metrics. A Server is goroutine-safe; it may Serve several listeners
// at once and again after a Serve ended.
type Server struct {
	cfg        Config
	log        logr.Logger
	tlsConfig  *tls.Config
	registerer prometheus.Registerer
	metrics    *metrics // nil without a registerer
	authn      Authenticator
	authz      Authorizer
	authnCache *ttlCache[Identity]
	authzCache *ttlCache[struct{}]
	recheck    time.Duration // how often open subscriptions are authorized again
	grpcOpts   []grpc.ServerOption
	pending    []pendingService
	services   map[types.DataType]*binding // by plural and singular form
	bindings   []*binding
	sourceID   string
	heartbeat  time.Duration
	queueSize  int
	queueBytes int
	queueWait  time.Duration

	acks     *ack.Tracker // nil if specs are not sent again
	reg      *registry
	nextID   atomic.Uint64
	servedAt atomic.Int64 // when Serve began, Unix nanoseconds
}

// New returns a server for cfg. It validates cfg, registers the metrics and
// the Services' handlers, and does no network I/O.
func New(cfg Config, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:        cfg,
		log:        klog.Background(),
		services:   make(map[types.DataType]*binding),
		sourceID:   cfg.SourceID,
		heartbeat:  time.Duration(cfg.HeartbeatInterval),
		queueSize:  cfg.QueueSize,
		queueBytes: cfg.QueueBytes,
		queueWait:  time.Duration(cfg.QueueWait),
		reg:        newRegistry(),
	}
	if after := time.Duration(cfg.SpecResendAfter); after > 0 {
		s.acks = ack.New(ack.Config{After: after, Max: max(ack.DefaultMax, after), PerRound: ack.DefaultPerRound})
	}
	for _, o := range opts {
		o(s)
	}
	var errs []error
	if s.authn != nil && s.authz == nil {
		errs = append(errs, errors.New("an authenticator needs an authorizer (WithAuthorizer)"))
	}
	if s.authz != nil && s.authn == nil {
		errs = append(errs, errors.New("an authorizer needs an authenticator (WithAuthenticator)"))
	}
	for _, p := range s.pending {
		dt, err := types.ParseDataType(p.dataType)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("service: %w", err))
		case p.svc == nil:
			errs = append(errs, fmt.Errorf("service for %s is nil", dt))
		case s.services[dt] != nil:
			errs = append(errs, fmt.Errorf("two services for %s", dt))
		default:
			a, ok := p.svc.(Acknowledger)
			b := &binding{dataType: dt, svc: p.svc, acked: s.acks != nil && ok && a.AcknowledgesSpecs(), peer: dt.String()}
			s.services[dt], s.services[dt.Singular()] = b, b
			s.bindings = append(s.bindings, b)
		}
	}
	if s.tlsConfig == nil {
		var err error
		if s.tlsConfig, err = cfg.TLS.Build(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("grpc server: %w", errors.Join(errs...))
	}
	ttl := time.Duration(cfg.AuthCacheTTL)
	s.authnCache, s.authzCache = newTTLCache[Identity](ttl, 10000), newTTLCache[struct{}](ttl, 100000)
	s.recheck = ttl
	if s.recheck <= 0 { // caching off: still check open streams now and then
		s.recheck = DefaultAuthCacheTTL
	}
	if s.registerer != nil {
		s.metrics = newMetrics(s.acks)
		if err := s.metrics.register(s.registerer); err != nil {
			return nil, fmt.Errorf("grpc server: register metrics: %w", err)
		}
	}
	s.log = s.log.WithValues("sourceID", s.sourceID)
	// Last: a Service whose informer runs already calls its handler at once.
	for _, b := range s.bindings {
		b.svc.RegisterHandler(serviceHandler{s: s, b: b})
	}
	return s, nil
}

// SourceID returns the source ID the server speaks as for the data types its
// Services back.
func (s *Server) SourceID() string { return s.sourceID }

// Subscribers returns how many Subscribe streams are open.
func (s *Server) Subscribers() int { return s.reg.len() }

func (s *Server) serverOptions() []grpc.ServerOption {
	cfg := s.cfg
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxReceiveBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    time.Duration(cfg.KeepAliveTime),
			Timeout: time.Duration(cfg.KeepAliveTimeout),
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             time.Duration(cfg.MinClientPingInterval),
			PermitWithoutStream: true,
		}),
		// Stop returns only once every handler has: nothing outlives Serve.
		grpc.WaitForHandlers(true),
	}
	if s.tlsConfig != nil {
		opts = append(opts, grpc.Creds(expiringCreds{credentials.NewTLS(s.tlsConfig), s.handshakeFailed}))
	}
	if s.metrics != nil {
		opts = append(opts, grpc.StatsHandler(statsHandler{s.metrics}))
	}
	return append(opts, s.grpcOpts...)
}

// handshakeFailed counts and logs a refused TLS handshake: an expired or
// foreign client certificate, or a client that is not speaking TLS.
func (s *Server) handshakeFailed(err error) {
	reason := handshakeFailure(err)
	if s.metrics != nil {
		s.metrics.handshakeFailures.WithLabelValues(reason).Inc()
	}
	s.log.V(2).Info("TLS handshake refused", "reason", reason, "err", err.Error())
}

// shutdownGrace bounds how long Serve waits for unary calls in flight when
// its context ends; Subscribe streams end at once.
const shutdownGrace = 5 * time.Second

// Serve serves on lis until ctx ends, then ends every Subscribe stream
// (clients resubscribe, to this server once it serves again or to another
// replica), lets calls in flight finish for a few seconds, and returns nil
// once every handler has returned. It returns the listener's error if lis
// fails first. lis is closed when Serve returns.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(s.serverOptions()...)
	s.servedAt.CompareAndSwap(0, time.Now().UnixNano())
	in := &instance{s: s, stopping: make(chan struct{})}
	protocol.RegisterCloudEventServiceServer(gs, in)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	if s.acks != nil {
		resendCtx, stopResends := context.WithCancel(ctx)
		resends := make(chan struct{})
		go func() { s.resendLoop(resendCtx); close(resends) }()
		defer func() { stopResends(); <-resends }()
	}
	s.log.V(0).Info("serving", "address", lis.Addr().String())
	select {
	case err := <-errc:
		close(in.stopping)
		gs.Stop()
		return fmt.Errorf("grpc server: serve %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	// No new connections first, so that the subscribers whose streams end
	// now reconnect elsewhere (another replica behind the address) rather
	// than here.
	lis.Close()
	close(in.stopping)
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	timer := time.NewTimer(shutdownGrace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		gs.Stop()
		<-done
	}
	<-errc
	s.log.V(0).Info("stopped", "address", lis.Addr().String())
	return nil
}

// Pending reports the specs of the Services' data types that the server
// sent to agents connected to it and that no status acknowledged yet
// (pending.Reporter; the workwire program serves it on its admin port):
// none for a Service that is no Acknowledger. A spec for an agent that is
// not connected is not sent, so not waited for: the agent's spec resync
// brings it when it connects. It is goroutine-safe.
func (s *Server) Pending(q pending.Query) pending.Report {
	if s.acks == nil {
		return pending.Report{Time: time.Now()}
	}
	return s.acks.Report(q, time.Now())
}

// ListenAndServe listens on the config's ListenAddress and serves there, as
// Serve does, until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.ListenAddress)
	if err != nil {
		return fmt.Errorf("grpc server: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Route hands evt to the subscribers route reaches that subscribed to its
// data type, as Publish does after authentication and authorization,
// without checking evt in any way. It is for programs that embed the server
// and publish themselves, and for tests (grpctest feeds subscribers
// malformed events with it). It returns how many subscribers it reached; it
// never blocks.
func (s *Server) Route(route options.Route, evt *protocol.CloudEvent) int {
	return s.reg.route(route, newQueued(route.Cluster, evt, eventDataType(evt.GetType())))
}

// instance is the service one Serve registers; stopping ends its streams.
type instance struct {
	protocol.UnimplementedCloudEventServiceServer
	s        *Server
	stopping chan struct{}
}

// eventDataType is the data type of an event type; zero for a malformed
// type.
func eventDataType(eventType string) types.DataType {
	et, err := types.ParseEventType(eventType)
	if err != nil {
		return types.DataType{}
	}
	return et.DataType
}

// label is dt as metrics and authorization name it: "" for none.
func label(dt types.DataType) string {
	if dt.IsZero() {
		return ""
	}
	return dt.String()
}

// Publish implements protocol.CloudEventServiceServer.
func (in *instance) Publish(ctx context.Context, req *protocol.PublishRequest) (resp *emptypb.Empty, err error) {
	s := in.s
	began := time.Now()
	// The labels stay empty until the call is authorized: what a caller
	// that is refused claims (clusters, data types) must not create time
	// series. Refusals are counted by code alone.
	labels := ceLabels{method: "Publish"}
	defer func() {
		if s.metrics != nil {
			if err == nil {
				s.metrics.ceSent(labels) // the acknowledgement
			}
			s.metrics.ceDone(labels, err, began)
		}
	}()
	id, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	route, dt, err := s.publishRoute(req)
	if err != nil {
		return nil, err
	}
	pbe := req.GetEvent()
	et, _ := types.ParseEventType(pbe.GetType()) // publishRoute parsed it
	if err := s.authorize(ctx, id, Request{Verb: VerbPublish, Role: route.Role, Source: route.Source, Cluster: route.Cluster,
		DataType: label(dt), SubResource: et.SubResource, Action: et.Action}); err != nil {
		return nil, err
	}
	ctx = WithIdentity(ctx, id)
	labels.cluster, labels.dataType = route.Cluster, label(dt)
	if s.metrics != nil {
		s.metrics.ceCall(labels)
		s.metrics.ceReceived(labels)
	}
	if !dt.IsZero() && len(s.bindings) > 0 {
		handled, err := s.publishToService(ctx, route, pbe, dt)
		if err != nil || handled {
			return &emptypb.Empty{}, err
		}
	}
	q := newQueued(route.Cluster, pbe, dt)
	var n int
	if route.Role == options.RoleStatus || route.Role == options.RoleSpecResync {
		if n, err = s.reg.routeToSources(ctx, route, q, s.queueWait); err != nil {
			return nil, status.FromContextError(err).Err()
		}
	} else {
		n = s.reg.route(route, q)
	}
	if log := s.log.V(4); log.Enabled() {
		log.Info("routed", "id", pbe.GetId(), "type", pbe.GetType(), "route", route, "subscribers", n, "user", id.User)
	}
	return &emptypb.Empty{}, nil
}

// publishRoute checks what a caller publishes, before anything else looks
// at it: an event with the attributes CloudEvents requires, and a route its
// type and attributes give that names every ID its role needs. It returns
// the route and the event's data type (zero when its type names none). Its
// errors are InvalidArgument status errors.
//
// A Service is the source of its data type, so what an agent publishes of
// it is addressed to the Service: a status that names no source (OCM's
// agents leave originalsource empty for the types registration carries),
// and a spec event, which is an agent's request (to create its
// ManagedCluster, renew its Lease) and travels as a status does.
func (s *Server) publishRoute(req *protocol.PublishRequest) (options.Route, types.DataType, error) {
	pbe := req.GetEvent()
	if pbe == nil {
		return options.Route{}, types.DataType{}, status.Error(codes.InvalidArgument, "publish request without an event")
	}
	var missing []string
	for _, a := range []struct{ name, value string }{
		{"id", pbe.GetId()}, {"source", pbe.GetSource()}, {"specversion", pbe.GetSpecVersion()}, {"type", pbe.GetType()},
	} {
		if a.value == "" {
			missing = append(missing, a.name)
		}
	}
	if len(missing) > 0 {
		return options.Route{}, types.DataType{}, status.Errorf(codes.InvalidArgument, "event %q lacks required attributes %s", pbe.GetId(), strings.Join(missing, ", "))
	}
	route, err := protocol.DeriveRoute(pbe)
	if err != nil {
		return options.Route{}, types.DataType{}, status.Errorf(codes.InvalidArgument, "event %s: its type and attributes give no route: %v", pbe.GetId(), err)
	}
	dt := eventDataType(pbe.GetType())
	if !dt.IsZero() && s.serviceFor(dt) != nil {
		switch {
		case route.Role == options.RoleSpec:
			route = options.Route{Role: options.RoleStatus, Source: s.sourceID, Cluster: route.Cluster}
		case route.Role == options.RoleStatus && route.Source == "":
			route.Source = s.sourceID
		}
	}
	if err := route.Validate(); err != nil {
		return options.Route{}, types.DataType{}, status.Errorf(codes.InvalidArgument, "event %s: %v", pbe.GetId(), err)
	}
	return route, dt, nil
}

// publishToService gives a Service what is addressed to it: status for this
// server's source ID, and spec resyncs (which other sources hear too, so
// handled is false for them). dt is the event's data type.
func (s *Server) publishToService(ctx context.Context, route options.Route, pbe *protocol.CloudEvent, dt types.DataType) (handled bool, err error) {
	b := s.serviceFor(dt)
	if b == nil {
		return false, nil
	}
	switch {
	case route.Role == options.RoleStatus && route.Source == s.sourceID:
		evt, err := protocol.FromProto(pbe)
		if err != nil {
			return true, status.Errorf(codes.InvalidArgument, "event %s: %v", pbe.GetId(), err)
		}
		if err := s.handleStatus(ctx, b, route, evt); err != nil {
			if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
				return true, err
			}
			return true, status.Errorf(codes.Internal, "handle status %s: %v", pbe.GetId(), err)
		}
		return true, nil
	case route.Role == options.RoleSpecResync && b.resyncs():
		evt, err := protocol.FromProto(pbe)
		if err != nil {
			return true, status.Errorf(codes.InvalidArgument, "event %s: %v", pbe.GetId(), err)
		}
		for _, sub := range s.reg.agentsOf(route.Cluster) {
			if sub.work == nil || !slices.Contains(s.servicesFor(sub.dataTypes), b) {
				continue // not an agent this server serves b's data type to
			}
			sub.schedule(func(ctx context.Context) { sub.agentWork(s).answerSpecResync(ctx, b, evt) })
		}
	}
	return false, nil
}

// Subscribe implements protocol.CloudEventServiceServer.
//
// An operator reads who subscribes from the logs at V(0): each subscription
// refused, opened and ended, with the identity, the cluster or source, the
// data types, the peer's address and, at the end, why.
func (in *instance) Subscribe(req *protocol.SubscriptionRequest, stream grpc.ServerStreamingServer[protocol.CloudEvent]) error {
	s := in.s
	ctx := stream.Context()
	log := s.log.WithValues("cluster", req.GetClusterName())
	if req.GetClusterName() == "" {
		log = s.log.WithValues("source", req.GetSource())
	}
	log = log.WithValues("dataTypes", req.GetDataTypes(), "peer", peerAddr(ctx))
	id, err := s.authenticate(ctx)
	if err != nil {
		log.Info("subscription refused", "err", err)
		return err
	}
	if (req.GetSource() == "") == (req.GetClusterName() == "") {
		return status.Error(codes.InvalidArgument, "a subscription names exactly one of source and cluster_name")
	}
	subscribed, err := parseDataTypes(req.GetDataTypes())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "subscription: %v", err)
	}
	if err := s.authorizeSubscription(ctx, id, req); err != nil {
		log.Info("subscription refused", "user", id.User, "groups", id.Groups, "err", err)
		return err
	}
	// Only an authorized subscription creates time series (see Publish).
	if s.metrics != nil {
		for _, dt := range subscriptionDataTypes(req) {
			l := ceLabels{cluster: req.GetClusterName(), dataType: dt, method: "Subscribe"}
			s.metrics.ceCall(l)
			s.metrics.ceReceived(l)
		}
	}

	var bs []*binding
	if req.GetClusterName() != "" {
		bs = s.servicesFor(subscribed)
	}
	sub := newSubscriber(s.nextID.Add(1), req, subscribed, id, s.queueSize, s.queueBytes, len(bs) > 0)
	log = log.WithValues("subscriber", sub.id, "user", id.User)
	s.reg.add(sub)
	defer s.reg.remove(sub)
	log.Info("subscribed", "groups", id.Groups)
	opened, why := time.Now(), "the subscriber ended it, or its connection ended"
	defer func() {
		log.Info("subscription ended", "why", why, "after", time.Since(opened).Round(time.Millisecond))
	}()

	if s.cfg.Compression != "" {
		// A subscriber that does not accept it gets the events as they are.
		if accepted, _ := grpc.ClientSupportedCompressors(ctx); slices.Contains(accepted, s.cfg.Compression) {
			if err := grpc.SetSendCompressor(ctx, s.cfg.Compression); err != nil {
				return err
			}
		}
	}
	// The headers tell the client the subscription is in place: what is
	// published from now on reaches it.
	if err := stream.SendHeader(s.subscriptionHeader(sub)); err != nil {
		return err
	}
	if len(bs) > 0 {
		// The worker answers resyncs for the Services; it ends with the
		// stream.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() {
			defer close(done)
			sub.runWork(wctx)
		}()
		for _, b := range bs {
			if b.resyncs() {
				sub.schedule(func(ctx context.Context) { sub.agentWork(s).requestStatusResync(ctx, b) })
			}
		}
	}

	// A heartbeat every interval, whatever else goes out: OCM's agents
	// count only heartbeats toward their health check.
	var tick <-chan time.Time
	if s.heartbeat > 0 {
		ticker := time.NewTicker(s.heartbeat)
		defer ticker.Stop()
		tick = ticker.C
	}
	// A grant can be taken back (a token revoked, a binding removed): every
	// AuthCacheTTL the subscription is authorized again and ends once it is
	// refused. A check that cannot decide (Unavailable) leaves it be.
	var recheck <-chan time.Time
	if s.authn != nil || s.authz != nil {
		ticker := time.NewTicker(s.recheck)
		defer ticker.Stop()
		recheck = ticker.C
	}
	for {
		select {
		case <-recheck:
			id, err := s.authenticate(ctx)
			if err == nil {
				err = s.authorizeSubscription(ctx, id, req)
			}
			if err != nil && status.Code(err) != codes.Unavailable {
				why = "no longer allowed: " + err.Error()
				return err
			}
		case q := <-sub.queue:
			err := stream.Send(q.msg)
			sub.dequeued(q)
			if err != nil {
				why = "send: " + err.Error()
				return err
			}
			if s.metrics != nil {
				s.metrics.ceSent(ceLabels{cluster: q.cluster, dataType: q.dataType, method: "Subscribe"})
			}
		case <-tick:
			if err := stream.Send(protocol.NewHeartbeat()); err != nil {
				why = "send: " + err.Error()
				return err
			}
		case <-sub.gone:
			why = "fell behind: " + sub.why
			return status.Errorf(codes.ResourceExhausted, "subscriber fell behind (%s): resubscribe and resync", sub.why)
		case <-in.stopping:
			why = "the server is shutting down"
			return status.Error(codes.Unavailable, "server shutting down")
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// authorizeSubscription authorizes id's req for each data type it names
// (or every data type, for none).
func (s *Server) authorizeSubscription(ctx context.Context, id Identity, req *protocol.SubscriptionRequest) error {
	areq := Request{Verb: VerbSubscribe, Role: options.RoleSpec, Cluster: req.GetClusterName()}
	if req.GetSource() != "" {
		areq = Request{Verb: VerbSubscribe, Role: options.RoleStatus, Source: req.GetSource()}
	}
	for _, dt := range subscriptionDataTypes(req) {
		areq.DataType = dt
		if err := s.authorize(ctx, id, areq); err != nil {
			return err
		}
	}
	return nil
}

// subscriptionDataTypes are the data types req names, or "" (every data
// type) if it names none.
func subscriptionDataTypes(req *protocol.SubscriptionRequest) []string {
	if dts := req.GetDataTypes(); len(dts) > 0 {
		return dts
	}
	return []string{""}
}

// subscriptionHeader is the response header of sub's stream: its ID (OCM's
// agents refuse a stream without one), the heartbeat interval, and the data
// types it carries, which tells workwire's clients that one stream carries
// them all.
func (s *Server) subscriptionHeader(sub *subscriber) metadata.MD {
	md := metadata.Pairs(protocol.HeaderSubscriptionID, strconv.FormatUint(sub.id, 10))
	if s.heartbeat > 0 {
		md.Set(protocol.HeaderHeartbeatInterval, s.heartbeat.String())
	}
	names := "*"
	if len(sub.dataTypes) > 0 {
		list := make([]string, len(sub.dataTypes))
		for i, dt := range sub.dataTypes {
			list[i] = dt.String()
		}
		names = strings.Join(list, ",")
	}
	md.Set(protocol.HeaderDataTypes, names)
	return md
}

// runWork runs the subscriber's Service tasks until ctx ends.
func (sub *subscriber) runWork(ctx context.Context) {
	for {
		select {
		case f := <-sub.work:
			f(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// agentWork returns the worker state of an agent subscriber; only its
// worker goroutine calls it.
func (sub *subscriber) agentWork(s *Server) *agentWork {
	if sub.state == nil {
		sub.state = &agentWork{s: s, sub: sub}
	}
	return sub.state
}

// authenticate returns the caller's verified identity.
func (s *Server) authenticate(ctx context.Context) (Identity, error) {
	if s.authn == nil {
		return Identity{User: "system:anonymous"}, nil
	}
	creds := credentialsFrom(ctx)
	if creds.Token == "" && len(creds.Certificates) == 0 {
		return Identity{}, status.Error(codes.Unauthenticated, "no credentials: present a client certificate or a bearer token")
	}
	id, err := s.authnCache.get(credentialsKey(creds), func() (Identity, error) {
		return s.authn.Authenticate(ctx, creds)
	}, func(error) bool { return false })
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return Identity{}, err
		}
		if errors.Is(err, ErrNoCredentials) {
			return Identity{}, status.Error(codes.Unauthenticated, "no credentials this server accepts")
		}
		return Identity{}, status.Errorf(codes.Unauthenticated, "authentication failed: %v", err)
	}
	return id, nil
}

func credentialsFrom(ctx context.Context) Credentials {
	var c Credentials
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				c.Token = strings.TrimSpace(v[7:])
				break
			}
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			c.Certificates = ti.State.VerifiedChains[0]
		}
	}
	return c
}

// peerAddr is the address of the caller of ctx's call, or "".
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// authorize checks req for id.
func (s *Server) authorize(ctx context.Context, id Identity, req Request) error {
	if s.authz == nil {
		return nil
	}
	_, err := s.authzCache.get(requestKey(id, req), func() (struct{}, error) {
		return struct{}{}, s.authz.Authorize(ctx, id, req)
	}, func(err error) bool { return errors.Is(err, ErrDenied) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	default:
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return err
		}
		return status.Errorf(codes.Unavailable, "authorization: %v", err)
	}
}
