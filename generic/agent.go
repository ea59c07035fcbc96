package generic

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unique"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/resync"
	"github.com/workwire/sdk-go/options"
)

// AgentClient is the cluster side of the protocol: it hands specs from
// sources to its handlers and publishes statuses back. It drops specs older
// than what it holds. On start, on every reconnect and periodically it asks
// sources for the specs it lacks; it answers sources' status resync requests
// from its Lister.
//
// It is goroutine-safe. Handlers run on its worker goroutines.
type AgentClient[T Object] struct {
	c        *core[T]
	cfg      agentConfig
	held     heldIndex
	seq      sequence
	sessions resync.Sessions[sessionKey, T, *seqBlock] // sources' status resyncs
}

// seqBlock is the sequence IDs reserved for the statuses of one status
// resync answer: reserved before the answer's List, so a status published
// from a newer read outranks the answer at the source. The answer's
// senders take from it at once.
type seqBlock struct {
	mu        sync.Mutex
	next, end uint64
}

// take returns the block's next ID; false once it is used up.
func (b *seqBlock) take() (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next >= b.end {
		return 0, false
	}
	b.next++
	return b.next - 1, true
}

// NewAgentClient returns the agent client of clusterName that sends through
// tr, which it owns from now on (Close closes it). lister lists the
// resources the agent holds; hash gives their status hashes; codecs (one per
// data type) decode and encode them. It does no network I/O.
func NewAgentClient[T Object](clusterName string, tr options.Transport, lister Lister[T], hash StatusHashGetter[T], codecs []Codec[T], opts ...AgentOption) (*AgentClient[T], error) {
	cfg := agentConfig{config: defaultConfig(), agentID: clusterName}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("new agent client: option %d is nil", i)
		}
		o.applyAgent(&cfg)
	}
	c, err := newCore(SideAgent, clusterName, tr, lister, hash, codecs, cfg.config)
	if err != nil {
		return nil, err
	}
	if cfg.agentID == "" {
		return nil, fmt.Errorf("new agent client: agent ID is empty")
	}
	c.ceSource = cfg.agentID
	a := &AgentClient[T]{c: c, cfg: cfg, held: heldIndex{m: make(map[string]heldEntry)}, seq: sequence{now: time.Now}}
	c.logic = a
	c.subs = options.AgentSubscriptions(clusterName, c.codecs.dataTypeNames())
	return a, nil
}

// Start connects the transport and starts the workers. It blocks until the
// transport is connected and subscribed or ctx ends (see
// options.Transport.Start); the client then runs until Close. A client
// starts once; after a failed Start, it is closed.
func (a *AgentClient[T]) Start(ctx context.Context) error { return a.c.start(ctx) }

// Close stops the client and its transport and waits for its goroutines,
// or until ctx ends. It is idempotent.
func (a *AgentClient[T]) Close(ctx context.Context) error { return a.c.close(ctx) }

// Healthy returns nil once Start returned nil, until Close, while the
// transport is connected (as far as it can tell: see
// options.HealthChecker); otherwise an error wrapping ErrNotStarted,
// ErrClosed or options.ErrNotConnected. Wire it to a readiness probe. It is
// goroutine-safe and does not block.
func (a *AgentClient[T]) Healthy() error { return a.c.healthy() }

// Stats returns a snapshot of the client for gauges; the client does not
// know how many resources its Lister holds (Held is -1). It is
// goroutine-safe.
func (a *AgentClient[T]) Stats() Stats { return a.c.stats() }

// Subscribe adds handlers for specs received from sources. Call it before
// Start.
func (a *AgentClient[T]) Subscribe(handlers ...ResourceHandler[T]) error {
	return a.c.subscribe(handlers)
}

