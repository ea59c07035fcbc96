//go:build !compare_workwire

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1alpha1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1alpha1"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1listers "open-cluster-management.io/api/client/work/listers/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ocmcommon "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/common"
	ocmstatushash "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/statushash"
	ocmstore "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/store"
	ocmagentclient "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/agent/client"
	ocmagentcodec "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/agent/codec"
	ocmsourceclient "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/source/client"
	ocmsourcecodec "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/source/codec"
	ocmworkstore "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/store"
	ocmclients "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/clients"
	ocmoptions "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options"
	ocmmqtt "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options/mqtt"
	ocmmqttv2 "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options/v2/mqtt"
	ocmtypes "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/types"
	ocmutils "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/utils"

	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
)

const ocmModule = "open-cluster-management.io/sdk-go"

// ocmDriver runs OCM's sdk-go: its generic CloudEvents clients over its
// MQTT transport, its ManifestWork source and agent clients over its
// informer watcher stores, and informers from the work informer factory,
// wired as its ClientHolders wire them (clients/options.GenericClientOptions)
// but for the publish rate limit. That limit (generic/utils.EventRateLimit,
// 50 events/s with bursts of 100 by default) is fixed on the ClientHolders'
// path: off, it is infinite here; with -rate-limit, OCM's default.
type ocmDriver struct {
	cfg       config
	base      context.Context // every client's lifetime, with the logger
	mqtt      *ocmmqtt.MQTTOptions
	rateLimit ocmutils.EventRateLimit
	clientSeq int // suffix of the clients' IDs, unique in the broker

	hub    *ocmHub
	agents []*ocmAgent

	// lostByHub is how many works the hub's own informer did not hold
	// when hub-resync began.
	lostByHub int
}

func init() {
	drivers[sdkOCM] = func(ctx context.Context, cfg config, broker string, _ logr.Logger) (driver, error) {
		return newOCM(ctx, cfg, broker)
	}
}

func newOCM(ctx context.Context, cfg config, broker string) (*ocmDriver, error) {
	opts, err := ocmMQTTOptions(broker)
	if err != nil {
		return nil, err
	}
	d := &ocmDriver{cfg: cfg, base: ctx, mqtt: opts}
	if !cfg.rateLimit {
		// flowcontrol's token bucket never waits at an infinite rate.
		d.rateLimit = ocmutils.EventRateLimit{QPS: float32(math.Inf(1)), Burst: 1}
	}
	return d, nil
}

