package generic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
)

// fakeProber records probes and redials; a probe comes back only if
// hearing, and then at once.
type fakeProber struct {
	options.Transport // not called
	mu                sync.Mutex
	h                 *hearing
	hearing           bool
	deafForGood       bool // redials do not help
	unsupported       map[options.Role]bool
	probes, redials   int
}

func (p *fakeProber) Probe(_ context.Context, sub options.Subscription, evt *cloudevents.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unsupported[sub.Role] {
		return fmt.Errorf("%w: a broadcast", options.ErrProbeUnsupported)
	}
	p.probes++
	if p.hearing && evt.Type() == options.ProbeType {
		p.h.hear(sub.Role)
	}
	return nil
}

func (p *fakeProber) Redial(error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redials++
	p.hearing = !p.deafForGood // a new connection delivers
}

type deafCount struct {
	NopObserver
	n int
}

func (d *deafCount) SubscriptionDeaf(Side, string) { d.n++ }

// The check in virtual time: a subscription that goes deaf right after it
// delivered is found within the bound, with two probes an idle bound and
// none while events come; it reconnects once, and is healthy again when
// the next probe comes back. A subscription the transport cannot probe is
// never called deaf.
func TestTheDeliveryCheckFindsADeafSubscriptionWithinItsBound(t *testing.T) {
	const bound = time.Minute
	p := &fakeProber{hearing: true, unsupported: map[options.Role]bool{options.RoleSpecResync: true}}
	obs := &deafCount{}
	h := newHearing(SideSource, bound, p, obs)
	p.h = h
	h.watch("hub", options.SourceSubscriptions("hub", nil))
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h.begin(start)
	log := logr.Discard()
	now := start
	advance := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); {
			now = now.Add(h.tick())
			h.check(ctx, now, log)
		}
	}

	// Busy: a status every tick, and no probe.
	for range 24 {
		h.hear(options.RoleStatus)
		advance(h.tick())
	}
	if p.probes != 0 {
		t.Fatalf("a busy subscription was probed %d times", p.probes)
	}
	// Idle but hearing: two probes a bound, each back at once.
	advance(4 * bound)
	if p.probes < 7 || p.probes > 9 {
		t.Errorf("an idle subscription was probed %d times in four bounds, want about 8", p.probes)
	}
	if err := h.healthy(); err != nil {
		t.Fatalf("healthy while hearing: %v", err)
	}

	// Deaf right after its last delivery.
	h.hear(options.RoleStatus)
	advance(h.tick())
	last := now
	p.mu.Lock()
	p.hearing = false
	p.mu.Unlock()
	for h.healthy() == nil {
		if now.Sub(last) > 2*bound {
			t.Fatal("a deaf subscription was not found")
		}
		advance(h.tick())
	}
	if took := now.Sub(last); took > bound {
		t.Errorf("found deaf %v after its last delivery, want within the bound (%v)", took, bound)
	}
	err := h.healthy()
	if !errors.Is(err, options.ErrDeaf) {
		t.Errorf("Healthy: %v, want ErrDeaf", err)
	}
	if p.redials != 1 || obs.n != 1 {
		t.Errorf("redials %d, counted deaf %d; want 1 each", p.redials, obs.n)
	}
	// The redial makes it hear: the next probe comes back.
	advance(h.wait() + h.tick())
	if err := h.healthy(); err != nil {
		t.Errorf("still deaf after the redial: %v", err)
	}
	for _, s := range h.stats() {
		if s.Subscription == "specresync" && s.Deaf {
			t.Error("the subscription nobody can probe is deaf")
		}
	}
}

// A subscription that stays deaf through a redial is redialed again once a
// bound, not at every probe.
func TestADeafSubscriptionIsRedialedOnceABound(t *testing.T) {
	const bound = time.Minute
	p := &fakeProber{deafForGood: true}
	h := newHearing(SideAgent, bound, p, NopObserver{})
	p.h = h
	h.watch("cluster1", options.AgentSubscriptions("cluster1", nil)[:1])
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h.begin(now)
	for range 12 * 10 { // ten bounds
		now = now.Add(h.tick())
		h.check(context.Background(), now, logr.Discard())
	}
	if p.redials < 9 || p.redials > 10 {
		t.Errorf("%d redials in ten bounds, want one a bound", p.redials)
	}
}
