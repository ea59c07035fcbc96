// Package resync is how a resync request is answered, written once for the
// generic clients (both roles) and the gRPC broker's Services: the batches
// of one request assembled into a session over what the answering side held
// when the request's first batch arrived, and the source's decision for each
// entry of an agent's spec resync. It does no I/O.
//
// A resync request goes out as one event, or, on a transport whose size
// limit it would exceed, as batches that share a resyncid. The answering
// side answers each batch as it comes (what it names and is older or
// different) and, once it has every batch, also sends what no batch named.
// A lost batch only delays the latter to the next resync.
package resync

import (
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
)

// BatchOf reads a resync event's batch extensions: the request's ID, this
// batch's index and how many batches the request has. An event without
// them is a whole request of its own, identified by its event ID.
func BatchOf(evt *cloudevents.Event) (id string, index, total int, err error) {
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

// Session is one peer's resync request of one data type being answered. H
// is what the answering side holds of a resource; X is the caller's own
// state for the answer. A session is used by one goroutine at a time.
type Session[H, X any] struct {
	// ID is the request's.
	ID string
	// State is the caller's.
	State X
	// Sent counts the sends that succeeded, for the caller to report (a
	// batch sent again on a retry counts again).
	Sent int

	created time.Time
	total   int
	got     map[int]bool
	named   map[string]struct{}
	held    map[string]H
}

// Hold sets what the answering side holds, by resource ID: called once, on
// a fresh session, before any batch is answered.
func (s *Session[H, X]) Hold(held map[string]H) { s.held = held }

// Opened returns when the request's first batch arrived.
func (s *Session[H, X]) Opened() time.Time { return s.created }

// Held returns how many resources the answering side held.
func (s *Session[H, X]) Held() int { return len(s.held) }

// answered reports whether batch index was answered already: a
// redelivery, which needs no answer.
func (s *Session[H, X]) answered(index int) bool { return s.got[index] }

// Name returns what is held of the resource id an entry names, and marks it
// named so that answerUnnamed skips it.
func (s *Session[H, X]) Name(id string) (h H, ok bool) {
	h, ok = s.held[id]
	if ok {
		s.named[id] = struct{}{}
	}
	return h, ok
}

// finish marks batch index answered.
func (s *Session[H, X]) finish(index int) { s.got[index] = true }

// complete reports whether every batch is answered: what no batch named is
// then left to send (answerUnnamed).
func (s *Session[H, X]) complete() bool { return len(s.got) >= s.total }

// Answer answers batch index: the sends named returns for the resources
// the batch names (found with Name), unless the batch was answered already
// (a redelivery), then, once every batch is, each held resource no batch
// named, with unnamed. It reports whether the whole answer is sent. At the
// first error it stops and returns it; called again for the same batch
// (the retry), it resumes: all the batch's sends again if any failed (a
// peer takes a resent version as the one it has), and of what no batch
// named only what was not sent. Answer is the one way through a session's
// steps: their order is what keeps a retry from losing what was not sent.
func (s *Session[H, X]) Answer(index int, named func() ([]func() error, error), unnamed func(H) error) (done bool, err error) {
	if !s.answered(index) {
		sends, err := named()
		if err != nil {
			return false, err
		}
		if err := s.sendAll(sends); err != nil {
			return false, err
		}
		s.finish(index)
	}
	if !s.complete() {
		return false, nil
	}
	if err := s.answerUnnamed(unnamed); err != nil {
		return false, err
	}
	return true, nil
}

// answerUnnamed sends each held resource no batch named, which the
// request's sender lacks, Senders at a time, counting what it sent in Sent.
// At the first error send returns it starts no more sends and returns it
// once those under way ended; called again, it resumes with what was not
// sent. send is called from several goroutines at once.
func (s *Session[H, X]) answerUnnamed(send func(H) error) error {
	var todo []string
	for id := range s.held {
		if _, named := s.named[id]; !named {
			todo = append(todo, id)
		}
	}
	sent, err := Parallel(todo, Senders, func(id string) error { return send(s.held[id]) })
	for i, ok := range sent {
		if ok {
			s.named[todo[i]] = struct{}{}
			s.Sent++
		}
	}
	return err
}

// sendAll makes the sends a batch's answer needs, Senders at a time, and
// counts those that succeeded in Sent. At the first error it starts no
// more and returns it once those under way ended.
func (s *Session[H, X]) sendAll(sends []func() error) error {
	done, err := Parallel(sends, Senders, func(send func() error) error { return send() })
	for _, ok := range done {
		if ok {
			s.Sent++
		}
	}
	return err
}

// Senders is how many events of one answer are sent at once: a send waits
// for the broker's acknowledgement, and one sender would pace an answer of
// thousands by round trips.
const Senders = 16

// Parallel calls fn on each item, n at a time, and reports which calls
// returned nil. At the first error it starts no more calls, and returns
// that error once the calls under way returned.
func Parallel[T any](items []T, n int, fn func(T) error) (done []bool, err error) {
	done = make([]bool, len(items))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return first != nil
	}
	slots := make(chan struct{}, n)
	for i, item := range items {
		slots <- struct{}{}
		if failed() {
			<-slots
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := fn(item); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			done[i] = true
		})
	}
	wg.Wait()
	return done, first
}

