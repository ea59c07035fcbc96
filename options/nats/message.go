package nats

import (
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	natsgo "github.com/nats-io/nats.go"

	"github.com/workwire/sdk-go/options"
)

// The CloudEvents NATS binding's binary content mode: each attribute and
// extension a "ce-" header, datacontenttype the content-type header, the
// data the message body. A structured-mode message (content-type
// application/cloudevents+json, the whole event as its body) is read too.
const (
	headerPrefix     = "ce-"
	contentType      = "content-type"
	structuredPrefix = "application/cloudevents+json"
)

// encode returns evt as a binary-mode message on subject.
func encode(subject string, evt *cloudevents.Event) (*natsgo.Msg, error) {
	attrs, err := options.BinaryAttributes(evt, headerPrefix, contentType)
	if err != nil {
		return nil, err
	}
	h := make(natsgo.Header, len(attrs))
	for k, v := range attrs {
		h[k] = []string{v}
	}
	return &natsgo.Msg{Subject: subject, Header: h, Data: evt.Data()}, nil
}

// decode returns the event a message carries, in either content mode.
func decode(h natsgo.Header, data []byte) (*cloudevents.Event, error) {
	attrs := make(map[string]string, len(h))
	for key, values := range h {
		if len(values) > 0 {
			// The binding's names are lower case; NATS keeps a header's case.
			attrs[strings.ToLower(key)] = values[0]
		}
	}
	if strings.HasPrefix(attrs[contentType], structuredPrefix) {
		evt := cloudevents.New()
		if err := evt.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("structured-mode event: %w", err)
		}
		return &evt, nil
	}
	return options.EventFromBinary(attrs, headerPrefix, contentType, data)
}
