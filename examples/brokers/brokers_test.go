package brokers_test

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/examples/brokers"
	"github.com/workwire/sdk-go/examples/internal/bench"
	"github.com/workwire/sdk-go/examples/internal/quickstart"
)

// OpenCensus, which the Pub/Sub client links, starts a process-wide
// worker; the Pub/Sub client's stream keep-alive goroutine notices that
// its stream ended only at its next tick, up to 10 s after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"))
}

var transports = []string{"nats", "pubsub"}

// The quickstart round-trips over each on an embedded server: it returns
// nil only when every work was delivered, updated and deleted.
func TestQuickstartOverEach(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			quickstartRun(t, "-transport", transport)
		})
	}
}

// With WORKWIRE_NATS_URL, the quickstart over that server, in a stream of
// its own that it deletes.
func TestQuickstartOverRealNATS(t *testing.T) {
	url := os.Getenv("WORKWIRE_NATS_URL")
	if url == "" {
		t.Skip("WORKWIRE_NATS_URL is not set")
	}
	before := runStreams(t, url)
	quickstartRun(t, "-transport", "nats", "-broker", url)
	if after := runStreams(t, url); len(after) > len(before) {
		t.Errorf("streams of runs before %v, after %v", before, after)
	}
}

// runStreams lists the streams of runs on the server at url.
func runStreams(t *testing.T, url string) []string {
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	streams := js.StreamNames(ctx)
	for name := range streams.Name() {
		if regexp.MustCompile(`^WORKWIRE_[0-9A-F]{8}$`).MatchString(name) {
			names = append(names, name)
		}
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func quickstartRun(t *testing.T, args ...string) {
	var out bytes.Buffer
	args = append(args, "-clusters", "3", "-works", "60", "-timeout", "1m")
	if err := quickstart.Run(context.Background(), args, &out, brokers.Quickstart()...); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(got, "summary: 60 works delivered") {
		t.Errorf("output lacks the summary:\n%s", out.String())
	}
}

// The bench runs every phase over each, the raw ceiling included.
func TestBenchOverEach(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			var out, progress bytes.Buffer
			args := []string{"-transport", transport, "-clusters", "3", "-works", "60", "-timeout", "1m"}
			if err := bench.Run(context.Background(), args, &out, &progress, brokers.Bench()...); err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			for _, phase := range []string{"raw", "deliver", "agent-resync", "status", "hub-resync"} {
				if !strings.Contains(out.String(), "\n"+phase+" ") {
					t.Errorf("no phase %s in:\n%s", phase, out.String())
				}
			}
		})
	}
}
