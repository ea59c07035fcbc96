package store

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// Feed is a subscription to a store: the objects of a namespace it held
// when the feed began, then every change to one, in resourceVersion order,
// queued without bound until taken. Nothing comes between the objects and
// the first change. It hands out the stored objects themselves (a Deleted
// change's is the object as it was removed): its consumer must not change
// them. It is for an informer served from the store itself, whose handlers
// take what it queued on their own goroutines, and whose slowness holds
// the store's writers up not at all. It is goroutine-safe.
type Feed[T Object] struct {
	s         *Store[T]
	namespace string // "" for all
	initial   int    // how many objects the feed began with

	mu     sync.Mutex
	queue  []Change[T] // what waits
	ready  chan struct{}
	closed bool
}

// Change is one item of a Feed.
type Change[T Object] struct {
	Event[T]
	// Initial marks the objects held when the feed began, each an Added
	// event at the store's resourceVersion then.
	Initial bool
}

// Subscribe starts a feed of namespace's objects ("" for all). Close it.
func (s *Store[T]) Subscribe(namespace string) *Feed[T] {
	f := &Feed[T]{s: s, namespace: namespace, ready: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.each(namespace, func(obj T) bool {
		f.queue = append(f.queue, Change[T]{Event: Event[T]{Type: watch.Added, Object: obj, RV: s.rv}, Initial: true})
		return true
	})
	f.initial = len(f.queue)
	s.feeds[f] = struct{}{}
	f.signal()
	return f
}

// Initial returns how many objects the feed began with: its first changes,
// marked Initial.
func (f *Feed[T]) Initial() int { return f.initial }

// Ready gets a value once changes were queued since it last had one:
// wait on it when Take returns none.
func (f *Feed[T]) Ready() <-chan struct{} { return f.ready }

// Take returns what waits, oldest first, and empties the queue. The
// feed's next queue reuses spare, a slice Take returned before whose
// changes the caller is done with (nil for none).
func (f *Feed[T]) Take(spare []Change[T]) []Change[T] {
	clear(spare) // let the objects go
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.queue
	if cap(spare) > 1024 { // a burst's: let it go too
		spare = nil
	}
	f.queue = spare[:0]
	return out
}

// Replay queues every object of the feed's namespace as a Modified change
// from itself to itself (an informer's resync), after what waits; no
// change comes between them.
func (f *Feed[T]) Replay() {
	f.s.mu.RLock()
	defer f.s.mu.RUnlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	rv := f.s.rv
	f.s.each(f.namespace, func(obj T) bool {
		f.queue = append(f.queue, Change[T]{Event: Event[T]{Type: watch.Modified, Object: obj, Prev: obj, RV: rv}})
		return true
	})
	f.signal()
}

// Close ends the feed and drops what it queued. It is idempotent.
func (f *Feed[T]) Close() {
	f.s.mu.Lock()
	delete(f.s.feeds, f)
	f.s.mu.Unlock()
	f.mu.Lock()
	f.closed = true
	f.queue = nil
	f.mu.Unlock()
}

// push queues ev. The caller holds f.s.mu for writing.
func (f *Feed[T]) push(ev Event[T]) {
	if f.namespace != "" && f.namespace != ev.Object.GetNamespace() {
		return
	}
	f.mu.Lock()
	f.queue = append(f.queue, Change[T]{Event: ev})
	f.mu.Unlock()
	f.signal()
}

func (f *Feed[T]) signal() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// Inspector gets each object as it is stored: client-go's cache mutation
// detector (cache.MutationDetector) is one.
type Inspector interface{ AddObject(obj any) }

// Inspect hands ins every object the store holds now and every object it
// stores from now on, as it stores it, under its lock: before any reader
// can have it. It is for a debugging aid such as client-go's cache
// mutation detector, which copies what it gets to find it changed later;
// it slows every write.
func (s *Store[T]) Inspect(ins Inspector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.each("", func(obj T) bool {
		ins.AddObject(obj)
		return true
	})
	s.inspectors = append(s.inspectors, ins)
}

// Namespaces returns the namespaces that hold objects, in no order.
func (s *Store[T]) Namespaces() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.items))
	for ns := range s.items {
		names = append(names, ns)
	}
	return names
}
