// Package bench is the bench command: one hub and many agents in one
// process, through a real broker, phase by phase, each against the ceiling
// of the bare transport. examples/bench runs it over MQTT, Kafka and gRPC;
// examples/brokers/bench, in a module of its own, also over NATS JetStream
// and Google Cloud Pub/Sub, whose libraries the main module does not
// require.
//
// Phases (-phases, default all, in this order):
//
//	raw           the same number of same-size CloudEvents through the same
//	              transport and broker, with no SDK logic: the ceiling
//	deliver       hub Create of every work → every agent's informer holds it
//	agent-resync  agents restart with empty caches → hold everything again
//	status        every agent updates every status → the hub's informer sees it
//	hub-resync    the hub restarts (its works persisted, no statuses) → has
//	              every status again
//
// Every phase but raw needs deliver; hub-resync needs status.
//
// It prints a table — works/s per phase and its ratio to raw, create→agent
// latency, heap per work, peak RSS, goroutines at the end — and with -json
// the same as JSON. A progress line runs on stderr.
package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
)

// Main runs the bench with the command line's flags and exits: 0 when
// every phase finished, 1 when not, 2 on a bad flag.
func Main(more ...Broker) {
	cmdutil.Exit("bench", Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, more...))
}

// Run runs the bench with the flags args: the table (and JSON) on out, the
// progress on progress.
func Run(ctx context.Context, args []string, out, progress io.Writer, more ...Broker) error {
	cfg := defaultConfig()
	cfg.brokers = more
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(progress)
	fs.StringVar(&cfg.transport, "transport", cfg.transport, "transport: "+strings.Join(transports(more), ", "))
	fs.StringVar(&cfg.broker, "broker", "", "broker address (default: an embedded one)")
	fs.StringVar(&cfg.contentMode, "content-mode", "", "MQTT content mode: binary (default) or structured (mqtt.Config.ContentMode)")
	fs.StringVar(&cfg.compression, "compression", "", "gRPC compression of the clients and the embedded broker: gzip (default: none)")
	fs.IntVar(&cfg.clusters, "clusters", cfg.clusters, "how many agents (clusters)")
	fs.IntVar(&cfg.works, "works", cfg.works, "how many works in all, spread over the clusters")
	fs.IntVar(&cfg.manifestBytes, "manifest-bytes", cfg.manifestBytes, "size of each work's Deployment manifest")
	phases := fs.String("phases", strings.Join(cfg.phases, ","), "phases to run, comma-separated")
	fs.IntVar(&cfg.kafkaPartitions, "kafka-partitions", cfg.kafkaPartitions, "partitions per topic of the embedded Kafka: an agent reads its cluster's partition, so each also reads clusters/partitions clusters' spec traffic")
	fs.BoolVar(&cfg.noRateLimit, "no-rate-limit", false, "turn the publish rate limiter off (default: the SDK's default limit)")
	fs.IntVar(&cfg.specWindow, "spec-window", 0, "pace each agent with a window of this many unacknowledged specs (generic.WithSpecWindow; default: off)")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON too")
	fs.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "give up a phase after this long")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&cfg.memProfile, "memprofile", "", "write a heap profile, taken after delivery, to this file")
	memProfileRate := fs.Int("memprofilerate", runtime.MemProfileRate, "sample one allocation per this many bytes in the heap profile (1: every allocation, exact but slow; the rates the run prints are then not comparable)")
	if err := cmdutil.Parse(fs, args); err != nil {
		return err
	}
	cfg.phases = strings.Split(*phases, ",")
	runtime.MemProfileRate = *memProfileRate
	stopProfile, err := benchworks.CPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	res, err := run(ctx, cfg, progress)
	if res != nil {
		res.print(out)
		if cfg.json {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			_ = enc.Encode(res)
		}
	}
	return err
}

type config struct {
	transport       string
	broker          string
	contentMode     string
	compression     string
	clusters        int
	works           int
	manifestBytes   int
	phases          []string
	noRateLimit     bool
	specWindow      int
	kafkaPartitions int
	json            bool
	timeout         time.Duration
	memProfile      string
	brokers         []Broker // besides MQTT, Kafka and gRPC
}

var allPhases = []string{"raw", "deliver", "agent-resync", "status", "hub-resync"}

func defaultConfig() config {
	return config{transport: "mqtt", clusters: 10, works: 1000, manifestBytes: 2048, phases: allPhases, timeout: 10 * time.Minute, kafkaPartitions: kafkatest.DefaultPartitions}
}

