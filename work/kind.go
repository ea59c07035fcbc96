package work

import (
	"bytes"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/internal/engine"
	"github.com/workwire/sdk-go/internal/manifests"
)

var (
	manifestWorkGVK       = schema.GroupVersion(workv1.GroupVersion).WithKind("ManifestWork")
	manifestWorksResource = schema.GroupResource{Group: workv1.GroupName, Resource: "manifestworks"}
)

// manifestWorkKind is what the engine knows of a ManifestWork: what it
// knows of any type (engine.KindOf, as package resource has it), and where
// a ManifestWork needs more — its manifests, most of its size, shared
// between copies and compared by their bytes; its manifests checked; its
// status hashed as OCM's peers hash it (codec.StatusHash); its Deleted
// condition worded for a work.
func manifestWorkKind() *engine.Kind[*workv1.ManifestWork] {
	k, err := engine.KindOf[*workv1.ManifestWork](manifestWorkGVK, manifestWorksResource.Resource)
	if err != nil {
		panic(err) // ManifestWork is a Kubernetes type: KindOf cannot refuse it
	}
	k.Copy = (*workv1.ManifestWork).DeepCopy
	k.Share = shareManifests
	k.SameSpec = func(a, b *workv1.ManifestWork) bool { return sameSpec(&a.Spec, &b.Spec) }
	k.StatusHash = codec.StatusHash
	k.MarkDeleted = func(w *workv1.ManifestWork) {
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "WorkDeleted",
			Message: "the work's resources are removed from the cluster", ObservedGeneration: w.Generation,
		})
	}
	k.Validate = manifests.Check
	k.MinEventBytes = manifests.MinBytes
	return &k
}

// shareManifests copies w deeply except for its manifests' raw bytes, which
// the copy shares. Manifests are most of a work's size, and nothing changes
// their bytes in place — writers assign new ones — so the copies a writer
// changes need not copy them.
func shareManifests(w *workv1.ManifestWork) *workv1.ManifestWork {
	manifests := w.Spec.Workload.Manifests
	shallow := *w
	shallow.Spec.Workload.Manifests = nil
	out := shallow.DeepCopy()
	if manifests != nil {
		out.Spec.Workload.Manifests = make([]workv1.Manifest, len(manifests))
		for i, m := range manifests {
			out.Spec.Workload.Manifests[i].Raw = m.Raw
			if m.Object != nil {
				out.Spec.Workload.Manifests[i].Object = m.Object.DeepCopyObject()
			}
		}
	}
	return out
}

// sameSpec reports whether two specs are equal, comparing the manifests,
// most of a work, by their bytes, and reflecting only over the small rest.
func sameSpec(a, b *workv1.ManifestWorkSpec) bool {
	ma, mb := a.Workload.Manifests, b.Workload.Manifests
	if len(ma) != len(mb) {
		return false
	}
	for i := range ma {
		if !bytes.Equal(ma[i].Raw, mb[i].Raw) {
			return false
		}
		if (ma[i].Object != nil || mb[i].Object != nil) && !equality.Semantic.DeepEqual(ma[i].Object, mb[i].Object) {
			return false
		}
	}
	restA, restB := *a, *b
	restA.Workload.Manifests, restB.Workload.Manifests = nil, nil
	return equality.Semantic.DeepEqual(restA, restB)
}
