package codec

import (
	"errors"
	"math"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// goodSpecEvent is a valid spec event of dt, as a source sends it.
func goodSpecEvent(t *testing.T, c generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
	t.Helper()
	evt, err := c.Encode(testSource, eventType(c.DataType(), types.SubResourceSpec, types.CreateRequest), specWork())
	if err != nil {
		t.Fatal(err)
	}
	return evt
}

func goodStatusEvent(t *testing.T, c generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
	t.Helper()
	evt, err := c.Encode(testAgent, eventType(c.DataType(), types.SubResourceStatus, types.UpdateRequest), statusWork())
	if err != nil {
		t.Fatal(err)
	}
	return evt
}

// setRawExtension stores v as an extension without the SDK's conversion
// (which turns every number into an int32), as a decoder other than the
// SDK's might.
func setRawExtension(evt *cloudevents.Event, name string, v any) {
	evt.Context.(*cloudevents.EventContextV1).Extensions[name] = v
}

func TestDecodeBadInput(t *testing.T) {
	t.Parallel()
	bundle, manifest := NewManifestBundleCodec(), NewManifestCodec()
	specData := func(data string) func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
		return func(t *testing.T, c generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
			evt := goodSpecEvent(t, c)
			evt.DataEncoded = []byte(data)
			return evt
		}
	}
	statusData := func(data string) func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
		return func(t *testing.T, c generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
			evt := goodStatusEvent(t, c)
			evt.DataEncoded = []byte(data)
			return evt
		}
	}
	mutateSpec := func(f func(*cloudevents.Event)) func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
		return func(t *testing.T, c generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
			evt := goodSpecEvent(t, c)
			f(evt)
			return evt
		}
	}
	mutateStatus := func(f func(*cloudevents.Event)) func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
		return func(t *testing.T, c generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
			evt := goodStatusEvent(t, c)
			f(evt)
			return evt
		}
	}
	setType := func(s string) func(*cloudevents.Event) { return func(e *cloudevents.Event) { e.SetType(s) } }
	setExt := func(k string, v any) func(*cloudevents.Event) {
		return func(e *cloudevents.Event) { e.SetExtension(k, v) }
	}

	tests := []struct {
		name   string
		codecs []generic.Codec[*workv1.ManifestWork] // nil: both
		event  func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event
		want   []string // substrings of the error
		is     error
	}{
		{name: "nil event", event: func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event { return nil }, want: []string{"event is nil"}},
		{name: "no context", event: func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event { return &cloudevents.Event{} }, want: []string{"no context"}},
		{name: "typed nil context", event: func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
			return &cloudevents.Event{Context: (*cloudevents.EventContextV1)(nil)}
		}, want: []string{"no context"}},
		{name: "empty event", event: func(*testing.T, generic.Codec[*workv1.ManifestWork]) *cloudevents.Event {
			e := cloudevents.New()
			return &e
		}, is: types.ErrInvalidType},
		{name: "malformed type", event: mutateSpec(setType("manifestbundles.spec")), is: types.ErrInvalidType},
		{name: "wrong data type", event: mutateSpec(setType("io.open-cluster-management.works.v1alpha1.widgets.spec.create_request")),
			want: []string{"data type", "widgets"}, is: ErrUnsupportedType},
		{name: "wrong group", event: mutateSpec(setType("io.example.v1alpha1.manifestbundles.spec.create_request")),
			codecs: []generic.Codec[*workv1.ManifestWork]{bundle}, is: ErrUnsupportedType},
		{name: "spec resync", event: mutateSpec(setType("io.open-cluster-management.works.v1alpha1.manifestbundles.spec.resync_request")),
			codecs: []generic.Codec[*workv1.ManifestWork]{bundle}, want: []string{"resync_request"}, is: ErrUnsupportedType},
		{name: "status resync", event: mutateSpec(setType("io.open-cluster-management.works.v1alpha1.manifest.status.resync_request")),
			codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, want: []string{"resync_request"}, is: ErrUnsupportedType},
		{name: "missing resourceid", event: mutateSpec(setExt(types.ExtResourceID, nil)), want: []string{`extension "resourceid"`, "missing"}, is: types.ErrExtension},
		{name: "missing resourceid on status", event: mutateStatus(setExt(types.ExtResourceID, nil)), want: []string{`extension "resourceid"`, "missing"}, is: types.ErrExtension},
		{name: "missing resourceversion", event: mutateSpec(setExt(types.ExtResourceVersion, nil)), want: []string{`"resourceversion"`, "missing"}, is: types.ErrExtension},
		{name: "resourceversion abc", event: mutateSpec(setExt(types.ExtResourceVersion, "abc")), want: []string{`"resourceversion"`, "abc"}, is: types.ErrExtension},
		{name: "resourceversion abc on status", event: mutateStatus(setExt(types.ExtResourceVersion, "abc")), want: []string{`"resourceversion"`, "abc"}, is: types.ErrExtension},
		{name: "resourceversion 1.5 string", event: mutateSpec(setExt(types.ExtResourceVersion, "1.5")), want: []string{`"resourceversion"`, "1.5"}, is: types.ErrExtension},
		{name: "resourceversion 1.5 number", event: mutateSpec(func(e *cloudevents.Event) { setRawExtension(e, types.ExtResourceVersion, 1.5) }),
			want: []string{`"resourceversion"`, "1.5"}, is: types.ErrExtension},
		{name: "resourceversion overflows int64", event: mutateSpec(setExt(types.ExtResourceVersion, "9223372036854775808")),
			want: []string{`"resourceversion"`, "out of range"}, is: types.ErrExtension},
		{name: "resourceversion negative", event: mutateSpec(setExt(types.ExtResourceVersion, "-1")), want: []string{"resourceversion", "negative"}},
		{name: "resourceversion bool", event: mutateSpec(setExt(types.ExtResourceVersion, true)), want: []string{"resourceversion", "bool"}},
		{name: "deletiontimestamp junk", event: mutateSpec(setExt(types.ExtDeletionTimestamp, "yesterday")), want: []string{"deletiontimestamp", "RFC 3339"}},
		{name: "clustername not a string", event: mutateSpec(setExt(types.ExtClusterName, 5)), want: []string{"clustername"}},
		{name: "metadata not JSON", event: mutateSpec(setExt(types.ExtMetadata, "{name: x")), want: []string{`extension "metadata"`, "invalid"}},
		{name: "metadata a JSON list", event: mutateSpec(setExt(types.ExtMetadata, "[1]")), want: []string{`extension "metadata"`, "cannot unmarshal"}},
		{name: "metadata wrong field type", event: mutateSpec(setExt(types.ExtMetadata, `{"labels":"a"}`)), want: []string{`extension "metadata"`, "labels"}},
		{name: "no source", event: mutateSpec(func(e *cloudevents.Event) { e.Context.(*cloudevents.EventContextV1).Source.URL.Path = "" }), want: []string{"source", "empty"}},
		{name: "create without data", event: specData(""), want: []string{"data", "missing", "create_request"}},
		{name: "create with null data", event: specData("null"), want: []string{"data", "missing"}},
		{name: "invalid JSON data", event: specData(`{"manifests": [`), want: []string{"data", "invalid JSON", "unexpected end"}},
		{name: "invalid JSON status", event: statusData(`{"conditions": x}`), want: []string{"data", "invalid JSON at offset 16"}},
		{name: "data a JSON list", event: specData(`[]`), want: []string{"data", "cannot unmarshal array"}},
		{name: "status without data", event: statusData(""), want: []string{"data", "missing"}},
		{name: "manifest a JSON array", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: specData(`{"manifests":[{"kind":"A"},{"kind":"B"},[1,2]]}`), want: []string{"data.manifests[2]: not a JSON object (got an array)"}},
		{name: "manifest a JSON string", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: specData(`{"manifests":["apiVersion: v1"]}`), want: []string{"data.manifests[0]: not a JSON object (got a string)"}},
		{name: "manifest a JSON number", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: specData(`{"manifests":[{}, 42]}`), want: []string{"data.manifests[1]: not a JSON object (got a number)"}},
		{name: "manifest null", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: specData(`{"manifests":[null]}`), want: []string{"data.manifests[0]: not a JSON object (got null)"}},
		{name: "single manifest a JSON array", codecs: []generic.Codec[*workv1.ManifestWork]{manifest},
			event: specData(`{"manifest":[1]}`), want: []string{"data.manifest: not a JSON object (got an array)"}},
		{name: "single manifest a JSON string", codecs: []generic.Codec[*workv1.ManifestWork]{manifest},
			event: specData(`{"manifest":"kind: Pod"}`), want: []string{"data.manifest: not a JSON object (got a string)"}},
		{name: "single manifest a JSON number", codecs: []generic.Codec[*workv1.ManifestWork]{manifest},
			event: specData(`{"manifest":1e3}`), want: []string{"data.manifest: not a JSON object (got a number)"}},
		{name: "single manifest missing", codecs: []generic.Codec[*workv1.ManifestWork]{manifest},
			event: specData(`{"deleteOption":{"propagationPolicy":"Orphan"}}`), want: []string{"data.manifest: missing"}},
		{name: "manifests not a list", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: specData(`{"manifests":{"kind":"A"}}`), want: []string{"data", "cannot unmarshal object"}},
		{name: "resourceStatus a string", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: statusData(`{"conditions":[],"resourceStatus":"ok"}`), want: []string{"data: resourceStatus: want a list"}},
		{name: "resourceStatus a number", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: statusData(`{"conditions":[],"resourceStatus":1}`), want: []string{"resourceStatus: want a list"}},
		{name: "resourceStatus a foreign object", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: statusData(`{"conditions":[],"resourceStatus":{"items":[]}}`), want: []string{"resourceStatus: want a list"}},
		{name: "resourceStatus both object forms", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: statusData(`{"resourceStatus":{"manifests":[],"manifestConditions":[]}}`), want: []string{"resourceStatus", "both"}},
		{name: "resourceStatus list of strings", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: statusData(`{"resourceStatus":["a"]}`), want: []string{"resourceStatus", "cannot unmarshal string"}},
		{name: "manifestConditions not a list", codecs: []generic.Codec[*workv1.ManifestWork]{bundle},
			event: statusData(`{"resourceStatus":{"manifestConditions":{}}}`), want: []string{"resourceStatus", "cannot unmarshal object"}},
		{name: "contentStatus a list", codecs: []generic.Codec[*workv1.ManifestWork]{manifest},
			event: statusData(`{"reconcileStatus":{"conditions":[]},"contentStatus":[1]}`), want: []string{"data.contentStatus: not a JSON object (got an array)"}},
		{name: "condition status wrong type", event: statusData(`{"conditions":[{"type":"Applied","status":true}]}`), want: []string{"data", "cannot unmarshal bool"},
			codecs: []generic.Codec[*workv1.ManifestWork]{bundle}},
		{name: "feedback integer a string", codecs: []generic.Codec[*workv1.ManifestWork]{manifest},
			event: statusData(`{"statusFeedback":{"values":[{"name":"r","fieldValue":{"type":"Integer","integer":"3"}}]}}`), want: []string{"data", "integer"}},
	}
	for _, tc := range tests {
		cs := tc.codecs
		if cs == nil {
			cs = []generic.Codec[*workv1.ManifestWork]{bundle, manifest}
		}
		for _, c := range cs {
			t.Run(c.DataType().Resource+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				evt := tc.event(t, c)
				work, err := generic.Decode(c, evt)
				if err == nil {
					t.Fatalf("no error; decoded %+v", work)
				}
				if work != nil {
					t.Errorf("work %+v returned with error", work)
				}
				checkErr(t, err, tc.want, tc.is)
				t.Log(err)
				// The header is the clients' to parse, the payload the codec's.
				var ce *Error
				var de *generic.DecodeError
				if !errors.As(err, &de) && (!errors.As(err, &ce) || ce.Op != "decode") {
					t.Errorf("error %T is neither a *generic.DecodeError nor a decode *Error", err)
				}
				if id := eventID(evt); id != "" && !strings.Contains(err.Error(), id) {
					t.Errorf("error does not name event %s: %v", id, err)
				}
			})
		}
	}
}

