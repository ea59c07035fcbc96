package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1listers "open-cluster-management.io/api/client/work/listers/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/work"
)

// Defaults of Config.
const (
	// DefaultStatusUpdateFrequency is how often the agent refreshes the
	// status feedback of every work (OCM's work agent's --status-update-frequency).
	DefaultStatusUpdateFrequency = 30 * time.Second
	// DefaultWorkers is how many works the agent reconciles at once.
	DefaultWorkers = 4
)

// Finalizer is the finalizer the agent holds on every work until it has
// deleted (or orphaned) the work's resources.
const Finalizer = "workwire.io/work-agent-cleanup"

// FieldManager is the field manager of the agent's writes to the cluster,
// and of server-side apply unless the work names another.
const FieldManager = "workwire-agent"

// settleInterval is how soon the agent looks at a work again while its
// status feedback keeps changing (a rollout in progress), instead of
// waiting a whole status update period.
const settleInterval = time.Second

// Config is what Run needs.
type Config struct {
	// Holder is the agent's work client holder, built with
	// WithClusterName(Cluster) and not started. Run starts it, and closes it
	// before it returns. Required.
	Holder *work.ClientHolder
	// Cluster is the cluster's name, the namespace its works are in.
	// Required.
	Cluster string
	// Client applies manifests to the cluster. Required.
	Client dynamic.Interface
	// Mapper maps a manifest's kind to its resource. Required. If it is a
	// meta.ResettableRESTMapper (a discovery-backed mapper is), Run resets
	// it when a kind is not found, so kinds added later (CRDs) are found.
	Mapper meta.RESTMapper
	// StatusUpdateFrequency is how often the status feedback of every work
	// is refreshed. Default: DefaultStatusUpdateFrequency.
	StatusUpdateFrequency time.Duration
	// Workers is how many works are reconciled at once. Default:
	// DefaultWorkers.
	Workers int
}

func (c *Config) defaultAndValidate() error {
	if c.StatusUpdateFrequency == 0 {
		c.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	var errs []error
	if c.Holder == nil {
		errs = append(errs, errors.New("no work client holder"))
	}
	if c.Cluster == "" {
		errs = append(errs, errors.New("no cluster name"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("no dynamic client"))
	}
	if c.Mapper == nil {
		errs = append(errs, errors.New("no RESTMapper"))
	}
	if c.StatusUpdateFrequency < 0 {
		errs = append(errs, fmt.Errorf("status update frequency %v: want more than 0", c.StatusUpdateFrequency))
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers %d: want at least 1", c.Workers))
	}
	return errors.Join(errs...)
}

// Run runs the work agent of cfg.Cluster until ctx ends: it starts the
// holder, reconciles every work it receives, and closes the holder. It
// returns nil when ctx ends, or an error if it cannot start. Lines about
// what it does go to out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.Holder != nil {
		defer closeHolder(cfg.Holder)
	}
	if err := cfg.defaultAndValidate(); err != nil {
		return fmt.Errorf("work agent: %w", err)
	}
	c, err := newController(cfg, out)
	if err != nil {
		return fmt.Errorf("work agent: %w", err)
	}
	if err := cfg.Holder.Start(ctx); err != nil {
		c.queue.ShutDown() // run, which shuts it down, never starts
		return fmt.Errorf("work agent: start: %w", err)
	}
	c.printf("agent of cluster %s started: applying works, refreshing status feedback every %v\n", cfg.Cluster, cfg.StatusUpdateFrequency)
	c.run(ctx, cfg.Workers)
	return nil
}

func closeHolder(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		utilruntime.HandleError(fmt.Errorf("work agent: close: %w", err))
	}
}

// controller reconciles the works of one cluster: the usual
// informer, lister and rate-limited workqueue. The queue holds work names
// (the namespace is always the cluster).
type controller struct {
	works  workv1client.ManifestWorkInterface
	lister workv1listers.ManifestWorkNamespaceLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]

	client  dynamic.Interface
	mapper  meta.RESTMapper
	refresh time.Duration

	outMu sync.Mutex
	out   io.Writer
}

func newController(cfg Config, out io.Writer) (*controller, error) {
	informer := cfg.Holder.ManifestWorkInformer()
	c := &controller{
		works:  cfg.Holder.WorkInterface().WorkV1().ManifestWorks(cfg.Cluster),
		lister: informer.Lister().ManifestWorks(cfg.Cluster),
		synced: informer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "work-agent"}),
		client:  cfg.Client,
		mapper:  cfg.Mapper,
		refresh: cfg.StatusUpdateFrequency,
		out:     out,
	}
	enqueue := func(obj any) {
		if w, ok := obj.(*workv1.ManifestWork); ok && w.Namespace == cfg.Cluster {
			c.queue.Add(w.Name)
		}
	}
	// A deleted work needs nothing: it leaves the store only after the
	// agent removed its finalizer, and the holder reports it Deleted.
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, err
	}
	return c, nil
}

