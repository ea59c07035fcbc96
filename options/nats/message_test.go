package nats

import (
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	natsgo "github.com/nats-io/nats.go"
)

func testEvent() *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID("e1")
	evt.SetSource("hub1")
	evt.SetType("io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request")
	evt.SetExtension("resourceversion", int32(3))
	evt.SetExtension("clustername", "cluster1")
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"a": "b"})
	return &evt
}

func TestBinaryModeRoundTrip(t *testing.T) {
	want := testEvent()
	msg, err := encode("s", want)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get("ce-clustername"); got != "cluster1" {
		t.Errorf("ce-clustername header %q", got)
	}
	if got := msg.Header.Get("content-type"); got != cloudevents.ApplicationJSON {
		t.Errorf("content-type header %q", got)
	}
	got, err := decode(msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != want.ID() || got.Type() != want.Type() || string(got.Data()) != string(want.Data()) ||
		got.Extensions()["resourceversion"] != "3" || got.Extensions()["clustername"] != "cluster1" {
		t.Errorf("decoded %v, want %v", got, want)
	}
}

func TestStructuredModeIsRead(t *testing.T) {
	body, err := testEvent().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(natsgo.Header{"Content-Type": {"application/cloudevents+json; charset=utf-8"}}, body)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != "e1" || got.Extensions()["clustername"] != "cluster1" {
		t.Errorf("decoded %v", got)
	}
}

func TestNotACloudEvent(t *testing.T) {
	for name, c := range map[string]struct {
		h    natsgo.Header
		want string
	}{
		"no headers":       {nil, "no ce-specversion"},
		"no id":            {natsgo.Header{"ce-specversion": {"1.0"}, "ce-source": {"s"}, "ce-type": {"t"}}, "id"},
		"bad time":         {natsgo.Header{"ce-specversion": {"1.0"}, "ce-id": {"i"}, "ce-source": {"s"}, "ce-type": {"t"}, "ce-time": {"yesterday"}}, "ce-time"},
		"broken structure": {natsgo.Header{"content-type": {"application/cloudevents+json"}}, "structured-mode"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decode(c.h, []byte("{"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decode: %v, want an error saying %q", err, c.want)
			}
		})
	}
}
