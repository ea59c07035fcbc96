package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/workwire/sdk-go/examples/fleet/internal/control"
	"github.com/workwire/sdk-go/examples/fleet/internal/proc"
	"github.com/workwire/sdk-go/examples/fleet/internal/report"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
)

type harness struct {
	c         common
	perHost   int
	timeout   time.Duration
	dir, self string

	brokers []*proc.Process // the broker's servers
	// readyz are their admin ports' readiness URLs, where they have them
	// (the gRPC brokers): one restarted is waited for until it is ready.
	readyz []string
	// closers undo, last first, what the run made besides processes.
	closers []func()
	hub     *part
	// hosts are the agent hosts; hostsMu guards them and killed, which
	// the agent-restart phase changes while the harness samples them.
	hostsMu sync.Mutex
	hosts   []*part
	killed  []*proc.Process // agent hosts killed and replaced, for their usage
	ended   []*proc.Process // broker servers killed and replaced
	down    *proc.Process   // the broker server broker-fault keeps down
	// wire follows the bytes through the run's own Mosquitto; nil over
	// another broker.
	wire     *wireMeter
	stopWire func()
	// faultFor is how long the broker-fault phase keeps a server down,
	// stallFor how long broker-stall keeps one stopped; restartedAt is
	// when a phase's fault ended (a server or the hub started again, a
	// server continued).
	faultFor    time.Duration
	stallFor    time.Duration
	paused      *proc.Process // the server broker-stall keeps stopped
	restartedAt time.Time
	endedHubs   []*proc.Process // hubs killed and replaced
	convergedAt time.Time       // when the last phase converged
	// The steady phase: changes a second, and for how long.
	steadyRate float64
	steadyFor  time.Duration
}

// part is a process the harness drives.
type part struct {
	*proc.Process
	ctl  *control.Client
	args []string
}

