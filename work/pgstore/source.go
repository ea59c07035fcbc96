package pgstore

import (
	"context"
	"time"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// listTimeout bounds a Lister's query: generic.Lister takes no context.
const listTimeout = time.Minute

// Lister returns the generic.Lister of a source client that sends the
// works of s: those of the cluster a resync names (all of them when it
// names none), from the database, with their statuses, whose hashes
// (codec.StatusHash) its status resync sends. Every work of s is the
// source's.
func (s *Store) Lister() generic.Lister[*workv1.ManifestWork] {
	return generic.ListerFunc[*workv1.ManifestWork](func(opts generic.ListOptions) ([]*workv1.ManifestWork, error) {
		ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
		defer cancel()
		l, err := s.List(ctx, ListOptions{Cluster: opts.ClusterName})
		if err != nil {
			return nil, err
		}
		out := make([]*workv1.ManifestWork, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	})
}

// HandleStatus is a source client's status handler (a
// generic.ResourceHandler): it stores the status in the order the client
// found it in (generic.StatusOrderFrom; the work's generation without
// one), as ApplyStatus does.
func (s *Store) HandleStatus(ctx context.Context, _ types.EventType, w *workv1.ManifestWork) error {
	order, ok := generic.StatusOrderFrom(ctx)
	if !ok {
		order = generic.StatusOrder{Version: w.Generation}
	}
	_, err := s.ApplyStatus(ctx, string(w.UID), order, w.Status)
	return err
}
