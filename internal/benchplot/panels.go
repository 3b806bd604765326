package benchplot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Curve is one data set of a Panel: a line through its points, or labelled points alone
// (a scatter), in a palette colour.
type Curve struct {
	// Label names the curve in the legend ("" keeps it out of the legend).
	Label string
	// X and Y are the points (same length); points that a log axis cannot show (not
	// positive) and non-finite ones are left out.
	X, Y []float64
	// Color is the palette index (plotutil.Color); curves of one variant share it.
	Color int
	// Dashed draws the line dashed; Marks draws a mark at each point; Scatter draws the
	// marks without a line; Faint draws a thin translucent line (raw values under a
	// smoothed curve).
	Dashed, Marks, Scatter, Faint bool
	// Shape is the marks' shape index (plotutil.Shape); curves of one variant share it.
	Shape int
	// PointLabels, when as long as X, writes a text beside each point (a scatter's names);
	// EndLabel writes Label beside the curve's last point. Labels of a panel are moved apart
	// so that none overlaps another.
	PointLabels []string
	EndLabel    bool
	// XErr and YErr, when as long as X, draw error bars of ± that much at each point.
	XErr, YErr []float64
}

// Panel is one chart of a RenderPanels image.
type Panel struct {
	Title, XLabel, YLabel string
	// LogX and LogY put that axis on a log scale.
	LogX, LogY bool
	Curves     []Curve
}

// RenderPanels draws panels side by side into one width×height pixel PNG on w. A panel
// with no drawable point says so in its title instead of drawing an empty axis. It returns
// an error for no panels or a failed encoding, and turns a gonum/plot panic into an error.
func RenderPanels(w io.Writer, panels []Panel, width, height int) (err error) {
	if len(panels) == 0 {
		return errors.New("benchplot: no panels to draw")
	}
	if width <= 0 || height <= 0 {
		return fmt.Errorf("benchplot: image size %d×%d is not positive", width, height)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("benchplot: draw: %v", r)
		}
	}()
	plots := make([]*plot.Plot, len(panels))
	// The plotting area of each panel, roughly, in pixels (for moving labels apart).
	areaW, areaH := float64(width)/float64(len(panels))-110, float64(height)-110
	for i, p := range panels {
		if plots[i], err = drawPanel(p, areaW, areaH); err != nil {
			return err
		}
	}
	return WriteRow(w, plots, width, height)
}

// WriteRow draws plots side by side, aligned, into one width×height pixel PNG on w (96 pixels
// to the inch). It returns the encoder's error; the caller recovers gonum/plot's panics.
func WriteRow(w io.Writer, plots []*plot.Plot, width, height int) error {
	img := vgimg.New(vg.Length(width)*vg.Inch/96, vg.Length(height)*vg.Inch/96)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("benchplot: encode PNG: %w", err)
	}
	return nil
}

