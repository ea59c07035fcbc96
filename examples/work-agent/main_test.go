package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/hub-controller/hub"
	"github.com/workwire/sdk-go/examples/internal/cmdtest"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// With cmdtest.ArgsEnv set, the test binary is the command.
func TestMain(m *testing.M) {
	cmdtest.RunMain("work-agent", main)
	goleak.VerifyTestMain(m)
}

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

// The agent as its command line starts it, serving the hub controller's
// lifecycle.
func TestAgentServesTheHubLifecycle(t *testing.T) {
	broker := mqtttest.NewBroker(t)
	out := &syncBuffer{}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-broker", broker.Addr(), "-cluster", "edge-1", "-status-update-frequency", "5s"}, out)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		got := out.String()
		for _, want := range []string{
			"applying to an in-memory cluster",
			"agent of cluster edge-1 started",
			"work edge-1/web-1 generation 2: applied 1/1, available 1/1, feedback [replicas=2 readyReplicas=2 availableReplicas=2 ready=2 availableCondition=True]",
			"work edge-1/web-1 deleted: 1 resource(s) removed, 0 orphaned",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("agent output lacks %q:\n%s", want, got)
			}
		}
	}()

	h, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: broker.Addr()}).WithSourceID("hub").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	var hubOut bytes.Buffer
	if err := hub.Run(context.Background(), hub.Config{Holder: h, Clusters: []string{"edge-1"}, Works: 2, Lifecycle: true, Timeout: 20 * time.Second}, &hubOut); err != nil {
		t.Fatalf("%v\n%s", err, hubOut.String())
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
		is   error
	}{
		{args: []string{"-cluster", "c1"}, want: "no broker"},
		{args: []string{"-broker-config", "/nonexistent/mqtt.yaml"}, want: "/nonexistent/mqtt.yaml"},
		{args: []string{"-hub-kubeconfig", "/nonexistent/hub"}, want: "/nonexistent/hub"},
		{args: []string{"-broker", "127.0.0.1:1", "-kubeconfig", "/nonexistent/cluster"}, want: "/nonexistent/cluster"},
		{args: []string{"-broker", "127.0.0.1:1", "-cluster", ""}, want: "no cluster name"},
		{args: []string{"-broker", "127.0.0.1:1", "extra"}, want: "unexpected arguments"},
		{args: []string{"-h"}, is: flag.ErrHelp},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := run(context.Background(), tc.args, &bytes.Buffer{})
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// An operator who starts an agent before its broker learns so at once, at
// the default log level, and why.
func TestADeadBrokerIsReportedAtOnce(t *testing.T) {
	addr := transporttest.ClosedAddr(t)
	lines, took := cmdtest.FirstConnectFailure(t, "-broker", addr)
	cmdtest.CheckFirstFailure(t, lines, addr)
	t.Logf("the first failure was logged %v after the start", took)
}

// The agent as a process of its own over a real kube-apiserver, killed
// with SIGKILL while its hub deletes works, and started again: it finds
// the works it held in its Secrets on the cluster, removes what the
// deleted ones applied, and only then does the hub forget them. The
// ConfigMaps of the works the hub keeps stay.
func TestAKilledAgentLeavesNothingOfTheWorksDeletedMeanwhile(t *testing.T) {
	const works, deleted = 50, 30
	cfg := kubetest.Start(t)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// kube-apiserver alone has no garbage collector: it removes the
	// finalizer of the agent's foreground deletions, as kube-controller-
	// manager's would for objects without dependents.
	go collectForegroundDeletions(ctx, kube.CoreV1().ConfigMaps("default"))

	broker := mqtttest.NewBroker(t)
	args := []string{"-broker", broker.Addr(), "-cluster", "cluster1", "-kubeconfig", kubetest.Kubeconfig(t, cfg), "-status-update-frequency", "1h"}
	startAgent := func() *proctest.Process {
		return proctest.Start(t, "work-agent", os.Args[0], []string{cmdtest.ArgsEnv + "=" + strings.Join(args, " ")})
	}
	agentProc := startAgent()

	hubHolder, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: broker.Addr()}).WithSourceID("hub1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if err := hubHolder.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer hubHolder.Close(context.Background())
	hubWorks := hubHolder.WorkInterface().WorkV1().ManifestWorks("cluster1")
	for i := range works {
		name := fmt.Sprintf("w%02d", i)
		w := &workv1.ManifestWork{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
				Raw: []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%s","namespace":"default"},"data":{"work":%q}}`, name, name)),
			}}}}},
		}
		if _, err := hubWorks.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lister := hubHolder.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	applied := func(name string) bool {
		w, err := lister.Get(name)
		return err == nil && meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied)
	}
	waitFor(t, ctx, agentProc, "every work Applied", func() bool {
		for i := range works {
			if !applied(fmt.Sprintf("w%02d", i)) {
				return false
			}
		}
		return true
	})

	// What the hub forgets must be gone from the cluster by then.
	var mu sync.Mutex
	var tooEarly []string
	_, err = hubHolder.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			name := obj.(*workv1.ManifestWork).Name
			if _, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "cm-"+name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				mu.Lock()
				tooEarly = append(tooEarly, name)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range deleted {
		if err := hubWorks.Delete(ctx, fmt.Sprintf("w%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if i == deleted/3 {
			agentProc.Kill() // mid-delete
		}
	}
	agentProc = startAgent()

	waitFor(t, ctx, agentProc, "the hub to forget every deleted work", func() bool {
		for i := range deleted {
			if _, err := lister.Get(fmt.Sprintf("w%02d", i)); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if len(tooEarly) > 0 {
		t.Errorf("the hub forgot %d works whose ConfigMap was still on the cluster: %v", len(tooEarly), tooEarly)
	}
	cms, err := kube.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, "cm-w") {
			left = append(left, strings.TrimPrefix(cm.Name, "cm-"))
		}
	}
	var want []string
	for i := deleted; i < works; i++ {
		want = append(want, fmt.Sprintf("w%02d", i))
	}
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("the works whose ConfigMaps are on the cluster (-want +got):\n%s", diff)
	}
}

// waitFor polls cond until it holds, failing t if ctx ends or the agent
// exits first.
func waitFor(t *testing.T, ctx context.Context, agent *proctest.Process, what string, cond func() bool) {
	t.Helper()
	defer func(began time.Time) { t.Logf("%s after %v", what, time.Since(began).Round(10*time.Millisecond)) }(time.Now())
	for !cond() {
		if err := agent.Exited(); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; the agent said:\n%s", what, agent.Tail(30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// collectForegroundDeletions removes the foregroundDeletion finalizer of
// every ConfigMap marked for deletion, until ctx ends.
func collectForegroundDeletions(ctx context.Context, cms corev1client.ConfigMapInterface) {
	for ctx.Err() == nil {
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				cm := &list.Items[i]
				if cm.DeletionTimestamp != nil && slices.Contains(cm.Finalizers, metav1.FinalizerDeleteDependents) {
					cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == metav1.FinalizerDeleteDependents })
					_, _ = cms.Update(ctx, cm, metav1.UpdateOptions{})
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
