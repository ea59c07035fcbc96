package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The charts of the published results draw: a progress and a latency
// chart per run, and the RSS chart across them, each an SVG.
func TestChartsOfThePublishedResults(t *testing.T) {
	in := filepath.Join("..", "..", "..", "docs", "scale")
	results, err := filepath.Glob(filepath.Join(in, "*.json"))
	if err != nil || len(results) == 0 {
		t.Fatalf("no results in %s (%v)", in, err)
	}
	out := t.TempDir()
	if err := run(context.Background(), []string{"-in", in, "-out", out}); err != nil {
		t.Fatal(err)
	}
	want := []string{"rss.svg"}
	for _, r := range results {
		name := strings.TrimSuffix(filepath.Base(r), ".json")
		want = append(want, name+"-progress.svg", name+"-latency.svg")
	}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(b), "<svg") {
			t.Errorf("%s is not an SVG: %.80q", name, b)
		}
	}
}
