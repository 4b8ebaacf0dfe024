package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// series is one set of bars: one value per library.
type series struct {
	label  string
	values []float64
}

var barColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// barChart writes a horizontal grouped bar chart as SVG: one row per library, listed top
// to bottom in the order given.
func barChart(path, title, xlabel string, names []string, sets []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Min = 0
	// Rows are drawn bottom up; reverse so the first library is on top.
	rev := slices.Clone(names)
	slices.Reverse(rev)
	const barWidth = 7
	for i, s := range sets {
		vals := make(plotter.Values, len(s.values))
		for j, v := range s.values {
			vals[len(vals)-1-j] = v
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(barWidth))
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.LineStyle.Width = 0
		bars.Color = barColors[i%len(barColors)]
		bars.Offset = vg.Points(float64(barWidth) * (float64(i) - float64(len(sets)-1)/2))
		p.Add(bars)
		if len(sets) > 1 {
			p.Legend.Add(s.label, bars)
		}
	}
	p.Legend.Top = true
	p.NominalY(rev...)
	height := vg.Points(float64(60 + len(names)*(len(sets)*barWidth+10)))
	return p.Save(6*vg.Inch, height, path)
}

// charts writes the report's charts into dir and returns their file names.
func (r *report) charts(dir string) ([]string, error) {
	names := make([]string, len(r.libs))
	for i, l := range r.libs {
		names[i] = l.name
	}
	var s1 []float64
	for i := range r.libs {
		s1 = append(s1, median(r.s1Rates(i)))
	}
	var handoffs []float64
	for i := range r.libs {
		h := totals(r.s2[2][i]).handoffs
		v := 0.0
		if len(h) > 0 {
			v = float64(percentile(h, 50)) / float64(time.Millisecond)
		}
		handoffs = append(handoffs, v)
	}
	rates := func(data [][][]s2Round) []series {
		out := []series{{label: "empty critical section"}, {label: "1 ms critical section"}}
		for ci := range 2 {
			for i := range r.libs {
				out[ci].values = append(out[ci].values, totals(data[ci][i]).rate)
			}
		}
		return out
	}
	files := []struct {
		name, title, xlabel string
		sets                []series
	}{
		{"bench-s1-cycles.svg", "S1: uncontended, 64 goroutines on their own keys", "lock+unlock cycles/s", []series{{values: s1}}},
		{"bench-s2-acquisitions.svg", "S2: 16 goroutines on one key, one process", "acquisitions/s", rates(r.s2[:2])},
		{"bench-s2-processes.svg", "S2: 4 processes x 4 goroutines on one key", "acquisitions/s", rates(r.mp[:2])},
		{"bench-s2-handoff.svg", "S2 handoff: unlock to the next waiter's lock, p50", "milliseconds", []series{{values: handoffs}}},
	}
	var written []string
	for _, f := range files {
		if err := barChart(filepath.Join(dir, f.name), f.title, f.xlabel, names, f.sets); err != nil {
			return written, fmt.Errorf("chart %s: %w", f.name, err)
		}
		written = append(written, f.name)
	}
	more, err := r.scaleCharts(dir)
	return append(written, more...), err
}

// scaleCharts writes the scale section's charts into dir: one row per point instead of
// per library.
func (r *report) scaleCharts(dir string) ([]string, error) {
	var written []string
	for _, f := range []struct {
		name, title string
		points      []scalePoint
	}{
		{"bench-scale-waiters.svg", "relock: commands per acquisition as waiters grow, one process", r.scale.waiters},
		{"bench-scale-processes.svg", fmt.Sprintf("relock: commands per acquisition, %d waiters over more processes", scaleTotal), r.scale.procs},
	} {
		rows := make([]string, len(f.points))
		sets := []series{{label: "sent (client side)"}, {label: "run (server, scripts' commands included)"}}
		for i, p := range f.points {
			rows[i] = scaleLabel(p)
			sets[0].values = append(sets[0].values, zeroNaN(p.sentPerAcq()))
			sets[1].values = append(sets[1].values, zeroNaN(p.runPerAcq()))
		}
		if err := barChart(filepath.Join(dir, f.name), f.title, "commands per acquisition", rows, sets); err != nil {
			return written, fmt.Errorf("chart %s: %w", f.name, err)
		}
		written = append(written, f.name)
	}
	return written, nil
}

// zeroNaN is v, or 0 for a figure that could not be measured: a chart has no "-".
func zeroNaN(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