// Publish sends obj's status (t a status update_request) to the source its
// codec names in the originalsource extension. A zero t.DataType means the
// data type obj came as (see DataTypeOf), or the first codec's.
//
// An agent also writes resources of its own through a source that stores
// them (a registering agent creates its ManagedCluster and its CSRs and
// renews its Lease): with t a spec create_request or update_request, Publish sends
// obj as the agent's request to the gRPC broker's Service of its data type,
// which carries it out or refuses it (the error is the Service's). Only a
// gRPC broker with such a Service (options/grpc/server.WithService) takes
// these; over MQTT or Kafka no source listens for them.
//
// It waits for the publish rate limiter, then until the transport has sent
// the event (over gRPC: until the Service answered).
func (a *AgentClient[T]) Publish(ctx context.Context, t types.EventType, obj T) error {
	request := t.SubResource == types.SubResourceSpec && (t.Action == types.CreateRequest || t.Action == types.UpdateRequest)
	if !request && (t.SubResource != types.SubResourceStatus || t.Action != types.UpdateRequest) {
		return fmt.Errorf("publish %s: %w: an agent publishes status update requests, and spec create and update requests of what it writes itself", t, ErrWrongEventType)
	}
	if t.DataType.IsZero() {
		t.DataType = a.DataTypeOf(string(obj.GetUID()))
	}
	codec, err := a.c.codecs.get(t.DataType)
	if err != nil {
		return fmt.Errorf("publish %s: %w", t, err)
	}
	t.DataType = codec.dt
	if request {
		evt, err := codec.Encode(a.c.ceSource, t, obj)
		if err != nil {
			return fmt.Errorf("publish %s: %w: %w", t, ErrEncode, err)
		}
		evt.SetExtension(types.ExtClusterName, a.c.id)
		return a.c.publish(ctx, options.Route{Role: options.RoleSpec, Source: a.c.ceSource, Cluster: a.c.id}, t, evt)
	}
	evt, route, err := a.encodeStatus(codec, t, obj)
	if err != nil {
		return fmt.Errorf("publish %s: %w", t, err)
	}
	return a.c.publish(ctx, route, t, evt)
}

// Resync asks every source for the specs of dataType (zero: every data
// type) newer than what the Lister holds. It blocks until the request is sent.
func (a *AgentClient[T]) Resync(ctx context.Context, dataType types.DataType) error {
	return a.c.resync(ctx, dataType)
}

// DataTypeOf returns the data type the resource of resourceID came as: of
// its last spec this client handled (recorded before its handlers run), or
// as the Lister listed it at the last spec resync; the first codec's if the
// client does not know the resource. A resource the Lister no longer lists
// is forgotten at the next spec resync. It is goroutine-safe.
func (a *AgentClient[T]) DataTypeOf(resourceID string) types.DataType {
	if e, ok := a.held.get(resourceID); ok {
		return e.origin.Value().dataType
	}
	return a.c.codecs.list[0].dt
}

var _ Interface[Object] = (*AgentClient[Object])(nil)

// list lists what the Lister holds of opts.DataType: a Lister that keeps
// several data types returns only those objects, one that does not (the
// work holders') returns all, and the client keeps those its index says
// came as opts.DataType — every one, with a single codec.
func (a *AgentClient[T]) list(opts ListOptions) ([]T, error) {
	objs, err := a.c.lister.List(opts)
	if err != nil || len(a.c.codecs.list) == 1 {
		return objs, err
	}
	kept := objs[:0:0]
	for _, o := range objs {
		if a.DataTypeOf(string(o.GetUID())) == opts.DataType {
			kept = append(kept, o)
		}
	}
	return kept, nil
}

// encodeStatus encodes obj's status and stamps what the protocol adds: the
// cluster name and the next sequenceid.
func (a *AgentClient[T]) encodeStatus(codec *codecOf[T], t types.EventType, obj T) (*cloudevents.Event, options.Route, error) {
	return a.encodeStatusAt(codec, t, obj, a.seq.next())
}

