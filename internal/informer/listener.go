package informer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/workwire/sdk-go/internal/store"
)

// listener delivers to one handler, in order, on its own goroutine, what
// its store feed queued.
type listener[T store.Object] struct {
	handler cache.ResourceEventHandler
	resync  time.Duration // 0: never
	feed    *store.Feed[T]
	quit    chan struct{}
	done    chan struct{} // closed once run returned: nothing more is delivered

	mu      sync.Mutex
	stopped bool
	synced  chan struct{} // closed once the handler took the initial list
}

var _ cache.ResourceEventHandlerRegistration = (*listener[store.Object])(nil)

func newListener[T store.Object](h cache.ResourceEventHandler, resync time.Duration) *listener[T] {
	return &listener[T]{handler: h, resync: resync, quit: make(chan struct{}), done: make(chan struct{}),
		synced: make(chan struct{})}
}

// start subscribes to the store and starts delivering. The caller holds
// inf.mu.
func (l *listener[T]) start(inf *Informer[T]) {
	l.feed = inf.st.Subscribe(inf.namespace)
	inf.wg.Go(l.run)
}

// stop ends the deliveries; what waits is dropped, as client-go's informer
// drops it. The caller holds inf.mu.
func (l *listener[T]) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		close(l.quit)
	}
}

func (l *listener[T]) run() {
	defer close(l.done)
	defer l.feed.Close()
	var tick <-chan time.Time
	if l.resync > 0 {
		t := time.NewTicker(l.resync)
		defer t.Stop()
		tick = t.C
	}
	left := l.feed.Initial()
	if left == 0 {
		close(l.synced)
	}
	ready := l.feed.Ready()
	var batch []store.Change[T]
	for {
		select {
		case <-ready:
		case <-tick:
			l.feed.Replay()
			continue
		case <-l.quit:
			return
		}
		batch = l.feed.Take(batch)
		for _, c := range batch {
			select {
			case <-l.quit:
				return
			default:
			}
			l.deliver(c)
			if c.Initial {
				if left--; left == 0 {
					close(l.synced)
				}
			}
		}
	}
}

func (l *listener[T]) deliver(c store.Change[T]) {
	switch c.Type {
	case watch.Added:
		l.handler.OnAdd(c.Object, c.Initial)
	case watch.Modified:
		l.handler.OnUpdate(c.Prev, c.Object)
	case watch.Deleted:
		l.handler.OnDelete(c.Object)
	}
}

// HasSynced reports whether the handler has taken its initial list.
func (l *listener[T]) HasSynced() bool { return isClosed(l.synced) }

// HasSyncedChecker returns what is done once HasSynced.
func (l *listener[T]) HasSyncedChecker() cache.DoneChecker {
	return doneChecker{name: "handler of an informer", done: l.synced}
}
