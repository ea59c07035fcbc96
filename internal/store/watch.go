package store

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// WatchOptions selects what a watch sees.
type WatchOptions[T Object] struct {
	Namespace string       // "" for all
	Match     func(T) bool // nil matches everything
	// ResourceVersion is where the watch starts: "" or "0" first sends the
	// current objects as Added events; a number resumes after it, from the
	// history (Expired if the history no longer reaches back that far).
	ResourceVersion string
	// SendInitialEvents sends the current objects as Added events and then
	// a bookmark annotated "k8s.io/initial-events-end" (the watch-list
	// protocol of client-go's WatchListClient).
	SendInitialEvents bool
	// AllowBookmarks asks for bookmarks, as ListOptions.AllowWatchBookmarks
	// does of a kube-apiserver: every bookmark interval (see
	// SetBookmarkInterval), and when the watch ends by its Timeout, the
	// watch sends a Bookmark event whose object carries only the store's
	// resourceVersion, if the store moved past what the watch last sent.
	// A client that resumes from it does not fall out of the history while
	// the objects it watches do not change. Needs Bookmark.
	AllowBookmarks bool
	// Timeout ends the watch after this long (0: never), as the
	// kube-apiserver does with timeoutSeconds.
	Timeout time.Duration
	// Bookmark makes the object of a bookmark event: an empty object of T.
	Bookmark func() T
	// Stored hands the consumer the stored objects themselves instead of
	// copies: for the store owner's own informer, whose cache then costs no
	// copy of what the store holds. Its consumer must not change them, as
	// client-go requires of an informer's cache anyway.
	Stored bool
}

// drainTimeout is how long a watch that ended by its timeout may take to
// deliver what it has queued (ending with its last bookmark) before it
// stops; its client then resumes from the last event it got.
const drainTimeout = 30 * time.Second

// Watch starts a watch. It ends when the consumer calls Stop, on Timeout,
// when Close is called, or when the consumer falls more than 100,000
// events behind (its client then resumes from the history, as from a
// kube-apiserver that dropped a slow watcher).
func (s *Store[T]) Watch(o WatchOptions[T]) (watch.Interface, error) {
	var from uint64
	initial := o.SendInitialEvents
	switch o.ResourceVersion {
	case "", "0":
		initial = true
	default:
		n, err := strconv.ParseUint(o.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", o.ResourceVersion))
		}
		if o.SendInitialEvents {
			return nil, apierrors.NewBadRequest("sendInitialEvents needs resourceVersion \"\" or \"0\"")
		}
		from = n
	}

	w := &watcher[T]{
		store:       s,
		stored:      o.Stored,
		namespace:   o.Namespace,
		match:       o.Match,
		bookmarks:   o.AllowBookmarks && o.Bookmark != nil,
		newBookmark: o.Bookmark,
		result:      make(chan watch.Event),
		stop:        make(chan struct{}),
	}
	w.cond = sync.NewCond(&w.mu)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, apierrors.NewServiceUnavailable("the client is closed")
	}
	if initial {
		var objs []T
		s.each(o.Namespace, func(obj T) bool {
			if w.wants(obj) {
				objs = append(objs, obj)
			}
			return true
		})
		slices.SortFunc(objs, byKey)
		w.sentRV = s.rv // the list is the state at s.rv
		w.pending = make([]pendingEvent[T], 0, len(objs)+1)
		for _, obj := range objs {
			// Stored objects, copied as they are delivered (see run).
			w.pending = append(w.pending, pendingEvent[T]{typ: watch.Added, obj: &sharedObject[T]{obj: obj, copy: w.copier()}})
		}
		if o.SendInitialEvents && o.Bookmark != nil {
			b := o.Bookmark()
			b.SetResourceVersion(strconv.FormatUint(s.rv, 10))
			b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			w.pending = append(w.pending, pendingEvent[T]{typ: watch.Bookmark, obj: &sharedObject[T]{obj: b}})
		}
	} else {
		w.sentRV = from
		if from < s.rv {
			// Every write records its event, so until the ring wraps it
			// reaches back to the store's first write and this never holds.
			oldest := s.oldestRV()
			if from+1 < oldest {
				s.mu.Unlock()
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, oldest-1))
			}
			for i := range len(s.history) {
				ev := s.history[(s.hnext+i)%len(s.history)]
				if ev.RV > from {
					if typ, ok := w.translate(ev); ok {
						w.pending = append(w.pending, pendingEvent[T]{typ: typ, obj: &sharedObject[T]{obj: ev.Object, copy: w.copier()}})
						w.sentRV = ev.RV
					}
				}
			}
		}
	}
	s.watchers[w] = struct{}{}
	every := s.bookmarkInterval
	s.mu.Unlock()

	go w.run()
	w.mu.Lock() // the timers may fire before AfterFunc returns
	if o.Timeout > 0 {
		w.timer = time.AfterFunc(o.Timeout, w.expire)
	}
	if w.bookmarks {
		w.every = every
		w.tick = time.AfterFunc(every, w.periodicBookmark)
	}
	w.mu.Unlock()
	return w, nil
}

