package nats

import (
	"errors"
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
	natsgo "github.com/nats-io/nats.go"
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
	h := natsgo.Header{
		headerPrefix + "specversion": {evt.SpecVersion()},
		headerPrefix + "id":          {evt.ID()},
		headerPrefix + "source":      {evt.Source()},
		headerPrefix + "type":        {evt.Type()},
	}
	if ct := evt.DataContentType(); ct != "" {
		h[contentType] = []string{ct}
	}
	if s := evt.Subject(); s != "" {
		h[headerPrefix+"subject"] = []string{s}
	}
	if s := evt.DataSchema(); s != "" {
		h[headerPrefix+"dataschema"] = []string{s}
	}
	if t := evt.Time(); !t.IsZero() {
		h[headerPrefix+"time"] = []string{cetypes.FormatTime(t)}
	}
	for name, v := range evt.Extensions() {
		s, err := cetypes.Format(v)
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", name, err)
		}
		h[headerPrefix+name] = []string{s}
	}
	return &natsgo.Msg{Subject: subject, Header: h, Data: evt.Data()}, nil
}

// decode returns the event a message carries, in either content mode.
func decode(h natsgo.Header, data []byte) (*cloudevents.Event, error) {
	ct := first(h, contentType)
	if strings.HasPrefix(ct, structuredPrefix) {
		evt := cloudevents.New()
		if err := evt.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("structured-mode event: %w", err)
		}
		return &evt, nil
	}
	if first(h, headerPrefix+"specversion") == "" {
		return nil, errors.New("not a CloudEvent: no ce-specversion header and no structured-mode content type")
	}
	evt := cloudevents.New(first(h, headerPrefix+"specversion"))
	for key, values := range h {
		name, ok := strings.CutPrefix(strings.ToLower(key), headerPrefix)
		if !ok || len(values) == 0 {
			continue
		}
		v := values[0]
		switch name {
		case "specversion":
		case "id":
			evt.SetID(v)
		case "source":
			evt.SetSource(v)
		case "type":
			evt.SetType(v)
		case "subject":
			evt.SetSubject(v)
		case "dataschema":
			evt.SetDataSchema(v)
		case "time":
			t, err := cetypes.ParseTime(v)
			if err != nil {
				return nil, fmt.Errorf("ce-time: %w", err)
			}
			evt.SetTime(t)
		default:
			evt.SetExtension(name, v)
		}
	}
	if ct != "" {
		evt.SetDataContentType(ct)
	}
	if len(data) > 0 {
		evt.DataEncoded = data
	}
	if err := evt.Validate(); err != nil {
		return nil, err
	}
	return &evt, nil
}

// first returns the first value of key, matched as written or in lower
// case (the binding's names are lower case; NATS keeps a header's case).
func first(h natsgo.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}
