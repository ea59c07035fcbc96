package engine

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/workwire/sdk-go/internal/store"
)

// matcher builds the filter of a List or Watch from its label and field
// selectors. Like a kube-apiserver serving a custom resource, it supports
// the field selectors metadata.name and metadata.namespace only.
func matcher[T Object](opts metav1.ListOptions) (func(T) bool, error) {
	ls := labels.Everything()
	if opts.LabelSelector != "" {
		var err error
		if ls, err = labels.Parse(opts.LabelSelector); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid label selector %q: %v", opts.LabelSelector, err))
		}
	}
	fs := fields.Everything()
	if opts.FieldSelector != "" {
		var err error
		if fs, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %q: %v", opts.FieldSelector, err))
		}
		for _, r := range fs.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
	}
	if ls.Empty() && fs.Empty() {
		return nil, nil
	}
	return func(obj T) bool {
		return ls.Matches(labels.Set(obj.GetLabels())) &&
			fs.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()})
	}, nil
}

// List is one page of a List: copies, or (a Namespaced of Stored) the
// stored objects, which the caller must not change.
type List[T Object] struct {
	Items    []T
	ListMeta metav1.ListMeta
}

func list[T Object](s *store.Store[T], namespace string, opts metav1.ListOptions, stored bool) (List[T], error) {
	match, err := matcher[T](opts)
	if err != nil {
		return List[T]{}, err
	}
	res, err := s.List(store.ListOptions[T]{Namespace: namespace, Match: match, Limit: opts.Limit, Continue: opts.Continue, Stored: stored})
	if err != nil {
		return List[T]{}, err
	}
	return List[T]{Items: res.Items, ListMeta: metav1.ListMeta{
		ResourceVersion:    fmt.Sprint(res.ResourceVersion),
		Continue:           res.Continue,
		RemainingItemCount: res.RemainingItemCount,
	}}, nil
}

func watchObjects[T Object](s *store.Store[T], namespace string, opts metav1.ListOptions, stored bool, bookmark func() T) (watch.Interface, error) {
	match, err := matcher[T](opts)
	if err != nil {
		return nil, err
	}
	wo := store.WatchOptions[T]{
		Namespace:       namespace,
		Match:           match,
		ResourceVersion: opts.ResourceVersion,
		AllowBookmarks:  opts.AllowWatchBookmarks,
		Bookmark:        bookmark,
		Stored:          stored,
	}
	if opts.SendInitialEvents != nil {
		wo.SendInitialEvents = *opts.SendInitialEvents
	}
	if opts.TimeoutSeconds != nil {
		wo.Timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return s.Watch(wo)
}
