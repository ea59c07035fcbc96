package mqtt

import (
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// FuzzDecode feeds the receive path what a broker may deliver: any payload,
// content type and user properties. It must return an event or an error,
// never panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"s","type":"a.v1.b.spec.create_request"}`), "application/cloudevents+json", "", "")
	f.Add([]byte(`{"a":1}`), "application/json", "ce-specversion", "1.0")
	f.Add([]byte{}, "", "ce-specversion", "0.3")
	f.Add([]byte("x"), "application/cloudevents-batch+json", "ce-type", "")
	f.Fuzz(func(t *testing.T, payload []byte, contentType, key, value string) {
		p := &paho.Publish{Topic: "sources/a/clusters/b/spec", Payload: payload, Properties: &paho.PublishProperties{ContentType: contentType}}
		if key != "" {
			p.Properties.User = paho.UserProperties{{Key: key, Value: value}, {Key: "ce-specversion", Value: "1.0"}, {Key: "ce-id", Value: value}}
		}
		evt, err := decode(p)
		if err == nil && evt.Validate() != nil {
			t.Fatalf("decode returned an invalid event: %v", evt.Validate())
		}
	})
}

// FuzzConfig feeds config loading any bytes: it must return a config or
// an error, never panic, and Validate must hold for what it accepts.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("brokerHost: 127.0.0.1:1883\nqos: 1\nlayout: ocm\n"))
	f.Add([]byte(`{"brokerHost":"h:1","topics":{"spec":"a/{source}/{cluster}","status":"b/{source}/{cluster}","specResync":"c/{cluster}","statusResync":"d/{source}"}}`))
	f.Add([]byte("keepAlive: 30s\nwill:\n  topic: x\n"))
	f.Add([]byte("brokerHost: 127.0.0.1:1883\npubQoS: 1\nsubQoS: 1\ntopics:\n  sourceEvents: $share/g/sources/hub1/clusters/+/sourceevents\n  agentEvents: sources/hub1/clusters/+/agentevents\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig(data)
		if err != nil {
			return
		}
		if _, err := New(c); err != nil {
			t.Fatalf("a valid config did not make a transport: %v", err)
		}
	})
}
