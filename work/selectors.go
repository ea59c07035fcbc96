package work

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/store"
)

// matcher builds the filter of a List or Watch from its label and field
// selectors. Like a kube-apiserver serving a custom resource, it supports
// the field selectors metadata.name and metadata.namespace only.
func matcher(opts metav1.ListOptions) (func(*workv1.ManifestWork) bool, error) {
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
	return func(w *workv1.ManifestWork) bool {
		return ls.Matches(labels.Set(w.Labels)) &&
			fs.Matches(fields.Set{"metadata.name": w.Name, "metadata.namespace": w.Namespace})
	}, nil
}

// listWorks lists the works of the store that opts select: copies, or with
// stored the stored objects (the list's items are then shallow copies of
// them, which share their maps and slices).
func listWorks(s *store.Store[*workv1.ManifestWork], namespace string, opts metav1.ListOptions, stored bool) (*workv1.ManifestWorkList, error) {
	match, err := matcher(opts)
	if err != nil {
		return nil, err
	}
	res, err := s.List(store.ListOptions[*workv1.ManifestWork]{Namespace: namespace, Match: match, Limit: opts.Limit, Continue: opts.Continue, Stored: stored})
	if err != nil {
		return nil, err
	}
	list := &workv1.ManifestWorkList{
		TypeMeta: metav1.TypeMeta{Kind: "ManifestWorkList", APIVersion: workv1.GroupVersion.String()},
		ListMeta: metav1.ListMeta{
			ResourceVersion:    fmt.Sprint(res.ResourceVersion),
			Continue:           res.Continue,
			RemainingItemCount: res.RemainingItemCount,
		},
		Items: make([]workv1.ManifestWork, len(res.Items)),
	}
	for i, w := range res.Items {
		list.Items[i] = *w
	}
	return list, nil
}

// watchWorks watches the works of the store that opts select: copies, or
// with stored the stored objects.
func watchWorks(s *store.Store[*workv1.ManifestWork], namespace string, opts metav1.ListOptions, stored bool) (watch.Interface, error) {
	match, err := matcher(opts)
	if err != nil {
		return nil, err
	}
	wo := store.WatchOptions[*workv1.ManifestWork]{
		Namespace:       namespace,
		Match:           match,
		ResourceVersion: opts.ResourceVersion,
		AllowBookmarks:  opts.AllowWatchBookmarks,
		Bookmark:        func() *workv1.ManifestWork { return &workv1.ManifestWork{} },
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
