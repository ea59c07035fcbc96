package generic

import (
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"

	"github.com/workwire/sdk-go/generic/types"
)

// sessionKey is what a client answers resync requests per: the peer (a
// cluster, or a source) and the data type.
type sessionKey struct {
	peer string
	dt   types.DataType
}

// buildResyncEvents returns the events of one resync request: one event,
// or, where the transport's size limit (maxEventBytes, 0 if unknown) forces
// it, batches that each fit. No entries at all gives one event with an
// empty list, which asks for everything.
func buildResyncEvents[E any](ceSource string, et types.EventType, entries []E, maxEventBytes int, size func(E) int, payload func([]E) any, decorate func(*cloudevents.Event)) ([]*cloudevents.Event, error) {
	batches := types.Batches(entries, types.BatchBytes(maxEventBytes), size)
	if len(batches) == 0 {
		batches = [][]E{{}}
	}
	resyncID := uuid.NewString()
	events := make([]*cloudevents.Event, 0, len(batches))
	for i, b := range batches {
		evt := newEvent(ceSource, et)
		evt.SetExtension(types.ExtResyncID, resyncID)
		evt.SetExtension(types.ExtResyncBatch, int32(i))
		evt.SetExtension(types.ExtResyncBatches, int32(len(batches)))
		if decorate != nil {
			decorate(evt)
		}
		if err := evt.SetData(cloudevents.ApplicationJSON, payload(b)); err != nil {
			return nil, fmt.Errorf("encode %s: %w", et, err)
		}
		events = append(events, evt)
	}
	return events, nil
}

func newEvent(source string, et types.EventType) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetSource(source)
	evt.SetType(et.String())
	evt.SetTime(time.Now())
	return &evt
}

// malformed wraps err as a drop the client will not retry.
func malformed(err error) error {
	return &dropError{reason: DropMalformed, err: err}
}

var errNoResourceID = errors.New("object has no UID")
