// Package store is an in-memory object store with the semantics a
// Kubernetes client expects of a kube-apiserver: a store-wide, strictly
// increasing resourceVersion; Conflict on a stale update; List with
// selectors and Limit/Continue paging over a consistent snapshot; and Watch
// that resumes from a resourceVersion through a bounded history, with
// bookmarks so a watch limited to a few objects resumes from a recent one,
// so a SharedInformer syncs once and never relists in a loop.
//
// Stored objects are immutable: writers hand in new objects (Create's and
// Put's argument, what an Update or Modify function returns), and no code
// changes an object once it is stored — not the store, which replaces map
// entries and never writes into a stored object, and not its callers, who
// get copies (Get, List, Create, Update, Delete, watch events) or, from
// Peek, PeekUID, Range, Remove and a List or Watch with Stored set, the
// stored object itself under the rule that they must not change it. Update functions get a copy. (package
// work's hub and agent keep to it: they change only what Update functions
// get, and hand the stored snapshots they keep to their publisher, which
// only encodes them.) That invariant is what
// lets the store copy outside its lock: the copies callers and watchers get
// are made after the write lock is released (for watchers, by each watch's
// own goroutine, once per event for all of them), and the copy an Update
// function changes is made before the lock is taken (see lockWithCopy).
package store

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Object is what a Store holds.
type Object interface {
	metav1.Object
	runtime.Object
}

// Defaults.
const (
	// DefaultHistory is how many recent events the store keeps for watches
	// that resume from an older resourceVersion.
	DefaultHistory = 4096
	// snapshotTTL is how long a paged List's snapshot is kept for its
	// continue token (etcd keeps compacted revisions for minutes, too).
	snapshotTTL = time.Minute
	// maxPending bounds the events a watcher may have undelivered; beyond
	// it the watch is closed and its client resumes from history.
	maxPending = 100000
	// DefaultBookmarkInterval is how often a watch that allows bookmarks
	// gets one carrying the store's resourceVersion, about what a
	// kube-apiserver does.
	DefaultBookmarkInterval = time.Minute
	// optimisticCopies is how many times a write copies the object it
	// changes before taking the write lock, and finds it changed meanwhile,
	// before it copies under the lock.
	optimisticCopies = 3
)

// ErrNoChange returned by an Update function leaves the object as it is.
var ErrNoChange = errors.New("no change")

// ErrChanged is Swap's error for an object replaced since it was read.
var ErrChanged = errors.New("changed since it was read")

// Store is goroutine-safe.
type Store[T Object] struct {
	gr   schema.GroupResource
	copy func(T) T // for callers: a full deep copy
	// share copies for the store's own use and for watch consumers; it may
	// share parts nobody modifies in place (see New).
	share func(T) T

	mu    sync.RWMutex
	rv    uint64
	items map[string]map[string]T // namespace → name → object
	count int
	byUID map[kubetypes.UID]T // the stored object itself, not its name: slots half the size
	// history is a ring of the last events, at most hmax. It grows as
	// events come (a store of a few objects, as an agent's is, needs no
	// room for thousands) and counts as full while it grows: its oldest
	// event is at 0 and hnext stays 0 until it wraps.
	history    []Event[T]
	hmax       int
	hnext      int // where the next event goes once the ring is at hmax
	watchers   map[*watcher[T]]struct{}
	draining   map[*watcher[T]]struct{} // ended watches still delivering what they queued
	snapshots  map[string]*snapshot[T]
	feeds      map[*Feed[T]]struct{}
	inspectors []Inspector
	indexes    map[string]*index[T] // by name; nil until AddIndexes
	interned   *interner            // labels and annotations shared by stored objects
	nextSnap   uint64
	closed     bool // no new watches
	// bookmarkInterval is how often watches that allow bookmarks get one.
	bookmarkInterval time.Duration
}

// Event is one change to the store.
type Event[T Object] struct {
	Type   watch.EventType
	Object T // the object after the change (for Deleted, as it was removed)
	Prev   T // the object before a modification; zero otherwise
	RV     uint64
}

