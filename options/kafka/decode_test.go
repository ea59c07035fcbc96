package kafka

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/options"
)

// The events the transport carries, as the generic clients and codecs make
// them (every attribute and extension of the wire contract appears at least
// once).
func realisticEvents(tb testing.TB) []struct {
	route options.Route
	evt   *cloudevents.Event
} {
	tb.Helper()
	const dataType = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	at := time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.UTC)
	spec := func(action string) *cloudevents.Event {
		e := cloudevents.New()
		e.SetID("5c1f1d8c-3f0a-4e55-9e7b-0d7f6b1f2a11")
		e.SetSource("hub-controller")
		e.SetType(dataType + ".spec." + action)
		e.SetTime(at)
		e.SetExtension("resourceid", "0b6e5f8a-55d4-4b0c-9d1b-5ad1c2d3e4f5")
		e.SetExtension("resourceversion", 42)
		e.SetExtension("clustername", "cluster1")
		e.SetExtension("metadata", `{"name":"work1","namespace":"cluster1","labels":{"app":"guestbook"},"annotations":{"a":"b,c=d"}}`)
		_ = e.SetData(cloudevents.ApplicationJSON, map[string]any{
			"manifests":    []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "default"}, "data": map[string]any{"k": "v\nw"}}},
			"deleteOption": map[string]any{"propagationPolicy": "Foreground"},
		})
		return &e
	}
	deleted := spec("delete_request")
	deleted.SetExtension("deletiontimestamp", "2025-03-01T12:31:00Z")

	status := cloudevents.New()
	status.SetID("9a7e0e0c-0f8b-4d55-a1a4-6e2a4f0a7b01")
	status.SetSource("cluster1-work-agent")
	status.SetType(dataType + ".status.update_request")
	status.SetTime(at)
	status.SetExtension("resourceid", "0b6e5f8a-55d4-4b0c-9d1b-5ad1c2d3e4f5")
	status.SetExtension("resourceversion", 42)
	status.SetExtension("clustername", "cluster1")
	status.SetExtension("originalsource", "hub-controller")
	status.SetExtension("sequenceid", "1898406094385987584")
	_ = status.SetData(cloudevents.ApplicationJSON, map[string]any{
		"conditions":     []any{map[string]any{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "lastTransitionTime": "2025-03-01T12:30:46Z"}},
		"resourceStatus": []any{map[string]any{"resourceMeta": map[string]any{"ordinal": 0, "kind": "ConfigMap", "name": "cm"}, "statusFeedback": map[string]any{"values": []any{}}}},
	})

	specResync := cloudevents.New()
	specResync.SetID("e2f9a1b7-3c55-4c1e-8d2f-7a6b5c4d3e2f")
	specResync.SetSource("cluster1-work-agent")
	specResync.SetType(dataType + ".spec.resync_request")
	specResync.SetExtension("clustername", "cluster1")
	_ = specResync.SetData(cloudevents.ApplicationJSON, map[string]any{"resourceVersions": []any{map[string]any{"resourceID": "0b6e5f8a-55d4-4b0c-9d1b-5ad1c2d3e4f5", "resourceVersion": 42}}})

	statusResync := cloudevents.New()
	statusResync.SetID("1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
	statusResync.SetSource("hub-controller")
	statusResync.SetType(dataType + ".status.resync_request")
	_ = statusResync.SetData(cloudevents.ApplicationJSON, map[string]any{"statusHashes": []any{}})

	return []struct {
		route options.Route
		evt   *cloudevents.Event
	}{
		{options.Route{Role: options.RoleSpec, Source: "hub-controller", Cluster: "cluster1"}, spec("create_request")},
		{options.Route{Role: options.RoleSpec, Source: "hub-controller", Cluster: "cluster1"}, deleted},
		{options.Route{Role: options.RoleStatus, Source: "hub-controller", Cluster: "cluster1"}, &status},
		{options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, &specResync},
		{options.Route{Role: options.RoleStatusResync, Source: "hub-controller"}, &statusResync},
	}
}

