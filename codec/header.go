package codec

import (
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/generic/types"
)

// header is what every codec reads first of an event: its type, checked
// against the codec's data type, and the identity extensions.
type header struct {
	t       types.EventType
	id      string // resourceid
	cluster string // clustername, "" if absent
}

func readHeader(evt *cloudevents.Event, dt types.DataType) (header, error) {
	t, err := types.ParseEventType(evt.Type())
	if err != nil {
		return header{}, err
	}
	if err := checkType(dt, t); err != nil {
		return header{}, err
	}
	id, err := types.RequiredString(evt, types.ExtResourceID)
	if err != nil {
		return header{}, err
	}
	cluster, _, err := types.StringExtension(evt, types.ExtClusterName)
	if err != nil {
		return header{}, err
	}
	return header{t: t, id: id, cluster: cluster}, nil
}

// deletionTimestamp is when a spec event says its resource was deleted: the
// deletiontimestamp extension; else cur, what the payload said; else, for a
// delete_request, the event's time (or now); else nil.
func deletionTimestamp(evt *cloudevents.Event, t types.EventType, cur *metav1.Time) (*metav1.Time, error) {
	ts, ok, err := types.TimeExtension(evt, types.ExtDeletionTimestamp)
	switch {
	case err != nil:
		return nil, err
	case ok:
		return &metav1.Time{Time: ts}, nil
	case cur == nil && t.Action == types.DeleteRequest:
		at := evt.Time()
		if at.IsZero() {
			at = time.Now()
		}
		return &metav1.Time{Time: at.UTC()}, nil
	}
	return cur, nil
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
