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

// Before reports whether o is older than p: an earlier version, or the
// same version and an earlier sequence. Without both sequences, statuses of
// one version are not ordered, and Before is false.
func (o StatusOrder) Before(p StatusOrder) bool {
	if o.Version != p.Version {
		return o.Version < p.Version
	}
	return o.HasSequence && p.HasSequence && o.Sequence < p.Sequence
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
