// Package quickstart is the quickstart command: the whole protocol in one
// process, over an embedded broker. examples/quickstart runs it over MQTT,
// Kafka and gRPC; examples/brokers/quickstart, in a module of its own, also
// over NATS JetStream and Google Cloud Pub/Sub, whose libraries the main
// module does not require.
package quickstart

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/metrics"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// A Broker is a transport the quickstart can run over besides MQTT, Kafka
// and gRPC: -transport Name.
type Broker struct {
	Name string
	// Connect returns how to make a client's transport for the broker at
	// address, or, when address is "", for an embedded broker it starts,
	// saying where on out, and stop stops. What it makes on a broker at
	// address is named after run, the run's ID.
	Connect func(address, run string, out io.Writer) (newTransport func(logr.Logger) (options.Transport, error), stop func(), err error)
}

// Main runs the quickstart with the command line's flags and exits: 0 when
// every change round-tripped, 1 when not, 2 on a bad flag.
func Main(more ...Broker) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, more...)
	stop()
	cmdutil.Exit("quickstart", err)
}

// Run runs the quickstart with the flags args, printing its progress on
// out.
func Run(ctx context.Context, args []string, out io.Writer, more ...Broker) error {
	cfg := config{brokers: more}
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.IntVar(&cfg.clusters, "clusters", 5, "how many clusters (agents)")
	fs.IntVar(&cfg.works, "works", 500, "how many ManifestWorks to send")
	fs.StringVar(&cfg.transport, "transport", "mqtt", strings.Join(transports(more), ", "))
	fs.StringVar(&cfg.broker, "broker", "", "broker address, host:port (Kafka: comma-separated) (default: start an embedded one)")
	fs.StringVar(&cfg.id, "id", "", "this run's ID, in its hub's and clusters' names (quickstart-hub-ID, cluster-ID-1, ...) and in what it makes on a NATS or Pub/Sub broker (default: random)")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "give up after this long")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://<this address>/metrics, and keep serving after the run until interrupted")
	if err := cmdutil.Parse(fs, args); err != nil {
		return err
	}
	if cfg.id != "" && !runIDPattern.MatchString(cfg.id) {
		err := fmt.Errorf("-id %q: want 1 to 20 lower-case letters, digits and '-', not starting or ending with '-'", cfg.id)
		fmt.Fprintln(fs.Output(), err)
		return cmdutil.UsageError{Err: err}
	}
	return run(ctx, cfg, out)
}