// consumed is the record a consumer reads for what a producer wrote.
func consumed(tb testing.TB, pm *sarama.ProducerMessage) *sarama.ConsumerMessage {
	tb.Helper()
	m := &sarama.ConsumerMessage{Topic: pm.Topic, Partition: 3, Offset: 1234}
	var err error
	if pm.Key != nil {
		if m.Key, err = pm.Key.Encode(); err != nil {
			tb.Fatal(err)
		}
	}
	if pm.Value != nil {
		if m.Value, err = pm.Value.Encode(); err != nil {
			tb.Fatal(err)
		}
	}
	for _, h := range pm.Headers {
		m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return m
}

// canonical is what the binary content mode carries of an event: every
// attribute and extension in its string form (Kafka headers are strings,
// so an integer extension arrives as its decimal string, which receivers
// accept), and the data bytes.
func canonical(e *cloudevents.Event) map[string]string {
	out := map[string]string{
		"specversion": e.SpecVersion(), "id": e.ID(), "source": e.Source(), "type": e.Type(),
		"subject": e.Subject(), "dataschema": e.DataSchema(), "datacontenttype": e.DataContentType(),
		"data": string(e.Data()),
	}
	if !e.Time().IsZero() {
		out["time"] = e.Time().UTC().Format(time.RFC3339Nano)
	}
	for k, v := range e.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			s = fmt.Sprintf("unformattable %T %v", v, v)
		}
		out["ext:"+k] = s
	}
	return out
}

// Every event the transport sends arrives as it was sent, with the record
// naming its route.
func TestDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range realisticEvents(t) {
		t.Run(tt.evt.Type(), func(t *testing.T) {
			pm, err := encode(context.Background(), DefaultTopics().Topic(tt.route.Role), tt.route, tt.evt)
			if err != nil {
				t.Fatal(err)
			}
			m := consumed(t, pm)
			got, err := decode(m)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(canonical(tt.evt), canonical(got)); diff != "" {
				t.Errorf("(-sent +received)\n%s", diff)
			}
			if r := routeOf(tt.route.Role, m); r != tt.route {
				t.Errorf("route %+v, want %+v", r, tt.route)
			}
		})
	}
}

// Record headers travel through the fuzzer as one byte string: headers
// separated by 0x1e, key and value by the first 0x1f.
const (
	headerSep = "\x1e"
	kvSep     = "\x1f"
)

func packHeaders[H sarama.RecordHeader | *sarama.RecordHeader](hs []H) []byte {
	var parts []string
	for _, h := range hs {
		var rh sarama.RecordHeader
		switch h := any(h).(type) {
		case sarama.RecordHeader:
			rh = h
		case *sarama.RecordHeader:
			rh = *h
		}
		parts = append(parts, string(rh.Key)+kvSep+string(rh.Value))
	}
	return []byte(strings.Join(parts, headerSep))
}

func unpackHeaders(b []byte) []*sarama.RecordHeader {
	if len(b) == 0 {
		return nil
	}
	var hs []*sarama.RecordHeader
	for _, part := range bytes.Split(b, []byte(headerSep)) {
		k, v, _ := bytes.Cut(part, []byte(kvSep))
		hs = append(hs, &sarama.RecordHeader{Key: k, Value: v})
	}
	return hs
}

