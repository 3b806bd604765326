// Package benchplot draws the scaling plot of `zoo bench --plot`: run time and memory
// against sequence length on log-log axes, one line per series (a variant on a backend at
// one batch size), with the fitted exponent of each series in the legend.
//
// The fitted exponent k is the least-squares slope of log(time) against log(n) over the
// measured points, so time ∝ n^k: about 2 for softmax attention once attention dominates, about
// 1 for linear-time variants (smaller n, where the n-linear projections and FFN dominate,
// pull every variant towards 1).
package benchplot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one line of the plot: measurements of one variant on one backend at one batch size.
type Series struct {
	// Label names the series in the legend, e.g. "vanilla.tiny cpu b=1".
	Label string
	// N holds the sequence lengths; TimeMS and MemBytes the measurement at each (same length
	// as N). Points that are not positive are left out (a log axis cannot show them).
	N        []float64
	TimeMS   []float64
	MemBytes []float64
	// TimeSD, when as long as N, is the standard deviation of each time over its timed
	// runs, drawn as an error bar (cut at a tenth of the mean where mean − sd is below it: lowErr).
	TimeSD []float64
	// Dashed draws the line dashed (used for reference runtimes such as ONNX Runtime).
	Dashed bool
	// Color is the palette index of the line (plotutil.Color); series of one variant share it.
	Color int
}

// Slope returns the least-squares slope of log(y) against log(x) over the points where both
// are positive, and false when fewer than two distinct x remain.
func Slope(x, y []float64) (float64, bool) {
	var lx, ly []float64
	for i := range x {
		if i < len(y) && x[i] > 0 && y[i] > 0 && !math.IsInf(y[i], 0) {
			lx = append(lx, math.Log(x[i]))
			ly = append(ly, math.Log(y[i]))
		}
	}
	if len(lx) < 2 {
		return 0, false
	}
	var mx, my float64
	for i := range lx {
		mx += lx[i]
		my += ly[i]
	}
	mx /= float64(len(lx))
	my /= float64(len(ly))
	var sxy, sxx float64
	for i := range lx {
		sxy += (lx[i] - mx) * (ly[i] - my)
		sxx += (lx[i] - mx) * (lx[i] - mx)
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// Options tune Render. The zero value gives a 1400×560 pixel image with a generic title.
type Options struct {
	// Title is drawn above the time panel, e.g. "zoo bench — cpu (avx512, 2 threads)".
	Title string
	// MemLabel labels the memory axis, e.g. "peak RSS growth (MiB)".
	MemLabel string
	// Width and Height are the image size in pixels.
	Width, Height int
}

// Render draws the time panel (left) and the memory panel (right) and writes a PNG to w.
// Each series' legend entry carries its fitted time exponent ("k=1.93"); the memory panel's
// entries carry the memory exponent. A panel without any positive point says so instead of
// drawing an empty log axis.
func Render(w io.Writer, series []Series, opts Options) (err error) {
	if len(series) == 0 {
		return errors.New("benchplot: no series to plot")
	}
	if opts.Width <= 0 {
		opts.Width = 1400
	}
	if opts.Height <= 0 {
		opts.Height = 560
	}
	if opts.Title == "" {
		opts.Title = "zoo bench"
	}
	if opts.MemLabel == "" {
		opts.MemLabel = "memory (MiB)"
	}
	// gonum/plot panics on some degenerate inputs; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("benchplot: draw: %v", r)
		}
	}()
	timeP, err := panel(series, opts.Title+" — time per run (bars: ± sd, cut at a tenth)", "time (ms)", func(s Series) []float64 { return s.TimeMS }, func(s Series) []float64 { return s.TimeSD })
	if err != nil {
		return err
	}
	memP, err := panel(series, "memory per run", opts.MemLabel, func(s Series) []float64 {
		mib := make([]float64, len(s.MemBytes))
		for i, b := range s.MemBytes {
			mib[i] = b / (1 << 20)
		}
		return mib
	}, nil)
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Length(opts.Width)*vg.Inch/96, vg.Length(opts.Height)*vg.Inch/96)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{timeP, memP}}, tiles, dc)
	timeP.Draw(canvases[0][0])
	memP.Draw(canvases[0][1])
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("benchplot: encode PNG: %w", err)
	}
	return nil
}

