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
	"github.com/workwire/sdk-go/internal/resync"
	"github.com/workwire/sdk-go/options"
)

// SourceClient is the hub side of the protocol: it publishes specs to
// agents and hands their statuses to its handlers. On start, on every
// reconnect and periodically it asks agents for the statuses it lacks; it
// answers agents' spec resync requests from its Lister, including
// delete_requests for resources it no longer has.
//
// It is goroutine-safe. Handlers run on its worker goroutines.
type SourceClient[T Object] struct {
	c        *core[T]
	cfg      sourceConfig
	order    statusOrder
	sessions resync.Sessions[sessionKey, T, struct{}] // agents' spec resyncs
}

// NewSourceClient returns a source client for sourceID that sends through
// tr, which it owns from now on (Close closes it). lister lists the
// resources the source holds; hash gives their status hashes; codecs (one
// per data type) encode and decode them. It does no network I/O.
func NewSourceClient[T Object](sourceID string, tr options.Transport, lister Lister[T], hash StatusHashGetter[T], codecs []Codec[T], opts ...SourceOption) (*SourceClient[T], error) {
	cfg := sourceConfig{config: defaultConfig(), orphanDeletion: DeleteOwnOrphans}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("new source client: option %d is nil", i)
		}
		o.applySource(&cfg)
	}
	c, err := newCore(SideSource, sourceID, tr, lister, hash, codecs, cfg.config)
	if err != nil {
		return nil, err
	}
	s := &SourceClient[T]{c: c, cfg: cfg, order: statusOrder{m: make(map[string]map[string]StatusOrder)}}
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
func (s *SourceClient[T]) Stats() Stats { return s.c.stats() }

// Subscribe adds handlers for statuses received from agents. Call it before
// Start.
func (s *SourceClient[T]) Subscribe(handlers ...ResourceHandler[T]) error {
	return s.c.subscribe(handlers)
}

// Publish sends obj as a spec event (create_request, update_request or
// delete_request) to the cluster its codec names. It waits for the publish
// rate limiter, then until the transport has sent the event.
func (s *SourceClient[T]) Publish(ctx context.Context, t types.EventType, obj T) error {
	if t.SubResource != types.SubResourceSpec || (t.Action != types.CreateRequest && t.Action != types.UpdateRequest && t.Action != types.DeleteRequest) {
		return fmt.Errorf("publish %s: %w: a source publishes spec create, update and delete requests", t, ErrWrongEventType)
	}
	codec, err := s.c.codecs.get(t.DataType)
	if err != nil {
		return fmt.Errorf("publish %s: %w", t, err)
	}
	t.DataType = codec.DataType()
	evt, err := codec.Encode(s.c.ceSource, t, obj)
	if err != nil {
		return fmt.Errorf("publish %s: %w: %w", t, ErrEncode, err)
	}
	cluster, err := types.RequiredString(evt, types.ExtClusterName)
	if err != nil {
		return fmt.Errorf("publish %s: %w: %w", t, ErrEncode, err)
	}
	return s.c.publish(ctx, options.Route{Role: options.RoleSpec, Source: s.c.id, Cluster: cluster}, t, evt)
}

// Resync asks every agent for the statuses of dataType (zero: every data
// type) whose hash differs from what the Lister holds. It blocks until the
// request is sent.
func (s *SourceClient[T]) Resync(ctx context.Context, dataType types.DataType) error {
	return s.c.resync(ctx, dataType)
}

var _ Interface[Object] = (*SourceClient[Object])(nil)

func (s *SourceClient[T]) classify(d *options.Delivery, et types.EventType) (*task, DropReason, error) {
	evt := d.Event
	codec, err := s.c.codecs.get(et.DataType)
	if err != nil {
		return nil, DropUnknownDataType, err
	}
	cluster := d.Route.Cluster
	ext, hasExt, err := types.StringExtension(evt, types.ExtClusterName)
	switch {
	case err != nil:
		return nil, DropMalformed, err
	case hasExt && cluster != "" && ext != cluster:
		return nil, DropForeign, fmt.Errorf("clustername %q differs from the cluster %q the transport saw", ext, cluster)
	case cluster == "":
		cluster = ext
	}
	if cluster == "" {
		return nil, DropMalformed, errors.New("no clustername extension, and the transport did not name the cluster")
	}
	if !hasExt {
		// The event names the cluster the transport saw (an MQTT topic's),
		// so the object the codec decodes is of that cluster, whatever
		// else the event claims.
		evt.SetExtension(types.ExtClusterName, cluster)
	}
	switch {
	case et.SubResource == types.SubResourceStatus && et.Action != types.ResyncRequest:
		id, err := types.RequiredString(evt, types.ExtResourceID)
		if err != nil {
			return nil, DropMalformed, err
		}
		version, _, err := types.Int64Extension(evt, types.ExtResourceVersion)
		if err != nil {
			return nil, DropMalformed, err
		}
		seq, hasSeq, err := types.SequenceID(evt)
		if err != nil {
			return nil, DropMalformed, err
		}
		if d.Route.Source != "" && d.Route.Source != s.c.id {
			return nil, DropForeign, fmt.Errorf("status for source %q", d.Route.Source)
		}
		if orig, ok, err := types.StringExtension(evt, types.ExtOriginalSource); err != nil {
			return nil, DropMalformed, err
		} else if ok && orig != s.c.id {
			return nil, DropForeign, fmt.Errorf("status for source %q", orig)
		}
		et.DataType = codec.DataType()
		et.Action = types.UpdateRequest // an OCM agent answers a status resync with resync_response
		return &task{
			kind: taskEvent, lane: laneUpdate, evt: evt, et: et,
			route:      options.Route{Role: options.RoleStatus, Source: s.c.id, Cluster: cluster},
			resourceID: id, version: version, seq: seq, hasSeq: hasSeq,
		}, "", nil
	case et.SubResource == types.SubResourceSpec && et.Action == types.ResyncRequest:
		return &task{
			kind: taskResyncRequest, lane: laneResync, batches: []*cloudevents.Event{evt},
			route:    options.Route{Role: options.RoleSpecResync, Cluster: cluster},
			dataType: codec.DataType(),
		}, "", nil
	default:
		return nil, DropUnexpected, fmt.Errorf("a source does not handle %s events", et)
	}
}

