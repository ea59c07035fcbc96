package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// ContentStatusFeedbackName is the name of the JsonRaw status feedback value
// the manifests codec carries as a status event's contentStatus (the name
// feedback rule {"name": "status", "path": ".status"} gives the
// resource's whole status).
const ContentStatusFeedbackName = "status"

// ManifestCodec encodes and decodes ManifestWorks with exactly one manifest
// as manifests events (Manifest on spec events, ManifestStatus on status
// events). Works with several manifests, several manifest configs or an
// executor need ManifestBundleCodec; Encode says so. It is stateless and
// goroutine-safe; the zero value is ready to use.
type ManifestCodec struct{}

var _ generic.Codec[*workv1.ManifestWork] = (*ManifestCodec)(nil)

// NewManifestCodec returns a ManifestCodec. It has no options: the codec is
// stateless, and one value may serve any number of clients and goroutines.
func NewManifestCodec() *ManifestCodec { return &ManifestCodec{} }

// DataType returns ManifestsDataType (the plural form).
func (*ManifestCodec) DataType() types.DataType { return ManifestsDataType }

// Encode returns the event of type t for work, with source as its
// CloudEvents source. It sets the same attributes and extensions as
// ManifestBundleCodec.Encode. The data of a create_request or update_request
// is a Manifest built from the work's only manifest, its delete option and
// its manifest config (at most one); a delete_request carries no data. The
// data of a status event (update_request) is a ManifestStatus: the work's
// conditions, and its only manifest condition (at most one) with the JsonRaw
// feedback value named ContentStatusFeedbackName, if any, as contentStatus
// (and not again among the statusFeedback values).
//
// Errors are *Error values. Encode does not modify work, and is safe for
// concurrent use.
func (*ManifestCodec) Encode(source string, t types.EventType, work *workv1.ManifestWork) (*cloudevents.Event, error) {
	return manifestPayloads.encode(source, t, work)
}

// Decode returns the work evt carries, like ManifestBundleCodec.Decode. The
// spec gets the one manifest, its delete option and its config option. The
// status gets the reconcile conditions as the work's conditions, and one
// manifest condition from resourceMeta, conditions and statusFeedback; a
// contentStatus becomes the JsonRaw feedback value ContentStatusFeedbackName
// unless statusFeedback already has a value of that name.
//
// Decode never panics; every problem is an *Error that names the event and
// the field. The returned work shares nothing with evt. Decode is safe for
// concurrent use, also on the same event.
func (*ManifestCodec) Decode(h types.Header, evt *cloudevents.Event) (*workv1.ManifestWork, error) {
	return manifestPayloads.decode(h, evt)
}

var manifestPayloads = &payloads{
	dataType:     ManifestsDataType,
	encodeSpec:   encodeManifestSpec,
	encodeStatus: encodeManifestStatus,
	decodeSpec:   decodeManifestSpec,
	decodeStatus: decodeManifestStatus,
}

func encodeManifestStatus(work *workv1.ManifestWork) ([]byte, error) {
	s := &ManifestStatus{ReconcileStatus: ReconcileStatus{Conditions: work.Status.Conditions}}
	switch mcs := work.Status.ResourceStatus.Manifests; len(mcs) {
	case 0:
	case 1:
		mc := &mcs[0]
		s.ResourceMeta = mc.ResourceMeta
		s.Conditions = mc.Conditions
		s.StatusFeedback = mc.StatusFeedbacks
		if v := contentStatus(mc.StatusFeedbacks); v != nil {
			if !isJSONObject(*v) {
				return nil, atField(fmt.Sprintf("status.resourceStatus.manifests[0].statusFeedback %q", ContentStatusFeedbackName), errors.New("jsonRaw is not a JSON object"))
			}
			// Sent once, as contentStatus (docs/protocol.md); Decode turns
			// it back into the feedback value.
			s.ContentStatus = json.RawMessage(*v)
			s.StatusFeedback.Values = slices.DeleteFunc(slices.Clone(s.StatusFeedback.Values), func(v workv1.FeedbackValue) bool {
				return v.Name == ContentStatusFeedbackName
			})
			if len(s.StatusFeedback.Values) == 0 {
				s.StatusFeedback.Values = nil // no statusFeedback key
			}
		}
	default:
		return nil, atField("status.resourceStatus.manifests", fmt.Errorf("%d manifest conditions, but the manifests codec carries one: use manifestbundles", len(mcs)))
	}
	return marshalData(s)
}

// contentStatus returns the jsonRaw of the feedback value named
// ContentStatusFeedbackName, or nil.
func contentStatus(fb workv1.StatusFeedbackResult) *string {
	for i := range fb.Values {
		if v := &fb.Values[i]; v.Name == ContentStatusFeedbackName {
			if v.Value.Type == workv1.JsonRaw {
				return v.Value.JsonRaw
			}
			return nil
		}
	}
	return nil
}

func decodeManifestSpec(work *workv1.ManifestWork, data []byte) error {
	var m Manifest
	if err := unmarshal(data, &m, fastManifest); err != nil {
		return atField("data", jsonError(err))
	}
	if m.Manifest.Raw == nil {
		return atField("data.manifest", errors.New("missing"))
	}
	if !isJSONObject(m.Manifest.Raw) {
		return atField("data.manifest", fmt.Errorf("not a JSON object (got %s)", jsonKind(m.Manifest.Raw)))
	}
	work.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: m.Manifest}}
	work.Spec.DeleteOption = m.DeleteOption
	if m.ConfigOption != nil {
		work.Spec.ManifestConfigs = []workv1.ManifestConfigOption{*m.ConfigOption}
	}
	return nil
}

func decodeManifestStatus(work *workv1.ManifestWork, data []byte) error {
	var s ManifestStatus
	if err := unmarshal(data, &s, fastManifestStatus); err != nil {
		return atField("data", jsonError(err))
	}
	work.Status.Conditions = s.ReconcileStatus.Conditions
	mc := workv1.ManifestCondition{
		ResourceMeta:    s.ResourceMeta,
		StatusFeedbacks: s.StatusFeedback,
		Conditions:      s.Conditions,
	}
	if cs := bytes.TrimSpace(s.ContentStatus); len(cs) > 0 && string(cs) != "null" {
		if cs[0] != '{' {
			return atField("data.contentStatus", fmt.Errorf("not a JSON object (got %s)", jsonKind(cs)))
		}
		if !hasFeedbackValue(mc.StatusFeedbacks, ContentStatusFeedbackName) {
			var buf bytes.Buffer
			buf.Grow(len(cs))
			if err := json.Compact(&buf, cs); err != nil { // valid already; cannot fail
				return atField("data.contentStatus", err)
			}
			raw := buf.String()
			mc.StatusFeedbacks.Values = append(mc.StatusFeedbacks.Values, workv1.FeedbackValue{
				Name:  ContentStatusFeedbackName,
				Value: workv1.FieldValue{Type: workv1.JsonRaw, JsonRaw: &raw},
			})
		}
	}
	if mc.ResourceMeta != (workv1.ManifestResourceMeta{}) || len(mc.Conditions) > 0 || len(mc.StatusFeedbacks.Values) > 0 {
		work.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{mc}
	}
	return nil
}

func hasFeedbackValue(fb workv1.StatusFeedbackResult, name string) bool {
	for i := range fb.Values {
		if fb.Values[i].Name == name {
			return true
		}
	}
	return false
}
