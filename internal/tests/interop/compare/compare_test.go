package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Both SDKs run every phase at a small size, and every phase sees every
// work arrive. Counts are checked, never times.
func TestBothSDKsCompleteEveryPhase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := runtime.NumGoroutine()
	const works, clusters = 300, 2
	for _, sdk := range []string{sdkWorkwire, sdkOCM} {
		t.Run(sdk, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.sdk, cfg.works, cfg.clusters, cfg.timeout = sdk, works, clusters, time.Minute
			res := runAndLog(ctx, t, cfg)
			if len(res.Phases) != len(phases) {
				t.Fatalf("%d phases ran, want %d (%v)", len(res.Phases), len(phases), phases)
			}
			for i, p := range res.Phases {
				if p.Name != phases[i] {
					t.Errorf("phase %d is %s, want %s", i, p.Name, phases[i])
				}
				if p.Count != works || p.Error != "" {
					t.Errorf("phase %s saw %d works, want %d (%s)", p.Name, p.Count, works, p.Error)
				}
			}
			if res.PeakRSS <= 0 {
				t.Errorf("peak RSS %d, want some", res.PeakRSS)
			}
		})
	}
	// Every goroutine a run started has stopped (the SDKs' own as well).
	for deadline := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left running, %d before the runs:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
	}
}

// With -agent-processes each agent is a process of its own, built with its
// SDK alone: both SDKs deliver and report every work, every agent process
// is measured, and none is left running.
func TestAgentProcessesAreMeasured(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const works, clusters = 100, 2
	for _, sdk := range []string{sdkWorkwire, sdkOCM} {
		t.Run(sdk, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.sdk, cfg.works, cfg.clusters, cfg.timeout, cfg.agentProcesses = sdk, works, clusters, time.Minute, true
			res := runAndLog(ctx, t, cfg)
			if len(res.Phases) != len(processPhases) {
				t.Fatalf("%d phases ran, want %d (%v)", len(res.Phases), len(processPhases), processPhases)
			}
			for _, p := range res.Phases {
				if p.Count != works || p.Error != "" {
					t.Errorf("phase %s saw %d works, want %d (%s)", p.Name, p.Count, works, p.Error)
				}
			}
			if len(res.AgentProcesses) != clusters {
				t.Fatalf("%d agent processes measured, want %d", len(res.AgentProcesses), clusters)
			}
			for _, a := range res.AgentProcesses {
				if a.Works != works/clusters || a.PeakRSS <= 0 {
					t.Errorf("agent process %+v: want %d works and some RSS", a, works/clusters)
				}
			}
			if left := agentProcessesRunning(t); len(left) > 0 {
				t.Errorf("agent processes left running: %v", left)
			}
		})
	}
}

// agentProcessesRunning lists the pids of this process's children that
// still run an agent (zombies aside: they have exited).
func agentProcessesRunning(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no process table to read: %v", err)
	}
	parent := strconv.Itoa(os.Getpid())
	var left []string
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		end := bytes.LastIndexByte(stat, ')')
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) > 1 && fields[1] == parent && fields[0] != "Z" && bytes.Contains(stat, []byte("(agent-")) {
			left = append(left, e.Name())
		}
	}
	return left
}

// runAndLog runs cfg and logs its table; a run that fails ends the test.
func runAndLog(ctx context.Context, t *testing.T, cfg config) *Result {
	t.Helper()
	res, err := run(ctx, cfg, io.Discard)
	var out bytes.Buffer
	if res != nil {
		res.print(&out)
	}
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	return res
}
