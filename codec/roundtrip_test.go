package codec

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// transports are the ways an event reaches its peer in these tests.
var transports = []struct {
	name string
	via  func(testing.TB, *cloudevents.Event) *cloudevents.Event
}{
	{"direct", func(_ testing.TB, e *cloudevents.Event) *cloudevents.Event { return e }},
	{"structured-json", viaStructuredJSON},
	{"mqtt-strings", viaStrings},
	{"structured-json+mqtt-strings", func(tb testing.TB, e *cloudevents.Event) *cloudevents.Event {
		return viaStrings(tb, viaStructuredJSON(tb, e))
	}},
}

func codecs() []struct {
	name  string
	codec generic.Codec[*workv1.ManifestWork]
} {
	return []struct {
		name  string
		codec generic.Codec[*workv1.ManifestWork]
	}{
		{"manifestbundles", NewManifestBundleCodec()},
		{"manifests", NewManifestCodec()},
	}
}

func TestRoundTripSpec(t *testing.T) {
	t.Parallel()
	deleting := specWork()
	deleting.DeletionTimestamp = ptr(metav1.NewTime(time.Date(2024, 5, 3, 8, 0, 0, 123456789, time.UTC)))
	bare := specWork() // no labels, annotations, options
	bare.Labels, bare.Annotations = nil, nil
	bare.Spec.DeleteOption, bare.Spec.ManifestConfigs = nil, nil

	tests := []struct {
		name   string
		action types.Action
		work   *workv1.ManifestWork
		// want returns what the agent decodes.
		want func() *workv1.ManifestWork
	}{
		{"create", types.CreateRequest, specWork(), func() *workv1.ManifestWork { return wantAgentWork(specWork()) }},
		{"update", types.UpdateRequest, specWork(), func() *workv1.ManifestWork { return wantAgentWork(specWork()) }},
		{"update-bare", types.UpdateRequest, bare, func() *workv1.ManifestWork { return wantAgentWork(bare) }},
		{"update-deleting", types.UpdateRequest, deleting, func() *workv1.ManifestWork { return wantAgentWork(deleting) }},
		{"delete", types.DeleteRequest, deleting, func() *workv1.ManifestWork {
			w := wantAgentWork(deleting)
			w.Spec = workv1.ManifestWorkSpec{} // a delete_request carries no data
			return w
		}},
	}
	for _, c := range codecs() {
		for _, tc := range tests {
			for _, tr := range transports {
				t.Run(c.name+"/"+tc.name+"/"+tr.name, func(t *testing.T) {
					t.Parallel()
					in := tc.work.DeepCopy()
					// The singular form is accepted; the event names the plural.
					singular := eventType(c.codec.DataType().Singular(), types.SubResourceSpec, tc.action)
					evt, err := c.codec.Encode(testSource, singular, in)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(tc.work, in); diff != "" {
						t.Fatalf("Encode modified the work (-before +after):\n%s", diff)
					}
					checkSpecEvent(t, c.codec.DataType(), tc.action, evt, tc.work)

					got, err := generic.Decode(c.codec, tr.via(t, evt))
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(tc.want(), got); diff != "" {
						t.Errorf("decoded work (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// OCM sources answer a spec resync with spec.resync_response events: an
// upsert, or, with a deletiontimestamp and no data, a delete. Both decode as
// the update_request and delete_request they stand for.
func TestDecodeResyncResponses(t *testing.T) {
	t.Parallel()
	deleting := specWork()
	deleting.DeletionTimestamp = ptr(metav1.NewTime(time.Date(2024, 5, 3, 8, 0, 0, 0, time.UTC)))
	for _, c := range codecs() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			evt, err := c.codec.Encode(testSource, eventType(c.codec.DataType(), types.SubResourceSpec, types.UpdateRequest), specWork())
			if err != nil {
				t.Fatal(err)
			}
			evt.SetType(eventType(c.codec.DataType(), types.SubResourceSpec, types.ResyncResponse).String())
			got, err := generic.Decode(c.codec, evt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantAgentWork(specWork()), got); diff != "" {
				t.Errorf("upsert (-want +got):\n%s", diff)
			}

			evt, err = c.codec.Encode(testSource, eventType(c.codec.DataType(), types.SubResourceSpec, types.DeleteRequest), deleting)
			if err != nil {
				t.Fatal(err)
			}
			evt.SetType(eventType(c.codec.DataType(), types.SubResourceSpec, types.ResyncResponse).String())
			if got, err = generic.Decode(c.codec, evt); err != nil {
				t.Fatal(err)
			}
			want := wantAgentWork(deleting)
			want.Spec = workv1.ManifestWorkSpec{}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("delete (-want +got):\n%s", diff)
			}
		})
	}
}

// checkSpecEvent checks the attributes and extensions of a spec event.
func checkSpecEvent(t *testing.T, dt types.DataType, action types.Action, evt *cloudevents.Event, work *workv1.ManifestWork) {
	t.Helper()
	if err := evt.Validate(); err != nil {
		t.Errorf("invalid CloudEvent: %v", err)
	}
	if want := eventType(dt, types.SubResourceSpec, action).String(); evt.Type() != want {
		t.Errorf("type = %q, want %q", evt.Type(), want)
	}
	if _, err := uuid.Parse(evt.ID()); err != nil {
		t.Errorf("id %q is not a UUID: %v", evt.ID(), err)
	}
	if evt.Source() != testSource || evt.DataContentType() != cloudevents.ApplicationJSON {
		t.Errorf("source %q, datacontenttype %q", evt.Source(), evt.DataContentType())
	}
	if time.Since(evt.Time()) > time.Minute {
		t.Errorf("time = %v, want now", evt.Time())
	}
	ext := evt.Extensions()
	if ext[types.ExtResourceID] != string(work.UID) || ext[types.ExtResourceVersion] != int32(work.Generation) || ext[types.ExtClusterName] != work.Namespace {
		t.Errorf("extensions %v", ext)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(ext[types.ExtMetadata].(string)), &meta); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	for _, k := range []string{"resourceVersion", "finalizers", "managedFields", "ownerReferences"} {
		if _, ok := meta[k]; ok {
			t.Errorf("metadata carries %s", k)
		}
	}
	if meta["name"] != work.Name || meta["uid"] != string(work.UID) {
		t.Errorf("metadata %v", meta)
	}
	_, deleting := ext[types.ExtDeletionTimestamp]
	if want := work.DeletionTimestamp != nil || action == types.DeleteRequest; deleting != want {
		t.Errorf("deletiontimestamp present = %v, want %v", deleting, want)
	}
	if action == types.DeleteRequest && len(evt.Data()) != 0 {
		t.Errorf("delete_request carries data %s", evt.Data())
	}
	if action != types.DeleteRequest && !json.Valid(evt.Data()) {
		t.Errorf("data is not JSON: %s", evt.Data())
	}
}

func TestRoundTripStatus(t *testing.T) {
	t.Parallel()
	empty := statusWork()
	empty.Status = workv1.ManifestWorkStatus{}
	noContent := statusWork() // no "status" feedback value: no contentStatus
	fb := &noContent.Status.ResourceStatus.Manifests[0].StatusFeedbacks
	fb.Values = fb.Values[:len(fb.Values)-1]
	deleted := statusWork()
	deleted.Status.Conditions = append(deleted.Status.Conditions, metav1.Condition{Type: "Deleted", Status: metav1.ConditionTrue, LastTransitionTime: testTime, Reason: "ManifestWorkDeleted", Message: "deleted"})

	tests := []struct {
		name string
		work *workv1.ManifestWork
	}{
		{"full", statusWork()},
		{"empty", empty},
		{"no-content-status", noContent},
		{"deleted", deleted},
	}
	for _, c := range codecs() {
		for _, tc := range tests {
			for _, tr := range transports {
				t.Run(c.name+"/"+tc.name+"/"+tr.name, func(t *testing.T) {
					t.Parallel()
					in := tc.work.DeepCopy()
					evt, err := c.codec.Encode(testAgent, eventType(c.codec.DataType(), types.SubResourceStatus, types.UpdateRequest), in)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(tc.work, in); diff != "" {
						t.Fatalf("Encode modified the work (-before +after):\n%s", diff)
					}
					if err := evt.Validate(); err != nil {
						t.Errorf("invalid CloudEvent: %v", err)
					}
					ext := evt.Extensions()
					if ext[types.ExtOriginalSource] != testSource || ext[types.ExtResourceID] != testUID || ext[types.ExtResourceVersion] != int32(7) || ext[types.ExtClusterName] != testCluster {
						t.Errorf("extensions %v", ext)
					}
					// The work's name, for OCM sources, and nothing of the
					// source's labels and annotations.
					var meta map[string]any
					if err := json.Unmarshal([]byte(ext[types.ExtMetadata].(string)), &meta); err != nil {
						t.Fatalf("metadata: %v", err)
					}
					if meta["name"] != tc.work.Name || meta["namespace"] != testCluster || meta["uid"] != testUID || meta["labels"] != nil || meta["annotations"] != nil {
						t.Errorf("status metadata %v", meta)
					}
					got, err := generic.Decode(c.codec, tr.via(t, evt))
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(wantSourceWork(tc.work), got); diff != "" {
						t.Errorf("decoded work (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// TestManifestBundleStatusWire pins the wire form: resourceStatus is a list.
func TestManifestBundleStatusWire(t *testing.T) {
	t.Parallel()
	evt, err := NewManifestBundleCodec().Encode(testAgent, eventType(ManifestBundlesDataType, types.SubResourceStatus, types.UpdateRequest), statusWork())
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Conditions     []json.RawMessage `json:"conditions"`
		ResourceStatus []struct {
			ResourceMeta   map[string]any `json:"resourceMeta"`
			StatusFeedback struct {
				Values []json.RawMessage `json:"values"`
			} `json:"statusFeedback"`
			Conditions []json.RawMessage `json:"conditions"`
		} `json:"resourceStatus"`
	}
	if err := json.Unmarshal(evt.Data(), &data); err != nil {
		t.Fatalf("%v\n%s", err, evt.Data())
	}
	if len(data.Conditions) != 2 || len(data.ResourceStatus) != 1 || len(data.ResourceStatus[0].StatusFeedback.Values) != 5 || len(data.ResourceStatus[0].Conditions) != 2 {
		t.Errorf("unexpected shape: %s", evt.Data())
	}
}

// TestManifestStatusWire pins the manifests status payload: contentStatus is
// the "status" feedback value as a JSON object.
func TestManifestStatusWire(t *testing.T) {
	t.Parallel()
	evt, err := NewManifestCodec().Encode(testAgent, eventType(ManifestsDataType, types.SubResourceStatus, types.UpdateRequest), statusWork())
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(evt.Data(), &data); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"reconcileStatus", "resourceMeta", "conditions", "statusFeedback", "contentStatus"} {
		if _, ok := data[k]; !ok {
			t.Errorf("data has no %s: %s", k, evt.Data())
		}
	}
	if string(data["contentStatus"]) != deploymentStatusJSON {
		t.Errorf("contentStatus = %s", data["contentStatus"])
	}
	// The resource's status is sent once: not again as a feedback value.
	var feedback workv1.StatusFeedbackResult
	if err := json.Unmarshal(data["statusFeedback"], &feedback); err != nil {
		t.Fatal(err)
	}
	for _, v := range feedback.Values {
		if v.Name == ContentStatusFeedbackName {
			t.Errorf("statusFeedback carries the content status too: %s", data["statusFeedback"])
		}
	}
}

// TestResourceStatusForms: the three accepted forms of resourceStatus decode
// to the same manifest conditions.
func TestResourceStatusForms(t *testing.T) {
	t.Parallel()
	mcs := statusWork().Status.ResourceStatus.Manifests
	list, err := json.Marshal(mcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data string
		want       []workv1.ManifestCondition
	}{
		{"list", string(list), mcs},
		{"manifestConditions", `{"manifestConditions":` + string(list) + `}`, mcs},
		{"manifests", ` { "manifests" : ` + string(list) + `}`, mcs},
		{"null", `null`, nil},
		{"empty-object", `{ }`, nil},
		{"empty-list", `[]`, []workv1.ManifestCondition{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evt := statusEvent(t, ManifestBundlesDataType, `{"conditions":[],"resourceStatus":`+tc.data+`}`)
			got, err := generic.Decode(NewManifestBundleCodec(), evt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Status.ResourceStatus.Manifests); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestContentStatusKeepsFeedback: a contentStatus never replaces a "status"
// feedback value that is already there.
func TestContentStatusKeepsFeedback(t *testing.T) {
	t.Parallel()
	evt := statusEvent(t, ManifestsDataType, `{"reconcileStatus":{"conditions":[]},"resourceMeta":{"kind":"Deployment"},`+
		`"statusFeedback":{"values":[{"name":"status","fieldValue":{"type":"String","string":"x"}}]},"contentStatus":{"a":1}}`)
	got, err := generic.Decode(NewManifestCodec(), evt)
	if err != nil {
		t.Fatal(err)
	}
	want := []workv1.FeedbackValue{{Name: "status", Value: workv1.FieldValue{Type: workv1.String, String: ptr("x")}}}
	if diff := cmp.Diff(want, got.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestDecodeSpecMetadata covers what the metadata extension and its absence
// decode to.
func TestDecodeSpecMetadata(t *testing.T) {
	t.Parallel()
	manifest := `{"manifests":[{"kind":"ConfigMap","apiVersion":"v1"}]}`
	eventTime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		action types.Action
		ext    map[string]any
		data   string
		check  func(t *testing.T, w *workv1.ManifestWork)
	}{
		{"namespace-from-metadata", types.CreateRequest,
			map[string]any{"metadata": `{"name":"w1","namespace":"c1","labels":{"a":"b"},"resourceVersion":"99","finalizers":["x"]}`}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.Name != "w1" || w.Namespace != "c1" || w.Labels["a"] != "b" || w.ResourceVersion != "5" || w.Finalizers != nil {
					t.Errorf("meta = %+v", w.ObjectMeta)
				}
			}},
		{"clustername-wins", types.CreateRequest,
			map[string]any{"metadata": `{"name":"w1","namespace":"c1"}`, "clustername": "c2"}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.Namespace != "c2" {
					t.Errorf("namespace = %q", w.Namespace)
				}
			}},
		{"extensions-win", types.CreateRequest,
			map[string]any{"metadata": `{"name":"w1","uid":"other","generation":1,"annotations":{"` + OriginalSourceAnnotation + `":"forged"}}`}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.UID != testUID || w.Generation != 5 || w.Annotations[OriginalSourceAnnotation] != testSource {
					t.Errorf("meta = %+v", w.ObjectMeta)
				}
			}},
		{"empty-metadata", types.CreateRequest, map[string]any{"metadata": ""}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.Name != testUID {
					t.Errorf("name = %q", w.Name)
				}
			}},
		{"delete-without-timestamp", types.DeleteRequest, nil, "",
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.DeletionTimestamp == nil || !w.DeletionTimestamp.Time.Equal(eventTime) {
					t.Errorf("DeletionTimestamp = %v, want the event time %v", w.DeletionTimestamp, eventTime)
				}
			}},
		{"delete-with-data", types.DeleteRequest, map[string]any{"deletiontimestamp": "2024-02-02T00:00:00Z"}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if len(w.Spec.Workload.Manifests) != 1 || w.DeletionTimestamp.Time.Year() != 2024 || w.DeletionTimestamp.Month() != 2 {
					t.Errorf("work = %+v", w)
				}
			}},
		{"deletion-timestamp-from-metadata", types.UpdateRequest, map[string]any{"metadata": `{"deletionTimestamp":"2024-03-03T00:00:00Z"}`}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.DeletionTimestamp == nil || w.DeletionTimestamp.Month() != 3 {
					t.Errorf("DeletionTimestamp = %v", w.DeletionTimestamp)
				}
			}},
		{"timestamp-extension", types.UpdateRequest, map[string]any{"deletiontimestamp": eventTime}, manifest,
			func(t *testing.T, w *workv1.ManifestWork) {
				if w.DeletionTimestamp == nil || !w.DeletionTimestamp.Time.Equal(eventTime) {
					t.Errorf("DeletionTimestamp = %v", w.DeletionTimestamp)
				}
			}},
		{"executor", types.CreateRequest, nil,
			`{"manifests":[{}],"executor":{"subject":{"type":"ServiceAccount","serviceAccount":{"namespace":"ns","name":"sa"}}}}`,
			func(t *testing.T, w *workv1.ManifestWork) {
				if e := w.Spec.Executor; e == nil || e.Subject.ServiceAccount == nil || e.Subject.ServiceAccount.Name != "sa" {
					t.Errorf("executor = %+v", e)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evt := cloudevents.New()
			evt.SetID("e1")
			evt.SetSource(testSource)
			evt.SetTime(eventTime)
			evt.SetType(eventType(ManifestBundlesDataType, types.SubResourceSpec, tc.action).String())
			evt.SetExtension(types.ExtResourceID, testUID)
			evt.SetExtension(types.ExtResourceVersion, 5)
			for k, v := range tc.ext {
				evt.SetExtension(k, v)
			}
			if tc.data != "" {
				evt.DataEncoded = []byte(tc.data)
			}
			w, err := generic.Decode(NewManifestBundleCodec(), &evt)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, w)
		})
	}
}

// statusEvent returns a status event of dt with data.
func statusEvent(t testing.TB, dt types.DataType, data string) *cloudevents.Event {
	t.Helper()
	evt := cloudevents.New()
	evt.SetID("s1")
	evt.SetSource(testAgent)
	evt.SetType(eventType(dt, types.SubResourceStatus, types.UpdateRequest).String())
	evt.SetExtension(types.ExtResourceID, testUID)
	evt.SetExtension(types.ExtResourceVersion, 7)
	evt.SetExtension(types.ExtOriginalSource, testSource)
	evt.DataEncoded = []byte(data)
	return &evt
}

func TestStatusHash(t *testing.T) {
	t.Parallel()
	a, err := StatusHash(statusWork())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := generic.StatusHash(statusWork().Status)
	if a != want {
		t.Errorf("StatusHash = %s, want generic.StatusHash of .status %s", a, want)
	}
	w := statusWork()
	w.Status.Conditions[0].Status = metav1.ConditionFalse
	if b, _ := StatusHash(w); b == a {
		t.Errorf("hash did not change with the status")
	}
	if _, err := StatusHash(nil); err == nil {
		t.Errorf("StatusHash(nil) = nil error")
	}
	// A work no agent reported on has no status to compare.
	if h, err := StatusHash(specWork()); h != generic.NoStatus || err != nil {
		t.Errorf("StatusHash of a work without a status = %q, %v; want NoStatus", h, err)
	}
	// The hash survives the wire: what a source decodes hashes like what the agent sent.
	for _, c := range codecs() {
		evt, err := c.codec.Encode(testAgent, eventType(c.codec.DataType(), types.SubResourceStatus, types.UpdateRequest), statusWork())
		if err != nil {
			t.Fatal(err)
		}
		got, err := generic.Decode(c.codec, viaStrings(t, viaStructuredJSON(t, evt)))
		if err != nil {
			t.Fatal(err)
		}
		if h, _ := StatusHash(got); h != a {
			t.Errorf("%s: hash after the wire %s, want %s", c.name, h, a)
		}
	}
}

// TestEncodeTypedManifest: a manifest given as a typed object (no Raw) is
// marshalled by its RawExtension.
func TestEncodeTypedManifest(t *testing.T) {
	t.Parallel()
	w := specWork()
	w.Spec.Workload.Manifests[0].RawExtension = runtime.RawExtension{Object: &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm"},
	}}
	for _, c := range codecs() {
		evt, err := c.codec.Encode(testSource, eventType(c.codec.DataType(), types.SubResourceSpec, types.CreateRequest), w)
		if err != nil {
			t.Fatal(err)
		}
		got, err := generic.Decode(c.codec, evt)
		if err != nil {
			t.Fatal(err)
		}
		if raw := string(got.Spec.Workload.Manifests[0].Raw); !strings.Contains(raw, `"name":"cm"`) {
			t.Errorf("%s: manifest %s", c.name, raw)
		}
	}
}

// TestConcurrentUse: one codec, one work and one event, used from many
// goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	for _, c := range codecs() {
		spec, status := specWork(), statusWork()
		specEvt := goodSpecEvent(t, c.codec)
		statusEvt := goodStatusEvent(t, c.codec)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					if _, err := c.codec.Encode(testSource, eventType(c.codec.DataType(), types.SubResourceSpec, types.UpdateRequest), spec); err != nil {
						t.Error(err)
					}
					if _, err := c.codec.Encode(testAgent, eventType(c.codec.DataType(), types.SubResourceStatus, types.UpdateRequest), status); err != nil {
						t.Error(err)
					}
					w, err := generic.Decode(c.codec, specEvt)
					if err != nil {
						t.Error(err)
						return
					}
					w.Labels["mutated"] = "yes" // the work shares nothing with the event
					w.Spec.Workload.Manifests[0].Raw[0] = ' '
					if _, err := generic.Decode(c.codec, statusEvt); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		got, err := generic.Decode(c.codec, specEvt)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantAgentWork(specWork()), got); diff != "" {
			t.Errorf("%s: event changed by decoding (-want +got):\n%s", c.name, diff)
		}
	}
}
