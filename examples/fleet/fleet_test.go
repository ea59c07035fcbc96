package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workwire/sdk-go/examples/fleet/internal/report"
	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
)

// fleetBinary builds the harness for the test.
func fleetBinary(t *testing.T) string {
	t.Helper()
	if mosquitto.Binary() == "" {
		t.Skip("no mosquitto installed")
	}
	bin := filepath.Join(t.TempDir(), "fleet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// A small fleet converges in every phase, and its processes end with it:
// over Mosquitto (raw first, which the phases that can be are set
// against), and over two gRPC brokers on PostgreSQL where there is one.
func TestASmallFleetConverges(t *testing.T) {
	bin := fleetBinary(t)
	for _, tc := range []struct {
		transport       string
		brokers, phases int
	}{{"mqtt", 1, 8}, {"grpc", 2, 8}} {
		t.Run(tc.transport, func(t *testing.T) {
			if tc.transport == "grpc" && os.Getenv("WORKWIRE_POSTGRES_DSN") == "" {
				t.Skip("WORKWIRE_POSTGRES_DSN is not set: no PostgreSQL for the gRPC brokers")
			}
			dir := t.TempDir()
			cmd := exec.Command(bin, "-transport", tc.transport, "-clusters", "12", "-works-per-cluster", "5", "-agents-per-host", "4",
				"-steady-rate", "40", "-steady-for", "1s", "-fault-for", "1s", "-stall-for", "1s", "-json", "-dir", dir)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var r report.Result
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if r.Lost != 0 || len(r.Phases) != tc.phases {
				t.Errorf("lost %d, phases %+v", r.Lost, r.Phases)
			}
			for _, p := range r.Phases {
				if againstRaw := p.VsRaw > 0; againstRaw != (tc.transport == "mqtt" && vsRaw[p.Name]) {
					t.Errorf("phase %s: %.2f of raw", p.Name, p.VsRaw)
				}
			}
			kinds := map[string]report.Usage{}
			for _, p := range r.Processes {
				kinds[p.Kind] = p
			}
			// 3 hosts of 4 agents.
			if kinds["agents"].Processes != 3 || kinds["hub"].PeakRSS == 0 || kinds["broker"].Processes != tc.brokers {
				t.Errorf("processes: %+v", r.Processes)
			}
			if left := running(t, dir); len(left) > 0 {
				t.Errorf("still running after the run: %v", left)
			}
		})
	}
}

// A harness that is killed takes its processes with it.
func TestAKilledHarnessLeavesNoProcess(t *testing.T) {
	bin := fleetBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "-clusters", "6", "-works-per-cluster", "2", "-agents-per-host", "2", "-dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once every agent host serves, every part is running.
	deadline := time.Now().Add(2 * time.Minute)
	for len(running(t, dir)) < 5 { // mosquitto, the hub, 3 agent hosts
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the fleet did not start: %v", running(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline = time.Now().Add(time.Minute)
	for {
		left := running(t, dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running a minute after the harness was killed: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running lists the processes whose command line names dir: the parts of
// the run that keeps its files there.
func running(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) > 1 && strings.Contains(strings.Join(args[1:], " "), dir) {
			if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
				continue // a zombie: ended, not yet reaped
			}
			out = append(out, e.Name()+": "+strings.Join(args, " "))
		}
	}
	return out
}

func TestQuantile(t *testing.T) {
	h := []bucket{{0.001, 0}, {0.004, 50}, {0.016, 100}, {math.Inf(1), 100}}
	for _, tc := range []struct{ q, ceiling, want float64 }{
		{0.5, 10, 0.004},
		{0.75, 10, 0.010},
		{1, 10, 0.016},
		{1, 0.010, 0.010}, // the phase was shorter than the bucket
	} {
		if got := quantile(h, tc.q, tc.ceiling); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v, ceiling %v) = %v, want %v", tc.q, tc.ceiling, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5, 1); got != 0 {
		t.Errorf("empty: %v", got)
	}
}
