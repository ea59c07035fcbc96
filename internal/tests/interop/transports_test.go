package interop

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	ocmpayload "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/payload"
	ocmsourcecodec "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/work/source/codec"
	ocmgrpcoptions "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options/grpc"
	pbv1 "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options/grpc/protobuf/v1"
	ocmmqttoptions "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options/mqtt"
	ocmtypes "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/types"
	ocmserver "open-cluster-management.io/sdk-go/pkg/cloudevents/server"
	ocmgrpc "open-cluster-management.io/sdk-go/pkg/cloudevents/server/grpc"

	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// mqttBrokers are the MQTT brokers each MQTT pairing runs over: the
// embedded one, and a real Mosquitto when WORKWIRE_MQTT_BROKER names one.
func mqttBrokers(t *testing.T) map[string]func(t *testing.T) string {
	b := map[string]func(t *testing.T) string{
		"mqtt-embedded": func(t *testing.T) string { return mqtttest.NewBroker(t).Addr() },
	}
	if addr := os.Getenv("WORKWIRE_MQTT_BROKER"); addr != "" {
		b["mqtt-mosquitto"] = func(*testing.T) string { return addr }
	} else {
		t.Log("WORKWIRE_MQTT_BROKER is not set: the pairings run over the embedded broker only")
	}
	return b
}

