package options

import (
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
)

// BinaryAttributes returns evt's attributes and extensions as a binary
// content mode carries them in a protocol's string headers: each under
// prefix + its name ("ce-id"), except datacontenttype, which goes under
// contentType. Transports whose protocol binding is this shape (NATS,
// Pub/Sub) share it.
func BinaryAttributes(evt *cloudevents.Event, prefix, contentType string) (map[string]string, error) {
	attrs := map[string]string{
		prefix + "specversion": evt.SpecVersion(),
		prefix + "id":          evt.ID(),
		prefix + "source":      evt.Source(),
		prefix + "type":        evt.Type(),
	}
	if ct := evt.DataContentType(); ct != "" {
		attrs[contentType] = ct
	}
	if s := evt.Subject(); s != "" {
		attrs[prefix+"subject"] = s
	}
	if s := evt.DataSchema(); s != "" {
		attrs[prefix+"dataschema"] = s
	}
	if t := evt.Time(); !t.IsZero() {
		attrs[prefix+"time"] = cetypes.FormatTime(t)
	}
	for name, v := range evt.Extensions() {
		s, err := cetypes.Format(v)
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", name, err)
		}
		attrs[prefix+name] = s
	}
	return attrs, nil
}

// EventFromBinary returns the event whose attributes BinaryAttributes
// wrote (keys in lower case) and whose data is data. It validates the
// event.
func EventFromBinary(attrs map[string]string, prefix, contentType string, data []byte) (*cloudevents.Event, error) {
	version := attrs[prefix+"specversion"]
	if version == "" {
		return nil, fmt.Errorf("not a CloudEvent: no %sspecversion attribute and no structured-mode content type", prefix)
	}
	if version != cloudevents.CloudEventsVersionV1 && version != cloudevents.CloudEventsVersionV03 {
		// cloudevents.New leaves an event of another version without a
		// context, which the setters below would dereference.
		return nil, fmt.Errorf("%sspecversion %q: want %s or %s", prefix, version, cloudevents.CloudEventsVersionV1, cloudevents.CloudEventsVersionV03)
	}
	evt := cloudevents.New(version)
	for key, v := range attrs {
		name, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
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
				return nil, fmt.Errorf("%stime: %w", prefix, err)
			}
			evt.SetTime(t)
		default:
			evt.SetExtension(name, v)
		}
	}
	if ct := attrs[contentType]; ct != "" {
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
