// Command chart draws the fleet harness's results as SVG charts (beside
// them, unless -out says where): for each run (a file of `fleet -json` output), the works Applied
// over each phase and each phase's first-status latency; across the runs,
// each part's peak RSS against the fleet's size.
//
//	go -C examples/fleet run ./chart -in ../../docs/scale
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/workwire/sdk-go/examples/fleet/internal/report"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
)

func main() {
	cmdutil.Exit("chart", run(context.Background(), os.Args[1:]))
}

// result is one run's, named by its file.
type result struct {
	name string
	report.Result
}

func run(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	in := fs.String("in", ".", "the directory of results: *.json, each one run's `fleet -json` output")
	out := fs.String("out", "", "the directory to write the charts to (default: -in)")
	if err := cmdutil.Parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		*out = *in
	}
	files, err := filepath.Glob(filepath.Join(*in, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no results (*.json) in %s", *in)
	}
	var runs []result
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		r := result{name: strings.TrimSuffix(filepath.Base(f), ".json")}
		if err := json.Unmarshal(b, &r.Result); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if err := progress(r, filepath.Join(*out, r.name+"-progress.svg")); err != nil {
			return err
		}
		if err := latency(r, filepath.Join(*out, r.name+"-latency.svg")); err != nil {
			return err
		}
	}
	return rss(runs, filepath.Join(*out, "rss.svg"))
}

// minSeconds is the least latency a log scale shows: the histogram's
// first bucket.
const minSeconds = 0.001

func title(r result) string {
	return fmt.Sprintf("over %s: %d clusters × %d works", r.Transport, r.Clusters, r.WorksPerCluster)
}

// progress draws, per phase, the works Applied at their generation against
// the time since the phase began: a panel per phase, each on its own
// scales (phases last from a second to minutes).
func progress(r result, path string) error {
	const cols = 4
	rows := (len(r.Phases) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, ph := range r.Phases {
		p := plot.New()
		p.Title.Text = ph.Name
		p.X.Label.Text = "seconds"
		if i%cols == 0 {
			p.Y.Label.Text = "works Applied"
		}
		xys := make(plotter.XYs, len(ph.Progress))
		for j, pt := range ph.Progress {
			xys[j] = plotter.XY{X: pt.Seconds, Y: float64(pt.Applied)}
		}
		if len(xys) > 0 {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			l.Color, l.Width = plotutil.Color(0), vg.Points(1.5)
			p.Add(l)
		}
		p.Add(grid())
		plots[i/cols][i%cols] = p
	}
	const width, height = 12 * vg.Inch, 3 * vg.Inch
	c := vgsvg.New(width, height*vg.Length(rows)+vg.Points(24))
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	heading := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	heading.Font.Size = vg.Points(13)
	dc.FillText(heading, vg.Point{X: width / 2, Y: dc.Max.Y - vg.Points(4)}, "Works Applied at their generation, per phase, "+title(r))
	dc.Max.Y -= vg.Points(24)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(12)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// latency draws each phase's first-status latency, p50, p99 and max, on a
// log scale (from a millisecond to minutes).
func latency(r result, path string) error {
	p := plot.New()
	p.Title.Text = "First-status latency per phase, " + title(r)
	p.Y.Label.Text = "seconds (log)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	names := make([]string, len(r.Phases))
	quantiles := []struct {
		name string
		of   func(report.Phase) float64
	}{
		{"p50", func(ph report.Phase) float64 { return ph.P50 }},
		{"p99", func(ph report.Phase) float64 { return ph.P99 }},
		{"max", func(ph report.Phase) float64 { return ph.Max }},
	}
	for i, q := range quantiles {
		xys := make(plotter.XYs, len(r.Phases))
		for j, ph := range r.Phases {
			names[j] = ph.Name
			xys[j] = plotter.XY{X: float64(j) + 0.15*float64(i-1), Y: max(q.of(ph), minSeconds)}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(4)
		p.Add(sc)
		p.Legend.Add(q.name, sc)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.Add(grid())
	return p.Save(9*vg.Inch, 4*vg.Inch, path)
}

// rss draws each part's peak RSS against the fleet's clusters, a line per
// transport and part: the hub, a broker server, and an agent host per
// agent.
func rss(runs []result, path string) error {
	type key struct{ transport, kind string }
	lines := map[key]plotter.XYs{}
	for _, r := range runs {
		for _, u := range r.Processes {
			mib := float64(u.PeakRSS) / (1 << 20)
			kind := u.Kind
			if u.Kind == "agents" {
				kind, mib = "per agent", float64(u.PerAgentRSS)/(1<<20)
			}
			k := key{r.Transport, kind}
			lines[k] = append(lines[k], plotter.XY{X: float64(r.Clusters), Y: mib})
		}
	}
	if len(lines) == 0 {
		return errors.New("no process usage in the results")
	}
	keys := make([]key, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.transport, b.transport), cmp.Compare(a.kind, b.kind)) })
	p := plot.New()
	p.Title.Text = "Peak RSS against the fleet's size"
	p.Y.Label.Text = "MiB (log)"
	p.X.Label.Text = "clusters (log)"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	for i, k := range keys {
		xys := lines[k]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes, s.Shape = plotutil.Dashes(i), plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(k.kind+" ("+k.transport+")", l, s)
	}
	// Room above the lines for the legend, and beside the points at either
	// end for their labels.
	p.Y.Max *= 16
	p.X.Min, p.X.Max = p.X.Min/1.5, p.X.Max*1.5
	p.Add(grid())
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

func grid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 220}
	g.Horizontal.Color = color.Gray{Y: 220}
	return g
}
