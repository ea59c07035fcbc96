package quickstart

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// sarama (Kafka) starts go-metrics' process-wide meter goroutine.
// With QUICKSTART_ARGS set, the test binary is the quickstart, run with
// those arguments (see TestInterruptStopsTheQuickstart).
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("QUICKSTART_ARGS"); ok {
		os.Args = append([]string{"quickstart"}, strings.Fields(args)...)
		Main()
		os.Exit(0)
	}
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
	var usage cmdutil.UsageError
	if err := Run(context.Background(), []string{"-works", "many"}, &bytes.Buffer{}); !errors.As(err, &usage) {
		t.Errorf("-works many: %v, want a usage error", err)
	}
	if err := Run(context.Background(), []string{"-works", "1", "extra"}, &bytes.Buffer{}); !errors.As(err, &usage) {
		t.Errorf("an extra argument: %v, want a usage error", err)
	}
}

// The transports that are modules of their own are not linked here; asking
// for one says where they run.
func TestQuickstartSaysWhereNATSAndPubSubRun(t *testing.T) {
	for _, transport := range []string{"nats", "pubsub"} {
		err := Run(context.Background(), []string{"-transport", transport}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "go -C examples/brokers run ./quickstart -transport "+transport) {
			t.Errorf("-transport %s: %v, want where it runs", transport, err)
		}
	}
}

// A -broker that is no address is an error, not a panic.
func TestQuickstartRejectsABadBroker(t *testing.T) {
	for _, transport := range []string{"mqtt", "grpc"} {
		err := run(context.Background(), config{transport: transport, broker: "127.0.0.1", clusters: 1, works: 1, timeout: time.Second}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "-broker") {
			t.Errorf("%s: %v, want an error about -broker", transport, err)
		}
	}
}

// Two quickstarts on one broker each see only their own works: their
// source and cluster IDs are their own.
func TestQuickstartsShareABroker(t *testing.T) {
	b := mqtttest.NewBroker(t)
	errs := make(chan error, 2)
	outs := [2]bytes.Buffer{}
	for i := range 2 {
		go func() {
			errs <- run(context.Background(), config{transport: "mqtt", broker: b.Addr(), clusters: 2, works: 100, timeout: 30 * time.Second}, &outs[i])
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("%v\n%s\n%s", err, outs[0].String(), outs[1].String())
		}
	}
	hubOf := func(out string) string {
		f := strings.Fields(out[strings.Index(out, "hub "):])
		return f[1]
	}
	if a, b := hubOf(outs[0].String()), hubOf(outs[1].String()); a == b {
		t.Errorf("both runs were hub %s", a)
	}
}

// An interrupted quickstart (Ctrl-C cancels its context) returns, closing
// what it started: TestMain checks no goroutine outlives it.
func TestQuickstartStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &cancelOn{w: &bytes.Buffer{}, marker: "connected", cancel: cancel}
	err := run(ctx, config{transport: "mqtt", clusters: 2, works: 100000, timeout: time.Minute}, out)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run after the interrupt: %v, want context.Canceled", err)
	}
}

// cancelOn cancels once what is written contains marker.
type cancelOn struct {
	w      *bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if strings.Contains(c.w.String(), c.marker) {
		c.cancel()
	}
	return n, err
}

// Ctrl-C stops the quickstart: it closes its clients and broker and exits 1
// saying it was interrupted, rather than running on or dying mid-write.
func TestInterruptStopsTheQuickstart(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "QUICKSTART_ARGS=-works 1000000 -timeout 2m")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && !strings.Contains(lines.Text(), "connected") {
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "context canceled") {
			t.Errorf("after Ctrl-C: %v, stderr %q; want exit status 1 saying the context was canceled", err, stderr.String())
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the quickstart did not stop after Ctrl-C")
	}
}

// lineWriter collects what the quickstart prints, and hands each line to
// lines as it comes.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // not a whole line yet
			return len(p), nil
		}
		select {
		case w.lines <- strings.TrimSpace(line):
		default:
		}
	}
}

// With -metrics-addr a running quickstart serves the clients' metrics:
// after the run it keeps serving until interrupted, and a scrape shows the
// histograms (send duration, event age, resync answers) and the gauges of
// the hub and its agents.
func TestQuickstartServesMetrics(t *testing.T) {
	out := &lineWriter{lines: make(chan string, 100)}
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{transport: "mqtt", clusters: 3, works: 30, timeout: time.Minute, metricsAddr: "127.0.0.1:0"}, out)
	}()
	var url string
	for running := true; running; {
		select {
		case line := <-out.lines:
			if u, ok := strings.CutPrefix(line, "metrics on "); ok {
				url = u
			}
			running = !strings.HasPrefix(line, "serving metrics until interrupted")
		case err := <-done:
			t.Fatalf("the quickstart ended: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the quickstart did not finish its run")
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`workwire_send_duration_seconds_bucket{side="source",subresource="spec"`,
		`workwire_send_duration_seconds_bucket{side="agent",subresource="status"`,
		`workwire_event_age_seconds_bucket{side="agent",subresource="spec"`,
		`workwire_event_age_seconds_bucket{side="source",subresource="status"`,
		`workwire_resync_answer_duration_seconds_count{side="source"}`,
		`workwire_resync_answer_size_events_count{side="source"}`,
		`workwire_connected_clients{side="source"} 1`,
		`workwire_connected_clients{side="agent"} 3`,
		`workwire_queued_tasks{side="agent"}`,
		`workwire_held_resources{side="agent"} 20`, // 30 works, 10 deleted
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
	interrupt()
	if err := <-done; err != nil {
		t.Errorf("after the interrupt: %v", err)
	}
}

// -id names the run's hub and clusters, so that tail can follow them, and
// is refused where it would not fit in the names it goes in.
func TestTheRunsIDNamesItsHubAndClusters(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"-id", "demo-1", "-clusters", "2", "-works", "4"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := "hub quickstart-hub-demo-1 and 2 agents (cluster-demo-1-1 to cluster-demo-1-2)"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	for _, bad := range []string{"Demo", "-demo", "demo-", "demo_1", "demo.1", strings.Repeat("a", 21)} {
		var usage cmdutil.UsageError
		if err := Run(context.Background(), []string{"-id", bad}, &out); !errors.As(err, &usage) || !strings.Contains(err.Error(), "-id") {
			t.Errorf("-id %q: %v, want a usage error", bad, err)
		}
	}
}
