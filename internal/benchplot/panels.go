package benchplot

import (
	"errors"
	"fmt"
	"io"
	"math"

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
	// marks without a line.
	Dashed, Marks, Scatter bool
	// PointLabels, when as long as X, writes a text beside each point (a scatter's names).
	PointLabels []string
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
	for i, p := range panels {
		if plots[i], err = drawPanel(p); err != nil {
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

// drawPanel builds one panel's plot.
func drawPanel(pn Panel) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.Title
	p.X.Label.Text = pn.XLabel
	p.Y.Label.Text = pn.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	drawn := 0
	for i, c := range pn.Curves {
		var pts plotter.XYs
		var labels []string
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
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
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
			if c.Dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l)
			thumbs = append(thumbs, l)
		}
		if c.Marks || c.Scatter {
			s, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("benchplot: curve %s: %w", c.Label, err)
			}
			s.Color, s.Shape = col, plotutil.Shape(i)
			if c.Scatter {
				s.Radius = vg.Points(4)
			}
			p.Add(s)
			thumbs = append(thumbs, s)
		}
		if len(labels) == len(pts) {
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
			if err != nil {
				return nil, fmt.Errorf("benchplot: curve %s: %w", c.Label, err)
			}
			for k := range lb.TextStyle {
				lb.TextStyle[k].Color = col
			}
			lb.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(3)}
			p.Add(lb)
		}
		if c.Label != "" {
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
	// Labels beside points need room on the right.
	if hasLabels(pn.Curves) {
		if pn.LogX {
			p.X.Max *= 1.6
		} else {
			p.X.Max += 0.25 * (p.X.Max - p.X.Min)
		}
	}
	p.Y.Min, p.Y.Max = pad(ymin, ymax, pn.LogY, 1.3, 0.08)
	if pn.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if pn.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	return p, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func hasLabels(cs []Curve) bool {
	for _, c := range cs {
		if len(c.PointLabels) > 0 {
			return true
		}
	}
	return false
}

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
