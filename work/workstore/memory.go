package workstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
)

// Memory is a Store in memory: the database of examples and tests, which
// nothing outlives. It behaves as work/pgstore does (storetest checks
// both), for one process.
type Memory struct {
	mu       sync.Mutex
	revision int64
	byUID    map[string]*memRow
	byName   map[Position]string // cluster and name to UID
	watchers map[*memWatcher]struct{}
}

type memRow struct {
	w      *workv1.ManifestWork // never changed in place
	status generic.StatusOrder  // of the status it holds
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{byUID: map[string]*memRow{}, byName: map[Position]string{}, watchers: map[*memWatcher]struct{}{}}
}

var _ Store = (*Memory)(nil)

func (m *Memory) nextRevision() string {
	m.revision++
	return strconv.FormatInt(m.revision, 10)
}

// notify queues c for every watcher; m.mu is held.
func (m *Memory) notify(op Op, w *workv1.ManifestWork) {
	rev, _ := strconv.ParseInt(w.ResourceVersion, 10, 64)
	c := Change{Op: op, UID: string(w.UID), Cluster: w.Namespace, Revision: rev}
	for wt := range m.watchers {
		wt.push(c)
	}
}

// stored is what a Store keeps of a work a writer gives it.
func stored(w *workv1.ManifestWork) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace,
			Labels: copyMap(w.Labels), Annotations: copyMap(w.Annotations)},
		Spec: *w.Spec.DeepCopy(),
	}
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil // as a database keeps an empty map: not at all
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, w *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	if err := CheckWork(w); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := Position{Cluster: w.Namespace, Name: w.Name}
	if _, ok := m.byName[key]; ok {
		return nil, apierrors.NewAlreadyExists(Resource, w.Name)
	}
	next := stored(w)
	next.UID = kubetypes.UID(uuid.NewString())
	next.Generation = 1
	next.CreationTimestamp = metav1.Now()
	next.ResourceVersion = m.nextRevision()
	m.byUID[string(next.UID)] = &memRow{w: next}
	m.byName[key] = string(next.UID)
	m.notify(Created, next)
	return next.DeepCopy(), nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, cluster, name string) (*workv1.ManifestWork, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.byName[Position{Cluster: cluster, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(Resource, name)
	}
	return m.byUID[uid].w.DeepCopy(), nil
}

// GetByUID implements Store.
func (m *Memory) GetByUID(_ context.Context, uid string) (*workv1.ManifestWork, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byUID[uid]
	if !ok {
		return nil, apierrors.NewNotFound(Resource, uid)
	}
	return r.w.DeepCopy(), nil
}

// Update implements Store.
func (m *Memory) Update(_ context.Context, w *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	if err := CheckWork(w); err != nil {
		return nil, err
	}
	if _, err := ParseResourceVersion(w.ResourceVersion); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.byName[Position{Cluster: w.Namespace, Name: w.Name}]
	if !ok {
		return nil, apierrors.NewNotFound(Resource, w.Name)
	}
	r := m.byUID[uid]
	cur := r.w
	if w.ResourceVersion != cur.ResourceVersion || w.UID != "" && w.UID != cur.UID {
		return nil, NewConflict(w.Name)
	}
	next := stored(w)
	next.UID, next.Generation, next.CreationTimestamp = cur.UID, cur.Generation, cur.CreationTimestamp
	next.DeletionTimestamp, next.Status = cur.DeletionTimestamp, cur.Status
	op := StatusChanged
	if !SameSpec(&next.Spec, &cur.Spec) {
		if cur.DeletionTimestamp != nil {
			return nil, NewDeletingConflict(w.Name)
		}
		next.Generation++
		op = SpecChanged
	}
	if !maps.Equal(next.Labels, cur.Labels) || !maps.Equal(next.Annotations, cur.Annotations) {
		op = SpecChanged
	}
	next.ResourceVersion = m.nextRevision()
	r.w = next
	m.notify(op, next)
	return next.DeepCopy(), nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, cluster, name string) (*workv1.ManifestWork, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.byName[Position{Cluster: cluster, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(Resource, name)
	}
	r := m.byUID[uid]
	if r.w.DeletionTimestamp != nil {
		return r.w.DeepCopy(), nil
	}
	next := r.w.DeepCopy()
	now := metav1.Now()
	next.DeletionTimestamp = &now
	next.ResourceVersion = m.nextRevision()
	r.w = next
	m.notify(SpecChanged, next)
	return next.DeepCopy(), nil
}

// ApplyStatus implements Store.
func (m *Memory) ApplyStatus(_ context.Context, uid string, order generic.StatusOrder, status workv1.ManifestWorkStatus) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byUID[uid]
	if !ok {
		return false, nil
	}
	if r.w.DeletionTimestamp != nil && meta.IsStatusConditionTrue(status.Conditions, codec.WorkDeleted) {
		delete(m.byUID, uid)
		delete(m.byName, Position{Cluster: r.w.Namespace, Name: r.w.Name})
		m.notify(Deleted, r.w)
		return true, nil
	}
	if !order.Replaces(r.status) {
		return false, nil
	}
	next := r.w.DeepCopy()
	next.Status = *status.DeepCopy()
	next.ResourceVersion = m.nextRevision()
	r.w, r.status = next, order
	m.notify(StatusChanged, next)
	return true, nil
}

// List implements Store.
func (m *Memory) List(_ context.Context, opts ListOptions) (*workv1.ManifestWorkList, error) {
	if err := CheckSelector(opts.Selector); err != nil {
		return nil, err
	}
	if err := CheckLimit(opts.Limit); err != nil {
		return nil, err
	}
	var after *Position
	if opts.Continue != "" {
		p, err := ParseContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		after = &p
	}
	sel := opts.Selector
	if sel == nil {
		sel = labels.Everything()
	}
	m.mu.Lock()
	var works []*workv1.ManifestWork
	for key, uid := range m.byName {
		if opts.Cluster != "" && key.Cluster != opts.Cluster || after != nil && !after.before(key) {
			continue
		}
		if w := m.byUID[uid].w; sel.Matches(labels.Set(w.Labels)) {
			works = append(works, w)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(works, func(a, b *workv1.ManifestWork) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	list := &workv1.ManifestWorkList{TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWorkList"}}
	if opts.Limit > 0 && len(works) > opts.Limit {
		works = works[:opts.Limit]
		last := works[len(works)-1]
		list.Continue = Position{Cluster: last.Namespace, Name: last.Name}.Continue()
	}
	list.Items = make([]workv1.ManifestWork, len(works))
	for i, w := range works {
		list.Items[i] = *w.DeepCopy()
	}
	return list, nil
}

// before reports whether p comes before q, by cluster, then name.
func (p Position) before(q Position) bool {
	return p.Cluster < q.Cluster || p.Cluster == q.Cluster && p.Name < q.Name
}

// Watch implements Store.
func (m *Memory) Watch(ctx context.Context, handle func(Change), ready chan<- struct{}) error {
	wt := &memWatcher{}
	wt.cond = sync.NewCond(&wt.mu)
	m.mu.Lock()
	m.watchers[wt] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.watchers, wt)
		m.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, wt.close)
	defer stop()
	if ready != nil {
		close(ready)
	}
	for {
		c, ok := wt.pop()
		if !ok {
			return nil
		}
		handle(c)
	}
}

// memWatcher queues the changes a Watch has yet to tell.
type memWatcher struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []Change
	closed bool
}

func (w *memWatcher) push(c Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, c)
	w.cond.Signal()
}

func (w *memWatcher) pop() (Change, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) == 0 && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return Change{}, false
	}
	c := w.queue[0]
	w.queue = w.queue[1:]
	return c, true
}

func (w *memWatcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.cond.Broadcast()
}
