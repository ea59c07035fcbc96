package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/fleet/internal/control"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/metrics"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/work"
)

// hubID is the fleet's source.
const hubID = "fleet-hub"

// hubState is what the hub reports to the harness.
type hubState struct {
	Held    int `json:"held"`    // works the hub holds, deleted or not
	Applied int `json:"applied"` // of them, Applied at their generation by their agents
	// Latency is the library's first-status latency histogram as it is
	// now: cumulative counts per upper bound in seconds.
	Latency []bucket `json:"latency"`
	Resent  int64    `json:"resent"` // specs sent again, unacknowledged, so far
	// Waiting names a few works not Applied at their generation, when
	// only a few are: what a phase that does not converge waits for.
	Waiting []string `json:"waiting,omitempty"`
}

// waitingNames bounds hubState.Waiting.
const waitingNames = 5

// heapState is the hub's live heap after a collection, in bytes.
type heapState struct {
	Live uint64 `json:"live"`
}

type bucket struct {
	UpperBound float64 `json:"le"`
	Count      uint64  `json:"count"`
}

// runHub is `fleet hub`: one work holder over the broker (over gRPC, the
// database the brokers serve), which creates, updates and deletes the
// works the harness asks for, and counts what its agents report.
func runHub(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hub", flag.ContinueOnError)
	var c common
	c.register(fs)
	if err := cmdutil.Parse(fs, args); err != nil {
		return err
	}
	var (
		works hubWorks
		err   error
	)
	if c.transport == "grpc" {
		works, err = openDBWorks(ctx, c)
	} else {
		works, err = startHolderWorks(ctx, c)
	}
	if err != nil {
		return err
	}
	defer works.close()

	hub := &hub{works: works, c: c}
	mux := http.NewServeMux()
	mux.Handle("/create", control.Handle(hub.create))
	mux.Handle("/update", control.Handle(hub.update))
	mux.Handle("/delete", control.Handle(hub.remove))
	mux.Handle("/steady", control.Handle(hub.steady))
	mux.Handle("/state", control.Handle(hub.state))
	mux.Handle("/raw", control.Handle(hub.raw))
	mux.Handle("/heap", control.Handle(func(context.Context, none) (heapState, error) {
		return heapState{Live: benchworks.LiveHeap()}, nil
	}))
	return control.Run(ctx, c.control, control.WithProfiles(mux))
}

type hub struct {
	works hubWorks
	c     common
}

// hubWorks are where a hub keeps its works, as a controller sees them.
type hubWorks interface {
	create(ctx context.Context, w *workv1.ManifestWork) error
	// update writes w, which names the resourceVersion it was read at.
	update(ctx context.Context, w *workv1.ManifestWork) error
	remove(ctx context.Context, namespace, name string) error
	// latest is the work as it is stored now, to change; all are the
	// works as the hub sees them, deleted or not. Neither may be changed.
	latest(ctx context.Context, namespace, name string) (*workv1.ManifestWork, error)
	all() []*workv1.ManifestWork
	tally() *tally
	// latency is the first-status latency histogram and the count of
	// specs sent again, as they are now, from the client that sends the
	// specs.
	latency() ([]bucket, int64, error)
	close()
}

// holderWorks are a work holder's, over the broker: a hub as most are.
type holderWorks struct {
	holder *work.ClientHolder
	reg    *prometheus.Registry
	counts *tally // of the informer's works
}

