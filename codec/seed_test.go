package codec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// deployment is the part of a Deployment manifest the seed tests look at.
type deployment struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Replicas int `json:"replicas"`
		Template struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// pluralized returns evt with its type in the plural form encoders emit.
func pluralized(t *testing.T, evt *cloudevents.Event) *cloudevents.Event {
	t.Helper()
	et, err := types.ParseEventType(evt.Type())
	if err != nil {
		t.Fatal(err)
	}
	et.DataType.Resource += "s"
	out := evt.Clone()
	out.SetType(et.String())
	return &out
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestSeedSpecEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file         string
		codec        generic.Codec[*workv1.ManifestWork]
		source       string
		generation   int64
		replicas     int
		image        string
		feedbackRule bool   // the manifestbundle examples have a JSONPaths rule
		deletion     string // want a DeletionTimestamp; no data
	}{
		{file: "manifest-spec-create.json", codec: NewManifestCodec(), source: testSource, generation: 1, replicas: 1, image: "busybox:1.28"},
		{file: "manifest-spec-update.json", codec: NewManifestCodec(), source: testSource, generation: 2, replicas: 2, image: "busybox:1.28"},
		{file: "manifest-spec-delete.json", codec: NewManifestCodec(), source: "d3ded4/mwrs-hub-controller", generation: 2, deletion: "2023-07-19T03:03:46.841308779Z"},
		{file: "manifestbundle-spec-create.json", codec: NewManifestBundleCodec(), source: testSource, generation: 1, replicas: 1, image: "busybox:1.31", feedbackRule: true},
		{file: "manifestbundle-spec-update.json", codec: NewManifestBundleCodec(), source: testSource, generation: 2, replicas: 2, image: "busybox:1.31", feedbackRule: true},
		{file: "manifestbundle-spec-delete.json", codec: NewManifestBundleCodec(), source: testSource, generation: 3, deletion: "2023-07-19T03:05:46.841308779Z"},
	}
	for _, tc := range tests {
		for _, form := range []string{"singular", "plural"} {
			t.Run(tc.file+"/"+form, func(t *testing.T) {
				t.Parallel()
				evt := readProtocolExample(t, tc.file)
				if form == "plural" {
					evt = pluralized(t, evt)
				}
				work, err := generic.Decode(tc.codec, evt)
				if err != nil {
					t.Fatal(err)
				}
				if work.UID != testUID {
					t.Errorf("UID = %q, want %q", work.UID, testUID)
				}
				if work.Name != testUID {
					t.Errorf("Name = %q, want the resource ID (the seed carries no metadata)", work.Name)
				}
				if work.Namespace != "" {
					t.Errorf("Namespace = %q, want empty (the seed has no clustername)", work.Namespace)
				}
				if work.Generation != tc.generation {
					t.Errorf("Generation = %d, want %d", work.Generation, tc.generation)
				}
				if got := work.Annotations[OriginalSourceAnnotation]; got != tc.source {
					t.Errorf("original source = %q, want %q", got, tc.source)
				}
				if work.Kind != "ManifestWork" || work.APIVersion != "work.open-cluster-management.io/v1" {
					t.Errorf("TypeMeta = %+v", work.TypeMeta)
				}

				if tc.deletion != "" {
					want := mustTime(t, tc.deletion)
					if work.DeletionTimestamp == nil || !work.DeletionTimestamp.Time.Equal(want) {
						t.Errorf("DeletionTimestamp = %v, want %v", work.DeletionTimestamp, want)
					}
					if len(work.Spec.Workload.Manifests) != 0 {
						t.Errorf("a delete_request without data decoded to %d manifests", len(work.Spec.Workload.Manifests))
					}
					return
				}
				if work.DeletionTimestamp != nil {
					t.Errorf("DeletionTimestamp = %v, want none", work.DeletionTimestamp)
				}
				if n := len(work.Spec.Workload.Manifests); n != 1 {
					t.Fatalf("%d manifests, want 1", n)
				}
				var d deployment
				if err := json.Unmarshal(work.Spec.Workload.Manifests[0].Raw, &d); err != nil {
					t.Fatal(err)
				}
				if d.Kind != "Deployment" || d.Metadata.Name != "busybox-48150" || d.Metadata.Namespace != "default" {
					t.Errorf("manifest is %s %s/%s", d.Kind, d.Metadata.Namespace, d.Metadata.Name)
				}
				if d.Spec.Replicas != tc.replicas {
					t.Errorf("replicas = %d, want %d", d.Spec.Replicas, tc.replicas)
				}
				if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Image != tc.image {
					t.Errorf("containers = %+v, want one with image %s", cs, tc.image)
				}
				if !tc.feedbackRule {
					if len(work.Spec.ManifestConfigs) != 0 {
						t.Errorf("ManifestConfigs = %+v, want none", work.Spec.ManifestConfigs)
					}
					return
				}
				want := []workv1.ManifestConfigOption{{
					ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Name: "busybox-48150", Namespace: "default"},
					FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: "status", Path: ".status"}}}},
				}}
				if diff := cmp.Diff(want, work.Spec.ManifestConfigs); diff != "" {
					t.Errorf("ManifestConfigs (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func cond(typ string, status metav1.ConditionStatus, gen int64, at, reason, msg string) metav1.Condition {
	ts, _ := time.Parse(time.RFC3339, at)
	return metav1.Condition{Type: typ, Status: status, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(ts), Reason: reason, Message: msg}
}

func TestSeedManifestBundleStatus(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"singular", "plural"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			evt := readProtocolExample(t, "manifestbundle-status-update.json")
			if form == "plural" {
				evt = pluralized(t, evt)
			}
			work, err := generic.Decode(NewManifestBundleCodec(), evt)
			if err != nil {
				t.Fatal(err)
			}
			if work.UID != testUID || work.Generation != 1 || work.Namespace != "" {
				t.Errorf("identity = %q/%q generation %d, want /%s generation 1", work.Namespace, work.UID, work.Generation, testUID)
			}
			wantConds := []metav1.Condition{
				cond("Applied", metav1.ConditionTrue, 1, "2023-07-19T03:01:11Z", "AppliedManifestWorkComplete", "Apply manifest work complete"),
				cond("Available", metav1.ConditionFalse, 3, "2023-07-19T04:45:46Z", "ResourcesNotAvailable", "1 of 1 resources are not available"),
			}
			if diff := cmp.Diff(wantConds, work.Status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			mcs := work.Status.ResourceStatus.Manifests
			if len(mcs) != 1 {
				t.Fatalf("%d manifest conditions, want 1", len(mcs))
			}
			wantMeta := workv1.ManifestResourceMeta{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: "busybox-48150", Namespace: "default"}
			if mcs[0].ResourceMeta != wantMeta {
				t.Errorf("resourceMeta = %+v, want %+v", mcs[0].ResourceMeta, wantMeta)
			}
			var types []string
			for _, c := range mcs[0].Conditions {
				types = append(types, c.Type+"="+string(c.Status))
			}
			if got, want := strings.Join(types, ","), "Applied=True,Available=False,StatusFeedbackSynced=True"; got != want {
				t.Errorf("manifest conditions %s, want %s", got, want)
			}
			checkAvailableReplicas(t, mcs[0].StatusFeedbacks, 1)
		})
	}
}

