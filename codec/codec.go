package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// OriginalSourceAnnotation is the annotation in which Decode records the
// CloudEvents source of a spec event on the work it returns (agent side), and
// from which Encode takes the originalsource extension of a status event, so
// the status goes back to the source the work came from.
const OriginalSourceAnnotation = "workwire.io/original-source"

// WorkDeleted is the condition type an agent reports in a work's status once
// it has removed the work's resources from its cluster (docs/protocol.md,
// "Deletion"). A source forgets a work it is deleting only when it sees
// this condition.
const WorkDeleted = "Deleted"

// Data types of the two ManifestWork codecs, in the plural form encoders
// emit. Decoders also accept their Singular() forms, which some peers
// send. Treat them as constants.
var (
	// ManifestBundlesDataType is "io.open-cluster-management.works.v1alpha1.manifestbundles":
	// a whole ManifestWork per event.
	ManifestBundlesDataType = types.DataType{Group: workGroup, Version: workVersion, Resource: "manifestbundles"}
	// ManifestsDataType is "io.open-cluster-management.works.v1alpha1.manifests":
	// a ManifestWork with exactly one manifest per event.
	ManifestsDataType = types.DataType{Group: workGroup, Version: workVersion, Resource: "manifests"}
)

const (
	workGroup   = "io.open-cluster-management.works"
	workVersion = "v1alpha1"
	workKind    = "ManifestWork"
)

// workAPIVersion is "work.open-cluster-management.io/v1".
var workAPIVersion = workv1.GroupVersion.String()

// StatusHash returns the hash of work's status that status resync compares:
// generic.StatusHash of work.Status, or "" for a work no agent has reported
// on yet (no conditions, no manifest conditions), which generic.NoStatus
// tells a source to ask every status for. It is a generic.StatusHashGetter
// for ManifestWork, goroutine-safe, and returns an error for a nil work.
func StatusHash(work *workv1.ManifestWork) (string, error) {
	if work == nil {
		return "", errors.New("status hash: work is nil")
	}
	if len(work.Status.Conditions) == 0 && len(work.Status.ResourceStatus.Manifests) == 0 {
		return generic.NoStatus, nil
	}
	return generic.StatusHash(work.Status)
}

var _ generic.StatusHashGetter[*workv1.ManifestWork] = StatusHash

// StatusHashes returns the status hash of every work, for a status resync
// request, or nil — ask for every status — when no work has a status yet.
func StatusHashes(works []*workv1.ManifestWork) ([]types.StatusHash, error) {
	hashes := make([]types.StatusHash, 0, len(works))
	reported := false
	for _, w := range works {
		h, err := StatusHash(w)
		if err != nil {
			return nil, err
		}
		reported = reported || h != generic.NoStatus
		hashes = append(hashes, types.StatusHash{ResourceID: string(w.UID), StatusHash: h})
	}
	if !reported {
		return nil, nil
	}
	return hashes, nil
}

// SpecEventType is the type of the manifestbundles spec event that tells
// an agent of w as it is: a create_request at generation 1, a
// delete_request once it is being deleted, else an update_request.
func SpecEventType(w *workv1.ManifestWork) types.EventType {
	action := types.UpdateRequest
	switch {
	case w.DeletionTimestamp != nil:
		action = types.DeleteRequest
	case w.Generation <= 1:
		action = types.CreateRequest
	}
	return types.EventType{DataType: ManifestBundlesDataType, SubResource: types.SubResourceSpec, Action: action}
}

// payloads is what tells the two codecs apart: how each builds and reads the
// data of spec and status events. The shared code around it handles the
// event type, the attributes and the extensions.
type payloads struct {
	dataType types.DataType
	// encodeSpec and encodeStatus return the data.
	encodeSpec   func(work *workv1.ManifestWork) ([]byte, error)
	encodeStatus func(work *workv1.ManifestWork) ([]byte, error)
	// decodeSpec and decodeStatus fill work from data.
	decodeSpec   func(work *workv1.ManifestWork, data []byte) error
	decodeStatus func(work *workv1.ManifestWork, data []byte) error
}