// FuzzDecode feeds decode records of any key, value and headers, starting
// from the records the transport sends, the same events in the structured
// content mode, and records that are not CloudEvents. decode never panics
// (nor leaves a panic to its recover: that is a crash in the CloudEvents
// binding it must keep away from); its errors say what was wrong; it
// decodes a record the same way every time; and an event it accepts, sent
// on by this transport, arrives unchanged.
func FuzzDecode(f *testing.F) {
	ctx := context.Background()
	for _, tt := range realisticEvents(f) {
		pm, err := encode(ctx, DefaultTopics().Topic(tt.route.Role), tt.route, tt.evt)
		if err != nil {
			f.Fatal(err)
		}
		m := consumed(f, pm)
		f.Add(m.Key, m.Value, packHeaders(m.Headers))
		structured, err := tt.evt.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.Key, structured, packHeaders([]sarama.RecordHeader{{Key: []byte("content-type"), Value: []byte(cloudevents.ApplicationCloudEventsJSON + "; charset=utf-8")}}))
	}
	f.Add([]byte("cluster1"), []byte("this is not a cloudevent"), []byte(nil))
	f.Add([]byte("cluster1"), []byte(`{"not":"an event"}`), []byte("content-type"+kvSep+cloudevents.ApplicationCloudEventsJSON))
	f.Add([]byte(nil), []byte(nil), []byte("ce_specversion"+kvSep+"1.0"))
	f.Add([]byte(nil), []byte(`{}`), []byte("ce_specversion"+kvSep+"1.0"+headerSep+"ce_id"+kvSep+"1"+headerSep+"ce_source"+kvSep+"s"+headerSep+"ce_type"+kvSep+"t"+headerSep+"ce_time"+kvSep+"yesterday"))
	f.Add([]byte(nil), []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","resourceversion":3,"flag":true,"data_base64":"aGk="}`), []byte("content-type"+kvSep+cloudevents.ApplicationCloudEventsJSON))

	h := func(kv ...string) []byte {
		var parts []string
		for i := 0; i+1 < len(kv); i += 2 {
			parts = append(parts, kv[i]+kvSep+kv[i+1])
		}
		return []byte(strings.Join(parts, headerSep))
	}
	ct := "content-type"
	f.Add([]byte("c"), []byte("aGk="), h("ce_specversion", "0.3", "ce_id", "1", "ce_source", "s", "ce_type", "t", "ce_datacontentencoding", "base64"))
	f.Add([]byte("c"), []byte(`{"specversion":"0.3","id":"1","source":"s","type":"t","datacontentencoding":"base64","data":"aGk="}`), h(ct, cloudevents.ApplicationCloudEventsJSON))
	f.Add([]byte("c"), []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"text/plain","data":"hi"}`), h(ct, cloudevents.ApplicationCloudEventsJSON))
	f.Add([]byte("c"), []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","data":{"a":1}}`), h(ct, cloudevents.ApplicationCloudEventsJSON))
	f.Add([]byte("c"), []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","ext":{"a":1}}`), h(ct, cloudevents.ApplicationCloudEventsJSON))
	f.Add([]byte("c"), []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","big":1e12,"half":1.5,"neg":-3,"nul":null}`), h(ct, cloudevents.ApplicationCloudEventsJSON))
	f.Add([]byte("c"), []byte(`[{"specversion":"1.0","id":"1","source":"s","type":"t"}]`), h(ct, "application/cloudevents-batch+json"))
	f.Add([]byte("c"), []byte(`x`), h("CE_SPECVERSION", "1.0", "ce_ID", "1", "ce_id", "2", "ce_source", "s", "ce_type", "t", "ce_kafkatopic", "x", "Content-Type", "text/plain", "ce_datacontenttype", "application/json"))
	f.Add([]byte("c"), []byte(`x`), h("ce_specversion", "1.0", "ce_id", "1", "ce_source", "s", "ce_type", "t", "ce_", "x", "ce_data_base64", "aGk=", "ce_dataschema", "::", "ce_subject", ""))
	f.Add([]byte("c"), []byte(`x`), h("ce_specversion", "2.0", "ce_id", "1", "ce_source", "s", "ce_type", "t"))

	f.Fuzz(func(t *testing.T, key, value, headers []byte) {
		m := &sarama.ConsumerMessage{Topic: DefaultSpecTopic, Partition: 1, Offset: 42, Key: key, Value: value, Headers: unpackHeaders(headers)}
		evt, err := decode(m)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if again, err := decode(m); err != nil {
			t.Fatalf("the same record decoded twice: %v, then %v", canonical(evt), err)
		} else if diff := cmp.Diff(canonical(evt), canonical(again)); diff != "" {
			t.Fatalf("the same record decoded twice (-first +second)\n%s", diff)
		}
		route := routeOf(options.RoleSpec, m)
		route.Source, route.Cluster = "hub", "cluster1" // Send needs both
		pm, err := encode(ctx, DefaultSpecTopic, route, evt)
		if err != nil {
			t.Fatalf("an event decode accepted cannot be sent on: %v", err)
		}
		again, err := decode(consumed(t, pm))
		if err != nil {
			t.Fatalf("an event decode accepted, sent on, does not decode: %v", err)
		}
		if diff := cmp.Diff(canonical(evt), canonical(again)); diff != "" {
			t.Fatalf("an event decode accepted changed on its way through the transport (-first +second)\n%s", diff)
		}
	})
}

// checkDecodeError fails t unless err says what was wrong with the record.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.HasPrefix(msg, "decoder panic") {
		t.Fatalf("decode recovered a panic: %v", err)
	}
	for _, prefix := range []string{"not a CloudEvent: ", "invalid CloudEvent: "} {
		if detail, ok := strings.CutPrefix(msg, prefix); ok {
			if strings.TrimSpace(detail) == "" {
				t.Fatalf("error %q does not say what was wrong", msg)
			}
			return
		}
	}
	t.Fatalf("error %q is neither \"not a CloudEvent\" nor \"invalid CloudEvent\"", msg)
}