// checkAvailableReplicas checks the JsonRaw feedback value "status".
func checkAvailableReplicas(t *testing.T, fb workv1.StatusFeedbackResult, want int) {
	t.Helper()
	if len(fb.Values) != 1 {
		t.Fatalf("%d feedback values, want 1", len(fb.Values))
	}
	v := fb.Values[0]
	if v.Name != "status" || v.Value.Type != workv1.JsonRaw || v.Value.JsonRaw == nil {
		t.Fatalf("feedback value %+v, want a JsonRaw named status", v)
	}
	var st struct {
		AvailableReplicas *int `json:"availableReplicas"`
	}
	if err := json.Unmarshal([]byte(*v.Value.JsonRaw), &st); err != nil {
		t.Fatalf("jsonRaw: %v", err)
	}
	if want >= 0 && (st.AvailableReplicas == nil || *st.AvailableReplicas != want) {
		t.Errorf("availableReplicas = %v, want %d", st.AvailableReplicas, want)
	}
}

func TestSeedManifestStatus(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"singular", "plural"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			evt := readProtocolExample(t, "manifest-status-update.json")
			if form == "plural" {
				evt = pluralized(t, evt)
			}
			work, err := generic.Decode(NewManifestCodec(), evt)
			if err != nil {
				t.Fatal(err)
			}
			if work.UID != testUID || work.Generation != 1 {
				t.Errorf("identity = %q generation %d, want %s generation 1", work.UID, work.Generation, testUID)
			}
			wantConds := []metav1.Condition{
				cond("Applied", metav1.ConditionTrue, 1, "2023-07-28T01:58:01Z", "AppliedManifestWorkComplete", "Apply manifest work complete"),
				cond("Available", metav1.ConditionTrue, 1, "2023-07-28T01:58:01Z", "ResourcesAvailable", "All resources are available"),
			}
			if diff := cmp.Diff(wantConds, work.Status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			mcs := work.Status.ResourceStatus.Manifests
			if len(mcs) != 1 {
				t.Fatalf("%d manifest conditions, want 1", len(mcs))
			}
			wantMeta := workv1.ManifestResourceMeta{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: "busybox-48150", Namespace: "default"}
			if mcs[0].ResourceMeta != wantMeta {
				t.Errorf("resourceMeta = %+v, want %+v", mcs[0].ResourceMeta, wantMeta)
			}
			// contentStatus became the JsonRaw feedback value "status".
			checkAvailableReplicas(t, mcs[0].StatusFeedbacks, -1)
			var content struct {
				Conditions []struct{ Type, Status, Reason string } `json:"conditions"`
			}
			if err := json.Unmarshal([]byte(*mcs[0].StatusFeedbacks.Values[0].Value.JsonRaw), &content); err != nil {
				t.Fatal(err)
			}
			if len(content.Conditions) != 1 || content.Conditions[0].Type != "Progressing" || content.Conditions[0].Reason != "NewReplicaSetCreated" {
				t.Errorf("contentStatus conditions = %+v", content.Conditions)
			}

			// Encoded again, the status has the example's keys: its
			// contentStatus, and no statusFeedback, of which it has none.
			work.Namespace = "cluster1" // the cluster, which the event's route names
			work.Annotations = map[string]string{OriginalSourceAnnotation: "hub1"}
			again, err := NewManifestCodec().Encode("cluster1-agent", types.EventType{DataType: ManifestsDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, work)
			if err != nil {
				t.Fatal(err)
			}
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(again.Data(), &keys); err != nil {
				t.Fatal(err)
			}
			if _, ok := keys["statusFeedback"]; ok {
				t.Errorf("the encoded status has statusFeedback %s, which the example has not", keys["statusFeedback"])
			}
			if _, ok := keys["contentStatus"]; !ok {
				t.Errorf("the encoded status has no contentStatus: %s", again.Data())
			}
		})
	}
}

// TestSeedWrongCodec: each codec refuses the other's events.
func TestSeedWrongCodec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		codec generic.Codec[*workv1.ManifestWork]
	}{
		{"manifest-spec-create.json", NewManifestBundleCodec()},
		{"manifest-status-update.json", NewManifestBundleCodec()},
		{"manifestbundle-spec-create.json", NewManifestCodec()},
		{"manifestbundle-status-update.json", NewManifestCodec()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			_, err := generic.Decode(tc.codec, readProtocolExample(t, tc.file))
			if !errors.Is(err, ErrUnsupportedType) {
				t.Fatalf("err = %v, want ErrUnsupportedType", err)
			}
		})
	}
}
