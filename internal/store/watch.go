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
	// Timeout ends the watch after this long (0: never), as the
	// kube-apiserver does with timeoutSeconds.
	Timeout time.Duration
	// Bookmark makes the object of a bookmark event: an empty object of T.
	Bookmark func() T
}

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

	w := &watcher[T]{namespace: o.Namespace, match: o.Match, result: make(chan watch.Event), stop: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	w.detach = func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}

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
		for _, obj := range objs {
			w.pending = append(w.pending, watch.Event{Type: watch.Added, Object: s.share(obj)})
		}
		if o.SendInitialEvents && o.Bookmark != nil {
			b := o.Bookmark()
			b.SetResourceVersion(strconv.FormatUint(s.rv, 10))
			b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			w.pending = append(w.pending, watch.Event{Type: watch.Bookmark, Object: b})
		}
	} else {
		if from < s.rv {
			oldest := s.oldestRV()
			if s.hcount == len(s.history) && from+1 < oldest {
				s.mu.Unlock()
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, oldest-1))
			}
			for i := range s.hcount {
				ev := s.history[(s.hnext-s.hcount+i+len(s.history))%len(s.history)]
				if ev.RV > from {
					if e, ok := w.translate(ev, s.share); ok {
						w.pending = append(w.pending, e)
					}
				}
			}
		}
	}
	s.watchers[w] = struct{}{}
	s.mu.Unlock()

	go w.run()
	if o.Timeout > 0 {
		w.mu.Lock() // the timer may fire before AfterFunc returns
		w.timer = time.AfterFunc(o.Timeout, w.Stop)
		w.mu.Unlock()
	}
	return w, nil
}

// Close ends every watch and refuses new ones. Reads and writes still work.
func (s *Store[T]) Close() {
	s.mu.Lock()
	s.closed = true
	ws := make([]*watcher[T], 0, len(s.watchers))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	clear(s.watchers)
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// watcher is one watch. Events are queued without bound (up to
// maxPending) under the store's lock and handed to the consumer by the
// watcher's own goroutine, so a slow consumer never holds up writers.
type watcher[T Object] struct {
	namespace string
	match     func(T) bool
	detach    func()

	mu      sync.Mutex
	cond    *sync.Cond
	timer   *time.Timer
	pending []watch.Event
	ended   bool // no more events will be queued
	once    sync.Once
	stop    chan struct{} // closed by Stop
	result  chan watch.Event
}

func (w *watcher[T]) wants(obj T) bool {
	return (w.namespace == "" || obj.GetNamespace() == w.namespace) && (w.match == nil || w.match(obj))
}

// translate turns a store event into what this watcher sees: a
// modification that moves an object into or out of its selection is an
// Added or a Deleted, as the kube-apiserver reports it.
func (w *watcher[T]) translate(ev Event[T], copy func(T) T) (watch.Event, bool) {
	now := w.wants(ev.Object)
	obj := ev.Object
	if copy != nil {
		obj = copy(obj)
	}
	if ev.Type != watch.Modified {
		return watch.Event{Type: ev.Type, Object: obj}, now
	}
	before := w.wants(ev.Prev)
	switch {
	case before && now:
		return watch.Event{Type: watch.Modified, Object: obj}, true
	case now:
		return watch.Event{Type: watch.Added, Object: obj}, true
	case before:
		return watch.Event{Type: watch.Deleted, Object: obj}, true
	}
	return watch.Event{}, false
}

// offer queues ev; it runs under the store's lock. It returns false once the
// watcher wants no more events.
func (w *watcher[T]) offer(ev Event[T]) bool {
	e, ok := w.translate(ev, nil)
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
	w.pending = append(w.pending, e)
	w.cond.Signal()
	return true
}

func (w *watcher[T]) run() {
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
		w.pending[0] = watch.Event{}
		w.pending = w.pending[1:]
		w.mu.Unlock()
		select {
		case w.result <- ev:
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
		w.ended = true
		w.pending = nil
		w.cond.Signal()
		w.mu.Unlock()
		close(w.stop)
	})
}

// ResultChan returns the events.
func (w *watcher[T]) ResultChan() <-chan watch.Event { return w.result }
