// Package queue is a keyed, fair work queue: the receive path of workwire's
// clients puts events in it and returns at once; workers take them out.
//
//   - One pending item per key: an Add for a key that is already waiting is
//     merged into it (newest wins, by the caller's rule), so memory is bounded
//     by the number of keys, not the number of events.
//   - One worker per key at a time: an Add for a key being processed waits
//     until Done, so events for one resource are handled in order.
//   - Lanes: FIFO within a lane, round-robin across lanes, so a burst in one
//     lane (say 10,000 deletes) never starves another (creates).
package queue

import (
	"sync"
	"time"
)

// Queue is goroutine-safe. The zero value is not usable; call New.
type Queue[K comparable, V any] struct {
	merge func(old, new V) (keep, discard V)

	mu       sync.Mutex
	cond     *sync.Cond
	lanes    []fifo[K]
	pending  map[K]*item[V]
	peak     int // the most items pending since pending was made
	active   map[K]struct{}
	next     int
	shutdown bool
	timers   map[*time.Timer]struct{}
}

type item[V any] struct {
	v    V
	lane int
}

// New returns a queue with the given number of lanes (at least 1). merge
// decides, for a key that already has a pending item, which of the two to
// keep; the other is returned by Add so the caller can release it.
func New[K comparable, V any](lanes int, merge func(old, new V) (keep, discard V)) *Queue[K, V] {
	q := &Queue[K, V]{
		merge:   merge,
		lanes:   make([]fifo[K], max(lanes, 1)),
		pending: make(map[K]*item[V]),
		active:  make(map[K]struct{}),
		timers:  make(map[*time.Timer]struct{}),
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues v for key in lane. If key already has a pending item, merge
// picks one and Add returns the other as discarded (merged true). After
// ShutDown, Add queues nothing and returns v as discarded with accepted false.
func (q *Queue[K, V]) Add(key K, lane int, v V) (discarded V, merged, accepted bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return v, false, false
	}
	lane = min(max(lane, 0), len(q.lanes)-1)
	if p, ok := q.pending[key]; ok {
		keep, drop := q.merge(p.v, v)
		p.v = keep
		return drop, true, true
	}
	q.pending[key] = &item[V]{v: v, lane: lane}
	q.peak = max(q.peak, len(q.pending))
	if _, busy := q.active[key]; !busy {
		q.lanes[lane].push(key)
		q.cond.Signal()
	}
	var zero V
	return zero, false, true
}

// AddAfter calls Add after d, unless the queue is shut down first. What Add
// discards is passed to release (which may be nil).
func (q *Queue[K, V]) AddAfter(key K, lane int, v V, d time.Duration, release func(V)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		if release != nil {
			release(v)
		}
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		_, live := q.timers[t]
		delete(q.timers, t)
		q.mu.Unlock()
		if !live {
			return
		}
		if drop, merged, accepted := q.Add(key, lane, v); (merged || !accepted) && release != nil {
			release(drop)
		}
	})
	q.timers[t] = struct{}{}
}

// Get blocks until an item is ready or the queue is shut down (ok false).
// The caller must call Done(key) when finished with it.
func (q *Queue[K, V]) Get() (key K, v V, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.shutdown {
			return key, v, false
		}
		for i := range q.lanes {
			l := (q.next + i) % len(q.lanes)
			k, found := q.lanes[l].pop()
			if !found {
				continue
			}
			q.next = (l + 1) % len(q.lanes)
			it := q.pending[k]
			delete(q.pending, k)
			if len(q.pending) == 0 && q.peak > shrinkAbove {
				// A Go map keeps its buckets when emptied: a hub that
				// published 100,000 works would hold them for good.
				q.pending, q.peak = make(map[K]*item[V]), 0
			}
			q.active[k] = struct{}{}
			return k, it.v, true
		}
		q.cond.Wait()
	}
}

// Done marks key finished. If an item for key was added meanwhile, it is
// queued now, at the back of its lane.
func (q *Queue[K, V]) Done(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.active, key)
	if p, ok := q.pending[key]; ok && !q.shutdown {
		q.lanes[p.lane].push(key)
		q.cond.Signal()
	}
}

// Pending reports whether key has an item waiting (not counting one being
// processed).
func (q *Queue[K, V]) Pending(key K) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.pending[key]
	return ok
}

// Len returns how many items wait.
func (q *Queue[K, V]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// ShutDown makes every Get return ok false, stops delayed adds, and returns
// the items still waiting so the caller can release them.
func (q *Queue[K, V]) ShutDown() []V {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return nil
	}
	q.shutdown = true
	for t := range q.timers {
		t.Stop()
	}
	clear(q.timers)
	left := make([]V, 0, len(q.pending))
	for _, p := range q.pending {
		left = append(left, p.v)
	}
	clear(q.pending)
	q.cond.Broadcast()
	return left
}

// shrinkAbove is the size past which an emptied map or lane gives its
// memory back.
const shrinkAbove = 1024

// fifo is a slice-backed queue that reuses its array.
type fifo[K any] struct {
	items []K
	head  int
}

func (f *fifo[K]) push(k K) { f.items = append(f.items, k) }

func (f *fifo[K]) pop() (K, bool) {
	var zero K
	if f.head == len(f.items) {
		return zero, false
	}
	k := f.items[f.head]
	f.items[f.head] = zero
	f.head++
	switch {
	case f.head == len(f.items) && cap(f.items) > shrinkAbove:
		f.items, f.head = nil, 0
	case f.head == len(f.items):
		f.items, f.head = f.items[:0], 0
	case f.head > shrinkAbove && f.head*2 > len(f.items):
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return k, true
}
