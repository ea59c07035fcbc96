// Package widget is a custom resource of the tests' own — not a
// ManifestWork — that tests carry through the engine and codecs as a user
// carries a CRD: a Go type with a spec and a status with conditions, its
// list type, deep copies and a scheme registration, and nothing else.
package widget

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the widgets' API group and version.
var GroupVersion = schema.GroupVersion{Group: "example.workwire.io", Version: "v1alpha1"}

// Resource is the widgets' plural resource name.
const Resource = "widgets"

// GVK is Widget's group, version and kind.
var GVK = GroupVersion.WithKind("Widget")

// AddToScheme registers Widget and WidgetList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Widget is the custom resource.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec"`
	Status            WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is what a source asks for.
type WidgetSpec struct {
	Color string   `json:"color"`
	Size  int      `json:"size,omitempty"`
	Parts []string `json:"parts,omitempty"`
}

// WidgetStatus is what an agent reports.
type WidgetStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Painted    string             `json:"painted,omitempty"`
}

// WidgetList is a list of widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyInto copies w into out.
func (w *Widget) DeepCopyInto(out *Widget) {
	*out = *w
	out.TypeMeta = w.TypeMeta
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Parts = append([]string(nil), w.Spec.Parts...)
	if w.Spec.Parts == nil {
		out.Spec.Parts = nil
	}
	if w.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(w.Status.Conditions))
		for i := range w.Status.Conditions {
			w.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a deep copy of w.
func (w *Widget) DeepCopy() *Widget {
	if w == nil {
		return nil
	}
	out := new(Widget)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object { return w.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &WidgetList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Widget, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
