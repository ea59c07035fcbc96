package kubeservice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions/work/v1"
	worklisters "open-cluster-management.io/api/client/work/listers/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// Finalizer is what Run puts on every work, so that a deleted work stays
// until its agent reports it Deleted.
const Finalizer = "work.workwire.io/agent-cleanup"

// uidIndex indexes works by UID: a resource ID on the wire is a work's UID.
const uidIndex = "workwire.io/uid"

// Option configures a Service.
type Option func(*Service)

// WithLogger sets the Service's logger. Default: klog.Background().
func WithLogger(l logr.Logger) Option { return func(s *Service) { s.log = l } }

// Service is a server.Service of ManifestWorks in a kube-apiserver (see the
// package documentation). It is goroutine-safe.
type Service struct {
	client   versioned.Interface
	informer cache.SharedIndexInformer
	lister   worklisters.ManifestWorkLister
	codec    *codec.ManifestBundleCodec
	sourceID string
	log      logr.Logger

	// finalize holds the keys of works that lack Finalizer.
	finalize workqueue.TypedRateLimitingInterface[string]
	marks    statusMarks
}

var (
	_ server.Service      = (*Service)(nil)
	_ server.StatusHasher = (*Service)(nil)
)

// New returns a Service of the works client holds, as informer sees them,
// speaking as sourceID (the server's Config.SourceID). It adds an index and
// event handlers to informer. New does no network I/O; start informer's
// factory, and Run.
func New(client versioned.Interface, informer workinformers.ManifestWorkInformer, sourceID string, opts ...Option) (*Service, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("client is nil"))
	}
	if informer == nil {
		errs = append(errs, errors.New("informer is nil"))
	}
	if sourceID == "" {
		errs = append(errs, errors.New("sourceID is empty"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("kubeservice: %w", errors.Join(errs...))
	}
	s := &Service{
		client:   client,
		informer: informer.Informer(),
		lister:   informer.Lister(),
		codec:    codec.NewManifestBundleCodec(),
		sourceID: sourceID,
		log:      klog.Background(),
		finalize: workqueue.NewTypedRateLimitingQueueWithConfig[string](newBackoffLimiter(finalizeRetry),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubeservice-finalizers"}),
		marks: statusMarks{m: make(map[kubetypes.UID]*statusMark)},
	}
	for _, o := range opts {
		o(s)
	}
	err := s.informer.AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		w, ok := obj.(*workv1.ManifestWork)
		if !ok {
			return nil, nil
		}
		return []string{string(w.UID)}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("kubeservice: index works by UID: %w", err)
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.needsFinalizer(obj) },
		UpdateFunc: func(_, obj any) { s.needsFinalizer(obj) },
		DeleteFunc: func(obj any) {
			if w := workOf(obj); w != nil {
				s.marks.forget(w.UID)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("kubeservice: %w", err)
	}
	return s, nil
}

// finalizeWorkers is how many works Run updates at once: a hub that starts
// with many works lacking the finalizer gets them in parallel.
const finalizeWorkers = 4

// Run puts Finalizer on the works that lack it until ctx ends, once the
// informer has synced. It blocks until ctx ends and its workers have
// stopped; call it once.
func (s *Service) Run(ctx context.Context) {
	stop := context.AfterFunc(ctx, s.finalize.ShutDown)
	defer stop()
	defer s.finalize.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		return
	}
	var wg sync.WaitGroup
	for range finalizeWorkers {
		wg.Go(func() {
			for s.finalizeNext(ctx) {
			}
		})
	}
	wg.Wait()
}

func (s *Service) needsFinalizer(obj any) {
	w := workOf(obj)
	if w == nil || w.DeletionTimestamp != nil || slices.Contains(w.Finalizers, Finalizer) {
		return
	}
	if key, err := cache.MetaNamespaceKeyFunc(w); err == nil {
		s.finalize.Add(key)
	}
}

// finalizeNext adds Finalizer to one queued work; false once the queue is
// shut down.
func (s *Service) finalizeNext(ctx context.Context) bool {
	key, quit := s.finalize.Get()
	if quit {
		return false
	}
	defer s.finalize.Done(key)
	if err := s.addFinalizer(ctx, key); err != nil {
		s.log.V(2).Info("cannot add the finalizer; retrying", "work", key, "err", err)
		s.finalize.AddRateLimited(key)
		return true
	}
	s.finalize.Forget(key)
	return true
}

func (s *Service) addFinalizer(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key of ours: nothing to retry
	}
	w, err := s.lister.ManifestWorks(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.DeletionTimestamp != nil || slices.Contains(w.Finalizers, Finalizer) {
		return nil
	}
	next := w.DeepCopy()
	next.Finalizers = append(next.Finalizers, Finalizer)
	_, err = s.client.WorkV1().ManifestWorks(ns).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err // a Conflict is retried from the informer's newer copy
}

// Get implements server.Service: the spec event of the work whose UID is
// resourceID.
func (s *Service) Get(_ context.Context, resourceID string) (*cloudevents.Event, error) {
	w, err := s.byUID(kubetypes.UID(resourceID))
	if err != nil {
		return nil, err
	}
	return s.specEvent(w)
}

// List implements server.Service: the spec events of the works of
// opts.ClusterName (every work for ""). A work that cannot be encoded is
// reported and left out, so it cannot hold up the others.
func (s *Service) List(_ context.Context, opts server.ListOptions) ([]*cloudevents.Event, error) {
	works, err := s.works(opts.ClusterName)
	if err != nil {
		return nil, err
	}
	out := make([]*cloudevents.Event, 0, len(works))
	for _, w := range works {
		evt, err := s.specEvent(w)
		if err != nil {
			s.log.Error(err, "cannot send a work; left out", "namespace", w.Namespace, "name", w.Name)
			continue
		}
		out = append(out, evt)
	}
	return out, nil
}

// StatusHashes implements server.StatusHasher: the status hash of every
// work of cluster, or none (ask for every status) if no work has a status.
func (s *Service) StatusHashes(_ context.Context, cluster string) ([]types.StatusHash, error) {
	works, err := s.works(cluster)
	if err != nil {
		return nil, err
	}
	return codec.StatusHashes(works)
}

// AcknowledgesSpecs implements server.Acknowledger: a work agent reports a
// status for every generation it applies, so the server sends again a
// generation that goes without one.
func (s *Service) AcknowledgesSpecs() bool { return true }

// HandleStatusUpdate implements server.Service: it writes the status an
// agent reported to the work's status subresource, unless a newer status
// of the work went through first. A status with the Deleted condition
// true, for a work being deleted, removes Finalizer instead: the agent has
// cleaned up. A status of a work that is gone is dropped.
func (s *Service) HandleStatusUpdate(ctx context.Context, evt *cloudevents.Event) error {
	if err := server.RequireStatusUpdate(evt); err != nil {
		return err
	}
	reported, err := generic.Decode(s.codec, evt)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "status event %s: %v", evt.ID(), err)
	}
	seq, hasSeq, err := types.SequenceID(evt)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "status event %s: %v", evt.ID(), err)
	}
	order := generic.StatusOrder{Version: reported.Generation, Sequence: seq, HasSequence: hasSeq}
	mark := s.marks.lock(reported.UID)
	defer mark.mu.Unlock()
	if mark.stale(order) {
		return nil // out of order: a newer status went through
	}
	cur, err := s.byUID(reported.UID)
	if errors.Is(err, server.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.DeletionTimestamp != nil && meta.IsStatusConditionTrue(reported.Status.Conditions, codec.WorkDeleted) {
		err = s.removeFinalizer(ctx, cur)
	} else {
		err = s.writeStatus(ctx, cur, reported.Status)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("status of work %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	mark.record(order)
	return nil
}

func (s *Service) writeStatus(ctx context.Context, cur *workv1.ManifestWork, st workv1.ManifestWorkStatus) error {
	return s.update(ctx, cur, func(w *workv1.ManifestWork) bool {
		w.Status = st
		return true
	}, s.client.WorkV1().ManifestWorks(cur.Namespace).UpdateStatus)
}

func (s *Service) removeFinalizer(ctx context.Context, cur *workv1.ManifestWork) error {
	return s.update(ctx, cur, func(w *workv1.ManifestWork) bool {
		n := len(w.Finalizers)
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == Finalizer })
		return len(w.Finalizers) != n
	}, s.client.WorkV1().ManifestWorks(cur.Namespace).Update)
}