// ocmMQTTOptions loads the options from a config file, as OCM's programs
// do, so that what the file does not say is OCM's default (QoS 1 both
// ways, keep-alive 60s); the topics are OCM's, for hubID.
func ocmMQTTOptions(broker string) (*ocmmqtt.MQTTOptions, error) {
	dir, err := os.MkdirTemp("", "compare-ocm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "mqtt.yaml")
	config := fmt.Sprintf(`brokerHost: %s
topics:
  sourceEvents: sources/%[2]s/clusters/+/sourceevents
  agentEvents: sources/%[2]s/clusters/+/agentevents
  sourceBroadcast: sources/+/sourcebroadcast
  agentBroadcast: clusters/+/agentbroadcast
`, broker, hubID)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	return ocmmqtt.BuildMQTTOptionsFromFlags(path)
}

func (d *ocmDriver) describe() string {
	v := moduleVersion(ocmModule)
	if v == "" {
		v = "(unknown version)"
	}
	return fmt.Sprintf("sdk ocm (%s %s), MQTT v5 (OCM topics, binary content mode, pubQoS %d, subQoS %d)",
		ocmModule, v, d.mqtt.PubQoS, d.mqtt.SubQoS)
}

func (d *ocmDriver) notes() []string {
	n := []string{
		"wiring: OCM's ClientHolders (clients/work.NewSourceClientHolder, NewAgentClientHolder) fix the publish rate limit at 50 events/s (bursts of 100); the same pieces are wired here from OCM's public API with the limit chosen (off unless -rate-limit)",
		"wiring: each client has MQTT options of its own: OCM's MQTTDialer keeps the connection it dialled last in a field, so clients that share one options value and connect at once race",
		"deliver: each work is created with OCM's version annotation (" + ocmcommon.CloudEventsResourceVersionAnnotationKey + ": \"1\"), as OCM hubs state a work's version",
		"status: OCM's agent client answers UpdateStatus with MethodNotSupported; each agent merge-patches the status subresource instead (the same status, with the resourceVersion it read), retried on Conflict",
		"hub-resync: the fresh hub's source informer watcher store is given the works without their statuses (as a source over a database starts) before the clock starts, but the client is connected then too: OCM's client connects when built; it subscribes, and resyncs, after the clock starts",
	}
	if d.lostByHub > 0 {
		n = append(n, fmt.Sprintf("the hub's own informer did not hold %d of the works it created when hub-resync began", d.lostByHub))
	}
	return n
}

// options returns MQTT options of its own for one client: OCM's dialer
// keeps the connection it dialled last, so clients that share one race.
func (d *ocmDriver) options() *ocmmqtt.MQTTOptions {
	o := *d.mqtt
	dialer := *d.mqtt.Dialer // never dialled
	o.Dialer = &dialer
	return &o
}

func (d *ocmDriver) clientID(name string) string {
	d.clientSeq++
	return fmt.Sprintf("%s-%d", name, d.clientSeq)
}

// ocmClientset is a workv1 clientset whose ManifestWorks are OCM's
// ManifestWork clients, for the informer factory: OCM's own wrapper is
// internal to its module.
type ocmClientset struct{ v1 ocmWorkV1 }

var _ versioned.Interface = (*ocmClientset)(nil)

func (c *ocmClientset) Discovery() discovery.DiscoveryInterface                { return nil }
func (c *ocmClientset) WorkV1() workv1client.WorkV1Interface                   { return c.v1 }
func (c *ocmClientset) WorkV1alpha1() workv1alpha1client.WorkV1alpha1Interface { return nil }

type ocmWorkV1 struct {
	works func(namespace string) workv1client.ManifestWorkInterface
}

func (c ocmWorkV1) ManifestWorks(namespace string) workv1client.ManifestWorkInterface {
	return c.works(namespace)
}
func (c ocmWorkV1) AppliedManifestWorks() workv1client.AppliedManifestWorkInterface { return nil }
func (c ocmWorkV1) RESTClient() rest.Interface                                      { return nil }

// resyncOnSubscribe resyncs each time subscribed says the client
// subscribed, once initiated says the store is ready, as OCM's
// GenericClientOptions do, until ctx ends.
func resyncOnSubscribe(ctx context.Context, subscribed <-chan struct{}, initiated func() bool, resync func(context.Context) error) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-subscribed:
		}
		for !initiated() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err := resync(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "failed to send resync request")
		}
	}
}

// ocmHub is OCM's ManifestWork source: its client over its source
// informer watcher store, and the informer the store is backed by.
type ocmHub struct {
	ctx       context.Context
	cancel    context.CancelFunc
	transport ocmoptions.CloudEventTransport
	client    *ocmclients.CloudEventSourceClient[*workv1.ManifestWork]
	store     *ocmworkstore.SourceInformerWatcherStore
	informer  cache.SharedIndexInformer
	clientset *ocmClientset
	wg        sync.WaitGroup // the informer and resyncOnSubscribe
}

