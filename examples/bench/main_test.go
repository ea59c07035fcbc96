package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBenchRunsEveryPhase(t *testing.T) {
	for _, mode := range []string{"", "structured"} {
		t.Run("content-mode="+mode, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.works, cfg.clusters, cfg.timeout, cfg.contentMode = 60, 3, time.Minute, mode
			var progress bytes.Buffer
			res, err := run(context.Background(), cfg, &progress)
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if len(res.Phases) != len(allPhases) {
				t.Fatalf("%d phases measured, want %d", len(res.Phases), len(allPhases))
			}
			for _, p := range res.Phases {
				if p.WorksPerSec <= 0 {
					t.Errorf("phase %s: %v works/s", p.Name, p.WorksPerSec)
				}
			}
			var out bytes.Buffer
			res.print(&out)
			if !strings.Contains(out.String(), "deliver") || !strings.Contains(out.String(), "heap per work") {
				t.Errorf("table:\n%s", out.String())
			}
		})
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	cfg := defaultConfig()
	cfg.phases = []string{"nope"}
	if _, err := run(context.Background(), cfg, &bytes.Buffer{}); err == nil {
		t.Fatal("accepted an unknown phase")
	}
	for _, bad := range []struct{ transport, mode string }{{"mqtt", "Structured"}, {"grpc", "structured"}} {
		cfg := defaultConfig()
		cfg.transport, cfg.contentMode = bad.transport, bad.mode
		if _, err := run(context.Background(), cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-content-mode") {
			t.Errorf("-transport %s -content-mode %s: %v, want an error naming -content-mode", bad.transport, bad.mode, err)
		}
	}
}
