package options

import (
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

func TestBinaryAttributesRoundTrip(t *testing.T) {
	evt := cloudevents.New()
	evt.SetID("e1")
	evt.SetSource("hub1")
	evt.SetType("io.example.v1.things.spec.create_request")
	evt.SetSubject("s")
	evt.SetTime(time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC))
	evt.SetExtension("resourceversion", 7)
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]int{"n": 1})
	attrs, err := BinaryAttributes(&evt, "ce-", "content-type")
	if err != nil {
		t.Fatal(err)
	}
	if attrs["ce-resourceversion"] != "7" || attrs["content-type"] != "application/json" || attrs["ce-time"] != "2024-01-02T03:04:05.000006Z" {
		t.Errorf("attributes %v", attrs)
	}
	back, err := EventFromBinary(attrs, "ce-", "content-type", evt.Data())
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != "e1" || back.Subject() != "s" || !back.Time().Equal(evt.Time()) || back.Extensions()["resourceversion"] != "7" || string(back.Data()) != `{"n":1}` {
		t.Errorf("decoded %v", back)
	}
	for _, c := range []struct {
		attrs map[string]string
		want  string
	}{
		{map[string]string{"ce-id": "e1"}, "no ce-specversion attribute"},
		{map[string]string{"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "s", "ce-type": "t", "ce-time": "noon"}, "ce-time"},
		{map[string]string{"ce-specversion": "1.0", "ce-id": "e1", "ce-source": "s"}, "type"},
		// A version cloudevents knows no context of: refused, not a panic.
		{map[string]string{"ce-specversion": "2.0", "ce-id": "e1", "ce-source": "s", "ce-type": "t"}, `ce-specversion "2.0": want 1.0 or 0.3`},
	} {
		if _, err := EventFromBinary(c.attrs, "ce-", "content-type", nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.attrs, err, c.want)
		}
	}
}
