package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/workwire/sdk-go/options"
)

// SourceHeader is the Kafka record header that carries the source ID of a
// spec or status event (the route's Source), so a source's consumers can skip
// other sources' statuses without decoding them. The cluster name is the
// message key (see Key).
const SourceHeader = "workwire_source"

// filter is one subscription's IDs; empty matches any.
type filter struct{ source, cluster string }

// plan is what a set of subscriptions asks of Kafka: the group to join, its
// topics, which partitions to read, and how to filter what arrives.
type plan struct {
	groupID string
	topics  []string
	roleOf  map[string]options.Role
	filters map[options.Role][]filter
	// pins maps a topic to the message key whose partition alone is read.
	pins map[string]string
}

// planFor derives the consumer group and topics of subs.
func (t *Transport) planFor(subs []options.Subscription) (*plan, error) {
	p := &plan{roleOf: map[string]options.Role{}, filters: map[options.Role][]filter{}, pins: map[string]string{}}
	sources, clusters := map[string]bool{}, map[string]bool{}
	keys := map[options.Role]map[string]bool{} // the key ID each subscription of a role fixes ("" = any)
	for _, s := range subs {
		topic := t.cfg.Topics.Topic(s.Role)
		if topic == "" {
			return nil, fmt.Errorf("kafka: subscription: unknown role %d", int(s.Role))
		}
		if _, ok := p.roleOf[topic]; !ok {
			p.roleOf[topic] = s.Role
			p.topics = append(p.topics, topic)
		}
		p.filters[s.Role] = append(p.filters[s.Role], filter{source: s.Source, cluster: s.Cluster})
		if s.Source != "" {
			sources[s.Source] = true
		}
		if s.Cluster != "" {
			clusters[s.Cluster] = true
		}
		if keys[s.Role] == nil {
			keys[s.Role] = map[string]bool{}
		}
		keys[s.Role][Key(options.Route{Role: s.Role, Source: s.Source, Cluster: s.Cluster})] = true
	}
	if !t.cfg.ReadAllPartitions {
		for role, ks := range keys {
			if len(ks) == 1 && !ks[""] {
				for k := range ks {
					p.pins[t.cfg.Topics.Topic(role)] = k
				}
			}
		}
	}
	switch {
	case len(subs) == 0:
	case t.cfg.GroupID != "":
		p.groupID = t.cfg.GroupID
	case len(clusters) == 1 && len(sources) == 0:
		p.groupID = t.cfg.GroupPrefix + ".agent." + onlyKey(clusters)
	case len(sources) == 1 && len(clusters) == 0:
		p.groupID = t.cfg.GroupPrefix + ".source." + onlyKey(sources)
	default:
		return nil, fmt.Errorf("kafka: subscriptions name %d sources and %d clusters; a consumer group needs exactly one of either: set Config.GroupID", len(sources), len(clusters))
	}
	slices.Sort(p.topics)
	return p, nil
}

func onlyKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// match reports whether a message on role's topic is for one of the
// subscriptions. IDs the record does not carry match anything; the
// receiver checks the event's own extensions.
func (p *plan) match(role options.Role, r options.Route, m *sarama.ConsumerMessage) bool {
	source, cluster := r.Source, r.Cluster
	if source == "" {
		switch role {
		case options.RoleStatus:
			source = header(m, "ce_originalsource")
		case options.RoleSpec:
			source = header(m, "ce_source")
		}
	}
	if cluster == "" && role != options.RoleStatusResync {
		cluster = header(m, "ce_clustername")
	}
	for _, f := range p.filters[role] {
		if f.source != "" && source != "" && f.source != source {
			continue
		}
		if f.cluster != "" && cluster != "" && f.cluster != cluster {
			continue
		}
		return true
	}
	return false
}

