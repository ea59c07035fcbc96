package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/store"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/work"
)

const hubID = "bench-hub"

// bench is one run's state.
type bench struct {
	cfg      config
	env      *Env
	works    []*workv1.ManifestWork
	progress io.Writer
	res      *Result
	raw      float64 // works/s of the raw phase
	counts   clientCounts

	hub    *work.ClientHolder
	agents []*agentHolder

	// Live heap (bytes) at points of the deliver phase, to split heap per
	// work between the hub and the agents.
	heapHubOnly, heapEmpty, heapDelivered uint64
}

type agentHolder struct {
	cluster string
	holder  *work.ClientHolder
}

func run(ctx context.Context, cfg config, progress io.Writer) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e, err := newEnv(cfg)
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, env: e, works: benchworks.Works(cfg.works, cfg.clusters, cfg.manifestBytes), progress: progress, res: &Result{
		Transport: cfg.transport, ContentMode: cfg.contentMode, Compression: cfg.compression, Clusters: cfg.clusters, Works: cfg.works, ManifestBytes: cfg.manifestBytes, RateLimit: "default", SpecWindow: cfg.specWindow,
	}}
	if cfg.noRateLimit {
		b.res.RateLimit = "off"
	}
	want := map[string]bool{}
	for _, p := range cfg.phases {
		want[p] = true
	}
	steps := []struct {
		name string
		fn   func(context.Context) (PhaseResult, error)
	}{
		{"raw", b.rawPhase},
		{"deliver", b.deliver},
		{"agent-resync", b.agentResync},
		{"status", b.status},
		{"hub-resync", b.hubResync},
	}
	for _, s := range steps {
		if !want[s.name] {
			continue
		}
		var wireBefore int64
		if b.env.Wire != nil {
			wireBefore = b.env.Wire()
		}
		pctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		r, err := s.fn(pctx)
		cancel()
		if err != nil {
			return b.finish(), fmt.Errorf("phase %s: %w", s.name, err)
		}
		r.Name = s.name
		if b.env.Wire != nil {
			r.WireBytes = b.env.Wire() - wireBefore
		}
		if s.name == "raw" {
			b.raw = r.WorksPerSec
		} else if b.raw > 0 {
			r.RatioToRaw = r.WorksPerSec / b.raw
		}
		b.res.Phases = append(b.res.Phases, r)
	}
	return b.finish(), nil
}

// finish stops everything the run started and measures what is left.
func (b *bench) finish() *Result {
	if b.env.Dropped != nil {
		n := b.env.Dropped()
		b.res.BrokerDropped = &n
	}
	b.res.SendsFailed = b.counts.sendsFailed.Load()
	b.res.EventsDropped = b.counts.eventsDropped.Load()
	b.res.SpecsResent = b.counts.specsResent.Load()
	b.closeAll()
	b.env.Close()
	time.Sleep(100 * time.Millisecond) // goroutines on their way out, not leaks
	b.res.PeakRSS = benchworks.PeakRSS()
	b.res.Goroutines = runtime.NumGoroutine()
	return b.res
}

func (b *bench) clusterOf(i int) string { return benchworks.ClusterName(i, b.cfg.clusters) }

// sourceOpts and agentOpts: the SDK's defaults, except the rate limit when
// asked, and no periodic resync in the middle of a measurement.
func (b *bench) clientOpts() []generic.Option {
	opts := []generic.Option{generic.WithResyncInterval(0), generic.WithLogger(logr.Discard()), generic.WithObserver(&b.counts)}
	if b.cfg.noRateLimit {
		opts = append(opts, generic.WithPublishRateLimit(0, 0))
	}
	return opts
}

func (b *bench) startHub(ctx context.Context) error {
	var opts []generic.SourceOption
	for _, o := range b.clientOpts() {
		opts = append(opts, o)
	}
	opts = append(opts, generic.WithSpecWindow(b.cfg.specWindow))
	h, err := work.NewClientHolderBuilder(b.env.Transport).WithSourceID(hubID).WithSourceOptions(opts...).
		WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		return err
	}
	if err := h.Start(ctx); err != nil {
		return err
	}
	b.hub = h
	return nil
}

