package generic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/ack"
	"github.com/workwire/sdk-go/internal/resync"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/pending"
)

// SourceClient is the hub side of the protocol: it publishes specs to
// agents and hands their statuses to its handlers. On start, on every
// reconnect and periodically it asks agents for the statuses it lacks; it
// answers agents' spec resync requests from its Lister, including
// delete_requests for resources it no longer has. It sends a spec again
// when its agent does not acknowledge it (WithSpecResend).
//
// It is goroutine-safe. Handlers run on its worker goroutines.
type SourceClient[T Object] struct {
	c        *core[T]
	cfg      sourceConfig
	order    statusOrder
	sessions resync.Sessions[sessionKey, T, struct{}] // agents' spec resyncs
	acks     *ack.Tracker                             // nil if specs are not sent again
}

// NewSourceClient returns a source client for sourceID that sends through
// tr, which it owns from now on (Close closes it). lister lists the
// resources the source holds; hash gives their status hashes; codecs (one
// per data type) encode and decode them. It does no network I/O.
func NewSourceClient[T Object](sourceID string, tr options.Transport, lister Lister[T], hash StatusHashGetter[T], codecs []Codec[T], opts ...SourceOption) (*SourceClient[T], error) {
	cfg := sourceConfig{config: defaultConfig(), orphanDeletion: DeleteOwnOrphans, resendAfter: DefaultSpecResendAfter}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("new source client: option %d is nil", i)
		}
		o.applySource(&cfg)
	}
	if cfg.resendAfter < 0 {
		return nil, fmt.Errorf("new source client: spec resend: %v, want 0 (off) or more", cfg.resendAfter)
	}
	if cfg.window < 0 {
		return nil, fmt.Errorf("new source client: spec window: %d, want 0 (off) or more", cfg.window)
	}
	if cfg.window > 0 && cfg.resendAfter == 0 {
		return nil, fmt.Errorf("new source client: spec window %d needs spec resend, which WithSpecResend(0) turned off: the window counts the specs no status has acknowledged yet", cfg.window)
	}
	c, err := newCore(SideSource, sourceID, tr, lister, hash, codecs, cfg.config)
	if err != nil {
		return nil, err
	}
	s := &SourceClient[T]{c: c, cfg: cfg, order: statusOrder{m: make(map[string]map[string]statusMark)}}
	if cfg.resendAfter > 0 {
		s.acks = ack.New(ack.Config{After: cfg.resendAfter, Max: max(SpecResendMax, cfg.resendAfter), PerRound: SpecResendPerRound, Window: cfg.window})
		c.loops = append(c.loops, s.resendLoop)
	}
	c.logic = s
	c.subs = options.SourceSubscriptions(sourceID, c.codecs.dataTypeNames())
	return s, nil
}

// Start connects the transport and starts the workers. It blocks until the
// transport is connected and subscribed or ctx ends (see
// options.Transport.Start); the client then runs until Close. A client
// starts once; after a failed Start, it is closed.
func (s *SourceClient[T]) Start(ctx context.Context) error { return s.c.start(ctx) }

// Close stops the client and its transport and waits for its goroutines,
// or until ctx ends. It is idempotent.
func (s *SourceClient[T]) Close(ctx context.Context) error { return s.c.close(ctx) }

// Healthy returns nil once Start returned nil, until Close, while the
// transport is connected (as far as it can tell: see
// options.HealthChecker); otherwise an error wrapping ErrNotStarted,
// ErrClosed or options.ErrNotConnected. Wire it to a readiness probe. It is
// goroutine-safe and does not block.
func (s *SourceClient[T]) Healthy() error { return s.c.healthy() }

// Stats returns a snapshot of the client for gauges; a source client does
// not know how many resources it holds (Held is -1). It is goroutine-safe.
func (s *SourceClient[T]) Stats() Stats {
	st := s.c.stats()
	if s.acks != nil {
		st.Unacknowledged, st.OldestUnacknowledged = s.acks.Pending(time.Now())
	}
	return st
}

// Pending reports the specs the client sent that no status at their version
// acknowledged yet (pending.Reporter; serve it with pending.Handler): none
// with spec re-sends off (WithSpecResend). It is goroutine-safe.
func (s *SourceClient[T]) Pending(q pending.Query) pending.Report {
	if s.acks == nil {
		return pending.Report{Time: time.Now()}
	}
	return s.acks.Report(q, time.Now())
}