// New returns an empty store. gr names the resource in errors; copy deep
// copies an object, for what Get and List return. share, if not nil, copies
// an object for watch events and for Update functions, and may share with
// the original what nobody modifies in place (large byte slices), which
// halves the memory an informer's cache costs; nil means copy.
func New[T Object](gr schema.GroupResource, copy, share func(T) T, history int) *Store[T] {
	if history <= 0 {
		history = DefaultHistory
	}
	if share == nil {
		share = copy
	}
	return &Store[T]{
		gr:        gr,
		copy:      copy,
		share:     share,
		items:     make(map[string]map[string]T),
		byUID:     make(map[kubetypes.UID]T),
		interned:  newInterner(),
		hmax:      history,
		watchers:  make(map[*watcher[T]]struct{}),
		draining:  make(map[*watcher[T]]struct{}),
		snapshots: make(map[string]*snapshot[T]),
		feeds:     make(map[*Feed[T]]struct{}),

		bookmarkInterval: DefaultBookmarkInterval,
	}
}

// SetBookmarkInterval sets how often a watch that allows bookmarks gets
// one; d <= 0 restores DefaultBookmarkInterval. It applies to watches
// started afterwards. It is goroutine-safe.
func (s *Store[T]) SetBookmarkInterval(d time.Duration) {
	if d <= 0 {
		d = DefaultBookmarkInterval
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bookmarkInterval = d
}

// get returns the stored object. The caller holds s.mu.
func (s *Store[T]) get(namespace, name string) (T, bool) {
	obj, ok := s.items[namespace][name]
	return obj, ok
}

// put stores obj. The caller holds s.mu for writing.
func (s *Store[T]) put(obj T) {
	obj.SetLabels(s.interned.intern(obj.GetLabels()))
	obj.SetAnnotations(s.interned.intern(obj.GetAnnotations()))
	ns := s.items[obj.GetNamespace()]
	if ns == nil {
		ns = make(map[string]T)
		s.items[obj.GetNamespace()] = ns
	}
	old, had := ns[obj.GetName()]
	if !had {
		s.count++
	}
	ns[obj.GetName()] = obj
	if had {
		s.removeFromIndexes(old)
	}
	s.addToIndexes(obj)
	if uid := obj.GetUID(); uid != "" {
		s.byUID[uid] = obj
	}
}

// remove drops the object. The caller holds s.mu for writing.
func (s *Store[T]) remove(namespace, name string) {
	ns := s.items[namespace]
	old, ok := ns[name]
	if !ok {
		return
	}
	s.count--
	delete(ns, name)
	s.removeFromIndexes(old)
	if len(ns) == 0 {
		delete(s.items, namespace)
	}
}

// each calls fn on every stored object of namespace ("" for all) until fn
// returns false, and reports whether it ran to the end. The caller holds
// s.mu.
func (s *Store[T]) each(namespace string, fn func(T) bool) bool {
	if namespace != "" {
		for _, obj := range s.items[namespace] {
			if !fn(obj) {
				return false
			}
		}
		return true
	}
	for _, ns := range s.items {
		for _, obj := range ns {
			if !fn(obj) {
				return false
			}
		}
	}
	return true
}

// ResourceVersion returns the store's current resourceVersion.
func (s *Store[T]) ResourceVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// Get returns a copy of the object.
func (s *Store[T]) Get(namespace, name string) (T, error) {
	s.mu.RLock()
	obj, ok := s.get(namespace, name)
	s.mu.RUnlock()
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(s.gr, name)
	}
	return s.copy(obj), nil
}

// Lookup is Peek with the NotFound error of a missing object.
func (s *Store[T]) Lookup(namespace, name string) (T, error) {
	if obj, ok := s.Peek(namespace, name); ok {
		return obj, nil
	}
	var zero T
	return zero, apierrors.NewNotFound(s.gr, name)
}

// Peek returns the stored object itself, or false. The caller must not
// modify it.
func (s *Store[T]) Peek(namespace, name string) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.get(namespace, name)
}

// PeekUID returns the stored object with uid itself, or false. The caller
// must not modify it.
func (s *Store[T]) PeekUID(uid kubetypes.UID) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.byUID[uid]
	return obj, ok
}

