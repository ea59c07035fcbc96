package pubsub

import (
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

func event() *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID("e1")
	evt.SetSource("hub1")
	evt.SetType("io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request")
	evt.SetTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	evt.SetExtension("clustername", "cluster1")
	evt.SetExtension("resourceversion", 3)
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"a": "b"})
	return &evt
}

// The binary content mode as OCM's Pub/Sub peers write it: "ce-"
// attributes, the content type in "Content-Type", the data as the body.
func TestBinaryMode(t *testing.T) {
	m, err := encode(event())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "hub1", "ce-time": "2024-01-02T03:04:05Z",
		"ce-type":        "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
		"ce-clustername": "cluster1", "ce-resourceversion": "3", "Content-Type": "application/json",
	}
	if len(m.Attributes) != len(want) {
		t.Errorf("attributes %v, want %v", m.Attributes, want)
	}
	for k, v := range want {
		if m.Attributes[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, m.Attributes[k], v)
		}
	}
	if string(m.Data) != `{"a":"b"}` {
		t.Errorf("data %s", m.Data)
	}
	back, err := decode(m.Attributes, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != "e1" || back.Extensions()["clustername"] != "cluster1" || string(back.Data()) != `{"a":"b"}` || !back.Time().Equal(event().Time()) {
		t.Errorf("decoded %v", back)
	}
}

// Past Pub/Sub's attribute limits the event goes structured, keeping the
// attributes subscriptions filter on.
func TestStructuredModeBeyondAttributeLimits(t *testing.T) {
	evt := event()
	evt.SetExtension("metadata", strings.Repeat("m", maxAttributeValue+1))
	evt.SetExtension("originalsource", "hub1")
	m, err := encode(evt)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attributes[contentType] != structuredPrefix || m.Attributes["ce-clustername"] != "cluster1" ||
		m.Attributes["ce-originalsource"] != "hub1" || len(m.Attributes) != 3 {
		t.Errorf("attributes %v", m.Attributes)
	}
	back, err := decode(m.Attributes, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Extensions()["metadata"] != evt.Extensions()["metadata"] || back.ID() != "e1" {
		t.Errorf("decoded %v", back)
	}
}

func TestDecodeRefusesWhatIsNotACloudEvent(t *testing.T) {
	for _, c := range []struct {
		attrs map[string]string
		want  string
	}{
		{map[string]string{"ce-clustername": "cluster1"}, "no ce-specversion attribute"},
		{map[string]string{"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "s"}, "type: MUST be a non-empty string"},
		{map[string]string{"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "s", "ce-type": "t", "ce-time": "yesterday"}, "ce-time"},
		{map[string]string{contentType: structuredPrefix}, "structured-mode event"},
	} {
		if _, err := decode(c.attrs, []byte("x")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.attrs, err, c.want)
		}
	}
}
