// Package ack keeps, per agent and data type, the specs a source sent that
// the agent has not acknowledged yet: it says which to send again, and
// paces what goes to an agent slower than its source. A spec is
// acknowledged by a status at its version or newer (an agent reports a
// status for every version it takes, a Deleted one included), or by the
// agent's spec resync, whose answer sends what it still lacks.
//
// Brokers lose events a source cannot see lost: Mosquitto drops what
// exceeds a subscriber's queue, any broker may drop what it holds for a
// client that reconnects, and an OCM agent handles events concurrently, so
// an update can lose the race to the create before it. Agents that resync
// only when they connect would never ask again. The Tracker turns "sent"
// into "acknowledged or sent again".
//
// When a spec is due is measured, not fixed: at least Config.After after
// its send, or twice the slowest acknowledgement of the agent's last
// minute or two, whichever is later — an agent working through a backlog
// acknowledges late without having lost anything — and after each re-send
// twice as long as before, up to Config.Max. Each round sends the oldest
// due specs first, at most Config.PerRound per agent. An agent that has
// said nothing for as long as it takes to acknowledge may be away
// (stopped, disconnected) or may have lost the one spec it was sent: a hub
// cannot tell the two apart, so such an agent gets one spec at a time, a
// probe, backing off as one spec's re-sends do, and the rest once it
// answers. An agent coming back resyncs anyway.
//
// Pacing: at most a window of specs is in flight to an agent (sent, not
// acknowledged); the rest wait, newest version only, and go oldest first
// as acknowledgements free the window. The window starts at
// Config.Window, grows by one with each acknowledgement that comes about
// as fast as the agent's fastest of late, shrinks by one with each that
// comes much slower (a backlog builds up in front of the agent, in the
// broker's queue), down to MinWindow, and halves when a spec turns out
// lost. So a broker's queue never holds more than a window for a slow
// agent, while a fast one is never held back.
//
// It does no I/O and reads no clock: callers pass the time.
package ack

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/workwire/sdk-go/pending"
)

// Config says when specs are sent again, and how many go at once.
type Config struct {
	// After is the least time between a spec's send and its re-send.
	After time.Duration
	// Max bounds the time between two re-sends of one spec.
	Max time.Duration
	// PerRound bounds the specs one round sends again to one agent.
	PerRound int
	// Window is how many specs may be in flight to an agent at first; 0
	// turns pacing off.
	Window int
}

// Defaults of a Config: a healthy agent acknowledges within a second, so
// a healthy fleet never pays for re-sends. generic (DefaultSpecResendAfter,
// SpecResendMax, SpecResendPerRound) and the gRPC broker
// (server.DefaultSpecResendAfter) write them out for their documentation;
// tests keep them equal.
const (
	DefaultAfter    = 30 * time.Second
	DefaultMax      = 10 * time.Minute
	DefaultPerRound = 500
)

// Tick is how often a caller asks for what is Due: every quarter of
// After, within 10ms and 10s.
func (c Config) Tick() time.Duration {
	return min(max(c.After/4, 10*time.Millisecond), 10*time.Second)
}

// Bounds of a pacing window.
const (
	MinWindow = 100
	MaxWindow = 1 << 20
)

// Peer is an agent (its cluster) and a data type: acknowledgement and
// re-sends are tracked per pair, so a data type whose agents never report
// status costs nothing more than probes.
type Peer struct {
	Cluster  string
	DataType string
}

// Due is a spec to send: the resource and the version that went
// unacknowledged, and whether it goes as a create. Object is the object
// to send, for a spec the window held back; nil for one to send again as
// the source now has it.
type Due struct {
	ResourceID string
	Version    int64
	Create     bool
	Object     any
}

// Tracker is goroutine-safe.
type Tracker struct {
	cfg   Config
	base  time.Time // the zero of specs' times
	mu    sync.Mutex
	peers map[Peer]*peer
}

// Config returns the tracker's configuration.
func (t *Tracker) Config() Config { return t.cfg }

// nanos is now on the tracker's clock.
func (t *Tracker) nanos(now time.Time) int64 { return int64(now.Sub(t.base)) }

