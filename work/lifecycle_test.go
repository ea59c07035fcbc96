package work_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// brokers are the real brokers the lifecycle runs through: the embedded
// one always, a Mosquitto when WORKWIRE_MQTT_BROKER names one. More
// transports add themselves from their own files.
var brokers = []struct {
	name string
	make func(t *testing.T) func() (hub, agent *work.ClientHolderBuilder, ids string)
}{
	{"mqtt-embedded", func(t *testing.T) func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
		return mqttBuilders(mqtttest.NewBroker(t).Addr())
	}},
	{"mqtt-mosquitto", func(t *testing.T) func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
		addr := os.Getenv(mosquitto.EnvBroker)
		if addr == "" {
			t.Skipf("%s is not set", mosquitto.EnvBroker)
		}
		return mqttBuilders(addr)
	}},
}

func init() {
	brokers = append(brokers,
		struct {
			name string
			make func(t *testing.T) func() (hub, agent *work.ClientHolderBuilder, ids string)
		}{"kafka-kfake", func(t *testing.T) func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
			cfg := &kafka.Config{Brokers: kafkatest.NewBroker(t).Addrs()}
			return builders(func(suffix string) (*work.ClientHolderBuilder, *work.ClientHolderBuilder) {
				return hubBuilder(cfg, "hub-"+suffix), agentBuilder(cfg, "cluster-"+suffix)
			})
		}},
		struct {
			name string
			make func(t *testing.T) func() (hub, agent *work.ClientHolderBuilder, ids string)
		}{"grpc", func(t *testing.T) func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
			cfg := &grpc.Config{ServerAddress: grpctest.NewServer(t).Addr()}
			return builders(func(suffix string) (*work.ClientHolderBuilder, *work.ClientHolderBuilder) {
				return hubBuilder(cfg, "hub-"+suffix), agentBuilder(cfg, "cluster-"+suffix)
			})
		}},
	)
}

// builders fixes one random suffix for a test's IDs and makes fresh
// builders with it each call.
func builders(make func(suffix string) (*work.ClientHolderBuilder, *work.ClientHolderBuilder)) func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	return func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
		h, a := make(suffix)
		return h, a, suffix
	}
}

func mqttBuilders(addr string) func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	cfg := &mqtt.Config{
		BrokerHost:          addr,
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
	return func() (*work.ClientHolderBuilder, *work.ClientHolderBuilder, string) {
		return hubBuilder(cfg, "hub-"+suffix), agentBuilder(cfg, "cluster-"+suffix), suffix
	}
}

// hubController keeps the works it wants in a hub's clientset: it creates
// what is missing and updates what differs, as an ordinary controller does.
type hubController struct {
	mu      sync.Mutex
	desired map[string]string // work name → config map value
}

func (c *hubController) want(name, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.desired[name] = value
}

func (c *hubController) ensure(t *testing.T, h *work.ClientHolder, cluster string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx := context.Background()
	works := h.WorkInterface().WorkV1().ManifestWorks(cluster)
	for name, value := range c.desired {
		want := newWork(name, value, map[string]string{"app": "lifecycle"})
		cur, err := works.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := works.Create(ctx, want, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
		case err != nil:
			t.Fatal(err)
		case !equality.Semantic.DeepEqual(cur.Spec, want.Spec):
			cur.Spec = want.Spec
			if _, err := works.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update %s: %v", name, err)
			}
		}
	}
}

func (c *hubController) allApplied(h *work.ClientHolder, cluster string) func() bool {
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		lister := h.ManifestWorkInformer().Lister().ManifestWorks(cluster)
		for name, value := range c.desired {
			w, err := lister.Get(name)
			if err != nil || !appliedAt(lister, name) || !equality.Semantic.DeepEqual(w.Spec, newWork(name, value, nil).Spec) {
				return false
			}
		}
		return true
	}
}

// agentRun is an agent holder with its controller running.
type agentRun struct {
	holder *work.ClientHolder
	cancel context.CancelFunc
	wg     *sync.WaitGroup
}

func startAgentRun(t *testing.T, b *work.ClientHolderBuilder, cluster string) *agentRun {
	h := startHolder(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	r := &agentRun{holder: h, cancel: cancel, wg: runAgentController(ctx, t, h, cluster)}
	t.Cleanup(r.stop)
	return r
}

func (r *agentRun) stop() {
	r.cancel()
	r.wg.Wait()
}

// The lifecycle of seed 000 through a real broker — create, apply, status,
// update, delete, Deleted — with an agent restart and a hub restart in the
// middle, each healed by resync.
func TestLifecycleThroughBrokers(t *testing.T) {
	for _, br := range brokers {
		t.Run(br.name, func(t *testing.T) {
			t.Parallel()
			builders := br.make(t)
			hubB, agentB, suffix := builders()
			cluster := "cluster-" + suffix
			ctl := &hubController{desired: map[string]string{}}
			for i := range 10 {
				ctl.want(fmt.Sprint("w", i), "v1")
			}

			hub := startHolder(t, hubB)
			agent := startAgentRun(t, agentB, cluster)
			ctl.ensure(t, hub, cluster)
			eventually(t, "every work applied", ctl.allApplied(hub, cluster))

			// Agent restart: it misses updates while down, and starts empty.
			agent.stop()
			closeHolder(t, agent.holder)
			for i := range 5 {
				ctl.want(fmt.Sprint("w", i), "v2")
			}
			ctl.ensure(t, hub, cluster)
			_, agentB2, _ := builders()
			agent = startAgentRun(t, agentB2.WithClusterName(cluster), cluster)
			eventually(t, "the restarted agent applied what it missed", ctl.allApplied(hub, cluster))

			// Hub restart: its store is in memory, so its controller creates
			// the works again; the agent replaces its copies.
			closeHolder(t, hub)
			hubB2, _, _ := builders()
			hub = startHolder(t, hubB2.WithSourceID("hub-"+suffix))
			ctl.ensure(t, hub, cluster)
			eventually(t, "the restarted hub sees every work applied", ctl.allApplied(hub, cluster))
			for i := 5; i < 10; i++ {
				ctl.want(fmt.Sprint("w", i), "v3")
			}
			ctl.ensure(t, hub, cluster)
			eventually(t, "updates after the hub restart applied", ctl.allApplied(hub, cluster))
			agentWorks := agent.holder.WorkInterface().WorkV1().ManifestWorks(cluster)
			if list, err := agentWorks.List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 10 {
				t.Fatalf("agent holds %d works after the hub restart, want 10 (%v)", len(list.Items), err)
			}

			// Delete everything: gone from the hub only once the agent
			// cleaned up (its controller removes its finalizer) and said so.
			hubWorks := hub.WorkInterface().WorkV1().ManifestWorks(cluster)
			if err := hubWorks.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "deleted on both sides", func() bool {
				h, errH := hubWorks.List(context.Background(), metav1.ListOptions{})
				a, errA := agentWorks.List(context.Background(), metav1.ListOptions{})
				return errH == nil && errA == nil && len(h.Items) == 0 && len(a.Items) == 0
			})
		})
	}
}