func header(m *sarama.ConsumerMessage, key string) string {
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

// routeOf is the route a record names: the role of its topic, the cluster
// (or for status resync the source) in its key, the source in SourceHeader.
func routeOf(role options.Role, m *sarama.ConsumerMessage) options.Route {
	r := options.Route{Role: role}
	if role == options.RoleStatusResync {
		r.Source = string(m.Key)
		return r
	}
	r.Cluster = string(m.Key)
	r.Source = header(m, SourceHeader)
	return r
}

// balancer is the group's partition assignment. A pinned topic has one
// partition read (the one its key hashes to, where every event for this
// agent lands); the partitions of other topics are dealt round-robin. Only
// the group's leader runs it, so members of one group must subscribe alike,
// which the derived group IDs ensure.
type balancer struct {
	pins map[string]string
}

// balancerName is the group protocol name; every member of a group must
// offer it.
const balancerName = "workwire-v1"

func (b *balancer) Name() string { return balancerName }

func (b *balancer) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	names := make([]string, 0, len(topics))
	for topic := range topics {
		names = append(names, topic)
	}
	slices.Sort(names)
	plan := sarama.BalanceStrategyPlan{}
	for ti, topic := range names {
		var subscribed []string
		for _, id := range ids {
			if slices.Contains(members[id].Topics, topic) {
				subscribed = append(subscribed, id)
			}
		}
		partitions := slices.Clone(topics[topic])
		if len(subscribed) == 0 || len(partitions) == 0 {
			continue
		}
		slices.Sort(partitions)
		if key, ok := b.pins[topic]; ok {
			p := PartitionFor(key, int32(len(partitions)))
			plan.Add(subscribed[ti%len(subscribed)], topic, partitions[p])
			continue
		}
		for i, p := range partitions {
			plan.Add(subscribed[(i+ti)%len(subscribed)], topic, p)
		}
	}
	return plan, nil
}

func (b *balancer) AssignmentData(string, map[string][]int32, int32) ([]byte, error) {
	return nil, nil
}

// groupHandler runs the sessions of one consumer group membership.
type groupHandler struct {
	t    *Transport
	plan *plan

	joined     chan struct{} // closed when the first session consumes every claim
	joinedOnce sync.Once

	mu       sync.Mutex
	trackers map[topicPartition]*tracker
	waiting  int  // claims of this session not consuming yet
	complete bool // this session consumes every claim
	lastErr  error
	// due is the resync owed to the receiver once a session consumes every
	// claim; it outlives sessions that end before then.
	due resync
	// read holds the spec and status partitions of the last session.
	read map[topicPartition]bool
	// endCause is why the last session ended, as sarama gave it.
	endCause error
	// leave ends the membership of the session that runs, giving up its
	// connections (Transport.Redial); nil between sessions.
	leave context.CancelCauseFunc
}

// resync is why the receiver is told Connected; the larger value wins.
type resync int

const (
	resyncNone resync = iota
	// resyncRebalance: a rebalance gave this member a spec or status
	// partition whose earlier events it did not receive.
	resyncRebalance
	// resyncConnect: the first join, or a rejoin after the membership
	// failed (lost connection, expired membership, a failed join).
	resyncConnect
)

type topicPartition struct {
	topic     string
	partition int32
}

func newGroupHandler(t *Transport, p *plan) *groupHandler {
	return &groupHandler{t: t, plan: p, joined: make(chan struct{}), due: resyncConnect}
}

// keepsState reports whether the receiver builds state from role's events
// (an agent's specs, a source's statuses), so that a partition of it this
// member did not read before holds events it never saw. Resync requests
// are answered as they come and leave no state behind.
func keepsState(role options.Role) bool {
	return role == options.RoleSpec || role == options.RoleStatus
}

// owe records a resync owed to the receiver. h.mu must be held.
func (h *groupHandler) owe(r resync) {
	if r > h.due {
		h.due = r
	}
}

// Setup runs when a session starts, after the group assigned its claims.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	trackers := map[topicPartition]*tracker{}
	read := map[topicPartition]bool{}
	for topic, parts := range sess.Claims() {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			trackers[tp] = newTracker(sess, topic, p, h.t.cfg.MaxPending)
			if keepsState(h.plan.roleOf[topic]) {
				read[tp] = true
			}
		}
	}
	h.mu.Lock()
	for tp := range read {
		if !h.read[tp] {
			h.owe(resyncRebalance)
			break
		}
	}
	h.trackers, h.waiting, h.complete, h.read = trackers, len(trackers), false, read
	h.mu.Unlock()
	h.t.log.V(2).Info("joined consumer group", "group", h.plan.groupID, "generation", sess.GenerationID(), "claims", sess.Claims())
	if len(trackers) == 0 {
		h.ready()
	}
	return nil
}

