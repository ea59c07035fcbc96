package engine

import (
	"errors"
	"fmt"
	"math"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workwire/sdk-go/internal/store"
)

// refused is the error of a method the engine does not serve: 405
// MethodNotAllowed, as apierrors.NewMethodNotSupported makes it (so
// apierrors.IsMethodNotSupported holds), with format, given gr, as the
// whole message: that template would have it read "… is not supported on
// resources of kind …".
func refused(gr schema.GroupResource, format string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource},
		Message: fmt.Sprintf(format, gr.String()),
	}}
}

var errConflict = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// validate checks what a kube-apiserver checks of an object's metadata,
// and then what the kind checks, so a bad object fails at the call
// instead of later, at publish.
func (k *Kind[T]) validate(obj T) error {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if name := obj.GetName(); name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "name or generateName is required"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(meta.Child("name"), name, msg))
		}
	}
	if ns := obj.GetNamespace(); ns == "" {
		errs = append(errs, field.Required(meta.Child("namespace"), "the namespace is the cluster the object goes to"))
	} else {
		// A namespace is a DNS label on a kube-apiserver too; here it also
		// stands in topics and routes, where '/', '+' and '#' cannot.
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(obj.GetLabels(), meta.Child("labels"))...)
	if g := obj.GetGeneration(); g > math.MaxInt32 {
		errs = append(errs, field.Invalid(meta.Child("generation"), g, "beyond what the resourceversion extension carries (32 bits)"))
	}
	if k.Validate != nil {
		errs = append(errs, k.Validate(obj)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(k.GVK.GroupKind(), obj.GetName(), errs)
	}
	return nil
}

// bindNamespace puts obj in namespace, as the request path does on a
// kube-apiserver; a different namespace in the object is an error.
func bindNamespace(namespace string, obj Object) error {
	if err := checkNamespace(namespace, obj.GetNamespace()); err != nil {
		return err
	}
	obj.SetNamespace(namespace)
	return nil
}

// checkNamespace is bindNamespace's check: the namespace of the request,
// and that of the object if it names one.
func checkNamespace(namespace, objNamespace string) error {
	if namespace == "" {
		return apierrors.NewBadRequest("a namespace is required: it is the cluster the object is for")
	}
	if objNamespace != "" && objNamespace != namespace {
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", objNamespace, namespace))
	}
	return nil
}

// checkUpdate is what an update (Update, UpdateStatus) must pass before
// it is written, on either side; patches skip it.
func (k *Kind[T]) checkUpdate(st *store.Store[T], namespace string, in T) error {
	if err := checkNamespace(namespace, in.GetNamespace()); err != nil {
		return err
	}
	return k.requireResourceVersion(st, namespace, in)
}

// requireResourceVersion refuses an update (Update, UpdateStatus) whose
// object names no resourceVersion, as a kube-apiserver refuses an
// unconditional update of a custom resource — with the same error, whose
// kind is the resource's plural, as there. A missing object is NotFound
// first, as there. Patches are not updates: they apply to the current
// object.
func (k *Kind[T]) requireResourceVersion(st *store.Store[T], namespace string, in T) error {
	if in.GetResourceVersion() != "" {
		return nil
	}
	if _, ok := st.Peek(namespace, in.GetName()); !ok {
		return apierrors.NewNotFound(k.Resource, in.GetName())
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: k.Resource.Group, Kind: k.Resource.Resource}, in.GetName(), field.ErrorList{
		field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update"),
	})
}

// generateName fills in a generated name, as the kube-apiserver does.
func generateName(obj Object) {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		obj.SetName(obj.GetGenerateName() + utilrand.String(5))
	}
}

// checkPreconditions compares what a write names with the current object.
func (k *Kind[T]) checkPreconditions(cur T, uid, resourceVersion string) error {
	if uid != "" && uid != string(cur.GetUID()) {
		return apierrors.NewConflict(k.Resource, cur.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cur.GetUID()))
	}
	if resourceVersion != "" && resourceVersion != cur.GetResourceVersion() {
		return apierrors.NewConflict(k.Resource, cur.GetName(), errConflict)
	}
	return nil
}

func (k *Kind[T]) deletePreconditions(cur T, p *metav1.Preconditions) error {
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
	return k.checkPreconditions(cur, uid, rv)
}

func isDryRun(dryRun []string) bool {
	for _, d := range dryRun {
		if d == metav1.DryRunAll {
			return true
		}
	}
	return false
}
