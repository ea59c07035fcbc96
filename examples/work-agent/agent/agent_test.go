package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/work-agent/agent"
	"github.com/workwire/sdk-go/examples/work-agent/fakecluster"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const cluster = "cluster1"

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// env is a hub holder and a running agent over an in-memory broker, and
// the agent's in-memory cluster.
type env struct {
	works   workv1client.ManifestWorkInterface // the hub's
	cluster *fakecluster.Cluster
	out     *syncBuffer
}

func start(t *testing.T) *env {
	t.Helper()
	b := memory.NewBroker()
	transport := work.TransportFunc(func() (options.Transport, error) { return b.Transport(), nil })
	hub, err := work.NewClientHolderBuilder(transport).WithSourceID("hub").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hub.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})

	holder, err := work.NewClientHolderBuilder(transport).WithClusterName(cluster).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{works: hub.WorkInterface().WorkV1().ManifestWorks(cluster), cluster: fakecluster.New(), out: &syncBuffer{}}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(runCtx, agent.Config{Holder: holder, Cluster: cluster, Client: e.cluster.Client, Mapper: e.cluster.Mapper}, e.out)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return e
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

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// reportedAt waits until the agent reported work name at generation gen,
// and returns it as the hub has it.
func (e *env) reportedAt(t *testing.T, name string, gen int64) *workv1.ManifestWork {
	t.Helper()
	var w *workv1.ManifestWork
	eventually(t, fmt.Sprintf("%s reported at generation %d", name, gen), func() bool {
		var err error
		w, err = e.works.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
		return c != nil && c.ObservedGeneration == gen && w.Generation == gen
	})
	return w
}

func (e *env) exists(gvr schema.GroupVersionResource, name string) bool {
	_, err := e.cluster.Client.Tracker().Get(gvr, "default", name)
	return err == nil
}

func manifest(obj map[string]any) workv1.Manifest {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}

func configMap(name string) workv1.Manifest {
	return manifest(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": map[string]any{"k": "v"}})
}

func deployment(name string, replicas int64) workv1.Manifest {
	return manifest(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"replicas": replicas}})
}

func deploymentConfig(name string, rules ...workv1.FeedbackRule) workv1.ManifestConfigOption {
	return workv1.ManifestConfigOption{
		ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Name: name, Namespace: "default"},
		FeedbackRules:      rules,
	}
}

var (
	wellKnown = workv1.FeedbackRule{Type: workv1.WellKnownStatusType}
	available = workv1.FeedbackRule{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{
		{Name: "availableCondition", Path: `.conditions[?(@.type=="Available")].status`},
	}}
)

func newWork(name string, manifests []workv1.Manifest, configs ...workv1.ManifestConfigOption) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: manifests}, ManifestConfigs: configs},
	}
}

func condition(t *testing.T, conds []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, conds)
	}
	return *c
}

func values(m workv1.ManifestCondition) map[string]string {
	out := map[string]string{}
	for _, v := range m.StatusFeedbacks.Values {
		switch {
		case v.Value.Integer != nil:
			out[v.Name] = strconv.FormatInt(*v.Value.Integer, 10)
		case v.Value.String != nil:
			out[v.Name] = *v.Value.String
		case v.Value.JsonRaw != nil:
			out[v.Name] = *v.Value.JsonRaw
		}
	}
	return out
}

// Every manifest gets a condition with its resource; feedback is reported
// where asked, and a manifest that cannot be applied or a value that cannot
// be reported says why.
func TestAppliesAndReportsEveryManifest(t *testing.T) {
	t.Parallel()
	e := start(t)
	// A Deployment someone else runs, whose status the work only reads:
	// its replicas field is not an integer.
	odd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "odd", "namespace": "default"},
		"status":   map[string]any{"replicas": "three", "readyReplicas": int64(1)},
	}}
	if err := e.cluster.Client.Tracker().Create(fakecluster.DeploymentsResource, odd, "default"); err != nil {
		t.Fatal(err)
	}
	readOnly := deploymentConfig("odd", wellKnown)
	readOnly.UpdateStrategy = &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeReadOnly}
	w := newWork("mixed", []workv1.Manifest{
		configMap("settings"),
		deployment("web", 2),
		manifest(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}),
		manifest(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "odd", "namespace": "default"}}),
	}, deploymentConfig("web", wellKnown, available), readOnly)
	if _, err := e.works.Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := e.reportedAt(t, "mixed", 1)

	applied := condition(t, got.Status.Conditions, workv1.WorkApplied)
	if applied.Status != metav1.ConditionFalse || !strings.Contains(applied.Message, "manifest 2") || !strings.Contains(applied.Message, "Widget") {
		t.Errorf("work Applied = %+v, want False naming manifest 2, the Widget", applied)
	}
	if c := condition(t, got.Status.Conditions, workv1.WorkAvailable); c.Status != metav1.ConditionFalse || c.ObservedGeneration != 1 {
		t.Errorf("work Available = %+v, want False at generation 1 (the Widget is not there)", c)
	}
	ms := got.Status.ResourceStatus.Manifests
	if len(ms) != 4 {
		t.Fatalf("%d manifest conditions, want 4: %+v", len(ms), ms)
	}
	wantMeta := []workv1.ManifestResourceMeta{
		{Ordinal: 0, Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Name: "settings", Namespace: "default"},
		{Ordinal: 1, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: "web", Namespace: "default"},
		{Ordinal: 2, Group: "example.com", Version: "v1", Kind: "Widget", Name: "w"},
		{Ordinal: 3, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: "odd", Namespace: "default"},
	}
	for i, m := range ms {
		if diff := cmp.Diff(wantMeta[i], m.ResourceMeta); diff != "" {
			t.Errorf("manifest %d resourceMeta (-want +got):\n%s", i, diff)
		}
	}

	// The ConfigMap: applied, no feedback asked, none reported.
	if c := condition(t, ms[0].Conditions, workv1.ManifestApplied); c.Status != metav1.ConditionTrue {
		t.Errorf("ConfigMap Applied = %+v", c)
	}
	if meta.FindStatusCondition(ms[0].Conditions, agent.ManifestStatusFeedbackSynced) != nil || len(ms[0].StatusFeedbacks.Values) > 0 {
		t.Errorf("ConfigMap reports feedback nobody asked for: %+v", ms[0])
	}
	// The Deployment: well-known values and the JSON path, synced.
	if diff := cmp.Diff(map[string]string{"replicas": "2", "readyReplicas": "2", "availableReplicas": "2", "availableCondition": "True"}, values(ms[1])); diff != "" {
		t.Errorf("web feedback (-want +got):\n%s", diff)
	}
	if c := condition(t, ms[1].Conditions, agent.ManifestStatusFeedbackSynced); c.Status != metav1.ConditionTrue {
		t.Errorf("web StatusFeedbackSynced = %+v", c)
	}
	// The Widget: no such kind.
	if c := condition(t, ms[2].Conditions, workv1.ManifestApplied); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "no matches for kind") {
		t.Errorf("Widget Applied = %+v, want False: no such kind", c)
	}
	// The read-only Deployment: what can be reported is, the rest is said.
	if diff := cmp.Diff(map[string]string{"readyReplicas": "1"}, values(ms[3])); diff != "" {
		t.Errorf("odd feedback (-want +got):\n%s", diff)
	}
	if c := condition(t, ms[3].Conditions, agent.ManifestStatusFeedbackSynced); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "replicas (.status.replicas): type mismatch") {
		t.Errorf("odd StatusFeedbackSynced = %+v, want False naming the replicas type mismatch", c)
	}

	if !e.exists(configMaps, "settings") || !e.exists(fakecluster.DeploymentsResource, "web") {
		t.Error("the ConfigMap and the Deployment are not on the cluster")
	}
	cur, _ := e.cluster.Client.Tracker().Get(fakecluster.DeploymentsResource, "default", "odd")
	if cur.(*unstructured.Unstructured).GetAnnotations()[agent.ManifestHashAnnotation] != "" {
		t.Error("the agent wrote to a ReadOnly resource")
	}
}

