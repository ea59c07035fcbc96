package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// HeartbeatType is the type of the heartbeat events a broker sends down a
// Subscribe stream every interval (OCM's name for them). A heartbeat
// carries nothing else; clients never deliver it.
const HeartbeatType = "io.open-cluster-management.cloudevents.heartbeat"

// Attribute keys as OCM's peers write them: the content type under
// contentTypeKey, every other optional attribute and extension under
// attrPrefix and its name.
const (
	attrPrefix     = "ce-"
	contentTypeKey = "contenttype"
)

// NewHeartbeat returns a heartbeat event.
func NewHeartbeat() *CloudEvent {
	return &CloudEvent{Id: uuid.NewString(), SpecVersion: "1.0", Type: HeartbeatType}
}

// ToProto returns evt as OCM's peers write it: the content type under
// "contenttype", every other optional attribute and every extension under
// "ce-<name>", and the data as binary_data. It fails on an extension value
// of a type CloudEvents does not allow.
func ToProto(evt *cloudevents.Event) (*CloudEvent, error) {
	pbe := &CloudEvent{
		Id:          evt.ID(),
		Source:      evt.Source(),
		SpecVersion: evt.SpecVersion(),
		Type:        evt.Type(),
	}
	var exts map[string]any
	switch c := evt.Context.(type) {
	case *cloudevents.EventContextV1:
		exts = c.Extensions // read in place: Extensions() copies the map
	case nil:
		return nil, errors.New("event has no context")
	default:
		exts = evt.Extensions()
	}
	pbe.Attributes = make(map[string]*CloudEventAttributeValue, len(exts)+3)
	if ct := evt.DataContentType(); ct != "" {
		pbe.Attributes[contentTypeKey] = stringValue(ct)
	}
	if t := evt.Time(); !t.IsZero() {
		pbe.Attributes[attrPrefix+"time"] = &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeTimestamp{CeTimestamp: timestamppb.New(t)}}
	}
	if s := evt.DataSchema(); s != "" {
		pbe.Attributes[attrPrefix+"dataschema"] = &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeUri{CeUri: s}}
	}
	if s := evt.Subject(); s != "" {
		pbe.Attributes[attrPrefix+"subject"] = stringValue(s)
	}
	for name, v := range exts {
		av, err := attributeValue(v)
		if err != nil {
			return nil, fmt.Errorf("event %q: extension %s: %w", evt.ID(), name, err)
		}
		pbe.Attributes[attrPrefix+name] = av
	}
	if data := evt.Data(); len(data) > 0 {
		pbe.Data = &CloudEvent_BinaryData{BinaryData: data}
	}
	return pbe, nil
}

func stringValue(s string) *CloudEventAttributeValue {
	return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeString{CeString: s}}
}

func attributeValue(v any) (*CloudEventAttributeValue, error) {
	switch v := v.(type) {
	case string:
		return stringValue(v), nil
	case int32:
		return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeInteger{CeInteger: v}}, nil
	case bool:
		return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeBoolean{CeBoolean: v}}, nil
	case []byte:
		return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeBytes{CeBytes: v}}, nil
	case cetypes.URI:
		return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeUri{CeUri: v.String()}}, nil
	case cetypes.URIRef:
		return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeUriRef{CeUriRef: v.String()}}, nil
	case cetypes.Timestamp:
		return &CloudEventAttributeValue{Attr: &CloudEventAttributeValue_CeTimestamp{CeTimestamp: timestamppb.New(v.Time)}}, nil
	default:
		return nil, fmt.Errorf("a value of type %T is not a CloudEvents attribute value", v)
	}
}

