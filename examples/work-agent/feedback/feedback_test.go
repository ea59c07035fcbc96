package feedback_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/work-agent/feedback"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// deployment is a Deployment as a dynamic client returns it: JSON decoded
// into maps, integers as int64.
func deployment(t *testing.T, status string) map[string]any {
	t.Helper()
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}
	if status != "" {
		var s map[string]any
		d := json.NewDecoder(strings.NewReader(status))
		d.UseNumber()
		if err := d.Decode(&s); err != nil {
			t.Fatal(err)
		}
		obj["status"] = toInt64(s)
	}
	return obj
}

// toInt64 turns json.Numbers into int64 (or float64), as the unstructured
// decoder does.
func toInt64(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = toInt64(x)
		}
	case []any:
		for i, x := range v {
			v[i] = toInt64(x)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

const readyStatus = `{
	"replicas": 2, "readyReplicas": 2, "availableReplicas": 1, "observedGeneration": 3,
	"paused": false, "ratio": 0.5,
	"selector": {"app": "web"},
	"conditions": [
		{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
		{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
	]
}`

func integer(name string, n int64) workv1.FeedbackValue {
	return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.Integer, Integer: &n}}
}

func str(name, s string) workv1.FeedbackValue {
	return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: &s}}
}

func boolean(name string, b bool) workv1.FeedbackValue {
	return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.Boolean, Boolean: &b}}
}

func jsonRaw(name, s string) workv1.FeedbackValue {
	return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.JsonRaw, JsonRaw: &s}}
}

func paths(ps ...string) workv1.FeedbackRule {
	r := workv1.FeedbackRule{Type: workv1.JSONPathsType}
	for i := 0; i < len(ps); i += 2 {
		r.JsonPaths = append(r.JsonPaths, workv1.JsonPath{Name: ps[i], Path: ps[i+1]})
	}
	return r
}

var wellKnown = workv1.FeedbackRule{Type: workv1.WellKnownStatusType}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  string // "" for no status at all
		rules   []workv1.FeedbackRule
		want    []workv1.FeedbackValue
		wantErr []error // each must be in the error; nil means no error
		errText []string
	}{{
		name:   "well-known status",
		status: readyStatus,
		rules:  []workv1.FeedbackRule{wellKnown},
		want:   []workv1.FeedbackValue{integer("replicas", 2), integer("readyReplicas", 2), integer("availableReplicas", 1)},
	}, {
		name:   "well-known status leaves out what is missing",
		status: `{"replicas": 1}`,
		rules:  []workv1.FeedbackRule{wellKnown},
		want:   []workv1.FeedbackValue{integer("replicas", 1)},
	}, {
		name:  "no status at all",
		rules: []workv1.FeedbackRule{wellKnown, paths("ready", ".readyReplicas")},
	}, {
		name:   "JSON paths to scalars",
		status: readyStatus,
		rules: []workv1.FeedbackRule{paths(
			"ready", ".readyReplicas",
			"available", `.conditions[?(@.type=="Available")].status`,
			"paused", ".paused",
			"generation", "{.observedGeneration}", // braces are fine too
		)},
		want: []workv1.FeedbackValue{integer("ready", 2), str("available", "True"), boolean("paused", false), integer("generation", 3)},
	}, {
		name:   "JSON paths to structures are JsonRaw",
		status: readyStatus,
		rules:  []workv1.FeedbackRule{paths("selector", ".selector", "types", ".conditions[*].type")},
		want:   []workv1.FeedbackValue{jsonRaw("selector", `{"app":"web"}`), jsonRaw("types", `["Available","Progressing"]`)},
	}, {
		name:   "values not found are left out",
		status: readyStatus,
		rules: []workv1.FeedbackRule{paths(
			"missing", ".unavailableReplicas",
			"deep", ".a.b.c",
			"noMatch", `.conditions[?(@.type=="Degraded")].status`,
			"ready", ".readyReplicas",
		)},
		want: []workv1.FeedbackValue{integer("ready", 2)},
	}, {
		name:    "a non-scalar where a scalar is expected",
		status:  `{"replicas": {"desired": 2}, "readyReplicas": "two", "availableReplicas": 1}`,
		rules:   []workv1.FeedbackRule{wellKnown},
		want:    []workv1.FeedbackValue{integer("availableReplicas", 1)},
		wantErr: []error{feedback.ErrTypeMismatch},
		errText: []string{"replicas (.status.replicas): type mismatch: an object, want an integer", "readyReplicas (.status.readyReplicas): type mismatch: a string"},
	}, {
		name:    "a number that is not an integer",
		status:  readyStatus,
		rules:   []workv1.FeedbackRule{paths("ratio", ".ratio", "ready", ".readyReplicas")},
		want:    []workv1.FeedbackValue{integer("ready", 2)},
		wantErr: []error{feedback.ErrTypeMismatch},
		errText: []string{"ratio (.ratio): type mismatch: 0.5 is not an integer"},
	}, {
		name:    "JsonRaw over the API's limit",
		status:  `{"big": "` + strings.Repeat("x", 600) + `", "list": ["` + strings.Repeat("y", 600) + `", "` + strings.Repeat("z", 600) + `"]}`,
		rules:   []workv1.FeedbackRule{paths("big", ".big", "list", ".list")},
		want:    []workv1.FeedbackValue{str("big", strings.Repeat("x", 600))},
		wantErr: []error{feedback.ErrTooLong},
		errText: []string{"list (.list): longer than 1024 bytes of JSON"},
	}, {
		name:    "an invalid path",
		status:  readyStatus,
		rules:   []workv1.FeedbackRule{paths("bad", ".conditions[?(@.type==", "ready", ".readyReplicas")},
		want:    []workv1.FeedbackValue{integer("ready", 2)},
		wantErr: []error{feedback.ErrInvalidPath},
	}, {
		name:    "a version the resource is not applied as",
		status:  readyStatus,
		rules:   []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: "ready", Path: ".readyReplicas", Version: "v1beta1"}}}},
		wantErr: []error{feedback.ErrVersion},
	}, {
		name:    "a name reported twice",
		status:  readyStatus,
		rules:   []workv1.FeedbackRule{wellKnown, paths("replicas", ".observedGeneration")},
		want:    []workv1.FeedbackValue{integer("replicas", 2), integer("readyReplicas", 2), integer("availableReplicas", 1)},
		wantErr: []error{feedback.ErrDuplicateName},
	}, {
		name:    "an unknown rule type",
		status:  readyStatus,
		rules:   []workv1.FeedbackRule{{Type: "Everything"}},
		wantErr: []error{feedback.ErrUnknownRule},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj := deployment(t, tc.status)
			before, _ := json.Marshal(obj)
			got, err := feedback.Evaluate(obj, tc.rules)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if tc.wantErr == nil && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			if tc.wantErr != nil && err == nil {
				t.Errorf("no error, want %v", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("error %v is not %v", err, want)
				}
				var fe *feedback.Error
				if !errors.As(err, &fe) {
					t.Errorf("error %v holds no *feedback.Error", err)
				}
			}
			for _, text := range tc.errText {
				if err == nil || !strings.Contains(err.Error(), text) {
					t.Errorf("error %v does not say %q", err, text)
				}
			}
			if after, _ := json.Marshal(obj); string(after) != string(before) {
				t.Errorf("Evaluate modified the object:\n%s\n%s", before, after)
			}
		})
	}
}