// encodeStatusAt is encodeStatus with the sequenceid of tick seq.
func (a *AgentClient[T]) encodeStatusAt(codec *codecOf[T], t types.EventType, obj T, seq uint64) (*cloudevents.Event, options.Route, error) {
	evt, err := codec.Encode(a.c.ceSource, t, obj)
	if err != nil {
		return nil, options.Route{}, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	// The status goes to the source the resource came from, as the index
	// knows it; what the codec put in the event (codec's works carry the
	// annotation decode set, for OCM's peers) only for a resource the index
	// does not attribute, as after a restart without a SourceLister.
	var source string
	if e, ok := a.held.get(string(obj.GetUID())); ok {
		source = e.owner()
	}
	if source == "" {
		if source, _, err = types.StringExtension(evt, types.ExtOriginalSource); err != nil {
			return nil, options.Route{}, fmt.Errorf("%w: %w", ErrEncode, err)
		}
	}
	if source == "" {
		return nil, options.Route{}, fmt.Errorf("%w: %s %s: no source to send its status to (no source sent it, and its codec names none)", ErrEncode, t, obj.GetUID())
	}
	evt.SetExtension(types.ExtOriginalSource, source)
	evt.SetExtension(types.ExtClusterName, a.c.id)
	evt.SetExtension(types.ExtSequenceID, sequenceID(seq))
	return evt, options.Route{Role: options.RoleStatus, Source: source, Cluster: a.c.id}, nil
}

func (a *AgentClient[T]) classify(d *options.Delivery, h types.Header) (*task[T], DropReason, error) {
	evt, et := d.Event, h.Type
	codec, err := a.c.codecs.get(et.DataType)
	if err != nil {
		return nil, DropUnknownDataType, err
	}
	source := d.Route.Source
	if source == "" {
		source = evt.Source()
	}
	if source == "" {
		return nil, DropMalformed, fmt.Errorf("no source")
	}
	switch {
	case et.SubResource == types.SubResourceSpec && et.Action != types.ResyncRequest:
		if d.Route.Cluster != "" && d.Route.Cluster != a.c.id {
			return nil, DropForeign, fmt.Errorf("spec for cluster %q", d.Route.Cluster)
		}
		if h.ClusterName != "" && h.ClusterName != a.c.id {
			return nil, DropForeign, fmt.Errorf("spec for cluster %q", h.ClusterName)
		}
		if h.ResourceID == "" {
			return nil, DropMalformed, types.Missing(d.Event, types.ExtResourceID)
		}
		if !h.HasVersion {
			return nil, DropMalformed, types.Missing(d.Event, types.ExtResourceVersion)
		}
		deleting := h.HasDeletion || et.Action == types.DeleteRequest
		answer := et.Action == types.ResyncResponse
		if answer {
			// An OCM source's answer to our resync: handlers see what it means.
			et.Action = types.UpdateRequest
			if deleting {
				et.Action = types.DeleteRequest
			}
		}
		lane := laneUpdate
		if deleting {
			lane = laneDelete
		}
		et.DataType = codec.dt
		return &task[T]{
			kind: taskEvent, lane: lane, evt: evt, h: h, et: et, codec: codec, deleting: deleting, answer: answer,
			route: options.Route{Role: options.RoleSpec, Source: source, Cluster: a.c.id},
		}, "", nil
	case et.SubResource == types.SubResourceStatus && et.Action == types.ResyncRequest:
		return &task[T]{
			kind: taskResyncRequest, lane: laneResync, batches: []*cloudevents.Event{evt},
			route:    options.Route{Role: options.RoleStatusResync, Source: source},
			dataType: codec.dt,
		}, "", nil
	default:
		return nil, DropUnexpected, fmt.Errorf("an agent does not handle %s events", et)
	}
}

func (a *AgentClient[T]) handleEvent(ctx context.Context, t *task[T]) error {
	id := t.h.ResourceID
	prev, held, deleted, buried := a.held.lookup(id)
	if held {
		if owner := prev.owner(); owner != "" && owner != t.route.Source {
			return &dropError{reason: DropForeign, err: fmt.Errorf("source %q sent %s for resource %s, which source %q owns", t.route.Source, t.et.Action, id, owner)}
		}
		if t.h.Version < prev.version {
			return &dropError{reason: DropStale, err: fmt.Errorf("spec of %s at version %d, holding %d", id, t.h.Version, prev.version)}
		}
	}
	// A deletion is final: no later spec of the resource but a deletion
	// comes at its version or below — but for a source's answer to a
	// resync, which says what it holds now (an OCM hub whose informer lost
	// a work and got it back sends it again at the same version); if that
	// is wrong, the next resync deletes it again.
	if buried && !t.deleting && !t.answer && t.h.Version <= deleted {
		return &dropError{reason: DropStale, err: fmt.Errorf("spec of %s at version %d, deleted at version %d", id, t.h.Version, deleted)}
	}
	obj, err := t.codec.Decode(t.h, t.evt)
	if err != nil {
		return &dropError{reason: DropDecode, err: &DecodeError{EventID: t.evt.ID(), EventType: t.evt.Type(), Err: err}}
	}
	// Recorded before the handlers run: a status they publish at once
	// goes out as the data type the spec came as, to its source.
	a.held.set(id, newHeldEntry(t.h.Version, t.route.Source, t.et.DataType))
	if err := a.c.callHandlers(ctx, t.et, obj); err != nil {
		a.held.restore(id, prev, held)
		return err
	}
	if t.deleting {
		a.held.bury(id, t.h.Version)
	}
	return nil
}

// answerResync answers one batch of a source's status resync request: it
// sends the status of every resource the batch names whose hash differs,
// and, with the last batch, of every resource of that source no batch named.
func (a *AgentClient[T]) answerResync(ctx context.Context, source string, dt types.DataType, batch *cloudevents.Event, _ uint64) error {
	c := a.c
	resyncID, index, total, err := resync.BatchOf(batch)
	if err != nil {
		return malformed(err)
	}
	req, err := types.DecodeStatusHashList(batch.Data())
	if err != nil {
		return malformed(err)
	}
	key := sessionKey{peer: source, dt: dt}
	sess, fresh := a.sessions.Open(key, resyncID, total, c.cfg.sessionTTL, time.Now())
	if fresh {
		// A source resyncs when it (re)connects and periodically. Answer
		// with our versions too: after a broker restart our own spec
		// resync may have gone out before the source was back, and after a
		// source restart the source learns what we hold (orphans, and
		// versions newer than its own).
		c.queueResync(dt)
		// The answers' sequence IDs come before the read: a status published
		// from a newer read than this List outranks them at the source.
		block := uint64(a.held.len()) + answerSeqSlack
		first := a.seq.reserve(block)
		sess.State = &seqBlock{next: first, end: first + block}
		objs, err := a.list(ListOptions{Source: source, ClusterName: c.id, DataType: dt})
		if err != nil {
			a.sessions.Close(key, sess)
			return fmt.Errorf("list %s of %s for status resync: %w", dt, source, err)
		}
		sess.Hold(byUID(objs))
	}
	codec, err := c.codecs.get(dt)
	if err != nil {
		return &dropError{reason: DropUnknownDataType, err: err}
	}
	send := func(obj T) error { return a.sendStatus(ctx, codec, obj, sess.State) }
	done, err := sess.Answer(index, func() ([]func() error, error) {
		var sends []func() error
		for _, e := range req.StatusHashes {
			// The request names every cluster's resources; only ours count.
			obj, ok := sess.Name(e.ResourceID)
			if !ok {
				continue
			}
			h, err := c.hash(obj)
			if err != nil {
				c.cfg.errorHandler(c.ctx, err, "status resync: cannot hash status; sending it", "resourceID", e.ResourceID)
			} else if h == e.StatusHash {
				continue
			}
			sends = append(sends, func() error { return send(obj) })
		}
		return sends, nil
	}, send)
	if err != nil || !done {
		return err
	}
	a.sessions.Close(key, sess)
	c.resyncAnswered(dt, sess.Sent, sess.Opened())
	c.log.V(2).Info("answered status resync", "source", source, "dataType", dt, "sent", sess.Sent, "held", sess.Held())
	return nil
}

// answerSeqSlack is how many sequence IDs a status resync answer reserves
// beyond the resources the agent knows it holds. Each block runs the
// sequence ahead of the clock (a millisecond per 4,096 IDs), which a
// restarted agent must catch up with before an OCM source hears it again,
// so blocks are sized to the answer, not generously.
const answerSeqSlack = 1024

// sendStatus sends obj's status for a status resync answer, with the next
// sequence ID of its block. An object the codec cannot encode, or whose
// status is too large for the transport, is reported and skipped, so it
// cannot hold up the others.
func (a *AgentClient[T]) sendStatus(ctx context.Context, codec *codecOf[T], obj T, block *seqBlock) error {
	seq, ok := block.take()
	if !ok {
		seq = a.seq.next() // past the block: ordered by when it is sent
	}
	et := types.EventType{DataType: codec.dt, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
	evt, route, err := a.encodeStatusAt(codec, et, obj, seq)
	if err != nil {
		a.c.cfg.errorHandler(a.c.ctx, err, "cannot encode status for resync; skipped", "resourceID", obj.GetUID())
		return nil
	}
	_, err = a.c.sendAnswer(ctx, route, et, evt, string(obj.GetUID()))
	return err
}

// requestResync sends a spec resync request with the version of every
// resource we hold of dt, each attributed to the source it belongs to where
// we know it, so a source deletes only its own orphans: the request's
// originalsource extension names the one source of all of them, or each
// entry names its own.
func (a *AgentClient[T]) requestResync(ctx context.Context, dt types.DataType) error {
	c := a.c
	codec, err := c.codecs.get(dt)
	if err != nil {
		return err
	}
	epoch := a.held.beginRebuild()
	fresh := make(map[string]heldEntry)
	var entries []types.ResourceVersion
	sources, err := a.sources()
	if err != nil {
		return fmt.Errorf("spec resync of %s: %w", dt, err)
	}
	for _, src := range sources {
		objs, err := a.list(ListOptions{Source: src, ClusterName: c.id, DataType: dt})
		if err != nil {
			return fmt.Errorf("list %s of %s for spec resync: %w", dt, src, err)
		}
		for _, o := range objs {
			id := string(o.GetUID())
			v := codec.version(o)
			entries = append(entries, types.ResourceVersion{ResourceID: id, ResourceVersion: v, OriginalSource: src})
			fresh[id] = newHeldEntry(v, src, dt)
		}
	}
	all, err := a.list(ListOptions{ClusterName: c.id, DataType: dt})
	if err != nil {
		return fmt.Errorf("list %s for spec resync: %w", dt, err)
	}
	for _, o := range all {
		id := string(o.GetUID())
		if _, attributed := fresh[id]; attributed || id == "" {
			continue
		}
		v := codec.version(o)
		entries = append(entries, types.ResourceVersion{ResourceID: id, ResourceVersion: v})
		fresh[id] = newHeldEntry(v, "", dt)
	}
	a.held.finishRebuild(epoch, dt, fresh)
	source := oneSource(entries)
	if source != "" {
		for i := range entries {
			entries[i].OriginalSource = ""
		}
	}

	et := types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.ResyncRequest}
	events, err := resync.Request(c.ceSource, et, entries, c.maxEventBytes(), types.ResourceVersionSize,
		func(e []types.ResourceVersion) any { return types.ResourceVersionList{ResourceVersions: e} },
		func(evt *cloudevents.Event) {
			evt.SetExtension(types.ExtClusterName, c.id)
			if source != "" {
				evt.SetExtension(types.ExtOriginalSource, source)
			}
			// Where the agent's status sequence stands: a source forgets
			// only the marks above it, left by an earlier run whose clock
			// was ahead.
			evt.SetExtension(types.ExtSequenceID, sequenceID(a.seq.next()))
		})
	if err != nil {
		return err
	}
	for _, evt := range events {
		if err := c.send(ctx, options.Route{Role: options.RoleSpecResync, Cluster: c.id}, et, evt); err != nil {
			return err
		}
	}
	c.log.V(2).Info("sent spec resync", "dataType", dt, "resources", len(entries), "events", len(events))
	return nil
}

// oneSource returns the source every entry is attributed to, or "" if they
// are not all attributed to one (or there are none).
func oneSource(entries []types.ResourceVersion) string {
	if len(entries) == 0 {
		return ""
	}
	src := entries[0].OriginalSource
	for _, e := range entries[1:] {
		if e.OriginalSource != src {
			return ""
		}
	}
	return src
}

// sources returns every source the agent knows: from received events, and
// from the Lister if it is a SourceLister.
func (a *AgentClient[T]) sources() ([]string, error) {
	known := a.held.sources()
	if sl, ok := a.c.lister.(SourceLister); ok {
		more, err := sl.Sources(a.c.id)
		if err != nil {
			return nil, fmt.Errorf("list sources: %w", err)
		}
		known = append(known, more...)
	}
	slices.Sort(known)
	return slices.Compact(known), nil
}

// heldIndex is what the agent holds: each resource's version, owning
// source and data type, for dropping stale and foreign specs and routing
// statuses. It is rebuilt from the Lister at every spec resync of a data
// type, keeping entries set while the rebuild was listing.
type heldIndex struct {
	mu    sync.Mutex
	m     map[string]heldEntry
	epoch uint64
	// gone remembers the resources whose deletion the agent handled, for
	// deletionMemory, and outlives rebuilds, which forget what the Lister
	// no longer lists.
	gone   map[string]grave
	pruned time.Time
	clock  func() time.Time // time.Now if nil; tests set it
}

// grave is a deleted resource's last version, and when its deletion was
// handled.
type grave struct {
	version int64
	at      time.Time
}

// deletionMemory is how long an agent remembers a deletion it handled, so
// that an earlier spec of the resource delivered again late — as brokers
// that keep what is not acknowledged redeliver it, NATS JetStream after its
// AckWait, Pub/Sub after its acknowledgement deadline (at most 10 minutes)
// — does not bring the resource back until a spec resync deletes it again.
const deletionMemory = 10 * time.Minute

func (h *heldIndex) now() time.Time {
	if h.clock != nil {
		return h.clock()
	}
	return time.Now()
}

// bury remembers that the deletion of id at version was handled now.
func (h *heldIndex) bury(id string, version int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if now.Sub(h.pruned) >= deletionMemory {
		for k, g := range h.gone {
			if now.Sub(g.at) >= deletionMemory {
				delete(h.gone, k)
			}
		}
		if len(h.gone) == 0 {
			h.gone = nil // an emptied map keeps its buckets
		}
		h.pruned = now
	}
	if h.gone == nil {
		h.gone = make(map[string]grave)
	}
	h.gone[id] = grave{version: version, at: now}
}

// lookup returns what the agent holds of id, if it does, and the version
// at which it handled the deletion of id, if it did within deletionMemory.
// It runs for every spec received: one lock, and the clock read only for a
// resource it remembers.
func (h *heldIndex) lookup(id string) (e heldEntry, held bool, deleted int64, buried bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, held = h.m[id]
	if g, ok := h.gone[id]; ok && h.now().Sub(g.at) < deletionMemory {
		return e, held, g.version, true
	}
	return e, held, 0, false
}

// heldEntry is small: an agent keeps one per resource.
type heldEntry struct {
	version int64
	origin  unique.Handle[origin]
	epoch   uint64
}

// origin is where a resource came from. Pairs of a source and a data type
// are few, so each is interned: an entry holds one pointer for both.
type origin struct {
	source   string // "" if not known
	dataType types.DataType
}

func newHeldEntry(version int64, source string, dt types.DataType) heldEntry {
	return heldEntry{version: version, origin: unique.Make(origin{source, dt})}
}

// owner is the source the entry names, "" if none.
func (e heldEntry) owner() string { return e.origin.Value().source }

func (h *heldIndex) get(id string) (heldEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[id]
	return e, ok
}

func (h *heldIndex) set(id string, e heldEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.epoch = h.epoch
	h.m[id] = e
}

// restore puts back what get returned before a set.
func (h *heldIndex) restore(id string, e heldEntry, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		h.m[id] = e
	} else {
		delete(h.m, id)
	}
}

func (h *heldIndex) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

func (h *heldIndex) sources() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]struct{})
	for _, e := range h.m {
		if s := e.owner(); s != "" {
			seen[s] = struct{}{}
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	return out
}

// beginRebuild starts a rebuild; entries set from now on survive it.
func (h *heldIndex) beginRebuild() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	return h.epoch
}

// finishRebuild replaces the entries of data type dt with listed (all of
// dt), except for entries set since beginRebuild returned epoch, which are
// newer than the listing. A listed entry without a source keeps the source
// the index knew. Entries of other data types stay.
func (h *heldIndex) finishRebuild(epoch uint64, dt types.DataType, listed map[string]heldEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, e := range h.m {
		l, ok := listed[id]
		switch {
		case e.epoch >= epoch:
			listed[id] = e
		case ok && l.owner() == "" && e.owner() != "":
			listed[id] = newHeldEntry(l.version, e.owner(), l.origin.Value().dataType)
		case !ok && e.origin.Value().dataType != dt:
			listed[id] = e
		}
	}
	h.m = listed
}