// fieldError places a cause at a field; newError moves it into Error.Field.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func atField(field string, err error) error { return &fieldError{field: field, err: err} }

func newError(op, eventType, eventID, work string, err error) *Error {
	e := &Error{Op: op, EventType: eventType, EventID: eventID, Work: work, Err: err}
	var fe *fieldError
	if errors.As(err, &fe) {
		e.Field, e.Err = fe.field, fe.err
	}
	return e
}

// checkType reports whether t is an event type of data type dt (plural or
// singular) that a codec handles: spec or status, but not resync_request
// (resync_response, OCM peers' answer to a resync, is decoded only).
func checkType(dt types.DataType, t types.EventType) error {
	if t.DataType != dt && t.DataType != dt.Singular() {
		return fmt.Errorf("%w: data type %q, want %q (or %q)", ErrUnsupportedType, t.DataType, dt, dt.Singular())
	}
	switch t.SubResource {
	case types.SubResourceSpec, types.SubResourceStatus:
	default:
		return fmt.Errorf("%w: subresource %q, want spec or status", ErrUnsupportedType, t.SubResource)
	}
	switch t.Action {
	case types.CreateRequest, types.UpdateRequest, types.DeleteRequest, types.ResyncResponse:
	case types.ResyncRequest:
		return fmt.Errorf("%w: %s carries a resync payload, not a work (the clients handle it)", ErrUnsupportedType, t.Action)
	default:
		return fmt.Errorf("%w: action %q, want create_request, update_request or delete_request", ErrUnsupportedType, t.Action)
	}
	return nil
}

func workName(w *workv1.ManifestWork) string {
	if w == nil {
		return ""
	}
	if w.Namespace == "" {
		return w.Name
	}
	return w.Namespace + "/" + w.Name
}

// wireMeta is the part of a work's ObjectMeta the metadata extension
// carries (status events leave labels and annotations out). Its JSON field names are ObjectMeta's, so peers may decode it as
// an ObjectMeta; unknown fields a peer sends are skipped on decode.
type wireMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               kubetypes.UID     `json:"uid,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp metav1.Time       `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
}

// encode builds the event of type t for work; p supplies the data.
func (p *payloads) encode(source string, t types.EventType, work *workv1.ManifestWork) (*cloudevents.Event, error) {
	evt, err := p.encodeEvent(source, t, work)
	if err != nil {
		return nil, newError("encode", t.String(), "", workName(work), err)
	}
	return evt, nil
}

func (p *payloads) encodeEvent(source string, t types.EventType, work *workv1.ManifestWork) (*cloudevents.Event, error) {
	if work == nil {
		return nil, errors.New("work is nil")
	}
	evt, err := newEvent(p.dataType, source, t, work)
	if err != nil {
		return nil, err
	}

	// The metadata extension: on spec events what the agent must see of the
	// work's ObjectMeta; on status events the work's name (OCM sources log
	// and index statuses by it), without the labels and annotations, which
	// are the source's own.
	meta := wireMeta{
		Name:              work.Name,
		Namespace:         work.Namespace,
		UID:               work.UID,
		Generation:        work.Generation,
		CreationTimestamp: work.CreationTimestamp,
		DeletionTimestamp: work.DeletionTimestamp,
	}
	if t.SubResource == types.SubResourceSpec {
		meta.Labels, meta.Annotations = work.Labels, work.Annotations
	}
	metaJSON, err := json.Marshal(&meta)
	if err != nil {
		return nil, atField("metadata", err)
	}
	evt.SetExtension(types.ExtMetadata, string(metaJSON))

	var data []byte
	switch {
	case t.SubResource == types.SubResourceStatus:
		data, err = p.encodeStatus(work)
	case t.Action == types.DeleteRequest:
		return evt, nil // delete_requests carry no data
	default:
		data, err = p.encodeSpec(work)
	}
	if err != nil {
		return nil, err
	}
	evt.DataEncoded = data
	return evt, nil
}

