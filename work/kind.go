package work

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/internal/engine"
	"github.com/workwire/sdk-go/internal/jsonscan"
)

var (
	manifestWorkGVK       = schema.GroupVersion(workv1.GroupVersion).WithKind("ManifestWork")
	manifestWorksResource = schema.GroupResource{Group: workv1.GroupName, Resource: "manifestworks"}
)

// manifestWorkKind is what the engine knows of a ManifestWork: what any
// kind has by reflection, done without it on the hot paths, and the checks
// a ManifestWork needs beyond its metadata.
func manifestWorkKind() *engine.Kind[*workv1.ManifestWork] {
	return &engine.Kind[*workv1.ManifestWork]{
		GVK:        manifestWorkGVK,
		Resource:   manifestWorksResource,
		New:        func() *workv1.ManifestWork { return &workv1.ManifestWork{} },
		Copy:       (*workv1.ManifestWork).DeepCopy,
		Share:      shareManifests,
		Shallow:    func(w *workv1.ManifestWork) *workv1.ManifestWork { c := *w; return &c },
		SameSpec:   func(a, b *workv1.ManifestWork) bool { return sameSpec(&a.Spec, &b.Spec) },
		SetSpec:    func(dst, src *workv1.ManifestWork) { dst.Spec = src.Spec },
		SameStatus: func(a, b *workv1.ManifestWork) bool { return equality.Semantic.DeepEqual(a.Status, b.Status) },
		SetStatus:  func(dst, src *workv1.ManifestWork) { dst.Status = src.Status },
		StatusHash: codec.StatusHash,
		Deleted: func(w *workv1.ManifestWork) bool {
			return meta.IsStatusConditionTrue(w.Status.Conditions, codec.WorkDeleted)
		},
		MarkDeleted: func(w *workv1.ManifestWork) {
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
				Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "WorkDeleted",
				Message: "the work's resources are removed from the cluster", ObservedGeneration: w.Generation,
			})
		},
		Validate:      validateManifests,
		MinEventBytes: minEventBytes,
	}
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

// validateManifests checks that every manifest is a JSON object, so a bad
// work fails at the call instead of later, at publish.
func validateManifests(w *workv1.ManifestWork) field.ErrorList {
	var errs field.ErrorList
	manifests := field.NewPath("spec", "workload", "manifests")
	for i, m := range w.Spec.Workload.Manifests {
		raw := m.Raw
		if raw == nil && m.Object != nil {
			var err error
			if raw, err = json.Marshal(m.Object); err != nil {
				errs = append(errs, field.Invalid(manifests.Index(i), "", err.Error()))
				continue
			}
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' || !jsonscan.Valid(raw) {
			errs = append(errs, field.Invalid(manifests.Index(i), string(truncate(raw, 64)), "must be a JSON object"))
		}
	}
	return errs
}

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(b[:n:n], "..."...)
}

// minEventBytes is a lower bound of the size of w's spec event: workwire's
// codecs carry the manifests' bytes verbatim in the data, and the name,
// namespace, labels and annotations (JSON-escaped, so no shorter) in the
// metadata extension.
func minEventBytes(w *workv1.ManifestWork) int {
	n := len(w.Name) + len(w.Namespace)
	for i := range w.Spec.Workload.Manifests {
		n += len(w.Spec.Workload.Manifests[i].Raw)
	}
	for k, v := range w.Labels {
		n += len(k) + len(v)
	}
	for k, v := range w.Annotations {
		n += len(k) + len(v)
	}
	return n
}
