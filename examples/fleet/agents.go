package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/fleet/internal/control"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/work"
)

// agentsState is what an agent host reports to the harness.
type agentsState struct {
	Agents    int   `json:"agents"`    // started
	Held      int   `json:"held"`      // works its agents hold
	Reported  int64 `json:"reported"`  // statuses they reported
	Conflicts int64 `json:"conflicts"` // of those, refused as stale and reported again
}

// runAgents is `fleet agents`: the agents of clusters -from to -to-1,
// each with its own connection, each reporting every work it is given
// Applied and Available at its generation, as a work agent does once it
// applied it.
func runAgents(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agents", flag.ContinueOnError)
	var c common
	c.register(fs)
	from := fs.Int("from", 0, "the first cluster's index")
	to := fs.Int("to", 0, "one past the last cluster's index")
	raw := fs.Bool("raw", false, "start raw agents first (the raw phase), and the agents when the harness asks (/agents)")
	if err := cmdutil.Parse(fs, args); err != nil {
		return err
	}
	if *from < 0 || *to <= *from {
		return fmt.Errorf("-from %d -to %d: want 0 <= from < to", *from, *to)
	}
	host := &agentHost{}
	defer host.close()
	raws := &rawAgents{}
	defer raws.close()
	startAll := func(start func(ctx context.Context, cluster string) error) error {
		// Started a few at once, as a fleet's agents start independently;
		// each Start waits for its connection and its first resync.
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		for i := *from; i < *to; i++ {
			g.Go(func() error { return start(gctx, benchworks.ClusterName(i, c.clusters)) })
		}
		return g.Wait()
	}
	startAgents := func(context.Context, none) (none, error) {
		raws.close()
		return none{}, startAll(func(startCtx context.Context, cluster string) error { return host.start(startCtx, ctx, c, cluster) })
	}
	if *raw {
		if err := startAll(func(startCtx context.Context, cluster string) error { return raws.start(startCtx, c, cluster) }); err != nil {
			return err
		}
	} else if _, err := startAgents(ctx, none{}); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/state", control.Handle(host.state))
	if *raw {
		mux.Handle("/agents", control.Handle(startAgents))
	}
	return control.Run(ctx, c.control, control.WithProfiles(mux))
}

type agentHost struct {
	mu        sync.Mutex
	agents    []*agent
	reported  atomic.Int64
	conflicts atomic.Int64
}

type agent struct {
	cluster string
	holder  *work.ClientHolder
	done    chan struct{}

	mu      sync.Mutex
	pending map[string]struct{} // names of works to report, once each
	wake    chan struct{}       // a name was added to pending
}

func (a *agent) enqueue(obj any) {
	w, ok := obj.(*workv1.ManifestWork)
	if !ok || w.DeletionTimestamp != nil || appliedAt(w) {
		return
	}
	a.mu.Lock()
	a.pending[w.Name] = struct{}{}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *agent) next() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := make([]string, 0, len(a.pending))
	for n := range a.pending {
		names = append(names, n)
	}
	clear(a.pending)
	return names
}

// start starts the agent of cluster, waiting as long as startCtx lasts;
// it runs until ctx ends.
func (h *agentHost) start(startCtx, ctx context.Context, c common, cluster string) error {
	cfg, err := c.transportConfig()
	if err != nil {
		return err
	}
	holder, err := work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithLogger(c.logger()).NewClientHolder()
	if err != nil {
		return err
	}
	a := &agent{cluster: cluster, holder: holder, done: make(chan struct{}), pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	if _, err := holder.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueue,
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
	}); err != nil {
		return err
	}
	if err := holder.Start(startCtx); err != nil {
		return fmt.Errorf("agent of %s: %w", cluster, err)
	}
	go h.report(ctx, a)
	h.mu.Lock()
	h.agents = append(h.agents, a)
	h.mu.Unlock()
	return nil
}

// report reports each pending work Applied at its generation, from the
// lister's copy, as a work agent's controller does.
func (h *agentHost) report(ctx context.Context, a *agent) {
	works := a.holder.WorkInterface().WorkV1().ManifestWorks(a.cluster)
	lister := a.holder.ManifestWorkInformer().Lister().ManifestWorks(a.cluster)
	for {
		select {
		case <-a.done:
			return
		case <-a.wake:
		}
		for _, name := range a.next() {
			cur, err := lister.Get(name)
			if err != nil || cur.DeletionTimestamp != nil || appliedAt(cur) {
				continue // gone, going, or reported
			}
			w := cur.DeepCopy()
			benchworks.ApplyStatus(w)
			_, err = works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
			switch {
			case err == nil:
				h.reported.Add(1)
			case apierrors.IsConflict(err):
				// A newer generation came meanwhile: its informer event
				// queues it again.
				h.conflicts.Add(1)
			case !errors.Is(err, context.Canceled) && !apierrors.IsNotFound(err):
				// Sending is the holder's to retry; a status it refused is
				// a bug the harness's convergence shows.
				fmt.Printf("agent of %s: status of %s: %v\n", a.cluster, name, err)
			}
		}
	}
}

func (h *agentHost) state(context.Context, none) (agentsState, error) {
	h.mu.Lock()
	agents := h.agents
	h.mu.Unlock()
	s := agentsState{Agents: len(agents), Reported: h.reported.Load(), Conflicts: h.conflicts.Load()}
	for _, a := range agents {
		l, err := a.holder.ManifestWorkInformer().Lister().List(labels.Everything())
		if err != nil {
			return s, err
		}
		s.Held += len(l)
	}
	return s, nil
}

func (h *agentHost) close() {
	h.mu.Lock()
	agents := h.agents
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range agents {
		close(a.done)
		wg.Go(func() { _ = a.holder.Close(context.Background()) })
	}
	wg.Wait()
}