// Subscribe adds handlers for statuses received from agents. Call it before
// Start.
func (s *SourceClient[T]) Subscribe(handlers ...ResourceHandler[T]) error {
	return s.c.subscribe(handlers)
}

// Publish sends obj as a spec event (create_request, update_request or
// delete_request) to its cluster: its namespace, or what its codec names
// (Clusterer). It waits for the publish rate limiter, then until the
// transport has sent the event — unless the agent's window holds the spec
// back (WithSpecWindow): it then returns nil at once, and the spec goes
// when statuses free the window.
func (s *SourceClient[T]) Publish(ctx context.Context, t types.EventType, obj T) error {
	if t.SubResource != types.SubResourceSpec || (t.Action != types.CreateRequest && t.Action != types.UpdateRequest && t.Action != types.DeleteRequest) {
		return fmt.Errorf("publish %s: %w: a source publishes spec create, update and delete requests", t, ErrWrongEventType)
	}
	codec, err := s.c.codecs.get(t.DataType)
	if err != nil {
		return fmt.Errorf("publish %s: %w", t, err)
	}
	t.DataType = codec.dt
	evt, err := codec.Encode(s.c.ceSource, t, obj)
	if err != nil {
		return fmt.Errorf("publish %s: %w: %w", t, ErrEncode, err)
	}
	cluster := codec.cluster(obj)
	if cluster == "" {
		return fmt.Errorf("publish %s: %w: %s names no cluster", t, ErrEncode, obj.GetUID())
	}
	if err := s.c.checkStarted(); err != nil {
		return err
	}
	// Tracked before it is sent: its status may be handled before the
	// transport returns.
	if !s.sending(codec, cluster, obj, t.Action == types.CreateRequest) {
		return nil // held back by the agent's window; it goes when the window lets it
	}
	err = s.c.publish(ctx, options.Route{Role: options.RoleSpec, Source: s.c.id, Cluster: cluster}, t, evt)
	if Permanent(err) {
		s.undeliverable(codec, cluster, obj)
	}
	return err
}

// Resync asks every agent for the statuses of dataType (zero: every data
// type) whose hash differs from what the Lister holds. It blocks until the
// request is sent.
func (s *SourceClient[T]) Resync(ctx context.Context, dataType types.DataType) error {
	return s.c.resync(ctx, dataType)
}

var _ Interface[Object] = (*SourceClient[Object])(nil)

func (s *SourceClient[T]) classify(d *options.Delivery, h types.Header) (*task[T], DropReason, error) {
	evt, et := d.Event, h.Type
	codec, err := s.c.codecs.get(et.DataType)
	if err != nil {
		return nil, DropUnknownDataType, err
	}
	cluster := d.Route.Cluster
	switch {
	case h.ClusterName != "" && cluster != "" && h.ClusterName != cluster:
		return nil, DropForeign, fmt.Errorf("clustername %q differs from the cluster %q the transport saw", h.ClusterName, cluster)
	case cluster == "":
		cluster = h.ClusterName
	}
	if cluster == "" {
		return nil, DropMalformed, errors.New("no clustername extension, and the transport did not name the cluster")
	}
	// The object the codec decodes is of the cluster the transport saw
	// (an MQTT topic's), whatever else the event claims.
	h.ClusterName = cluster
	switch {
	case et.SubResource == types.SubResourceStatus && et.Action != types.ResyncRequest:
		if h.ResourceID == "" {
			return nil, DropMalformed, types.Missing(d.Event, types.ExtResourceID)
		}
		if d.Route.Source != "" && d.Route.Source != s.c.id {
			return nil, DropForeign, fmt.Errorf("status for source %q", d.Route.Source)
		}
		if h.OriginalSource != "" && h.OriginalSource != s.c.id {
			return nil, DropForeign, fmt.Errorf("status for source %q", h.OriginalSource)
		}
		et.DataType = codec.dt
		et.Action = types.UpdateRequest // an OCM agent answers a status resync with resync_response
		return &task[T]{
			kind: taskEvent, lane: laneUpdate, evt: evt, h: h, et: et, codec: codec,
			route: options.Route{Role: options.RoleStatus, Source: s.c.id, Cluster: cluster},
		}, "", nil
	case et.SubResource == types.SubResourceSpec && et.Action == types.ResyncRequest:
		return &task[T]{
			kind: taskResyncRequest, lane: laneResync, batches: []*cloudevents.Event{evt},
			route:    options.Route{Role: options.RoleSpecResync, Cluster: cluster},
			dataType: codec.dt,
		}, "", nil
	default:
		return nil, DropUnexpected, fmt.Errorf("a source does not handle %s events", et)
	}
}