// ocmMQTTFile writes the MQTT config file an OCM deployment gives its hub
// and its agents, for source sourceID: the same file works for both, and
// both OCM's peers and workwire's load it.
func ocmMQTTFile(t *testing.T, broker, sourceID string) string {
	return writeFile(t, "mqtt.yaml", fmt.Sprintf(`brokerHost: %s
topics:
  sourceEvents: sources/%[2]s/clusters/+/sourceevents
  agentEvents: sources/%[2]s/clusters/+/agentevents
  sourceBroadcast: sources/+/sourcebroadcast
  agentBroadcast: clusters/+/agentbroadcast
`, broker, sourceID))
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ocmMQTTOptions loads a file as OCM's peers do.
func ocmMQTTOptions(t *testing.T, path string) *ocmmqttoptions.MQTTOptions {
	o, err := ocmmqttoptions.BuildMQTTOptionsFromFlags(path)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// ocmGRPCOptions loads a gRPC config file as OCM's peers do.
func ocmGRPCOptions(t *testing.T, path string) *ocmgrpcoptions.GRPCOptions {
	o, err := ocmgrpcoptions.BuildGRPCOptionsFromFlags(path)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// ocmBroker runs OCM's gRPC broker (open-cluster-management.io/sdk-go's
// server/grpc) with a Service of ManifestWorks: the hub of the pairing of
// a workwire gRPC agent with OCM's server side. It is that pairing's hub;
// its restart restarts the broker, on the same address and over the same
// Service, as a hub restarts over its database.
type ocmBroker struct {
	*workService
	addr      string
	heartbeat time.Duration
	stopServe func()
}

func startOCMBroker(t *testing.T, sourceID string, heartbeat time.Duration) *ocmBroker {
	b := &ocmBroker{
		workService: &workService{sourceID: sourceID, works: map[kubetypes.UID]*workv1.ManifestWork{}},
		addr:        "127.0.0.1:0", heartbeat: heartbeat,
	}
	b.serve(t)
	t.Cleanup(func() { b.stopServe() })
	return b
}

func (b *ocmBroker) serve(t *testing.T) {
	var lis net.Listener
	var err error
	for range 50 { // the address of the broker before a restart may linger for a moment
		if lis, err = net.Listen("tcp", b.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	opts := ocmgrpc.NewBrokerOptions()
	opts.HeartbeatCheckInterval = b.heartbeat
	broker := ocmgrpc.NewGRPCBroker(opts)
	gs := grpc.NewServer()
	pbv1.RegisterCloudEventServiceServer(gs, broker)
	broker.RegisterService(ctx, ocmpayload.ManifestBundleEventDataType, b.workService)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	b.stopServe = func() { cancel(); gs.Stop(); <-done }
}

func (b *ocmBroker) restart(t *testing.T) {
	b.stopServe()
	b.serve(t)
}

// workService is an OCM Service (open-cluster-management.io/sdk-go's
// server.Service) of ManifestWorks in memory, as a hub over a database
// would be: it encodes and decodes with OCM's source codec.
type workService struct {
	sourceID string
	codec    ocmsourcecodec.ManifestBundleCodec

	mu      sync.Mutex
	works   map[kubetypes.UID]*workv1.ManifestWork
	handler ocmserver.EventHandler
}

var _ ocmserver.Service = (*workService)(nil)

func (s *workService) List(_ context.Context, opts ocmtypes.ListOptions) ([]*cloudevents.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*cloudevents.Event
	for _, w := range s.works {
		if w.Namespace != opts.ClusterName {
			continue
		}
		evt, err := s.encode(w, ocmtypes.UpdateRequestAction)
		if err != nil {
			return nil, err
		}
		out = append(out, evt)
	}
	return out, nil
}

func (s *workService) encode(w *workv1.ManifestWork, action ocmtypes.EventAction) (*cloudevents.Event, error) {
	return s.codec.Encode(s.sourceID, ocmtypes.CloudEventsType{
		CloudEventsDataType: ocmpayload.ManifestBundleEventDataType, SubResource: ocmtypes.SubResourceSpec, Action: action,
	}, w)
}

func (s *workService) HandleStatusUpdate(_ context.Context, evt *cloudevents.Event) error {
	got, err := s.codec.Decode(evt)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.works[got.UID]
	if !ok {
		return nil
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, "Deleted") {
		delete(s.works, got.UID)
		return nil
	}
	if got.Generation < w.Generation {
		return nil // a status of an older spec
	}
	w.Status = got.Status
	return nil
}

func (s *workService) RegisterHandler(_ context.Context, h ocmserver.EventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// put stores w and sends it to its cluster's agents.
func (s *workService) put(ctx context.Context, w *workv1.ManifestWork, action ocmtypes.EventAction) error {
	s.mu.Lock()
	s.works[w.UID] = w
	evt, err := s.encode(w, action)
	h := s.handler
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return h.HandleEvent(ctx, evt)
}

func (s *workService) get(cluster string, i int) (*workv1.ManifestWork, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.works {
		if w.Namespace == cluster && w.Name == workName(i) {
			return w.DeepCopy(), nil
		}
	}
	return nil, fmt.Errorf("no work %s in %s", workName(i), cluster)
}

func (s *workService) create(ctx context.Context, cluster string, i int) error {
	w := newWork(i, "v1")
	w.Namespace, w.UID, w.Generation, w.ResourceVersion = cluster, kubetypes.UID(fmt.Sprintf("%s-%s", cluster, workName(i))), 1, "1"
	return s.put(ctx, w, ocmtypes.CreateRequestAction)
}

func (s *workService) update(ctx context.Context, cluster string, i int) error {
	w, err := s.get(cluster, i)
	if err != nil {
		return err
	}
	w.Spec.Workload.Manifests = []workv1.Manifest{manifest(i, "v2")}
	w.Generation, w.ResourceVersion = 2, "2"
	return s.put(ctx, w, ocmtypes.UpdateRequestAction)
}

func (s *workService) remove(ctx context.Context, cluster string, i int) error {
	w, err := s.get(cluster, i)
	if err != nil {
		return err
	}
	now := metav1.Now()
	w.DeletionTimestamp = &now
	return s.put(ctx, w, ocmtypes.DeleteRequestAction)
}

func (s *workService) applied(cluster string) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for _, w := range s.works {
		if w.Namespace == cluster {
			out[w.Name] = appliedAt(w)
		}
	}
	return out
}