// Close ends every watch and refuses new ones. Reads and writes still work.
func (s *Store[T]) Close() {
	s.mu.Lock()
	s.closed = true
	ws := make([]*watcher[T], 0, len(s.watchers)+len(s.draining))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	for w := range s.draining {
		ws = append(ws, w)
	}
	clear(s.watchers)
	clear(s.draining)
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// sharedObject is the object of a queued watch event. Until a watcher's
// goroutine delivers it, it is the stored object itself (immutable, so
// queueing it under the store's lock costs no copy); the first delivery
// copies it, and every watcher that queued the same event gets that one
// copy.
type sharedObject[T Object] struct {
	once sync.Once
	obj  T
	copy func(T) T // nil: obj is delivered as it is (a bookmark, or a watch of stored objects)
}

func (o *sharedObject[T]) get() T {
	o.once.Do(func() {
		if o.copy != nil {
			o.obj = o.copy(o.obj)
			o.copy = nil
		}
	})
	return o.obj
}

type pendingEvent[T Object] struct {
	typ watch.EventType
	obj *sharedObject[T]
}

// watcher is one watch. Events are queued without bound (up to
// maxPending) under the store's lock and handed to the consumer by the
// watcher's own goroutine, so a slow consumer never holds up writers.
//
// Lock order: the store's mu before the watcher's mu. The bookmark and
// timeout timers take both in that order.
type watcher[T Object] struct {
	store       *Store[T]
	namespace   string
	match       func(T) bool
	bookmarks   bool
	newBookmark func() T
	stored      bool // WatchOptions.Stored

	mu      sync.Mutex
	cond    *sync.Cond
	timer   *time.Timer // Timeout, then drainTimeout
	tick    *time.Timer // the next periodic bookmark
	every   time.Duration
	pending []pendingEvent[T]
	// sentRV is the resourceVersion the consumer knows once it has what is
	// queued; a bookmark is due only when the store moved past it.
	sentRV uint64
	ended  bool // no more events will be queued
	once   sync.Once
	stop   chan struct{} // closed by Stop
	result chan watch.Event
}

func (w *watcher[T]) wants(obj T) bool {
	return (w.namespace == "" || obj.GetNamespace() == w.namespace) && (w.match == nil || w.match(obj))
}

// translate says what this watcher sees of a store event: a modification
// that moves an object into or out of its selection is an Added or a
// Deleted, as the kube-apiserver reports it; false if nothing.
func (w *watcher[T]) translate(ev Event[T]) (watch.EventType, bool) {
	now := w.wants(ev.Object)
	if ev.Type != watch.Modified {
		return ev.Type, now
	}
	before := w.wants(ev.Prev)
	switch {
	case before && now:
		return watch.Modified, true
	case now:
		return watch.Added, true
	case before:
		return watch.Deleted, true
	}
	return "", false
}

// copier is how the watcher's events copy the stored object: nil for a
// watch of the stored objects themselves.
func (w *watcher[T]) copier() func(T) T {
	if w.stored {
		return nil
	}
	return w.store.share
}

// offer queues ev; it runs under the store's write lock. *shared is the
// event's object for every watcher that wants a copy, *stored for every
// watcher of the stored objects, each made by the first that wants it. It
// returns false once the watcher wants no more events.
func (w *watcher[T]) offer(ev Event[T], shared, stored **sharedObject[T]) bool {
	typ, ok := w.translate(ev)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	if !ok {
		return true
	}
	if len(w.pending) >= maxPending {
		// Too far behind: end the watch after what is queued; the client
		// resumes from its last resourceVersion.
		w.ended = true
		w.cond.Signal()
		return false
	}
	obj := shared
	if w.stored {
		obj = stored
	}
	if *obj == nil {
		*obj = &sharedObject[T]{obj: ev.Object, copy: w.copier()}
	}
	w.pending = append(w.pending, pendingEvent[T]{typ: typ, obj: *obj})
	w.sentRV = ev.RV
	w.cond.Signal()
	return true
}

// queueBookmark queues a bookmark at rv if the watcher asked for bookmarks
// and rv is past what it queued. The caller holds the store's mu, so every
// event up to rv is queued already, and w.mu.
func (w *watcher[T]) queueBookmark(rv uint64) {
	if !w.bookmarks || w.ended || rv <= w.sentRV {
		return
	}
	b := w.newBookmark()
	b.SetResourceVersion(strconv.FormatUint(rv, 10))
	w.pending = append(w.pending, pendingEvent[T]{typ: watch.Bookmark, obj: &sharedObject[T]{obj: b}})
	w.sentRV = rv
	w.cond.Signal()
}

// periodicBookmark runs on the bookmark timer.
func (w *watcher[T]) periodicBookmark() {
	s := w.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.queueBookmark(s.rv)
	w.tick.Reset(w.every)
}

// expire ends the watch at its Timeout. A watch that allows bookmarks
// gets one first, as from a kube-apiserver, so its client resumes from the
// store's current resourceVersion even if nothing it watches changed for
// longer than the history reaches back; what it queued before is still
// delivered (within drainTimeout), the bookmark last. Other watches stop
// at once.
func (w *watcher[T]) expire() {
	if !w.bookmarks {
		w.Stop()
		return
	}
	s := w.store
	s.mu.Lock()
	defer s.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return // stopped, or ended for falling behind
	}
	if _, ok := s.watchers[w]; ok {
		delete(s.watchers, w)
		s.draining[w] = struct{}{}
	}
	w.queueBookmark(s.rv)
	w.ended = true
	w.cond.Signal()
	w.tick.Stop()
	w.timer = time.AfterFunc(drainTimeout, w.Stop)
}