func (s *SourceClient[T]) handleEvent(ctx context.Context, t *task[T]) error {
	cluster, id := t.route.Cluster, t.h.ResourceID
	if p, ok := s.tracked(t.codec, cluster); ok {
		// Whatever becomes of the status, the agent holds its version.
		d, ok, released := s.acks.Acked(p, id, t.h.Version, time.Now())
		if ok {
			s.c.cfg.observer.SpecAcknowledged(t.codec.dt, d)
		}
		for _, r := range released {
			if err := s.sendSpec(ctx, t.codec, cluster, r.Object.(T), !r.Create); err != nil {
				// Tracked in flight: it is sent again when due.
				s.c.cfg.errorHandler(ctx, err, "cannot send a spec the window let go; sent again later", "cluster", cluster, "resourceID", r.ResourceID)
			}
		}
	}
	order := StatusOrder{Version: t.h.Version, Sequence: t.h.Sequence, HasSequence: t.h.HasSequence}
	if s.order.stale(cluster, id, order) {
		return &dropError{reason: DropOutOfOrder, err: fmt.Errorf("status of %s (version %d, sequence %d) from %s arrived after a newer one", id, t.h.Version, t.h.Sequence, cluster)}
	}
	obj, err := t.codec.Decode(t.h, t.evt)
	if err != nil {
		return &dropError{reason: DropDecode, err: &DecodeError{EventID: t.evt.ID(), EventType: t.evt.Type(), Err: err}}
	}
	ctx = withStatusOrder(ctx, order)
	if err := s.c.callHandlers(ctx, t.et, obj); err != nil {
		return err
	}
	s.order.record(cluster, id, order, t.received)
	return nil
}

// answerResync answers one batch of an agent's spec resync request as
// package resync answers it for every source (resync.AnswerSpec).
func (s *SourceClient[T]) answerResync(ctx context.Context, cluster string, dt types.DataType, batch *cloudevents.Event, received uint64) error {
	c := s.c
	req, err := resync.ParseSpecRequest(batch)
	if err != nil {
		return malformed(err)
	}
	seq, hasSeq, err := types.SequenceID(batch)
	if err != nil {
		return malformed(err)
	}
	codec, err := c.codecs.get(dt)
	if err != nil {
		return &dropError{reason: DropUnknownDataType, err: err}
	}
	orphans := resync.Orphans{
		Source:       c.id,
		Unattributed: s.cfg.orphanDeletion == DeleteAllOrphans,
		Never:        s.cfg.orphanDeletion == KeepOrphans,
		Grace:        time.Since(c.started()) < s.cfg.orphanGrace,
	}
	src := specAnswer[T]{s: s, codec: codec, cluster: cluster}
	answer, err := resync.AnswerSpec(ctx, &s.sessions, sessionKey{peer: cluster, dt: dt}, c.cfg.sessionTTL, req, orphans, src,
		func(*resync.Session[T, struct{}]) {
			// The agent may have restarted with a sequence behind the one
			// its earlier run left marks with.
			s.order.resync(cluster, seq, hasSeq, received)
			if p, ok := s.tracked(codec, cluster); ok {
				s.acks.Resynced(p, time.Now())
			}
		})
	if err != nil {
		return err
	}
	if answer.Kept > 0 {
		c.log.V(2).Info("in the orphan grace period: orphans are kept for now", "cluster", cluster, "orphans", answer.Kept)
	}
	if sess := answer.Done; sess != nil {
		c.resyncAnswered(dt, sess.Sent, sess.Opened())
		c.log.V(2).Info("answered spec resync", "cluster", cluster, "dataType", dt, "sent", sess.Sent, "held", sess.Held())
	}
	return nil
}

// specAnswer is the source client as resync.AnswerSpec sees it, answering
// cluster's spec resync of codec's data type.
type specAnswer[T Object] struct {
	s       *SourceClient[T]
	codec   *codecOf[T]
	cluster string
}