// drawPanel builds one panel's plot, whose plotting area is about areaW×areaH pixels.
func drawPanel(pn Panel, areaW, areaH float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.Title
	p.X.Label.Text = pn.XLabel
	p.Y.Label.Text = pn.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	drawn := 0
	var texts []placedLabel
	for _, c := range pn.Curves {
		var pts plotter.XYs
		var labels []string
		var xerr, yerr []float64
		for j := range c.X {
			if j >= len(c.Y) {
				break
			}
			x, y := c.X[j], c.Y[j]
			if !finite(x) || !finite(y) || (pn.LogX && x <= 0) || (pn.LogY && y <= 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: x, Y: y})
			if len(c.PointLabels) == len(c.X) {
				labels = append(labels, c.PointLabels[j])
			}
			ex, ey := 0.0, 0.0
			if len(c.XErr) == len(c.X) && finite(c.XErr[j]) {
				ex = math.Abs(c.XErr[j])
			}
			if len(c.YErr) == len(c.X) && finite(c.YErr[j]) {
				ey = math.Abs(c.YErr[j])
			}
			xerr, yerr = append(xerr, ex), append(yerr, ey)
			xmin, xmax = math.Min(xmin, x-lowErr(x, ex, pn.LogX)), math.Max(xmax, x+ex)
			ymin, ymax = math.Min(ymin, y-lowErr(y, ey, pn.LogY)), math.Max(ymax, y+ey)
		}
		if len(pts) == 0 {
			continue
		}
		col := plotutil.Color(c.Color)
		var thumbs []plot.Thumbnailer
		if !c.Scatter {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, fmt.Errorf("benchplot: curve %s: %w", c.Label, err)
			}
			l.Color, l.Width = col, vg.Points(1.5)
			if c.Faint {
				r, g, b, _ := col.RGBA()
				l.Color, l.Width = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 70}, vg.Points(0.75)
			}
			if c.Dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l)
			thumbs = append(thumbs, l)
		}
		if hasErr(yerr) {
			eb := &plotter.YErrorBars{XYs: pts, YErrors: plotter.YErrors(lowHigh(pts, yerr, pn.LogY, func(p plotter.XY) float64 { return p.Y }))}
			eb.Color, eb.LineStyle.Width, eb.CapWidth = col, vg.Points(1), vg.Points(6)
			p.Add(eb)
		}
		if hasErr(xerr) {
			eb := &plotter.XErrorBars{XYs: pts, XErrors: plotter.XErrors(lowHigh(pts, xerr, pn.LogX, func(p plotter.XY) float64 { return p.X }))}
			eb.Color, eb.LineStyle.Width, eb.CapWidth = col, vg.Points(1), vg.Points(6)
			p.Add(eb)
		}
		if c.Marks || c.Scatter {
			s, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("benchplot: curve %s: %w", c.Label, err)
			}
			s.Color, s.Shape = col, plotutil.Shape(c.Shape)
			if c.Scatter {
				s.Radius = vg.Points(4)
			}
			p.Add(s)
			thumbs = append(thumbs, s)
		}
		if len(labels) == len(pts) {
			for k, pt := range pts {
				texts = append(texts, placedLabel{text: labels[k], x: pt.X, y: pt.Y, color: col})
			}
		}
		switch {
		case c.EndLabel && c.Label != "":
			last := pts[len(pts)-1]
			texts = append(texts, placedLabel{text: c.Label, x: last.X, y: last.Y, color: col})
		case c.Label != "":
			p.Legend.Add(c.Label, thumbs...)
		}
		drawn++
	}
	if drawn == 0 {
		p.Title.Text += " (nothing to draw)"
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		return p, nil
	}
	p.X.Min, p.X.Max = pad(xmin, xmax, pn.LogX, 1.15, 0.03)
	// Labels beside points need room on the right: as much as the longest takes.
	if len(texts) > 0 {
		longest := 0
		for _, t := range texts {
			longest = max(longest, len([]rune(t.text)))
		}
		frac := math.Min(0.6, (float64(longest)*labelCharW+12)/math.Max(areaW, 100))
		if pn.LogX {
			p.X.Max = math.Exp(math.Log(p.X.Max) + frac/(1-frac)*(math.Log(p.X.Max)-math.Log(p.X.Min)))
		} else {
			p.X.Max += frac / (1 - frac) * (p.X.Max - p.X.Min)
		}
	}
	p.Y.Min, p.Y.Max = pad(ymin, ymax, pn.LogY, 1.3, 0.08)
	if pn.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, LogTicks{}
	} else {
		p.X.Tick.Marker = LinearTicks{}
	}
	if pn.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, LogTicks{}
	} else {
		p.Y.Tick.Marker = LinearTicks{}
	}
	if len(texts) > 0 {
		ax := axisMap{p.X.Min, p.X.Max, pn.LogX}
		ay := axisMap{p.Y.Min, p.Y.Max, pn.LogY}
		separate(texts, ax, ay, areaW, areaH)
		for _, t := range texts {
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: t.x, Y: t.y}}, Labels: []string{t.text}})
			if err != nil {
				return nil, fmt.Errorf("benchplot: label %s: %w", t.text, err)
			}
			lb.TextStyle[0].Color = t.color
			lb.TextStyle[0].YAlign = draw.YCenter
			lb.Offset = vg.Point{X: vg.Points(6)}
			p.Add(lb)
		}
	}
	return p, nil
}

// labelCharW and labelH are a label's width per character and height in pixels (gonum's
// default 10-point font at 96 dpi, with a margin).
const labelCharW, labelH = 7.0, 15.0

// placedLabel is a text written at (x, y) in data coordinates; separate moves y.
type placedLabel struct {
	text  string
	x, y  float64
	color color.Color
}