// eventID is evt's id, or "" when it has none (or no context at all).
func eventID(evt *cloudevents.Event) string {
	if evt == nil {
		return ""
	}
	if c, ok := evt.Context.(*cloudevents.EventContextV1); ok && c != nil {
		return c.ID
	}
	return ""
}

func checkErr(t *testing.T, err error, want []string, is error) {
	t.Helper()
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	if is != nil && !errors.Is(err, is) {
		t.Errorf("error %q is not %v", msg, is)
	}
}

func TestEncodeBadInput(t *testing.T) {
	t.Parallel()
	bundle, manifest := NewManifestBundleCodec(), NewManifestCodec()
	specType := func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
		return eventType(c.DataType(), types.SubResourceSpec, types.UpdateRequest)
	}
	statusType := func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
		return eventType(c.DataType(), types.SubResourceStatus, types.UpdateRequest)
	}
	spec := func(f func(*workv1.ManifestWork)) func() *workv1.ManifestWork {
		return func() *workv1.ManifestWork { w := specWork(); f(w); return w }
	}
	status := func(f func(*workv1.ManifestWork)) func() *workv1.ManifestWork {
		return func() *workv1.ManifestWork { w := statusWork(); f(w); return w }
	}
	tests := []struct {
		name   string
		codecs []generic.Codec[*workv1.ManifestWork]
		t      func(generic.Codec[*workv1.ManifestWork]) types.EventType
		source string
		work   func() *workv1.ManifestWork
		want   []string
		is     error
	}{
		{name: "nil work", t: specType, work: func() *workv1.ManifestWork { return nil }, want: []string{"work is nil"}},
		{name: "empty source", source: "-", t: specType, work: specWork, want: []string{"source is empty"}},
		{name: "wrong data type", t: func(generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(types.DataType{Group: "io.example", Version: "v1", Resource: "widgets"}, types.SubResourceSpec, types.CreateRequest)
		}, work: specWork, want: []string{"widgets"}, is: ErrUnsupportedType},
		{name: "the other codec's data type", codecs: []generic.Codec[*workv1.ManifestWork]{bundle}, t: func(generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(ManifestsDataType, types.SubResourceSpec, types.CreateRequest)
		}, work: specWork, is: ErrUnsupportedType},
		{name: "resync", t: func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(c.DataType(), types.SubResourceSpec, types.ResyncRequest)
		}, work: specWork, want: []string{"resync_request"}, is: ErrUnsupportedType},
		{name: "status resync", t: func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(c.DataType(), types.SubResourceStatus, types.ResyncRequest)
		}, work: statusWork, want: []string{"resync_request"}, is: ErrUnsupportedType},
		{name: "resync response", t: func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(c.DataType(), types.SubResourceSpec, types.ResyncResponse)
		}, work: specWork, want: []string{"resync_response", "never sent"}, is: ErrUnsupportedType},
		{name: "status create", t: func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(c.DataType(), types.SubResourceStatus, types.CreateRequest)
		}, work: statusWork, want: []string{"update_request"}, is: ErrUnsupportedType},
		{name: "unknown subresource", t: func(c generic.Codec[*workv1.ManifestWork]) types.EventType {
			return eventType(c.DataType(), "scale", types.UpdateRequest)
		}, work: specWork, want: []string{"scale"}, is: ErrUnsupportedType},
		{name: "empty UID", t: specType, work: spec(func(w *workv1.ManifestWork) { w.UID = "" }), want: []string{"metadata.uid", "empty"}},
		{name: "empty UID on status", t: statusType, work: status(func(w *workv1.ManifestWork) { w.UID = "" }), want: []string{"metadata.uid", "empty"}},
		{name: "empty namespace", t: specType, work: spec(func(w *workv1.ManifestWork) { w.Namespace = "" }), want: []string{"metadata.namespace", "empty"}},
		{name: "generation above int32", t: specType, work: spec(func(w *workv1.ManifestWork) { w.Generation = math.MaxInt32 + 1 }),
			want: []string{"metadata.generation", "2147483648", "32 bits"}},
		{name: "generation above int32 on status", t: statusType, work: status(func(w *workv1.ManifestWork) { w.Generation = math.MaxInt64 }),
			want: []string{"metadata.generation", "32 bits"}},
		{name: "negative generation", t: specType, work: spec(func(w *workv1.ManifestWork) { w.Generation = -1 }), want: []string{"metadata.generation", "-1"}},
		{name: "missing original-source annotation", t: statusType, work: status(func(w *workv1.ManifestWork) { delete(w.Annotations, OriginalSourceAnnotation) }),
			want: []string{OriginalSourceAnnotation, "did not come from a source"}, is: ErrNoOriginalSource},
		{name: "no annotations", t: statusType, work: status(func(w *workv1.ManifestWork) { w.Annotations = nil }), is: ErrNoOriginalSource},
		{name: "manifest not an object", t: specType, work: spec(func(w *workv1.ManifestWork) { w.Spec.Workload.Manifests[0].Raw = []byte(`[1]`) }),
			want: []string{"spec.workload.manifests[0]", "not a JSON object (got an array)"}},
		{name: "manifest empty", t: specType, work: spec(func(w *workv1.ManifestWork) { w.Spec.Workload.Manifests[0].Raw = nil }),
			want: []string{"spec.workload.manifests[0]", "empty"}},
		{name: "manifest invalid JSON", t: specType, work: spec(func(w *workv1.ManifestWork) { w.Spec.Workload.Manifests[0].Raw = []byte(`{"a":`) }),
			want: []string{"spec.workload.manifests[0]", "invalid JSON at offset 5", "unexpected end of JSON input"}},
		{name: "no manifests", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: specType,
			work: spec(func(w *workv1.ManifestWork) { w.Spec.Workload.Manifests = nil }), want: []string{"0 manifests", "use manifestbundles"}},
		{name: "two manifests", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: specType,
			work: spec(func(w *workv1.ManifestWork) {
				w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, w.Spec.Workload.Manifests[0])
			}), want: []string{"2 manifests", "use manifestbundles"}},
		{name: "two manifest configs", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: specType,
			work: spec(func(w *workv1.ManifestWork) {
				w.Spec.ManifestConfigs = append(w.Spec.ManifestConfigs, w.Spec.ManifestConfigs[0])
			}), want: []string{"2 manifest configs", "use manifestbundles"}},
		{name: "executor", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: specType,
			work: spec(func(w *workv1.ManifestWork) { w.Spec.Executor = &workv1.ManifestWorkExecutor{} }), want: []string{"spec.executor", "use manifestbundles"}},
		{name: "status with two manifests", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: statusType,
			work: status(func(w *workv1.ManifestWork) {
				w.Status.ResourceStatus.Manifests = append(w.Status.ResourceStatus.Manifests, w.Status.ResourceStatus.Manifests[0])
			}), want: []string{"2 manifest conditions", "use manifestbundles"}},
		{name: "content status not an object", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: statusType,
			work: status(func(w *workv1.ManifestWork) {
				vs := w.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values
				vs[len(vs)-1].Value.JsonRaw = ptr("[1,2]")
			}), want: []string{`statusFeedback "status"`, "not a JSON object"}},
		{name: "content status invalid JSON", codecs: []generic.Codec[*workv1.ManifestWork]{manifest}, t: statusType,
			work: status(func(w *workv1.ManifestWork) {
				vs := w.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values
				vs[len(vs)-1].Value.JsonRaw = ptr("{oops")
			}), want: []string{"data", "invalid"}},
	}
	for _, tc := range tests {
		cs := tc.codecs
		if cs == nil {
			cs = []generic.Codec[*workv1.ManifestWork]{bundle, manifest}
		}
		for _, c := range cs {
			t.Run(c.DataType().Resource+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				source := testSource
				if tc.source == "-" {
					source = ""
				}
				evt, err := c.Encode(source, tc.t(c), tc.work())
				if err == nil {
					t.Fatalf("no error; encoded %v", evt)
				}
				if evt != nil {
					t.Errorf("event returned with error")
				}
				checkErr(t, err, tc.want, tc.is)
				var ce *Error
				if !errors.As(err, &ce) || ce.Op != "encode" {
					t.Errorf("error %T is not an encode *Error", err)
				}
			})
		}
	}
}
