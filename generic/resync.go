package generic

import (
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"

	"github.com/workwire/sdk-go/generic/types"
)

// A resync request goes out as one event, or, on a transport whose size
// limit it would exceed, as batches that share a resyncid. The receiver
// answers each batch as it comes (what it names and is older or different)
// and, once it has every batch, also sends what no batch named. A lost
// batch only delays the latter to the next resync.

type sessionKey struct {
	peer string
	dt   types.DataType
}

type session[T Object] struct {
	id      string
	created time.Time
	total   int
	got     map[int]bool
	seen    map[string]struct{}
	mine    map[string]T // what our lister held when the session began
	sent    int
	// seq and seqEnd bound the sequence IDs an agent's status answers take:
	// reserved before mine was listed, so a status published after that
	// (from a newer read) outranks the answer at the source.
	seq, seqEnd uint64
}

// sessions holds the resync requests being assembled, one per peer and data
// type. A session is only used by the worker that owns its peer's queue key;
// the mutex guards the map.
type sessions[T Object] struct {
	mu sync.Mutex
	m  map[sessionKey]*session[T]
}

// open returns the session batch belongs to. A batch of another resync from
// the same peer replaces the old session: the newer request supersedes it.
// Sessions older than ttl are swept. fresh is true for a new session, whose
// mine the caller must fill.
func (s *sessions[T]) open(key sessionKey, id string, total int, ttl time.Duration, now time.Time) (sess *session[T], fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[key]; ok && old.id == id {
		return old, false
	}
	for k, old := range s.m {
		if now.Sub(old.created) > ttl {
			delete(s.m, k)
		}
	}
	sess = &session[T]{id: id, created: now, total: total, got: make(map[int]bool), seen: make(map[string]struct{})}
	s.m[key] = sess
	return sess, true
}

func (s *sessions[T]) close(key sessionKey, sess *session[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key] == sess {
		delete(s.m, key)
	}
}

// batchInfo reads a resync event's batch extensions. An event without them
// is a whole resync of its own.
func batchInfo(evt *cloudevents.Event) (id string, index, total int, err error) {
	id, ok, err := types.StringExtension(evt, types.ExtResyncID)
	if err != nil {
		return "", 0, 0, err
	}
	if !ok || id == "" {
		return evt.ID(), 0, 1, nil
	}
	i, _, err := types.Int64Extension(evt, types.ExtResyncBatch)
	if err != nil {
		return "", 0, 0, err
	}
	n, ok, err := types.Int64Extension(evt, types.ExtResyncBatches)
	if err != nil {
		return "", 0, 0, err
	}
	if !ok {
		n = 1
	}
	if n < 1 || n > 1<<20 || i < 0 || i >= n {
		return "", 0, 0, fmt.Errorf("resync batch %d of %d is out of range", i, n)
	}
	return id, int(i), int(n), nil
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
	evt := cloudevents.NewEvent()
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
