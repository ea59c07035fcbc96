package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// Env is the broker of a run and how clients reach it.
type Env struct {
	Transport work.TransportFunc // a fresh transport per client
	Close     func()
	// Dropped counts the messages the broker dropped for subscribers that
	// fell behind; nil where the broker does not tell.
	Dropped func() int64
	// Wire counts the bytes of the messages the clients sent and received
	// as they went on the wire (compressed, with their framing); nil where
	// the transport does not tell.
	Wire func() int64
}

// A Broker is a transport the bench can run over besides MQTT, Kafka and
// gRPC: -transport Name.
type Broker struct {
	Name string
	// Start returns the environment of a run over the broker at address,
	// or, when address is "", over an embedded broker that Env.Close stops.
	Start func(address string) (*Env, error)
}

// wireCounter counts the bytes of gRPC messages on the wire.
type wireCounter struct{ n atomic.Int64 }

func (c *wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.InPayload:
		c.n.Add(int64(p.WireLength))
	case *stats.OutPayload:
		c.n.Add(int64(p.WireLength))
	}
}

func (c *wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *wireCounter) HandleConn(context.Context, stats.ConnStats)                       {}

func newEnv(cfg config) (*Env, error) {
	switch cfg.transport {
	case "mqtt":
		addr, stop := cfg.broker, func() {}
		var dropped func() int64
		if addr == "" {
			b, err := mqtttest.Start()
			if err != nil {
				return nil, err
			}
			addr, stop, dropped = b.Addr(), func() { _ = b.Close() }, b.Dropped
		}
		mc := mqtt.Config{BrokerHost: addr, ContentMode: cfg.contentMode}
		return &Env{
			Transport: func() (options.Transport, error) { return mqtt.New(mc, mqtt.WithLogger(logr.Discard())) },
			Close:     stop,
			Dropped:   dropped,
		}, nil
	case "kafka":
		addrs, stop := strings.Split(cfg.broker, ","), func() {}
		if cfg.broker == "" {
			b, err := kafkatest.Start(kafkatest.WithPartitions(int32(cfg.kafkaPartitions)))
			if err != nil {
				return nil, err
			}
			addrs, stop = b.Addrs(), func() { _ = b.Close() }
		}
		kc := kafka.Config{Brokers: addrs}
		return &Env{
			Transport: func() (options.Transport, error) { return kafka.New(kc, kafka.WithLogger(logr.Discard())) },
			Close:     stop,
		}, nil
	case "grpc":
		addr, stop := cfg.broker, func() {}
		if addr == "" {
			srv, err := server.New(server.Config{Compression: cfg.compression}, server.WithLogger(logr.Discard()))
			if err != nil {
				return nil, err
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx, lis) }()
			addr, stop = lis.Addr().String(), func() { cancel(); <-done }
		}
		gc := grpc.Config{ServerAddress: addr, Compression: cfg.compression}
		wire := &wireCounter{}
		return &Env{
			Transport: func() (options.Transport, error) {
				return grpc.New(gc, grpc.WithLogger(logr.Discard()), grpc.WithDialOptions(grpclib.WithStatsHandler(wire)))
			},
			Close: stop,
			Wire:  wire.n.Load,
		}, nil
	}
	for _, b := range cfg.brokers {
		if b.Name == cfg.transport {
			return b.Start(cfg.broker)
		}
	}
	return nil, cmdutil.UnknownTransport(cfg.transport, "bench", transports(cfg.brokers))
}

// transports are the -transport values: MQTT, Kafka, gRPC and brokers.
func transports(brokers []Broker) []string {
	var more []string
	for _, b := range brokers {
		more = append(more, b.Name)
	}
	return cmdutil.Transports(more...)
}

var everything = labels.Everything()

// rawDeployment is a Deployment manifest of about size bytes named name.
func rawDeployment(name string, size int) runtime.RawExtension {
	tmpl := deploymentTemplate(size)
	return runtime.RawExtension{Raw: bytes.ReplaceAll(tmpl, []byte(placeholder), []byte(name))}
}

const placeholder = "NAME-PLACEHOLDER"

var templates sync.Map // size → []byte

func deploymentTemplate(size int) []byte {
	if t, ok := templates.Load(size); ok {
		return t.([]byte)
	}
	t := buildDeployment(placeholder, size).Raw
	templates.Store(size, t)
	return t
}

// buildDeployment is a Deployment manifest padded to about size bytes with
// realistic content: labels, annotations, env, resources, probes.
func buildDeployment(name string, size int) runtime.RawExtension {
	env := []map[string]string{}
	d := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": name, "namespace": "default",
			"labels":      map[string]string{"app": name, "team": "platform", "tier": "web"},
			"annotations": map[string]string{"workwire.io/bench": "true"},
		},
		"spec": map[string]any{
			"replicas": 2,
			"selector": map[string]any{"matchLabels": map[string]string{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "registry.example.com/web:1.27.3",
					"ports":          []any{map[string]any{"containerPort": 8080, "name": "http"}},
					"resources":      map[string]any{"requests": map[string]string{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]string{"memory": "256Mi"}},
					"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080}, "periodSeconds": 10},
					"env":            &env,
				}}},
			},
		},
	}
	raw, _ := json.Marshal(d)
	for i := 0; len(raw) < size; i++ {
		// Settings of up to 64 characters until the manifest is big enough.
		pad := size - len(raw) - len(`,{"name":"SETTING_00","value":""}`)
		env = append(env, map[string]string{"name": fmt.Sprintf("SETTING_%02d", i), "value": strings.Repeat("x", min(max(pad, 1), 64))})
		raw, _ = json.Marshal(d)
	}
	return runtime.RawExtension{Raw: raw}
}

// applyStatus sets what an agent reports for w: Applied and Available, and
// status feedback.
func applyStatus(w *workv1.ManifestWork) {
	for _, c := range []string{workv1.WorkApplied, workv1.WorkAvailable} {
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: c, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: w.Generation,
		})
	}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: w.Name, Namespace: "default"},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
			{Name: "replicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](2)}},
			{Name: "readyReplicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](2)}},
		}},
		Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", LastTransitionTime: metav1.Now()}},
	}}
}

type workEvent struct{ evt *cloudevents.Event }

// countingReceiver counts deliveries and nothing else.
type countingReceiver struct{ n *atomic.Int64 }

func (c countingReceiver) Deliver(d *options.Delivery) { c.n.Add(1); d.Done() }
func (c countingReceiver) Malformed(error)             {}
func (c countingReceiver) Connected()                  {}
