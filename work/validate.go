package work

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/jsonscan"
	"github.com/workwire/sdk-go/internal/store"
)

var errConflict = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// validate checks what a kube-apiserver checks of a ManifestWork's metadata,
// and that every manifest is a JSON object, so a bad work fails at the
// call instead of later, at publish.
func validate(w *workv1.ManifestWork) error {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if w.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "name or generateName is required"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(w.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), w.Name, msg))
		}
	}
	if w.Namespace == "" {
		errs = append(errs, field.Required(meta.Child("namespace"), "the namespace is the cluster the work goes to"))
	} else {
		// A namespace is a DNS label on a kube-apiserver too; here it also
		// stands in topics and routes, where '/', '+' and '#' cannot.
		for _, msg := range validation.IsDNS1123Label(w.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), w.Namespace, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(w.Labels, meta.Child("labels"))...)
	if w.Generation > math.MaxInt32 {
		errs = append(errs, field.Invalid(meta.Child("generation"), w.Generation, "beyond what the resourceversion extension carries (32 bits)"))
	}
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
	if len(errs) > 0 {
		return apierrors.NewInvalid(manifestWorkGVK.GroupKind(), w.Name, errs)
	}
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(b[:n:n], "..."...)
}

// bindNamespace puts w in namespace, as the request path does on a
// kube-apiserver; a different namespace in the object is an error.
func bindNamespace(namespace string, w *workv1.ManifestWork) error {
	if err := checkNamespace(namespace, w.Namespace); err != nil {
		return err
	}
	w.Namespace = namespace
	return nil
}

// checkNamespace is bindNamespace's check: the namespace of the request,
// and that of the object if it names one.
func checkNamespace(namespace, objNamespace string) error {
	if namespace == "" {
		return apierrors.NewBadRequest("a namespace is required: it is the cluster the work is for")
	}
	if objNamespace != "" && objNamespace != namespace {
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", objNamespace, namespace))
	}
	return nil
}

// checkUpdate is what an update (Update, UpdateStatus) must pass before
// it is written, on either side; patches skip it.
func checkUpdate(st *store.Store[*workv1.ManifestWork], namespace string, in *workv1.ManifestWork) error {
	if err := checkNamespace(namespace, in.Namespace); err != nil {
		return err
	}
	return requireResourceVersion(st, namespace, in)
}

// requireResourceVersion refuses an update (Update, UpdateStatus) whose
// object names no resourceVersion, as a kube-apiserver refuses an
// unconditional update of a custom resource — with the same error, whose
// kind is the resource's plural, as there. A missing work is NotFound
// first, as there. Patches are not updates: they apply to the current
// object.
func requireResourceVersion(st *store.Store[*workv1.ManifestWork], namespace string, in *workv1.ManifestWork) error {
	if in.ResourceVersion != "" {
		return nil
	}
	if _, ok := st.Peek(namespace, in.Name); !ok {
		return apierrors.NewNotFound(manifestWorksResource, in.Name)
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: manifestWorksResource.Group, Kind: manifestWorksResource.Resource}, in.Name, field.ErrorList{
		field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update"),
	})
}

// nameOf fills in a generated name, as the kube-apiserver does.
func nameOf(w *workv1.ManifestWork) {
	if w.Name == "" && w.GenerateName != "" {
		w.Name = w.GenerateName + utilrand.String(5)
	}
}

// checkPreconditions compares what a write names with the current object.
func checkPreconditions(cur *workv1.ManifestWork, uid, resourceVersion string) error {
	if uid != "" && uid != string(cur.UID) {
		return apierrors.NewConflict(manifestWorksResource, cur.Name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cur.UID))
	}
	if resourceVersion != "" && resourceVersion != cur.ResourceVersion {
		return apierrors.NewConflict(manifestWorksResource, cur.Name, errConflict)
	}
	return nil
}

func deletePreconditions(cur *workv1.ManifestWork, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	var uid, rv string
	if p.UID != nil {
		uid = string(*p.UID)
	}
	if p.ResourceVersion != nil {
		rv = *p.ResourceVersion
	}
	return checkPreconditions(cur, uid, rv)
}

func isDryRun(dryRun []string) bool {
	for _, d := range dryRun {
		if d == metav1.DryRunAll {
			return true
		}
	}
	return false
}
