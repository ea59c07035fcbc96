// Package informer serves client-go's SharedIndexInformer from a store
// itself: its cache is the store, so a holder keeps one map of its objects,
// not two, and its handlers get the stored objects as the store changes
// them, each handler on its own goroutine, in the store's order.
//
// What it keeps of client-go's informer: handlers added before Run get the
// objects then stored as Adds marked as the initial list when Run starts,
// handlers added later get them when added, then every change; a
// registration has synced once its handler took its initial list; each
// handler's resync period (at least a second) replays the objects as
// Updates; indexers, before or after Run. What it leaves out: a transform
// (the store's objects are shared with the rest of the holder; SetTransform
// refuses one) and writes to the cache (the store is written through the
// holder's clientset), and it never relists, so a handler never gets a
// cache.DeletedFinalStateUnknown.
package informer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/workwire/sdk-go/internal/store"
)

// minResync is the shortest resync period, as client-go's.
const minResync = time.Second

// Informer is a cache.SharedIndexInformer over a store. It is
// goroutine-safe.
type Informer[T store.Object] struct {
	st        *store.Store[T]
	namespace string        // "" for all
	resync    time.Duration // handlers' default
	name      string        // what HasSyncedChecker names

	mu        sync.Mutex
	listeners map[*listener[T]]struct{}
	indexers  cache.Indexers // the namespace index and those added
	started   bool
	stopped   bool
	synced    chan struct{} // closed when Run starts
	wg        sync.WaitGroup
}

var _ cache.SharedIndexInformer = (*Informer[store.Object])(nil)

// New returns an informer of the objects of namespace ("" for all) in st,
// whose handlers resync every resync unless they ask otherwise (0: never).
// name says what it informs of, for HasSyncedChecker.
func New[T store.Object](st *store.Store[T], namespace string, resync time.Duration, name string) *Informer[T] {
	return &Informer[T]{
		st:        st,
		namespace: namespace,
		resync:    resync,
		name:      name,
		listeners: make(map[*listener[T]]struct{}),
		indexers:  cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		synced:    make(chan struct{}),
	}
}

// Run starts the handlers added so far and runs until stop is closed,
// then stops them and waits for them. A second Run returns at once.
func (inf *Informer[T]) Run(stop <-chan struct{}) {
	inf.RunWithContext(wait.ContextForChannel(stop))
}

// RunWithContext is Run until ctx ends.
func (inf *Informer[T]) RunWithContext(ctx context.Context) {
	inf.mu.Lock()
	if inf.started || inf.stopped {
		inf.mu.Unlock()
		return
	}
	inf.started = true
	for l := range inf.listeners {
		l.start(inf)
	}
	close(inf.synced)
	inf.mu.Unlock()

	if detectMutations {
		inf.detectMutations(ctx)
	}
	<-ctx.Done()
	inf.mu.Lock()
	inf.stopped = true
	for l := range inf.listeners {
		l.stop()
	}
	inf.mu.Unlock()
	inf.wg.Wait()
}

// detectMutations is client-go's own switch of its cache mutation
// detector, read as client-go reads it.
var detectMutations, _ = strconv.ParseBool(os.Getenv("KUBE_CACHE_MUTATION_DETECTOR"))

// detectMutations runs client-go's cache mutation detector over every
// object the store holds from now on, until ctx ends: what a handler or a
// lister's caller changes in place would reach what the holder publishes.
func (inf *Informer[T]) detectMutations(ctx context.Context) {
	var zero T
	d := cache.NewCacheMutationDetector(fmt.Sprintf("%T", zero))
	inf.st.Inspect(d)
	inf.wg.Go(func() { d.Run(ctx.Done()) }) // panics on a mutation
}

// AddEventHandler adds a handler with the informer's resync period.
func (inf *Informer[T]) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return inf.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds a handler that resyncs every
// period (0: never).
func (inf *Informer[T]) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, period time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return inf.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &period})
}