func (s *SourceClient[T]) handleEvent(ctx context.Context, t *task) error {
	cluster := t.route.Cluster
	order := StatusOrder{Version: t.version, Sequence: t.seq, HasSequence: t.hasSeq}
	if s.order.stale(cluster, t.resourceID, order) {
		return &dropError{reason: DropOutOfOrder, err: fmt.Errorf("status of %s (version %d, sequence %d) from %s arrived after a newer one", t.resourceID, t.version, t.seq, cluster)}
	}
	codec, err := s.c.codecs.get(t.et.DataType)
	if err != nil {
		return &dropError{reason: DropUnknownDataType, err: err}
	}
	obj, err := codec.Decode(t.evt)
	if err != nil {
		return &dropError{reason: DropDecode, err: &DecodeError{EventID: t.evt.ID(), EventType: t.evt.Type(), Err: err}}
	}
	ctx = withStatusOrder(ctx, order)
	if err := s.c.callHandlers(ctx, t.et, obj); err != nil {
		return err
	}
	s.order.record(cluster, t.resourceID, order)
	return nil
}

// answerResync answers one batch of an agent's spec resync request as
// package resync decides: it sends every resource the batch names whose
// version is older than ours (or that is being deleted), a delete_request
// for every resource it names that we no longer have and that is ours to
// delete, and, with the last batch, every resource no batch named.
func (s *SourceClient[T]) answerResync(ctx context.Context, cluster string, dt types.DataType, batch *cloudevents.Event) error {
	c := s.c
	resyncID, index, total, err := resync.BatchOf(batch)
	if err != nil {
		return malformed(err)
	}
	req, err := types.DecodeResourceVersionList(batch.Data())
	if err != nil {
		return malformed(err)
	}
	eventSource, _, err := types.StringExtension(batch, types.ExtOriginalSource)
	if err != nil {
		return malformed(err)
	}
	orphans := resync.Orphans{
		Source:       c.id,
		Unattributed: s.cfg.orphanDeletion == DeleteAllOrphans,
		Never:        s.cfg.orphanDeletion == KeepOrphans,
		Grace:        time.Since(c.started()) < s.cfg.orphanGrace,
	}
	seq, hasSeq, err := types.SequenceID(batch)
	if err != nil {
		return malformed(err)
	}
	key := sessionKey{peer: cluster, dt: dt}
	sess, fresh := s.sessions.Open(key, resyncID, total, c.cfg.sessionTTL, time.Now())
	if fresh {
		// The agent may have restarted with a sequence behind the one its
		// earlier run left marks with.
		s.order.resync(cluster, seq, hasSeq)
		objs, err := c.lister.List(ListOptions{Source: c.id, ClusterName: cluster, DataType: dt})
		if err != nil {
			s.sessions.Close(key, sess)
			return fmt.Errorf("list %s for spec resync of %s: %w", dt, cluster, err)
		}
		sess.Hold(byUID(objs))
	}
	if sess.Answered(index) {
		return nil // a redelivered batch
	}
	codec, err := c.codecs.get(dt)
	if err != nil {
		return &dropError{reason: DropUnknownDataType, err: err}
	}
	kept := 0
	var sends []func() error
	for _, e := range req.ResourceVersions {
		obj, ok := sess.Name(e.ResourceID)
		v := resync.Spec(heldOf(codec, obj, ok), ok, e, eventSource, orphans)
		if v == resync.AgentAhead {
			if obj, err = s.repairVersion(ctx, obj, e.ResourceVersion); err != nil {
				return err
			}
			v = resync.Spec(heldOf(codec, obj, ok), ok, e, eventSource, orphans)
		}
		switch v {
		case resync.Send:
			sends = append(sends, func() error { return s.sendSpec(ctx, codec, cluster, obj, true) })
		case resync.DeleteOrphan:
			sends = append(sends, func() error { return s.sendOrphanDelete(ctx, dt, cluster, e) })
		case resync.KeepOrphan:
			kept++
		}
	}
	if err := sess.Send(sends); err != nil {
		return err
	}
	if kept > 0 {
		c.log.V(2).Info("in the orphan grace period: orphans are kept for now", "cluster", cluster, "orphans", kept)
	}
	if !sess.Finish(index) {
		return nil
	}
	if err := sess.AnswerUnnamed(func(obj T) error { return s.sendSpec(ctx, codec, cluster, obj, false) }); err != nil {
		return err
	}
	s.sessions.Close(key, sess)
	c.resyncAnswered(dt, sess.Sent, sess.Opened())
	c.log.V(2).Info("answered spec resync", "cluster", cluster, "dataType", dt, "sent", sess.Sent, "held", sess.Held())
	return nil
}

