package hub

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workv1informers "open-cluster-management.io/api/client/work/informers/externalversions/work/v1"
	workv1listers "open-cluster-management.io/api/client/work/listers/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// controller keeps the works it owns as it wants them: it creates the
// missing, updates the changed and deletes the unwanted. It is the
// client-go controller pattern unchanged — informer, lister, event
// handlers, rate-limited workqueue, one reconcile per work — over whatever
// clientset it is given: over events or over a kube-apiserver, the code is
// the same.
type controller struct {
	client versioned.Interface
	lister workv1listers.ManifestWorkLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]

	mu      sync.RWMutex
	desired map[cache.ObjectName]*workv1.ManifestWork
}

func newController(client versioned.Interface, informer workv1informers.ManifestWorkInformer) (*controller, error) {
	c := &controller{
		client: client,
		lister: informer.Lister(),
		synced: informer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "hub-controller"}),
		desired: map[cache.ObjectName]*workv1.ManifestWork{},
	}
	enqueue := func(obj any) {
		if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			c.queue.Add(name)
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: isOurs,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue, // a work we still want is created again
		},
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, err
	}
	return c, nil
}

// isOurs says whether an informer's object is a work this controller owns.
func isOurs(obj any) bool {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	w, ok := obj.(*workv1.ManifestWork)
	return ok && w.Labels[ManagedByLabel] == ManagedBy
}

// want makes works the complete set of works the controller wants, and
// queues every work whose wish changed. It is goroutine-safe.
func (c *controller) want(works []*workv1.ManifestWork) {
	next := make(map[cache.ObjectName]*workv1.ManifestWork, len(works))
	for _, w := range works {
		next[cache.MetaObjectToName(w)] = w
	}
	c.mu.Lock()
	prev := c.desired
	c.desired = next
	c.mu.Unlock()
	for name := range prev {
		c.queue.Add(name)
	}
	for name := range next {
		c.queue.Add(name)
	}
}

func (c *controller) desiredWork(name cache.ObjectName) *workv1.ManifestWork {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.desired[name]
}

// run runs workers until ctx ends, then shuts the queue down and waits for
// them.
func (c *controller) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
}

func (c *controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	err := c.sync(ctx, name)
	switch {
	case err == nil:
		c.queue.Forget(name)
	case apierrors.IsConflict(err):
		// The lister was behind the store: try again with a fresh copy.
		klog.FromContext(ctx).V(4).Info("conflict; retrying", "work", name)
		c.queue.AddRateLimited(name)
	case ctx.Err() == nil:
		utilruntime.HandleErrorWithContext(ctx, err, "reconciling a work failed; retrying", "work", name)
		c.queue.AddRateLimited(name)
	}
	return true
}

// sync makes one work as the controller wants it.
func (c *controller) sync(ctx context.Context, name cache.ObjectName) error {
	want := c.desiredWork(name)
	works := c.client.WorkV1().ManifestWorks(name.Namespace)
	cur, err := c.lister.ManifestWorks(name.Namespace).Get(name.Name)
	switch {
	case apierrors.IsNotFound(err):
		if want == nil {
			return nil
		}
		_, err := works.Create(ctx, want, metav1.CreateOptions{FieldManager: ManagedBy})
		if apierrors.IsAlreadyExists(err) {
			return nil // the informer has not caught up; its add event queues the work again
		}
		return err
	case err != nil:
		return err
	case !isOurs(cur):
		klog.FromContext(ctx).Info("a work of this name is not this controller's; leaving it alone", "work", name)
		return nil
	case cur.DeletionTimestamp != nil:
		// Being deleted: its agent has to confirm before it goes. If we
		// want it again, its delete event queues it and we create it anew.
		return nil
	case want == nil:
		uid := cur.UID
		err := works.Delete(ctx, name.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case cur.Annotations[SpecHashAnnotation] == want.Annotations[SpecHashAnnotation]:
		return nil
	}
	next := cur.DeepCopy()
	next.Spec = want.Spec
	next.Labels = want.Labels
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[SpecHashAnnotation] = want.Annotations[SpecHashAnnotation]
	_, err = works.Update(ctx, next, metav1.UpdateOptions{FieldManager: ManagedBy})
	return err // a Conflict is retried by the queue
}

// works returns what the lister holds of the works the controller wants
// (or wanted, for names no longer wanted), by name.
func (c *controller) works(names []cache.ObjectName) map[cache.ObjectName]*workv1.ManifestWork {
	out := make(map[cache.ObjectName]*workv1.ManifestWork, len(names))
	for _, name := range names {
		if w, err := c.lister.ManifestWorks(name.Namespace).Get(name.Name); err == nil {
			out[name] = w
		}
	}
	return out
}

// pollInterval is how often Run looks at the lister while it waits.
const pollInterval = 20 * time.Millisecond
