package generic_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options/memory"
)

// BenchmarkSpecResync100k is one agent's spec resync of 100,000 resources
// the source holds at the same versions: the agent lists and batches its
// versions, the source decodes every batch and diffs it against its own
// listing, and sends nothing. One op is one whole resync.
func BenchmarkSpecResync100k(b *testing.B) {
	const n = 100000
	ws := make([]*widget, n)
	for i := range ws {
		ws[i] = newWidget(src, "cluster1", fmt.Sprint("w-", i), "spec", 3)
	}
	broker := memory.NewBroker()
	source := startSource(b, src, broker.Transport(), newStore(ws...))
	agent := startAgent(b, broker.Transport(), "cluster1", newStore(ws...))
	// The agent resyncs on start; let the source answer that first.
	eventually(b, "the start-up resync answered", func() bool { return source.obs.answers() >= 1 })
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		before := source.obs.answers()
		if err := agent.client.Resync(ctx, widgets); err != nil {
			b.Fatal(err)
		}
		await(b, func() bool { return source.obs.answers() > before })
	}
	b.StopTimer()
	for _, a := range []string{"create_request", "update_request", "delete_request"} {
		if got := source.obs.sends("spec." + a); got != 0 {
			b.Fatalf("the source sent %d spec %s events; the agent held everything", got, a)
		}
	}
}

// BenchmarkStatusResync100k is the source's status resync of 100,000
// resources whose statuses the agent holds too: the source lists and hashes
// its statuses and batches them, the agent decodes every batch and compares
// each hash with its own, and sends nothing. One op is one whole resync.
func BenchmarkStatusResync100k(b *testing.B) {
	const n = 100000
	ws := make([]*widget, n)
	for i := range ws {
		ws[i] = newWidget(src, "cluster1", fmt.Sprint("w-", i), "spec", 3)
		ws[i].Status = "applied"
	}
	broker := memory.NewBroker()
	agent := startAgent(b, broker.Transport(), "cluster1", newStore(ws...))
	source := startSource(b, src, broker.Transport(), newStore(ws...))
	// The source resyncs on start; let the agent answer that first.
	eventually(b, "the start-up resync answered", func() bool { return agent.obs.answers() >= 1 })
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		before := agent.obs.answers()
		if err := source.client.Resync(ctx, widgets); err != nil {
			b.Fatal(err)
		}
		await(b, func() bool { return agent.obs.answers() > before })
	}
	b.StopTimer()
	if got := agent.obs.sends("status.update_request"); got != 0 {
		b.Fatalf("the agent sent %d statuses; the source held them all", got)
	}
}

// await polls cond finely, so that waiting adds little to a benchmark's
// time; it fails b after a minute.
func await(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(50 * time.Microsecond)
	}
}
