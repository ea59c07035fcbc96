package work_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/options/memory"
)

func TestAgentWrites(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx := context.Background()
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	works := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")

	if _, err := hubWorks.Create(ctx, newWork("a", "1", map[string]string{"from": "hub"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var w *workv1.ManifestWork
	eventually(t, "the work arrives", func() bool {
		var err error
		w, err = works.Get(ctx, "a", metav1.GetOptions{})
		return err == nil
	})
	if w.Annotations[codec.OriginalSourceAnnotation] != "hub1" || w.Labels["from"] != "hub" || w.Generation != 1 {
		t.Fatalf("arrived as %+v", w.ObjectMeta)
	}

	if _, err := works.Create(ctx, newWork("b", "1", nil), metav1.CreateOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("Create on an agent: %v, want MethodNotAllowed", err)
	}
	if err := works.Delete(ctx, "a", metav1.DeleteOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("Delete on an agent: %v, want MethodNotAllowed", err)
	}
	// With works in the store, as without: sources delete works.
	for _, sel := range []string{"", "from=hub", "from=nobody"} {
		if err := works.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("DeleteCollection(%q) on an agent holding a work: %v, want MethodNotAllowed", sel, err)
		}
	}
	if _, err := works.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("DeleteCollection on an agent touched its work: %v", err)
	}
	changed := w.DeepCopy()
	changed.Spec.Workload.Manifests[0] = configMap("a", "mine")
	if _, err := works.Update(ctx, changed, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("an agent changing the spec: %v, want Forbidden", err)
	}

	// Finalizers and annotations stay on the cluster.
	local, err := works.Patch(ctx, "a", kubetypes.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["agent/cleanup"],"annotations":{"agent/note":"x"}}}`), metav1.PatchOptions{})
	if err != nil || len(local.Finalizers) != 1 || local.Annotations["agent/note"] != "x" {
		t.Fatalf("local metadata patch: %v %v", local, err)
	}
	if hw, _ := hubWorks.Get(ctx, "a", metav1.GetOptions{}); hw.Annotations["agent/note"] != "" || len(hw.Finalizers) != 0 {
		t.Error("agent-local metadata reached the hub")
	}

	// A status patch is published; the hub sees it.
	st, err := works.Patch(ctx, "a", kubetypes.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Applied","status":"True","reason":"Applied","lastTransitionTime":"2024-01-01T00:00:00Z","observedGeneration":1}]}}`),
		metav1.PatchOptions{}, "status")
	if err != nil || !meta.IsStatusConditionTrue(st.Status.Conditions, workv1.WorkApplied) {
		t.Fatalf("status patch: %v %v", st, err)
	}
	eventually(t, "the hub sees the patched status", func() bool { return appliedAt(works2lister(hubWorks), "a") })

	// A source's update keeps the agent's annotations and status.
	hw, _ := hubWorks.Get(ctx, "a", metav1.GetOptions{})
	hw.Spec.Workload.Manifests[0] = configMap("a", "2")
	if _, err := hubWorks.Update(ctx, hw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update arrives", func() bool {
		got, err := works.Get(ctx, "a", metav1.GetOptions{})
		return err == nil && got.Generation == 2 && got.Annotations["agent/note"] == "x" && len(got.Finalizers) == 1 &&
			meta.IsStatusConditionTrue(got.Status.Conditions, workv1.WorkApplied)
	})

	// A status written from a read taken before the deletion arrived does
	// not undo the deletion.
	before, _ := works.Get(ctx, "a", metav1.GetOptions{})
	if err := hubWorks.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion arrives", func() bool {
		got, err := works.Get(ctx, "a", metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil
	})
	meta.SetStatusCondition(&before.Status.Conditions, metav1.Condition{Type: workv1.WorkAvailable, Status: metav1.ConditionTrue, Reason: "Late"})
	if _, err := works.UpdateStatus(ctx, before, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("a status write from a read before the deletion: %v, want Conflict", err)
	}
	unconditional := before.DeepCopy()
	unconditional.ResourceVersion = ""
	for name, write := range map[string]func(context.Context, *workv1.ManifestWork, metav1.UpdateOptions) (*workv1.ManifestWork, error){
		"UpdateStatus": works.UpdateStatus, "Update": works.Update,
	} {
		_, err := write(ctx, unconditional, metav1.UpdateOptions{})
		if !isResourceVersionRequired(err) {
			t.Errorf("an unconditional %s: %v, want Invalid metadata.resourceVersion", name, err)
		}
	}
	fresh, err := works.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: workv1.WorkAvailable, Status: metav1.ConditionTrue, Reason: "Late"})
	late, err := works.UpdateStatus(ctx, fresh, metav1.UpdateOptions{})
	if err != nil || late.DeletionTimestamp == nil {
		t.Fatalf("a status write erased the deletion: %v %v", late, err)
	}
	// The hub holds the work until the agent removes its finalizer.
	if _, err := hubWorks.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("the hub dropped a work its agent still holds: %v", err)
	}
	late.Finalizers = nil
	if _, err := works.Update(ctx, late, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone on both sides", func() bool {
		_, errA := works.Get(ctx, "a", metav1.GetOptions{})
		_, errH := hubWorks.Get(ctx, "a", metav1.GetOptions{})
		return apierrors.IsNotFound(errA) && apierrors.IsNotFound(errH)
	})
	if _, err := works.UpdateStatus(ctx, late, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("status of a removed work: %v, want NotFound", err)
	}
	late.ResourceVersion = ""
	if _, err := works.UpdateStatus(ctx, late, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unconditional status of a removed work: %v, want NotFound (first, as a kube-apiserver)", err)
	}
}