// axisMap maps an axis's data values to [0, 1] of its length (log axes in log space).
type axisMap struct {
	min, max float64
	log      bool
}

func (a axisMap) frac(v float64) float64 {
	if a.log {
		return (math.Log(v) - math.Log(a.min)) / (math.Log(a.max) - math.Log(a.min))
	}
	return (v - a.min) / (a.max - a.min)
}

func (a axisMap) value(f float64) float64 {
	if a.log {
		return math.Exp(math.Log(a.min) + f*(math.Log(a.max)-math.Log(a.min)))
	}
	return a.min + f*(a.max-a.min)
}

// separate moves labels vertically, fewest moves first, until no two overlap: each label is
// a box of its text's width to the right of its point and labelH high around it, in pixels
// of an areaW×areaH plotting area.
func separate(ts []placedLabel, ax, ay axisMap, areaW, areaH float64) {
	type box struct{ x0, x1, y float64 } // pixels, y up
	boxes := make([]box, len(ts))
	order := make([]int, len(ts))
	for i, t := range ts {
		x0 := ax.frac(t.x)*areaW + 6
		boxes[i] = box{x0, x0 + float64(len([]rune(t.text)))*labelCharW, ay.frac(t.y) * areaH}
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return boxes[order[a]].y < boxes[order[b]].y })
	var placed []int
	for _, i := range order {
		b := &boxes[i]
		for tries := 0; tries < 4*len(ts)+4; tries++ {
			hit := -1
			for _, j := range placed {
				o := boxes[j]
				// The tolerance: a label just moved to o.y + labelH can differ from o.y by a
				// hair less than labelH in floating point, and must not count as a hit again
				// (it did: three labels ended on one spot after tries ran out).
				if b.x0 < o.x1 && o.x0 < b.x1 && math.Abs(b.y-o.y) < labelH-1e-6 {
					hit = j
					break
				}
			}
			if hit < 0 {
				break
			}
			b.y = boxes[hit].y + labelH // above the one it hits
		}
		placed = append(placed, i)
		ts[i].y = ay.value(math.Min(b.y, areaH-labelH/2) / areaH)
	}
}

// LinearTicks labels a linear axis at a step of 1, 2 or 5 times a power of ten that gives
// four to ten ticks, every label with the decimals that step needs, so no two labels read
// alike (gonum's default can print 6.9 twice on a narrow range).
type LinearTicks struct{}

// Ticks implements plot.Ticker.
func (LinearTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !finite(lo) || !finite(hi) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		v := k * step
		label := strconv.FormatFloat(v, 'f', decimals, 64)
		if label == "-"+strconv.FormatFloat(0, 'f', decimals, 64) {
			label = label[1:]
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
		// Unlabelled minor ticks halfway.
		if h := v + step/2; h <= hi {
			ticks = append(ticks, plot.Tick{Value: h})
		}
	}
	return ticks
}

func hasErr(e []float64) bool {
	for _, x := range e {
		if x > 0 {
			return true
		}
	}
	return false
}

// lowHigh turns ± values into gonum's (low, high) error pairs; on a log axis a bar stops
// short of zero (lowErr).
func lowHigh(pts plotter.XYs, e []float64, log bool, v func(plotter.XY) float64) []struct{ Low, High float64 } {
	out := make([]struct{ Low, High float64 }, len(e))
	for i, x := range e {
		out[i].Low, out[i].High = lowErr(v(pts[i]), x, log), x
	}
	return out
}

// lowErr is how far below v a bar of ± e reaches: e, or on a log axis, which cannot show 0,
// at most down to a tenth of v: a bar cut at 99.9 % of v set the axis three decades below
// the data and flattened every curve (a spread that large is flagged as noise anyway).
func lowErr(v, e float64, log bool) float64 {
	if log {
		return math.Min(e, 0.9*v)
	}
	return e
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// pad widens [lo, hi] for drawing: by a factor on a log axis, by a fraction of the range on
// a linear one; an empty range gets a width of its own.
func pad(lo, hi float64, log bool, factor, frac float64) (float64, float64) {
	if log {
		if lo == hi {
			lo, hi = lo/2, hi*2
		}
		return lo / factor, hi * factor
	}
	if lo == hi {
		d := math.Max(math.Abs(lo)*0.1, 1)
		return lo - d, hi + d
	}
	d := (hi - lo) * frac
	return lo - d, hi + d
}