// panel draws one log-log panel of y(s) against n for every series.
func panel(series []Series, title, ylabel string, y, sd func(Series) []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "sequence length n"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	drawn := 0
	for i, s := range series {
		ys := y(s)
		var sds []float64
		if sd != nil {
			sds = sd(s)
		}
		var pts plotter.XYs
		var errs plotter.YErrors
		for j := range s.N {
			if j < len(ys) && s.N[j] > 0 && ys[j] > 0 && !math.IsInf(ys[j], 0) && !math.IsNaN(ys[j]) {
				pts = append(pts, plotter.XY{X: s.N[j], Y: ys[j]})
				e := 0.0
				if len(sds) == len(s.N) && finite(sds[j]) {
					e = math.Abs(sds[j])
				}
				low := lowErr(ys[j], e, true)
				errs = append(errs, struct{ Low, High float64 }{low, e})
				xmin, xmax = math.Min(xmin, s.N[j]), math.Max(xmax, s.N[j])
				ymin, ymax = math.Min(ymin, ys[j]-low), math.Max(ymax, ys[j]+e)
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("benchplot: series %s: %w", s.Label, err)
		}
		c := plotutil.Color(s.Color)
		line.Color = c
		line.Width = vg.Points(1.5)
		if s.Dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		points.Color = c
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		for _, e := range errs {
			if e.High > 0 {
				eb := &plotter.YErrorBars{XYs: pts, YErrors: errs}
				eb.Color, eb.LineStyle.Width, eb.CapWidth = c, vg.Points(1), vg.Points(6)
				p.Add(eb)
				break
			}
		}
		label := s.Label
		if k, ok := Slope(s.N, ys); ok {
			label += fmt.Sprintf(" (k=%.2f)", k)
		}
		p.Legend.Add(label, line, points)
		drawn++
	}
	if drawn == 0 {
		p.Title.Text += " (nothing measured above zero)"
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		p.Y.Color = color.Gray{Y: 128}
		return p, nil
	}
	// A log axis needs a range of positive width.
	if xmin == xmax {
		xmin, xmax = xmin/2, xmax*2
	}
	if ymin == ymax {
		ymin, ymax = ymin/2, ymax*2
	}
	p.X.Min, p.X.Max = xmin/1.15, xmax*1.15
	p.Y.Min, p.Y.Max = ymin/1.3, ymax*1.3
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = nTicks(series), LogTicks{}
	return p, nil
}

// nTicks labels the measured sequence lengths themselves (16, 32, 64, ...) when there are
// at most 12 of them, and falls back to LogTicks otherwise.
func nTicks(series []Series) plot.Ticker {
	seen := map[float64]bool{}
	var vals []float64
	for _, s := range series {
		for _, n := range s.N {
			if n > 0 && !seen[n] {
				seen[n] = true
				vals = append(vals, n)
			}
		}
	}
	if len(vals) == 0 || len(vals) > 12 {
		return LogTicks{}
	}
	return valueTicks(vals)
}

// valueTicks labels exactly the given values, with unlabelled log minor ticks between.
type valueTicks []float64

// Ticks implements plot.Ticker.
func (v valueTicks) Ticks(min, max float64) []plot.Tick {
	ticks := LogTicks{}.Ticks(min, max)
	for i := range ticks {
		ticks[i].Label = ""
	}
	for _, x := range v {
		if x >= min && x <= max {
			ticks = append(ticks, plot.Tick{Value: x, Label: fmt.Sprintf("%g", x)})
		}
	}
	return ticks
}

// LogTicks labels a log axis at powers of 10 and, when the range spans less than two decades (as bench
// ranges often do), the 2× and 5× steps too, so a short axis still gets readable labels.
type LogTicks struct{}

// Ticks implements plot.Ticker.
func (LogTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
	dense := hi-lo <= 2
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < min || v > max {
				continue
			}
			label := ""
			if m == 1 || (dense && (m == 2 || m == 5)) {
				label = fmt.Sprintf("%g", v)
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	labelled := 0
	for _, t := range ticks {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 2 { // less than a decade: label every tick
		for i := range ticks {
			ticks[i].Label = fmt.Sprintf("%g", ticks[i].Value)
		}
	}
	return ticks
}