// isResourceVersionRequired reports whether err is what a kube-apiserver
// answers an unconditional update of a custom resource.
func isResourceVersionRequired(err error) bool {
	status, ok := err.(apierrors.APIStatus)
	if !ok || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		return false
	}
	d := status.Status().Details
	return d.Kind == "manifestworks" && d.Group == workv1.GroupName && len(d.Causes) == 1 &&
		d.Causes[0].Field == "metadata.resourceVersion" && strings.Contains(d.Causes[0].Message, "must be specified for an update")
}

// Labels and annotations: the source owns the keys it sends, the agent the
// others. A source's update sets its keys and removes those it dropped;
// the agent's own keys stay through it.
func TestAgentMetadataRule(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx := context.Background()
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	works := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")

	w := newWork("m", "1", map[string]string{"keep": "1", "drop": "1", "change": "1"})
	w.Annotations = map[string]string{"src/keep": "1", "src/drop": "1"}
	if _, err := hubWorks.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the work arrives", func() bool {
		_, err := works.Get(ctx, "m", metav1.GetOptions{})
		return err == nil
	})
	// The agent adds its own keys and changes one of the source's.
	if _, err := works.Patch(ctx, "m", kubetypes.MergePatchType, []byte(
		`{"metadata":{"labels":{"agent":"x","change":"local"},"annotations":{"agent/note":"x"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// The source drops a label and an annotation, changes a label, adds
	// one; the spec stays.
	hw, _ := hubWorks.Get(ctx, "m", metav1.GetOptions{})
	hw.Labels = map[string]string{"keep": "1", "change": "2", "new": "1"}
	hw.Annotations = map[string]string{"src/keep": "1"}
	if _, err := hubWorks.Update(ctx, hw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *workv1.ManifestWork
	eventually(t, "the new generation arrives", func() bool {
		var err error
		got, err = works.Get(ctx, "m", metav1.GetOptions{})
		return err == nil && got.Generation == 2
	})
	wantLabels := map[string]string{"keep": "1", "change": "2", "new": "1", "agent": "x"}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnnotations := map[string]string{"src/keep": "1", "agent/note": "x", codec.OriginalSourceAnnotation: "hub1"}
	if diff := cmp.Diff(wantAnnotations, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}

	// A spec-only update keeps everything the agent set.
	hw, _ = hubWorks.Get(ctx, "m", metav1.GetOptions{})
	hw.Spec.Workload.Manifests[0] = configMap("m", "2")
	if _, err := hubWorks.Update(ctx, hw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the spec update arrives", func() bool {
		var err error
		got, err = works.Get(ctx, "m", metav1.GetOptions{})
		return err == nil && got.Generation == 3
	})
	if got.Labels["agent"] != "x" || got.Annotations["agent/note"] != "x" || got.Labels["change"] != "2" {
		t.Errorf("after a spec update: labels %v, annotations %v", got.Labels, got.Annotations)
	}

	// The agent removes its own label and one of the source's; the
	// source's next spec sets its own again and drops what it no longer
	// sends.
	if _, err := works.Patch(ctx, "m", kubetypes.MergePatchType, []byte(
		`{"metadata":{"labels":{"agent":null,"new":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	hw, _ = hubWorks.Get(ctx, "m", metav1.GetOptions{})
	hw.Labels = map[string]string{"change": "2", "new": "1"}
	if _, err := hubWorks.Update(ctx, hw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fourth generation arrives", func() bool {
		var err error
		got, err = works.Get(ctx, "m", metav1.GetOptions{})
		return err == nil && got.Generation == 4
	})
	if diff := cmp.Diff(map[string]string{"change": "2", "new": "1"}, got.Labels); diff != "" {
		t.Errorf("labels after the agent removed some (-want +got):\n%s", diff)
	}
}
