package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

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

// updated records the works a hub writes.
type updated struct {
	hubWorks
	works []*workv1.ManifestWork
}

func (u *updated) update(_ context.Context, w *workv1.ManifestWork) error {
	u.works = append(u.works, w)
	return nil
}

// A change is a new spec whether the work's manifest is as the hub wrote
// it or as PostgreSQL's jsonb gives it back, and a manifest with nothing
// to change is an error, not an update that converges at once.
func TestAChangeChangesTheSpec(t *testing.T) {
	u := &updated{}
	h := &hub{works: u}
	for _, raw := range []string{`{"spec":{"replicas":2}}`, `{"spec": {"replicas": 2}}`} {
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "c", Generation: 1}}
		w.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(raw)}}}
		if err := h.change(t.Context(), w); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		got := u.works[len(u.works)-1].Spec.Workload.Manifests[0].Raw
		if !strings.Contains(string(got), `"replicas":3`) {
			t.Errorf("%s changed to %s, want replicas 3", raw, got)
		}
		if string(w.Spec.Workload.Manifests[0].Raw) != raw {
			t.Errorf("the work read was changed in place: %s", w.Spec.Workload.Manifests[0].Raw)
		}
	}
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "c"}}
	w.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"kind":"ConfigMap"}`)}}}
	if err := h.change(t.Context(), w); err == nil {
		t.Error("a manifest without replicas was changed without an error")
	}
}
