package store

import (
	"fmt"
	"slices"
)

// IndexFunc gives the values an object is indexed under, as client-go's
// cache.IndexFunc does.
type IndexFunc[T Object] func(T) ([]string, error)

// index maps each value to the objects indexed under it, by key.
type index[T Object] struct {
	fn     IndexFunc[T]
	values map[string]map[string]T // value → namespace/name → object
}

// AddIndexes adds indexes by name and indexes every stored object. A name
// already taken is an error, and then none is added. An object whose
// IndexFunc fails is left out of that index: a write is never refused for
// an index.
func (s *Store[T]) AddIndexes(fns map[string]IndexFunc[T]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range fns {
		if _, ok := s.indexes[name]; ok {
			return fmt.Errorf("index %q exists", name)
		}
	}
	if s.indexes == nil {
		s.indexes = make(map[string]*index[T], len(fns))
	}
	for name, fn := range fns {
		idx := &index[T]{fn: fn, values: make(map[string]map[string]T)}
		s.each("", func(obj T) bool {
			idx.add(obj)
			return true
		})
		s.indexes[name] = idx
	}
	return nil
}

// ByIndex returns the objects indexed under any of values, each once, in
// no order. They are the stored objects: the caller must not change them.
// An unknown index is an error.
func (s *Store[T]) ByIndex(name string, values ...string) ([]T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.indexes[name]
	if !ok {
		return nil, fmt.Errorf("index %q does not exist", name)
	}
	if len(values) == 1 {
		objs := make([]T, 0, len(idx.values[values[0]]))
		for _, obj := range idx.values[values[0]] {
			objs = append(objs, obj)
		}
		return objs, nil
	}
	seen := make(map[string]T)
	for _, v := range values {
		for key, obj := range idx.values[v] {
			seen[key] = obj
		}
	}
	objs := make([]T, 0, len(seen))
	for _, obj := range seen {
		objs = append(objs, obj)
	}
	return objs, nil
}

// IndexValues returns the values of an index that some object is indexed
// under, sorted; nil for an unknown index.
func (s *Store[T]) IndexValues(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.indexes[name]
	if !ok {
		return nil
	}
	values := make([]string, 0, len(idx.values))
	for v := range idx.values {
		values = append(values, v)
	}
	slices.Sort(values)
	return values
}

// addToIndexes enters obj in every index. The caller holds s.mu for writing.
func (s *Store[T]) addToIndexes(obj T) {
	for _, idx := range s.indexes {
		idx.add(obj)
	}
}

// removeFromIndexes takes obj out of every index. The caller holds s.mu for writing.
func (s *Store[T]) removeFromIndexes(obj T) {
	for _, idx := range s.indexes {
		idx.remove(obj)
	}
}

func (idx *index[T]) add(obj T) {
	values, err := idx.fn(obj)
	if err != nil {
		return
	}
	key := Key(obj)
	for _, v := range values {
		objs := idx.values[v]
		if objs == nil {
			objs = make(map[string]T)
			idx.values[v] = objs
		}
		objs[key] = obj
	}
}

func (idx *index[T]) remove(obj T) {
	values, err := idx.fn(obj)
	if err != nil {
		return
	}
	key := Key(obj)
	for _, v := range values {
		objs := idx.values[v]
		delete(objs, key)
		if len(objs) == 0 {
			delete(idx.values, v)
		}
	}
}

// Key is an object's key in client-go's caches: namespace/name, or the
// name alone of an object of no namespace (cache.MetaNamespaceKeyFunc).
func Key[T Object](obj T) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
