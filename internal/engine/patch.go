package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/workwire/sdk-go/internal/store"
)

// defaultManager names the field manager of writes that give none.
const defaultManager = "workwire"

// patcher applies patches the way a kube-apiserver does for a custom
// resource: JSON patch and JSON merge patch; server-side apply with
// managed fields and conflicts (lists are atomic, as in a CRD without list
// markers); and 415 Unsupported Media Type for strategic merge patch, which
// custom resources do not support.
type patcher[T Object] struct {
	kind   *Kind[T]
	fields *managedfields.FieldManager
}

func newPatcher[T Object](kind *Kind[T], scheme *runtime.Scheme) (*patcher[T], error) {
	fm, err := managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), scheme, scheme, scheme,
		kind.GVK, kind.GVK.GroupVersion(), "", nil)
	if err != nil {
		return nil, fmt.Errorf("field manager: %w", err)
	}
	return &patcher[T]{kind: kind, fields: fm}, nil
}

// patch returns cur with the patch applied; cur is not modified. cur may be
// nil for an apply patch, which then creates the object.
func (p *patcher[T]) patch(cur T, exists bool, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions) (T, error) {
	var zero T
	switch pt {
	case kubetypes.JSONPatchType, kubetypes.MergePatchType:
		if !exists {
			return zero, fmt.Errorf("patch of a missing object")
		}
		raw, err := json.Marshal(p.typed(cur))
		if err != nil {
			return zero, apierrors.NewInternalError(err)
		}
		var out []byte
		if pt == kubetypes.JSONPatchType {
			patch, err := jsonpatch.DecodePatch(data)
			if err != nil {
				return zero, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
			}
			if out, err = patch.Apply(raw); err != nil {
				return zero, p.invalidPatch(err)
			}
		} else if out, err = jsonpatch.MergePatch(raw, data); err != nil {
			return zero, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON merge patch: %v", err))
		}
		next := p.kind.New()
		if err := json.Unmarshal(out, next); err != nil {
			return zero, p.invalidPatch(err)
		}
		return next, nil
	case kubetypes.ApplyPatchType:
		if opts.FieldManager == "" {
			return zero, apierrors.NewInvalid(p.kind.GVK.GroupKind(), "", field.ErrorList{
				field.Required(field.NewPath("fieldManager"), "is required for apply patch"),
			})
		}
		applied := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &applied.Object); err != nil {
			return zero, apierrors.NewBadRequest(fmt.Sprintf("invalid apply patch: %v", err))
		}
		live := cur
		if !exists {
			live = p.kind.New()
			live.SetName(applied.GetName())
			live.SetNamespace(applied.GetNamespace())
		}
		force := opts.Force != nil && *opts.Force
		obj, err := p.fields.Apply(p.typed(live), applied, opts.FieldManager, force)
		if err != nil {
			return zero, err // Conflict and Invalid errors are API errors already
		}
		next, ok := obj.(T)
		if !ok {
			return zero, apierrors.NewInternalError(fmt.Errorf("apply returned %T", obj))
		}
		return next, nil
	default:
		return zero, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusUnsupportedMediaType,
			Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s",
				kubetypes.JSONPatchType, kubetypes.MergePatchType, kubetypes.ApplyPatchType),
		}}
	}
}

// track records manager's write of next over live in next's managed fields,
// for objects that already have managed fields (they were applied): later
// applies then see who owns what, as on a kube-apiserver. Objects never
// applied carry none, which costs nothing on the hot path.
func (p *patcher[T]) track(live, next T, manager string) T {
	if len(live.GetManagedFields()) == 0 {
		return next
	}
	if manager == "" {
		manager = defaultManager
	}
	obj := p.fields.UpdateNoErrors(p.typed(live), p.typed(next), manager)
	if out, ok := obj.(T); ok {
		return out
	}
	return next
}

func (p *patcher[T]) invalidPatch(err error) error {
	return apierrors.NewInvalid(p.kind.GVK.GroupKind(), "", field.ErrorList{field.Invalid(field.NewPath("patch"), "", err.Error())})
}

// typed returns obj with its TypeMeta set, which the field manager and JSON
// patches need: obj itself if it has it, or a shallow copy.
func (p *patcher[T]) typed(obj T) T {
	if obj.GetObjectKind().GroupVersionKind() == p.kind.GVK {
		return obj
	}
	c := reflect.New(reflect.TypeOf(obj).Elem())
	c.Elem().Set(reflect.ValueOf(obj).Elem())
	out := c.Interface().(T)
	out.GetObjectKind().SetGroupVersionKind(p.kind.GVK)
	return out
}

// patchObject applies a patch the way a kube-apiserver does: to the current
// object, through write (the side's update), retrying if the object changed
// between the read and the write — unless the patch itself names a
// resourceVersion, which then must match. An apply patch of a missing
// object goes to create, if the side can create.
func patchObject[T Object](st *store.Store[T], p *patcher[T], namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions,
	write func(patched T) (T, error), create func(applied T) (T, error)) (T, error) {
	const attempts = 5
	var zero T
	for attempt := 1; ; attempt++ {
		cur, err := st.Get(namespace, name)
		if apierrors.IsNotFound(err) && pt == kubetypes.ApplyPatchType && create != nil {
			applied, err := p.patch(zero, false, pt, data, opts)
			if err != nil {
				return zero, err
			}
			if applied.GetName() != name {
				return zero, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the request (%s)", applied.GetName(), name))
			}
			return create(applied)
		}
		if err != nil {
			return zero, err
		}
		patched, err := p.patch(cur, true, pt, data, opts)
		if err != nil {
			return zero, err
		}
		if patched.GetName() != name || patched.GetNamespace() != namespace {
			return zero, apierrors.NewBadRequest("a patch cannot change the name or namespace")
		}
		pinned := patched.GetResourceVersion() != cur.GetResourceVersion()
		if !pinned {
			patched.SetResourceVersion(cur.GetResourceVersion())
		}
		out, err := write(patched)
		if apierrors.IsConflict(err) && !pinned && attempt < attempts {
			continue
		}
		return out, err
	}
}
