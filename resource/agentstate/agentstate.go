// Package agentstate keeps what an agent holds across its restarts.
//
// An agent's holder (package work's or package resource's, built with
// WithClusterName) holds the objects sources sent it in memory. A process
// that dies and starts again would hold none of them, and a source's delete
// of an object the agent applied while it was down would find nothing to
// clean up: the holder would confirm the delete at once, the source would
// forget the object, and what the agent's controllers applied for it would
// stay on the cluster for good. Given a Store (WithAgentState), the holder
// keeps every object it holds in it, and a new holder over the same Store
// starts with them: the delete then reaches the controllers as a deletion
// timestamp on an object that still has their finalizers, and the source
// hears that the object is deleted only once they are done. A delete for
// an object the Store never held is still confirmed at once.
//
// The holder writes each change of an object to its Store before its
// informer shows the change and before the write that made it (a spec
// from a source, a controller's Update or UpdateStatus) returns, so what
// a controller saw — and may have applied — is always in the Store. It
// removes an object from the Store when the object leaves its store, before
// it reports the object deleted.
//
// Three Stores come with the package: Secrets, on the managed cluster
// itself (the default a production agent should use: it lives as long as
// the cluster, whatever happens to the agent's pod); Dir, files on a disk
// that outlives the process; and Memory, for tests that restart a holder in
// one process.
package agentstate

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Store keeps what an agent's holder holds, one entry per object, by the
// object's name. The holder calls Load once, when it starts, and Put and
// Delete of one name one at a time (of different names concurrently). An
// entry's data is the holder's (the object's JSON and what the holder
// keeps beside it); a Store keeps it as it is.
type Store interface {
	// Load returns every entry the Store holds, by name.
	Load(ctx context.Context) (map[string][]byte, error)
	// Put stores data under name, in place of what was there, and returns
	// once it is kept: once it would survive the process's death.
	Put(ctx context.Context, name string, data []byte) error
	// Delete removes the entry of name. A name the Store does not hold is
	// no error.
	Delete(ctx context.Context, name string) error
}

// Memory is a Store in memory, for tests: a holder that is closed and a
// new one built over the same Memory behave as an agent process that died
// and started again. It is goroutine-safe; its zero value is empty and
// ready.
type Memory struct {
	mu      sync.Mutex
	entries map[string][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Load implements Store.
func (m *Memory) Load(context.Context) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte, len(m.entries))
	for name, data := range m.entries {
		out[name] = slices.Clone(data)
	}
	return out, nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = make(map[string][]byte)
	}
	m.entries[name] = slices.Clone(data)
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, name)
	return nil
}

// Names returns the names of the entries Memory holds, sorted.
func (m *Memory) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.entries))
}
