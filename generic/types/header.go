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
// kind of event requires, its reader checks). The extensions are read in
// the order of Header's fields, so of two bad ones the first is reported.
func ParseHeader(evt *cloudevents.Event) (Header, error) {
	t, err := ParseEventType(evt.Type())
	if err != nil {
		return Header{}, err
	}
	h := Header{Type: t}
	bad := func(name string, err error) (Header, error) { return Header{}, extErr(evt, name, err) }
	exts := extensions(evt)
	if v := exts[ExtResourceID]; v != nil {
		if h.ResourceID, err = asString(v); err != nil {
			return bad(ExtResourceID, err)
		}
	}
	// An empty string is no version: OCM's peers send one for an object
	// no kube-apiserver has stored yet.
	if v := exts[ExtResourceVersion]; v != nil && v != "" {
		if h.Version, err = asInt64(v); err != nil {
			return bad(ExtResourceVersion, err)
		}
		h.HasVersion = true
	}
	if v := exts[ExtClusterName]; v != nil {
		if h.ClusterName, err = asString(v); err != nil {
			return bad(ExtClusterName, err)
		}
	}
	if v := exts[ExtOriginalSource]; v != nil {
		if h.OriginalSource, err = asString(v); err != nil {
			return bad(ExtOriginalSource, err)
		}
	}
	if v := exts[ExtDeletionTimestamp]; v != nil {
		if h.Deletion, err = asTime(v); err != nil {
			return bad(ExtDeletionTimestamp, err)
		}
		h.HasDeletion = true
	}
	if v := exts[ExtSequenceID]; v != nil {
		if h.Sequence, err = asSequence(v); err != nil {
			return bad(ExtSequenceID, err)
		}
		h.HasSequence = true
	}
	return h, nil
}