// startAgents starts every agent at once; onAdd sees each work an agent's
// informer adds.
func (b *bench) startAgents(ctx context.Context, onAdd func(*workv1.ManifestWork)) error {
	var opts []generic.AgentOption
	for _, o := range b.clientOpts() {
		opts = append(opts, o)
	}
	b.agents = make([]*agentHolder, b.cfg.clusters)
	errs := make([]error, b.cfg.clusters)
	var wg sync.WaitGroup
	for i := range b.cfg.clusters {
		cluster := b.clusterOf(i)
		h, err := work.NewClientHolderBuilder(b.env.Transport).WithClusterName(cluster).WithAgentOptions(opts...).
			WithLogger(logr.Discard()).NewClientHolder()
		if err != nil {
			return err
		}
		if _, err := h.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { onAdd(obj.(*workv1.ManifestWork)) },
		}); err != nil {
			return err
		}
		b.agents[i] = &agentHolder{cluster: cluster, holder: h}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Start(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (b *bench) closeAgents() {
	var wg sync.WaitGroup
	for _, a := range b.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			closeHolder(a.holder)
		}()
	}
	wg.Wait()
	b.agents = nil
}

func (b *bench) closeAll() {
	b.closeAgents()
	if b.hub != nil {
		closeHolder(b.hub)
		b.hub = nil
	}
}

func closeHolder(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = h.Close(ctx)
}

// wait reports progress until done() reaches total or ctx ends.
func (b *bench) wait(ctx context.Context, phase string, total int, done func() int) error {
	err := benchworks.Wait(ctx, b.progress, phase, total, done)
	if err != nil && b.env.Dropped != nil {
		if lost := b.env.Dropped(); lost > 0 {
			// What a deployment's periodic resync would heal stays lost
			// here, so that resyncs do not disturb the figures.
			err = fmt.Errorf("%w; the broker dropped %d messages for slow subscribers, and the bench turns periodic resync off", err, lost)
		}
	}
	if n := b.counts.sendsFailed.Load(); err != nil && n > 0 {
		err = fmt.Errorf("%w; %d of the clients' sends failed (their logs are discarded)", err, n)
	}
	return err
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// rawPhase: pre-encoded events of the same size, sent by as many senders as
// the hub's publisher has workers, to agents that only count them.
func (b *bench) rawPhase(ctx context.Context) (PhaseResult, error) {
	bundles := codec.NewManifestBundleCodec()
	events := make([]struct {
		cluster string
		data    *workEvent
	}, len(b.works))
	for i, w := range b.works {
		w := w.DeepCopy()
		w.UID = kubetypes.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		w.Generation = 1
		evt, err := bundles.Encode(hubID, types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceSpec, Action: types.CreateRequest}, w)
		if err != nil {
			return PhaseResult{}, err
		}
		events[i].cluster, events[i].data = w.Namespace, &workEvent{evt: evt}
	}
	var received atomic.Int64
	var agents []options.Transport
	defer func() {
		for _, tr := range agents {
			_ = tr.Close(context.Background())
		}
	}()
	for i := range b.cfg.clusters {
		tr, err := b.env.Transport()
		if err != nil {
			return PhaseResult{}, err
		}
		agents = append(agents, tr)
		if err := tr.Start(ctx, options.AgentSubscriptions(b.clusterOf(i), []string{codec.ManifestBundlesDataType.String()}), countingReceiver{&received}); err != nil {
			return PhaseResult{}, err
		}
	}
	hub, err := b.env.Transport()
	if err != nil {
		return PhaseResult{}, err
	}
	defer hub.Close(context.Background())
	if err := hub.Start(ctx, nil, countingReceiver{new(atomic.Int64)}); err != nil {
		return PhaseResult{}, err
	}
	begin := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, publishWorkers)
	for range publishWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(events) {
					return
				}
				r := options.Route{Role: options.RoleSpec, Source: hubID, Cluster: events[i].cluster}
				if err := hub.Send(ctx, r, events[i].data.evt); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	waitErr := b.wait(ctx, "raw", len(b.works), func() int { return int(received.Load()) })
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return PhaseResult{}, err
	}
	if waitErr != nil {
		return PhaseResult{}, waitErr
	}
	d := time.Since(begin)
	return PhaseResult{Duration: d, WorksPerSec: rate(len(b.works), d)}, nil
}