// heldOf is what package resync needs to know of obj, if ok, whose codec
// is c.
func heldOf[T Object](c Codec[T], obj T, ok bool) resync.Held {
	if !ok {
		return resync.Held{}
	}
	return resync.Held{Version: versionOf(c, obj), Deleting: obj.GetDeletionTimestamp() != nil}
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

// sendSpec sends obj to cluster: a delete_request if it is being deleted,
// else an update_request if the agent holds it, else a create_request. An
// object the codec cannot encode is reported and skipped, so it cannot hold
// up the others; nor can one too large for the transport.
func (s *SourceClient[T]) sendSpec(ctx context.Context, codec Codec[T], cluster string, obj T, agentHolds bool) error {
	action := types.CreateRequest
	switch {
	case obj.GetDeletionTimestamp() != nil:
		action = types.DeleteRequest
	case agentHolds:
		action = types.UpdateRequest
	}
	et := types.EventType{DataType: codec.DataType(), SubResource: types.SubResourceSpec, Action: action}
	evt, err := codec.Encode(s.c.ceSource, et, obj)
	if err != nil {
		s.c.cfg.errorHandler(s.c.ctx, err, "cannot encode resource for resync; skipped", "resourceID", obj.GetUID(), "cluster", cluster)
		return nil
	}
	return s.c.sendAnswer(ctx, options.Route{Role: options.RoleSpec, Source: s.c.id, Cluster: cluster}, et, evt, string(obj.GetUID()))
}

// sendOrphanDelete asks cluster to delete a resource we no longer have. We
// have no object to encode, so the event carries the identity only.
func (s *SourceClient[T]) sendOrphanDelete(ctx context.Context, dt types.DataType, cluster string, e types.ResourceVersion) error {
	et := types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.DeleteRequest}
	evt := newEvent(s.c.ceSource, et)
	evt.SetExtension(types.ExtResourceID, e.ResourceID)
	evt.SetExtension(types.ExtClusterName, cluster)
	types.SetTimeExtension(evt, types.ExtDeletionTimestamp, time.Now())
	if err := types.SetInt32Extension(evt, types.ExtResourceVersion, e.ResourceVersion); err != nil {
		s.c.cfg.errorHandler(s.c.ctx, err, "cannot delete orphan; skipped", "resourceID", e.ResourceID, "cluster", cluster)
		return nil
	}
	return s.c.send(ctx, options.Route{Role: options.RoleSpec, Source: s.c.id, Cluster: cluster}, et, evt)
}

// requestResync sends a status resync request with the hash of every status
// we hold for dt, or an empty one (every status) if we hold none.
func (s *SourceClient[T]) requestResync(ctx context.Context, dt types.DataType) error {
	c := s.c
	objs, err := c.lister.List(ListOptions{Source: c.id, DataType: dt})
	if err != nil {
		return fmt.Errorf("list %s for status resync: %w", dt, err)
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
	events, err := buildResyncEvents(c.ceSource, et, entries, c.maxEventBytes(),
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

// statusOrder remembers, per cluster and resource, the newest status
// handled, so an older one arriving late is dropped. A status for a newer
// resourceversion always wins; within one version the sequenceid decides.
type statusOrder struct {
	mu sync.Mutex
	m  map[string]map[string]StatusOrder
}

// stale reports whether a status of order o does not replace the last one
// handled (StatusOrder.Replaces).
func (o *statusOrder) stale(cluster, id string, order StatusOrder) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	last, ok := o.m[cluster][id]
	return ok && !order.Replaces(last)
}

func (o *statusOrder) record(cluster, id string, order StatusOrder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byID := o.m[cluster]
	if byID == nil {
		byID = make(map[string]StatusOrder)
		o.m[cluster] = byID
	}
	byID[id] = order
}

// resync forgets the marks of a cluster whose agent resynced at sequence
// seq that lie above it: an earlier run of the agent, whose clock was ahead,
// left them, and they would drop every status the agent sends now. Marks
// below seq stay, so a status delayed across a periodic resync is still
// dropped if a newer one was handled. An agent that does not tell its
// sequence (hasSeq false) may have started over at any value: all of its
// marks go.
func (o *statusOrder) resync(cluster string, seq uint64, hasSeq bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !hasSeq {
		delete(o.m, cluster)
		return
	}
	for id, m := range o.m[cluster] {
		if m.HasSequence && m.Sequence >= seq {
			delete(o.m[cluster], id)
		}
	}
}
