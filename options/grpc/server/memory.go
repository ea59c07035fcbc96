package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
)

// MemoryService is a Service that holds one data type's spec events and the
// statuses agents report in memory, for tests and examples. Several servers
// (replicas) may share one. It is goroutine-safe.
type MemoryService struct {
	dataType string

	mu       sync.RWMutex
	specs    map[string]*cloudevents.Event
	statuses map[string]*cloudevents.Event
	handlers []EventHandler
}

var _ Service = (*MemoryService)(nil)

// NewMemoryService returns an empty MemoryService for dataType.
func NewMemoryService(dataType string) *MemoryService {
	return &MemoryService{dataType: dataType, specs: map[string]*cloudevents.Event{}, statuses: map[string]*cloudevents.Event{}}
}

// Put stores a resource's spec event (it needs the resourceid and
// clustername extensions) and tells the registered handlers, which send it
// to the agents of its cluster. It blocks only while handlers queue the event.
func (m *MemoryService) Put(ctx context.Context, evt *cloudevents.Event) error {
	id, err := types.RequiredString(evt, types.ExtResourceID)
	if err != nil {
		return err
	}
	if _, err := types.RequiredString(evt, types.ExtClusterName); err != nil {
		return err
	}
	c := evt.Clone()
	m.mu.Lock()
	_, existed := m.specs[id]
	m.specs[id] = &c
	handlers := append([]EventHandler(nil), m.handlers...)
	m.mu.Unlock()
	var errs []error
	for _, h := range handlers {
		if existed {
			errs = append(errs, h.OnUpdate(ctx, m.dataType, id))
		} else {
			errs = append(errs, h.OnCreate(ctx, m.dataType, id))
		}
	}
	return errors.Join(errs...)
}

// Delete forgets a resource at once and tells the handlers; agents remove it
// at their next spec resync. (To have agents delete it first, Put its spec
// with a deletiontimestamp and a delete_request type, and Delete it once its
// status says it is gone.)
func (m *MemoryService) Delete(ctx context.Context, resourceID string) error {
	m.mu.Lock()
	delete(m.specs, resourceID)
	delete(m.statuses, resourceID)
	handlers := append([]EventHandler(nil), m.handlers...)
	m.mu.Unlock()
	var errs []error
	for _, h := range handlers {
		errs = append(errs, h.OnDelete(ctx, m.dataType, resourceID))
	}
	return errors.Join(errs...)
}

// Status returns the last status event an agent reported for a resource.
func (m *MemoryService) Status(resourceID string) (*cloudevents.Event, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	evt, ok := m.statuses[resourceID]
	if !ok {
		return nil, false
	}
	c := evt.Clone()
	return &c, true
}

// Get implements Service.
func (m *MemoryService) Get(_ context.Context, resourceID string) (*cloudevents.Event, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	evt, ok := m.specs[resourceID]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", m.dataType, resourceID, ErrNotFound)
	}
	c := evt.Clone()
	return &c, nil
}

// List implements Service.
func (m *MemoryService) List(_ context.Context, opts ListOptions) ([]*cloudevents.Event, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*cloudevents.Event
	for _, evt := range m.specs {
		if opts.ClusterName != "" {
			if c, _, _ := types.StringExtension(evt, types.ExtClusterName); c != opts.ClusterName {
				continue
			}
		}
		c := evt.Clone()
		out = append(out, &c)
	}
	return out, nil
}

// HandleStatusUpdate implements Service: it keeps the status of a resource
// it holds and refuses one it does not.
func (m *MemoryService) HandleStatusUpdate(_ context.Context, evt *cloudevents.Event) error {
	if err := RequireStatusUpdate(evt); err != nil {
		return err
	}
	id, err := types.RequiredString(evt, types.ExtResourceID)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.specs[id]; !ok {
		return fmt.Errorf("status of %s %s: %w", m.dataType, id, ErrNotFound)
	}
	c := evt.Clone()
	m.statuses[id] = &c
	return nil
}

// RegisterHandler implements Service.
func (m *MemoryService) RegisterHandler(h EventHandler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handlers = append(m.handlers, h)
}
