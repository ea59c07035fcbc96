package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// decodedWork is the work of the decode tests, as a hub holds it.
func decodedWork() *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "cluster1", UID: "5b3b2c1e-0d7a-4f0e-9f51-8a4c1b0e2d11", Generation: 2,
			Labels: map[string]string{"app": "demo"}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w1","namespace":"default"},"data":{"k":"v"}}`)}}}}},
	}
}

// eventTime is the time of the decode tests' events, so their lines are
// known.
var eventTime = time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

// specEvent is the spec event a source sends of decodedWork, as the SDK's
// codec encodes it: an update_request at generation 2.
func specEvent(t *testing.T) *cloudevents.Event {
	t.Helper()
	w := decodedWork()
	evt, err := codec.NewManifestBundleCodec().Encode("hub1", codec.SpecEventType(w), w)
	if err != nil {
		t.Fatal(err)
	}
	evt.SetID("spec-1")
	evt.SetTime(eventTime)
	return evt
}

// statusEvent is the status event cluster1's agent sends of decodedWork,
// Applied, as the SDK's codec encodes it, with the sequenceid the agent
// client adds.
func statusEvent(t *testing.T) *cloudevents.Event {
	t.Helper()
	w := decodedWork()
	w.Annotations = map[string]string{codec.OriginalSourceAnnotation: "hub1"}
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
		ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(eventTime)}}
	status := types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
	evt, err := codec.NewManifestBundleCodec().Encode("cluster1-agent", status, w)
	if err != nil {
		t.Fatal(err)
	}
	evt.SetID("status-1")
	evt.SetTime(eventTime)
	evt.SetExtension(types.ExtSequenceID, "1869873215830069248")
	return evt
}

// The encodings of an event in each content mode, as the transports put
// it on the wire.

func structured(t *testing.T, evt *cloudevents.Event) []byte {
	t.Helper()
	b, err := evt.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// binary writes evt in binary mode as header lines under prefix (the
// NATS and Pub/Sub transports' attributes, or "ce_" for Kafka's record
// headers), first the HTTP status line if status is set, as curl -i
// prints a response.
func binary(t *testing.T, evt *cloudevents.Event, prefix string, status bool) []byte {
	t.Helper()
	attrs, err := options.BinaryAttributes(evt, prefix, "content-type")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if status {
		b.WriteString("HTTP/1.1 200 OK\r\nDate: Fri, 02 Jan 2026 03:04:05 GMT\r\n")
	}
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		fmt.Fprintf(&b, "%s: %s\r\n", k, attrs[k])
	}
	b.WriteString("\r\n")
	b.Write(evt.Data())
	return b.Bytes()
}

