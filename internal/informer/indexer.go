package informer

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/workwire/sdk-go/internal/store"
)

// errReadOnly answers writes to the cache: the holder's clientset writes
// the store.
var errReadOnly = errors.New("the informer's cache is the holder's store: write through the clientset")

// indexer is the informer's cache.Indexer: a read-only view of the store,
// limited to the informer's namespace. What it returns are the stored
// objects, which callers must not change, as with any informer's cache.
type indexer[T store.Object] struct{ inf *Informer[T] }

var _ cache.Indexer = indexer[store.Object]{}

func (x indexer[T]) Add(any) error               { return errReadOnly }
func (x indexer[T]) Update(any) error            { return errReadOnly }
func (x indexer[T]) Delete(any) error            { return errReadOnly }
func (x indexer[T]) Replace([]any, string) error { return errReadOnly }

// Resync does nothing, as a client-go cache's does.
func (x indexer[T]) Resync() error { return nil }

// Bookmark does nothing: the store knows its resourceVersion.
func (x indexer[T]) Bookmark(string) {}

func (x indexer[T]) LastStoreSyncResourceVersion() string { return x.inf.LastSyncResourceVersion() }

func (x indexer[T]) List() []any {
	objs := []any{}
	x.inf.st.Range(x.inf.namespace, func(obj T) bool {
		objs = append(objs, obj)
		return true
	})
	return objs
}

func (x indexer[T]) ListKeys() []string {
	keys := []string{}
	x.inf.st.Range(x.inf.namespace, func(obj T) bool {
		keys = append(keys, store.Key(obj))
		return true
	})
	return keys
}

func (x indexer[T]) Get(obj any) (any, bool, error) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

func (x indexer[T]) GetByKey(key string) (any, bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	if !x.inScope(namespace) {
		return nil, false, nil
	}
	obj, ok := x.inf.st.Peek(namespace, name)
	if !ok {
		return nil, false, nil
	}
	return obj, true, nil
}

func (x indexer[T]) inScope(namespace string) bool {
	return x.inf.namespace == "" || x.inf.namespace == namespace
}

// Index returns the objects that share a value of the index with obj.
func (x indexer[T]) Index(name string, obj any) ([]any, error) {
	if name == cache.NamespaceIndex {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		return x.ByIndex(name, m.GetNamespace())
	}
	fn, err := x.indexFunc(name)
	if err != nil {
		return nil, err
	}
	values, err := fn(obj)
	if err != nil {
		return nil, err
	}
	if len(values) == 0 {
		return nil, nil
	}
	objs, err := x.inf.st.ByIndex(name, values...)
	return x.inScopeOnly(objs), err
}

func (x indexer[T]) IndexKeys(name, value string) ([]string, error) {
	objs, err := x.ByIndex(name, value)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, obj := range objs {
		keys[i] = store.Key(obj.(T))
	}
	return keys, nil
}

func (x indexer[T]) ListIndexFuncValues(name string) []string {
	if name != cache.NamespaceIndex {
		return x.inf.st.IndexValues(name)
	}
	if x.inf.namespace == "" {
		return x.inf.st.Namespaces()
	}
	held := false
	x.inf.st.Range(x.inf.namespace, func(T) bool {
		held = true
		return false
	})
	if !held {
		return nil
	}
	return []string{x.inf.namespace}
}

func (x indexer[T]) ByIndex(name, value string) ([]any, error) {
	if name != cache.NamespaceIndex {
		if _, err := x.indexFunc(name); err != nil {
			return nil, err
		}
		objs, err := x.inf.st.ByIndex(name, value)
		return x.inScopeOnly(objs), err
	}
	objs := []any{}
	if !x.inScope(value) {
		return objs, nil
	}
	// Range of "" is every namespace; the index's "" is objects of none.
	x.inf.st.Range(value, func(obj T) bool {
		if value != "" || obj.GetNamespace() == "" {
			objs = append(objs, obj)
		}
		return true
	})
	return objs, nil
}

func (x indexer[T]) GetIndexers() cache.Indexers {
	x.inf.mu.Lock()
	defer x.inf.mu.Unlock()
	indexers := make(cache.Indexers, len(x.inf.indexers))
	for name, fn := range x.inf.indexers {
		indexers[name] = fn
	}
	return indexers
}

func (x indexer[T]) AddIndexers(add cache.Indexers) error { return x.inf.AddIndexers(add) }

func (x indexer[T]) indexFunc(name string) (cache.IndexFunc, error) {
	x.inf.mu.Lock()
	defer x.inf.mu.Unlock()
	fn, ok := x.inf.indexers[name]
	if !ok {
		return nil, fmt.Errorf("index with name %s does not exist", name)
	}
	return fn, nil
}

// inScopeOnly drops the objects of other namespaces than the informer's.
func (x indexer[T]) inScopeOnly(objs []T) []any {
	out := make([]any, 0, len(objs))
	for _, obj := range objs {
		if x.inScope(obj.GetNamespace()) {
			out = append(out, obj)
		}
	}
	return out
}
