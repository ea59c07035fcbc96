package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"golang.org/x/sync/errgroup"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/options"
)

// The raw phase is the fleet's ceiling: the same number of works go as
// spec events of the same size from the hub's process to every agent's,
// and a status event of the same size comes back for each, through the
// same broker, processes and connections' kind, with nothing above the
// transport (no codec on receipt, no store, no informer, no
// acknowledgements). It runs before the SDK's agents start, under a source
// of its own, so that no SDK client hears it. Every phase's works/s is
// reported against it.

// rawSource is the raw phase's source ID.
const rawSource = "fleet-raw"

// rawSenders is how many goroutines send the raw specs: the hub's
// publisher has as many workers.
const rawSenders = 16

var (
	specType   = types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	statusType = types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
)

// rawWork is the work every raw event is made from, as the hub's create
// makes its works.
func rawWork(c common) *workv1.ManifestWork {
	w := benchworks.Works(1, 1, c.manifestBytes)[0]
	w.UID, w.Generation = "00000000-0000-4000-8000-000000000000", 1
	w.Annotations = map[string]string{codec.OriginalSourceAnnotation: rawSource}
	return w
}

// rawID is the resource ID of the raw phase's work i.
func rawID(i int) string { return "raw-" + strconv.Itoa(i) }

type rawRequest struct {
	Count int `json:"count"` // works, work i to cluster i modulo the fleet's
}

type rawResult struct {
	Seconds float64 `json:"seconds"`
}

// raw sends r.Count spec events and returns once a status came back for
// each, timed from the first send.
func (h *hub) raw(ctx context.Context, r rawRequest) (rawResult, error) {
	if r.Count < 1 {
		return rawResult{}, fmt.Errorf("count %d: want at least 1", r.Count)
	}
	cfg, err := h.c.transportConfig()
	if err != nil {
		return rawResult{}, err
	}
	tmpl, err := codec.NewManifestBundleCodec().Encode(rawSource, specType, rawWork(h.c))
	if err != nil {
		return rawResult{}, err
	}
	statuses := &rawStatuses{seen: make([]atomic.Bool, r.Count), all: make(chan struct{})}
	tr, err := cfg.NewTransport()
	if err != nil {
		return rawResult{}, err
	}
	defer tr.Close(context.Background())
	dataTypes := []string{codec.ManifestBundlesDataType.String()}
	if err := tr.Start(ctx, options.SourceSubscriptions(rawSource, dataTypes), statuses); err != nil {
		return rawResult{}, err
	}
	began := time.Now()
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range rawSenders {
		g.Go(func() error {
			for i := int(next.Add(1) - 1); i < r.Count; i = int(next.Add(1) - 1) {
				cluster := benchworks.ClusterName(i, h.c.clusters)
				evt := tmpl.Clone()
				evt.SetID(rawID(i))
				evt.SetExtension(types.ExtResourceID, rawID(i))
				evt.SetExtension(types.ExtClusterName, cluster)
				if err := tr.Send(gctx, options.Route{Role: options.RoleSpec, Source: rawSource, Cluster: cluster}, &evt); err != nil {
					return fmt.Errorf("raw spec %d to %s: %w", i, cluster, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return rawResult{}, err
	}
	select {
	case <-ctx.Done():
		return rawResult{}, fmt.Errorf("%d of %d raw statuses came back: %w", statuses.count.Load(), r.Count, context.Cause(ctx))
	case <-statuses.all:
		return rawResult{Seconds: time.Since(began).Seconds()}, nil
	}
}

// rawStatuses counts the raw statuses that came back, each work once; all
// closes when every one did.
type rawStatuses struct {
	seen  []atomic.Bool
	count atomic.Int64
	all   chan struct{}
}

func (s *rawStatuses) Deliver(d *options.Delivery) {
	defer d.Done()
	id, _, _ := types.StringExtension(d.Event, types.ExtResourceID)
	i, err := strconv.Atoi(strings.TrimPrefix(id, "raw-"))
	if err != nil || i < 0 || i >= len(s.seen) || s.seen[i].Swap(true) {
		return
	}
	if s.count.Add(1) == int64(len(s.seen)) {
		close(s.all) // once: each work counts once
	}
}

func (*rawStatuses) Malformed(error) {}
func (*rawStatuses) Connected()      {}

// rawAgents are an agent host's raw agents: a transport per cluster that
// answers each spec with a status.
type rawAgents struct {
	mu     sync.Mutex
	agents []*rawAgent
}

type rawAgent struct {
	tr      options.Transport
	cluster string
	tmpl    *cloudevents.Event
	replies chan string // resource IDs to answer
	done    chan struct{}
}

// start starts the raw agent of cluster.
func (a *rawAgents) start(ctx context.Context, c common, cluster string) error {
	cfg, err := c.transportConfig()
	if err != nil {
		return err
	}
	w := rawWork(c)
	w.Namespace = cluster
	benchworks.ApplyStatus(w)
	tmpl, err := codec.NewManifestBundleCodec().Encode(cluster, statusType, w)
	if err != nil {
		return err
	}
	tr, err := cfg.NewTransport()
	if err != nil {
		return err
	}
	ra := &rawAgent{tr: tr, cluster: cluster, tmpl: tmpl, replies: make(chan string, c.worksPerCluster+1), done: make(chan struct{})}
	if err := tr.Start(ctx, options.AgentSubscriptions(cluster, []string{codec.ManifestBundlesDataType.String()}), ra); err != nil {
		_ = tr.Close(context.Background())
		return fmt.Errorf("raw agent of %s: %w", cluster, err)
	}
	go ra.reply()
	a.mu.Lock()
	a.agents = append(a.agents, ra)
	a.mu.Unlock()
	return nil
}

// Deliver queues a status for each spec: the transport's receive
// goroutine must not wait for a send.
func (ra *rawAgent) Deliver(d *options.Delivery) {
	defer d.Done()
	if d.Route.Role != options.RoleSpec {
		return
	}
	id, _, _ := types.StringExtension(d.Event, types.ExtResourceID)
	select {
	case ra.replies <- id:
	case <-ra.done:
	}
}

func (*rawAgent) Malformed(error) {}
func (*rawAgent) Connected()      {}

// reply sends a status for each spec, until the agent closes.
func (ra *rawAgent) reply() {
	route := options.Route{Role: options.RoleStatus, Source: rawSource, Cluster: ra.cluster}
	for {
		select {
		case <-ra.done:
			return
		case id := <-ra.replies:
			evt := ra.tmpl.Clone()
			evt.SetID(id + "-status")
			evt.SetExtension(types.ExtResourceID, id)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := ra.tr.Send(ctx, route, &evt); err != nil {
				fmt.Printf("raw agent of %s: status of %s: %v\n", ra.cluster, id, err)
			}
			cancel()
		}
	}
}

// close stops every raw agent.
func (a *rawAgents) close() {
	a.mu.Lock()
	agents := a.agents
	a.agents = nil
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, ra := range agents {
		close(ra.done)
		wg.Go(func() { _ = ra.tr.Close(context.Background()) })
	}
	wg.Wait()
}
