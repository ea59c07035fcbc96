// Package manifests holds the one rule a ManifestWork's manifests follow
// wherever a work is written — a hub holder's Create and Update, a
// workstore's writes: each is a JSON object with a non-empty apiVersion and
// kind, as a kube-apiserver requires of the embedded resources OCM's CRD
// declares them to be, and as an agent needs to apply one. MinBytes is the
// measure a hub holder keeps a work's size to.
package manifests

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/jsonscan"
)

// Check returns what is wrong with w's manifests, each by its path.
func Check(w *workv1.ManifestWork) field.ErrorList {
	var errs field.ErrorList
	for i, m := range w.Spec.Workload.Manifests {
		raw := m.Raw
		if raw == nil && m.Object != nil {
			var err error
			if raw, err = json.Marshal(m.Object); err != nil {
				errs = append(errs, field.Invalid(at(i), "", err.Error()))
				continue
			}
		}
		switch typed, object := typeOf(raw); {
		case !object:
			errs = append(errs, field.Invalid(at(i), string(truncate(bytes.TrimSpace(raw), 64)), "must be a JSON object"))
		case !typed:
			errs = append(errs, field.Required(at(i), "apiVersion and kind"))
		}
	}
	return errs
}

// at is the path of the i-th manifest, made only for an error: every
// work a hub writes is checked.
func at(i int) *field.Path { return field.NewPath("spec", "workload", "manifests").Index(i) }

// typeOf reports whether raw is a JSON object, and whether its apiVersion
// and kind are non-empty strings, in one pass and without allocating.
func typeOf(raw []byte) (typed, object bool) {
	i := jsonscan.SkipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false, false
	}
	var apiVersion, kind bool
	m := jsonscan.ReadObject(raw, i, 0)
	for m.Next() {
		// A value is a non-empty string if it is more than its quotes;
		// the last of a duplicated key counts, as encoding/json reads it.
		// A key is compared as written: an escaped one is no match.
		start, end := m.Value()
		set := raw[start] == '"' && end-start > 2
		switch string(m.Key()) {
		case "apiVersion":
			apiVersion = set
		case "kind":
			kind = set
		}
	}
	if end, ok := m.End(); !ok || jsonscan.SkipWS(raw, end) != len(raw) {
		return false, false
	}
	return apiVersion && kind, true
}

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(b[:n:n], "..."...)
}

// MinBytes is a lower bound of the size of w's spec event, which a hub
// holder refuses a work by when it exceeds the holder's limit or the
// transport's: workwire's codecs carry the manifests' bytes verbatim in the
// data, and the name, namespace, labels and annotations (JSON-escaped, so
// no shorter) in the metadata extension. It bounds w's size in a
// kube-apiserver's store too, which holds them all, but for whitespace
// between the manifests' tokens, which this counts and a kube-apiserver
// drops. It reads no manifest and does not allocate.
func MinBytes(w *workv1.ManifestWork) int {
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
