package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// queued is one event waiting for a subscriber, with the cluster and data
// type its metrics are labelled by (the data type also filters it), and its
// size in bytes.
type queued struct {
	msg      *protocol.CloudEvent
	cluster  string
	dataType string         // as the event's type spells it: the metrics label
	key      types.DataType // singular form; zero for a type naming no data type
	size     int64
}

// newQueued wraps pbe, routed to cluster ("" for none), for the
// subscribers' queues; dt is its data type, zero when its type names none.
// Events go out as they were published: workwire's clients and OCM's write
// the same spelling.
func newQueued(cluster string, pbe *protocol.CloudEvent, dt types.DataType) queued {
	q := queued{msg: pbe, cluster: cluster, size: int64(proto.Size(pbe))}
	if !dt.IsZero() {
		q.dataType, q.key = dt.String(), dt.Singular()
	}
	return q
}

// subscriber is one Subscribe stream. Its handler goroutine drains queue;
// publishers only ever offer to it without blocking.
type subscriber struct {
	id        uint64
	source    string                  // a source's subscription
	cluster   string                  // an agent's subscription
	dataTypes []types.DataType        // as subscribed; none: every data type
	accepts   map[types.DataType]bool // singular forms; nil: every data type
	identity  Identity

	queue    chan queued
	maxBytes int64
	bytes    atomic.Int64  // the sizes of what queue holds or is promised to
	room     chan struct{} // a token after each dequeue, for offerWait
	gone     chan struct{} // closed when the subscriber fell behind or its stream ended
	why      string        // which bound it passed; set before gone closes
	goneOnce sync.Once
	dropped  atomic.Bool

	// work holds Service tasks (resync answers) that the subscriber's
	// worker goroutine runs, so they end with the stream.
	work  chan func(context.Context)
	state *agentWork // the worker's own
}

// newSubscriber returns the subscriber of req, which subscribed to dts
// (req's data types, parsed: see parseDataTypes).
func newSubscriber(id uint64, req *protocol.SubscriptionRequest, dts []types.DataType, identity Identity, queueSize, queueBytes int, served bool) *subscriber {
	s := &subscriber{
		id: id, source: req.GetSource(), cluster: req.GetClusterName(), dataTypes: dts, identity: identity,
		queue:    make(chan queued, queueSize),
		maxBytes: int64(queueBytes),
		room:     make(chan struct{}, 1),
		gone:     make(chan struct{}),
	}
	if len(dts) > 0 {
		s.accepts = make(map[types.DataType]bool, len(dts))
		for _, dt := range dts {
			s.accepts[dt.Singular()] = true
		}
	}
	if served {
		s.work = make(chan func(context.Context), 64)
	}
	return s
}

// parseDataTypes parses the data types of a subscription.
func parseDataTypes(names []string) ([]types.DataType, error) {
	out := make([]types.DataType, 0, len(names))
	for _, name := range names {
		dt, err := types.ParseDataType(name)
		if err != nil {
			return nil, err
		}
		out = append(out, dt)
	}
	return out, nil
}

// wants reports whether the subscriber takes q: one of the data types it
// subscribed to, or any for a subscription to every data type. An event
// whose type names no data type reaches every subscriber of its route,
// whose client reports it as malformed.
func (s *subscriber) wants(q queued) bool {
	return s.accepts == nil || q.key.IsZero() || s.accepts[q.key]
}

// reserve counts size bytes as queued if they fit: an empty queue takes
// any one message, so that an event larger than the bound still passes.
func (s *subscriber) reserve(size int64) bool {
	for {
		cur := s.bytes.Load()
		if cur > 0 && cur+size > s.maxBytes {
			return false
		}
		if s.bytes.CompareAndSwap(cur, cur+size) {
			return true
		}
	}
}

// dequeued releases what reserve counted for a message the handler took,
// and wakes offerWait.
func (s *subscriber) dequeued(q queued) {
	s.bytes.Add(-q.size)
	select {
	case s.room <- struct{}{}:
	default: // a token is already waiting for the one waiter, which re-checks
	}
}

// drop marks the subscriber as fallen behind; its handler ends the stream.
// It empties the queue at once: the handler may be blocked sending to a
// client that stopped reading, and what waits behind must not stay in
// memory until that client reads again or its connection dies.
func (s *subscriber) drop(why string) {
	s.dropped.Store(true)
	s.goneOnce.Do(func() {
		s.why = why
		close(s.gone)
		for {
			select {
			case q := <-s.queue:
				s.bytes.Add(-q.size)
			default: // empty: done
				return
			}
		}
	})
}

// offer queues q without blocking. A full queue — by count or by bytes —
// means the subscriber fell behind: it is dropped (its stream ends, it
// resubscribes and resyncs) rather than ever making a publisher wait.
func (s *subscriber) offer(q queued) bool {
	if s.dropped.Load() {
		return false
	}
	if !s.reserve(q.size) {
		s.drop(fmt.Sprintf("more than %d bytes queued", s.maxBytes))
		return false
	}
	select {
	case s.queue <- q:
		return true
	default: // intentional: overflow drops the subscriber, not the event silently
		s.bytes.Add(-q.size)
		s.drop(fmt.Sprintf("more than %d events queued", cap(s.queue)))
		return false
	}
}