func (c *controller) printf(format string, args ...any) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	fmt.Fprintf(c.out, format, args...)
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
	after, err := c.sync(ctx, name)
	switch {
	case err == nil:
		c.queue.Forget(name)
		if after > 0 {
			c.queue.AddAfter(name, after)
		}
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

// sync reconciles one work, and says when to look at it again.
func (c *controller) sync(ctx context.Context, name string) (time.Duration, error) {
	w, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil // gone: the holder told its source
	}
	if err != nil {
		return 0, err
	}
	if w.DeletionTimestamp != nil {
		return c.cleanUp(ctx, w)
	}
	// Hold a finalizer first, so a deletion waits for the cleanup.
	if !slices.Contains(w.Finalizers, Finalizer) {
		w = w.DeepCopy()
		w.Finalizers = append(w.Finalizers, Finalizer)
		if w, err = c.works.Update(ctx, w, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return 0, ignoreGone(err) // a Conflict retries with a fresh copy
		}
	}

	status, err := c.apply(ctx, w)
	if err != nil {
		return 0, err
	}
	if equality.Semantic.DeepEqual(status, w.Status) {
		return c.refresh, nil
	}
	next := w.DeepCopy()
	next.Status = status
	if _, err := c.works.UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return 0, ignoreGone(err)
	}
	c.printf("work %s/%s generation %d: %s\n", w.Namespace, w.Name, w.Generation, summary(status))
	if !sameFeedback(w.Status, status) {
		return min(settleInterval, c.refresh), nil
	}
	return c.refresh, nil
}

// cleanUp deletes the resources of a work its source deleted, honouring
// its DeleteOption, and removes the agent's finalizer once they are gone.
func (c *controller) cleanUp(ctx context.Context, w *workv1.ManifestWork) (time.Duration, error) {
	if !slices.Contains(w.Finalizers, Finalizer) {
		return 0, nil
	}
	var deleted, orphaned, pending int
	var errs []error
	for _, r := range c.resourcesOf(w) {
		if isOrphaned(w.Spec.DeleteOption, r) {
			orphaned++
			continue
		}
		gone, err := c.deleteResource(ctx, r, metav1.DeletePropagationForeground)
		switch {
		case err != nil:
			errs = append(errs, err)
		case gone:
			deleted++
		default:
			pending++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if pending > 0 {
		return settleInterval, nil // foreground deletion: wait until they are gone
	}
	w = w.DeepCopy()
	w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.works.Update(ctx, w, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return 0, ignoreGone(err)
	}
	c.printf("work %s/%s deleted: %d resource(s) removed, %d orphaned\n", w.Namespace, w.Name, deleted, orphaned)
	return 0, nil
}

// ignoreGone ignores the NotFound of a write to a work that left the
// store after the lister's copy was taken: there is nothing left to do.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// summary is one line about a status.
func summary(st workv1.ManifestWorkStatus) string {
	applied, available := 0, 0
	var values []string
	for _, m := range st.ResourceStatus.Manifests {
		if meta.IsStatusConditionTrue(m.Conditions, workv1.ManifestApplied) {
			applied++
		}
		if meta.IsStatusConditionTrue(m.Conditions, workv1.ManifestAvailable) {
			available++
		}
		for _, v := range m.StatusFeedbacks.Values {
			values = append(values, v.Name+"="+valueString(v.Value))
		}
	}
	n := len(st.ResourceStatus.Manifests)
	s := fmt.Sprintf("applied %d/%d, available %d/%d", applied, n, available, n)
	if len(values) > 0 {
		s += fmt.Sprint(", feedback ", values)
	}
	if c := meta.FindStatusCondition(st.Conditions, workv1.WorkApplied); c != nil && c.Status != metav1.ConditionTrue {
		s += ": " + c.Message
	}
	return s
}

func valueString(v workv1.FieldValue) string {
	switch {
	case v.Integer != nil:
		return fmt.Sprint(*v.Integer)
	case v.String != nil:
		return *v.String
	case v.Boolean != nil:
		return fmt.Sprint(*v.Boolean)
	case v.JsonRaw != nil:
		return *v.JsonRaw
	}
	return ""
}

func sameFeedback(a, b workv1.ManifestWorkStatus) bool {
	if len(a.ResourceStatus.Manifests) != len(b.ResourceStatus.Manifests) {
		return false
	}
	for i := range a.ResourceStatus.Manifests {
		if !equality.Semantic.DeepEqual(a.ResourceStatus.Manifests[i].StatusFeedbacks, b.ResourceStatus.Manifests[i].StatusFeedbacks) {
			return false
		}
	}
	return true
}
