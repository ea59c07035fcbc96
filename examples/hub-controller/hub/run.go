package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/work"
)

// Defaults of Config.
const (
	DefaultWorkers   = 4
	DefaultNamespace = "default"
	DefaultImage     = "nginx:1.27"
)

// Config is what Run needs.
type Config struct {
	// Holder is the hub's work client holder, built and not started: over
	// events (work.NewClientHolderBuilder(&mqttConfig).WithSourceID(id)) or
	// over a kube-apiserver (work.NewClientHolderBuilder(restConfig)). Run
	// starts it, and closes it before it returns. Required.
	Holder *work.ClientHolder
	// Clusters are the managed clusters to place works on. Required.
	Clusters []string
	// Works is how many works to place on each cluster. Required.
	Works int
	// Lifecycle makes Run create the works, wait until every one is
	// Available with its status feedback, update them all to two replicas,
	// wait for the new generation's feedback, delete them all, wait until
	// their agents confirmed, and return. Without it Run keeps the works as
	// they are wanted until ctx ends.
	Lifecycle bool
	// Timeout bounds the lifecycle; 0 means no bound.
	Timeout time.Duration
	// Workers is how many works are reconciled at once. Default:
	// DefaultWorkers.
	Workers int
	// Namespace is the namespace of the Deployments on the clusters.
	// Default: DefaultNamespace.
	Namespace string
	// Image is the Deployments' image. Default: DefaultImage.
	Image string
}

func (c *Config) defaultAndValidate() error {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	var errs []error
	if c.Holder == nil {
		errs = append(errs, errors.New("no work client holder"))
	}
	if len(c.Clusters) == 0 {
		errs = append(errs, errors.New("no clusters"))
	}
	for i, cl := range c.Clusters {
		if cl == "" {
			errs = append(errs, fmt.Errorf("cluster %d has no name", i))
		}
	}
	if c.Works < 1 {
		errs = append(errs, fmt.Errorf("works per cluster %d: want at least 1", c.Works))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d: want at least 1", c.Workers))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want 0 (none) or more", c.Timeout))
	}
	return errors.Join(errs...)
}

// Run runs the hub controller: it starts the holder, wants cfg.Works works
// on each of cfg.Clusters (one nginx Deployment each, with status feedback
// rules), and reconciles them. With cfg.Lifecycle it drives them through
// create, update and delete, prints a summary with timings and returns nil
// once every agent confirmed the deletion, or an error that says what it
// was still waiting for. Without it, it reports progress until ctx ends and
// returns nil. Either way it closes the holder before it returns.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.Holder != nil {
		defer closeHolder(cfg.Holder)
	}
	if err := cfg.defaultAndValidate(); err != nil {
		return fmt.Errorf("hub controller: %w", err)
	}
	if cfg.Lifecycle && cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	c, err := newController(cfg.Holder.WorkInterface(), cfg.Holder.ManifestWorkInformer())
	if err != nil {
		return fmt.Errorf("hub controller: %w", err)
	}
	began := time.Now()
	if err := cfg.Holder.Start(ctx); err != nil {
		c.queue.ShutDown()
		return fmt.Errorf("hub controller: start: %w", err)
	}
	fmt.Fprintf(out, "hub controller started in %v\n", since(began))

	controllerCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.run(controllerCtx, cfg.Workers) })
	defer wg.Wait()
	defer stop()

	names, works := cfg.works(1)
	c.want(works)
	fmt.Fprintf(out, "placing %d works (%d on each of %s), one Deployment each\n", len(names), cfg.Works, strings.Join(cfg.Clusters, ", "))
	if !cfg.Lifecycle {
		c.report(ctx, out, names)
		return nil
	}

	// 1. Create: every work Available with one replica fed back.
	phase := time.Now()
	if err := c.await(ctx, out, "created and Available", names, func(w *workv1.ManifestWork) bool {
		return w != nil && AvailableWith(w, 1)
	}); err != nil {
		return err
	}
	created := time.Since(phase)

	// 2. Update: two replicas, a new generation; wait for its feedback.
	phase = time.Now()
	_, works = cfg.works(2)
	c.want(works)
	if err := c.await(ctx, out, "updated to 2 replicas", names, func(w *workv1.ManifestWork) bool {
		return w != nil && AvailableWith(w, 2)
	}); err != nil {
		return err
	}
	updated := time.Since(phase)

	// 3. Delete: the hub keeps each work until its agent confirms.
	phase = time.Now()
	c.want(nil)
	if err := c.await(ctx, out, "deleted, agents confirmed", names, func(w *workv1.ManifestWork) bool {
		return w == nil
	}); err != nil {
		return err
	}
	deleted := time.Since(phase)

	fmt.Fprintf(out, "summary: %d works on %s: created and Available in %v, updated in %v, deleted in %v; %v in all\n",
		len(names), plural(len(cfg.Clusters), "cluster"), created.Round(time.Millisecond), updated.Round(time.Millisecond),
		deleted.Round(time.Millisecond), since(began))
	return nil
}

