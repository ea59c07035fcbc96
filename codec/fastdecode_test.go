package codec

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/workwire/sdk-go/internal/jsonscan"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic/types"
)

// trickyJSON are inputs where a naive fast path would part ways with
// encoding/json: duplicate and case-folded keys, escapes, nulls, odd numbers,
// invalid UTF-8, wrong types.
var trickyJSON = []string{
	`{"manifests":[{"a":1}],"Manifests":[]}`,
	`{"manifeſts":[{"a":1}]}`,
	`{"manifests":[],"manifests":[{}]}`,
	`{"manifests":[ {"a" : [1, 2.5e3, -0, true, false, null]} , null , "x", 7 ]}`,
	`{"manifests":null,"deleteOption":null,"manifestConfigs":null,"executor":null}`,
	`{"manifests":{}}`,
	`{"\u006danifests":[{}]}`,
	`{"deleteOption":{"propagationPolicy":"Orphan","ttlSecondsAfterFinished":1.5}}`,
	`{"deleteOption":{"propagationPolicy":"SelectivelyOrphan","selectivelyOrphans":{"orphaningRules":[{"group":"","resource":"configmaps","name":"a","namespace":"b"}]},"ttlSecondsAfterFinished":30}}`,
	`{"deleteOption":{"propagationPolicy":"Orphan","propagationPolicy":"Foreground"}}`,
	`{"deleteOption":{"PropagationPolicy":"Orphan"}}`,
	`{"deleteOption":{"propagationPolicy":"Orphan","future":1}}`,
	`{"manifestConfigs":[{"resourceIdentifier":null,"feedbackRules":[null],"updateStrategy":null}]}`,
	`{"manifestConfigs":[{"resourceIdentifier":{"name":"a\"b\u00e9\ud83d\ude00"},"feedbackRules":[{"type":"JSONPaths","jsonPaths":[{"name":"s","path":".status","version":"v1"}]}],"updateStrategy":{"type":"ServerSideApply","serverSideApply":{"force":true,"fieldManager":"work-agent","ignoreFields":[{"condition":"OnSpokeChange","jsonPaths":[".spec.replicas"],"jsonPointers":["/spec/replicas"],"jqPathExpressions":[".spec.replicas"]}]}},"conditionRules":[{"condition":"Complete","type":"CEL","celExpressions":["object.status.ready"],"message":"m","messageExpression":"e"}],"feedbackScrapeType":"Poll"}]}`,
	`{"manifestConfigs":[{"updateStrategy":{"serverSideApply":{"force":"yes"}}}]}`,
	`{"manifestConfigs":[{"conditionRules":[{"celExpressions":[null]}]}]}`,
	`{"manifest":{"kind":"Pod"},"configOption":{"feedbackRules":[]},"deleteOption":{}}`,
	`{"manifest":null}`,
	`{"manifest":{},"manifest":{}}`,
	"{\"manifest\":\"\xff\xfe\"}",
	`{"name":"w","namespace":"c","uid":"u","generation":3,"creationTimestamp":"2024-01-01T00:00:00+02:00","deletionTimestamp":null,"labels":{"a":"b"},"annotations":{"x":"{\"y\":1}"},"resourceVersion":"9","finalizers":["f"],"managedFields":[{"manager":"m"}]}`,
	`{"name":null,"generation":null,"creationTimestamp":null,"labels":null}`,
	`{"generation":1e3}`,
	`{"generation":-0}`,
	`{"generation":9223372036854775808}`,
	`{"labels":{"k":null}}`,
	`{"labels":{"k":"v","k":"w"}}`,
	`{"labels":{"k":"v"},"labels":{"j":"w"}}`,
	"{\"labels\":{\"k\xff\":\"v\"}}",
	"{\"name\":\"\xe9t\xe9\"}",
	`{"name":"é"}`,
	`{"Name":"x"}`,
	`{"creationTimestamp":"yesterday"}`,
	`{"deletionTimestamp":5}`,
	`{"uid":1}`,
	`{} `,
	` {"name":"a"} x`,
	`[]`,
	`null`,
	`"str"`,
	`{"a":}`,
	`{"a":1,}`,
	`{,"a":1}`,
	`{"a" 1}`,
	`{"a":"\x"}`,
	`{"a":"\u12"}`,
	`{"a":01}`,
	`{"a":1.}`,
	`{"a":1e}`,
	`{"a":-}`,
	`{"a":tru}`,
	"{\"a\":\"\x01\"}",
	`[1,2,]`,
	``,
	`{"conditions":[{"type":"A","status":"True","observedGeneration":2,"lastTransitionTime":"2024-01-01T00:00:00Z","reason":"r","message":"m"}],"resourceStatus":[{"resourceMeta":{"ordinal":1,"kind":"K"},"statusFeedback":{"values":[{"name":"n","fieldValue":{"type":"Integer","integer":5}},{"name":"b","fieldValue":{"type":"Boolean","boolean":false}},{"name":"s","fieldValue":{"type":"String","string":null}},{"name":"status","fieldValue":{"type":"JsonRaw","jsonRaw":"{\"a\":1}"}}]},"conditions":null}]}`,
	`{"conditions":[],"resourceStatus":{"manifestConditions":[]}}`,
	`{"conditions":null,"resourceStatus":null}`,
	`{"resourceStatus":[{"resourceMeta":{"ordinal":2147483648}}]}`,
	`{"resourceStatus":[{"resourceMeta":{"ordinal":-2147483648}}]}`,
	`{"resourceStatus":[{"resourceMeta":{"ordinal":1.0}}]}`,
	`{"resourceStatus":[null]}`,
	`{"resourceStatus":[{"statusFeedback":{"values":[{"fieldValue":{"integer":9223372036854775807}}]}}]}`,
	`{"resourceStatus":[{"statusFeedback":{"values":[{"fieldValue":{"boolean":"true"}}]}}]}`,
	`{"reconcileStatus":{"conditions":[{"type":"Applied","lastTransitionTime":null}]},"resourceMeta":{},"contentStatus":{"conditions":[]}}`,
	`{"reconcileStatus":null,"contentStatus":null}`,
	`{"contentStatus":[1]}`,
	`{"reconcileStatus":{"conditions":[],"extra":1}}`,
	`{"type":"A","status":"True","lastTransitionTime":"2024-01-01T00:00:00.5Z"}`,
	`{"type":"A","lastTransitionTime":"not a time"}`,
	`{"type":"A","observedGeneration":"1"}`,
}

