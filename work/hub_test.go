package work_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
)

func TestHubWrites(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	ctx := context.Background()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")

	created, err := works.Create(ctx, newWork("a", "1", map[string]string{"app": "a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Generation != 1 || created.ResourceVersion == "" || created.Namespace != "cluster1" || created.CreationTimestamp.IsZero() {
		t.Fatalf("created %+v", created.ObjectMeta)
	}
	t.Run("create", func(t *testing.T) {
		if _, err := works.Create(ctx, newWork("a", "1", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("name clash: %v, want AlreadyExists", err)
		}
		readBack := created.DeepCopy()
		readBack.Name = "read-back"
		if _, err := works.Create(ctx, readBack, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
			t.Errorf("create with a resourceVersion: %v, want BadRequest", err)
		}
		gen := newWork("", "1", nil)
		gen.GenerateName = "gen-"
		if g, err := works.Create(ctx, gen, metav1.CreateOptions{}); err != nil || len(g.Name) != len("gen-")+5 {
			t.Errorf("generateName: %v %v", g, err)
		}
		other := newWork("b", "1", nil)
		other.Namespace = "cluster2"
		if _, err := works.Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
			t.Errorf("namespace mismatch: %v, want BadRequest", err)
		}
		bad := newWork("bad", "1", nil)
		bad.Spec.Workload.Manifests[0].Raw = []byte(`[1,2]`)
		if _, err := works.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("a manifest that is not an object: %v, want Invalid", err)
		}
		// The rule a kube-apiserver and a workstore apply: a manifest
		// names its apiVersion and kind.
		bad.Spec.Workload.Manifests[0].Raw = []byte(`{"metadata":{"name":"x"}}`)
		if _, err := works.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "apiVersion and kind") {
			t.Errorf("a manifest without apiVersion and kind: %v, want Invalid", err)
		}
		// A namespace no topic or route can carry is refused at the call,
		// not left to fail at every publish.
		for _, ns := range []string{"bad/name", "a+b", "x#", "Upper", strings.Repeat("c", 64)} {
			_, err := hub.WorkInterface().WorkV1().ManifestWorks(ns).Create(ctx, newWork("w", "1", nil), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.namespace") {
				t.Errorf("namespace %q: %v, want Invalid naming metadata.namespace", ns, err)
			}
		}
		if _, err := works.Create(ctx, newWork("Bad_Name", "1", nil), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("invalid name: %v, want Invalid", err)
		}
		dry, err := works.Create(ctx, newWork("dry", "1", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || dry.Name != "dry" {
			t.Errorf("dry run: %v %v", dry, err)
		}
		if _, err := works.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a dry-run create was stored: %v", err)
		}
	})

	t.Run("update", func(t *testing.T) {
		cur, _ := works.Get(ctx, "a", metav1.GetOptions{})
		stale := cur.DeepCopy()
		cur.Spec.Workload.Manifests[0] = configMap("a", "2")
		next, err := works.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil || next.Generation != 2 {
			t.Fatalf("spec update: generation %d, %v", next.Generation, err)
		}
		stale.Labels = map[string]string{"app": "stale"}
		if _, err := works.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("stale update: %v, want Conflict", err)
		}
		next.Finalizers = []string{"hub/keep"}
		kept, err := works.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil || kept.Generation != 2 {
			t.Errorf("a finalizer is no new generation: %d %v", kept.Generation, err)
		}
		kept.Annotations = map[string]string{"note": "x"}
		annotated, err := works.Update(ctx, kept, metav1.UpdateOptions{})
		if err != nil || annotated.Generation != 3 {
			t.Errorf("annotations reach agents: generation %d, want 3, %v", annotated.Generation, err)
		}
		annotated.Status.Conditions = []metav1.Condition{{Type: "Fake", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: metav1.Now()}}
		same, err := works.Update(ctx, annotated, metav1.UpdateOptions{})
		if err != nil || len(same.Status.Conditions) != 0 || same.ResourceVersion != annotated.ResourceVersion {
			t.Errorf("an update sets no status and, changing nothing else, no version: %v %v", same.Status, err)
		}
		if _, err := works.UpdateStatus(ctx, annotated, metav1.UpdateOptions{}); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("UpdateStatus on a hub: %v, want MethodNotAllowed", err)
		}
		noName := annotated.DeepCopy()
		noName.Name = "missing"
		if _, err := works.Update(ctx, noName, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("update of a missing work: %v", err)
		}
		noName.ResourceVersion = ""
		if _, err := works.Update(ctx, noName, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("unconditional update of a missing work: %v, want NotFound first", err)
		}
		// An update must name the version it changes, as for a custom
		// resource on a kube-apiserver; dry run or not.
		unconditional := annotated.DeepCopy()
		unconditional.ResourceVersion = ""
		unconditional.Labels = map[string]string{"app": "blind"}
		for _, dry := range [][]string{nil, {metav1.DryRunAll}} {
			if _, err := works.Update(ctx, unconditional, metav1.UpdateOptions{DryRun: dry}); !isResourceVersionRequired(err) {
				t.Errorf("unconditional update (dry run %v): %v, want Invalid metadata.resourceVersion", dry, err)
			}
		}
		if cur, _ := works.Get(ctx, "a", metav1.GetOptions{}); cur.Labels["app"] == "blind" {
			t.Error("an unconditional update was stored")
		}
	})

	t.Run("patch", func(t *testing.T) {
		merged, err := works.Patch(ctx, "a", kubetypes.MergePatchType, []byte(`{"metadata":{"labels":{"merge":"yes"}}}`), metav1.PatchOptions{})
		if err != nil || merged.Labels["merge"] != "yes" || merged.Labels["app"] != "a" {
			t.Fatalf("merge patch: %v %v", merged.Labels, err)
		}
		jp, err := works.Patch(ctx, "a", kubetypes.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/json","value":"yes"}]`), metav1.PatchOptions{})
		if err != nil || jp.Labels["json"] != "yes" {
			t.Fatalf("json patch: %v %v", jp.Labels, err)
		}
		if _, err := works.Patch(ctx, "a", kubetypes.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/name","value":"b"}]`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("failing json patch: %v, want Invalid", err)
		}
		_, err = works.Patch(ctx, "a", kubetypes.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{})
		if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusUnsupportedMediaType {
			t.Errorf("strategic merge patch: %v, want 415 as for a custom resource", err)
		}
		if _, err := works.Patch(ctx, "a", kubetypes.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status"); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("status patch on a hub: %v, want MethodNotAllowed", err)
		}
		if _, err := works.Patch(ctx, "a", kubetypes.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"}}`), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("patch pinned to an old resourceVersion: %v, want Conflict", err)
		}
		if _, err := works.Patch(ctx, "nope", kubetypes.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("patch of a missing work: %v", err)
		}
	})

	t.Run("apply", func(t *testing.T) {
		cfg := `{"apiVersion":"work.open-cluster-management.io/v1","kind":"ManifestWork","metadata":{"name":"applied","labels":{"owner":"%s"}},` +
			`"spec":{"workload":{"manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}]}}}`
		if _, err := works.Patch(ctx, "applied", kubetypes.ApplyPatchType, []byte(fmt.Sprintf(cfg, "x")), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("apply without a field manager: %v, want Invalid", err)
		}
		w, err := works.Patch(ctx, "applied", kubetypes.ApplyPatchType, []byte(fmt.Sprintf(cfg, "first")), metav1.PatchOptions{FieldManager: "first"})
		if err != nil || w.Generation != 1 || len(w.ManagedFields) == 0 {
			t.Fatalf("apply creates: %v %v", w, err)
		}
		if _, err := works.Patch(ctx, "applied", kubetypes.ApplyPatchType, []byte(fmt.Sprintf(cfg, "second")), metav1.PatchOptions{FieldManager: "second"}); !apierrors.IsConflict(err) {
			t.Errorf("apply of a field another manager owns: %v, want Conflict", err)
		}
		forced, err := works.Patch(ctx, "applied", kubetypes.ApplyPatchType, []byte(fmt.Sprintf(cfg, "second")), metav1.PatchOptions{FieldManager: "second", Force: ptr.To(true)})
		if err != nil || forced.Labels["owner"] != "second" || forced.Generation != 2 {
			t.Errorf("forced apply: %v %v", forced, err)
		}
	})

	t.Run("list and watch", func(t *testing.T) {
		for i := range 7 {
			if _, err := works.Create(ctx, newWork(fmt.Sprint("page-", i), "1", map[string]string{"page": "yes"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		first, err := works.List(ctx, metav1.ListOptions{LabelSelector: "page=yes", Limit: 3})
		if err != nil || len(first.Items) != 3 || first.Continue == "" {
			t.Fatalf("first page: %d %q %v", len(first.Items), first.Continue, err)
		}
		total := len(first.Items)
		for tok := first.Continue; tok != ""; {
			page, err := works.List(ctx, metav1.ListOptions{LabelSelector: "page=yes", Limit: 3, Continue: tok})
			if err != nil {
				t.Fatal(err)
			}
			total += len(page.Items)
			tok = page.Continue
		}
		if total != 7 {
			t.Errorf("paged %d works, want 7", total)
		}
		byName, err := works.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=page-3"})
		if err != nil || len(byName.Items) != 1 {
			t.Errorf("field selector: %v %v", byName, err)
		}
		if _, err := works.List(ctx, metav1.ListOptions{FieldSelector: "spec.x=1"}); !apierrors.IsBadRequest(err) {
			t.Errorf("unsupported field selector: %v", err)
		}
		if _, err := works.List(ctx, metav1.ListOptions{LabelSelector: "a=(("}); !apierrors.IsBadRequest(err) {
			t.Errorf("bad label selector: %v", err)
		}
		w, err := works.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion, LabelSelector: "page=yes"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := works.Patch(ctx, "page-0", kubetypes.MergePatchType, []byte(`{"metadata":{"labels":{"page":"no"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Deleted || ev.Object.(*workv1.ManifestWork).Name != "page-0" {
				t.Errorf("leaving the selector: %v %v", ev.Type, ev.Object)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no watch event")
		}
	})

	t.Run("delete never delivered", func(t *testing.T) {
		// No agent ever reported on page-1: it goes at once.
		if err := works.Delete(ctx, "page-1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(kubetypes.UID("wrong"))}}); !apierrors.IsConflict(err) {
			t.Errorf("delete with a wrong UID precondition: %v", err)
		}
		if err := works.Delete(ctx, "page-1", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if _, err := works.Get(ctx, "page-1", metav1.GetOptions{}); err != nil {
			t.Errorf("a dry-run delete removed the work: %v", err)
		}
		if err := works.Delete(ctx, "page-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := works.Get(ctx, "page-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("an undelivered work stayed after Delete: %v", err)
		}
		if err := works.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "page=yes"}); err != nil {
			t.Fatal(err)
		}
		left, _ := works.List(ctx, metav1.ListOptions{LabelSelector: "page=yes"})
		if len(left.Items) != 0 {
			t.Errorf("DeleteCollection left %d works", len(left.Items))
		}
	})
}

// DeleteCollection deletes the matching works as Delete does each: a
// delivered one is marked and waits for its agent, an undelivered one goes;
// the others stay. Errors are the API errors Delete returns.
func TestHubDeleteCollection(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx, cancel := context.WithCancel(context.Background())
	wg := runAgentController(ctx, t, agent, "cluster1")
	defer func() { cancel(); wg.Wait() }()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	for _, w := range []*workv1.ManifestWork{
		newWork("gone-1", "1", map[string]string{"set": "gone"}),
		newWork("gone-2", "1", map[string]string{"set": "gone"}),
		newWork("stays", "1", map[string]string{"set": "stays"}),
	} {
		if _, err := works.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"gone-1", "gone-2", "stays"} {
		eventually(t, name+" applied", func() bool { return appliedAt(works2lister(works), name) })
	}
	// Not delivered: goes at once.
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster2").Create(ctx, newWork("undelivered", "1", map[string]string{"set": "gone"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	err := works.DeleteCollection(ctx, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(kubetypes.UID("wrong"))}},
		metav1.ListOptions{LabelSelector: "set=gone"})
	if !apierrors.IsConflict(err) {
		t.Errorf("DeleteCollection with a failing precondition: %v, want Delete's Conflict", err)
	}
	if err := works.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}, metav1.ListOptions{LabelSelector: "set=gone"}); err != nil {
		t.Fatal(err)
	}
	if w, err := works.Get(ctx, "gone-1", metav1.GetOptions{}); err != nil || w.DeletionTimestamp != nil {
		t.Fatalf("a dry-run DeleteCollection marked a work: %v", err)
	}

	if err := hub.WorkInterface().WorkV1().ManifestWorks("").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "set=gone"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone-1", "gone-2"} {
		if w, err := works.Get(ctx, name, metav1.GetOptions{}); err == nil && (w.DeletionTimestamp == nil || w.Generation != 2) {
			t.Errorf("%s after DeleteCollection: deletionTimestamp %v, generation %d; want marked, generation 2", name, w.DeletionTimestamp, w.Generation)
		}
	}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster2").Get(ctx, "undelivered", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an undelivered work stayed after DeleteCollection: %v", err)
	}
	eventually(t, "the agent cleaned up and the hub forgot the works", func() bool {
		list, err := works.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1 && list.Items[0].Name == "stays" && list.Items[0].DeletionTimestamp == nil
	})
	if _, err := agent.WorkInterface().WorkV1().ManifestWorks("cluster1").Get(ctx, "stays", metav1.GetOptions{}); err != nil {
		t.Errorf("the agent lost a work DeleteCollection did not select: %v", err)
	}
}

// The deletion handshake: a delivered work stays, marked, until its agent
// reports it Deleted; a hub finalizer holds it after that.
func TestHubDeletionWaitsForTheAgent(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx, cancel := context.WithCancel(context.Background())
	wg := runAgentController(ctx, t, agent, "cluster1")
	defer func() { cancel(); wg.Wait() }()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	w := newWork("d", "1", nil)
	w.Finalizers = []string{"hub/cleanup"}
	if _, err := works.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "applied", func() bool { return appliedAt(works2lister(works), "d") })
	if err := works.Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	marked, err := works.Get(ctx, "d", metav1.GetOptions{})
	if err != nil || marked.DeletionTimestamp == nil || marked.Generation != 2 {
		t.Fatalf("a delivered work is marked, not removed: %v %v", marked, err)
	}
	if err := works.Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Errorf("second delete: %v", err)
	}
	eventually(t, "agent removed it", func() bool {
		_, err := agent.WorkInterface().WorkV1().ManifestWorks("cluster1").Get(ctx, "d", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// Deleted is reported, but the hub's own finalizer still holds it.
	held, err := works.Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub finalizer did not hold the work: %v", err)
	}
	if meta.IsStatusConditionTrue(held.Status.Conditions, "Deleted") {
		t.Error("a Deleted status replaced the work's status")
	}
	held.Finalizers = nil
	if _, err := works.Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "removed once the finalizer is gone", func() bool {
		_, err := works.Get(ctx, "d", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

type getter interface {
	Get(context.Context, string, metav1.GetOptions) (*workv1.ManifestWork, error)
}

type clientLister struct{ c getter }

func (l clientLister) Get(name string) (*workv1.ManifestWork, error) {
	return l.c.Get(context.Background(), name, metav1.GetOptions{})
}

func works2lister(c getter) workLister { return clientLister{c} }

// nopReceiver receives nothing: a raw transport that only sends.
type nopReceiver struct{}

func (nopReceiver) Deliver(d *options.Delivery) { d.Done() }
func (nopReceiver) Malformed(error)             {}
func (nopReceiver) Connected()                  {}

// A status names its work by UID; only the work's own cluster reports on
// it. One from another cluster — naming it by clustername, or claiming the
// work's cluster in its metadata where the transport saw another — changes
// nothing; one whose cluster only the transport names (an MQTT topic) is
// its cluster's. (One worker: the hub handles the statuses in the order
// sent.)
func TestHubTakesAStatusOnlyFromTheWorksCluster(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1").WithSourceOptions(generic.WithWorkers(1)))
	ctx := context.Background()
	x, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, newWork("x", "1", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster2").Create(ctx, newWork("y", "1", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := b.Transport()
	if err := raw.Start(ctx, nil, nopReceiver{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close(context.Background()) })
	report := func(w *workv1.ManifestWork, namespace, reason string, clusterName bool) {
		t.Helper()
		w = w.DeepCopy()
		w.Namespace = namespace
		w.Annotations = map[string]string{codec.OriginalSourceAnnotation: "hub1"}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: 1})
		evt, err := codec.NewManifestBundleCodec().Encode("cluster2-agent", types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, w)
		if err != nil {
			t.Fatal(err)
		}
		if !clusterName {
			evt.SetExtension(types.ExtClusterName, nil)
		}
		if err := raw.Send(ctx, options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster2"}, evt); err != nil {
			t.Fatal(err)
		}
	}
	report(x, "cluster2", "FromCluster2", true)
	report(x, "cluster1", "ClaimsCluster1", false)
	report(y, "cluster2", "Own", false) // the cluster only the transport names, as an MQTT topic does
	eventually(t, "cluster2's status of its own work", func() bool {
		got, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster2").Get(ctx, "y", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(got.Status.Conditions, workv1.WorkApplied)
	})
	got, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Get(ctx, "x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 {
		t.Errorf("cluster1's work took cluster2's status: %+v", got.Status.Conditions)
	}
}