// works returns the names of the works Run places, and the works with
// replicas replicas.
func (cfg *Config) works(replicas int64) ([]cache.ObjectName, []*workv1.ManifestWork) {
	var names []cache.ObjectName
	var works []*workv1.ManifestWork
	for _, cluster := range cfg.Clusters {
		for i := range cfg.Works {
			w := NewWork(cluster, fmt.Sprintf("web-%d", i), cfg.Namespace, cfg.Image, replicas)
			names = append(names, cache.MetaObjectToName(w))
			works = append(works, w)
		}
	}
	return names, works
}

// await polls the lister until done holds for every named work (nil when
// the lister does not have it), and prints how long that took. If ctx ends
// first, it says which works it was still waiting for.
func (c *controller) await(ctx context.Context, out io.Writer, what string, names []cache.ObjectName, done func(*workv1.ManifestWork) bool) error {
	began := time.Now()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		works := c.works(names)
		var pending []string
		for _, name := range names {
			if !done(works[name]) {
				pending = append(pending, name.String()+" ("+describe(works[name])+")")
			}
		}
		if len(pending) == 0 {
			fmt.Fprintf(out, "%-26s %d/%d  (%v)\n", what, len(names), len(names), since(began))
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Strings(pending)
			if len(pending) > 3 {
				pending = append(pending[:3], fmt.Sprintf("and %d more", len(pending)-3))
			}
			return fmt.Errorf("%s: %d of %d after %v; waiting for %s: %w", what, len(names)-len(pending), len(names),
				since(began), strings.Join(pending, ", "), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// report prints how many works are Available with their feedback whenever
// that changes, until ctx ends.
func (c *controller) report(ctx context.Context, out io.Writer, names []cache.ObjectName) {
	last := -1
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		n := 0
		for _, w := range c.works(names) {
			if AvailableWith(w, 1) {
				n++
			}
		}
		if n != last {
			fmt.Fprintf(out, "%s available with status feedback: %d/%d\n", time.Now().Format(time.TimeOnly), n, len(names))
			last = n
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// describe says where a work is, for a timeout message.
func describe(w *workv1.ManifestWork) string {
	if w == nil {
		return "absent"
	}
	s := fmt.Sprintf("generation %d", w.Generation)
	if w.DeletionTimestamp != nil {
		s += ", deleting"
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkAvailable); c != nil {
		s += fmt.Sprintf(", Available=%s at generation %d", c.Status, c.ObservedGeneration)
	} else {
		s += ", no status yet"
	}
	var values []string
	for name, v := range Feedback(w) {
		switch {
		case v.Integer != nil:
			values = append(values, fmt.Sprintf("%s=%d", name, *v.Integer))
		case v.String != nil:
			values = append(values, name+"="+*v.String)
		}
	}
	if len(values) > 0 {
		sort.Strings(values)
		s += ", feedback " + strings.Join(values, " ")
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

func closeHolder(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		utilruntime.HandleError(fmt.Errorf("hub controller: close: %w", err))
	}
}