// Range calls fn on every stored object of namespace ("" for all) until fn
// returns false. fn must not modify the objects or call into the store.
func (s *Store[T]) Range(namespace string, fn func(T) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.each(namespace, fn)
}

// Len returns how many objects the store holds.
func (s *Store[T]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}

// Create stores obj, which the store owns from now on, with the next
// resourceVersion. It fails with AlreadyExists if the name or the UID is
// taken. It returns a copy of what it stored.
func (s *Store[T]) Create(obj T) (T, error) {
	stored, err := s.create(obj)
	if err != nil {
		return stored, err
	}
	return s.copy(stored), nil // stored is immutable: no lock needed
}

// Put is Create for callers that do not need the result: it copies
// nothing.
func (s *Store[T]) Put(obj T) error {
	_, err := s.create(obj)
	return err
}

func (s *Store[T]) create(obj T) (T, error) {
	var zero T
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.get(obj.GetNamespace(), obj.GetName()); taken {
		return zero, apierrors.NewAlreadyExists(s.gr, obj.GetName())
	}
	if uid := obj.GetUID(); uid != "" {
		if _, taken := s.byUID[uid]; taken {
			return zero, apierrors.NewAlreadyExists(s.gr, obj.GetName())
		}
	}
	s.rv++
	obj.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	s.put(obj)
	s.record(Event[T]{Type: watch.Added, Object: obj, RV: s.rv})
	return obj, nil
}

// Update replaces the object with what fn returns. fn gets a copy (New's
// share) of the current object and runs under the store's lock, so no
// write can come between its read and its write: it must be quick and must
// not call into the store. fn returning ErrNoChange leaves the object as it
// is (and Update returns a copy of it); another error is returned as it is.
// A missing object is NotFound. The name, namespace and UID cannot change.
// The store owns what fn returns.
func (s *Store[T]) Update(namespace, name string, fn func(cur T) (T, error)) (T, error) {
	stored, err := s.update(namespace, name, fn)
	if err != nil {
		return stored, err
	}
	return s.copy(stored), nil // stored is immutable: no lock needed
}

// Modify is Update for callers that do not need the result: it copies
// nothing but what fn gets.
func (s *Store[T]) Modify(namespace, name string, fn func(cur T) (T, error)) error {
	_, err := s.update(namespace, name, fn)
	return err
}