// ready runs once every claim of a session consumes: each partition's
// starting offset is settled, so whatever is sent from now on arrives. It
// tells the receiver Connected when a resync is owed: after a (re)connect,
// or when the session reads spec or status partitions the last one did not
// (their events from before reached another member, or nobody), so the
// receiver resyncs what it did not see. A rebalance that leaves this
// member's partitions as they were, or only takes some away, costs no
// resync: it resumes at the committed offsets and misses nothing.
func (h *groupHandler) ready() {
	h.mu.Lock()
	h.complete = true
	due := h.due
	h.due = resyncNone
	h.mu.Unlock()
	h.t.tracker.Connected()
	switch due {
	case resyncConnect:
		h.t.stats.connects.Add(1)
		h.t.recv.Connected()
	case resyncRebalance:
		h.t.stats.rebalanceResyncs.Add(1)
		h.t.log.V(2).Info("the rebalance gave this member partitions it did not read; resyncing", "group", h.plan.groupID)
		h.t.recv.Connected()
	}
	// Counted last: a session Stats shows has told the receiver already.
	h.t.stats.sessions.Add(1)
	h.joinedOnce.Do(func() { close(h.joined) })
}

// newSession forgets the last session before the next join, and returns
// the context of the membership it joins, which Redial ends.
func (h *groupHandler) newSession(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	mctx, leave := context.WithCancelCause(ctx)
	h.mu.Lock()
	h.complete, h.endCause, h.leave = false, nil, leave
	h.mu.Unlock()
	return mctx, leave
}

// redial ends the membership that runs, if one does, with cause.
func (h *groupHandler) redial(cause error) {
	h.mu.Lock()
	leave := h.leave
	h.mu.Unlock()
	if leave != nil {
		leave(&redialError{cause})
	}
}

// redialError ends a membership that Redial asked to connect again.
type redialError struct{ cause error }

func (e *redialError) Error() string { return e.cause.Error() }
func (e *redialError) Unwrap() error { return e.cause }

// claims returns the trackers of topic's partitions this member reads,
// once its session reads every claim; false before.
func (h *groupHandler) claims(topic string) (map[int32]*tracker, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.complete {
		return nil, false
	}
	out := make(map[int32]*tracker)
	for tp, tr := range h.trackers {
		if tp.topic == topic {
			out[tp.partition] = tr
		}
	}
	return out, true
}

func (h *groupHandler) sessionComplete() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.complete
}

// ended records how a session ended, err being what Consume returned. It
// reports whether the session had consumed every claim, and whether it
// ended because the group rebalanced (a member joined or left, partitions
// were added). Anything else (heartbeats lost, a membership the coordinator
// expired, a failed join) makes the next session a reconnect.
func (h *groupHandler) ended(err error) (complete, rebalanced bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rebalanced = err == nil && h.complete &&
		(errors.Is(h.endCause, sarama.ErrRebalanceInProgress) || errors.Is(h.endCause, sarama.ErrSessionPartitionCountChanged))
	if !rebalanced {
		h.owe(resyncConnect)
	}
	return err == nil && h.complete, rebalanced
}

func (h *groupHandler) lastCause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.endCause
}

func (h *groupHandler) setLastErr(err error) {
	h.mu.Lock()
	h.lastErr = err
	h.mu.Unlock()
}

func (h *groupHandler) lastError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

// ConsumeClaim reads one partition until the session ends. It runs on a
// goroutine of sarama's, one per claim.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	h.mu.Lock()
	tr := h.trackers[topicPartition{claim.Topic(), claim.Partition()}]
	h.mu.Unlock()
	if tr == nil {
		return fmt.Errorf("kafka: claim %s/%d not in the session's assignment", claim.Topic(), claim.Partition())
	}
	role := h.plan.roleOf[claim.Topic()]
	ctx := sess.Context()
	start := int64(-1)
	if claim.InitialOffset() == sarama.OffsetNewest {
		// The group has no committed offset here: this member starts at
		// the newest record. Commit that start, so that whoever reads the
		// partition next starts there too and receives again what this
		// member does not finish, instead of starting at the newest record
		// of its own time.
		start = claim.HighWaterMarkOffset()
		sess.MarkOffset(claim.Topic(), claim.Partition(), start, "")
		sess.Commit()
	}
	switch {
	case start >= 0:
		tr.seen.Store(start)
	case claim.InitialOffset() >= 0:
		tr.seen.Store(claim.InitialOffset())
	}
	h.mu.Lock()
	if claim.InitialOffset() < 0 && keepsState(role) {
		// No committed offset (a new partition, or retention removed
		// it): what was sent here before is not coming.
		h.owe(resyncRebalance)
	}
	h.waiting--
	last := h.waiting == 0
	h.mu.Unlock()
	if last {
		h.ready()
	}
	for {
		if !tr.waitRoom(ctx) {
			return nil
		}
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if start >= 0 {
				// A fetch may have moved the high watermark past where
				// reading started before it was read above.
				if m.Offset < start {
					sess.ResetOffset(claim.Topic(), claim.Partition(), m.Offset, "")
				}
				start = -1
			}
			tr.seen.Store(m.Offset + 1)
			h.t.receive(h.plan, role, m, tr.add(m.Offset))
		case <-ctx.Done():
			return nil
		}
	}
}

