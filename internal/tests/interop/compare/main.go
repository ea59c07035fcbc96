package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
)

func main() {
	if err := runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// runMain parses args, runs, and prints the table (and JSON) on out and
// the progress on progress.
func runMain(ctx context.Context, args []string, out, progress io.Writer) error {
	if len(args) > 0 && args[0] == "agent" {
		return runAgent(ctx, args[1:], out, progress)
	}
	cfg := defaultConfig()
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(progress)
	fs.StringVar(&cfg.sdk, "sdk", "", "the SDK to run: workwire or ocm (open-cluster-management.io/sdk-go); one per process")
	fs.IntVar(&cfg.works, "works", cfg.works, "how many works in all, spread over the clusters")
	fs.IntVar(&cfg.clusters, "clusters", cfg.clusters, "how many agents (clusters)")
	fs.IntVar(&cfg.manifestBytes, "manifest-bytes", cfg.manifestBytes, "size of each work's Deployment manifest")
	fs.BoolVar(&cfg.rateLimit, "rate-limit", false, "keep each SDK's default publish rate limit (default: off for both)")
	fs.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "give up a phase after this long")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON too")
	fs.BoolVar(&cfg.agentProcesses, "agent-processes", false, "run each agent as a process of its own, built with this SDK alone, and measure it (phases deliver and status)")
	fs.StringVar(&cfg.broker, "broker", "", "an MQTT broker's host:port to run over (default: one embedded in this process)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
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
	sdk           string
	works         int
	clusters      int
	manifestBytes int
	rateLimit     bool
	timeout       time.Duration
	json          bool
	// agentProcesses runs each agent as a process of its own.
	agentProcesses bool
	broker         string
	// agent is the one agent this process runs (an agent process), or
	// every agent when negative.
	agent int
}

func defaultConfig() config {
	return config{works: 1000, clusters: 10, manifestBytes: 2048, timeout: 10 * time.Minute, agent: -1}
}

// runsAgent says whether this process runs agent i.
func (c config) runsAgent(i int) bool { return c.agent < 0 || c.agent == i }

func (c config) validate() error {
	var errs []error
	if _, ok := drivers[c.sdk]; !ok {
		errs = append(errs, fmt.Errorf("-sdk %q: want one of %s", c.sdk, strings.Join(slices.Sorted(maps.Keys(drivers)), ", ")))
	}
	if c.agent >= c.clusters {
		errs = append(errs, fmt.Errorf("-agent %d: want it below -clusters %d", c.agent, c.clusters))
	}
	if c.clusters < 1 || c.works < c.clusters {
		errs = append(errs, errors.New("want 1 <= -clusters <= -works"))
	}
	if c.manifestBytes < 512 {
		errs = append(errs, errors.New("-manifest-bytes must be at least 512"))
	}
	if c.timeout <= 0 {
		errs = append(errs, errors.New("-timeout must be positive"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", errUsage, errors.Join(errs...))
	}
	return nil
}

const (
	sdkWorkwire = "workwire"
	sdkOCM      = "ocm"
	// hubID is the hub's source ID, as in examples/bench.
	hubID = "bench-hub"
	// informerResync is both hubs' and agents' informer resync period:
	// workwire's default (work.DefaultInformerResync), longer than a run.
	informerResync = 10 * time.Minute
)

// drivers make each SDK's driver, for a broker's address. Each SDK's file
// adds its own: an agent process is this program built with one SDK alone
// (tag compare_workwire or compare_ocm), so that it holds nothing of the
// other's.
var drivers = map[string]func(ctx context.Context, cfg config, broker string, log logr.Logger) (driver, error){}

// driver runs one SDK's hub and agents. Its methods are called from one
// goroutine, except reportApplied, called for every agent at once.
type driver interface {
	// startHub starts the hub.
	startHub(ctx context.Context) error
	// startAgents starts a fresh agent per cluster (a new client and a new
	// store) and returns once each has started; added sees each work an
	// agent's informer adds.
	startAgents(ctx context.Context, added func(*workv1.ManifestWork)) error
	// create creates w on the hub.
	create(ctx context.Context, w *workv1.ManifestWork) error
	// hubInformer is the hub's informer.
	hubInformer() cache.SharedIndexInformer
	// reportApplied makes agent i report every work it holds Applied.
	reportApplied(ctx context.Context, i int) error
	// closeAgents stops every agent.
	closeAgents()
	// restartHub stops the hub and builds a fresh one whose store holds
	// the works the hub had, without their statuses, as a source over a
	// database does; applied sees each status it takes that says
	// Applied. start starts it: the phase's clock runs from there.
	restartHub(ctx context.Context, applied func(name string)) (start func(context.Context) error, err error)
	// close stops everything.
	close()
	// describe says what the SDK and its transport are.
	describe() string
	// notes say where the SDK's phases differ in form from examples/bench.
	notes() []string
}

// Result is what a run measured.
type Result struct {
	SDK           string        `json:"sdk"`
	Setup         string        `json:"setup"`
	Clusters      int           `json:"clusters"`
	Works         int           `json:"works"`
	ManifestBytes int           `json:"manifestBytes"`
	RateLimit     string        `json:"publishRateLimit"`
	Phases        []PhaseResult `json:"phases"`
	// PeakRSS is the process's VmHWM once everything stopped.
	PeakRSS int64 `json:"peakRSSBytes"`
	// AgentProcesses are the agents' processes, with -agent-processes.
	AgentProcesses []AgentProcess `json:"agentProcesses,omitempty"`
	Goroutines     int            `json:"goroutinesAtEnd"`
	BrokerDropped  int64          `json:"brokerDropped"`
	GoVersion      string         `json:"goVersion"`
	Notes          []string       `json:"notes,omitempty"`
	Logs           []LogCount     `json:"logs,omitempty"`
}

// PhaseResult is one phase's numbers.
type PhaseResult struct {
	Name        string        `json:"name"`
	Duration    time.Duration `json:"durationNanos"`
	WorksPerSec float64       `json:"worksPerSecond"`
	// Count is how many distinct works the phase saw arrive: Works when
	// it completed.
	Count int `json:"count"`
	// HeapAlloc is the live heap after the phase, after a collection.
	HeapAlloc uint64 `json:"heapAllocBytes"`
	// PeakRSS is VmHWM after the phase: the peak so far. The kernel's
	// RSS counters are approximate, so a later reading can be lower by a
	// fraction of a MiB.
	PeakRSS int64  `json:"peakRSSBytes"`
	Error   string `json:"error,omitempty"`
}

// phases are examples/bench's, in its order (its raw phase aside: it
// measures our transport alone). agent-resync comes before status there,
// so that the agents that report statuses, and answer hub-resync, are the
// ones that resynced.
var phases = []string{"deliver", "agent-resync", "status", "hub-resync"}

// runner is one run's state.
type runner struct {
	cfg      config
	d        driver
	works    []*workv1.ManifestWork
	progress io.Writer
	// procs are the agent processes, when the agents are not in this one.
	procs *agentProcesses
	// startAgents starts every agent, which calls added with the name of
	// each work its informer adds; report makes agent i report every work
	// it holds Applied. They are the driver's, or the agent processes'.
	startAgents func(ctx context.Context, added func(name string)) error
	report      func(ctx context.Context, i int) error
}

func run(ctx context.Context, cfg config, progress io.Writer) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	logs := newLogCounts()
	klog.SetLogger(logs.logger())
	defer klog.ClearLogger()
	ctx = klog.NewContext(ctx, logs.logger())

	broker, err := startBroker(cfg.broker)
	if err != nil {
		return nil, err
	}
	d, err := drivers[cfg.sdk](ctx, cfg, broker.addr, logs.logger())
	if err != nil {
		broker.close()
		return nil, err
	}
	res := &Result{
		SDK: cfg.sdk, Setup: d.describe() + ", " + broker.describe(), Clusters: cfg.clusters, Works: cfg.works, ManifestBytes: cfg.manifestBytes,
		RateLimit: "off", GoVersion: runtime.Version(),
	}
	if cfg.rateLimit {
		res.RateLimit = "the SDK's default"
	}
	if cfg.agentProcesses {
		res.Setup += ", every agent a process of its own built with this SDK alone"
	}
	r := &runner{cfg: cfg, d: d, works: benchworks.Works(cfg.works, cfg.clusters, cfg.manifestBytes), progress: progress}
	r.startAgents = func(ctx context.Context, added func(string)) error {
		return d.startAgents(ctx, func(w *workv1.ManifestWork) { added(w.Name) })
	}
	r.report = d.reportApplied
	steps := map[string]func(context.Context) (time.Duration, int, error){
		"deliver": r.deliver, "agent-resync": r.agentResync, "status": r.status, "hub-resync": r.hubResync,
	}
	names := phases
	if cfg.agentProcesses {
		if r.procs, err = newAgentProcesses(ctx, cfg, broker.addr, progress); err != nil {
			d.close()
			broker.close()
			return nil, err
		}
		defer r.procs.stop()
		names = processPhases
		r.startAgents, r.report = r.procs.start, r.procs.report
	}
	var runErr error
	for _, name := range names {
		pctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		dur, n, err := steps[name](pctx)
		cancel()
		p := PhaseResult{Name: name, Duration: dur, Count: n, HeapAlloc: benchworks.LiveHeap(), PeakRSS: benchworks.PeakRSS()}
		if dur > 0 {
			p.WorksPerSec = float64(n) / dur.Seconds()
		}
		if err != nil {
			p.Error = err.Error()
			runErr = fmt.Errorf("phase %s: %w", name, err)
		}
		res.Phases = append(res.Phases, p)
		if err != nil {
			break
		}
	}
	if r.procs != nil {
		res.AgentProcesses = r.procs.measure()
		r.procs.stop()
	}
	res.BrokerDropped = broker.dropped()
	d.close()
	broker.close()
	time.Sleep(100 * time.Millisecond) // goroutines on their way out, not leaks
	res.PeakRSS = benchworks.PeakRSS()
	res.Goroutines = runtime.NumGoroutine()
	res.Notes = d.notes()
	res.Logs = logs.sorted()
	return res, runErr
}

// deliver: Create on the hub → every agent's informer holds it.
func (r *runner) deliver(ctx context.Context) (time.Duration, int, error) {
	if err := r.d.startHub(ctx); err != nil {
		return 0, 0, err
	}
	arrived := benchworks.NewCounter(len(r.works))
	if err := r.startAgents(ctx, arrived.Mark); err != nil {
		return 0, 0, err
	}
	begin := time.Now()
	for _, w := range r.works {
		if err := r.d.create(ctx, w); err != nil {
			return 0, arrived.Count(), fmt.Errorf("create %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	err := benchworks.Wait(ctx, r.progress, "deliver", len(r.works), arrived.Count)
	return time.Since(begin), arrived.Count(), err
}

// agentResync: agents restart empty → hold everything again.
func (r *runner) agentResync(ctx context.Context) (time.Duration, int, error) {
	r.d.closeAgents()
	arrived := benchworks.NewCounter(len(r.works))
	begin := time.Now()
	if err := r.startAgents(ctx, arrived.Mark); err != nil {
		return 0, arrived.Count(), err
	}
	err := benchworks.Wait(ctx, r.progress, "agent-resync", len(r.works), arrived.Count)
	return time.Since(begin), arrived.Count(), err
}

// status: every agent reports every work Applied → the hub's informer
// sees it.
func (r *runner) status(ctx context.Context) (time.Duration, int, error) {
	seen := benchworks.NewCounter(len(r.works))
	mark := func(obj any) {
		if w, ok := obj.(*workv1.ManifestWork); ok && benchworks.Applied(w) {
			seen.Mark(w.Name)
		}
	}
	informer := r.d.hubInformer()
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    mark,
		UpdateFunc: func(_, obj any) { mark(obj) },
	})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()
	begin := time.Now()
	// An agent that fails stops the wait at once, with its error.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var reporters sync.WaitGroup
	for i := range r.cfg.clusters {
		reporters.Go(func() {
			if err := r.report(ctx, i); err != nil {
				cancel(fmt.Errorf("%s: %w", benchworks.ClusterName(i, r.cfg.clusters), err))
			}
		})
	}
	err = benchworks.Wait(ctx, r.progress, "status", len(r.works), seen.Count)
	d := time.Since(begin)
	reporters.Wait()
	return d, seen.Count(), err
}

// hubResync: the hub restarts with its works persisted but no statuses (a
// source over a database), and asks the agents → has every status again.
func (r *runner) hubResync(ctx context.Context) (time.Duration, int, error) {
	seen := benchworks.NewCounter(len(r.works))
	start, err := r.d.restartHub(ctx, seen.Mark)
	if err != nil {
		return 0, 0, err
	}
	begin := time.Now()
	if err := start(ctx); err != nil {
		return 0, 0, err
	}
	err = benchworks.Wait(ctx, r.progress, "hub-resync", len(r.works), seen.Count)
	return time.Since(begin), seen.Count(), err
}

func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\ncompare: %s\n", r.Setup)
	fmt.Fprintf(w, "%d works over %d clusters, %d-byte manifests, publish rate limit %s, %s, GOMAXPROCS %d\n\n",
		r.Works, r.Clusters, r.ManifestBytes, r.RateLimit, r.GoVersion, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "%-13s %10s %10s %8s %12s %14s\n", "phase", "time", "works/s", "works", "heap after", "peak RSS yet")
	for _, p := range r.Phases {
		fmt.Fprintf(w, "%-13s %10s %10.0f %8d %12s %14s\n", p.Name, p.Duration.Round(time.Millisecond), p.WorksPerSec, p.Count, mib(int64(p.HeapAlloc)), mib(p.PeakRSS))
		if p.Error != "" {
			fmt.Fprintf(w, "  %s did not complete: %s\n", p.Name, p.Error)
		}
	}
	what := "peak RSS"
	if len(r.AgentProcesses) > 0 {
		what = "the hub's peak RSS"
	}
	fmt.Fprintf(w, "\n%s (VmHWM at the end): %s   goroutines at the end: %d   messages the broker dropped: %d\n",
		what, mib(r.PeakRSS), r.Goroutines, r.BrokerDropped)
	printAgentProcesses(w, r.AgentProcesses)
	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if len(r.Logs) > 0 {
		fmt.Fprintln(w, "\nlines logged at verbosity 0 (discarded), by message:")
		for _, l := range r.Logs {
			line := fmt.Sprintf("%8d  %s", l.Count, l.Message)
			if l.Example != "" {
				line += " (first: " + l.Example + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// moduleVersion is the version of module path this program was built
// with, or "" if it does not know.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range info.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return strings.TrimSpace(m.Version + " => " + m.Replace.Path)
			}
			return m.Version
		}
	}
	return ""
}
