package workstore

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
// works of store: those of the cluster a resync names (all of them when it
// names none), with their statuses, whose hashes (codec.StatusHash) its
// status resync sends. Every work of store is the source's.
func Lister(store Store) generic.Lister[*workv1.ManifestWork] {
	return generic.ListerFunc[*workv1.ManifestWork](func(opts generic.ListOptions) ([]*workv1.ManifestWork, error) {
		ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
		defer cancel()
		l, err := store.List(ctx, ListOptions{Cluster: opts.ClusterName})
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

// StatusHandler returns a source client's status handler that stores each
// status in store, in the order the client found it in
// (generic.StatusOrderFrom; the work's generation without one).
func StatusHandler(store Store) generic.ResourceHandler[*workv1.ManifestWork] {
	return func(ctx context.Context, _ types.EventType, w *workv1.ManifestWork) error {
		order, ok := generic.StatusOrderFrom(ctx)
		if !ok {
			order = generic.StatusOrder{Version: w.Generation}
		}
		_, err := store.ApplyStatus(ctx, string(w.UID), order, w.Status)
		return err
	}
}