// A new generation is applied, its feedback follows, and what it no longer
// names is deleted from the cluster.
func TestUpdateAppliesAndDeletesWhatWasDropped(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	w, err := e.works.Create(ctx, newWork("app", []workv1.Manifest{configMap("settings"), deployment("web", 1)}, deploymentConfig("web", wellKnown)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.reportedAt(t, "app", 1)
	if !e.exists(configMaps, "settings") {
		t.Fatal("the ConfigMap was not applied")
	}

	w.Spec.Workload.Manifests = []workv1.Manifest{deployment("web", 3)}
	eventually(t, "the update stored", func() bool {
		cur, err := e.works.Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false
		}
		cur.Spec = w.Spec
		_, err = e.works.Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil // a Conflict: a status came in meanwhile
	})
	got := e.reportedAt(t, "app", 2)
	if c := condition(t, got.Status.Conditions, workv1.WorkApplied); c.Status != metav1.ConditionTrue {
		t.Errorf("work Applied = %+v", c)
	}
	if n := len(got.Status.ResourceStatus.Manifests); n != 1 {
		t.Fatalf("%d manifest conditions, want 1", n)
	}
	if diff := cmp.Diff(map[string]string{"replicas": "3", "readyReplicas": "3", "availableReplicas": "3"}, values(got.Status.ResourceStatus.Manifests[0])); diff != "" {
		t.Errorf("feedback (-want +got):\n%s", diff)
	}
	if e.exists(configMaps, "settings") {
		t.Error("the ConfigMap the work dropped is still on the cluster")
	}
}

// Deleting a work deletes its resources, except those its DeleteOption
// orphans; the hub forgets the work once the agent confirmed.
func TestDeleteHonoursDeleteOption(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		option          *workv1.DeleteOption
		keepCM, keepDep bool
	}{
		{name: "foreground by default"},
		{name: "orphan", option: &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeOrphan}, keepCM: true, keepDep: true},
		{name: "selectively orphan", option: &workv1.DeleteOption{
			PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
			SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: []workv1.OrphaningRule{
				{Group: "", Resource: "configmaps", Name: "settings", Namespace: "default"},
			}},
		}, keepCM: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := start(t)
			ctx := context.Background()
			w := newWork("app", []workv1.Manifest{configMap("settings"), deployment("web", 1)})
			w.Spec.DeleteOption = tc.option
			if _, err := e.works.Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.reportedAt(t, "app", 1)
			if err := e.works.Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the hub forgot the work", func() bool {
				_, err := e.works.Get(ctx, "app", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
			if got := e.exists(configMaps, "settings"); got != tc.keepCM {
				t.Errorf("ConfigMap on the cluster: %v, want %v", got, tc.keepCM)
			}
			if got := e.exists(fakecluster.DeploymentsResource, "web"); got != tc.keepDep {
				t.Errorf("Deployment on the cluster: %v, want %v", got, tc.keepDep)
			}
			// The agent says so after the holder let the work go: the hub
			// may know first.
			eventually(t, "the agent to say it deleted the work", func() bool {
				return strings.Contains(e.out.String(), "work cluster1/app deleted")
			})
		})
	}
}

func TestRunRejectsAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	err := agent.Run(context.Background(), agent.Config{StatusUpdateFrequency: -time.Second}, &bytes.Buffer{})
	for _, want := range []string{"no work client holder", "no cluster name", "no dynamic client", "no RESTMapper", "status update frequency -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
