// Package feedback evaluates the status feedback rules of a ManifestWork
// (workv1.FeedbackRule) against a resource as it is on a cluster,
// and returns the workv1.FeedbackValues a work agent reports in the
// manifest's status.
//
// Two kinds of rule:
//
//   - WellKnownStatus reports status.replicas, status.readyReplicas and
//     status.availableReplicas, as Integer values named after their fields,
//     for any kind that has them.
//   - JSONPaths evaluates each path (k8s.io/client-go/util/jsonpath syntax,
//     with or without the braces) under .status: a string, integer or
//     boolean is reported as such; an object, a list, or a path that matches
//     several values is reported as JsonRaw, the compact JSON of what it
//     matched.
//
// A value that is not found is left out, as the API says. A value that is
// found but cannot be reported — a non-scalar where a scalar is expected, a
// number that is not an integer, JSON longer than MaxRawLength, an invalid
// path — is an *Error; Evaluate returns the values it could report alongside
// the joined errors, and an agent sets the StatusFeedbackSynced condition to
// False with their text as the message.
package feedback

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"
	workv1 "open-cluster-management.io/api/work/v1"
)

// MaxRawLength is the longest JsonRaw value: the API's validation limit.
const MaxRawLength = 1024

// WellKnownFields are the status fields a WellKnownStatus rule reports, as
// Integer values of the same names.
var WellKnownFields = []string{"replicas", "readyReplicas", "availableReplicas"}

// Reasons a value cannot be reported. Each *Error wraps one of them.
var (
	// ErrTypeMismatch: the value is of a type its rule cannot report.
	ErrTypeMismatch = errors.New("type mismatch")
	// ErrTooLong: the value's JSON is longer than MaxRawLength.
	ErrTooLong = fmt.Errorf("longer than %d bytes of JSON", MaxRawLength)
	// ErrInvalidPath: the JSON path does not parse or cannot be evaluated.
	ErrInvalidPath = errors.New("invalid JSON path")
	// ErrVersion: the path asks for a version the resource is not applied as.
	ErrVersion = errors.New("version not applied")
	// ErrDuplicateName: an earlier rule already reported a value of this name.
	ErrDuplicateName = errors.New("duplicate name")
	// ErrUnknownRule: the rule's type is neither WellKnownStatus nor JSONPaths.
	ErrUnknownRule = errors.New("unknown feedback rule type")
)

// Error is a value a rule found but cannot report.
type Error struct {
	Name string // the value's name
	Path string // the JSON path, or the status field of a well-known value
	Err  error  // one of the Err… reasons, with details
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("%s (%s): %v", e.Name, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Evaluate returns the values rules ask of obj (an unstructured object: the
// whole resource, not only its status), in rule order, each name once. A
// value that is not found is left out. The error joins an *Error for every
// value found that cannot be reported; the other values are returned with
// it. Evaluate does not modify obj.
func Evaluate(obj map[string]any, rules []workv1.FeedbackRule) ([]workv1.FeedbackValue, error) {
	status, _ := obj["status"].(map[string]any)
	var (
		values []workv1.FeedbackValue
		errs   []error
		seen   = map[string]bool{}
	)
	add := func(name, path string, v workv1.FieldValue) {
		if seen[name] {
			errs = append(errs, &Error{Name: name, Path: path, Err: ErrDuplicateName})
			return
		}
		seen[name] = true
		values = append(values, workv1.FeedbackValue{Name: name, Value: v})
	}
	for _, rule := range rules {
		switch rule.Type {
		case workv1.WellKnownStatusType:
			for _, field := range WellKnownFields {
				raw, ok := status[field]
				if !ok || raw == nil {
					continue // not found: left out
				}
				v, err := integer(raw)
				if err != nil {
					errs = append(errs, &Error{Name: field, Path: ".status." + field, Err: err})
					continue
				}
				add(field, ".status."+field, v)
			}
		case workv1.JSONPathsType:
			for _, p := range rule.JsonPaths {
				v, found, err := evaluatePath(obj, status, p)
				switch {
				case err != nil:
					errs = append(errs, &Error{Name: p.Name, Path: p.Path, Err: err})
				case found:
					add(p.Name, p.Path, v)
				}
			}
		default:
			errs = append(errs, &Error{Name: string(rule.Type), Err: ErrUnknownRule})
		}
	}
	return values, errors.Join(errs...)
}

// evaluatePath evaluates one JSON path under status.
func evaluatePath(obj, status map[string]any, p workv1.JsonPath) (v workv1.FieldValue, found bool, err error) {
	if p.Version != "" {
		if gv, _ := schema.ParseGroupVersion(fmt.Sprint(obj["apiVersion"])); gv.Version != p.Version {
			return v, false, fmt.Errorf("%w: the resource is applied as %q, the path asks for %q", ErrVersion, gv.Version, p.Version)
		}
	}
	if status == nil {
		return v, false, nil
	}
	template := strings.TrimSpace(p.Path)
	if !strings.HasPrefix(template, "{") {
		template = "{" + template + "}"
	}
	jp := jsonpath.New(p.Name).AllowMissingKeys(true)
	if err := jp.Parse(template); err != nil {
		return v, false, fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	results, err := jp.FindResults(status)
	if err != nil {
		return v, false, fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	var matched []any
	for _, set := range results {
		for _, r := range set {
			if r.IsValid() && r.CanInterface() && r.Interface() != nil {
				matched = append(matched, r.Interface())
			}
		}
	}
	switch len(matched) {
	case 0:
		return v, false, nil
	case 1:
		v, err = scalarOrRaw(matched[0])
	default:
		v, err = raw(matched) // several values: a list
	}
	return v, err == nil, err
}

// scalarOrRaw reports a string, integer or boolean as such, and an object or
// list as JsonRaw.
func scalarOrRaw(x any) (workv1.FieldValue, error) {
	switch x := x.(type) {
	case string:
		return workv1.FieldValue{Type: workv1.String, String: &x}, nil
	case bool:
		return workv1.FieldValue{Type: workv1.Boolean, Boolean: &x}, nil
	case map[string]any, []any:
		return raw(x)
	default:
		return integer(x)
	}
}

// integer reports an integral number as Integer; anything else is a type
// mismatch.
func integer(x any) (workv1.FieldValue, error) {
	var n int64
	switch x := x.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case float64: // JSON decoded without int64 support
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return workv1.FieldValue{}, fmt.Errorf("%w: %v is not an integer", ErrTypeMismatch, x)
		}
		n = int64(x)
	default:
		return workv1.FieldValue{}, fmt.Errorf("%w: %s, want an integer", ErrTypeMismatch, describe(x))
	}
	return workv1.FieldValue{Type: workv1.Integer, Integer: &n}, nil
}

// raw reports x as JsonRaw.
func raw(x any) (workv1.FieldValue, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return workv1.FieldValue{}, fmt.Errorf("%w: %v", ErrTypeMismatch, err)
	}
	if len(b) > MaxRawLength {
		return workv1.FieldValue{}, fmt.Errorf("%w: %d bytes", ErrTooLong, len(b))
	}
	s := string(b)
	return workv1.FieldValue{Type: workv1.JsonRaw, JsonRaw: &s}, nil
}

func describe(x any) string {
	switch x.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("a %T", x)
	}
}