func (a specAnswer[T]) List(context.Context) (map[string]T, error) {
	dt := a.codec.dt
	objs, err := a.s.c.lister.List(ListOptions{Source: a.s.c.id, ClusterName: a.cluster, DataType: dt})
	if err != nil {
		return nil, fmt.Errorf("list %s for spec resync of %s: %w", dt, a.cluster, err)
	}
	return byUID(objs), nil
}

func (a specAnswer[T]) Held(obj T) resync.Held {
	return resync.Held{Version: a.codec.version(obj), Deleting: obj.GetDeletionTimestamp() != nil}
}

func (a specAnswer[T]) Repair(ctx context.Context, obj T, agentVersion int64) (T, error) {
	return a.s.repairVersion(ctx, obj, agentVersion)
}

func (a specAnswer[T]) Send(ctx context.Context, obj T, agentHolds bool) error {
	return a.s.sendSpec(ctx, a.codec, a.cluster, obj, agentHolds)
}

func (a specAnswer[T]) DeleteOrphan(ctx context.Context, e types.ResourceVersion) error {
	return a.s.sendOrphanDelete(ctx, a.codec.dt, a.cluster, e)
}

// byUID indexes objs by their UID, the resource ID.
func byUID[T Object](objs []T) map[string]T {
	m := make(map[string]T, len(objs))
	for _, o := range objs {
		m[string(o.GetUID())] = o
	}
	return m
}

// repairVersion asks a VersionRepairer lister to move obj past the version
// an agent holds. Without one, obj is returned as it is.
func (s *SourceClient[T]) repairVersion(ctx context.Context, obj T, agentVersion int64) (T, error) {
	r, ok := s.c.lister.(VersionRepairer[T])
	if !ok {
		s.c.log.V(2).Info("agent holds a newer version than the source; no VersionRepairer", "resourceID", obj.GetUID(), "source", obj.GetGeneration(), "agent", agentVersion)
		return obj, nil
	}
	repaired, err := r.RepairVersion(ctx, obj, agentVersion)
	if err != nil {
		return obj, fmt.Errorf("repair version of %s: %w", obj.GetUID(), err)
	}
	s.c.log.V(2).Info("repaired version", "resourceID", obj.GetUID(), "was", obj.GetGeneration(), "agent", agentVersion, "now", repaired.GetGeneration())
	return repaired, nil
}

// sendSpec sends obj to cluster — in a resync's answer, again, or as the
// window lets it go: a delete_request if it is being deleted, else an
// update_request if the agent holds it, else a create_request. An object
// the codec cannot encode is reported and skipped, so it cannot hold up
// the others; nor can one too large for the transport.
func (s *SourceClient[T]) sendSpec(ctx context.Context, codec *codecOf[T], cluster string, obj T, agentHolds bool) error {
	action := types.CreateRequest
	switch {
	case obj.GetDeletionTimestamp() != nil:
		action = types.DeleteRequest
	case agentHolds:
		action = types.UpdateRequest
	}
	et := types.EventType{DataType: codec.dt, SubResource: types.SubResourceSpec, Action: action}
	evt, err := codec.Encode(s.c.ceSource, et, obj)
	if err != nil {
		s.c.cfg.errorHandler(s.c.ctx, err, "cannot encode resource; skipped", "resourceID", obj.GetUID(), "cluster", cluster)
		s.undeliverable(codec, cluster, obj)
		return nil
	}
	if !s.sending(codec, cluster, obj, action == types.CreateRequest) {
		return nil // held back by the agent's window
	}
	sent, err := s.c.sendAnswer(ctx, options.Route{Role: options.RoleSpec, Source: s.c.id, Cluster: cluster}, et, evt, string(obj.GetUID()))
	if !sent && err == nil {
		s.undeliverable(codec, cluster, obj) // too large
	}
	return err
}

// tracked returns the peer whose acknowledgements of codec's specs s
// waits for at cluster, and false if it waits for none: specs are not
// sent again, or codec's statuses do not carry its specs' versions
// (a Versioner's).
func (s *SourceClient[T]) tracked(codec *codecOf[T], cluster string) (ack.Peer, bool) {
	if s.acks == nil || codec.versioner != nil {
		return ack.Peer{}, false
	}
	return ack.Peer{Cluster: cluster, DataType: codec.name}, true
}

