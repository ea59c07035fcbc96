//go:build !compare_ocm

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/work"
)

// wwDriver runs workwire as examples/bench does: holders over MQTT from
// the public API, the SDK's defaults but for periodic resync (off, so that
// none runs in the middle of a measurement) and, unless -rate-limit, the
// publish rate limit (off).
type wwDriver struct {
	cfg       config
	transport work.TransportFunc
	log       logr.Logger

	hub    *work.ClientHolder
	agents []*work.ClientHolder
	// source is the hub after hub-resync: a source client over the
	// persisted works.
	source *generic.SourceClient[*workv1.ManifestWork]
}

func init() {
	drivers[sdkWorkwire] = func(_ context.Context, cfg config, broker string, log logr.Logger) (driver, error) {
		return newWorkwire(cfg, broker, log), nil
	}
}

func newWorkwire(cfg config, broker string, log logr.Logger) *wwDriver {
	mc := mqtt.Config{BrokerHost: broker}
	return &wwDriver{
		cfg: cfg, log: log,
		transport: func() (options.Transport, error) { return mqtt.New(mc, mqtt.WithLogger(log)) },
	}
}

func (d *wwDriver) describe() string {
	v := moduleVersion("github.com/workwire/sdk-go")
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("sdk workwire (github.com/workwire/sdk-go %s), MQTT v5 (workwire layout, binary content mode, QoS %d)",
		v, mqtt.DefaultQoS)
}

func (d *wwDriver) notes() []string {
	return []string{
		"status: each agent's UpdateStatus of every work it holds, from its lister, retried on Conflict, as examples/bench does",
		"hub-resync: workwire's hub holder keeps its works in memory and cannot start with persisted ones; as examples/bench does, the fresh hub is a generic.SourceClient over a lister of the works without their statuses, counted by its status handler",
	}
}

// clientOpts are the SDK's defaults, except the rate limit when asked, and
// no periodic resync in the middle of a measurement.
func (d *wwDriver) clientOpts() []generic.Option {
	opts := []generic.Option{generic.WithResyncInterval(0), generic.WithLogger(d.log)}
	if !d.cfg.rateLimit {
		opts = append(opts, generic.WithPublishRateLimit(0, 0))
	}
	return opts
}

func (d *wwDriver) sourceOpts() []generic.SourceOption {
	var opts []generic.SourceOption
	for _, o := range d.clientOpts() {
		opts = append(opts, o)
	}
	return opts
}

func (d *wwDriver) startHub(ctx context.Context) error {
	h, err := work.NewClientHolderBuilder(d.transport).WithSourceID(hubID).WithSourceOptions(d.sourceOpts()...).
		WithInformerResync(informerResync).WithLogger(d.log).NewClientHolder()
	if err != nil {
		return err
	}
	if err := h.Start(ctx); err != nil {
		closeHolder(h)
		return err
	}
	d.hub = h
	return nil
}