// newHub builds a hub, connects its client and syncs its informer; it is
// not subscribed yet.
func (d *ocmDriver) newHub(ctx context.Context) (*ocmHub, error) {
	hctx, cancel := context.WithCancel(d.base)
	h := &ocmHub{ctx: hctx, cancel: cancel, store: ocmworkstore.NewSourceInformerWatcherStore(hctx)}
	opts := ocmmqttv2.NewSourceOptions(d.options(), d.clientID(hubID), hubID)
	opts.EventRateLimit = d.rateLimit
	h.transport = opts.CloudEventsTransport
	client, err := ocmclients.NewCloudEventSourceClient[*workv1.ManifestWork](hctx, opts,
		ocmstore.NewSourceWatcherStoreLister[*workv1.ManifestWork](h.store),
		ocmstatushash.StatusHash[*workv1.ManifestWork], ocmsourcecodec.NewManifestBundleCodec())
	if err != nil {
		h.close()
		return nil, err
	}
	h.client = client
	// A client per namespace: OCM's source client keeps its namespace in
	// a field that ManifestWorks(namespace) sets.
	h.clientset = &ocmClientset{v1: ocmWorkV1{works: func(ns string) workv1client.ManifestWorkInterface {
		c := ocmsourceclient.NewManifestWorkSourceClient(hubID, h.store, client)
		c.SetNamespace(ns)
		return c
	}}}
	h.informer = workinformers.NewSharedInformerFactoryWithOptions(h.clientset, informerResync).Work().V1().ManifestWorks().Informer()
	h.store.SetInformer(h.informer)
	h.wg.Go(func() { h.informer.Run(hctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), h.informer.HasSynced) {
		h.close()
		return nil, fmt.Errorf("the hub's informer did not sync: %w", context.Cause(ctx))
	}
	return h, nil
}

// subscribe subscribes the hub, which then resyncs statuses with every
// cluster.
func (h *ocmHub) subscribe() {
	h.client.Subscribe(h.ctx, h.store.HandleReceivedResource)
	h.wg.Go(func() {
		resyncOnSubscribe(h.ctx, h.client.SubscribedChan(), h.store.HasInitiated, func(ctx context.Context) error {
			return h.client.Resync(ctx, ocmtypes.ClusterAll)
		})
	})
}

func (h *ocmHub) close() {
	h.cancel()
	h.wg.Wait()
	closeTransport(h.transport)
}

// closeTransport disconnects an OCM transport: cancelling its client's
// context stops the client's goroutines but leaves the connection open.
func closeTransport(t ocmoptions.CloudEventTransport) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = t.Close(ctx)
}

func (d *ocmDriver) startHub(ctx context.Context) error {
	h, err := d.newHub(ctx)
	if err != nil {
		return err
	}
	h.subscribe()
	d.hub = h
	return nil
}

// ocmAgent is OCM's ManifestWork agent: its client over its agent informer
// watcher store, and an informer of its cluster's works.
type ocmAgent struct {
	cluster   string
	cancel    context.CancelFunc
	transport ocmoptions.CloudEventTransport
	works     *ocmagentclient.ManifestWorkAgentClient
	informer  cache.SharedIndexInformer
	wg        sync.WaitGroup // the informer and resyncOnSubscribe
}