// runIDPattern keeps a run's ID within every name it goes in: Kubernetes
// names, NATS subjects and streams, a Pub/Sub project ID.
var runIDPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$`)

type config struct {
	clusters, works int
	id              string
	transport       string
	broker          string
	timeout         time.Duration
	metricsAddr     string
	brokers         []Broker // besides MQTT, Kafka and gRPC
}

var bundles = types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceSpec}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.clusters < 1 || cfg.works < 1 {
		return errors.New("-clusters and -works must be at least 1")
	}
	if cfg.id == "" {
		cfg.id = uuid.NewString()[:8]
	}
	interrupted := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	began := time.Now()

	// Every client reports to obs; with -metrics-addr it is served.
	var obs generic.Observer = generic.NopObserver{}
	track := func(generic.Side, func() generic.Stats) {}
	if cfg.metricsAddr != "" {
		reg := prometheus.NewRegistry()
		o, err := metrics.NewObserver(reg)
		if err != nil {
			return err
		}
		stopServing, err := cmdutil.Serve(cfg.metricsAddr, "metrics", "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), out)
		if err != nil {
			return err
		}
		defer stopServing()
		obs, track = o, func(side generic.Side, stats func() generic.Stats) { o.Track(side, stats) }
	}

	newTransport, stop, err := connect(cfg, out)
	if err != nil {
		return err
	}
	defer stop()
	// IDs of this run's own, so that runs sharing a broker do not mix.
	suffix := cfg.id
	hubID := "quickstart-hub-" + suffix
	clusterName := func(i int) string { return fmt.Sprintf("cluster-%s-%d", suffix, i%cfg.clusters+1) }

	// The hub: a source whose store is the truth. Statuses from agents land
	// in it; a status with the Deleted condition completes a deletion.
	hubStore := newStore(func(*workv1.ManifestWork) string { return hubID })
	// Its transport logs at klog's default level, which says when the
	// broker cannot be reached; the agents' say the same and stay quiet.
	tr, err := newTransport(klog.Background())
	if err != nil {
		return err
	}
	hub, err := generic.NewSourceClient(hubID, tr, hubStore, codec.StatusHash,
		[]generic.Codec[*workv1.ManifestWork]{codec.NewManifestBundleCodec()}, generic.WithLogger(logr.Discard()), generic.WithObserver(obs))
	if err != nil {
		return err
	}
	track(generic.SideSource, func() generic.Stats { s := hub.Stats(); s.Held = hubStore.len(); return s })
	var statuses atomic.Int64
	if err := hub.Subscribe(func(_ context.Context, _ types.EventType, status *workv1.ManifestWork) error {
		statuses.Add(1)
		hubStore.update(status.UID, func(w *workv1.ManifestWork) bool {
			if meta.IsStatusConditionTrue(status.Status.Conditions, codec.WorkDeleted) {
				return false // the agent cleaned up: forget the work
			}
			w.Status = status.Status
			return true
		})
		return nil
	}); err != nil {
		return err
	}
	if err := hub.Start(ctx); err != nil {
		return err
	}
	defer hub.Close(context.Background())

	// The agents: each applies what it gets and reports back.
	for i := range cfg.clusters {
		tr, err := newTransport(logr.Discard())
		if err != nil {
			return err
		}
		agent, agentStore, err := startAgent(ctx, tr, clusterName(i), obs)
		if err != nil {
			return err
		}
		track(generic.SideAgent, func() generic.Stats { s := agent.Stats(); s.Held = agentStore.len(); return s })
		defer agent.Close(context.Background())
	}
	fmt.Fprintf(out, "hub %s and %d agents (%s to %s) connected in %v\n", hubID, cfg.clusters,
		clusterName(0), clusterName(cfg.clusters-1), time.Since(began).Round(time.Millisecond))

	// 1. Create. Each phase shows its progress from its first publish.
	if err := phase(ctx, out, "delivered and Available", func() error {
		for i := range cfg.works {
			w := newWork(clusterName(i), fmt.Sprintf("web-%d", i), 1)
			hubStore.put(w)
			if err := hub.Publish(ctx, with(bundles, types.CreateRequest), w); err != nil {
				return err
			}
		}
		return nil
	}, func() (int, int) { return hubStore.count(availableAt(1)), cfg.works }); err != nil {
		return err
	}

	// 2. Update every other work to two replicas: a new generation.
	updated := (cfg.works + 1) / 2
	if err := phase(ctx, out, "updated to 2 replicas", func() error {
		for _, w := range hubStore.all()[:updated] {
			w = w.DeepCopy()
			w.Generation++
			w.Spec.Workload.Manifests[0] = deployment(w.Name, 2)
			hubStore.put(w)
			if err := hub.Publish(ctx, with(bundles, types.UpdateRequest), w); err != nil {
				return err
			}
		}
		return nil
	}, func() (int, int) { return hubStore.count(availableAt(2)), updated }); err != nil {
		return err
	}

	// 3. Delete a third. The hub keeps each work until its agent reports it
	// Deleted; a lost delete would be sent again by resync.
	deleted := (cfg.works + 2) / 3
	remaining := cfg.works - deleted
	if err := phase(ctx, out, "deletes confirmed", func() error {
		for _, w := range hubStore.all()[:deleted] {
			w = w.DeepCopy()
			w.Generation++
			w.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			hubStore.put(w)
			if err := hub.Publish(ctx, with(bundles, types.DeleteRequest), w); err != nil {
				return err
			}
		}
		return nil
	}, func() (int, int) { return cfg.works - hubStore.len(), deleted }); err != nil {
		return err
	}

	fmt.Fprintf(out, "summary: %d works delivered, %d statuses back, %d updates and %d deletes confirmed, %d works left, in %v\n",
		cfg.works, statuses.Load(), updated, deleted, remaining, time.Since(began).Round(time.Millisecond))
	if cfg.metricsAddr != "" {
		// The clients stay up, so a scrape sees them as the run left them.
		fmt.Fprintln(out, "serving metrics until interrupted (Ctrl-C)")
		<-interrupted.Done()
	}
	return nil
}

func with(t types.EventType, a types.Action) types.EventType { t.Action = a; return t }

// phase runs publish on its own goroutine and polls progress until done ==
// want and publish returned. On a terminal it shows the count as it
// changes, from the start.
func phase(ctx context.Context, out io.Writer, what string, publish func() error, progress func() (done, want int)) error {
	began := time.Now()
	published := make(chan error, 1)
	go func() { published <- publish() }()
	live := isTerminal(out)
	last := -1
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		done, want := progress()
		if live && done != last {
			fmt.Fprintf(out, "\r%-24s %6d/%d", what, done, want)
			last = done
		}
		if done >= want && published == nil {
			if live {
				fmt.Fprint(out, "\r")
			}
			fmt.Fprintf(out, "%-24s %6d/%d  (%v)\n", what, done, want, time.Since(began).Round(time.Millisecond))
			return nil
		}
		select {
		case err := <-published:
			if err != nil {
				return err
			}
			published = nil // done: a nil channel blocks
		case <-ctx.Done():
			if published != nil {
				<-published // ends with ctx
			}
			fmt.Fprintln(out)
			return fmt.Errorf("%s: %d of %d after %v: %w", what, done, want, time.Since(began).Round(time.Millisecond), ctx.Err())
		case <-tick.C:
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// connect starts the embedded broker of cfg.transport, unless cfg.broker
// names one, and returns how to make a transport to it.
func connect(cfg config, out io.Writer) (newTransport func(logr.Logger) (options.Transport, error), stop func(), err error) {
	stop = func() {}
	switch cfg.transport {
	case "mqtt":
		addr := cfg.broker
		if addr == "" {
			b, err := mqtttest.Start()
			if err != nil {
				return nil, nil, err
			}
			addr, stop = b.Addr(), func() { _ = b.Close() }
			fmt.Fprintf(out, "embedded MQTT broker on %s\n", addr)
		}
		return checked(func(log logr.Logger) (options.Transport, error) {
			return mqtt.New(mqtt.Config{BrokerHost: addr}, mqtt.WithLogger(log))
		}, stop)
	case "kafka":
		addrs := strings.Split(cfg.broker, ",")
		if cfg.broker == "" {
			b, err := kafkatest.Start()
			if err != nil {
				return nil, nil, err
			}
			addrs, stop = b.Addrs(), func() { _ = b.Close() }
			fmt.Fprintf(out, "embedded Kafka cluster (kfake) on %s\n", strings.Join(addrs, ","))
		}
		return checked(func(log logr.Logger) (options.Transport, error) {
			return kafka.New(kafka.Config{Brokers: addrs}, kafka.WithLogger(log))
		}, stop)
	case "grpc":
		addr := cfg.broker
		if addr == "" {
			srv, err := server.New(server.Config{}, server.WithLogger(logr.Discard()))
			if err != nil {
				return nil, nil, err
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, nil, err
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx, lis) }()
			addr, stop = lis.Addr().String(), func() { cancel(); <-done }
			fmt.Fprintf(out, "embedded gRPC broker on %s\n", addr)
		}
		return checked(func(log logr.Logger) (options.Transport, error) {
			return grpc.New(grpc.Config{ServerAddress: addr}, grpc.WithLogger(log))
		}, stop)
	}
	for _, b := range cfg.brokers {
		if b.Name == cfg.transport {
			newTransport, stop, err := b.Connect(cfg.broker, cfg.id, out)
			if err != nil {
				return nil, nil, err
			}
			return checked(newTransport, stop)
		}
	}
	return nil, nil, cmdutil.UnknownTransport(cfg.transport, "quickstart", transports(cfg.brokers))
}

// transports are the -transport values: MQTT, Kafka, gRPC and brokers.
func transports(brokers []Broker) []string {
	var more []string
	for _, b := range brokers {
		more = append(more, b.Name)
	}
	return cmdutil.Transports(more...)
}

// checked returns newTransport and stop once newTransport has made a
// transport, so a bad -broker is an error before anything starts.
func checked(newTransport func(logr.Logger) (options.Transport, error), stop func()) (func(logr.Logger) (options.Transport, error), func(), error) {
	tr, err := newTransport(logr.Discard())
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("-broker: %w", err)
	}
	if err := tr.Close(context.Background()); err != nil {
		stop()
		return nil, nil, err
	}
	return newTransport, stop, nil
}

// startAgent runs one cluster's agent. Its store holds what it applied; the
// source of each work is the annotation the codec sets.
func startAgent(ctx context.Context, tr options.Transport, cluster string, obs generic.Observer) (*generic.AgentClient[*workv1.ManifestWork], *store, error) {
	st := newStore(func(w *workv1.ManifestWork) string { return w.Annotations[codec.OriginalSourceAnnotation] })
	agent, err := generic.NewAgentClient(cluster, tr, st, codec.StatusHash,
		[]generic.Codec[*workv1.ManifestWork]{codec.NewManifestBundleCodec()}, generic.WithLogger(logr.Discard()), generic.WithObserver(obs))
	if err != nil {
		return nil, nil, err
	}
	status := types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
	err = agent.Subscribe(func(ctx context.Context, t types.EventType, w *workv1.ManifestWork) error {
		if t.Action == types.DeleteRequest {
			st.remove(w.UID)
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
				Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "ManifestsDeleted", ObservedGeneration: w.Generation,
			})
			return agent.Publish(ctx, status, w)
		}
		apply(w)
		st.put(w)
		return agent.Publish(ctx, status, w)
	})
	if err != nil {
		return nil, nil, err
	}
	return agent, st, agent.Start(ctx)
}

// apply stands in for applying the manifests to a cluster: it reports every
// manifest Applied and Available, with its replicas as status feedback.
func apply(w *workv1.ManifestWork) {
	now := metav1.Now()
	w.Status.ResourceStatus.Manifests = nil
	for i, m := range w.Spec.Workload.Manifests {
		var d struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
			Spec     struct{ Replicas int64 }         `json:"spec"`
		}
		_ = json.Unmarshal(m.Raw, &d)
		w.Status.ResourceStatus.Manifests = append(w.Status.ResourceStatus.Manifests, workv1.ManifestCondition{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: int32(i), Group: "apps", Version: "v1", Kind: "Deployment",
				Resource: "deployments", Name: d.Metadata.Name, Namespace: d.Metadata.Namespace},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{
				Name: "availableReplicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To(d.Spec.Replicas)},
			}}},
			Conditions: []metav1.Condition{
				{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", LastTransitionTime: now},
				{Type: workv1.ManifestAvailable, Status: metav1.ConditionTrue, Reason: "ResourceAvailable", LastTransitionTime: now},
			},
		})
	}
	for _, c := range []string{workv1.WorkApplied, workv1.WorkAvailable} {
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: c, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: w.Generation,
		})
	}
}

// availableAt says whether the hub has seen w Available at its current
// generation with the given replicas fed back.
func availableAt(replicas int64) func(w *workv1.ManifestWork) bool {
	return func(w *workv1.ManifestWork) bool {
		c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkAvailable)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != w.Generation {
			return false
		}
		for _, m := range w.Status.ResourceStatus.Manifests {
			for _, v := range m.StatusFeedbacks.Values {
				if v.Name == "availableReplicas" && v.Value.Integer != nil && *v.Value.Integer == replicas {
					return true
				}
			}
		}
		return false
	}
}

func newWork(cluster, name string, replicas int64) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cluster, Generation: 1,
			UID:    kubetypes.UID(uuid.NewString()),
			Labels: map[string]string{"app": name},
		},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{deployment(name, replicas)}}},
	}
}

func deployment(name string, replicas int64) workv1.Manifest {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]string{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "nginx:1.27", "ports": []any{map[string]any{"containerPort": 80}},
				}}},
			},
		},
	})
	return workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}

// store is a goroutine-safe map of works that lists like a generic.Lister.
// Stored works are never modified in place: writers store copies.
type store struct {
	mu       sync.RWMutex
	works    map[kubetypes.UID]*workv1.ManifestWork
	sourceOf func(*workv1.ManifestWork) string
}

func newStore(sourceOf func(*workv1.ManifestWork) string) *store {
	return &store{works: make(map[kubetypes.UID]*workv1.ManifestWork), sourceOf: sourceOf}
}

func (s *store) put(w *workv1.ManifestWork) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.works[w.UID] = w.DeepCopy()
}

func (s *store) remove(uid kubetypes.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.works, uid)
}

// update applies fn to a copy of the work with uid; fn returning false
// removes the work instead.
func (s *store) update(uid kubetypes.UID, fn func(*workv1.ManifestWork) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.works[uid]
	if !ok {
		return
	}
	w = w.DeepCopy()
	if fn(w) {
		s.works[uid] = w
	} else {
		delete(s.works, uid)
	}
}

func (s *store) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.works)
}

func (s *store) count(pred func(*workv1.ManifestWork) bool) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, w := range s.works {
		if pred(w) {
			n++
		}
	}
	return n
}

func (s *store) all() []*workv1.ManifestWork {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*workv1.ManifestWork, 0, len(s.works))
	for _, w := range s.works {
		out = append(out, w)
	}
	return out
}

// List implements generic.Lister.
func (s *store) List(o generic.ListOptions) ([]*workv1.ManifestWork, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*workv1.ManifestWork
	for _, w := range s.works {
		if (o.ClusterName == "" || w.Namespace == o.ClusterName) && (o.Source == "" || s.sourceOf(w) == o.Source) {
			out = append(out, w)
		}
	}
	return out, nil
}