// Sessions holds the requests being answered, one per key (a peer and a
// data type). It is goroutine-safe; each session is used by the one worker
// that owns its key.
type Sessions[K comparable, H, X any] struct {
	mu sync.Mutex
	m  map[K]*Session[H, X]
}

// Open returns the session of request id of total batches for key. A batch
// of another request from the same key replaces the old session: the newer
// request supersedes it. Sessions older than ttl are swept. fresh is true
// for a new session, which the caller fills with Hold.
func (s *Sessions[K, H, X]) Open(key K, id string, total int, ttl time.Duration, now time.Time) (sess *Session[H, X], fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[key]; ok && old.ID == id {
		return old, false
	}
	for k, old := range s.m {
		if now.Sub(old.created) > ttl {
			delete(s.m, k)
		}
	}
	if s.m == nil {
		s.m = make(map[K]*Session[H, X])
	}
	sess = &Session[H, X]{ID: id, created: now, total: total, got: make(map[int]bool), named: make(map[string]struct{})}
	s.m[key] = sess
	return sess, true
}

// Close forgets sess, answered or abandoned.
func (s *Sessions[K, H, X]) Close(key K, sess *Session[H, X]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key] == sess {
		delete(s.m, key)
	}
}

// Verdict is a source's answer to one entry of an agent's spec resync.
type Verdict int

const (
	// Skip: nothing to send.
	Skip Verdict = iota
	// Send: send the source's spec, newer than the agent's or being
	// deleted (an update_request, or a delete_request).
	Send
	// AgentAhead: the agent holds a newer version than the source (a
	// source that lost its versions); a source that can moves its own past
	// it and decides again.
	AgentAhead
	// DeleteOrphan: the agent holds a resource of this source that the
	// source no longer has; send a delete_request.
	DeleteOrphan
	// KeepOrphan: as DeleteOrphan, but in the source's grace period after
	// it started, while what it holds may still be loading.
	KeepOrphan
)

// Held is what a source holds of one resource.
type Held struct {
	Version  int64
	Deleting bool
}

// Orphans is a source's policy for resources an agent holds and it does
// not: every source hears every agent's spec resync, so it deletes only
// what the agent attributes to it.
type Orphans struct {
	// Source is the source's ID.
	Source string
	// Unattributed also deletes entries the agent attributes to no source
	// (a peer that does not say).
	Unattributed bool
	// Never deletes none.
	Never bool
	// Grace keeps them for now (counted as KeepOrphan).
	Grace bool
}

// Spec decides a source's answer to entry e of an agent's spec resync
// whose event names eventSource (its originalsource, the default source of
// its entries): held is what the source holds of e's resource, if ok.
func Spec(held Held, ok bool, e types.ResourceVersion, eventSource string, o Orphans) Verdict {
	switch {
	case ok && (held.Deleting || held.Version > e.ResourceVersion):
		return Send
	case ok && held.Version < e.ResourceVersion:
		return AgentAhead
	case ok:
		return Skip
	}
	src := e.EntrySource(eventSource)
	if o.Never || !(src == o.Source || (src == "" && o.Unattributed)) {
		return Skip
	}
	if o.Grace {
		return KeepOrphan
	}
	return DeleteOrphan
}
