package resync

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"

	"github.com/workwire/sdk-go/generic/types"
)

// NewEvent returns an event of type et from source with a fresh ID and the
// time now, and nothing else: the start of every event a resync sends that
// no codec builds (requests, and deletes of orphans).
func NewEvent(source string, et types.EventType) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetSource(source)
	evt.SetType(et.String())
	evt.SetTime(time.Now())
	return &evt
}

// Request returns the events of one resync request of type et from source:
// one event, or, where the transport's size limit (maxEventBytes, 0 if
// unknown) forces it, batches that each fit and share a resyncid. No entries
// at all gives one event with an empty list, which asks for everything.
// decorate, if not nil, adds the extensions of the requesting side.
func Request[E any](source string, et types.EventType, entries []E, maxEventBytes int, size func(E) int, payload func([]E) any, decorate func(*cloudevents.Event)) ([]*cloudevents.Event, error) {
	batches := types.Batches(entries, types.BatchBytes(maxEventBytes), size)
	if len(batches) == 0 {
		batches = [][]E{{}}
	}
	resyncID := uuid.NewString()
	events := make([]*cloudevents.Event, 0, len(batches))
	for i, b := range batches {
		evt := NewEvent(source, et)
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

// OrphanDelete returns the delete_request a source sends cluster for entry
// e of its spec resync, a resource the source no longer has: with no object
// to encode, it carries the identity only.
func OrphanDelete(source string, dt types.DataType, cluster string, e types.ResourceVersion) (*cloudevents.Event, error) {
	evt := NewEvent(source, types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.DeleteRequest})
	evt.SetExtension(types.ExtResourceID, e.ResourceID)
	evt.SetExtension(types.ExtClusterName, cluster)
	types.SetTimeExtension(evt, types.ExtDeletionTimestamp, time.Now())
	if err := types.SetInt32Extension(evt, types.ExtResourceVersion, e.ResourceVersion); err != nil {
		return nil, fmt.Errorf("delete orphan %s: %w", e.ResourceID, err)
	}
	return evt, nil
}

// SpecRequest is one batch of an agent's spec resync request.
type SpecRequest struct {
	// ID, Index and Total place the batch in its request (BatchOf).
	ID           string
	Index, Total int
	// Entries are what the agent holds.
	Entries []types.ResourceVersion
	// Source is the request's originalsource: the source of every entry
	// that names none, "" if the agent did not say.
	Source string
}

// ParseSpecRequest reads one batch of a spec resync request.
func ParseSpecRequest(evt *cloudevents.Event) (SpecRequest, error) {
	var r SpecRequest
	var err error
	if r.ID, r.Index, r.Total, err = BatchOf(evt); err != nil {
		return SpecRequest{}, err
	}
	list, err := types.DecodeResourceVersionList(evt.Data())
	if err != nil {
		return SpecRequest{}, err
	}
	r.Entries = list.ResourceVersions
	if r.Source, _, err = types.StringExtension(evt, types.ExtOriginalSource); err != nil {
		return SpecRequest{}, err
	}
	return r, nil
}

// Source is a source as its answer to a spec resync sees it: the generic
// source client over its Lister, and the gRPC broker over a Service. H is
// what it holds of one resource.
type Source[H any] interface {
	// List returns what the source holds for the requesting cluster, by
	// resource ID; called once per request, when its first batch arrives.
	List(ctx context.Context) (map[string]H, error)
	// Held is what the decision needs to know of h.
	Held(h H) Held
	// Repair is called for a resource the agent holds at a newer version
	// than the source (AgentAhead): a source that can moves its own past
	// agentVersion and returns it; one that cannot returns h as it is.
	Repair(ctx context.Context, h H, agentVersion int64) (H, error)
	// Send sends the source's spec of h; agentHolds says the agent has it
	// (an update_request, unless h is being deleted).
	Send(ctx context.Context, h H, agentHolds bool) error
	// DeleteOrphan sends the delete_request of an orphan (OrphanDelete).
	DeleteOrphan(ctx context.Context, e types.ResourceVersion) error
}

// Answer is what AnswerSpec did with one batch.
type Answer[H, X any] struct {
	// Kept counts the orphans the batch named that the grace period kept.
	Kept int
	// Done is the session once its last batch was answered (and closed),
	// nil while batches are missing.
	Done *Session[H, X]
}

// AnswerSpec answers batch req of an agent's spec resync, the session of
// key in sessions, as Spec decides for each entry: it sends every resource
// the batch names that src holds newer (or is deleting), a delete_request
// for every orphan o lets it delete, and, once every batch is in, every
// resource of src no batch named. opened, if not nil, is called with a
// fresh session before src is listed. An error leaves the session open, so
// a retry of the batch resumes it; a failed List closes it.
func AnswerSpec[K comparable, H, X any](ctx context.Context, sessions *Sessions[K, H, X], key K, ttl time.Duration, req SpecRequest, o Orphans, src Source[H], opened func(*Session[H, X])) (Answer[H, X], error) {
	sess, fresh := sessions.Open(key, req.ID, req.Total, ttl, time.Now())
	if fresh {
		if opened != nil {
			opened(sess)
		}
		held, err := src.List(ctx)
		if err != nil {
			sessions.Close(key, sess)
			return Answer[H, X]{}, err
		}
		sess.Hold(held)
	}
	var a Answer[H, X]
	done, err := sess.Answer(req.Index, func() ([]func() error, error) {
		var sends []func() error
		for _, e := range req.Entries {
			h, ok := sess.Name(e.ResourceID)
			v := Spec(held(src, h, ok), ok, e, req.Source, o)
			if v == AgentAhead {
				var err error
				if h, err = src.Repair(ctx, h, e.ResourceVersion); err != nil {
					return nil, err
				}
				v = Spec(held(src, h, ok), ok, e, req.Source, o)
			}
			switch v {
			case Send:
				sends = append(sends, func() error { return src.Send(ctx, h, true) })
			case DeleteOrphan:
				sends = append(sends, func() error { return src.DeleteOrphan(ctx, e) })
			case KeepOrphan:
				a.Kept++
			}
		}
		return sends, nil
	}, func(h H) error { return src.Send(ctx, h, false) })
	if err != nil || !done {
		return a, err
	}
	sessions.Close(key, sess)
	a.Done = sess
	return a, nil
}

func held[H any](src Source[H], h H, ok bool) Held {
	if !ok {
		return Held{}
	}
	return src.Held(h)
}