// Cleanup runs when a session ends, after every ConsumeClaim returned and
// before sarama commits the marked offsets and gives the partitions up. It
// waits a little for deliveries in flight, so their offsets are committed
// and the next owner of the partition does not receive them again.
func (h *groupHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	trackers := h.trackers
	h.trackers = nil
	h.endCause = context.Cause(sess.Context())
	h.mu.Unlock()
	h.drain(trackers)
	for _, tr := range trackers {
		tr.close()
	}
	sess.Commit()
	h.t.log.V(2).Info("left consumer group session", "group", h.plan.groupID, "generation", sess.GenerationID())
	return nil
}

// drainIdle ends the drain early when no delivery was Done for this long:
// the receiver has stopped (a client that closes leaves its queue unhandled).
const drainIdle = 250 * time.Millisecond

func (h *groupHandler) drain(trackers map[topicPartition]*tracker) {
	deadline := time.NewTimer(time.Duration(h.t.cfg.DrainTimeout))
	defer deadline.Stop()
	idle := time.NewTimer(drainIdle)
	defer idle.Stop()
	for _, tr := range trackers {
		for {
			n, progress := tr.pendingCount()
			if n == 0 {
				break
			}
			select {
			case <-progress:
				idle.Reset(drainIdle)
				continue
			case <-idle.C:
			case <-deadline.C:
			}
			h.t.log.V(2).Info("giving partitions up with deliveries in flight; they will be delivered again", "group", h.plan.groupID)
			return
		}
	}
}

// tracker commits one claimed partition's offsets in order: an offset is
// marked only when every delivery before it is Done, so a rebalance or a
// crash re-delivers what was not handled, and never skips it.
type tracker struct {
	sess      sarama.ConsumerGroupSession
	topic     string
	partition int32
	max       int
	// seen is the offset after the last record read (delivered or
	// skipped), where the partition is read from: what a probe waits for.
	seen atomic.Int64

	mu       sync.Mutex
	base     uint64 // sequence number of pending[0]
	pending  []pendingOffset
	closed   bool
	progress chan struct{} // closed and replaced whenever pending shrinks
}

type pendingOffset struct {
	offset int64
	done   bool
}

func newTracker(sess sarama.ConsumerGroupSession, topic string, partition int32, max int) *tracker {
	return &tracker{sess: sess, topic: topic, partition: partition, max: max, progress: make(chan struct{})}
}

// add registers a received offset and returns its Done function.
func (tr *tracker) add(offset int64) func() {
	tr.mu.Lock()
	seq := tr.base + uint64(len(tr.pending))
	tr.pending = append(tr.pending, pendingOffset{offset: offset})
	tr.mu.Unlock()
	return func() { tr.done(seq) }
}

func (tr *tracker) done(seq uint64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.closed || seq < tr.base || seq-tr.base >= uint64(len(tr.pending)) {
		return
	}
	tr.pending[seq-tr.base].done = true
	n := 0
	for n < len(tr.pending) && tr.pending[n].done {
		n++
	}
	if n == 0 {
		return
	}
	next := tr.pending[n-1].offset + 1
	tr.pending = tr.pending[n:]
	tr.base += uint64(n)
	tr.sess.MarkOffset(tr.topic, tr.partition, next, "")
	close(tr.progress)
	tr.progress = make(chan struct{})
}

// pendingCount returns how many deliveries are not Done, and a channel
// closed at the next progress.
func (tr *tracker) pendingCount() (int, <-chan struct{}) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.pending), tr.progress
}

// waitRoom blocks while max deliveries are pending, until one is Done or
// ctx ends. It reports whether there is room.
func (tr *tracker) waitRoom(ctx context.Context) bool {
	for {
		n, progress := tr.pendingCount()
		if n < tr.max {
			return true
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return false
		}
	}
}

// close stops marking: a delivery Done after its session ended belongs to
// partitions that may have another owner now.
func (tr *tracker) close() {
	tr.mu.Lock()
	tr.closed = true
	tr.mu.Unlock()
}
