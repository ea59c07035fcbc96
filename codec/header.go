package codec

import (
	"errors"
	"fmt"
	"math"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/generic/types"
)

// newEvent checks what every codec checks before it encodes obj as an
// event of type t, and returns the event without its data: its attributes,
// and the extensions resourceid, resourceversion and clustername, on a
// spec deletiontimestamp, on a status originalsource (from
// OriginalSourceAnnotation). obj must not be nil.
func newEvent(dt types.DataType, source string, t types.EventType, obj metav1.Object) (*cloudevents.Event, error) {
	if err := checkType(dt, t); err != nil {
		return nil, err
	}
	if t.SubResource == types.SubResourceStatus && t.Action != types.UpdateRequest {
		return nil, fmt.Errorf("%w: status events are %s, not %s", ErrUnsupportedType, types.UpdateRequest, t.Action)
	}
	if t.Action == types.ResyncResponse {
		return nil, fmt.Errorf("%w: %s is decoded from OCM peers, never sent (answers are create, update and delete requests)", ErrUnsupportedType, t.Action)
	}
	if source == "" {
		return nil, errors.New("source is empty")
	}
	if obj.GetUID() == "" {
		return nil, atField("metadata.uid", errors.New("empty (it is the resourceid extension)"))
	}
	if obj.GetNamespace() == "" {
		return nil, atField("metadata.namespace", errors.New("empty (it is the clustername extension)"))
	}
	if g := obj.GetGeneration(); g < 0 || g > math.MaxInt32 {
		return nil, atField("metadata.generation", fmt.Errorf("%d does not fit the resourceversion extension (CloudEvents integers are 32 bits)", g))
	}

	t.DataType = dt // always emit the plural
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetSource(source)
	evt.SetType(t.String())
	evt.SetTime(time.Now())
	evt.SetDataContentType(cloudevents.ApplicationJSON)
	evt.SetExtension(types.ExtResourceID, string(obj.GetUID()))
	if err := types.SetInt32Extension(&evt, types.ExtResourceVersion, obj.GetGeneration()); err != nil {
		return nil, err
	}
	evt.SetExtension(types.ExtClusterName, obj.GetNamespace())
	switch t.SubResource {
	case types.SubResourceSpec:
		switch ts := obj.GetDeletionTimestamp(); {
		case ts != nil:
			types.SetTimeExtension(&evt, types.ExtDeletionTimestamp, ts.Time)
		case t.Action == types.DeleteRequest:
			// A delete_request always says when (docs/protocol.md, "Deletion").
			types.SetTimeExtension(&evt, types.ExtDeletionTimestamp, time.Now())
		}
	case types.SubResourceStatus:
		src := obj.GetAnnotations()[OriginalSourceAnnotation]
		if src == "" {
			return nil, ErrNoOriginalSource
		}
		evt.SetExtension(types.ExtOriginalSource, src)
	}
	return &evt, nil
}

// identity checks that h, evt's header, is of an event type of data type
// dt that a codec decodes and that it names its resource, and returns its
// type, resource ID and cluster ("" if it names none).
func identity(h types.Header, evt *cloudevents.Event, dt types.DataType) (t types.EventType, id, cluster string, err error) {
	if err := checkType(dt, h.Type); err != nil {
		return types.EventType{}, "", "", err
	}
	if h.ResourceID == "" {
		return types.EventType{}, "", "", types.Missing(evt, types.ExtResourceID)
	}
	return h.Type, h.ResourceID, h.ClusterName, nil
}

// deletionTimestamp is when a spec event says its resource was deleted: the
// deletiontimestamp extension; else cur, what the payload said; else, for a
// delete_request, the event's time (or now); else nil.
func deletionTimestamp(h types.Header, evt *cloudevents.Event, cur *metav1.Time) *metav1.Time {
	switch {
	case h.HasDeletion:
		return &metav1.Time{Time: h.Deletion}
	case cur == nil && h.Type.Action == types.DeleteRequest:
		at := evt.Time()
		if at.IsZero() {
			at = time.Now()
		}
		return &metav1.Time{Time: at.UTC()}
	}
	return cur
}

// withSource returns annotations with OriginalSourceAnnotation set to
// source: Decode of a spec records where it came from.
func withSource(annotations map[string]string, source string) map[string]string {
	if annotations == nil {
		annotations = make(map[string]string, 1)
	}
	annotations[OriginalSourceAnnotation] = source
	return annotations
}
