package work

import (
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"

	"github.com/workwire/sdk-go/internal/store"
)

// defaultManager names the field manager of writes that give none.
const defaultManager = "workwire"

var manifestWorkGVK = schema.GroupVersion(workv1.GroupVersion).WithKind("ManifestWork")

// patcher applies patches to ManifestWorks the way a kube-apiserver does for
// a custom resource: JSON patch and JSON merge patch; server-side apply with
// managed fields and conflicts (lists are atomic, as in a CRD without list
// markers); and 415 Unsupported Media Type for strategic merge patch, which
// custom resources do not support.
type patcher struct {
	fields *managedfields.FieldManager
}

func newPatcher() (*patcher, error) {
	scheme := runtime.NewScheme()
	if err := workv1.Install(scheme); err != nil {
		return nil, err
	}
	fm, err := managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), scheme, scheme, scheme,
		manifestWorkGVK, manifestWorkGVK.GroupVersion(), "", nil)
	if err != nil {
		return nil, fmt.Errorf("field manager: %w", err)
	}
	return &patcher{fields: fm}, nil
}

// patch returns cur with the patch applied; cur is not modified. cur may be
// nil for an apply patch, which then creates the object.
func (p *patcher) patch(cur *workv1.ManifestWork, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions) (*workv1.ManifestWork, error) {
	switch pt {
	case kubetypes.JSONPatchType, kubetypes.MergePatchType:
		if cur == nil {
			return nil, fmt.Errorf("patch of a missing object")
		}
		raw, err := json.Marshal(typed(cur))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		var out []byte
		if pt == kubetypes.JSONPatchType {
			patch, err := jsonpatch.DecodePatch(data)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
			}
			if out, err = patch.Apply(raw); err != nil {
				return nil, invalidPatch(err)
			}
		} else if out, err = jsonpatch.MergePatch(raw, data); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON merge patch: %v", err))
		}
		next := &workv1.ManifestWork{}
		if err := json.Unmarshal(out, next); err != nil {
			return nil, invalidPatch(err)
		}
		return next, nil
	case kubetypes.ApplyPatchType:
		if opts.FieldManager == "" {
			return nil, apierrors.NewInvalid(manifestWorkGVK.GroupKind(), "", field.ErrorList{
				field.Required(field.NewPath("fieldManager"), "is required for apply patch"),
			})
		}
		applied := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &applied.Object); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid apply patch: %v", err))
		}
		live := cur
		if live == nil {
			live = &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: applied.GetName(), Namespace: applied.GetNamespace()}}
		}
		force := opts.Force != nil && *opts.Force
		obj, err := p.fields.Apply(typed(live), applied, opts.FieldManager, force)
		if err != nil {
			return nil, err // Conflict and Invalid errors are API errors already
		}
		next, ok := obj.(*workv1.ManifestWork)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("apply returned %T", obj))
		}
		return next, nil
	default:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
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
func (p *patcher) track(live, next *workv1.ManifestWork, manager string) *workv1.ManifestWork {
	if len(live.ManagedFields) == 0 {
		return next
	}
	if manager == "" {
		manager = defaultManager
	}
	obj := p.fields.UpdateNoErrors(typed(live), typed(next), manager)
	if w, ok := obj.(*workv1.ManifestWork); ok {
		return w
	}
	return next
}

func invalidPatch(err error) error {
	return apierrors.NewInvalid(manifestWorkGVK.GroupKind(), "", field.ErrorList{field.Invalid(field.NewPath("patch"), "", err.Error())})
}

// typed returns w with its TypeMeta set, which the field manager and JSON
// patches need.
func typed(w *workv1.ManifestWork) *workv1.ManifestWork {
	if w.Kind == manifestWorkGVK.Kind && w.APIVersion == workv1.GroupVersion.String() {
		return w
	}
	c := *w
	c.Kind, c.APIVersion = manifestWorkGVK.Kind, workv1.GroupVersion.String()
	return &c
}

// patchWork applies a patch the way a kube-apiserver does: to the current
// object, through write (the side's update), retrying if the object changed
// between the read and the write — unless the patch itself names a
// resourceVersion, which then must match. An apply patch of a missing
// object goes to create, if the side can create.
func patchWork(st *store.Store[*workv1.ManifestWork], p *patcher, namespace, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions,
	write func(patched *workv1.ManifestWork) (*workv1.ManifestWork, error),
	create func(applied *workv1.ManifestWork) (*workv1.ManifestWork, error)) (*workv1.ManifestWork, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		cur, err := st.Get(namespace, name)
		if apierrors.IsNotFound(err) && pt == kubetypes.ApplyPatchType && create != nil {
			applied, err := p.patch(nil, pt, data, opts)
			if err != nil {
				return nil, err
			}
			if applied.Name != name {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the request (%s)", applied.Name, name))
			}
			return create(applied)
		}
		if err != nil {
			return nil, err
		}
		patched, err := p.patch(cur, pt, data, opts)
		if err != nil {
			return nil, err
		}
		if patched.Name != name || patched.Namespace != namespace {
			return nil, apierrors.NewBadRequest("a patch cannot change the name or namespace")
		}
		pinned := patched.ResourceVersion != cur.ResourceVersion
		if !pinned {
			patched.ResourceVersion = cur.ResourceVersion
		}
		out, err := write(patched)
		if apierrors.IsConflict(err) && !pinned && attempt < attempts {
			continue
		}
		return out, err
	}
}