// publishWorkers matches the work holder's publisher, so raw is the same
// shape of load.
const publishWorkers = 16

// deliver: Create on the hub → every agent's informer holds it.
func (b *bench) deliver(ctx context.Context) (PhaseResult, error) {
	if err := b.startHub(ctx); err != nil {
		return PhaseResult{}, err
	}
	b.heapHubOnly = benchworks.LiveHeap()
	// The bench's own bookkeeping comes after the hub's baseline and before
	// the agents': it is gone by the time the hub is measured alone (see
	// agentResync), so it must be in neither side's growth.
	arrived := benchworks.NewCounter(len(b.works))
	created := make(map[string]time.Time, len(b.works))
	if err := b.startAgents(ctx, func(w *workv1.ManifestWork) { arrived.Mark(w.Name) }); err != nil {
		return PhaseResult{}, err
	}
	b.heapEmpty = benchworks.LiveHeap()
	begin := time.Now()
	for _, w := range b.works {
		created[w.Name] = time.Now()
		if _, err := b.hub.WorkInterface().WorkV1().ManifestWorks(w.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return PhaseResult{}, err
		}
	}
	if err := b.wait(ctx, "deliver", len(b.works), arrived.Count); err != nil {
		return PhaseResult{}, err
	}
	d := time.Since(begin)
	b.heapDelivered = benchworks.LiveHeap()
	b.res.HeapPerWork = perWork(b.heapDelivered, b.heapEmpty, len(b.works))
	if b.cfg.memProfile != "" {
		if err := writeHeapProfile(b.cfg.memProfile); err != nil {
			return PhaseResult{}, err
		}
	}
	lat := make([]time.Duration, 0, len(created))
	arrived.Arrivals(func(name string, at time.Time) { lat = append(lat, at.Sub(created[name])) })
	slices.Sort(lat)
	return PhaseResult{Duration: d, WorksPerSec: rate(len(b.works), d), P50: lat[len(lat)/2], P99: lat[len(lat)*99/100]}, nil
}

// agentResync: agents restart empty → hold everything again.
func (b *bench) agentResync(ctx context.Context) (PhaseResult, error) {
	if b.hub == nil {
		return PhaseResult{}, errors.New("needs the deliver phase first")
	}
	b.closeAgents()
	// What is left is the hub's: its works over its own baseline. The
	// agents' connections wind down in the broker for a moment after Close.
	hub := settledHeap()
	b.res.HubHeapPerWork = perWork(hub, b.heapHubOnly, len(b.works))
	b.res.AgentHeapPerWork = max(b.res.HeapPerWork-b.res.HubHeapPerWork, 0)
	arrived := benchworks.NewCounter(len(b.works))
	begin := time.Now()
	if err := b.startAgents(ctx, func(w *workv1.ManifestWork) { arrived.Mark(w.Name) }); err != nil {
		return PhaseResult{}, err
	}
	if err := b.wait(ctx, "agent-resync", len(b.works), arrived.Count); err != nil {
		return PhaseResult{}, err
	}
	d := time.Since(begin)
	return PhaseResult{Duration: d, WorksPerSec: rate(len(b.works), d)}, nil
}

// status: every agent reports every work Applied → the hub sees it.
func (b *bench) status(ctx context.Context) (PhaseResult, error) {
	if b.hub == nil || b.agents == nil {
		return PhaseResult{}, errors.New("needs the deliver phase first")
	}
	seen := benchworks.NewCounter(len(b.works))
	reg, err := b.hub.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if w := obj.(*workv1.ManifestWork); meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
				seen.Mark(w.Name)
			}
		},
	})
	if err != nil {
		return PhaseResult{}, err
	}
	defer func() { _ = b.hub.ManifestWorkInformer().Informer().RemoveEventHandler(reg) }()
	begin := time.Now()
	// An agent that fails stops the wait at once, with its error.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var reporters sync.WaitGroup
	for _, a := range b.agents {
		reporters.Go(func() {
			if err := reportApplied(ctx, a); err != nil {
				cancel(fmt.Errorf("cluster %s: %w", a.cluster, err))
			}
		})
	}
	defer reporters.Wait()
	if err := b.wait(ctx, "status", len(b.works), seen.Count); err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
			return PhaseResult{}, cause
		}
		return PhaseResult{}, err
	}
	d := time.Since(begin)
	return PhaseResult{Duration: d, WorksPerSec: rate(len(b.works), d)}, nil
}