// Swap stores next in place of cur, the stored object the caller read
// (Peek, Lookup, PeekUID) and made next from, if the store still holds cur
// itself: stored objects never change in place, so that compares versions,
// and the caller builds next outside the store's lock. next must be a new
// object — a shallow copy of cur with a field replaced, say, sharing the
// rest, which is immutable too — so a write that changes one part of an
// object costs no deep copy. It returns the stored result, which the
// caller must not change either; an error wrapping ErrChanged if cur was
// replaced meanwhile (read it again and retry), NotFound if it is gone.
func (s *Store[T]) Swap(cur, next T) (T, error) {
	var zero T
	namespace, name := cur.GetNamespace(), cur.GetName()
	if any(next) == any(cur) {
		return zero, apierrors.NewInternalError(fmt.Errorf("%s %q: Swap got the stored object as the new one", s.gr, name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.get(namespace, name)
	switch {
	case !ok:
		return zero, apierrors.NewNotFound(s.gr, name)
	case any(stored) != any(cur):
		return zero, fmt.Errorf("%s %q: %w", s.gr, name, ErrChanged)
	}
	return s.write(cur, name, namespace, next, nil)
}

func (s *Store[T]) update(namespace, name string, fn func(cur T) (T, error)) (T, error) {
	var zero T
	cur, mine, ok := s.lockWithCopy(namespace, name)
	if !ok {
		return zero, apierrors.NewNotFound(s.gr, name)
	}
	defer s.mu.Unlock()
	next, err := fn(mine)
	return s.write(cur, name, namespace, next, err)
}

// write stores next in place of cur, unless err says otherwise. The caller
// holds s.mu for writing.
func (s *Store[T]) write(cur T, name, namespace string, next T, err error) (T, error) {
	var zero T
	if errors.Is(err, ErrNoChange) {
		return cur, nil
	}
	if err != nil {
		return zero, err
	}
	if next.GetName() != name || next.GetNamespace() != namespace || next.GetUID() != cur.GetUID() {
		return zero, apierrors.NewBadRequest(fmt.Sprintf("%s %q: name, namespace and uid cannot change", s.gr, name))
	}
	s.rv++
	next.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	s.put(next)
	s.record(Event[T]{Type: watch.Modified, Object: next, Prev: cur, RV: s.rv})
	return next, nil
}

// Delete removes the object. check, if not nil, sees the current object
// first and may refuse with an error. It returns a copy of what it removed.
func (s *Store[T]) Delete(namespace, name string, check func(cur T) error) (T, error) {
	gone, err := s.delete(namespace, name, check)
	if err != nil {
		return gone, err
	}
	return s.copy(gone), nil // gone is immutable (the history holds it)
}

// Remove is Delete without the copy: it returns the removed object itself,
// as the history and the watches hold it. The caller must not modify it.
func (s *Store[T]) Remove(namespace, name string, check func(cur T) error) (T, error) {
	return s.delete(namespace, name, check)
}

func (s *Store[T]) delete(namespace, name string, check func(cur T) error) (T, error) {
	var zero T
	cur, gone, ok := s.lockWithCopy(namespace, name)
	if !ok {
		return zero, apierrors.NewNotFound(s.gr, name)
	}
	defer s.mu.Unlock()
	if check != nil {
		if err := check(cur); err != nil {
			return zero, err
		}
	}
	s.rv++
	// The deleted object carries the deletion's resourceVersion, as the
	// kube-apiserver's watch does.
	gone.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	s.remove(namespace, name)
	delete(s.byUID, cur.GetUID())
	s.record(Event[T]{Type: watch.Deleted, Object: gone, RV: s.rv})
	return gone, nil
}

// lockWithCopy takes s.mu for writing and returns the stored object named
// namespace/name and a copy of it (New's share) for the caller to change.
// If there is no such object, ok is false and s.mu is not held.
//
// The copy is made before the write lock is taken, so writers do not wait
// for each other's copies: stored objects are immutable, and every write
// gives the object a new resourceVersion, so an object whose
// resourceVersion is unchanged under the lock is the one copied. If other
// writers change it in between optimisticCopies times, it copies under the
// lock, so a write always makes progress.
func (s *Store[T]) lockWithCopy(namespace, name string) (cur, mine T, ok bool) {
	for range optimisticCopies {
		s.mu.RLock()
		cur, ok = s.get(namespace, name)
		s.mu.RUnlock()
		if !ok {
			return cur, mine, false
		}
		mine = s.share(cur)
		s.mu.Lock()
		if now, found := s.get(namespace, name); found && now.GetResourceVersion() == cur.GetResourceVersion() {
			return now, mine, true
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	if cur, ok = s.get(namespace, name); !ok {
		s.mu.Unlock()
		return cur, mine, false
	}
	return cur, s.share(cur), true
}

// record appends ev to the history and hands it to the feeds, the
// inspectors and the watchers. The caller holds s.mu for writing.
func (s *Store[T]) record(ev Event[T]) {
	if len(s.history) < s.hmax {
		s.history = append(s.history, ev)
	} else {
		s.history[s.hnext] = ev
		s.hnext = (s.hnext + 1) % len(s.history)
	}
	for f := range s.feeds {
		f.push(ev)
	}
	if ev.Type != watch.Deleted {
		for _, ins := range s.inspectors {
			ins.AddObject(ev.Object)
		}
	}
	if len(s.watchers) == 0 {
		return
	}
	// One copy per event for all watchers that want one, made by the first
	// watcher goroutine that delivers it, not here under the write lock:
	// a watch consumer may change what it gets, so the store's own object
	// stays out of its reach — unless it watches the stored objects
	// (WatchOptions.Stored) and promised not to.
	var shared, stored *sharedObject[T]
	for w := range s.watchers {
		if !w.offer(ev, &shared, &stored) {
			delete(s.watchers, w)
			s.draining[w] = struct{}{}
		}
	}
}

// oldestRV returns the resourceVersion of the oldest event in the history,
// 0 if it is empty.
func (s *Store[T]) oldestRV() uint64 {
	if len(s.history) == 0 {
		return 0
	}
	return s.history[s.hnext].RV
}

// ListOptions selects objects for List.
type ListOptions[T Object] struct {
	Namespace string       // "" for all
	Match     func(T) bool // nil matches everything
	Limit     int64        // 0 for no limit
	Continue  string       // a token from a previous List with the same options
	// Stored returns the stored objects themselves instead of copies (see
	// WatchOptions.Stored).
	Stored bool
}

// ListResult is one page of a List.
type ListResult[T Object] struct {
	Items              []T // copies, or with ListOptions.Stored the stored objects
	ResourceVersion    uint64
	Continue           string
	RemainingItemCount *int64
}

type snapshot[T Object] struct {
	items   []T // sorted by key; stored objects, not copies
	rv      uint64
	expires time.Time
}

type continueToken struct {
	Snapshot string `json:"s"`
	Offset   int    `json:"o"`
}

// List returns the matching objects sorted by namespace and name. With a
// Limit it returns a page and a continue token; every page of one List
// comes from the snapshot of its first page and carries its
// resourceVersion. A token older than a minute is Expired (410), as the
// kube-apiserver answers a compacted continue.
func (s *Store[T]) List(o ListOptions[T]) (ListResult[T], error) {
	var snap *snapshot[T]
	offset := 0
	if o.Continue != "" {
		tok, err := decodeToken(o.Continue)
		if err != nil {
			return ListResult[T]{}, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		s.mu.Lock()
		s.sweepSnapshots()
		snap = s.snapshots[tok.Snapshot]
		s.mu.Unlock()
		if snap == nil {
			return ListResult[T]{}, apierrors.NewResourceExpired("the continue token has expired; list again without it")
		}
		if tok.Offset < 0 || tok.Offset > len(snap.items) {
			return ListResult[T]{}, apierrors.NewBadRequest("invalid continue token: offset out of range")
		}
		offset = tok.Offset
	} else {
		snap = s.snapshot(o.Namespace, o.Match)
	}
	end := len(snap.items)
	res := ListResult[T]{ResourceVersion: snap.rv}
	if o.Limit > 0 && int64(end-offset) > o.Limit {
		end = offset + int(o.Limit)
		id := s.keepSnapshot(snap)
		res.Continue = encodeToken(continueToken{Snapshot: id, Offset: end})
		remaining := int64(len(snap.items) - end)
		res.RemainingItemCount = &remaining
	}
	res.Items = make([]T, 0, end-offset)
	if o.Stored {
		res.Items = append(res.Items, snap.items[offset:end]...)
		return res, nil
	}
	for _, obj := range snap.items[offset:end] {
		res.Items = append(res.Items, s.copy(obj))
	}
	return res, nil
}

func (s *Store[T]) snapshot(namespace string, match func(T) bool) *snapshot[T] {
	s.mu.RLock()
	size := s.count
	if namespace != "" {
		size = len(s.items[namespace])
	}
	snap := &snapshot[T]{rv: s.rv, items: make([]T, 0, size)}
	s.each(namespace, func(obj T) bool {
		if match == nil || match(obj) {
			snap.items = append(snap.items, obj)
		}
		return true
	})
	s.mu.RUnlock()
	slices.SortFunc(snap.items, byKey)
	return snap
}

// byKey orders objects by namespace, then name.
func byKey[T Object](a, b T) int {
	if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}

func (s *Store[T]) keepSnapshot(snap *snapshot[T]) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, kept := range s.snapshots {
		if kept == snap {
			return id
		}
	}
	s.sweepSnapshots()
	s.nextSnap++
	id := strconv.FormatUint(s.nextSnap, 36) + "." + strconv.FormatUint(snap.rv, 36)
	snap.expires = time.Now().Add(snapshotTTL)
	s.snapshots[id] = snap
	return id
}

// sweepSnapshots drops expired snapshots. The caller holds s.mu.
func (s *Store[T]) sweepSnapshots() {
	now := time.Now()
	for id, snap := range s.snapshots {
		if now.After(snap.expires) {
			delete(s.snapshots, id)
		}
	}
}

func encodeToken(t continueToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, err
	}
	err = json.Unmarshal(b, &t)
	return t, err
}