// offerWithin queues q, waiting up to wait for room by bytes and by
// count: the backpressure agents' publishes to sources get (see
// registry.routeToSources). A subscriber still full after wait fell behind
// and is dropped. Bytes are reserved before the wait for a slot, so a
// fleet's publishers waiting at once for one source wait for its bytes
// too, instead of dropping it. It returns ctx's error if the publisher
// gives up first; q is then not queued.
func (s *subscriber) offerWithin(ctx context.Context, q queued, wait time.Duration) (bool, error) {
	if s.dropped.Load() {
		return false, nil
	}
	reserved := s.reserve(q.size)
	if reserved {
		select {
		case s.queue <- q:
			return true, nil
		default:
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !reserved {
		select {
		case <-s.room:
			reserved = s.reserve(q.size)
		case <-timer.C:
			s.drop(fmt.Sprintf("more than %d bytes queued for %v", s.maxBytes, wait))
			return false, nil
		case <-s.gone:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	select {
	case s.queue <- q:
		return true, nil
	case <-timer.C:
		s.bytes.Add(-q.size)
		s.drop(fmt.Sprintf("more than %d events queued for %v", cap(s.queue), wait))
		return false, nil
	case <-s.gone:
		s.bytes.Add(-q.size)
		return false, nil
	case <-ctx.Done():
		s.bytes.Add(-q.size)
		return false, ctx.Err()
	}
}

var errSubscriberGone = errors.New("subscriber gone")

// offerWait queues q, waiting for room by count and by bytes: for what the
// server itself answers (a resync), which may wait for the subscriber but
// must not drop it. Only the subscriber's worker goroutine calls it.
func (s *subscriber) offerWait(ctx context.Context, q queued) error {
	for {
		if s.dropped.Load() {
			return errSubscriberGone
		}
		if s.reserve(q.size) {
			select {
			case s.queue <- q:
				return nil
			case <-s.gone:
				s.bytes.Add(-q.size)
				return errSubscriberGone
			case <-ctx.Done():
				s.bytes.Add(-q.size)
				return ctx.Err()
			}
		}
		select {
		case <-s.room:
		case <-s.gone:
			return errSubscriberGone
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// schedule queues a Service task for the subscriber's worker; a subscriber
// whose worker cannot keep up is dropped like one whose queue overflows.
func (s *subscriber) schedule(f func(context.Context)) {
	if s.work == nil || s.dropped.Load() {
		return
	}
	select {
	case s.work <- f:
	default: // intentional: see offer
		s.drop(fmt.Sprintf("more than %d resync answers queued", cap(s.work)))
	}
}

// registry holds the subscribers of one server, indexed for routing.
type registry struct {
	mu        sync.RWMutex
	bySource  map[string]map[*subscriber]struct{}
	byCluster map[string]map[*subscriber]struct{}
	sources   map[*subscriber]struct{}
	agents    map[*subscriber]struct{}
}

func newRegistry() *registry {
	return &registry{
		bySource:  make(map[string]map[*subscriber]struct{}),
		byCluster: make(map[string]map[*subscriber]struct{}),
		sources:   make(map[*subscriber]struct{}),
		agents:    make(map[*subscriber]struct{}),
	}
}

func (r *registry) add(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.source != "" {
		addTo(r.bySource, s.source, s)
		r.sources[s] = struct{}{}
	} else {
		addTo(r.byCluster, s.cluster, s)
		r.agents[s] = struct{}{}
	}
}

// remove takes s out of routing once its stream has ended, and lets go of
// what waits for it: its queue, and publishers waiting for room in it.
func (r *registry) remove(s *subscriber) {
	r.mu.Lock()
	if s.source != "" {
		removeFrom(r.bySource, s.source, s)
		delete(r.sources, s)
	} else {
		removeFrom(r.byCluster, s.cluster, s)
		delete(r.agents, s)
	}
	r.mu.Unlock()
	s.drop("its stream ended")
}

func addTo(m map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	set := m[key]
	if set == nil {
		set = make(map[*subscriber]struct{})
		m[key] = set
	}
	set[s] = struct{}{}
}

func removeFrom(m map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	if set := m[key]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(m, key)
		}
	}
}

// routeToSources routes what agents send sources — a status to its
// source's subscribers, a spec resync request to every source's — waiting
// up to wait for room in each (offerWithin). A whole fleet publishes to one
// source, so a source that falls behind for a moment is the rule, not a
// fault: its agents' publishes wait rather than the source being dropped
// and resyncing the whole fleet, which would only add to the load (and a
// resync request that found the queue full of the answer to that resync
// would drop the source again). The wait holds no lock. It returns how many
// subscribers it reached, or ctx's error if the publisher gave up waiting.
func (r *registry) routeToSources(ctx context.Context, route options.Route, q queued, wait time.Duration) (int, error) {
	r.mu.RLock()
	set := r.sources
	if route.Role == options.RoleStatus {
		set = r.bySource[route.Source]
	}
	targets := make([]*subscriber, 0, len(set))
	for s := range set {
		if s.wants(q) {
			targets = append(targets, s)
		}
	}
	r.mu.RUnlock()
	n := 0
	for _, s := range targets {
		ok, err := s.offerWithin(ctx, q, wait)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// route offers q to every subscriber route reaches that takes q's data
// type: a spec to the agents of its cluster, a status to the source it
// names, a spec resync to every source and a status resync to every agent.
// It returns how many accepted it.
func (r *registry) route(route options.Route, q queued) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var set map[*subscriber]struct{}
	switch route.Role {
	case options.RoleSpec:
		set = r.byCluster[route.Cluster]
	case options.RoleStatus:
		set = r.bySource[route.Source]
	case options.RoleSpecResync:
		set = r.sources
	case options.RoleStatusResync:
		set = r.agents
	}
	n := 0
	for s := range set {
		if s.wants(q) && s.offer(q) {
			n++
		}
	}
	return n
}

// agentsOf returns the subscribers of cluster's agent.
func (r *registry) agentsOf(cluster string) []*subscriber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*subscriber, 0, len(r.byCluster[cluster]))
	for s := range r.byCluster[cluster] {
		out = append(out, s)
	}
	return out
}

func (r *registry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.sources) + len(r.agents)
}
