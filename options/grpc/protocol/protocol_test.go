package protocol_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/binding/format/protobuf/v2/pb"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"

func str(s string) *protocol.CloudEventAttributeValue {
	return &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeString{CeString: s}}
}

func TestDeriveRoute(t *testing.T) {
	t.Parallel()
	for name, attrs := range map[string]map[string]*protocol.CloudEventAttributeValue{
		"OCM's spelling":  {"ce-clustername": str("c1"), "ce-originalsource": str("hub")},
		"bare names":      {"clustername": str("c1"), "originalsource": str("hub")},
		"OCM's preferred": {"ce-clustername": str("c1"), "clustername": str("other"), "ce-originalsource": str("hub")},
	} {
		for _, tc := range []struct {
			typ     string
			want    options.Route
			wantErr bool
		}{
			{typ: dt + ".spec.create_request", want: options.Route{Role: options.RoleSpec, Source: "ce-source", Cluster: "c1"}},
			{typ: dt + ".spec.resync_response", want: options.Route{Role: options.RoleSpec, Source: "ce-source", Cluster: "c1"}},
			{typ: dt + ".status.update_request", want: options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "c1"}},
			{typ: dt + ".status.resync_response", want: options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "c1"}},
			{typ: dt + ".spec.resync_request", want: options.Route{Role: options.RoleSpecResync, Cluster: "c1"}},
			{typ: dt + ".status.resync_request", want: options.Route{Role: options.RoleStatusResync, Source: "ce-source"}},
			{typ: "bogus", wantErr: true},
		} {
			got, err := protocol.DeriveRoute(&protocol.CloudEvent{Type: tc.typ, Source: "ce-source", Attributes: attrs})
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("%s, %s: %+v, %v; want %+v", name, tc.typ, got, err, tc.want)
			}
		}
	}
	bad := map[string]*protocol.CloudEventAttributeValue{"ce-clustername": {Attr: &protocol.CloudEventAttributeValue_CeInteger{CeInteger: 1}}}
	if _, err := protocol.DeriveRoute(&protocol.CloudEvent{Type: dt + ".spec.create_request", Attributes: bad}); err == nil {
		t.Error("an integer clustername was accepted")
	}
}

func specEvent() *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID("1")
	evt.SetSource("hub")
	evt.SetType(dt + ".spec.create_request")
	evt.SetTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	evt.SetSubject("works")
	evt.SetDataSchema("https://example.com/schema")
	evt.SetExtension(types.ExtClusterName, "cluster1")
	evt.SetExtension(types.ExtResourceVersion, int32(3))
	evt.SetExtension("flag", true)
	types.SetTimeExtension(&evt, types.ExtDeletionTimestamp, time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC))
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]int{"a": 1})
	return &evt
}

