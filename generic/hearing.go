package generic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
)

// DefaultDeliveryCheck is the bound within which a client finds out that a
// subscription delivers nothing (see WithDeliveryCheck).
const DefaultDeliveryCheck = time.Minute

// WithDeliveryCheck sets within how long a client finds out that one of its
// subscriptions delivers nothing while its connection looks up: a broker
// that lost the subscription, a proxy that keeps the connection but drops
// what is delivered on it, a receive loop that died. Pings pass then, and
// nothing else would notice; the sends of the client's peer would go
// unheard until it reconnected for another reason.
//
// A subscription that has delivered nothing for about half of bound is probed
// (options.Prober: an event the transport sends itself through it, or the
// broker's sign that it delivered all it held), and one whose probe has not
// come back a third of bound later is deaf: Healthy says so (wrapping
// options.ErrDeaf, naming the subscription and since when), the client
// logs it once at the default level and counts it (Observer's
// SubscriptionDeaf), and the transport reconnects, after which the client
// resyncs, and again each bound while the subscription stays deaf. A busy
// subscription is never probed; an idle one costs two probes a bound. A
// transport that is no options.Prober, or a subscription it cannot probe
// (a broadcast, such as resync requests, that every peer receives), is not
// checked; the age of its last event is still in Stats. 0 turns it off.
// Default: DefaultDeliveryCheck.
func WithDeliveryCheck(bound time.Duration) Option {
	return option(func(c *config) { c.deliveryCheck = bound })
}

// hearing watches whether each of a client's subscriptions still delivers
// (see WithDeliveryCheck). Deliver counts what each role's subscription
// delivers, with one atomic add per event; a loop on its own goroutine
// does the rest, every tick.
type hearing struct {
	side   Side
	bound  time.Duration
	prober options.Prober // nil if the transport is none
	obs    Observer
	heard  [int(options.RoleStatusResync) + 1]atomic.Uint64 // deliveries by role

	mu     sync.Mutex
	id     string // the client's, the probes' source
	subs   []options.Subscription
	states []hearingState // one per subscription
}

// hearingState is what the loop knows of one subscription.
type hearingState struct {
	count     uint64             // deliveries of its role as of lastHeard
	lastHeard time.Time          // when the count last moved (or the client started)
	probed    time.Time          // when the outstanding probe went; zero for none
	cancel    context.CancelFunc // ends the outstanding probe
	deaf      time.Time          // when it last delivered, if it is deaf; zero if not
	healed    time.Time          // when the transport last reconnected for it
	skip      bool               // the transport cannot probe it
}

func newHearing(side Side, bound time.Duration, tr options.Transport, obs Observer) *hearing {
	p, _ := tr.(options.Prober)
	return &hearing{side: side, bound: bound, prober: p, obs: obs}
}

// watch sets the subscriptions to watch, and the ID of the client that
// probes them, when the client starts.
func (h *hearing) watch(id string, subs []options.Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.id, h.subs, h.states = id, subs, make([]hearingState, len(subs))
}

// hear counts a delivery of role. It runs on the transport's receive
// goroutines, for every event.
func (h *hearing) hear(role options.Role) {
	if role > 0 && int(role) < len(h.heard) {
		h.heard[role].Add(1)
	}
}

// The parts of the bound: a subscription quiet for quiet is probed; a
// probe not back within wait makes it deaf; the loop looks every tick. The
// worst case, a subscription that went deaf right after its last delivery,
// is found within quiet + wait + two ticks: a tick short of the bound, for
// timers that fire late.
func (h *hearing) quiet() time.Duration { return h.bound/2 - h.tick() }
func (h *hearing) wait() time.Duration  { return h.bound / 3 }
func (h *hearing) tick() time.Duration  { return h.bound / 12 }

// run checks the subscriptions every tick until ctx ends, once ready says
// the transport has started.
func (h *hearing) run(ctx context.Context, ready func() bool, log func() logr.Logger) {
	ticker := time.NewTicker(h.tick())
	defer ticker.Stop()
	started := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			if !started {
				if !ready() {
					continue
				}
				started = true
				h.begin(now)
			}
			h.check(ctx, now, log())
		}
	}
}

