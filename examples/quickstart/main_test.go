package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// sarama (Kafka) starts go-metrics' process-wide meter goroutine.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

func TestQuickstartRoundTrips(t *testing.T) {
	for _, transport := range []string{"mqtt", "kafka", "grpc"} {
		t.Run(transport, func(t *testing.T) { roundTrip(t, transport) })
	}
}

func roundTrip(t *testing.T, transport string) {
	var out bytes.Buffer
	if err := run(context.Background(), config{transport: transport, clusters: 3, works: 60, timeout: 30 * time.Second}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Statuses may come back more than once (a resync can re-send), so their
	// count is not checked; every phase's confirmation is.
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"delivered and Available 60/60", "updated to 2 replicas 30/30", "deletes confirmed 20/20", "summary: 60 works delivered"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestQuickstartRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), config{transport: "mqtt", clusters: 0, works: 1, timeout: time.Second}, &bytes.Buffer{}); err == nil {
		t.Fatal("accepted zero clusters")
	}
	if err := run(context.Background(), config{transport: "pigeon", clusters: 1, works: 1, timeout: time.Second}, &bytes.Buffer{}); err == nil {
		t.Fatal("accepted an unknown transport")
	}
}