type peer struct {
	specs    map[string]*spec
	inflight int      // specs sent and not acknowledged
	waiting  []string // held back by the window, oldest first (some may be gone)
	window   float64
	heard    time.Time // the agent's last status or resync
	slow     extreme   // its recent acknowledgement latencies: the slowest
	fast     extreme   // and the fastest
	// probes counts the probes sent since the agent last spoke; the next
	// is not before probeAt.
	probes  int32
	probeAt time.Time
}

// spoke records that the agent said something at now.
func (pe *peer) spoke(now time.Time) {
	pe.heard, pe.probes, pe.probeAt = now, 0, time.Time{}
}

// spec is one unacknowledged spec. Its times are the tracker's clock
// (nanos): there is one per resource in flight, so it is kept small.
type spec struct {
	version int64
	sent    int64 // the first send of this version (or when it was held back)
	last    int64 // its last send
	held    any   // the object the window holds back; nil once sent
	tries   int32 // re-sends so far
	create  bool
}

// New returns an empty tracker.
func New(cfg Config) *Tracker {
	return &Tracker{cfg: cfg, base: time.Now(), peers: make(map[Peer]*peer)}
}

func (t *Tracker) peer(p Peer) *peer {
	pe := t.peers[p]
	if pe == nil {
		pe = &peer{specs: make(map[string]*spec), window: float64(t.cfg.Window), fast: extreme{least: true}}
		t.peers[p] = pe
	}
	return pe
}

// Send records a spec of obj about to be sent at now, and reports whether
// to send it now. It is not sent now when the agent's window is full: the
// tracker holds obj, and a later Acked or Due hands it back to send. A
// newer version of a spec held back replaces it; one of a spec in flight
// goes at once, in its place. A version the tracker already waits for (a
// resync's answer) goes without changing anything.
func (t *Tracker) Send(p Peer, id string, version int64, create bool, obj any, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	pe, n := t.peer(p), t.nanos(now)
	if s := pe.specs[id]; s != nil {
		switch {
		case s.held != nil:
			if version >= s.version {
				s.version, s.create, s.held = version, create, obj
			}
			return false
		case version > s.version:
			*s = spec{version: version, sent: n, last: n, create: create}
		}
		return true
	}
	if t.cfg.Window > 0 && float64(pe.inflight) >= pe.window {
		pe.specs[id] = &spec{version: version, sent: n, create: create, held: obj}
		pe.waiting = append(pe.waiting, id)
		return false
	}
	pe.specs[id] = &spec{version: version, sent: n, last: n, create: create}
	pe.inflight++
	return true
}

// Acked records a status from p's agent for resource id at version. It
// returns how long the spec it acknowledges waited since its first send
// (false if it acknowledges none: an older version, or none sent), and
// the specs the window now lets go, to send.
func (t *Tracker) Acked(p Peer, id string, version int64, now time.Time) (time.Duration, bool, []Due) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pe := t.peer(p)
	pe.spoke(now)
	s := pe.specs[id]
	if s == nil || version < s.version {
		return 0, false, nil
	}
	t.remove(pe, id, s)
	n := t.nanos(now)
	if s.held != nil {
		return time.Duration(n - s.sent), true, nil // the agent had it already (a resync's answer)
	}
	// How fast the agent is counts from the last send: a re-sent spec's
	// first send would count the wait before its re-send.
	lat := time.Duration(n - s.last)
	pe.slow.observe(lat, now)
	pe.fast.observe(lat, now)
	if fast := pe.fast.get(now); lat <= 2*fast+100*time.Millisecond {
		pe.window = min(pe.window+1, MaxWindow)
	} else if lat > 4*fast+time.Second {
		pe.window = max(pe.window-1, t.minWindow())
	}
	return time.Duration(n - s.sent), true, t.release(pe, now)
}

func (t *Tracker) minWindow() float64 { return float64(min(MinWindow, t.cfg.Window)) }

// remove forgets spec s of resource id.
func (t *Tracker) remove(pe *peer, id string, s *spec) {
	delete(pe.specs, id)
	if s.held == nil {
		pe.inflight--
	}
}