// begin counts the subscriptions as heard from now, when the transport has
// started.
func (h *hearing) begin(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.states {
		h.states[i].lastHeard = now
		h.states[i].count = h.heard[h.subs[i].Role].Load()
	}
}

// check looks at every subscription once.
func (h *hearing) check(ctx context.Context, now time.Time, log logr.Logger) {
	h.mu.Lock()
	subs, id := h.subs, h.id
	h.mu.Unlock()
	for i, sub := range subs {
		probe, heal, since, first, recovered := h.step(i, now)
		if recovered {
			log.Info("subscription delivers again", "subscription", sub.Role.String())
		}
		if first {
			h.obs.SubscriptionDeaf(h.side, sub.Role.String())
			log.Info("subscription delivers nothing; reconnecting", "subscription", sub.Role.String(),
				"lastDelivery", since.UTC().Format(time.RFC3339), "probeTimeout", h.wait())
		}
		if heal {
			h.prober.Redial(fmt.Errorf("the %s subscription has delivered nothing since %s", sub.Role, since.UTC().Format(time.RFC3339)))
		}
		if probe {
			h.probe(ctx, now, i, sub, id, log)
		}
	}
}

// step advances subscription i's state to now: whether to send a probe;
// whether to redial, and since when it is deaf; whether it just went deaf
// (first); whether it just delivered again after it was deaf.
func (h *hearing) step(i int, now time.Time) (probe, heal bool, since time.Time, first, recovered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.states[i]
	if n := h.heard[h.subs[i].Role].Load(); n != s.count {
		recovered = !s.deaf.IsZero()
		if s.cancel != nil {
			s.cancel()
		}
		*s = hearingState{count: n, lastHeard: now, skip: s.skip}
		return false, false, time.Time{}, false, recovered
	}
	if s.skip || h.prober == nil {
		return false, false, time.Time{}, false, false
	}
	switch {
	case !s.probed.IsZero() && now.Sub(s.probed) >= h.wait():
		// Lost: the next one goes at once.
		s.probed = time.Time{}
		s.cancel()
		if s.deaf.IsZero() {
			s.deaf, s.healed = s.lastHeard, now
			return true, true, s.deaf, true, false
		}
		if now.Sub(s.healed) >= h.bound {
			s.healed = now // the last redial did not help
			return true, true, s.deaf, false, false
		}
		return true, false, time.Time{}, false, false
	case s.probed.IsZero() && (!s.deaf.IsZero() || now.Sub(s.lastHeard) >= h.quiet()):
		return true, false, time.Time{}, false, false
	}
	return false, false, time.Time{}, false, false
}

// probe sends a probe through subscription i, at now.
func (h *hearing) probe(ctx context.Context, now time.Time, i int, sub options.Subscription, id string, log logr.Logger) {
	// The transport gives up on the probe when this ends: when it comes
	// back, something else comes, or it is lost.
	pctx, cancel := context.WithTimeout(ctx, h.wait()+h.tick())
	err := h.prober.Probe(pctx, sub, options.NewProbe(id))
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.states[i]
	switch {
	case errors.Is(err, options.ErrProbeUnsupported):
		cancel()
		s.skip = true
		log.V(2).Info("subscription not probed", "subscription", sub.Role.String(), "why", err)
	case err != nil:
		cancel()
		log.V(2).Info("cannot probe the subscription now", "subscription", sub.Role.String(), "err", err)
	default:
		s.probed, s.cancel = now, cancel
	}
}

// healthy returns an error wrapping options.ErrDeaf while a subscription
// is deaf.
func (h *hearing) healthy() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, s := range h.states {
		if !s.deaf.IsZero() {
			return fmt.Errorf("%w: the %s subscription has delivered nothing since %s while connected (a probe through it did not come back); reconnecting",
				options.ErrDeaf, h.subs[i].Role, s.deaf.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// stats returns what Stats says of each subscription.
func (h *hearing) stats() []SubscriptionStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]SubscriptionStats, len(h.subs))
	for i, s := range h.states {
		out[i] = SubscriptionStats{Subscription: h.subs[i].Role.String(), LastEvent: s.lastHeard, Deaf: !s.deaf.IsZero()}
	}
	return out
}