func protobuf(t *testing.T, evt *cloudevents.Event) []byte {
	t.Helper()
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(pbe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publishRequest is evt as the gRPC transport publishes it.
func publishRequest(t *testing.T, evt *cloudevents.Event) []byte {
	t.Helper()
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(&protocol.PublishRequest{Event: pbe})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes data to a file of the test's and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// workwireStdin runs the program with args and stdin as its standard
// input, like workwire.
func workwireStdin(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("workwire %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// An event the SDK encoded reads back in every content mode a transport
// puts it on the wire in, from a file or the standard input, detected or
// named: one line as workwire tail prints it, or JSON with the attributes,
// the extensions and the data (a ManifestBundle's manifests as objects).
func TestDecodeReadsEveryContentMode(t *testing.T) {
	spec, status := specEvent(t), statusEvent(t)
	specLine := fmt.Sprintf("2026-01-02T03:04:05.678Z io.open-cluster-management.works.v1alpha1.manifestbundles.spec.update_request"+
		" cluster=cluster1 resource=5b3b2c1e-0d7a-4f0e-9f51-8a4c1b0e2d11 version=2 sequence=- size=%d source=hub1", len(spec.Data()))
	statusLine := fmt.Sprintf("2026-01-02T03:04:05.678Z io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request"+
		" cluster=cluster1 resource=5b3b2c1e-0d7a-4f0e-9f51-8a4c1b0e2d11 version=2 sequence=1869873215830069248 size=%d source=cluster1-agent", len(status.Data()))
	for _, tc := range []struct {
		name  string
		evt   *cloudevents.Event
		input []byte
		mode  string // the content mode, as -o json says it
		line  string
	}{
		{"structured spec", spec, structured(t, spec), "structured", specLine},
		{"structured status", status, structured(t, status), "structured", statusLine},
		{"binary spec", spec, binary(t, spec, "ce-", false), "binary", specLine},
		{"binary status", status, binary(t, status, "ce-", false), "binary", statusLine},
		{"binary spec, curl -i", spec, binary(t, spec, "ce-", true), "binary", specLine},
		{"binary spec, Kafka headers", spec, binary(t, spec, "ce_", false), "binary", specLine},
		{"binary status, Kafka headers", status, binary(t, status, "ce_", false), "binary", statusLine},
		{"protobuf spec", spec, protobuf(t, spec), "protobuf", specLine},
		{"protobuf status", status, protobuf(t, status), "protobuf", statusLine},
		{"protobuf PublishRequest", status, publishRequest(t, status), "protobuf", statusLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "event", tc.input)
			for _, args := range [][]string{
				{"decode", path},
				{"decode", "-content-mode", tc.mode, path},
			} {
				code, stdout, stderr := workwire(t, args...)
				if code != 0 || stdout != tc.line+"\n" {
					t.Errorf("workwire %v: exit %d, stdout:\n%s\nwant:\n%s\nstderr:\n%s", args, code, stdout, tc.line, stderr)
				}
			}
			for _, args := range [][]string{{"decode", "-o", "json"}, {"decode", "-o", "json", "-"}} {
				code, stdout, stderr := workwireStdin(t, tc.input, args...)
				if code != 0 {
					t.Fatalf("workwire %v < input: exit %d, stderr:\n%s", args, code, stderr)
				}
				checkJSONView(t, stdout, tc.mode, tc.evt)
			}
		})
	}
}

// checkJSONView checks that out, what decode -o json printed, is evt, read
// in content mode mode.
func checkJSONView(t *testing.T, out, mode string, evt *cloudevents.Event) {
	t.Helper()
	var got struct {
		ContentMode string            `json:"contentMode"`
		Attributes  map[string]string `json:"attributes"`
		Extensions  map[string]any    `json:"extensions"`
		Data        json.RawMessage   `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	wantAttrs := map[string]string{"specversion": "1.0", "id": evt.ID(), "source": evt.Source(), "type": evt.Type(),
		"time": "2026-01-02T03:04:05.678Z", "datacontenttype": "application/json"}
	if got.ContentMode != mode || !reflect.DeepEqual(got.Attributes, wantAttrs) {
		t.Errorf("content mode %q, attributes %v; want %q, %v", got.ContentMode, got.Attributes, mode, wantAttrs)
	}
	// Extensions keep the type the content mode gives them: binary mode
	// has only strings.
	gotExts := map[string]string{}
	for k, v := range got.Extensions {
		gotExts[k] = fmt.Sprint(v)
	}
	wantExts := map[string]string{}
	for k, v := range evt.Extensions() {
		wantExts[k] = fmt.Sprint(v)
	}
	if !reflect.DeepEqual(gotExts, wantExts) {
		t.Errorf("extensions %v, want %v", gotExts, wantExts)
	}
	var gotData, wantData any
	if err := json.Unmarshal(got.Data, &gotData); err != nil {
		t.Fatalf("data %s: %v", got.Data, err)
	}
	if err := json.Unmarshal(evt.Data(), &wantData); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotData, wantData) {
		t.Errorf("data %s, want %s", got.Data, evt.Data())
	}
	if strings.HasSuffix(evt.Type(), ".spec.update_request") {
		// The manifests are objects, not strings of JSON.
		var bundle struct {
			Manifests []map[string]any `json:"manifests"`
		}
		if err := json.Unmarshal(got.Data, &bundle); err != nil || len(bundle.Manifests) != 1 || bundle.Manifests[0]["kind"] != "ConfigMap" {
			t.Errorf("manifests of %s: %v", got.Data, err)
		}
	}
}

// What is no event, or no event the SDK takes, exits 1 with what is wrong
// and where (the line, or the offset in protobuf); a bad command line
// exits 2.
func TestDecodeRefusesBadInput(t *testing.T) {
	spec := specEvent(t)
	noVersion := specEvent(t)
	noVersion.SetExtension(types.ExtResourceVersion, nil)
	badTime := strings.Join([]string{
		`{`,
		`  "specversion": "1.0",`,
		`  "id": "x",`,
		`  "source": "hub1",`,
		`  "type": "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",`,
		`  "time": "yesterday"`,
		`}`,
	}, "\n")
	badManifest := strings.Join([]string{
		`ce-specversion: 1.0`,
		`ce-id: x`,
		`ce-source: hub1`,
		`ce-type: io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request`,
		`ce-resourceid: 5b3b2c1e`,
		`ce-resourceversion: 1`,
		`content-type: application/json`,
		``,
		`{"manifests":["not an object"]}`,
	}, "\n")
	truncated := protobuf(t, spec)
	truncated = truncated[:len(truncated)-10]
	for _, tc := range []struct {
		name   string
		input  []byte
		args   []string
		code   int
		stderr []string
	}{
		{name: "garbage", input: []byte("hello, world\n"), code: 1,
			stderr: []string{`not a CloudEvent in any content mode: it begins "hello, world"`}},
		{name: "empty", input: nil, code: 1, stderr: []string{"the input is empty"}},
		{name: "broken JSON", input: []byte("{\n  \"specversion\": \"1.0\",\n  \"id\": \n}\n"), code: 1,
			stderr: []string{"structured mode: line 4, column 1: invalid character '}'"}},
		{name: "a JSON array", input: []byte("\n[1, 2]\n"), args: []string{"-content-mode", "structured"}, code: 1,
			stderr: []string{"structured mode: line 2, column 1: want a JSON object (the event), not an array"}},
		{name: "a bad time", input: []byte(badTime), code: 1, stderr: []string{`structured mode: line 6: "time": cannot convert "yesterday"`}},
		{name: "no id", input: []byte(`{"specversion":"1.0","source":"hub1","type":"t"}`), code: 1, stderr: []string{"structured mode: id: "}},
		{name: "a header line without a colon", input: []byte("ce-id: 1\nce-type t\n\n{}"), code: 1,
			stderr: []string{`binary mode: line 2: "ce-type t" is not a header line`}},
		{name: "ce- and ce_ mixed", input: []byte("ce-specversion: 1.0\nce_id: 1\n"), code: 1,
			stderr: []string{"binary mode: line 2: ce_id and ce-specversion (line 1): ce- and ce_ headers mixed"}},
		{name: "an unknown specversion", input: []byte("content-type: application/json\nce-specversion: 2.0\nce-id: 1\n"), code: 1,
			stderr: []string{`binary mode: line 2: ce-specversion "2.0": want 1.0 or 0.3`}},
		{name: "a manifest that is no object", input: []byte(badManifest), code: 1,
			stderr: []string{"line 9: decode io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request event \"x\"", "manifests[0]"}},
		{name: "no resourceversion", input: binary(t, noVersion, "ce-", false), code: 1,
			stderr: []string{"resourceversion", "missing"}},
		{name: "truncated protobuf", input: truncated, code: 1, stderr: []string{"protobuf mode (the input is not text): offset ", ": field 6: unexpected EOF"}},
		{name: "JSON as protobuf", input: structured(t, spec), args: []string{"-content-mode", "protobuf"}, code: 1, stderr: []string{"protobuf mode: offset 0"}},
		{name: "bad -content-mode", input: structured(t, spec), args: []string{"-content-mode", "xml"}, code: 2,
			stderr: []string{`-content-mode "xml": want auto, structured, binary or protobuf`}},
		{name: "bad -o", input: structured(t, spec), args: []string{"-o", "yaml"}, code: 2, stderr: []string{`-o "yaml"`}},
		{name: "a flag that is none", input: structured(t, spec), args: []string{"-nosuch"}, code: 2, stderr: []string{"flag provided but not defined: -nosuch"}},
		{name: "two files", input: nil, args: []string{"a", "b"}, code: 2, stderr: []string{`one FILE at most, not ["a" "b"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := workwireStdin(t, tc.input, append([]string{"decode"}, tc.args...)...)
			if code != tc.code || stdout != "" || strings.Contains(stderr, "panic") {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
		})
	}
	t.Run("a missing file", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "missing.json")
		code, _, stderr := workwire(t, "decode", missing)
		if code != 1 || !strings.Contains(stderr, "no such file") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
}