func FuzzFastDecoders(f *testing.F) {
	for _, s := range trickyJSON {
		f.Add([]byte(s))
	}
	for _, c := range codecs() {
		evt, err := c.codec.Encode(testSource, eventType(c.codec.DataType(), types.SubResourceSpec, types.CreateRequest), specWork())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(evt.Data())
		f.Add([]byte(evt.Extensions()[types.ExtMetadata].(string)))
		if evt, err = c.codec.Encode(testAgent, eventType(c.codec.DataType(), types.SubResourceStatus, types.UpdateRequest), statusWork()); err != nil {
			f.Fatal(err)
		}
		f.Add(evt.Data())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := jsonscan.Valid(data), json.Valid(data); got != want {
			t.Fatalf("jsonscan.Valid(%q) = %v, json.Valid = %v", data, got, want)
		}
		parity(t, data, fastManifestBundle)
		parity(t, data, fastManifest)
		parity(t, data, fastWireMeta)
		parity(t, data, fastConfigOption)
		parity(t, data, fastDeleteOption)
		parity(t, data, fastBundleStatus)
		parity(t, data, fastManifestStatus)
		parity(t, data, fastCondition)
	})
}

// parity checks that whatever the fast decoder accepts, encoding/json
// decodes to the same value.
func parity[T any](t *testing.T, data []byte, fast func(*parser, *T) bool) {
	t.Helper()
	var got T
	if !parse(data, func(p *parser) bool { return fast(p, &got) }) {
		return
	}
	var want T
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%T: fast path accepted %q, encoding/json: %v", got, data, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%T of %q (-encoding/json +fast):\n%s", got, data, diff)
	}
}

func TestValidJSONNesting(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 100, jsonscan.MaxNesting, jsonscan.MaxNesting + 1} {
		data := strings.Repeat("[", n) + strings.Repeat("]", n)
		if got, want := jsonscan.Valid([]byte(data)), json.Valid([]byte(data)); got != want {
			t.Errorf("depth %d: validJSON = %v, json.Valid = %v", n, got, want)
		}
		data = strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
		if got, want := jsonscan.Valid([]byte(data)), json.Valid([]byte(data)); got != want {
			t.Errorf("object depth %d: validJSON = %v, json.Valid = %v", n, got, want)
		}
	}
}

// TestFastDecodersKnowEveryField fails when workv1 gains a field the fast
// decoders do not know. Such a field is never lost (the fast decoders give
// up on unknown keys, and encoding/json decodes the event), but events that
// carry it lose the fast path: teach the decoder in fastdecode.go, then add
// the name here.
func TestFastDecodersKnowEveryField(t *testing.T) {
	t.Parallel()
	known := map[reflect.Type][]string{
		reflect.TypeFor[workv1.DeleteOption]():          {"propagationPolicy", "selectivelyOrphans", "ttlSecondsAfterFinished"},
		reflect.TypeFor[workv1.SelectivelyOrphan]():     {"orphaningRules"},
		reflect.TypeFor[workv1.OrphaningRule]():         {"group", "name", "namespace", "resource"},
		reflect.TypeFor[workv1.ResourceIdentifier]():    {"group", "name", "namespace", "resource"},
		reflect.TypeFor[workv1.ManifestConfigOption]():  {"conditionRules", "feedbackRules", "feedbackScrapeType", "resourceIdentifier", "updateStrategy"},
		reflect.TypeFor[workv1.FeedbackRule]():          {"jsonPaths", "type"},
		reflect.TypeFor[workv1.JsonPath]():              {"name", "path", "version"},
		reflect.TypeFor[workv1.UpdateStrategy]():        {"serverSideApply", "type"},
		reflect.TypeFor[workv1.ServerSideApplyConfig](): {"fieldManager", "force", "ignoreFields"},
		reflect.TypeFor[workv1.IgnoreField]():           {"condition", "jqPathExpressions", "jsonPaths", "jsonPointers"},
		reflect.TypeFor[workv1.ConditionRule]():         {"celExpressions", "condition", "message", "messageExpression", "type"},
		reflect.TypeFor[ManifestBundle]():               {"deleteOption", "executor", "manifestConfigs", "manifests"},
		reflect.TypeFor[Manifest]():                     {"configOption", "deleteOption", "manifest"},
		reflect.TypeFor[metav1.Condition]():             {"lastTransitionTime", "message", "observedGeneration", "reason", "status", "type"},
		reflect.TypeFor[workv1.ManifestCondition]():     {"conditions", "resourceMeta", "statusFeedback"},
		reflect.TypeFor[workv1.ManifestResourceMeta]():  {"group", "kind", "name", "namespace", "ordinal", "resource", "version"},
		reflect.TypeFor[workv1.StatusFeedbackResult]():  {"values"},
		reflect.TypeFor[workv1.FeedbackValue]():         {"fieldValue", "name"},
		reflect.TypeFor[workv1.FieldValue]():            {"boolean", "integer", "jsonRaw", "string", "type"},
		reflect.TypeFor[ManifestBundleStatus]():         {"conditions", "resourceStatus"},
		reflect.TypeFor[ManifestStatus]():               {"conditions", "contentStatus", "reconcileStatus", "resourceMeta", "statusFeedback"},
		reflect.TypeFor[ReconcileStatus]():              {"conditions"},
		reflect.TypeFor[wireMeta]():                     {"annotations", "creationTimestamp", "deletionTimestamp", "generation", "labels", "name", "namespace", "uid"},
	}
	for typ, want := range known {
		var got []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous || name == "" || name == "-" {
				t.Errorf("%v.%s: embedded or untagged field; the fast decoder cannot handle it", typ, f.Name)
				continue
			}
			got = append(got, name)
		}
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%v: JSON fields changed (-fast decoder knows +type has):\n%s", typ, diff)
		}
	}
}

// TestSpecDataMatchesMarshal: the assembled spec data is what json.Marshal
// of the payload gives.
func TestSpecDataMatchesMarshal(t *testing.T) {
	t.Parallel()
	two := specWork()
	two.Spec.Workload.Manifests = append(two.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(`{"kind":"ConfigMap","apiVersion":"v1","data":{"a":"b"}}`)}})
	two.Spec.Executor = &workv1.ManifestWorkExecutor{Subject: workv1.ManifestWorkExecutorSubject{Type: workv1.ExecutorSubjectTypeServiceAccount}}
	bare := specWork()
	bare.Spec.DeleteOption, bare.Spec.ManifestConfigs = nil, nil
	typed := specWork()
	typed.Spec.Workload.Manifests[0].RawExtension = runtime.RawExtension{Object: &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}}}
	for name, w := range map[string]*workv1.ManifestWork{"one": specWork(), "two": two, "bare": bare, "typed": typed} {
		got, err := encodeBundleSpec(w)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(&ManifestBundle{Manifests: w.Spec.Workload.Manifests, DeleteOption: w.Spec.DeleteOption, ManifestConfigs: w.Spec.ManifestConfigs, Executor: w.Spec.Executor})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: manifestbundles data\n got %s\nwant %s", name, got, want)
		}
		if name == "two" {
			continue
		}
		w.Spec.Executor = nil
		got, err = encodeManifestSpec(w)
		if err != nil {
			t.Fatal(err)
		}
		p := &Manifest{Manifest: w.Spec.Workload.Manifests[0].RawExtension, DeleteOption: w.Spec.DeleteOption}
		if len(w.Spec.ManifestConfigs) == 1 {
			p.ConfigOption = &w.Spec.ManifestConfigs[0]
		}
		if want, err = json.Marshal(p); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: manifests data\n got %s\nwant %s", name, got, want)
		}
	}
}

// FuzzStrings: the fast parser reads every JSON string as encoding/json does.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{`plain`, `a\"b`, `\u00e9\ud83d\ude00`, `\ud800`, `\ud800\u0041`, `\udc00\ud800`, `\u0000`, "\xff\xfe", "é\xc3", `\/\b\f\n\r\t`, `\uD834\uDD1E`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := []byte(`"` + s + `"`)
		if !json.Valid(tok) {
			return
		}
		var want string
		if err := json.Unmarshal(tok, &want); err != nil {
			t.Fatal(err)
		}
		p := parser{data: tok}
		got, ok := p.str()
		if !ok || got != want || p.i != len(tok) {
			t.Fatalf("str(%q) = %q, %v; encoding/json: %q", tok, got, ok, want)
		}
	})
}
