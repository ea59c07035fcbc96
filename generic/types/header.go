package types

import (
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// Header is what is read of an event before its payload: its type, and the
// extensions that identify, version and route the resource it carries. The
// clients parse it once, when an event arrives, and hand it to the codec
// with the event, whose data and extensions of its own are the codec's.
type Header struct {
	// Type is the event's type.
	Type EventType
	// ResourceID is the resourceid extension, "" if absent.
	ResourceID string
	// Version is the resourceversion extension (an integer, or a decimal
	// string); HasVersion is false if it is absent or the empty string.
	Version    int64
	HasVersion bool
	// ClusterName is the clustername extension, "" if absent.
	ClusterName string
	// OriginalSource is the originalsource extension, "" if absent.
	OriginalSource string
	// Deletion is the deletiontimestamp extension; HasDeletion is false if
	// it is absent.
	Deletion    time.Time
	HasDeletion bool
	// Sequence is the sequenceid extension of a status; HasSequence is
	// false if it is absent.
	Sequence    uint64
	HasSequence bool
}

// ParseHeader reads evt's Header. An extension of the wrong type, or a type
// that is no event type, is an error; an absent extension is not (what each
// kind of event requires, its reader checks).
func ParseHeader(evt *cloudevents.Event) (Header, error) {
	var h Header
	var err error
	if h.Type, err = ParseEventType(evt.Type()); err != nil {
		return Header{}, err
	}
	if h.ResourceID, _, err = StringExtension(evt, ExtResourceID); err != nil {
		return Header{}, err
	}
	// An empty string is no version: OCM's peers send one for an object
	// no kube-apiserver has stored yet.
	if v, ok := lookup(evt, ExtResourceVersion); !ok || v != "" {
		if h.Version, h.HasVersion, err = Int64Extension(evt, ExtResourceVersion); err != nil {
			return Header{}, err
		}
	}
	if h.ClusterName, _, err = StringExtension(evt, ExtClusterName); err != nil {
		return Header{}, err
	}
	if h.OriginalSource, _, err = StringExtension(evt, ExtOriginalSource); err != nil {
		return Header{}, err
	}
	if h.Deletion, h.HasDeletion, err = TimeExtension(evt, ExtDeletionTimestamp); err != nil {
		return Header{}, err
	}
	if h.Sequence, h.HasSequence, err = SequenceID(evt); err != nil {
		return Header{}, err
	}
	return h, nil
}