// AddEventHandlerWithOptions adds a handler. Of the options it takes the
// resync period; its logger has nothing to log.
func (inf *Informer[T]) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, errors.New("informer: nil handler")
	}
	resync := inf.resync
	if o.ResyncPeriod != nil {
		resync = *o.ResyncPeriod
	}
	if resync > 0 && resync < minResync {
		resync = minResync
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.stopped {
		return nil, fmt.Errorf("informer of %s: handler not added: the informer has stopped", inf.name)
	}
	l := newListener[T](h, resync)
	inf.listeners[l] = struct{}{}
	if inf.started {
		l.start(inf)
	}
	return l, nil
}

// RemoveEventHandler stops a handler's deliveries. Removing one twice, or
// one of another informer, does nothing.
func (inf *Informer[T]) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	l, ok := r.(*listener[T])
	if !ok {
		return fmt.Errorf("informer of %s: %T is not one of its registrations", inf.name, r)
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if _, ok := inf.listeners[l]; ok {
		delete(inf.listeners, l)
		l.stop()
	}
	return nil
}

// GetStore returns the cache: a read-only view of the store.
func (inf *Informer[T]) GetStore() cache.Store { return indexer[T]{inf} }

// GetIndexer returns the cache: a read-only view of the store, with its
// indexes.
func (inf *Informer[T]) GetIndexer() cache.Indexer { return indexer[T]{inf} }

// AddIndexers adds indexes to the store, before or after Run.
func (inf *Informer[T]) AddIndexers(add cache.Indexers) error {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.stopped {
		return fmt.Errorf("informer of %s: indexers not added: the informer has stopped", inf.name)
	}
	fns := make(map[string]store.IndexFunc[T], len(add))
	for name, fn := range add {
		if _, ok := inf.indexers[name]; ok {
			return fmt.Errorf("informer of %s: indexer conflict: %s", inf.name, name)
		}
		fns[name] = func(obj T) ([]string, error) { return fn(obj) }
	}
	if err := inf.st.AddIndexes(fns); err != nil {
		return fmt.Errorf("informer of %s: %w", inf.name, err)
	}
	for name, fn := range add {
		inf.indexers[name] = fn
	}
	return nil
}

// GetController returns the informer as a cache.Controller.
func (inf *Informer[T]) GetController() cache.Controller { return controller[T]{inf} }

// HasSynced reports whether Run started: the store is the cache, whole
// from the start.
func (inf *Informer[T]) HasSynced() bool { return isClosed(inf.synced) }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// HasSyncedChecker returns what is done once HasSynced.
func (inf *Informer[T]) HasSyncedChecker() cache.DoneChecker {
	return doneChecker{name: "informer of " + inf.name, done: inf.synced}
}

// LastSyncResourceVersion returns the store's resourceVersion.
func (inf *Informer[T]) LastSyncResourceVersion() string {
	return strconv.FormatUint(inf.st.ResourceVersion(), 10)
}

// SetWatchErrorHandler has nothing to do: no watch can fail.
func (inf *Informer[T]) SetWatchErrorHandler(cache.WatchErrorHandler) error { return nil }

// SetWatchErrorHandlerWithContext has nothing to do: no watch can fail.
func (inf *Informer[T]) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return nil
}

// SetTransform refuses a transform: the cache is the store, whose objects
// the holder shares. nil, which informer factories pass when they have
// none, is accepted.
func (inf *Informer[T]) SetTransform(f cache.TransformFunc) error {
	if f != nil {
		return fmt.Errorf("informer of %s: a transform is not supported: its cache is the holder's store", inf.name)
	}
	return nil
}

// IsStopped reports whether Run has returned or is returning.
func (inf *Informer[T]) IsStopped() bool {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	return inf.stopped
}

type controller[T store.Object] struct{ inf *Informer[T] }

func (c controller[T]) Run(stop <-chan struct{})            { c.inf.Run(stop) }
func (c controller[T]) RunWithContext(ctx context.Context)  { c.inf.RunWithContext(ctx) }
func (c controller[T]) HasSynced() bool                     { return c.inf.HasSynced() }
func (c controller[T]) HasSyncedChecker() cache.DoneChecker { return c.inf.HasSyncedChecker() }
func (c controller[T]) LastSyncResourceVersion() string     { return c.inf.LastSyncResourceVersion() }

type doneChecker struct {
	name string
	done <-chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }
