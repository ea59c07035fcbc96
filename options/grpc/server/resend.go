package server

import (
	"context"
	"errors"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/ack"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// Acknowledger is implemented by a Service whose agents acknowledge every
// spec they take with a status at its resourceversion, or a newer one, as
// work agents report a status for each generation of a ManifestWork they
// apply, and a Deleted one for its deletion. The server then waits for
// that status, and sends a spec that goes without one again (see
// Config.SpecResendAfter): a broker between the server and an agent, or an
// agent itself, may lose what the server sent, and an agent that asks for
// specs only when it connects would never ask again. Without it, or when
// AcknowledgesSpecs returns false, nothing is sent again.
type Acknowledger interface {
	AcknowledgesSpecs() bool
}

// sending records that a spec of b is about to go to cluster, so that it
// is sent again if no status acknowledges it.
func (s *Server) sending(b *binding, cluster string, evt *cloudevents.Event) {
	if !b.acked {
		return
	}
	id, sp, err := specOf(evt)
	if err != nil {
		return // sent as it is, and never waited for
	}
	s.acks.Send(ack.Peer{Cluster: cluster, DataType: b.peer}, id, sp.held.Version, false, nil, time.Now())
}

// unsent forgets a spec no agent of cluster took from this server: the
// agent is not connected here, and its spec resync when it connects
// brings it what it lacks.
func (s *Server) unsent(b *binding, cluster, resourceID string) {
	if b.acked {
		s.acks.Forget(ack.Peer{Cluster: cluster, DataType: b.peer}, resourceID)
	}
}

// acknowledge records a status of b from cluster's agent: whatever becomes
// of it, the agent holds the spec at its version.
func (s *Server) acknowledge(b *binding, cluster string, evt *cloudevents.Event) {
	if !b.acked {
		return
	}
	id, _, _ := types.StringExtension(evt, types.ExtResourceID)
	version, ok, err := types.Int64Extension(evt, types.ExtResourceVersion)
	if id == "" || !ok || err != nil {
		return
	}
	d, ok, _ := s.acks.Acked(ack.Peer{Cluster: cluster, DataType: b.peer}, id, version, time.Now())
	if ok && s.metrics != nil {
		s.metrics.firstStatusLatency.WithLabelValues(b.peer).Observe(d.Seconds())
	}
}

// resynced records a spec resync of b from cluster's agent: its answer
// sends what the agent lacks.
func (s *Server) resynced(b *binding, cluster string) {
	if b.acked {
		s.acks.Resynced(ack.Peer{Cluster: cluster, DataType: b.peer}, time.Now())
	}
}

// resendLoop sends again what is due (ack.Tracker.Due) until ctx ends.
// Every Serve runs one; a spec is due once, whichever loop takes it.
func (s *Server) resendLoop(ctx context.Context) {
	tick := time.NewTicker(s.acks.Config().Tick())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for p, due := range s.acks.Due(now) {
				i := slices.IndexFunc(s.bindings, func(b *binding) bool { return b.peer == p.DataType })
				if i < 0 {
					continue // not tracked by this server: cannot happen
				}
				for _, d := range due {
					if ctx.Err() != nil {
						return
					}
					s.resend(ctx, s.bindings[i], p.Cluster, d)
				}
			}
		}
	}
}

// resend sends a spec again as its Service has it now, if at the version
// that went unacknowledged or newer; one the Service no longer has (or
// has older: a store that lost its versions) is not waited for any more,
// and the agent's next spec resync settles it.
func (s *Server) resend(ctx context.Context, b *binding, cluster string, d ack.Due) {
	log := s.log.WithValues("dataType", b.dataType, "cluster", cluster, "resourceID", d.ResourceID)
	evt, err := b.svc.Get(ctx, d.ResourceID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			s.unsent(b, cluster, d.ResourceID)
			return
		}
		log.Error(err, "cannot read an unacknowledged spec to send it again; tried again later")
		return
	}
	_, sp, err := specOf(evt)
	if err != nil || sp.held.Version < d.Version {
		s.unsent(b, cluster, d.ResourceID)
		return
	}
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		log.Error(err, "cannot encode an unacknowledged spec; not sent again")
		s.unsent(b, cluster, d.ResourceID)
		return
	}
	s.sending(b, cluster, evt) // a newer version than the one due replaces it
	route := options.Route{Role: options.RoleSpec, Source: s.sourceID, Cluster: cluster}
	if s.reg.route(route, newQueued(cluster, pbe, b.dataType)) == 0 {
		s.unsent(b, cluster, d.ResourceID)
		return
	}
	log.V(4).Info("sent an unacknowledged spec again", "version", d.Version)
	if s.metrics != nil {
		s.metrics.specsResent.WithLabelValues(b.peer).Inc()
	}
}