func runHarness(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	h := &harness{}
	h.c.register(fs)
	fs.IntVar(&h.perHost, "agents-per-host", 100, "agents per agent-host process")
	fs.Float64Var(&h.steadyRate, "steady-rate", 1000, "the steady phase's changes a second")
	fs.DurationVar(&h.steadyFor, "steady-for", time.Minute, "how long the steady phase changes works")
	fs.DurationVar(&h.faultFor, "fault-for", 5*time.Second, "how long the broker-fault phase keeps a broker server down")
	fs.DurationVar(&h.stallFor, "stall-for", 30*time.Second, "how long the broker-stall phase keeps a broker server stopped")
	short := fs.Bool("short", false, "CI's size: 200 clusters × 20 works, 200 changes a second for 10 s (overrides the flags of each)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object instead of tables")
	fs.DurationVar(&h.timeout, "timeout", 10*time.Minute, "give up a phase after this long")
	fs.StringVar(&h.dir, "dir", "", "where to keep the processes' logs (default: a temporary directory, removed after a run that converged)")
	if err := cmdutil.Parse(fs, args); err != nil {
		return err
	}
	if *short {
		h.c.clusters, h.c.worksPerCluster = 200, 20
		h.steadyRate, h.steadyFor = 200, 10*time.Second
	}
	if h.c.clusters < 1 || h.c.worksPerCluster < 1 || h.perHost < 1 || h.steadyRate <= 0 || h.steadyFor <= 0 || h.faultFor <= 0 || h.stallFor <= 0 {
		err := fmt.Errorf("-clusters, -works-per-cluster and -agents-per-host must be at least 1, -steady-rate, -steady-for, -fault-for and -stall-for above 0")
		fmt.Fprintln(fs.Output(), err)
		return cmdutil.UsageError{Err: err}
	}
	if _, err := h.c.transportConfig(); err != nil {
		fmt.Fprintln(fs.Output(), err)
		return cmdutil.UsageError{Err: err}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	h.self = self
	keep := h.dir != ""
	if !keep {
		if h.dir, err = os.MkdirTemp("", "fleet-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return err
	}
	if err := raiseFileLimit(); err != nil {
		return err
	}
	res, err := h.run(ctx)
	h.stop()
	for _, c := range slices.Backward(h.closers) {
		c()
	}
	res.Processes = h.usage()
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	} else {
		report.Print(os.Stdout, res)
	}
	if err != nil {
		return fmt.Errorf("%w (the processes' logs are in %s)", err, h.dir)
	}
	if !keep {
		_ = os.RemoveAll(h.dir)
	}
	return nil
}

// raiseFileLimit raises the limit of open files to its most, which the
// processes the harness starts inherit: a host of many agents, and the
// broker, hold a connection for each.
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

func (h *harness) run(ctx context.Context) (*report.Result, error) {
	res := &report.Result{Transport: h.c.transport, Clusters: h.c.clusters, WorksPerCluster: h.c.worksPerCluster}
	if err := h.startBroker(ctx); err != nil {
		return res, err
	}
	var err error
	if h.hub, err = h.startPart(ctx, "hub", "hub"); err != nil {
		return res, err
	}
	var idle, connected heapState
	if err := h.hub.ctl.Call(ctx, "/heap", none{}, &idle); err != nil {
		return res, err
	}
	// Over gRPC the hub is no source of the brokers' (it writes their
	// database): there is no raw path through the same processes.
	raw := h.c.transport != "grpc"
	for from := 0; from < h.c.clusters; from += h.perHost {
		to := min(from+h.perHost, h.c.clusters)
		args := []string{"agents", "-from", fmt.Sprint(from), "-to", fmt.Sprint(to)}
		first := args
		if raw {
			first = append(slices.Clone(args), "-raw")
		}
		p, err := h.startPart(ctx, fmt.Sprintf("agents-%d", len(h.hosts)), first...)
		if err != nil {
			return res, err
		}
		p.args = args // started again, a host starts its agents at once
		h.hostsMu.Lock()
		h.hosts = append(h.hosts, p)
		h.hostsMu.Unlock()
	}
	total := h.c.clusters * h.c.worksPerCluster
	if raw {
		r, err := h.rawPhase(ctx, total)
		res.Phases = append(res.Phases, r)
		if err != nil {
			return res, fmt.Errorf("raw: %w", err)
		}
	}
	// What each cluster's agent costs the hub while it holds nothing.
	if err := h.hub.ctl.Call(ctx, "/heap", none{}, &connected); err != nil {
		return res, err
	}
	res.HubHeapPerIdleCluster = (int64(connected.Live) - int64(idle.Live)) / int64(h.c.clusters)
	extra := max(total/10, 1) // the works each of the broker-fault and broker-stall phases adds
	remaining := total - (total+9)/10
	var updated atomic.Bool // hub-restart's update is done
	phases := []phaseSpec{
		{name: "deliver", held: total, applied: total, do: func(ctx context.Context) (int, error) {
			return total, h.hub.ctl.Call(ctx, "/create", createRequest{From: 0, Count: total}, nil)
		}},
		{name: "update", held: total, applied: total, do: func(ctx context.Context) (int, error) {
			return total, h.hub.ctl.Call(ctx, "/update", none{}, nil)
		}},
		{name: "steady", held: total, applied: total, loadFor: h.steadyFor, do: func(ctx context.Context) (int, error) {
			var r steadyResult
			err := h.hub.ctl.Call(ctx, "/steady", steadyRequest{PerSecond: h.steadyRate, Seconds: h.steadyFor.Seconds()}, &r)
			return r.Changed, err
		}},
		{name: "delete", held: remaining, applied: remaining, do: func(ctx context.Context) (int, error) {
			return total - remaining, h.hub.ctl.Call(ctx, "/delete", deleteRequest{Every: 10}, nil)
		}},
		{name: "agent-restart", held: remaining, applied: remaining, do: h.restartAgentHosts},
		{name: "hub-restart", held: remaining, applied: remaining, do: func(ctx context.Context) (int, error) {
			err := h.hub.ctl.Call(ctx, "/update", none{}, nil)
			updated.Store(true)
			return remaining, err
		}, during: h.hubRestart(&updated)},
		{name: "broker-fault", held: remaining + extra, applied: remaining + extra, do: func(ctx context.Context) (int, error) {
			return extra, h.hub.ctl.Call(ctx, "/create", createRequest{From: total, Count: extra}, nil)
		}, during: h.brokerFault(remaining + 1)},
		{name: "broker-stall", held: remaining + 2*extra, applied: remaining + 2*extra, do: func(ctx context.Context) (int, error) {
			return extra, h.hub.ctl.Call(ctx, "/create", createRequest{From: total + extra, Count: extra}, nil)
		}, during: h.brokerStall(remaining + extra + 1)},
	}
	phases = slices.DeleteFunc(phases, func(ph phaseSpec) bool {
		switch ph.name {
		case "hub-restart":
			return h.c.transport != "grpc" // only there does the hub keep its works where a new one finds them
		case "broker-fault", "broker-stall":
			return len(h.brokers) == 0 // -broker's: not the harness's to stop
		}
		return false
	})
	for _, ph := range phases {
		h.restartedAt = time.Time{}
		r, lost, err := h.phase(ctx, ph)
		if err == nil && !h.restartedAt.IsZero() {
			r.AfterSeconds = h.convergedAt.Sub(h.restartedAt).Seconds()
		}
		if raw && res.Phases[0].WorksPerSec > 0 && vsRaw[ph.name] {
			r.VsRaw = r.WorksPerSec / res.Phases[0].WorksPerSec
		}
		res.Phases = append(res.Phases, r)
		if err != nil {
			res.Lost = lost
			return res, fmt.Errorf("%s: %w", ph.name, err)
		}
	}
	return res, nil
}

// vsRaw are the phases that, as raw does, send a spec and take a status
// back per work, with nothing else in their time.
var vsRaw = map[string]bool{"deliver": true, "update": true, "delete": true, "agent-restart": true}

// rawPhase runs the raw phase through the raw agents the hosts started
// with, then has the hosts stop them and start their agents.
func (h *harness) rawPhase(ctx context.Context, total int) (report.Phase, error) {
	r := report.Phase{Name: "raw", Works: total}
	rctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var rr rawResult
	if err := h.hub.ctl.Call(rctx, "/raw", rawRequest{Count: total}, &rr); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "%-14s converged in %v\n", "raw", time.Duration(rr.Seconds*float64(time.Second)).Round(time.Millisecond))
	r.Seconds, r.WorksPerSec = rr.Seconds, float64(total)/rr.Seconds
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range h.hosts {
		g.Go(func() error { return p.ctl.Call(gctx, "/agents", none{}, nil) })
	}
	return r, g.Wait()
}