func (d *wwDriver) startAgents(ctx context.Context, added func(*workv1.ManifestWork)) error {
	var opts []generic.AgentOption
	for _, o := range d.clientOpts() {
		opts = append(opts, o)
	}
	d.agents = make([]*work.ClientHolder, d.cfg.clusters)
	errs := make([]error, d.cfg.clusters)
	var wg sync.WaitGroup
	for i := range d.cfg.clusters {
		if !d.cfg.runsAgent(i) {
			continue
		}
		h, err := work.NewClientHolderBuilder(d.transport).WithClusterName(benchworks.ClusterName(i, d.cfg.clusters)).WithAgentOptions(opts...).
			WithInformerResync(informerResync).WithLogger(d.log).NewClientHolder()
		if err != nil {
			errs[i] = err
			break
		}
		if _, err := h.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { added(obj.(*workv1.ManifestWork)) },
		}); err != nil {
			errs[i] = err
			break
		}
		d.agents[i] = h
		wg.Go(func() { errs[i] = h.Start(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *wwDriver) create(ctx context.Context, w *workv1.ManifestWork) error {
	_, err := d.hub.WorkInterface().WorkV1().ManifestWorks(w.Namespace).Create(ctx, w, metav1.CreateOptions{})
	return err
}

func (d *wwDriver) hubInformer() cache.SharedIndexInformer {
	return d.hub.ManifestWorkInformer().Informer()
}

// reportApplied updates the status of every work the agent holds, as a
// work agent's controller does, as examples/bench does.
func (d *wwDriver) reportApplied(ctx context.Context, i int) error {
	cluster := benchworks.ClusterName(i, d.cfg.clusters)
	h := d.agents[i]
	works := h.WorkInterface().WorkV1().ManifestWorks(cluster)
	list, err := h.ManifestWorkInformer().Lister().ManifestWorks(cluster).List(labels.Everything())
	if err != nil {
		return err
	}
	return benchworks.ReportApplied(ctx, works, list, func(ctx context.Context, w *workv1.ManifestWork) error {
		_, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
		return err
	})
}

func (d *wwDriver) closeAgents() {
	var wg sync.WaitGroup
	for _, h := range d.agents {
		if h != nil {
			wg.Go(func() { closeHolder(h) })
		}
	}
	wg.Wait()
	d.agents = nil
}

// restartHub keeps the hub's works without their statuses, as a database
// would, closes the hub, and builds a source client over them.
func (d *wwDriver) restartHub(ctx context.Context, appliedName func(string)) (func(context.Context) error, error) {
	// What the hub's informer holds, copied once, as on OCM's side.
	persisted := persistedWorks{byCluster: map[string][]*workv1.ManifestWork{}, names: map[kubetypes.UID]string{}}
	for _, obj := range d.hub.ManifestWorkInformer().Informer().GetStore().List() {
		w := obj.(*workv1.ManifestWork).DeepCopy()
		w.Status = workv1.ManifestWorkStatus{}
		persisted.byCluster[w.Namespace] = append(persisted.byCluster[w.Namespace], w)
		persisted.names[w.UID] = w.Name
	}
	if n := len(persisted.names); n != d.cfg.works {
		return nil, fmt.Errorf("the hub's informer held %d of the %d works it created", n, d.cfg.works)
	}
	closeHolder(d.hub)
	d.hub = nil

	tr, err := d.transport()
	if err != nil {
		return nil, err
	}
	src, err := generic.NewSourceClient(hubID, tr, persisted, codec.StatusHash,
		[]generic.Codec[*workv1.ManifestWork]{codec.NewManifestBundleCodec()}, d.sourceOpts()...)
	if err != nil {
		_ = tr.Close(context.Background())
		return nil, err
	}
	if err := src.Subscribe(func(_ context.Context, _ types.EventType, status *workv1.ManifestWork) error {
		if benchworks.Applied(status) {
			if name, ok := persisted.names[status.UID]; ok {
				appliedName(name)
			}
		}
		return nil
	}); err != nil {
		closeSource(src)
		return nil, err
	}
	d.source = src
	return src.Start, nil
}

func (d *wwDriver) close() {
	d.closeAgents()
	if d.hub != nil {
		closeHolder(d.hub)
		d.hub = nil
	}
	if d.source != nil {
		closeSource(d.source)
		d.source = nil
	}
}

func closeHolder(h *work.ClientHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = h.Close(ctx)
}

func closeSource(s *generic.SourceClient[*workv1.ManifestWork]) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.Close(ctx)
}

// persistedWorks lists works by cluster, as a source over a database
// would. It is read-only once built.
type persistedWorks struct {
	byCluster map[string][]*workv1.ManifestWork
	names     map[kubetypes.UID]string
}

func (p persistedWorks) List(o generic.ListOptions) ([]*workv1.ManifestWork, error) {
	if o.ClusterName != "" {
		return p.byCluster[o.ClusterName], nil
	}
	var out []*workv1.ManifestWork
	for _, ws := range p.byCluster {
		out = append(out, ws...)
	}
	return out, nil
}
