package generic_test

import (
	"context"
	"fmt"
	"testing"

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
		eventually(b, "the resync answered", func() bool { return source.obs.answers() > before })
	}
	b.StopTimer()
	for _, a := range []string{"create_request", "update_request", "delete_request"} {
		if got := source.obs.sends("spec." + a); got != 0 {
			b.Fatalf("the source sent %d spec %s events; the agent held everything", got, a)
		}
	}
}
