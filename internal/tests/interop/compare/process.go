package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// With -agent-processes each cluster's agent is a process of its own, as
// on a fleet: this program built with the SDK under test alone and run as
// `compare agent`, which tells its parent on standard output what its
// informer adds and does what its standard input asks:
//
//	parent → agent   report         report every work it holds Applied
//	agent → parent   started        its agent started
//	                 added NAME     its informer added work NAME
//	                 reported       every work it holds was reported
//	                 failed ERROR   the report failed
//
// It stops when its standard input closes. The hub stays in this process,
// and the phases are the ones an agent's own memory depends on.
var processPhases = []string{"deliver", "status"}

// compareImportPath is this program's package, which agent processes are
// built from.
const compareImportPath = "github.com/workwire/sdk-go/internal/tests/interop/compare"

// AgentProcess is one agent process's figures, read when every phase ended.
type AgentProcess struct {
	Cluster    string  `json:"cluster"`
	Works      int     `json:"works"`
	PeakRSS    int64   `json:"peakRSSBytes"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// agentProcesses are a run's agent processes.
type agentProcesses struct {
	cfg    config
	dir    string
	bin    string
	broker string

	mu    sync.Mutex
	procs []*agentProcess
}

// agentProcess is one running agent.
type agentProcess struct {
	cluster string
	works   int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  bytes.Buffer
	// replies are its lines other than "added"; exited is closed when it
	// exited, with err set.
	replies chan string
	exited  chan struct{}
	err     error
}

// newAgentProcesses builds the agent program for cfg's SDK.
func newAgentProcesses(ctx context.Context, cfg config, broker string, progress io.Writer) (*agentProcesses, error) {
	dir, err := os.MkdirTemp("", "compare-agents-")
	if err != nil {
		return nil, err
	}
	p := &agentProcesses{cfg: cfg, dir: dir, bin: filepath.Join(dir, "agent-"+cfg.sdk), broker: broker}
	fmt.Fprintf(progress, "building the agent program with %s alone\n", cfg.sdk)
	build := exec.CommandContext(ctx, "go", "build", "-tags", "compare_"+cfg.sdk, "-o", p.bin, compareImportPath)
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("building the %s agent: %w\n%s", cfg.sdk, err, out)
	}
	return p, nil
}

// start starts an agent process per cluster and returns once each has
// started its agent.
func (p *agentProcesses) start(ctx context.Context, added func(name string)) error {
	perCluster := make([]int, p.cfg.clusters)
	for i := range p.cfg.works {
		perCluster[i%p.cfg.clusters]++
	}
	for i := range p.cfg.clusters {
		args := []string{"agent", "-sdk", p.cfg.sdk, "-broker", p.broker, "-agent", strconv.Itoa(i),
			"-clusters", strconv.Itoa(p.cfg.clusters), "-works", strconv.Itoa(p.cfg.works),
			"-manifest-bytes", strconv.Itoa(p.cfg.manifestBytes)}
		if p.cfg.rateLimit {
			args = append(args, "-rate-limit")
		}
		a := &agentProcess{
			cluster: benchworks.ClusterName(i, p.cfg.clusters), works: perCluster[i],
			cmd:     exec.Command(p.bin, args...),
			replies: make(chan string, 1), exited: make(chan struct{}),
		}
		dieWithParent(a.cmd)
		a.cmd.Stderr = &a.stderr
		stdin, err := a.cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := a.cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := a.cmd.Start(); err != nil {
			return fmt.Errorf("starting the agent of %s: %w", a.cluster, err)
		}
		a.stdin = stdin
		p.mu.Lock()
		p.procs = append(p.procs, a)
		p.mu.Unlock()
		go a.read(stdout, added)
	}
	for _, a := range p.procs {
		if err := a.await(ctx, "started"); err != nil {
			return err
		}
	}
	return nil
}

// await waits for the agent's next reply, which must be want.
func (a *agentProcess) await(ctx context.Context, want string) error {
	select {
	case reply := <-a.replies:
		if reply == want {
			return nil
		}
		return fmt.Errorf("the agent of %s: %s", a.cluster, reply)
	case <-a.exited:
		return a.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// read takes the agent's lines until it exits.
func (a *agentProcess) read(stdout io.Reader, added func(string)) {
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if name, ok := strings.CutPrefix(lines.Text(), "added "); ok {
			added(name)
			continue
		}
		a.replies <- lines.Text()
	}
	a.err = a.cmd.Wait()
	if a.err == nil {
		a.err = errors.New("exited")
	}
	a.err = fmt.Errorf("the agent of %s %w: %s", a.cluster, a.err, strings.TrimSpace(a.stderr.String()))
	close(a.exited)
}

// report asks agent i to report every work it holds Applied.
func (p *agentProcesses) report(ctx context.Context, i int) error {
	p.mu.Lock()
	a := p.procs[i]
	p.mu.Unlock()
	if _, err := io.WriteString(a.stdin, "report\n"); err != nil {
		return err
	}
	return a.await(ctx, "reported")
}

// measure reads every agent process's peak RSS and CPU time.
func (p *agentProcesses) measure() []AgentProcess {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]AgentProcess, 0, len(p.procs))
	for _, a := range p.procs {
		rss, cpu := procUsage(a.cmd.Process.Pid)
		out = append(out, AgentProcess{Cluster: a.cluster, Works: a.works, PeakRSS: rss, CPUSeconds: cpu})
	}
	return out
}

// stop closes every agent's standard input, which stops it, and kills
// the ones still running after a minute.
func (p *agentProcesses) stop() {
	p.mu.Lock()
	procs := p.procs
	p.procs = nil
	p.mu.Unlock()
	for _, a := range procs {
		_ = a.stdin.Close()
	}
	for _, a := range procs {
		select {
		case <-a.exited:
		case <-time.After(time.Minute):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	}
	_ = os.RemoveAll(p.dir)
}

// procUsage is process pid's VmHWM and its user and system CPU seconds.
func procUsage(pid int) (peakRSS int64, cpuSeconds float64) {
	peakRSS = benchworks.PeakRSSOf(strconv.Itoa(pid))
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The fields after the command's name, which is in parentheses
		// and may hold spaces: utime and stime are the 12th and 13th.
		if end := bytes.LastIndexByte(data, ')'); end >= 0 {
			fields := strings.Fields(string(data[end+1:]))
			if len(fields) > 12 {
				utime, _ := strconv.ParseFloat(fields[11], 64)
				stime, _ := strconv.ParseFloat(fields[12], 64)
				cpuSeconds = (utime + stime) / clockTicks
			}
		}
	}
	return peakRSS, cpuSeconds
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux this runs on.
const clockTicks = 100

func printAgentProcesses(w io.Writer, procs []AgentProcess) {
	if len(procs) == 0 {
		return
	}
	rss := make([]int64, len(procs))
	var cpu float64
	for i, a := range procs {
		rss[i] = a.PeakRSS
		cpu += a.CPUSeconds
	}
	slices.Sort(rss)
	fmt.Fprintf(w, "agent processes: %d, one agent and about %d works each: peak RSS min %s, median %s, max %s; CPU %.2f s in all\n",
		len(procs), procs[0].Works, mib(rss[0]), mib(rss[len(rss)/2]), mib(rss[len(rss)-1]), cpu)
}

// runAgent is an agent process: one agent of the run its flags describe.
func runAgent(ctx context.Context, args []string, out, progress io.Writer) error {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("compare agent", flag.ContinueOnError)
	fs.SetOutput(progress)
	fs.StringVar(&cfg.sdk, "sdk", "", "the SDK to run")
	fs.StringVar(&cfg.broker, "broker", "", "the MQTT broker's host:port")
	fs.IntVar(&cfg.agent, "agent", 0, "which cluster's agent to run, from 0")
	fs.IntVar(&cfg.clusters, "clusters", cfg.clusters, "how many clusters the run has")
	fs.IntVar(&cfg.works, "works", cfg.works, "how many works the run has")
	fs.IntVar(&cfg.manifestBytes, "manifest-bytes", cfg.manifestBytes, "size of each work's Deployment manifest")
	fs.BoolVar(&cfg.rateLimit, "rate-limit", false, "keep the SDK's default publish rate limit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.broker == "" || cfg.agent < 0 {
		return fmt.Errorf("%w: an agent process needs -broker and -agent", errUsage)
	}
	logs := newLogCounts()
	klog.SetLogger(logs.logger())
	ctx = klog.NewContext(ctx, logs.logger())
	d, err := drivers[cfg.sdk](ctx, cfg, cfg.broker, logs.logger())
	if err != nil {
		return err
	}
	defer d.close()
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(out, line+"\n")
	}
	if err := d.startAgents(ctx, func(w *workv1.ManifestWork) { say("added " + w.Name) }); err != nil {
		return err
	}
	say("started")
	requests := bufio.NewScanner(os.Stdin)
	for requests.Scan() {
		if requests.Text() != "report" {
			return fmt.Errorf("unknown request %q", requests.Text())
		}
		if err := d.reportApplied(ctx, cfg.agent); err != nil {
			say("failed " + err.Error())
			continue
		}
		say("reported")
	}
	return requests.Err()
}

// broker is the MQTT broker a run uses: one embedded in this process, or
// the one -broker names.
type broker struct {
	addr     string
	embedded *mqtttest.Broker
}

func startBroker(addr string) (*broker, error) {
	if addr != "" {
		return &broker{addr: addr}, nil
	}
	b, err := mqtttest.Start()
	if err != nil {
		return nil, err
	}
	return &broker{addr: b.Addr(), embedded: b}, nil
}

// dropped is how many messages the embedded broker dropped; another
// broker is not asked.
func (b *broker) dropped() int64 {
	if b.embedded == nil {
		return 0
	}
	return b.embedded.Dropped()
}

func (b *broker) describe() string {
	if b.embedded == nil {
		return "the MQTT broker at " + b.addr
	}
	return "embedded mochi-mqtt broker (mqtttest) in the process"
}

func (b *broker) close() {
	if b.embedded != nil {
		_ = b.embedded.Close()
	}
}
