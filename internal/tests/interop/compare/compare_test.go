package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
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
			res, err := run(ctx, cfg, io.Discard)
			var out bytes.Buffer
			if res != nil {
				res.print(&out)
			}
			t.Log(out.String())
			if err != nil {
				t.Fatal(err)
			}
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
