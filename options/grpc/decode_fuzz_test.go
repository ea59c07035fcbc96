package grpc

import (
	"bytes"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/workwire/sdk-go/options/grpc/protocol"
)

const fuzzDataType = "io.open-cluster-management.works.v1alpha1.manifestbundles"

func ceString(s string) *protocol.CloudEventAttributeValue {
	return &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeString{CeString: s}}
}

func mustMarshal(f *testing.F, m proto.Message) []byte {
	f.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzDecode feeds the client's receive path any stream message: decode
// never panics; what it delivers is a valid CloudEvent on the route its
// attributes give, and encoding it again and decoding changes nothing.
func FuzzDecode(f *testing.F) {
	spec := &protocol.CloudEvent{
		Id: "1", Source: "hub", SpecVersion: "1.0", Type: fuzzDataType + ".spec.create_request",
		Attributes: map[string]*protocol.CloudEventAttributeValue{
			"ce-clustername":     ceString("cluster1"),
			"ce-resourceid":      ceString("r1"),
			"ce-resourceversion": {Attr: &protocol.CloudEventAttributeValue_CeInteger{CeInteger: 3}},
			"contenttype":        ceString("application/json"),
			"ce-time":            {Attr: &protocol.CloudEventAttributeValue_CeTimestamp{CeTimestamp: timestamppb.New(time.Unix(1700000000, 0))}},
		},
		Data: &protocol.CloudEvent_BinaryData{BinaryData: []byte(`{"a":1}`)},
	}
	f.Add(mustMarshal(f, spec))
	status := proto.Clone(spec).(*protocol.CloudEvent)
	status.Type = fuzzDataType + ".status.resync_response"
	status.Attributes["originalsource"] = ceString("hub") // the protobuf format's bare names
	status.Attributes["subject"] = ceString("s")
	status.Attributes["ce-dataschema"] = &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeUri{CeUri: "https://example.com/s"}}
	status.Data = &protocol.CloudEvent_TextData{TextData: `{"b":2}`}
	f.Add(mustMarshal(f, status))
	proto3 := proto.Clone(spec).(*protocol.CloudEvent)
	proto3.Data = &protocol.CloudEvent_ProtoData{ProtoData: &anypb.Any{TypeUrl: "x", Value: []byte{1, 2}}}
	f.Add(mustMarshal(f, proto3))
	f.Add(mustMarshal(f, protocol.NewHeartbeat()))
	f.Add(mustMarshal(f, &protocol.CloudEvent{}))
	f.Add([]byte("not protobuf"))

	f.Fuzz(func(t *testing.T, data []byte) {
		var pbe protocol.CloudEvent
		if proto.Unmarshal(data, &pbe) != nil {
			return // gRPC refuses it before the transport sees it
		}
		route, evt, err := decode(&pbe)
		if err != nil {
			if evt != nil {
				t.Fatalf("decode failed (%v) and returned an event", err)
			}
			return
		}
		if err := evt.Validate(); err != nil {
			t.Fatalf("decode delivered an invalid event: %v", err)
		}
		if derived, _ := protocol.DeriveRoute(&pbe); route != derived {
			t.Fatalf("decode delivered route %+v, the attributes give %+v", route, derived)
		}
		// What was delivered encodes, and decodes to itself.
		again, err := protocol.ToProto(evt)
		if err != nil {
			t.Fatalf("a delivered event does not encode: %v", err)
		}
		route2, evt2, err := decode(again)
		if err != nil {
			t.Fatalf("a delivered event, encoded again, does not decode: %v", err)
		}
		if route2 != route {
			t.Fatalf("route %+v became %+v", route, route2)
		}
		if pbe2, err := protocol.ToProto(evt2); err != nil || !proto.Equal(again, pbe2) {
			t.Fatalf("decoding is not stable: %v\n%v\n%v", err, again, pbe2)
		}
	})
}

// FuzzDecodeRoundTrip checks that a valid event a peer sends reaches the
// receiver unchanged, through the wire encoding.
func FuzzDecodeRoundTrip(f *testing.F) {
	f.Add("1", "hub", fuzzDataType+".spec.create_request", "cluster1", "r1", int32(3), []byte(`{"a":1}`), true)
	f.Add("2", "agent", fuzzDataType+".status.update_request", "", "", int32(-1), []byte{0, 0xff}, false)
	f.Add("3", "hub", "bogus", "c", "r", int32(0), []byte(nil), true)
	f.Fuzz(func(t *testing.T, id, source, typ, cluster, resourceID string, version int32, data []byte, json bool) {
		evt := cloudevents.New()
		evt.SetID(id)
		evt.SetSource(source)
		evt.SetType(typ)
		evt.SetTime(time.Unix(1700000000, 0).UTC())
		if cluster != "" {
			evt.SetExtension("clustername", cluster)
		}
		evt.SetExtension("resourceid", resourceID)
		evt.SetExtension("resourceversion", version)
		if data != nil {
			ct := "application/octet-stream"
			if json {
				ct = cloudevents.ApplicationJSON
			}
			evt.SetDataContentType(ct)
			evt.DataEncoded = data
		}
		if evt.Validate() != nil {
			return // Send refuses it
		}
		pbe, err := protocol.ToProto(&evt)
		if err != nil {
			return // Send fails
		}
		wire, err := proto.Marshal(pbe)
		if err != nil {
			return // invalid UTF-8: Send fails
		}
		var received protocol.CloudEvent
		if err := proto.Unmarshal(wire, &received); err != nil {
			t.Fatalf("the wire form does not unmarshal: %v", err)
		}
		route, got, err := decode(&received)
		if err != nil {
			t.Fatalf("a valid event was not delivered: %v", err)
		}
		if derived, _ := protocol.DeriveRoute(pbe); route != derived {
			t.Errorf("route %+v, sent on %+v", route, derived)
		}
		if got.ID() != evt.ID() || got.Source() != evt.Source() || got.Type() != evt.Type() || got.SpecVersion() != evt.SpecVersion() ||
			!got.Time().Equal(evt.Time()) || got.DataContentType() != evt.DataContentType() || !bytes.Equal(got.Data(), evt.Data()) {
			t.Errorf("event changed on the way:\nsent %v\ngot  %v", evt, got)
		}
		for name, want := range evt.Extensions() {
			if v := got.Extensions()[name]; v != want {
				t.Errorf("extension %s: %#v, sent %#v", name, v, want)
			}
		}
		if len(got.Extensions()) != len(evt.Extensions()) {
			t.Errorf("extensions %v, sent %v", got.Extensions(), evt.Extensions())
		}
	})
}
