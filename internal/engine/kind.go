package engine

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/store"
)

// Object is what the engine carries: a Kubernetes object, as a pointer to
// its struct.
type Object = store.Object

// DeletedCondition is the status condition by which an agent reports that
// it removed an object its source deleted (OCM's "Deleted"): the source
// then forgets it.
const DeletedCondition = "Deleted"

// Kind tells the engine what it needs to know of T. KindOf fills it in
// for any T by reflection; a type may replace what it does faster or
// checks more (package work does, for ManifestWork).
type Kind[T Object] struct {
	GVK      schema.GroupVersionKind
	Resource schema.GroupResource // the plural, for API errors
	// New returns an empty T.
	New func() T
	// Copy deep copies; Share copies for a writer to change, and may share
	// with the original what nobody changes in place (large byte slices);
	// Shallow copies the struct alone, for a new version of a stored object
	// that replaces one part and shares the rest.
	Copy, Share, Shallow func(T) T
	// SameSpec and SetSpec compare and assign the spec: what a source sets
	// and its agents get — every field but the type and object metadata and
	// the status. SetSpec shares src's with dst.
	SameSpec func(a, b T) bool
	SetSpec  func(dst, src T)
	// SameStatus and SetStatus do the same for the status, what agents
	// report; nil if T has none. SetStatus(dst, New()) clears dst's.
	SameStatus func(a, b T) bool
	SetStatus  func(dst, src T)
	// StatusHash hashes the status for resync (generic.NoStatus if none).
	StatusHash generic.StatusHashGetter[T]
	// Deleted reports whether an agent's status says it removed the
	// object, and MarkDeleted sets that on a copy the agent sends last;
	// both nil if T's status has no conditions: a hub then forgets a
	// deleted object as soon as nothing else holds it.
	Deleted     func(status T) bool
	MarkDeleted func(T)
	// Validate checks what a kube-apiserver would beyond the metadata; nil
	// checks nothing more.
	Validate func(T) field.ErrorList
	// MinEventBytes is a lower bound of the size of T's spec event, and of
	// T's own, nil if unknown: a hub refuses an object whose bound exceeds
	// the transport's event size limit or Config.MaxBytes at once (413).
	MinEventBytes func(T) int
}

// KindOf returns the Kind of T (a pointer to a struct with embedded
// TypeMeta and ObjectMeta), which the group, version, kind and plural
// resource name. Its spec is every field but TypeMeta, ObjectMeta and
// Status; its status the field Status, if T has one; its Deleted
// condition, if that status has Conditions []metav1.Condition.
func KindOf[T Object](gvk schema.GroupVersionKind, resource string) (Kind[T], error) {
	var zero T
	typ := reflect.TypeOf(zero)
	if typ == nil || typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return Kind[T]{}, fmt.Errorf("%v: want a pointer to a struct", typ)
	}
	elem := typ.Elem()
	var spec []int
	status := -1
	for i := range elem.NumField() {
		f := elem.Field(i)
		switch {
		case f.Anonymous && (f.Type == reflect.TypeFor[metav1.TypeMeta]() || f.Type == reflect.TypeFor[metav1.ObjectMeta]()):
		case f.Name == "Status":
			status = i
		case f.IsExported():
			spec = append(spec, i)
		}
	}
	k := Kind[T]{
		GVK:      gvk,
		Resource: schema.GroupResource{Group: gvk.Group, Resource: resource},
		New:      func() T { return reflect.New(elem).Interface().(T) },
		Copy:     func(obj T) T { return obj.DeepCopyObject().(T) },
		Shallow: func(obj T) T {
			c := reflect.New(elem)
			c.Elem().Set(reflect.ValueOf(obj).Elem())
			return c.Interface().(T)
		},
		SameSpec: func(a, b T) bool {
			va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
			for _, i := range spec {
				if !equality.Semantic.DeepEqual(va.Field(i).Addr().Interface(), vb.Field(i).Addr().Interface()) {
					return false
				}
			}
			return true
		},
		SetSpec: func(dst, src T) {
			vd, vs := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
			for _, i := range spec {
				vd.Field(i).Set(vs.Field(i))
			}
		},
		StatusHash: func(T) (string, error) { return generic.NoStatus, nil },
	}
	k.Share = k.Copy
	if status < 0 {
		return k, nil
	}
	k.SameStatus = func(a, b T) bool {
		sa, sb := reflect.ValueOf(a).Elem().Field(status), reflect.ValueOf(b).Elem().Field(status)
		return equality.Semantic.DeepEqual(sa.Addr().Interface(), sb.Addr().Interface())
	}
	k.SetStatus = func(dst, src T) {
		reflect.ValueOf(dst).Elem().Field(status).Set(reflect.ValueOf(src).Elem().Field(status))
	}
	k.StatusHash = func(obj T) (string, error) {
		s := reflect.ValueOf(obj).Elem().Field(status)
		if s.IsZero() {
			return generic.NoStatus, nil
		}
		return generic.StatusHash(s.Addr().Interface())
	}
	conds, ok := elem.Field(status).Type.FieldByName("Conditions")
	if !ok || conds.Type != reflect.TypeFor[[]metav1.Condition]() {
		return k, nil
	}
	conditions := func(obj T) *[]metav1.Condition {
		return reflect.ValueOf(obj).Elem().Field(status).FieldByIndex(conds.Index).Addr().Interface().(*[]metav1.Condition)
	}
	k.Deleted = func(obj T) bool { return meta.IsStatusConditionTrue(*conditions(obj), DeletedCondition) }
	k.MarkDeleted = func(obj T) {
		meta.SetStatusCondition(conditions(obj), metav1.Condition{
			Type: DeletedCondition, Status: metav1.ConditionTrue, Reason: "Deleted",
			Message: "the agent removed it", ObservedGeneration: obj.GetGeneration(),
		})
	}
	return k, nil
}

// IsNil reports whether v is nil, or a nil pointer or func in an
// interface: what a typed nil passed as a T, a config or a constructor is.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}