// phaseSpec is a phase: what it does, and what the fleet holds once it
// converged.
type phaseSpec struct {
	name string
	// do runs while the harness watches the fleet, and returns how many
	// works it changed (for agent-restart, those the restarted agents
	// must get back); during, if set, is called with each state the
	// harness sees until the phase converged, which it cannot while during
	// says it is busy.
	do      func(context.Context) (works int, err error)
	during  func(context.Context, hubState) (busy bool, err error)
	held    int // works the hub holds once converged
	applied int // of them, Applied at their generation
	// loadFor is how long do changes works at a steady rate, if it does:
	// works/s is then the rate it kept, and the phase reports how long
	// the fleet took to catch up after it.
	loadFor time.Duration
}

// phase runs ph.do and waits until it returned and the hub holds ph.held
// works, ph.applied of them Applied at their generation, and the agents
// hold ph.held works too.
func (h *harness) phase(ctx context.Context, ph phaseSpec) (r report.Phase, lost int, err error) {
	r = report.Phase{Name: ph.name}
	var before hubState
	if err := h.hub.ctl.Call(ctx, "/state", none{}, &before); err != nil {
		return r, ph.applied, err
	}
	var wireBefore int64
	if h.wire != nil {
		wireBefore = h.wire.bytes(false)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	type outcome struct {
		works int
		err   error
	}
	done := make(chan outcome, 1)
	go func() {
		n, err := ph.do(ctx)
		done <- outcome{n, err}
	}()
	var s hubState
	var progress []report.Progress
	defer func() { r.Progress = report.Thin(progress, report.ProgressPoints) }()
	agentsHeld := 0
	said, finished := began, false
	for {
		if !finished {
			select {
			case o := <-done:
				if o.err != nil {
					return r, ph.applied, o.err
				}
				r.Works, finished = o.works, true
			default:
			}
		}
		if finished { // do may be replacing processes until then
			if err := h.exited(); err != nil {
				return r, max(ph.applied-s.Applied, 0) + abs(ph.held-s.Held), err
			}
		}
		if err := h.hub.ctl.Call(ctx, "/state", none{}, &s); err != nil {
			return r, ph.applied, err
		}
		progress = append(progress, report.Progress{Seconds: time.Since(began).Seconds(), Held: s.Held, Applied: s.Applied})
		busy := false
		if ph.during != nil {
			var err error
			if busy, err = ph.during(ctx, s); err != nil {
				return r, ph.applied, err
			}
		}
		if finished && !busy && s.Held == ph.held && s.Applied == ph.applied {
			var err error
			if agentsHeld, err = h.agentsHeld(ctx); err != nil {
				return r, ph.applied, err
			}
			if agentsHeld == ph.held {
				break
			}
		}
		h.sample()
		if time.Since(said) >= 5*time.Second {
			waiting := ""
			if len(s.Waiting) > 0 {
				waiting = "; not yet: " + strings.Join(s.Waiting, ", ")
			}
			fmt.Fprintf(os.Stderr, "%-14s %v: the hub holds %d works, %d Applied%s\n", ph.name, time.Since(began).Round(time.Second), s.Held, s.Applied, waiting)
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return r, max(ph.applied-s.Applied, 0) + abs(ph.held-s.Held), fmt.Errorf("did not converge in %v: the hub holds %d works (want %d), %d Applied (want %d); the agents hold %d",
				h.timeout, s.Held, ph.held, s.Applied, ph.applied, agentsHeld)
		case <-time.After(100 * time.Millisecond):
		}
	}
	h.convergedAt = time.Now()
	d := h.convergedAt.Sub(began)
	fmt.Fprintf(os.Stderr, "%-14s converged in %v\n", ph.name, d.Round(time.Millisecond))
	h.sample()
	r.Seconds, r.WorksPerSec = d.Seconds(), float64(r.Works)/d.Seconds()
	if ph.loadFor > 0 {
		r.WorksPerSec, r.AfterSeconds = float64(r.Works)/ph.loadFor.Seconds(), r.Seconds-ph.loadFor.Seconds()
	}
	lat := delta(s.Latency, before.Latency)
	// No first status of the phase took longer than the phase: the
	// histogram's buckets (each four times the last) are wider.
	r.P50, r.P99, r.Max = quantile(lat, 0.5, d.Seconds()), quantile(lat, 0.99, d.Seconds()), quantile(lat, 1, d.Seconds())
	r.Resent = s.Resent - before.Resent
	if h.wire != nil && r.Works > 0 {
		r.WireBytesPerWork = (h.wire.bytes(true) - wireBefore) / int64(r.Works)
	}
	return r, 0, nil
}

// exited returns an error if a process of the fleet ended that the
// harness did not stop (a crash, the kernel's OOM killer).
func (h *harness) exited() error {
	for _, p := range h.all() {
		if p == h.down {
			continue
		}
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// brokerFault returns a phase's during: once the hub has applied works
// Applied (the first of the phase's, mid-deliver), it kills the broker's
// first server (one of three NATS servers, one of two gRPC replicas, all
// of a Mosquitto), and after -fault-for starts it again.
func (h *harness) brokerFault(applied int) func(context.Context, hubState) (bool, error) {
	var killedAt time.Time
	return func(ctx context.Context, s hubState) (bool, error) {
		switch {
		case killedAt.IsZero() && s.Applied >= applied:
			p := h.brokers[0]
			fmt.Fprintf(os.Stderr, "broker-fault   %d Applied: %s killed\n", s.Applied, p.Name)
			h.down = p
			p.Kill()
			h.ended = append(h.ended, p)
			killedAt = time.Now()
		case !killedAt.IsZero() && h.restartedAt.IsZero() && time.Since(killedAt) >= h.faultFor:
			p, err := h.brokers[0].Again()
			if err != nil {
				return false, err
			}
			if len(h.readyz) > 0 {
				if err := awaitReady(ctx, h.readyz[0], p); err != nil {
					return false, err
				}
			}
			h.brokers[0], h.down = p, nil
			h.restartedAt = time.Now()
			fmt.Fprintf(os.Stderr, "broker-fault   %s started again after %v\n", p.Name, h.faultFor)
		}
		return h.restartedAt.IsZero(), nil
	}
}

// hubRestart returns hub-restart's during: once the hub has changed every
// work (updated) and the first statuses of the changes are in, it kills
// the hub and starts it again; the new one finds the works and their
// statuses in the database, and takes the rest as they come.
func (h *harness) hubRestart(updated *atomic.Bool) func(context.Context, hubState) (bool, error) {
	restarted := false
	return func(ctx context.Context, s hubState) (bool, error) {
		if restarted || !updated.Load() || s.Applied == 0 {
			return !restarted, nil
		}
		old := h.hub
		fmt.Fprintf(os.Stderr, "hub-restart    %d Applied: the hub killed\n", s.Applied)
		old.Kill()
		h.endedHubs = append(h.endedHubs, old.Process)
		p, err := h.startPart(ctx, old.Name, old.args...)
		if err != nil {
			return false, err
		}
		h.hub, restarted, h.restartedAt = p, true, time.Now()
		fmt.Fprintf(os.Stderr, "hub-restart    the hub started again\n")
		return false, nil
	}
}

// brokerStall returns broker-stall's during: once the hub has applied
// works Applied (the first of the phase's), it stops the broker's last
// server (SIGSTOP: its connections stay open and nothing answers on
// them, as over a network that hangs), and after -stall-for continues it.
// The last, not the first: clients left the first when broker-fault
// killed it, and have no reason to go back.
func (h *harness) brokerStall(applied int) func(context.Context, hubState) (bool, error) {
	var stoppedAt time.Time
	return func(ctx context.Context, s hubState) (bool, error) {
		switch {
		case stoppedAt.IsZero() && s.Applied >= applied:
			p := h.brokers[len(h.brokers)-1]
			fmt.Fprintf(os.Stderr, "broker-stall   %d Applied: %s stopped\n", s.Applied, p.Name)
			if err := p.Pause(); err != nil {
				return false, err
			}
			h.paused, stoppedAt = p, time.Now()
		case !stoppedAt.IsZero() && h.restartedAt.IsZero() && time.Since(stoppedAt) >= h.stallFor:
			if err := h.paused.Resume(); err != nil {
				return false, err
			}
			fmt.Fprintf(os.Stderr, "broker-stall   %s continued after %v\n", h.paused.Name, h.stallFor)
			h.paused, h.restartedAt = nil, time.Now()
		}
		return h.restartedAt.IsZero(), nil
	}
}

func abs(n int) int { return max(n, -n) }

func (h *harness) agentsHeld(ctx context.Context) (int, error) {
	n := 0
	for _, p := range h.hostList() {
		var s agentsState
		if err := p.ctl.Call(ctx, "/state", none{}, &s); err != nil {
			return 0, fmt.Errorf("%s: %w", p.Name, err)
		}
		n += s.Held
	}
	return n, nil
}

// restartAgentHosts kills a tenth of the agent hosts (at least one) and
// starts them again, with nothing: their agents get their works back from
// the hub's answer to their resync. It returns how many they held.
func (h *harness) restartAgentHosts(ctx context.Context) (int, error) {
	held := 0
	n := max(len(h.hosts)/10, 1)
	for i := range n {
		old := h.hosts[i]
		var s agentsState
		if err := old.ctl.Call(ctx, "/state", none{}, &s); err != nil {
			return held, fmt.Errorf("%s: %w", old.Name, err)
		}
		held += s.Held
		old.Kill()
		h.hostsMu.Lock()
		h.killed = append(h.killed, old.Process)
		h.hostsMu.Unlock()
		p, err := h.startPart(ctx, old.Name, old.args...)
		if err != nil {
			return held, err
		}
		h.hostsMu.Lock()
		h.hosts[i] = p
		h.hostsMu.Unlock()
	}
	return held, nil
}

// startPart starts this program as a part of the fleet (args[0], its role)
// and waits until it serves its control port.
func (h *harness) startPart(ctx context.Context, name string, args ...string) (*part, error) {
	addrFile := filepath.Join(h.dir, name+".addr")
	// A -dir used before holds the address of a part that is gone.
	if err := os.Remove(addrFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	full := append(append([]string{args[0]}, h.c.args()...), "-control", addrFile)
	full = append(full, args[1:]...)
	p, err := proc.Start(h.dir, name, h.self, full...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	ctl, err := control.Await(ctx, addrFile, p.Exited)
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &part{Process: p, ctl: ctl, args: args}, nil
}

// startBroker starts the run's own broker, unless -broker names one.
func (h *harness) startBroker(ctx context.Context) error {
	if h.c.broker != "" {
		return nil
	}
	switch h.c.transport {
	case "nats":
		return h.startNATS(ctx)
	case "grpc":
		return h.startGRPC(ctx)
	}
	return h.startMosquitto(ctx)
}

// startMosquitto starts a Mosquitto of the run's own.
func (h *harness) startMosquitto(ctx context.Context) error {
	bin := mosquitto.Binary()
	if bin == "" {
		return fmt.Errorf("no mosquitto installed (apt-get install mosquitto), and no -broker given")
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	me, err := user.Current()
	if err != nil {
		return err
	}
	conf := filepath.Join(h.dir, "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		fmt.Sprintf("listener %d 127.0.0.1", port),
		// Run as root, Mosquitto would become the user mosquitto, and a
		// process that changes its user loses its parent-death signal:
		// it would outlive a harness that was killed.
		"user " + me.Username,
		"allow_anonymous true",
		"persistence false",
		"max_connections -1",
		// Per client: the hub's one status subscription must hold every
		// status of its works at once, as when a status resync asks every
		// agent for every status (300,000 works over 100,000 lost 280,000).
		fmt.Sprintf("max_queued_messages %d", max(100000, 2*h.c.clusters*h.c.worksPerCluster)),
		fmt.Sprintf("sys_interval %d", int(sysInterval.Seconds())), // the wire meter's counters
		"log_dest stderr",
		"log_type error",
		"log_type warning",
	}, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	p, err := proc.Start(h.dir, "mosquitto", bin, "-c", conf)
	if err != nil {
		return err
	}
	h.brokers = append(h.brokers, p)
	h.c.broker = fmt.Sprintf("127.0.0.1:%d", port)
	if err := awaitListen(ctx, h.c.broker, p); err != nil {
		return err
	}
	h.wire = newWireMeter()
	meterCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.wire.follow(meterCtx, h.c.broker) }()
	h.stopWire = func() { stop(); <-done }
	return nil
}

// freePort is a port the OS says is free now, for a program that cannot
// be told to take one itself and say which.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (h *harness) all() []*proc.Process {
	out := slices.Clone(h.brokers)
	if h.hub != nil {
		out = append(out, h.hub.Process)
	}
	for _, p := range h.hostList() {
		out = append(out, p.Process)
	}
	return out
}

// hostList is the agent hosts now: the agent-restart phase replaces some
// while the harness samples them.
func (h *harness) hostList() []*part {
	h.hostsMu.Lock()
	defer h.hostsMu.Unlock()
	return slices.Clone(h.hosts)
}

func (h *harness) sample() {
	for _, p := range h.all() {
		p.Sample()
	}
}

// stop stops every part: agents first, then the hub, then the broker.
func (h *harness) stop() {
	if h.stopWire != nil {
		h.stopWire()
	}
	if h.paused != nil {
		_ = h.paused.Resume() // a stopped process would not hear SIGTERM
	}
	for _, p := range slices.Backward(h.all()) {
		p.Stop(30 * time.Second)
	}
}

func (h *harness) usage() []report.Usage {
	var out []report.Usage
	// live are a kind's processes now, ended those killed and replaced:
	// the count is of the live, the CPU of them all.
	add := func(kind string, agents int, live, ended []*proc.Process) {
		if len(live) == 0 {
			return
		}
		u := report.Usage{Kind: kind, Processes: len(live), Agents: agents}
		for _, p := range append(slices.Clone(live), ended...) {
			pu := p.Usage()
			u.PeakRSS = max(u.PeakRSS, pu.PeakRSS)
			u.CPUSeconds += pu.CPUSeconds
		}
		if agents > 0 {
			u.PerAgentRSS = u.PeakRSS / int64(min(h.perHost, h.c.clusters))
		}
		out = append(out, u)
	}
	add("broker", 0, h.brokers, h.ended)
	if h.hub != nil {
		add("hub", 0, []*proc.Process{h.hub.Process}, h.endedHubs)
	}
	var hosts []*proc.Process
	for _, p := range h.hostList() {
		hosts = append(hosts, p.Process)
	}
	h.hostsMu.Lock()
	killed := slices.Clone(h.killed)
	h.hostsMu.Unlock()
	add("agents", h.c.clusters, hosts, killed)
	return out
}

// delta is the histogram now less the histogram before.
func delta(now, before []bucket) []bucket {
	out := slices.Clone(now)
	for i := range out {
		if i < len(before) {
			out[i].Count -= before[i].Count
		}
	}
	return out
}

// quantile estimates the q-quantile of a cumulative histogram, linearly
// within the bucket it falls in, whose upper bound is taken to be no more
// than ceiling.
func quantile(h []bucket, q, ceiling float64) float64 {
	if len(h) == 0 {
		return 0
	}
	total := h[len(h)-1].Count
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range h {
		if float64(b.Count) >= rank && b.Count > below {
			upper := min(b.UpperBound, max(ceiling, lower))
			return lower + (upper-lower)*(rank-float64(below))/float64(b.Count-below)
		}
		lower, below = b.UpperBound, b.Count
	}
	return min(lower, ceiling)
}
