package hub_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/workwire/sdk-go/examples/hub-controller/hub"
	"github.com/workwire/sdk-go/examples/work-agent/agent"
	"github.com/workwire/sdk-go/examples/work-agent/fakecluster"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var listOptions = metav1.ListOptions{}

// syncBuffer is a bytes.Buffer that several goroutines can write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func hubHolder(t *testing.T, addr string) *work.ClientHolder {
	t.Helper()
	h, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: addr}).WithSourceID("hub").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startAgent runs the work agent of cluster over an in-memory cluster
// until the test ends.
func startAgent(t *testing.T, addr, cluster string) *fakecluster.Cluster {
	t.Helper()
	h, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: addr}).WithClusterName(cluster).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	c := fakecluster.New()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{Holder: h, Cluster: cluster, Client: c.Client, Mapper: c.Mapper}, &syncBuffer{})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent of %s: %v", cluster, err)
		}
	})
	return c
}

// The lifecycle through a real broker, with two clusters' agents.
func TestLifecycleWithTwoAgents(t *testing.T) {
	t.Parallel()
	broker := mqtttest.NewBroker(t)
	clusters := []*fakecluster.Cluster{startAgent(t, broker.Addr(), "cluster1"), startAgent(t, broker.Addr(), "cluster2")}

	var out bytes.Buffer
	err := hub.Run(context.Background(), hub.Config{
		Holder:    hubHolder(t, broker.Addr()),
		Clusters:  []string{"cluster1", "cluster2"},
		Works:     5,
		Lifecycle: true,
		Timeout:   20 * time.Second,
	}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"created and Available 10/10", "updated to 2 replicas 10/10", "deleted, agents confirmed 10/10", "summary: 10 works on 2 clusters"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for i, c := range clusters {
		list, err := c.Client.Resource(fakecluster.DeploymentsResource).Namespace("default").List(context.Background(), listOptions)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("cluster%d still runs %d Deployments after the works were deleted", i+1, len(list.Items))
		}
	}
	t.Log(out.String())
}

// Without -lifecycle the controller keeps the works in place and reports
// until it is stopped.
func TestKeepsWorksUntilStopped(t *testing.T) {
	t.Parallel()
	broker := mqtttest.NewBroker(t)
	c := startAgent(t, broker.Addr(), "cluster1")
	ctx, stop := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- hub.Run(ctx, hub.Config{Holder: hubHolder(t, broker.Addr()), Clusters: []string{"cluster1"}, Works: 2}, out)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "available with status feedback: 2/2") {
		if time.Now().After(deadline) {
			t.Fatalf("the works never became available:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	list, err := c.Client.Resource(fakecluster.DeploymentsResource).Namespace("default").List(context.Background(), listOptions)
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("the cluster runs %d Deployments after the hub stopped, want the 2 it placed (%v)", len(list.Items), err)
	}
	for _, d := range list.Items {
		if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 1 {
			t.Errorf("%s has %d replicas, want 1", d.GetName(), r)
		}
	}
}

// With no agent, the lifecycle times out and says what it waited for.
func TestLifecycleTimesOutWithoutAgents(t *testing.T) {
	t.Parallel()
	broker := mqtttest.NewBroker(t)
	err := hub.Run(context.Background(), hub.Config{
		Holder: hubHolder(t, broker.Addr()), Clusters: []string{"nowhere"}, Works: 1, Lifecycle: true, Timeout: 3 * time.Second,
	}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "created and Available: 0 of 1") || !strings.Contains(err.Error(), "waiting for nowhere/web-0 (") {
		t.Fatalf("error %v does not say which work it waited for", err)
	}
}

func TestRunRejectsAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	err := hub.Run(context.Background(), hub.Config{Clusters: []string{""}, Timeout: -1}, &bytes.Buffer{})
	for _, want := range []string{"no work client holder", "cluster 0 has no name", "works per cluster 0", "timeout -1ns"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
