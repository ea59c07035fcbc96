// Package report is what a fleet run reports: the harness's -json
// output, its tables, and what the chart command reads.
package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Result is a run's outcome, as -json prints it.
type Result struct {
	Transport       string `json:"transport"`
	Clusters        int    `json:"clusters"`
	WorksPerCluster int    `json:"worksPerCluster"`
	// Lost counts the works that did not converge in the phase that
	// failed; 0 when every phase converged.
	Lost int `json:"lost"`
	// HubHeapPerIdleCluster is how much the hub's live heap grew per
	// cluster as the agents connected, before any work.
	HubHeapPerIdleCluster int64   `json:"hubHeapPerIdleClusterBytes"`
	Phases                []Phase `json:"phases"`
	Processes             []Usage `json:"processes"`
}

// Phase is one phase's figures.
type Phase struct {
	Name        string  `json:"name"`
	Works       int     `json:"works"` // that the phase changed
	Seconds     float64 `json:"seconds"`
	WorksPerSec float64 `json:"worksPerSec"`
	// VsRaw is WorksPerSec over the raw phase's, for a phase that sends a
	// spec and takes a status back per work as raw does.
	VsRaw float64 `json:"vsRaw,omitempty"`
	// First-status latency, from the hub's histogram over the phase: an
	// upper bound of the bucket the quantile falls in, interpolated.
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
	Resent int64   `json:"resent"` // specs the hub sent again
	// WireBytesPerWork is the bytes the broker received and sent during
	// the phase per work it changed (over the run's own Mosquitto).
	WireBytesPerWork int64 `json:"wireBytesPerWork,omitempty"`
	// AfterSeconds is how long the fleet took to converge after the
	// steady phase's load stopped, or after a fault ended.
	AfterSeconds float64 `json:"afterSeconds,omitempty"`
	// Progress is what the hub held over the phase, at most
	// ProgressPoints samples evenly spread.
	Progress []Progress `json:"progress,omitempty"`
}

// Progress is the hub's works at a moment of a phase.
type Progress struct {
	Seconds float64 `json:"s"` // since the phase began
	Held    int     `json:"held"`
	Applied int     `json:"applied"`
}

// ProgressPoints bounds a phase's Progress.
const ProgressPoints = 300

// Thin keeps at most n of ps, evenly spread, the first and last among them.
func Thin(ps []Progress, n int) []Progress {
	if len(ps) <= n {
		return ps
	}
	out := make([]Progress, 0, n)
	for i := range n {
		out = append(out, ps[i*(len(ps)-1)/(n-1)])
	}
	return out
}

// Usage is what a kind of process cost at its peak.
type Usage struct {
	Kind       string  `json:"kind"` // broker, hub, agents
	Processes  int     `json:"processes"`
	Agents     int     `json:"agents,omitempty"`
	PeakRSS    int64   `json:"peakRSSBytes"` // the largest of them
	CPUSeconds float64 `json:"cpuSeconds"`   // all of them
	// PerAgentRSS is an agent host's peak RSS per agent it holds.
	PerAgentRSS int64 `json:"perAgentRSSBytes,omitempty"`
}

// Print writes r as tables.
func Print(w io.Writer, r *Result) {
	fmt.Fprintf(w, "fleet over %s: %d clusters × %d works (%d), one hub, agents in processes of their own\n\n",
		r.Transport, r.Clusters, r.WorksPerCluster, r.Clusters*r.WorksPerCluster)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tworks\tseconds\tworks/s\tvs raw\tp50 s\tp99 s\tmax s\tre-sent\twire B/work\tafter s\t")
	for _, p := range r.Phases {
		vsRaw := ""
		if p.VsRaw > 0 {
			vsRaw = fmt.Sprintf("%.0f%%", 100*p.VsRaw)
		}
		caught := ""
		if p.AfterSeconds > 0 {
			caught = fmt.Sprintf("%.2f", p.AfterSeconds)
		}
		wire := ""
		if p.WireBytesPerWork > 0 {
			wire = fmt.Sprint(p.WireBytesPerWork)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%s\t%.3f\t%.3f\t%.3f\t%d\t%s\t%s\t\n", p.Name, p.Works, p.Seconds, p.WorksPerSec, vsRaw, p.P50, p.P99, p.Max, p.Resent, wire, caught)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tcount\tpeak RSS MiB\tCPU s\tRSS per agent KiB\t")
	for _, p := range r.Processes {
		per := ""
		if p.PerAgentRSS > 0 {
			per = fmt.Sprint(p.PerAgentRSS >> 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t\n", p.Kind, p.Processes, float64(p.PeakRSS)/(1<<20), p.CPUSeconds, per)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nthe hub's live heap grew %d bytes per cluster as the agents connected\n", r.HubHeapPerIdleCluster)
	if r.Lost > 0 {
		fmt.Fprintf(w, "lost: %d works did not converge\n", r.Lost)
	}
}