// decode returns the work evt carries; p reads the data.
func (p *payloads) decode(h types.Header, evt *cloudevents.Event) (*workv1.ManifestWork, error) {
	if evt == nil {
		return nil, newError("decode", "", "", "", errors.New("event is nil"))
	}
	switch c := evt.Context.(type) {
	case nil:
		return nil, newError("decode", "", "", "", errors.New("event has no context"))
	case *cloudevents.EventContextV1:
		if c == nil {
			return nil, newError("decode", "", "", "", errors.New("event has no context"))
		}
	case *cloudevents.EventContextV03:
		if c == nil {
			return nil, newError("decode", "", "", "", errors.New("event has no context"))
		}
	}
	work, err := p.decodeEvent(h, evt)
	if err != nil {
		return nil, newError("decode", evt.Type(), evt.ID(), "", err)
	}
	return work, nil
}

func (p *payloads) decodeEvent(h types.Header, evt *cloudevents.Event) (*workv1.ManifestWork, error) {
	t, id, cluster, err := identity(h, evt, p.dataType)
	if err != nil {
		return nil, err
	}
	work := &workv1.ManifestWork{
		TypeMeta:   metav1.TypeMeta{Kind: workKind, APIVersion: workAPIVersion},
		ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID(id), Namespace: cluster},
	}
	data := bytes.TrimSpace(evt.Data())
	if string(data) == "null" {
		data = nil
	}

	if t.SubResource == types.SubResourceStatus {
		version := h.Version
		if version < 0 {
			return nil, atField("extension \"resourceversion\"", fmt.Errorf("%d is negative", version))
		}
		work.Generation = version
		if len(data) == 0 {
			return nil, atField("data", errors.New("missing (a status event carries the work's status)"))
		}
		if err := p.decodeStatus(work, data); err != nil {
			return nil, err
		}
		return work, nil
	}

	// Spec event, on an agent.
	if !h.HasVersion {
		return nil, types.Missing(evt, types.ExtResourceVersion)
	}
	version := h.Version
	if version < 0 {
		return nil, atField("extension \"resourceversion\"", fmt.Errorf("%d is negative", version))
	}
	source := evt.Source()
	if source == "" {
		return nil, atField("source", errors.New("empty (it is recorded as the work's original source)"))
	}
	if err := decodeMeta(evt, work); err != nil {
		return nil, err
	}
	// The extensions are the truth; the metadata only fills in.
	work.UID = kubetypes.UID(id)
	work.Generation = version
	work.ResourceVersion = strconv.FormatInt(version, 10)
	if cluster != "" {
		work.Namespace = cluster
	}
	if work.Name == "" {
		work.Name = id
	}
	work.Annotations = withSource(work.Annotations, source)
	work.DeletionTimestamp = deletionTimestamp(h, evt, work.DeletionTimestamp)

	if len(data) == 0 {
		// A work being deleted needs no manifests: delete_requests and OCM
		// sources' answers for deleting works carry none.
		if work.DeletionTimestamp == nil {
			return nil, atField("data", fmt.Errorf("missing (a %s carries the work's manifests)", t.Action))
		}
		return work, nil
	}
	if err := p.decodeSpec(work, data); err != nil {
		return nil, err
	}
	return work, nil
}

// decodeMeta fills work's metadata from the optional metadata extension.
func decodeMeta(evt *cloudevents.Event, work *workv1.ManifestWork) error {
	raw, ok, err := types.StringExtension(evt, types.ExtMetadata)
	if err != nil || !ok || raw == "" {
		return err
	}
	var m wireMeta
	if err := unmarshal([]byte(raw), &m, fastWireMeta); err != nil {
		return atField("extension \"metadata\"", jsonError(err))
	}
	work.Name = m.Name
	work.Namespace = m.Namespace
	work.CreationTimestamp = m.CreationTimestamp
	work.DeletionTimestamp = m.DeletionTimestamp
	work.Labels = m.Labels
	work.Annotations = m.Annotations
	return nil
}

// marshalData marshals a status payload, the one json.Marshal of the event.
func marshalData(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, atField("data", err)
	}
	return data, nil
}

// jsonKind names the kind of JSON value raw starts with, for errors.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "null" // what a RawExtension holds after decoding null
	}
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	default:
		return "invalid JSON"
	}
}