// update writes change of cur with write, and on a conflict again from the
// kube-apiserver's current work. change returns false when it has nothing
// to change.
func (s *Service) update(ctx context.Context, cur *workv1.ManifestWork, change func(*workv1.ManifestWork) bool,
	write func(context.Context, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error)) error {
	works := s.client.WorkV1().ManifestWorks(cur.Namespace)
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			latest, err := works.Get(ctx, cur.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if latest.UID != cur.UID {
				return apierrors.NewNotFound(workv1.Resource("manifestworks"), cur.Name) // another work of the same name
			}
			cur = latest
		}
		first = false
		next := cur.DeepCopy()
		if !change(next) {
			return nil
		}
		_, err := write(ctx, next, metav1.UpdateOptions{})
		return err
	})
}

// RegisterHandler implements server.Service: handler hears of every work
// created, deleted, or changed in what its agent sees (spec, labels,
// annotations, deletion); a change of status or finalizers alone is not
// sent.
func (s *Service) RegisterHandler(handler server.EventHandler) {
	dataType := codec.ManifestBundlesDataType.String()
	report := func(what string, w *workv1.ManifestWork, err error) {
		if err != nil {
			s.log.Error(err, "cannot send a work's change", "change", what, "namespace", w.Namespace, "name", w.Name)
		}
	}
	_, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if w := workOf(obj); w != nil {
				report("create", w, handler.OnCreate(context.Background(), dataType, string(w.UID)))
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, w := workOf(oldObj), workOf(obj)
			if old != nil && w != nil && agentSees(old) != agentSees(w) {
				report("update", w, handler.OnUpdate(context.Background(), dataType, string(w.UID)))
			}
		},
		DeleteFunc: func(obj any) {
			if w := workOf(obj); w != nil {
				report("delete", w, handler.OnDelete(context.Background(), dataType, string(w.UID)))
			}
		},
	})
	if err != nil {
		s.log.Error(err, "cannot register a handler with the works informer")
	}
}