// release returns the held-back specs the window lets go, oldest first,
// counted in flight from now.
func (t *Tracker) release(pe *peer, now time.Time) []Due {
	var out []Due
	for len(pe.waiting) > 0 && float64(pe.inflight) < pe.window {
		id := pe.waiting[0]
		pe.waiting = pe.waiting[1:]
		s := pe.specs[id]
		if s == nil || s.held == nil {
			continue // acknowledged, forgotten or sent since
		}
		out = append(out, Due{ResourceID: id, Version: s.version, Create: s.create, Object: s.held})
		s.held, s.last = nil, t.nanos(now)
		pe.inflight++
	}
	if len(pe.waiting) == 0 {
		pe.waiting = nil // give the backing array back
	}
	return out
}

// Resynced records a spec resync from p's agent: it lists what it holds,
// and the answer sends what it lacks (and Send tracks those again), so
// nothing sent or held back before is waited for any more.
func (t *Tracker) Resynced(p Peer, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pe := t.peer(p)
	pe.spoke(now)
	clear(pe.specs)
	pe.inflight, pe.waiting = 0, nil
}

// Forget stops waiting for resource id (the source no longer has it).
func (t *Tracker) Forget(p Peer, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pe := t.peers[p]; pe != nil {
		if s := pe.specs[id]; s != nil {
			t.remove(pe, id, s)
		}
	}
}

// Due returns, per agent, the specs to send at now: the held-back ones
// the window lets go, and those to send again, oldest first, each counted
// as sent again — it will not be due again before twice the wait before,
// up to Config.Max.
func (t *Tracker) Due(now time.Time) map[Peer][]Due {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[Peer][]Due
	add := func(p Peer, d ...Due) {
		if len(d) == 0 {
			return
		}
		if out == nil {
			out = make(map[Peer][]Due)
		}
		out[p] = append(out[p], d...)
	}
	at := t.nanos(now)
	for p, pe := range t.peers {
		// The wait is the agent's as it is now: the acknowledgements of
		// a backlog sent together arrive ever later, and none of the
		// backlog is due while they keep coming.
		wait := t.wait(pe, now)
		silent := now.Sub(pe.heard) >= wait
		type dueSpec struct {
			id string
			*spec
		}
		var due []dueSpec
		lost := false
		for id, s := range pe.specs {
			if s.held == nil && time.Duration(at-s.last) >= backoff(wait, s.tries, t.cfg.Max) {
				due = append(due, dueSpec{id, s})
				lost = lost || s.tries == 0
			}
		}
		if lost {
			// What filled the broker's queue was too much.
			pe.window = max(pe.window/2, t.minWindow())
		}
		if !silent {
			add(p, t.release(pe, now)...)
		}
		if len(due) == 0 {
			continue
		}
		slices.SortFunc(due, func(a, b dueSpec) int { return cmp.Compare(a.sent, b.sent) })
		n := min(len(due), t.cfg.PerRound)
		if silent {
			// The agent said nothing for as long as it takes to
			// acknowledge: a probe, backing off as one spec's re-sends
			// do.
			if now.Before(pe.probeAt) {
				continue
			}
			n = 1
			pe.probes++
			pe.probeAt = now.Add(backoff(wait, pe.probes, t.cfg.Max))
		}
		for _, s := range due[:n] {
			s.tries++
			s.last = at
			add(p, Due{ResourceID: s.id, Version: s.version, Create: s.create})
		}
	}
	return out
}

// Pending returns how many specs wait for an acknowledgement, held back by
// the window or in flight, and how long the oldest has waited at now.
func (t *Tracker) Pending(now time.Time) (n int, oldest time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := t.nanos(now)
	for _, pe := range t.peers {
		n += len(pe.specs)
		for _, s := range pe.specs {
			oldest = max(oldest, time.Duration(at-s.sent))
		}
	}
	return n, oldest
}

// wait is how long a spec sent to pe waits before its first re-send, as
// of now.
func (t *Tracker) wait(pe *peer, now time.Time) time.Duration {
	return max(t.cfg.After, 2*pe.slow.get(now))
}