func TestDecodeErrorsNameWhatWasWrong(t *testing.T) {
	t.Parallel()
	valid := []string{"ce_specversion", "1.0", "ce_id", "1", "ce_source", "s", "ce_type", "t"}
	rec := func(value string, kv ...string) *sarama.ConsumerMessage {
		m := &sarama.ConsumerMessage{Value: []byte(value)}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		return m
	}
	for _, tt := range []struct {
		name string
		m    *sarama.ConsumerMessage
		want string // "" = decodes
	}{
		{"no headers", rec("x"), "no ce_specversion header and no content-type header"},
		{"unknown version", rec("x", "ce_specversion", "2.0"), `header ce_specversion "2.0": not a CloudEvents version`},
		{"not an event format", rec("x", "content-type", "application/json"), `content-type "application/json" is not a CloudEvents event format`},
		{"batch", rec("[]", "content-type", "application/cloudevents-batch+json"), "not supported for batch events"},
		{"bad attribute name", rec("x", append(slices.Clone(valid), "ce_resource-id", "r")...), `header "ce_resource-id": attribute names are letters and digits only`},
		{"empty attribute name", rec("x", append(slices.Clone(valid), "CE_", "r")...), `header "CE_": attribute names`},
		{"two ids", rec("x", append(slices.Clone(valid), "CE_ID", "2")...), `headers "ce_id" and "CE_ID": one attribute, two values`},
		{"the same id twice", rec("x", append(slices.Clone(valid), "CE_ID", "1")...), ""},
		{"two datacontenttypes", rec("x", append(slices.Clone(valid), "content-type", "text/plain", "ce_datacontenttype", "application/json")...), "two datacontenttypes"},
		{"bad time", rec("x", append(slices.Clone(valid), "ce_time", "yesterday")...), `binary mode: invalid value for time: "yesterday"`},
		{"no id", rec("x", "ce_specversion", "1.0", "ce_source", "s", "ce_type", "t"), "invalid CloudEvent: binary mode: id:"},
		{"structured, broken JSON", rec("{", "content-type", "application/cloudevents+json"), `structured mode (content-type "application/cloudevents+json"):`},
		{"structured, no type", rec(`{"specversion":"1.0","id":"1","source":"s"}`, "Content-Type", "application/cloudevents+json; charset=utf-8"), "invalid CloudEvent: structured mode"},
		{"structured, upper-case extension", rec(`{"specversion":"0.3","id":"1","source":"s","type":"t","Ext":"x"}`, "content-type", "application/cloudevents+json"), `extension "Ext": attribute names are lower-case letters and digits only`},
		{"nil header skipped", &sarama.ConsumerMessage{Value: []byte("x"), Headers: append([]*sarama.RecordHeader{nil}, rec("", valid...).Headers...)}, ""},
		{"other headers ignored", rec("x", append(slices.Clone(valid), SourceHeader, "hub", "traceparent", "00-x")...), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			evt, err := decode(tt.m)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if len(evt.Extensions()) != 0 {
					t.Errorf("extensions %v, want none", evt.Extensions())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to say %q", err, tt.want)
			}
			checkDecodeError(t, err)
		})
	}
}