// reportApplied updates the status of every work the agent holds, as a
// work agent's controller does.
func reportApplied(ctx context.Context, a *agentHolder) error {
	works := a.holder.WorkInterface().WorkV1().ManifestWorks(a.cluster)
	list, err := a.holder.ManifestWorkInformer().Lister().ManifestWorks(a.cluster).List(everything)
	if err != nil {
		return err
	}
	return benchworks.ReportApplied(ctx, works, list, func(ctx context.Context, w *workv1.ManifestWork) error {
		_, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
		return err
	})
}

// hubResync: the hub restarts with its works persisted but no statuses (a
// source over a database), and asks the agents: → has every status again.
func (b *bench) hubResync(ctx context.Context) (PhaseResult, error) {
	if b.hub == nil || b.agents == nil {
		return PhaseResult{}, errors.New("needs the deliver and status phases first")
	}
	persisted := store.New(schema.GroupResource{Group: workv1.GroupName, Resource: "manifestworks"}, (*workv1.ManifestWork).DeepCopy, nil, 1)
	for _, ns := range b.namespaces() {
		list, err := b.hub.WorkInterface().WorkV1().ManifestWorks(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return PhaseResult{}, err
		}
		for i := range list.Items {
			w := &list.Items[i] // List copied it: the store can keep it
			w.Status = workv1.ManifestWorkStatus{}
			w.ResourceVersion = ""
			if err := persisted.Put(w); err != nil {
				return PhaseResult{}, err
			}
		}
	}
	closeHolder(b.hub)
	b.hub = nil

	seen := benchworks.NewCounter(len(b.works))
	var opts []generic.SourceOption
	for _, o := range b.clientOpts() {
		opts = append(opts, o)
	}
	tr, err := b.env.Transport()
	if err != nil {
		return PhaseResult{}, err
	}
	src, err := generic.NewSourceClient(hubID, tr, persistedLister{persisted}, codec.StatusHash,
		[]generic.Codec[*workv1.ManifestWork]{codec.NewManifestBundleCodec()}, opts...)
	if err != nil {
		return PhaseResult{}, err
	}
	if err := src.Subscribe(func(_ context.Context, _ types.EventType, status *workv1.ManifestWork) error {
		if meta.IsStatusConditionTrue(status.Status.Conditions, workv1.WorkApplied) {
			if w, ok := persisted.PeekUID(status.UID); ok {
				seen.Mark(w.Name)
			}
		}
		return nil
	}); err != nil {
		return PhaseResult{}, err
	}
	begin := time.Now()
	if err := src.Start(ctx); err != nil {
		return PhaseResult{}, err
	}
	defer src.Close(context.Background())
	if err := b.wait(ctx, "hub-resync", len(b.works), seen.Count); err != nil {
		return PhaseResult{}, err
	}
	d := time.Since(begin)
	return PhaseResult{Duration: d, WorksPerSec: rate(len(b.works), d)}, nil
}

func (b *bench) namespaces() []string {
	out := make([]string, b.cfg.clusters)
	for i := range out {
		out[i] = b.clusterOf(i)
	}
	return out
}

// persistedLister lists a store's works by cluster, as a source over a
// database would.
type persistedLister struct {
	st *store.Store[*workv1.ManifestWork]
}

func (l persistedLister) List(o generic.ListOptions) ([]*workv1.ManifestWork, error) {
	var out []*workv1.ManifestWork
	l.st.Range(o.ClusterName, func(w *workv1.ManifestWork) bool {
		out = append(out, w)
		return true
	})
	return out, nil
}

// perWork is (after - before) / n, or 0 if the heap shrank.
func perWork(after, before uint64, n int) int {
	if after < before {
		return 0
	}
	return int((after - before) / uint64(n))
}

// settledHeap is the live heap once it stops falling (by less than 1 MiB in
// 200ms), or after 10s.
func settledHeap() uint64 {
	h := benchworks.LiveHeap()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		next := benchworks.LiveHeap()
		if next+1<<20 > h {
			return min(h, next)
		}
		h = next
	}
	return h
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}