// FromProto returns the event pbe carries. It reads attributes under OCM's
// keys ("ce-<name>", "contenttype") and under the CloudEvents protobuf
// format's bare names; where an attribute comes under both, OCM's wins.
// Data comes from binary_data or text_data. It fails on what is not a
// valid CloudEvent: a missing required attribute, an attribute of the
// wrong type, an invalid or upper-case name, or proto_data.
func FromProto(pbe *CloudEvent) (*cloudevents.Event, error) {
	if pbe == nil {
		return nil, errors.New("no event")
	}
	switch pbe.GetSpecVersion() {
	case cloudevents.CloudEventsVersionV1:
	case "":
		return nil, fmt.Errorf("event %q: no specversion", pbe.GetId())
	default:
		return nil, fmt.Errorf("event %q: specversion %q, want %s", pbe.GetId(), pbe.GetSpecVersion(), cloudevents.CloudEventsVersionV1)
	}
	evt := cloudevents.New()
	ctx := evt.Context.(*cloudevents.EventContextV1)
	ctx.ID, ctx.Type = pbe.GetId(), pbe.GetType()
	if s := pbe.GetSource(); s != "" {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("event %q: source: %w", pbe.GetId(), err)
		}
		ctx.Source = cetypes.URIRef{URL: *u}
	}
	for key, v := range pbe.GetAttributes() {
		name := strings.TrimPrefix(key, attrPrefix)
		if key == contentTypeKey {
			name = "datacontenttype"
		}
		if !preferred(pbe.Attributes, key, name) {
			continue
		}
		if err := setAttribute(ctx, name, v); err != nil {
			return nil, fmt.Errorf("event %q: attribute %s: %w", pbe.GetId(), key, err)
		}
	}
	switch d := pbe.GetData().(type) {
	case *CloudEvent_BinaryData:
		evt.DataEncoded = d.BinaryData
	case *CloudEvent_TextData:
		evt.DataEncoded = []byte(d.TextData)
	case *CloudEvent_ProtoData:
		return nil, fmt.Errorf("event %q: protobuf data is not supported", pbe.GetId())
	}
	if err := evt.Validate(); err != nil {
		return nil, fmt.Errorf("event %q: %w", pbe.GetId(), err)
	}
	return &evt, nil
}

// preferred reports whether key is the spelling of attribute name to read:
// OCM's key for it ("contenttype", "ce-<name>") if present, else
// "ce-<name>", else the bare name. Reading one spelling per attribute keeps
// the outcome independent of the map's order.
func preferred(attrs map[string]*CloudEventAttributeValue, key, name string) bool {
	for _, k := range [...]string{ocmKey(name), attrPrefix + name, name} {
		if _, ok := attrs[k]; ok {
			return k == key
		}
	}
	return false
}

// ocmKey is the key OCM's peers write attribute name under.
func ocmKey(name string) string {
	if name == "datacontenttype" {
		return contentTypeKey
	}
	return attrPrefix + name
}

// setAttribute sets the optional attribute or extension name.
func setAttribute(ctx *cloudevents.EventContextV1, name string, v *CloudEventAttributeValue) error {
	val, err := attributeFromProto(v)
	if err != nil || val == nil {
		return err
	}
	if strings.ToLower(name) != name {
		return errors.New("attribute names are lower-case")
	}
	switch name {
	case "id", "source", "specversion", "type":
		return errors.New("a required attribute belongs in its own field")
	case "datacontenttype":
		s, ok := val.(string)
		if !ok {
			return fmt.Errorf("want a string, got %T", val)
		}
		ctx.DataContentType = &s
	case "dataschema":
		u, err := cetypes.ToURL(val)
		if err != nil {
			return err
		}
		if !u.IsAbs() {
			return fmt.Errorf("URI %q is not absolute", u)
		}
		ctx.DataSchema = &cetypes.URI{URL: *u}
	case "subject":
		s, ok := val.(string)
		if !ok {
			return fmt.Errorf("want a string, got %T", val)
		}
		ctx.Subject = &s
	case "time":
		t, err := cetypes.ToTime(val)
		if err != nil {
			return err
		}
		ctx.Time = &cetypes.Timestamp{Time: t}
	default:
		return ctx.SetExtension(name, val)
	}
	return nil
}

func attributeFromProto(v *CloudEventAttributeValue) (any, error) {
	switch a := v.GetAttr().(type) {
	case nil:
		return nil, nil
	case *CloudEventAttributeValue_CeString:
		return a.CeString, nil
	case *CloudEventAttributeValue_CeInteger:
		return a.CeInteger, nil
	case *CloudEventAttributeValue_CeBoolean:
		return a.CeBoolean, nil
	case *CloudEventAttributeValue_CeBytes:
		return a.CeBytes, nil
	case *CloudEventAttributeValue_CeUri:
		u, err := url.Parse(a.CeUri)
		if err != nil {
			return nil, err
		}
		if !u.IsAbs() {
			return nil, fmt.Errorf("URI %q is not absolute", a.CeUri)
		}
		return cetypes.URI{URL: *u}, nil
	case *CloudEventAttributeValue_CeUriRef:
		u, err := url.Parse(a.CeUriRef)
		if err != nil {
			return nil, err
		}
		return cetypes.URIRef{URL: *u}, nil
	case *CloudEventAttributeValue_CeTimestamp:
		if err := a.CeTimestamp.CheckValid(); err != nil {
			return nil, err
		}
		return cetypes.Timestamp{Time: a.CeTimestamp.AsTime().In(time.UTC)}, nil
	default:
		return nil, fmt.Errorf("unknown value kind %T", a)
	}
}