// backoff is the wait before re-send tries+1: wait doubled tries times, up
// to max.
func backoff(wait time.Duration, tries int32, limit time.Duration) time.Duration {
	for range tries {
		if wait >= limit/2 {
			return limit
		}
		wait *= 2
	}
	return min(wait, limit)
}

// extreme is the least (the fastest) or the greatest (the slowest) of the
// latencies observed in the current window and the one before it: a
// backlog's latencies count for one to two windows.
type extreme struct {
	least          bool
	cur, prev      time.Duration
	seen, seenPrev bool // cur, prev hold an observation
	since          time.Time
}

const extremeWindow = time.Minute

func (e *extreme) pick(a, b time.Duration) time.Duration {
	if e.least {
		return min(a, b)
	}
	return max(a, b)
}

func (e *extreme) rotate(now time.Time) {
	switch age := now.Sub(e.since); {
	case age >= 2*extremeWindow:
		*e = extreme{least: e.least, since: now}
	case age >= extremeWindow:
		e.prev, e.seenPrev, e.seen, e.since = e.cur, e.seen, false, now
	}
}

func (e *extreme) observe(d time.Duration, now time.Time) {
	e.rotate(now)
	if !e.seen {
		e.cur, e.seen = d, true
		return
	}
	e.cur = e.pick(e.cur, d)
}

// get returns the extreme, 0 if nothing was observed.
func (e *extreme) get(now time.Time) time.Duration {
	e.rotate(now)
	switch {
	case e.seen && e.seenPrev:
		return e.pick(e.cur, e.prev)
	case e.seen:
		return e.cur
	case e.seenPrev:
		return e.prev
	}
	return 0
}

// Report reports what waits at now for the agents q selects: counts per
// agent, and the q.Limit() oldest specs.
func (t *Tracker) Report(q pending.Query, now time.Time) pending.Report {
	r := pending.Report{Time: now, Clusters: []pending.Cluster{}, Specs: []pending.Spec{}}
	type sent struct {
		spec  pending.Spec
		nanos int64
	}
	var specs []sent
	t.mu.Lock()
	at := t.nanos(now)
	for p, pe := range t.peers {
		if len(pe.specs) == 0 || q.Cluster != "" && p.Cluster != q.Cluster {
			continue
		}
		c := pending.Cluster{Name: p.Cluster, DataType: p.DataType, Waiting: len(pe.specs), LastHeard: pe.heard}
		oldest := at
		for id, s := range pe.specs {
			oldest = min(oldest, s.sent)
			if s.held != nil {
				c.Held++
			}
			specs = append(specs, sent{nanos: s.sent, spec: pending.Spec{Cluster: p.Cluster, DataType: p.DataType, ResourceID: id,
				Version: s.version, AgeSeconds: seconds(at - s.sent), Resends: int(s.tries), Held: s.held != nil}})
		}
		c.OldestSeconds = seconds(at - oldest)
		r.Clusters = append(r.Clusters, c)
	}
	t.mu.Unlock()
	r.Waiting, r.ClustersWaiting = len(specs), len(r.Clusters)
	slices.SortFunc(r.Clusters, func(a, b pending.Cluster) int {
		return cmp.Or(cmp.Compare(b.OldestSeconds, a.OldestSeconds), cmp.Compare(a.Name, b.Name), cmp.Compare(a.DataType, b.DataType))
	})
	slices.SortFunc(specs, func(a, b sent) int {
		return cmp.Or(cmp.Compare(a.nanos, b.nanos), cmp.Compare(a.spec.Cluster, b.spec.Cluster), cmp.Compare(a.spec.ResourceID, b.spec.ResourceID))
	})
	r.Clusters = r.Clusters[:min(len(r.Clusters), q.Limit())]
	if len(specs) > 0 {
		r.OldestSeconds = specs[0].spec.AgeSeconds
	}
	for _, s := range specs[:min(len(specs), q.Limit())] {
		r.Specs = append(r.Specs, s.spec)
	}
	return r
}

func seconds(nanos int64) float64 { return time.Duration(nanos).Seconds() }