// detach takes the watcher out of the store.
func (w *watcher[T]) detach() {
	s := w.store
	s.mu.Lock()
	delete(s.watchers, w)
	delete(s.draining, w)
	s.mu.Unlock()
}

func (w *watcher[T]) run() {
	defer w.detach()
	defer close(w.result)
	for {
		w.mu.Lock()
		for len(w.pending) == 0 && !w.ended {
			w.cond.Wait()
		}
		if len(w.pending) == 0 {
			w.mu.Unlock()
			return
		}
		ev := w.pending[0]
		w.pending[0] = pendingEvent[T]{}
		w.pending = w.pending[1:]
		w.mu.Unlock()
		// The copy, if this is the first delivery of the event, is made
		// here: under no lock.
		select {
		case w.result <- watch.Event{Type: ev.typ, Object: ev.obj.get()}:
		case <-w.stop:
			return
		}
	}
}

// Stop ends the watch; ResultChan is closed soon after. It is idempotent.
func (w *watcher[T]) Stop() {
	w.once.Do(func() {
		w.detach()
		w.mu.Lock()
		if w.timer != nil {
			w.timer.Stop()
		}
		if w.tick != nil {
			w.tick.Stop()
		}
		w.ended = true
		w.pending = nil
		w.cond.Signal()
		w.mu.Unlock()
		close(w.stop)
	})
}

// ResultChan returns the events.
func (w *watcher[T]) ResultChan() <-chan watch.Event { return w.result }
