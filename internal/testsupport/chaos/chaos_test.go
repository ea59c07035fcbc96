package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The same seed draws the same churn and the same fault schedule; another
// seed draws others.
func TestRunIsAFunctionOfTheSeed(t *testing.T) {
	p := plan{clusters: 3, works: 200, steps: 100, ops: 10, gap: [2]int{2, 6}}
	faults := []Fault{{name: "a"}, {name: "b", perCluster: true}, {name: "c"}}
	draw := func(seed uint64) string {
		r := &run{plan: p, churnR: stream(seed, streamChurn), desired: map[string]desiredWork{}, index: map[string]int{},
			ops: map[string]int{}, clusters: []string{"c0", "c1", "c2"}}
		r.churn(p.works)
		for range p.steps {
			r.churn(p.ops)
		}
		var b strings.Builder
		for _, n := range r.names {
			fmt.Fprintf(&b, "%s=%+v;", n, r.desired[n])
		}
		return b.String() + describe(schedule(seed, p, faults, r.clusters), faults)
	}
	if a, b := draw(7), draw(7); a != b {
		t.Error("one seed drew two runs")
	}
	if draw(7) == draw(8) {
		t.Error("two seeds drew one run")
	}
	sched := schedule(7, p, faults, []string{"c0", "c1", "c2"})
	seen := map[int]int{}
	for _, s := range sched {
		seen[s.fault]++
	}
	if len(seen) != len(faults) {
		t.Errorf("not every fault is scheduled: %v", describe(sched, faults))
	}
}

// The replay command names the package of the test that failed, and the
// module it is in when that is not the main one, as run from the main
// module's root.
func TestReplayCommandNamesTheTestsPackage(t *testing.T) {
	root := t.TempDir()
	for dir, module := range map[string]string{"": mainModule, "options/nats": mainModule + "/options/nats"} {
		if err := os.MkdirAll(filepath.Join(root, dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "go.mod"), []byte("module "+module+"\n\ngo 1.26.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := t.TempDir()
	tests := []struct {
		name, dir, mode, want string
	}{
		{"main module", filepath.Join(root, "sub"), "default", "WORKWIRE_CHAOS_SEED=42 go test ./sub -run '^TestX$' -v"},
		{"main module's root", root, "short", "WORKWIRE_CHAOS_SEED=42 go test . -run '^TestX$' -v -short"},
		{"nested module", filepath.Join(root, "options/nats"), "default", "cd options/nats && WORKWIRE_CHAOS_SEED=42 go test . -run '^TestX$' -v"},
		{"nested module's package", filepath.Join(root, "options/nats/sub"), "long", "cd options/nats && WORKWIRE_CHAOS=long WORKWIRE_CHAOS_SEED=42 go test ./sub -run '^TestX$' -v"},
		{"no main module", elsewhere, "default", "cd " + elsewhere + " && WORKWIRE_CHAOS_SEED=42 go test . -run '^TestX$' -v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(tt.dir)
			if got := replayCommand(42, tt.mode, "TestX"); got != tt.want {
				t.Errorf("replayCommand in %s:\n got %s\nwant %s", tt.dir, got, tt.want)
			}
		})
	}
}