// Events are written as OCM's peers write and read them: the content type
// under "contenttype", everything else optional under "ce-<name>", the data
// as binary_data.
func TestToProtoWritesOCMsSpelling(t *testing.T) {
	t.Parallel()
	got, err := protocol.ToProto(specEvent())
	if err != nil {
		t.Fatal(err)
	}
	ts := func(h int) *protocol.CloudEventAttributeValue {
		return &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeTimestamp{CeTimestamp: timestamppb.New(time.Date(2026, 11, 25, h, 0, 0, 0, time.UTC))}}
	}
	want := &protocol.CloudEvent{
		Id: "1", Source: "hub", SpecVersion: "1.0", Type: dt + ".spec.create_request",
		Attributes: map[string]*protocol.CloudEventAttributeValue{
			"contenttype":          str("application/json"),
			"ce-time":              ts(12),
			"ce-subject":           str("works"),
			"ce-dataschema":        {Attr: &protocol.CloudEventAttributeValue_CeUri{CeUri: "https://example.com/schema"}},
			"ce-clustername":       str("cluster1"),
			"ce-resourceversion":   {Attr: &protocol.CloudEventAttributeValue_CeInteger{CeInteger: 3}},
			"ce-flag":              {Attr: &protocol.CloudEventAttributeValue_CeBoolean{CeBoolean: true}},
			"ce-deletiontimestamp": ts(13),
		},
		Data: &protocol.CloudEvent_BinaryData{BinaryData: []byte(`{"a":1}`)},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// Events are read in OCM's spelling and in the CloudEvents protobuf
// format's, and what is written reads back unchanged.
func TestFromProtoReadsBothSpellings(t *testing.T) {
	t.Parallel()
	in := specEvent()
	ocm, err := protocol.ToProto(in)
	if err != nil {
		t.Fatal(err)
	}
	bare := proto.Clone(ocm).(*protocol.CloudEvent)
	bare.Attributes = map[string]*protocol.CloudEventAttributeValue{}
	for k, v := range ocm.Attributes {
		k = strings.TrimPrefix(k, "ce-")
		if k == "contenttype" {
			k = "datacontenttype"
		}
		bare.Attributes[k] = v
	}
	bare.Data = &protocol.CloudEvent_TextData{TextData: `{"a":1}`}
	// Both spellings at once: OCM's is read, the other ignored.
	both := proto.Clone(ocm).(*protocol.CloudEvent)
	both.Attributes["clustername"] = str("ignored")
	both.Attributes["datacontenttype"] = str("text/ignored")
	for name, pbe := range map[string]*protocol.CloudEvent{"OCM's": ocm, "bare": bare, "both": both} {
		got, err := protocol.FromProto(pbe)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(in.String(), got.String()); diff != "" {
			t.Errorf("%s spelling (-want +got)\n%s", name, diff)
		}
	}

	for name, tc := range map[string]struct {
		mutate func(*protocol.CloudEvent)
		want   string
	}{
		"no specversion":  {func(e *protocol.CloudEvent) { e.SpecVersion = "" }, "no specversion"},
		"old specversion": {func(e *protocol.CloudEvent) { e.SpecVersion = "0.3" }, "specversion"},
		"no id":           {func(e *protocol.CloudEvent) { e.Id = "" }, "id"},
		"upper-case name": {func(e *protocol.CloudEvent) { e.Attributes["ce-ClusterName"] = str("x") }, "lower-case"},
		"invalid name":    {func(e *protocol.CloudEvent) { e.Attributes["ce-cluster_name"] = str("x") }, "cluster_name"},
		"id attribute":    {func(e *protocol.CloudEvent) { e.Attributes["ce-id"] = str("2") }, "own field"},
		"integer type": {func(e *protocol.CloudEvent) {
			e.Attributes["contenttype"] = &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeInteger{CeInteger: 1}}
		}, "want a string"},
		"relative schema": {func(e *protocol.CloudEvent) { e.Attributes["ce-dataschema"] = str("/rel") }, "not absolute"},
		"protobuf data":   {func(e *protocol.CloudEvent) { e.Data = &protocol.CloudEvent_ProtoData{ProtoData: &anypb.Any{}} }, "protobuf data"},
		"invalid time": {func(e *protocol.CloudEvent) {
			e.Attributes["ce-time"] = &protocol.CloudEventAttributeValue{Attr: &protocol.CloudEventAttributeValue_CeTimestamp{CeTimestamp: &timestamppb.Timestamp{Nanos: -1}}}
		}, "ce-time"},
	} {
		pbe := proto.Clone(ocm).(*protocol.CloudEvent)
		tc.mutate(pbe)
		if _, err := protocol.FromProto(pbe); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
	if _, err := protocol.FromProto(protocol.NewHeartbeat()); err == nil {
		t.Error("a heartbeat (no source) decoded as an event")
	}
}

// The messages are the CloudEvents protobuf format's, field for field, as
// OCM's are: what one side marshals the other unmarshals to the same
// event.
func TestMessagesAreTheCloudEventsProtobufFormat(t *testing.T) {
	t.Parallel()
	ours, err := protocol.ToProto(specEvent())
	if err != nil {
		t.Fatal(err)
	}
	wire, err := proto.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	var theirs pb.CloudEvent
	if err := proto.Unmarshal(wire, &theirs); err != nil {
		t.Fatal(err)
	}
	if theirs.GetId() != "1" || theirs.GetSource() != "hub" || theirs.GetSpecVersion() != "1.0" || theirs.GetType() != ours.GetType() ||
		string(theirs.GetBinaryData()) != `{"a":1}` || theirs.GetAttributes()["ce-clustername"].GetCeString() != "cluster1" ||
		theirs.GetAttributes()["ce-resourceversion"].GetCeInteger() != 3 || !theirs.GetAttributes()["ce-time"].GetCeTimestamp().AsTime().Equal(specEvent().Time()) {
		t.Errorf("the CloudEvents protobuf format reads %v", &theirs)
	}
	back, err := proto.Marshal(&theirs)
	if err != nil {
		t.Fatal(err)
	}
	var again protocol.CloudEvent
	if err := proto.Unmarshal(back, &again); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(ours, &again) {
		t.Errorf("a round trip through the format's message changed the event:\n%v\n%v", ours, &again)
	}
}