// sending records a spec about to be sent to cluster, to be acknowledged,
// and reports whether to send it now: false if the agent's window holds it
// back (ack.Tracker.Send).
func (s *SourceClient[T]) sending(codec *codecOf[T], cluster string, obj T, create bool) bool {
	if p, ok := s.tracked(codec, cluster); ok {
		return s.acks.Send(p, string(obj.GetUID()), obj.GetGeneration(), create, obj, time.Now())
	}
	return true
}

// undeliverable forgets a spec that cannot be sent (Permanent): sending
// it again would fail the same way. A spec that failed otherwise stays
// tracked, to be sent again if nothing else delivers it.
func (s *SourceClient[T]) undeliverable(codec *codecOf[T], cluster string, obj T) {
	if p, ok := s.tracked(codec, cluster); ok {
		s.acks.Forget(p, string(obj.GetUID()))
	}
}

// resendLoop sends again, every quarter of the resend delay, the specs
// that are due (ack.Tracker.Due).
func (s *SourceClient[T]) resendLoop(ctx context.Context) {
	tick := time.NewTicker(s.acks.Config().Tick())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for p, due := range s.acks.Due(now) {
				if err := s.resend(ctx, p, due); err != nil && ctx.Err() == nil {
					s.c.cfg.errorHandler(ctx, err, "cannot send unacknowledged specs again; retried later", "cluster", p.Cluster, "dataType", p.DataType)
				}
			}
		}
	}
}

// resend sends p's agent the specs due: those the window let go, and
// those due again, as the Lister has them now; what it no longer has, or
// has at an older version (a source that lost its versions), is not
// waited for any more: a spec resync settles it.
func (s *SourceClient[T]) resend(ctx context.Context, p ack.Peer, due []ack.Due) error {
	i := slices.IndexFunc(s.c.codecs.list, func(c *codecOf[T]) bool { return c.name == p.DataType })
	if i < 0 {
		return fmt.Errorf("%w %s", ErrUnknownDataType, p.DataType)
	}
	codec := s.c.codecs.list[i]
	var held map[string]T
	for _, d := range due {
		if d.Object != nil {
			if err := s.sendSpec(ctx, codec, p.Cluster, d.Object.(T), !d.Create); err != nil {
				return err
			}
			continue
		}
		if held == nil {
			objs, err := s.c.lister.List(ListOptions{Source: s.c.id, ClusterName: p.Cluster, DataType: codec.dt})
			if err != nil {
				return fmt.Errorf("list %s of %s: %w", codec.dt, p.Cluster, err)
			}
			held = byUID(objs)
		}
		obj, ok := held[d.ResourceID]
		if !ok || obj.GetGeneration() < d.Version {
			s.acks.Forget(p, d.ResourceID)
			continue
		}
		if s.c.limiter != nil {
			if err := s.c.limiter.Wait(ctx); err != nil {
				return err
			}
		}
		s.c.log.V(4).Info("sending an unacknowledged spec again", "cluster", p.Cluster, "resourceID", d.ResourceID, "version", d.Version)
		if err := s.sendSpec(ctx, codec, p.Cluster, obj, !d.Create); err != nil {
			return err
		}
		s.c.cfg.observer.SpecResent(codec.dt)
	}
	return nil
}

// sendOrphanDelete asks cluster to delete a resource we no longer have.
func (s *SourceClient[T]) sendOrphanDelete(ctx context.Context, dt types.DataType, cluster string, e types.ResourceVersion) error {
	evt, err := resync.OrphanDelete(s.c.ceSource, dt, cluster, e)
	if err != nil {
		s.c.cfg.errorHandler(s.c.ctx, err, "cannot delete orphan; skipped", "resourceID", e.ResourceID, "cluster", cluster)
		return nil
	}
	et := types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.DeleteRequest}
	return s.c.send(ctx, options.Route{Role: options.RoleSpec, Source: s.c.id, Cluster: cluster}, et, evt)
}

// hashedClusters bounds the clusters a status resync request carries
// hashes for. The request is a broadcast: every agent receives every
// entry, though only its own cluster's concern it, so the hashes cost
// about a hundred bytes per work per agent, and past a few clusters more
// than asking every agent for every status (a few hundred bytes per work,
// once). At 1,000 clusters of 100 works each, the hashes were 10 MB per
// agent, 10 GB queued in one Mosquitto.
const hashedClusters = 8

