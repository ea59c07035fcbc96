package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// queued is one message waiting for a subscriber, with the data type its
// metrics are labelled by.
type queued struct {
	msg      *protocol.SubscriptionResponse
	cluster  string
	dataType string
}

// subscriber is one Subscribe stream. Its handler goroutine drains queue;
// publishers only ever offer to it without blocking.
type subscriber struct {
	id        uint64
	source    string // a source's subscription
	cluster   string // an agent's subscription
	dataTypes []string
	identity  Identity

	queue    chan queued
	gone     chan struct{} // closed when the subscriber fell behind
	goneOnce sync.Once
	dropped  atomic.Bool

	// work holds Service tasks (resync answers) that the subscriber's
	// worker goroutine runs, so they end with the stream.
	work  chan func(context.Context)
	state *agentWork // the worker's own
}

func newSubscriber(id uint64, req *protocol.SubscriptionRequest, identity Identity, queueSize int, served bool) *subscriber {
	s := &subscriber{
		id: id, source: req.GetSource(), cluster: req.GetClusterName(), dataTypes: req.GetDataTypes(), identity: identity,
		queue: make(chan queued, queueSize),
		gone:  make(chan struct{}),
	}
	if served {
		s.work = make(chan func(context.Context), 64)
	}
	return s
}

// drop marks the subscriber as fallen behind; its handler ends the stream.
func (s *subscriber) drop() {
	s.dropped.Store(true)
	s.goneOnce.Do(func() { close(s.gone) })
}

// offer queues q without blocking. A full queue means the subscriber fell
// behind: it is dropped (its stream ends, it resubscribes and resyncs)
// rather than ever making a publisher wait.
func (s *subscriber) offer(q queued) bool {
	if s.dropped.Load() {
		return false
	}
	select {
	case s.queue <- q:
		return true
	default: // intentional: overflow drops the subscriber, not the event silently
		s.drop()
		return false
	}
}

var errSubscriberGone = errors.New("subscriber gone")

// offerWait queues q, waiting for room: for what the server itself answers
// (a resync), which may wait for the subscriber but must not drop it.
func (s *subscriber) offerWait(ctx context.Context, q queued) error {
	select {
	case s.queue <- q:
		return nil
	case <-s.gone:
		return errSubscriberGone
	case <-ctx.Done():
		return ctx.Err()
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
		s.drop()
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

func (r *registry) remove(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.source != "" {
		removeFrom(r.bySource, s.source, s)
		delete(r.sources, s)
	} else {
		removeFrom(r.byCluster, s.cluster, s)
		delete(r.agents, s)
	}
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

// route offers q to every subscriber route reaches: a spec to the agents of
// its cluster, a status to the source it names, a spec resync to every
// source and a status resync to every agent. It returns how many accepted it.
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
		if s.offer(q) {
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
