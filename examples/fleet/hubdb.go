package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/workstore"
)

// dbWorks are the works of a hub whose works are in the database the gRPC
// brokers serve, as a service over its own database keeps them: it writes
// them there, and watches them, as a controller's informer would, for
// what it reports. A hub restarted finds them all there.
type dbWorks struct {
	pool   *pgxpool.Pool
	store  *pgstore.Store
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	byKey  map[string]*workv1.ManifestWork // namespace/name
	byUID  map[string]string               // its key
	counts *tally                          // of byKey

	scrapeMu sync.Mutex
	scrapes  []*scrape // the brokers' metrics
}

func openDBWorks(ctx context.Context, c common) (*dbWorks, error) {
	if c.postgres == "" {
		return nil, errors.New("-postgres-dsn is required over gRPC")
	}
	pool, err := pgxpool.New(ctx, c.postgres)
	if err != nil {
		return nil, err
	}
	store, err := pgstore.Open(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	d := &dbWorks{pool: pool, store: store, cancel: cancel, done: make(chan error, 1),
		byKey: make(map[string]*workv1.ManifestWork), byUID: make(map[string]string), counts: newTally()}
	for u := range strings.SplitSeq(c.metrics, ",") {
		if u != "" {
			d.scrapes = append(d.scrapes, &scrape{url: u})
		}
	}
	ready := make(chan struct{})
	go func() { d.done <- store.Watch(wctx, d.changed, ready) }()
	select {
	case <-ready:
	case err := <-d.done:
		d.close()
		return nil, fmt.Errorf("watch the works: %w", err)
	}
	// What was there before the watch began (a restarted hub's works).
	opts := workstore.ListOptions{Limit: 1000}
	for {
		l, err := store.List(ctx, opts)
		if err != nil {
			d.close()
			return nil, err
		}
		for i := range l.Items {
			d.keep(&l.Items[i])
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			return d, nil
		}
	}
}

// changed is the watch's handler: it reads the work a change is of.
func (d *dbWorks) changed(c workstore.Change) {
	if c.Op == workstore.Deleted {
		d.mu.Lock()
		if w, ok := d.byKey[d.byUID[c.UID]]; ok {
			d.counts.remove(w.Namespace, w.Name)
		}
		delete(d.byKey, d.byUID[c.UID])
		delete(d.byUID, c.UID)
		d.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := d.store.GetByUID(ctx, c.UID)
	if err != nil {
		return // gone since, or a later change reads it again
	}
	d.keep(w)
}

// keep holds w unless what it holds is newer.
func (d *dbWorks) keep(w *workv1.ManifestWork) {
	key := w.Namespace + "/" + w.Name
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.byKey[key]; ok && revision(cur) >= revision(w) {
		return
	}
	d.byKey[key], d.byUID[string(w.UID)] = w, key
	d.counts.set(w)
}

func (d *dbWorks) tally() *tally { return d.counts }

func revision(w *workv1.ManifestWork) int64 {
	n, _ := strconv.ParseInt(w.ResourceVersion, 10, 64)
	return n
}

func (d *dbWorks) create(ctx context.Context, w *workv1.ManifestWork) error {
	created, err := d.store.Create(ctx, w)
	if err == nil {
		d.keep(created)
	}
	return err
}

func (d *dbWorks) update(ctx context.Context, w *workv1.ManifestWork) error {
	updated, err := d.store.Update(ctx, w)
	if err == nil {
		d.keep(updated)
	}
	return err
}

func (d *dbWorks) remove(ctx context.Context, namespace, name string) error {
	deleted, err := d.store.Delete(ctx, namespace, name)
	if err == nil {
		d.keep(deleted)
	}
	return err
}

// latest reads the database: what the hub watches lags behind it (the
// brokers write statuses too).
func (d *dbWorks) latest(ctx context.Context, namespace, name string) (*workv1.ManifestWork, error) {
	return d.store.Get(ctx, namespace, name)
}

func (d *dbWorks) all() []*workv1.ManifestWork {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*workv1.ManifestWork, 0, len(d.byKey))
	for _, w := range d.byKey {
		out = append(out, w)
	}
	return out
}

// latency sums the brokers': they send the specs.
func (d *dbWorks) latency() ([]bucket, int64, error) {
	d.scrapeMu.Lock()
	defer d.scrapeMu.Unlock()
	var sum []bucket
	var resent int64
	for _, s := range d.scrapes {
		h, r := s.get()
		sum = addBuckets(sum, h)
		resent += r
	}
	return sum, resent, nil
}

func (d *dbWorks) close() {
	d.cancel()
	<-d.done
	d.pool.Close()
}

// scrape follows one broker's first-status latency and specs re-sent
// through its restarts: counts that fell since the last scrape are a new
// process's, added to those of the ones before; a broker that does not
// answer (down) counts as it last did.
type scrape struct {
	url          string
	last, before []bucket
	lastResent   int64
	beforeResent int64
}

func (s *scrape) get() ([]bucket, int64) {
	h, resent, err := fetchMetrics(s.url)
	if err == nil {
		if total(h) < total(s.last) || resent < s.lastResent {
			s.before, s.beforeResent = addBuckets(s.before, s.last), s.beforeResent+s.lastResent
		}
		s.last, s.lastResent = h, resent
	}
	return addBuckets(s.before, s.last), s.beforeResent + s.lastResent
}

func fetchMetrics(url string) ([]bucket, int64, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", url, err)
	}
	var h []bucket
	var resent int64
	if f, ok := families["grpc_server_ce_first_status_latency_seconds"]; ok {
		h = histogram(f)
	}
	if f, ok := families["grpc_server_ce_specs_resent_total"]; ok {
		resent = counter(f)
	}
	return h, resent, nil
}

func total(h []bucket) uint64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].Count
}

// addBuckets adds two cumulative histograms of the same bounds.
func addBuckets(a, b []bucket) []bucket {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := append([]bucket(nil), a...)
	for i := range b {
		out[i].Count += b[i].Count
	}
	return out
}
