package generic_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
)

// The publish rate limit holds Publish back, but never the answers to a
// resync request: those are bounded by what the peer asked for, and a
// limited answer to a fleet's resync would stall for hours. Both sides here
// may publish once an hour, and still exchange hundreds of resources.
func TestRateLimitSparesResyncAnswers(t *testing.T) {
	t.Parallel()
	const works = 300
	oncePerHour := generic.WithPublishRateLimit(1.0/3600, 1)
	b := memory.NewBroker()
	hubStore, agentStore := newStore(), newStore()
	for i := range works {
		w := newWidget(src, "cluster1", fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		w.Status = "applied"
		agentStore.put(w)
	}
	for i := range works {
		hubStore.put(newWidget(src, "cluster2", fmt.Sprint("w", i), "s", 1))
	}

	// cluster1's agent holds every work with a status the hub lacks: the
	// hub's status resync at start brings all of them back.
	startAgent(t, b.Transport(), "cluster1", agentStore, oncePerHour)
	hub := startSource(t, src, b.Transport(), hubStore, oncePerHour)
	eventually(t, "every status through status resync", func() bool {
		ws, _ := hubStore.List(generic.ListOptions{ClusterName: "cluster1"})
		for _, w := range ws {
			if w.Status != "applied" {
				return false
			}
		}
		return len(ws) == works
	})

	// cluster2's agent starts empty: the hub's answer to its spec resync
	// sends every work.
	late := newStore()
	startAgent(t, b.Transport(), "cluster2", late, oncePerHour)
	eventually(t, "every work through spec resync", sameSpecs(hubStore, late, "cluster2"))

	// Publish itself is limited: the burst of one goes, the next waits an
	// hour, which a short deadline refuses at once.
	ctx := context.Background()
	w := newWidget(src, "cluster2", "extra", "s", 1)
	hubStore.put(w)
	if err := hub.client.Publish(ctx, specCreate, w); err != nil {
		t.Fatalf("first Publish: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := hub.client.Publish(short, specUpdate, w)
	if err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("second Publish within the hour: %v, want a rate limit error", err)
	}
}

// A resource too large for the transport is reported and skipped in a
// resync answer; the resources after it still go, and the answer is not
// retried for ever on its account.
func TestOversizeResourceDoesNotBlockAResyncAnswer(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker(memory.WithMaxEventBytes(4096))
	hubStore := newStore()
	for i := range 20 {
		spec := "s"
		if i == 7 {
			spec = strings.Repeat("x", 8192)
		}
		hubStore.put(newWidget(src, "cluster1", fmt.Sprint("w", i), spec, 1))
	}
	var mu sync.Mutex
	var skipped []string
	onError := func(_ context.Context, err error, msg string, kv ...any) {
		if errors.Is(err, options.ErrTooLarge) {
			mu.Lock()
			skipped = append(skipped, fmt.Sprint(kv...))
			mu.Unlock()
		}
	}
	source := startSource(t, src, b.Transport(), hubStore, generic.WithErrorHandler(onError))
	agentStore := newStore()
	startAgent(t, b.Transport(), "cluster1", agentStore)
	eventually(t, "the other 19 works", func() bool { return agentStore.len() == 19 })
	eventually(t, "the answer completed", func() bool { return source.obs.answers() >= 1 })
	if _, ok := agentStore.get("uid-cluster1-w7"); ok {
		t.Error("the oversize work arrived")
	}
	mu.Lock()
	defer mu.Unlock()
	// Once per resync answer: the agent may resync more than once.
	for _, s := range skipped {
		if !strings.Contains(s, "uid-cluster1-w7") {
			t.Errorf("reported as too large: %q, want only w7", s)
		}
	}
	if len(skipped) == 0 {
		t.Error("the oversize work was not reported")
	}
}
