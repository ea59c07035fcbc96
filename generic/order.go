package generic

import "context"

// StatusOrder is where a status event stands among the statuses of its
// resource: the resourceversion it reports on, then the agent's sequenceid.
// A source that stores statuses where several replicas write (a database)
// keeps a status only over an older one, so a redelivered or reordered
// status never overwrites a newer one.
type StatusOrder struct {
	// Version is the resourceversion extension: the generation of the spec
	// the status reports on.
	Version int64
	// Sequence is the sequenceid extension, if HasSequence (OCM's agents
	// and workwire's send one; without it only Version orders statuses).
	Sequence    uint64
	HasSequence bool
}

// Replaces reports whether a status of order o replaces one of order last,
// the newest its source kept: the one rule of which status wins, for the
// source clients and the broker's Services and stores alike. A status of a
// newer version replaces; of an older one never. Within one version, a
// later sequence replaces and an equal or earlier one (a redelivery, or a
// status overtaken) does not; without both sequences, statuses of one
// version are not ordered, and the one that arrives replaces.
func (o StatusOrder) Replaces(last StatusOrder) bool {
	if o.Version != last.Version {
		return o.Version > last.Version
	}
	return !o.HasSequence || !last.HasSequence || o.Sequence > last.Sequence
}

type statusOrderKey struct{}

// StatusOrderFrom returns the order of the status a source client's handler
// is called with, which the client puts in the handler's context.
func StatusOrderFrom(ctx context.Context) (StatusOrder, bool) {
	o, ok := ctx.Value(statusOrderKey{}).(StatusOrder)
	return o, ok
}

func withStatusOrder(ctx context.Context, o StatusOrder) context.Context {
	return context.WithValue(ctx, statusOrderKey{}, o)
}