func (d *ocmDriver) startAgents(ctx context.Context, added func(*workv1.ManifestWork)) error {
	d.agents = make([]*ocmAgent, d.cfg.clusters)
	errs := make([]error, d.cfg.clusters)
	var wg sync.WaitGroup
	for i := range d.cfg.clusters {
		if !d.cfg.runsAgent(i) {
			continue
		}
		cluster := benchworks.ClusterName(i, d.cfg.clusters)
		id, opts := d.clientID(cluster), d.options()
		wg.Go(func() { d.agents[i], errs[i] = d.startAgent(ctx, cluster, id, opts, added) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startAgent wires an agent as OCM's NewAgentClientHolder does (subscribe,
// then resync once subscribed), then runs its informer as OCM's work agent
// does, and returns once the informer synced.
func (d *ocmDriver) startAgent(ctx context.Context, cluster, id string, mqttOpts *ocmmqtt.MQTTOptions, added func(*workv1.ManifestWork)) (*ocmAgent, error) {
	actx, cancel := context.WithCancel(d.base)
	a := &ocmAgent{cluster: cluster, cancel: cancel}
	store := ocmworkstore.NewAgentInformerWatcherStore()
	opts := ocmmqttv2.NewAgentOptions(mqttOpts, cluster, id)
	opts.EventRateLimit = d.rateLimit
	a.transport = opts.CloudEventsTransport
	client, err := ocmclients.NewCloudEventAgentClient[*workv1.ManifestWork](actx, opts,
		ocmstore.NewAgentWatcherStoreLister[*workv1.ManifestWork](store),
		ocmstatushash.StatusHash[*workv1.ManifestWork], ocmagentcodec.NewManifestBundleCodec())
	if err != nil {
		a.close()
		return nil, err
	}
	a.works = ocmagentclient.NewManifestWorkAgentClient(actx, cluster, store, client)
	a.works.SetNamespace(cluster)
	client.Subscribe(actx, store.HandleReceivedResource)
	a.wg.Go(func() {
		resyncOnSubscribe(actx, client.SubscribedChan(), store.HasInitiated, func(ctx context.Context) error {
			return client.Resync(ctx, ocmtypes.SourceAll)
		})
	})
	cs := &ocmClientset{v1: ocmWorkV1{works: func(string) workv1client.ManifestWorkInterface { return a.works }}}
	a.informer = workinformers.NewSharedInformerFactoryWithOptions(cs, informerResync, workinformers.WithNamespace(cluster)).
		Work().V1().ManifestWorks().Informer()
	if _, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { added(obj.(*workv1.ManifestWork)) },
	}); err != nil {
		a.close()
		return nil, err
	}
	a.wg.Go(func() { a.informer.Run(actx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced) {
		a.close()
		return nil, fmt.Errorf("the informer of %s did not sync: %w", cluster, context.Cause(ctx))
	}
	return a, nil
}

func (a *ocmAgent) close() {
	a.cancel()
	a.wg.Wait()
	closeTransport(a.transport)
}

func (d *ocmDriver) create(ctx context.Context, w *workv1.ManifestWork) error {
	w = w.DeepCopy()
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[ocmcommon.CloudEventsResourceVersionAnnotationKey] = "1"
	_, err := d.hub.clientset.WorkV1().ManifestWorks(w.Namespace).Create(ctx, w, metav1.CreateOptions{})
	return err
}

func (d *ocmDriver) hubInformer() cache.SharedIndexInformer { return d.hub.informer }

// reportApplied patches the status of every work the agent holds: OCM's
// agent client refuses UpdateStatus. The patch carries the resourceVersion
// it read, so that a status written over a newer one is a Conflict.
func (d *ocmDriver) reportApplied(ctx context.Context, i int) error {
	a := d.agents[i]
	list, err := workv1listers.NewManifestWorkLister(a.informer.GetIndexer()).ManifestWorks(a.cluster).List(labels.Everything())
	if err != nil {
		return err
	}
	return benchworks.ReportApplied(ctx, a.works, list, func(ctx context.Context, w *workv1.ManifestWork) error {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": w.ResourceVersion},
			"status":   w.Status,
		})
		if err != nil {
			return err
		}
		_, err = a.works.Patch(ctx, w.Name, kubetypes.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
}

func (d *ocmDriver) closeAgents() {
	var wg sync.WaitGroup
	for _, a := range d.agents {
		if a != nil {
			wg.Go(a.close)
		}
	}
	wg.Wait()
	d.agents = nil
}

// restartHub keeps what the hub's informer holds without the statuses, as
// a database would, closes the hub, and builds a fresh one whose store
// holds those works. start subscribes it: it resyncs statuses then.
func (d *ocmDriver) restartHub(ctx context.Context, appliedName func(string)) (func(context.Context) error, error) {
	var persisted []*workv1.ManifestWork
	for _, obj := range d.hub.informer.GetStore().List() {
		w := obj.(*workv1.ManifestWork).DeepCopy()
		w.Status = workv1.ManifestWorkStatus{}
		persisted = append(persisted, w)
	}
	if d.lostByHub = d.cfg.works - len(persisted); d.lostByHub > 0 {
		return nil, fmt.Errorf("the hub's informer held %d of the %d works it created", len(persisted), d.cfg.works)
	}
	d.hub.close()
	d.hub = nil
	h, err := d.newHub(ctx)
	if err != nil {
		return nil, err
	}
	d.hub = h
	mark := func(obj any) {
		if w, ok := obj.(*workv1.ManifestWork); ok && benchworks.Applied(w) {
			appliedName(w.Name)
		}
	}
	if _, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    mark,
		UpdateFunc: func(_, obj any) { mark(obj) },
	}); err != nil {
		return nil, err
	}
	for _, w := range persisted {
		if err := h.store.Add(w); err != nil {
			return nil, err
		}
	}
	// The store hands the works to its informer through a watch.
	for len(h.informer.GetStore().ListKeys()) < len(persisted) {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the fresh hub's informer holds %d of the %d works it was given: %w",
				len(h.informer.GetStore().ListKeys()), len(persisted), context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
	return func(context.Context) error {
		h.subscribe()
		return nil
	}, nil
}

func (d *ocmDriver) close() {
	d.closeAgents()
	if d.hub != nil {
		d.hub.close()
		d.hub = nil
	}
}