func (c config) validate() error {
	var errs []string
	if c.clusters < 1 || c.works < c.clusters {
		errs = append(errs, "want 1 <= clusters <= works")
	}
	if c.specWindow < 0 {
		errs = append(errs, "-spec-window must be 0 (off) or more")
	}
	if c.kafkaPartitions < 1 {
		errs = append(errs, "-kafka-partitions must be at least 1")
	}
	switch {
	case c.contentMode != "" && c.transport != "mqtt":
		errs = append(errs, "-content-mode is MQTT's: use it with -transport mqtt")
	case c.contentMode != "" && c.contentMode != mqtt.ContentModeBinary && c.contentMode != mqtt.ContentModeStructured:
		errs = append(errs, fmt.Sprintf("-content-mode %q: want %s or %s", c.contentMode, mqtt.ContentModeBinary, mqtt.ContentModeStructured))
	}
	if c.compression != "" && c.transport != "grpc" {
		errs = append(errs, "-compression is gRPC's: use it with -transport grpc")
	} else if err := protocol.CheckCompression("-compression", c.compression); err != nil {
		errs = append(errs, err.Error())
	}
	if c.manifestBytes < 512 {
		errs = append(errs, "-manifest-bytes must be at least 512")
	}
	for _, p := range c.phases {
		known := false
		for _, k := range allPhases {
			known = known || p == k
		}
		if !known {
			errs = append(errs, fmt.Sprintf("unknown phase %q (want %s)", p, strings.Join(allPhases, ",")))
		}
	}
	has := func(p string) bool { return slices.Contains(c.phases, p) }
	for _, p := range []string{"agent-resync", "status", "hub-resync"} {
		if has(p) && !has("deliver") {
			errs = append(errs, fmt.Sprintf("phase %s needs phase deliver", p))
		}
	}
	if has("hub-resync") && !has("status") {
		errs = append(errs, "phase hub-resync needs phase status")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Result is what a run measured.
type Result struct {
	Transport     string        `json:"transport"`
	ContentMode   string        `json:"contentMode,omitempty"`
	Compression   string        `json:"compression,omitempty"`
	Clusters      int           `json:"clusters"`
	Works         int           `json:"works"`
	ManifestBytes int           `json:"manifestBytes"`
	RateLimit     string        `json:"rateLimit"`
	SpecWindow    int           `json:"specWindow,omitempty"`
	Phases        []PhaseResult `json:"phases"`
	// HeapPerWork is the live heap the works add after delivery, hub and
	// agents together; HubHeapPerWork and AgentHeapPerWork split it (measured
	// as the agents close, so only with the agent-resync phase). In
	// production each side is a process of its own.
	HeapPerWork      int   `json:"heapBytesPerWork"`
	HubHeapPerWork   int   `json:"hubHeapBytesPerWork,omitempty"`
	AgentHeapPerWork int   `json:"agentHeapBytesPerWork,omitempty"`
	PeakRSS          int64 `json:"peakRSSBytes"`
	Goroutines       int   `json:"goroutinesAtEnd"`
	// BrokerDropped is how many messages the embedded broker dropped for
	// subscribers that fell behind; absent where the broker does not tell.
	// Periodic resync is off during a run, so a drop that is not healed by
	// a phase's own resync makes that phase time out.
	BrokerDropped *int64 `json:"brokerDropped,omitempty"`
	// SendsFailed counts the clients' sends that failed. A holder's
	// publisher and a resync answer try such a send again unless its error
	// is permanent: a phase that runs slow with many of them waited on
	// retries, not on work.
	SendsFailed int64 `json:"sendsFailed"`
	// EventsDropped counts the events the clients received and skipped
	// (stale, out of order, undecodable: generic.DropReason).
	EventsDropped int64 `json:"eventsDropped"`
	// SpecsResent counts the specs the hub sent again because no status
	// acknowledged them: how a status the broker lost is asked for again.
	SpecsResent int64 `json:"specsResent"`
}

// PhaseResult is one phase's numbers.
type PhaseResult struct {
	Name        string        `json:"name"`
	Duration    time.Duration `json:"durationNanos"`
	WorksPerSec float64       `json:"worksPerSecond"`
	RatioToRaw  float64       `json:"ratioToRaw,omitempty"`
	P50         time.Duration `json:"p50Nanos,omitempty"`
	P99         time.Duration `json:"p99Nanos,omitempty"`
	// WireBytes is what the clients' messages took on the wire during the
	// phase, sent and received (each event counts where it leaves its
	// sender and where it reaches its receiver); 0 where the transport
	// does not tell.
	WireBytes int64 `json:"wireBytes,omitempty"`
}

func (r *Result) print(w io.Writer) {
	window := "off"
	if r.SpecWindow > 0 {
		window = fmt.Sprint(r.SpecWindow)
	}
	transport := r.Transport
	if r.ContentMode != "" {
		transport += " (" + r.ContentMode + ")"
	}
	if r.Compression != "" {
		transport += " (" + r.Compression + ")"
	}
	fmt.Fprintf(w, "\nworkwire bench: transport %s, %d works over %d clusters, %d-byte manifests, rate limit %s, spec window %s\n\n",
		transport, r.Works, r.Clusters, r.ManifestBytes, r.RateLimit, window)
	fmt.Fprintf(w, "%-14s %10s %12s %8s %10s %10s %10s\n", "phase", "time", "works/s", "vs raw", "p50", "p99", "wire/work")
	for _, p := range r.Phases {
		ratio, p50, p99, wire := "", "", "", ""
		if p.RatioToRaw > 0 {
			ratio = fmt.Sprintf("%.0f%%", 100*p.RatioToRaw)
		}
		if p.P50 > 0 {
			p50, p99 = p.P50.Round(time.Microsecond).String(), p.P99.Round(time.Microsecond).String()
		}
		if p.WireBytes > 0 {
			wire = fmt.Sprintf("%d B", p.WireBytes/int64(r.Works))
		}
		fmt.Fprintf(w, "%-14s %10s %12.0f %8s %10s %10s %10s\n", p.Name, p.Duration.Round(time.Millisecond), p.WorksPerSec, ratio, p50, p99, wire)
	}
	fmt.Fprintf(w, "\nheap per work after delivery: %d B", r.HeapPerWork)
	if r.HubHeapPerWork > 0 {
		fmt.Fprintf(w, " (hub %d B, agents %d B)", r.HubHeapPerWork, r.AgentHeapPerWork)
	}
	fmt.Fprintf(w, "   peak RSS: %.1f MiB   goroutines at the end: %d\n", float64(r.PeakRSS)/(1<<20), r.Goroutines)
	if r.BrokerDropped != nil {
		fmt.Fprintf(w, "messages the broker dropped for slow subscribers: %d\n", *r.BrokerDropped)
	}
	fmt.Fprintf(w, "client sends that failed: %d   events the clients skipped: %d   specs the hub sent again: %d\n",
		r.SendsFailed, r.EventsDropped, r.SpecsResent)
}
