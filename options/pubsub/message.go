package pubsub

import (
	"fmt"
	"strings"

	"cloud.google.com/go/pubsub/v2"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/options"
)

// An event is a message in the binary content mode OCM's Pub/Sub peers
// read and write: each attribute and extension a "ce-" attribute,
// datacontenttype the "Content-Type" attribute, the data the message body.
// Pub/Sub limits attributes (at most 100, values of at most 1024 bytes);
// an event beyond them (a work whose metadata extension is long, say) goes
// in the structured mode instead, the whole event as JSON, with the
// attributes subscriptions filter on kept beside it.
const (
	attributePrefix  = "ce-"
	contentType      = "Content-Type"
	structuredPrefix = "application/cloudevents+json"

	maxAttributes     = 100
	maxAttributeValue = 1024
	maxAttributeKey   = 256
)

// filtered are the extensions subscriptions filter on: a cluster's spec
// subscription on clustername, a source's status subscription on
// originalsource.
var filtered = []string{"clustername", "originalsource"}

// encode returns evt as a message: binary mode when Pub/Sub's attribute
// limits allow, structured mode otherwise.
func encode(evt *cloudevents.Event) (*pubsub.Message, error) {
	attrs, err := options.BinaryAttributes(evt, attributePrefix, contentType)
	if err != nil {
		return nil, err
	}
	if fits(attrs) {
		return &pubsub.Message{Data: evt.Data(), Attributes: attrs}, nil
	}
	data, err := evt.MarshalJSON()
	if err != nil {
		return nil, err
	}
	structured := map[string]string{contentType: structuredPrefix}
	for _, name := range filtered {
		if v, ok := attrs[attributePrefix+name]; ok && len(v) <= maxAttributeValue {
			structured[attributePrefix+name] = v
		}
	}
	return &pubsub.Message{Data: data, Attributes: structured}, nil
}

// fits reports whether Pub/Sub takes attrs as they are.
func fits(attrs map[string]string) bool {
	if len(attrs) > maxAttributes {
		return false
	}
	for k, v := range attrs {
		if len(k) > maxAttributeKey || len(v) > maxAttributeValue {
			return false
		}
	}
	return true
}

// size is what a message counts against Config.MaxEventBytes: its data
// and its attributes.
func size(m *pubsub.Message) int {
	n := len(m.Data)
	for k, v := range m.Attributes {
		n += len(k) + len(v)
	}
	return n
}

// decode returns the event a message carries, in either content mode.
func decode(attrs map[string]string, data []byte) (*cloudevents.Event, error) {
	ct := attrs[contentType]
	if strings.HasPrefix(ct, structuredPrefix) {
		evt := cloudevents.New()
		if err := evt.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("structured-mode event: %w", err)
		}
		return &evt, nil
	}
	return options.EventFromBinary(attrs, attributePrefix, contentType, data)
}
