package mqtt

import (
	"context"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
)

// A structured event is one JSON payload with no user properties, and it
// decodes to what was sent, as a binary one does.
func TestContentModes(t *testing.T) {
	evt := cloudevents.New()
	evt.SetID("e1")
	evt.SetSource("hub")
	evt.SetType("io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request")
	evt.SetExtension(types.ExtResourceID, "w1")
	evt.SetExtension(types.ExtResourceVersion, int32(7))
	evt.SetExtension(types.ExtClusterName, "c1")
	types.SetTimeExtension(&evt, types.ExtDeletionTimestamp, time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	if err := evt.SetData(cloudevents.ApplicationJSON, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode, contentType string
		userProperties    bool
	}{
		{mode: "", contentType: cloudevents.ApplicationJSON, userProperties: true},
		{mode: ContentModeBinary, contentType: cloudevents.ApplicationJSON, userProperties: true},
		{mode: ContentModeStructured, contentType: cloudevents.ApplicationCloudEventsJSON},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			tr, err := New(Config{BrokerHost: "127.0.0.1:1883", ContentMode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			pub, err := tr.encode(context.Background(), "t", &evt)
			if err != nil {
				t.Fatal(err)
			}
			if got := pub.Properties.ContentType; got != tc.contentType {
				t.Errorf("content type %q, want %q", got, tc.contentType)
			}
			if got := len(pub.Properties.User) > 0; got != tc.userProperties {
				t.Errorf("user properties: %v, want %v (%v)", got, tc.userProperties, pub.Properties.User)
			}
			got, err := decode(pub)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID() != evt.ID() || got.Type() != evt.Type() || got.Source() != evt.Source() || string(got.Data()) != string(evt.Data()) {
				t.Errorf("decoded %v, want %v", got, evt)
			}
			want, err := types.ParseHeader(&evt)
			if err != nil {
				t.Fatal(err)
			}
			if h, err := types.ParseHeader(got); err != nil || h != want {
				t.Errorf("decoded header %+v, %v; want %+v", h, err, want)
			}
		})
	}
}