// seen is what of a work its agent sees: a change of it is sent.
type seen struct {
	generation  int64
	deleting    bool
	labels      string
	annotations string
}

func agentSees(w *workv1.ManifestWork) seen {
	return seen{
		generation: w.Generation, deleting: w.DeletionTimestamp != nil,
		labels: labels.Set(w.Labels).String(), annotations: labels.Set(w.Annotations).String(),
	}
}

func (s *Service) specEvent(w *workv1.ManifestWork) (*cloudevents.Event, error) {
	evt, err := s.codec.Encode(s.sourceID, codec.SpecEventType(w), w)
	if err != nil {
		return nil, fmt.Errorf("work %s/%s: %w", w.Namespace, w.Name, err)
	}
	return evt, nil
}

func (s *Service) byUID(uid kubetypes.UID) (*workv1.ManifestWork, error) {
	objs, err := s.informer.GetIndexer().ByIndex(uidIndex, string(uid))
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("work %s: %w", uid, server.ErrNotFound)
	}
	return objs[0].(*workv1.ManifestWork), nil
}

func (s *Service) works(cluster string) ([]*workv1.ManifestWork, error) {
	if cluster == "" {
		return s.lister.List(labels.Everything())
	}
	return s.lister.ManifestWorks(cluster).List(labels.Everything())
}

// workOf is the work an informer event carries, tombstones included.
func workOf(obj any) *workv1.ManifestWork {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	w, _ := obj.(*workv1.ManifestWork)
	return w
}

// statusMarks remember, per work, the newest status written, and serialize
// the writes of one work's statuses.
type statusMarks struct {
	mu sync.Mutex
	m  map[kubetypes.UID]*statusMark
}

type statusMark struct {
	mu      sync.Mutex // held while a status of the work is handled
	written bool
	last    generic.StatusOrder
}

// lock returns uid's mark, locked.
func (m *statusMarks) lock(uid kubetypes.UID) *statusMark {
	m.mu.Lock()
	mark := m.m[uid]
	if mark == nil {
		mark = &statusMark{}
		m.m[uid] = mark
	}
	m.mu.Unlock()
	mark.mu.Lock()
	return mark
}

func (m *statusMarks) forget(uid kubetypes.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, uid)
}

// stale reports whether a status of order o does not replace the last one
// written (generic.StatusOrder.Replaces).
func (k *statusMark) stale(o generic.StatusOrder) bool { return k.written && !o.Replaces(k.last) }

func (k *statusMark) record(o generic.StatusOrder) { k.written, k.last = true, o }