// requestResync sends a status resync request with the hash of every status
// we hold for dt, or an empty one (every status) if we hold none or hold
// works of more than hashedClusters clusters.
func (s *SourceClient[T]) requestResync(ctx context.Context, dt types.DataType) error {
	c := s.c
	objs, err := c.lister.List(ListOptions{Source: c.id, DataType: dt})
	if err != nil {
		return fmt.Errorf("list %s for status resync: %w", dt, err)
	}
	if codec, err := c.codecs.get(dt); err == nil && manyClusters(objs, codec.cluster) {
		objs = nil
	}
	entries := make([]types.StatusHash, 0, len(objs))
	for _, o := range objs {
		if o.GetUID() == "" {
			c.cfg.errorHandler(c.ctx, errNoResourceID, "status resync: object skipped")
			continue
		}
		h, err := c.hash(o)
		if err != nil {
			c.cfg.errorHandler(c.ctx, err, "status resync: cannot hash status; object skipped", "resourceID", o.GetUID())
			continue
		}
		entries = append(entries, types.StatusHash{ResourceID: string(o.GetUID()), StatusHash: h})
	}
	if !slices.ContainsFunc(entries, func(e types.StatusHash) bool { return e.StatusHash != NoStatus }) {
		entries = entries[:0] // no status at all: ask for every one
	}
	et := types.EventType{DataType: dt, SubResource: types.SubResourceStatus, Action: types.ResyncRequest}
	events, err := resync.Request(c.ceSource, et, entries, c.maxEventBytes(),
		types.StatusHashSize, func(e []types.StatusHash) any { return types.StatusHashList{StatusHashes: e} }, nil)
	if err != nil {
		return err
	}
	for _, evt := range events {
		if err := c.send(ctx, options.Route{Role: options.RoleStatusResync, Source: c.id}, et, evt); err != nil {
			return err
		}
	}
	c.log.V(2).Info("sent status resync", "dataType", dt, "resources", len(entries), "events", len(events))
	return nil
}

// manyClusters reports whether objs are of more than hashedClusters
// clusters.
func manyClusters[T Object](objs []T, cluster func(T) string) bool {
	seen := make(map[string]struct{}, hashedClusters+1)
	for _, o := range objs {
		seen[cluster(o)] = struct{}{}
		if len(seen) > hashedClusters {
			return true
		}
	}
	return false
}

// statusOrder remembers, per cluster and resource, the newest status
// handled, so an older one arriving late is dropped. A status for a newer
// resourceversion always wins; within one version the sequenceid decides.
type statusOrder struct {
	mu sync.Mutex
	m  map[string]map[string]statusMark
}

// statusMark is the newest status handled of one resource, and when it was
// received (task.received).
type statusMark struct {
	order    StatusOrder
	received uint64
}

// stale reports whether a status of order o does not replace the last one
// handled (StatusOrder.Replaces).
func (o *statusOrder) stale(cluster, id string, order StatusOrder) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	last, ok := o.m[cluster][id]
	return ok && !order.Replaces(last.order)
}

func (o *statusOrder) record(cluster, id string, order StatusOrder, received uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byID := o.m[cluster]
	if byID == nil {
		byID = make(map[string]statusMark)
		o.m[cluster] = byID
	}
	byID[id] = statusMark{order: order, received: received}
}

// resync forgets the marks of a cluster whose agent resynced at sequence
// seq, received as the received-th event, that lie above seq: an earlier
// run of the agent, whose clock was ahead, left them, and they would drop
// every status the agent sends now. Marks below seq stay, so a status
// delayed across a periodic resync is still dropped if a newer one was
// handled. An agent that does not tell its sequence (hasSeq false) may have
// started over at any value: all of its marks go. Marks of statuses
// received after the request stay whatever their sequence: the agent sent
// them after it, so they are its current run's, even when a worker handled
// them before the request (resync requests wait in a lane of their own).
func (o *statusOrder) resync(cluster string, seq uint64, hasSeq bool, received uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, m := range o.m[cluster] {
		if m.received < received && (!hasSeq || m.order.HasSequence && m.order.Sequence >= seq) {
			delete(o.m[cluster], id)
		}
	}
}