func startHolderWorks(ctx context.Context, c common) (*holderWorks, error) {
	reg := prometheus.NewRegistry()
	obs, err := metrics.NewObserver(reg)
	if err != nil {
		return nil, err
	}
	cfg, err := c.transportConfig()
	if err != nil {
		return nil, err
	}
	h, err := work.NewClientHolderBuilder(cfg).WithSourceID(hubID).WithLogger(c.logger()).
		WithSourceOptions(generic.WithObserver(obs)).NewClientHolder()
	if err != nil {
		return nil, err
	}
	counts := newTally()
	if _, err := h.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { counts.set(obj.(*workv1.ManifestWork)) },
		UpdateFunc: func(_, obj any) { counts.set(obj.(*workv1.ManifestWork)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if w, ok := obj.(*workv1.ManifestWork); ok {
				counts.remove(w.Namespace, w.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	// Not obs.Track(h.Stats): its gauges count the specs in flight at
	// every gather, and the harness gathers ten times a second.
	return &holderWorks{holder: h, reg: reg, counts: counts}, nil
}

func (h *holderWorks) tally() *tally { return h.counts }

func (h *holderWorks) create(ctx context.Context, w *workv1.ManifestWork) error {
	_, err := h.holder.WorkInterface().WorkV1().ManifestWorks(w.Namespace).Create(ctx, w, metav1.CreateOptions{})
	return err
}

func (h *holderWorks) update(ctx context.Context, w *workv1.ManifestWork) error {
	_, err := h.holder.WorkInterface().WorkV1().ManifestWorks(w.Namespace).Update(ctx, w, metav1.UpdateOptions{})
	return err
}

func (h *holderWorks) remove(ctx context.Context, namespace, name string) error {
	return h.holder.WorkInterface().WorkV1().ManifestWorks(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

func (h *holderWorks) latest(_ context.Context, namespace, name string) (*workv1.ManifestWork, error) {
	return h.holder.ManifestWorkInformer().Lister().ManifestWorks(namespace).Get(name)
}

func (h *holderWorks) all() []*workv1.ManifestWork {
	all, _ := h.holder.ManifestWorkInformer().Lister().List(labels.Everything())
	return all
}

func (h *holderWorks) latency() ([]bucket, int64, error) {
	families, err := h.reg.Gather()
	if err != nil {
		return nil, 0, err
	}
	var latency []bucket
	var resent int64
	for _, f := range families {
		switch f.GetName() {
		case "workwire_first_status_latency_seconds":
			latency = histogram(f)
		case "workwire_specs_resent_total":
			resent = counter(f)
		}
	}
	return latency, resent, nil
}

func (h *holderWorks) close() { _ = h.holder.Close(context.Background()) }

type none struct{}

type createRequest struct {
	From  int `json:"from"`  // the first work's index
	Count int `json:"count"` // how many
}

// create creates works r.From to r.From+r.Count-1, work-<i> on cluster i
// modulo the fleet's clusters, each made as it is sent: the hub holds its
// works once, as a controller's would.
func (h *hub) create(ctx context.Context, r createRequest) (none, error) {
	tmpl := benchworks.Works(1, 1, h.c.manifestBytes)[0]
	raw := tmpl.Spec.Workload.Manifests[0].Raw
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := r.From; i < r.From+r.Count; i++ {
		g.Go(func() error {
			w := tmpl.DeepCopy()
			w.Name, w.Namespace = fmt.Sprintf("work-%d", i), benchworks.ClusterName(i, h.c.clusters)
			w.Spec.Workload.Manifests[0].Raw = bytes.ReplaceAll(raw, []byte(`"work-0"`), []byte(`"`+w.Name+`"`))
			if err := h.works.create(ctx, w); err != nil {
				return fmt.Errorf("%s/%s: %w", w.Namespace, w.Name, err)
			}
			return nil
		})
	}
	return none{}, g.Wait()
}

// replicas finds a Deployment's replicas in its JSON, as the hub wrote it
// or as a database that stores JSON values gives it back (PostgreSQL's
// jsonb puts a space after the colon).
var replicas = regexp.MustCompile(`"replicas":\s*\d+`)

// change updates w's Deployment (its replicas, from its generation, so
// that each change is one), a new generation.
func (h *hub) change(ctx context.Context, w *workv1.ManifestWork) error {
	w = w.DeepCopy()
	n := []byte(`"replicas":` + strconv.FormatInt(w.Generation+2, 10))
	changed := false
	for i := range w.Spec.Workload.Manifests {
		m := &w.Spec.Workload.Manifests[i]
		raw := replicas.ReplaceAll(m.Raw, n)
		changed = changed || !bytes.Equal(raw, m.Raw)
		m.Raw = raw
	}
	if !changed {
		// An update that changes nothing converges at once and measures nothing.
		return fmt.Errorf("%s/%s: no manifest has replicas to change", w.Namespace, w.Name)
	}
	return h.works.update(ctx, w)
}

// changeLatest changes the work w names as the hub holds it now: one
// changed a moment ago (by the hub, or its status by a gRPC broker over
// the database) may not be in the lister yet, and its Update then
// conflicts.
func (h *hub) changeLatest(ctx context.Context, w *workv1.ManifestWork) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := h.works.latest(ctx, w.Namespace, w.Name)
		if err != nil {
			return err
		}
		return h.change(ctx, cur)
	})
}

// update changes every work.
func (h *hub) update(ctx context.Context, _ none) (none, error) {
	return none{}, h.each(ctx, h.list(), h.changeLatest)
}

type steadyRequest struct {
	PerSecond float64 `json:"perSecond"`
	Seconds   float64 `json:"seconds"`
}

type steadyResult struct {
	Changed int `json:"changed"`
}

// steady changes r.PerSecond works a second, the works in turn, for
// r.Seconds, as controllers do under a steady load, and returns how many
// it changed (fewer than asked if the hub could not keep up).
func (h *hub) steady(ctx context.Context, r steadyRequest) (steadyResult, error) {
	if r.PerSecond <= 0 || r.Seconds <= 0 {
		return steadyResult{}, fmt.Errorf("perSecond %v, seconds %v: want both above 0", r.PerSecond, r.Seconds)
	}
	works := h.list()
	if len(works) == 0 {
		return steadyResult{}, errors.New("no works to change")
	}
	const tick = 10 * time.Millisecond
	began := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	changed := 0
	for now := began; now.Sub(began) < time.Duration(r.Seconds*float64(time.Second)); {
		due := int(r.PerSecond*now.Sub(began).Seconds()) + 1
		var batch []*workv1.ManifestWork
		for ; changed < due; changed++ {
			batch = append(batch, works[changed%len(works)])
		}
		if err := h.each(ctx, batch, h.changeLatest); err != nil {
			return steadyResult{changed}, err
		}
		select {
		case <-ctx.Done():
			return steadyResult{changed}, ctx.Err()
		case now = <-t.C:
		}
	}
	return steadyResult{changed}, nil
}

type deleteRequest struct {
	Every int `json:"every"` // delete one work in every this many
}

// remove deletes one work in every r.Every.
func (h *hub) remove(ctx context.Context, r deleteRequest) (none, error) {
	if r.Every < 1 {
		return none{}, fmt.Errorf("every %d: want at least 1", r.Every)
	}
	var doomed []*workv1.ManifestWork
	for i, w := range h.list() {
		if i%r.Every == 0 {
			doomed = append(doomed, w)
		}
	}
	return none{}, h.each(ctx, doomed, func(ctx context.Context, w *workv1.ManifestWork) error {
		return h.works.remove(ctx, w.Namespace, w.Name)
	})
}

// each calls f for each work, a few at once, as controllers' workers do.
func (h *hub) each(ctx context.Context, works []*workv1.ManifestWork, f func(context.Context, *workv1.ManifestWork) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, w := range works {
		g.Go(func() error {
			if err := f(ctx, w); err != nil {
				return fmt.Errorf("%s/%s: %w", w.Namespace, w.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// list is every work the hub holds that is not being deleted, in a fixed
// order.
func (h *hub) list() []*workv1.ManifestWork {
	var out []*workv1.ManifestWork
	for _, w := range h.works.all() {
		if w.DeletionTimestamp == nil {
			out = append(out, w)
		}
	}
	sortWorks(out)
	return out
}

func (h *hub) state(context.Context, none) (hubState, error) {
	var s hubState
	s.Held, s.Applied, s.Waiting = h.works.tally().counts()
	var err error
	s.Latency, s.Resent, err = h.works.latency()
	return s, err
}

// counter sums a counter family's series.
func counter(f *dto.MetricFamily) int64 {
	var n int64
	for _, m := range f.GetMetric() {
		n += int64(m.GetCounter().GetValue())
	}
	return n
}

// histogram sums a histogram family's series, but for their +Inf bucket,
// which the text format has (and JSON cannot hold).
func histogram(f *dto.MetricFamily) []bucket {
	var out []bucket
	for _, m := range f.GetMetric() {
		for i, b := range m.GetHistogram().GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				break
			}
			if i == len(out) {
				out = append(out, bucket{UpperBound: b.GetUpperBound()})
			}
			out[i].Count += b.GetCumulativeCount()
		}
	}
	return out
}

// sortWorks orders works by namespace and name.
func sortWorks(works []*workv1.ManifestWork) {
	slices.SortFunc(works, func(a, b *workv1.ManifestWork) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}
