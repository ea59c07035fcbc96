package eventline

import (
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	event := func(exts map[string]any, data string) *cloudevents.Event {
		evt := cloudevents.New()
		evt.SetID("1")
		evt.SetSource("hub1")
		evt.SetType("io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request")
		evt.SetTime(at)
		for k, v := range exts {
			evt.SetExtension(k, v)
		}
		if data != "" {
			if err := evt.SetData(cloudevents.ApplicationJSON, []byte(data)); err != nil {
				t.Fatal(err)
			}
		}
		return &evt
	}
	const typ = "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request"
	for _, tc := range []struct {
		name string
		evt  *cloudevents.Event
		want string
	}{
		{"every field", event(map[string]any{"clustername": "cluster1", "resourceid": "uid-1", "resourceversion": 3, "sequenceid": "1869873215830069248"}, `{"a":1}`),
			"2026-01-02T02:04:05.678Z " + typ + " cluster=cluster1 resource=uid-1 version=3 sequence=1869873215830069248 size=7 source=hub1"},
		{"none of the extensions", event(nil, ""),
			"2026-01-02T02:04:05.678Z " + typ + " cluster=- resource=- version=- sequence=- size=0 source=hub1"},
		{"values that are not one word", event(map[string]any{"clustername": "", "resourceid": "a b", "resourceversion": "x=1"}, ""),
			"2026-01-02T02:04:05.678Z " + typ + ` cluster="" resource="a b" version="x=1" sequence=- size=0 source=hub1`},
		{"no time", func() *cloudevents.Event { e := event(nil, ""); e.SetTime(time.Time{}); return e }(),
			"- " + typ + " cluster=- resource=- version=- sequence=- size=0 source=hub1"},
		{"no event", nil, "- (no event)"},
		{"no context", &cloudevents.Event{}, "- (no event)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(tc.evt); got != tc.want {
				t.Errorf("Format:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
