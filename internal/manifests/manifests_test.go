package manifests

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
)

func workOf(raws ...string) *workv1.ManifestWork {
	w := &workv1.ManifestWork{}
	for _, r := range raws {
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(r)}})
	}
	return w
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string // "" for none, else the error's type
	}{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, ""},
		{" \n{ \"kind\" : \"ConfigMap\" , \"apiVersion\" : \"v1\" } ", ""},
		{`{"apiVersion":"v1","kind":"","metadata":{}}`, "FieldValueRequired"},
		{`{"apiVersion":"v1","metadata":{"kind":"ConfigMap"}}`, "FieldValueRequired"},
		{`{"apiVersion":"v1","kind":7}`, "FieldValueRequired"},
		{`{"apiVersion":"v1","kind":"ConfigMap","kind":""}`, "FieldValueRequired"},
		{`{"apiVersion":"v1","kind":"","kind":"ConfigMap"}`, ""},
		{`{"apiversion":"v1","kind":"ConfigMap"}`, "FieldValueRequired"},
		{`{}`, "FieldValueRequired"},
		{`[{"apiVersion":"v1","kind":"ConfigMap"}]`, "FieldValueInvalid"},
		{`"ConfigMap"`, "FieldValueInvalid"},
		{`{"apiVersion":"v1","kind":"ConfigMap"`, "FieldValueInvalid"},
		{`{"apiVersion":"v1","kind":"ConfigMap"} {}`, "FieldValueInvalid"},
		{``, "FieldValueInvalid"},
	} {
		errs := Check(workOf(tc.raw))
		got := ""
		if len(errs) > 0 {
			got = string(errs[0].Type)
		}
		if len(errs) > 1 || got != tc.want {
			t.Errorf("%q: %v, want %s", tc.raw, errs, tc.want)
		}
	}
	errs := Check(workOf(`{"apiVersion":"v1","kind":"ConfigMap"}`, `{}`, `nope`))
	if len(errs) != 2 || errs[0].Field != "spec.workload.manifests[1]" || errs[1].Field != "spec.workload.manifests[2]" {
		t.Errorf("three manifests, the last two bad: %v", errs)
	}
	w := &workv1.ManifestWork{}
	w.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}}}}
	if errs := Check(w); len(errs) != 0 {
		t.Errorf("a manifest given as an object: %v", errs)
	}
}

// typeOf reads a manifest as encoding/json does: a JSON object whose
// apiVersion and kind keys (as written; the last of a duplicate) are
// non-empty strings.
func FuzzTypeOf(f *testing.F) {
	for _, s := range []string{`{"apiVersion":"v1","kind":"ConfigMap"}`, `{"kind":""}`, `[]`, `{"a":{"kind":"x"},"apiVersion":"v"}`, `{"kind":"\u0041"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		typed, object := typeOf([]byte(s))
		var m map[string]json.RawMessage
		wantObject := json.Unmarshal([]byte(s), &m) == nil && m != nil && strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{")
		nonEmpty := func(k string) bool {
			var v string
			return json.Unmarshal(m[k], &v) == nil && v != "" && m[k][0] == '"'
		}
		if object != wantObject || (object && typed != (nonEmpty("apiVersion") && nonEmpty("kind"))) {
			t.Errorf("%q: typed %v, object %v; encoding/json: object %v", s, typed, object, wantObject)
		}
	})
}

// MinBytes counts the manifests' bytes as given, and the name, namespace,
// labels and annotations, which every spec event and a kube-apiserver's
// store hold whole.
func TestMinBytes(t *testing.T) {
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "a"}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}},
			{RawExtension: runtime.RawExtension{Raw: []byte(` { "apiVersion": "v1", "kind": "Secret" } `)}},
		}}},
	}
	want := len("web") + len("cluster1") + len("app") + len("web") + len("team") + len("a") +
		len(`{"apiVersion":"v1","kind":"ConfigMap"}`) + len(` { "apiVersion": "v1", "kind": "Secret" } `)
	if got := MinBytes(w); got != want {
		t.Errorf("MinBytes = %d, want %d", got, want)
	}
	if got := MinBytes(&workv1.ManifestWork{}); got != 0 {
		t.Errorf("MinBytes of an empty work = %d, want 0", got)
	}
}
