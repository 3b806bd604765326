package trainout

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/compare"
	"github.com/zoo-dev/zoo/internal/benchplot"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot draws --plot as a PNG on w: the training loss of every step (faint, under its
// moving average) and, when the run evaluated, the held-out loss at each evaluation (left),
// and the held-out bits per byte (right). Lines with neither loss are an error.
func Plot(w io.Writer, lines []Line, title string) (err error) {
	var train, eval, bpb plotter.XYs
	for _, l := range lines {
		switch {
		case l.IsEval():
			eval = append(eval, plotter.XY{X: float64(l.Step), Y: *l.EvalLoss})
			if l.EvalBitsPB != nil {
				bpb = append(bpb, plotter.XY{X: float64(l.Step), Y: *l.EvalBitsPB})
			}
		case l.Loss != nil && !math.IsNaN(*l.Loss) && !math.IsInf(*l.Loss, 0):
			train = append(train, plotter.XY{X: float64(l.Step), Y: *l.Loss})
		}
	}
	if len(train) == 0 && len(eval) == 0 {
		return errors.New("plot: no losses to draw")
	}
	// gonum/plot panics on some degenerate inputs; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: %v", r)
		}
	}()
	loss := plot.New()
	loss.Title.Text = title
	loss.X.Label.Text = "step"
	loss.Y.Label.Text = "loss (nats per counted token)"
	loss.Add(plotter.NewGrid())
	loss.Legend.Top = true
	if len(train) > 0 {
		raw, err := plotter.NewLine(train)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		r, g, b, _ := plotutil.Color(0).RGBA()
		raw.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 70} // the smoothed line's, faint
		raw.Width = vg.Points(0.75)
		loss.Add(raw)
		ys := make([]float64, len(train))
		for i, p := range train {
			ys[i] = p.Y
		}
		smooth := make(plotter.XYs, len(train))
		for i, y := range compare.Smooth(ys) {
			smooth[i] = plotter.XY{X: train[i].X, Y: y}
		}
		l, err := plotter.NewLine(smooth)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = plotutil.Color(0)
		l.Width = vg.Points(1.5)
		loss.Add(l)
		loss.Legend.Add("training batch (raw: faint)", raw)
		loss.Legend.Add("training batch, smoothed", l)
	}
	panels := []*plot.Plot{loss}
	if len(eval) > 0 {
		l, p, err := plotter.NewLinePoints(eval)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color, p.Color = plotutil.Color(1), plotutil.Color(1)
		l.Width = vg.Points(1.5)
		loss.Add(l, p)
		loss.Legend.Add("held-out", l, p)

		bp := plot.New()
		bp.Title.Text = "held-out bits per byte"
		bp.X.Label.Text = "step"
		bp.Y.Label.Text = "bits per byte"
		bp.Add(plotter.NewGrid())
		bl, bpts, err := plotter.NewLinePoints(bpb)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		bl.Color, bpts.Color = plotutil.Color(2), plotutil.Color(2)
		bl.Width = vg.Points(1.5)
		bp.Add(bl, bpts)
		bp.X.Tick.Marker, bp.Y.Tick.Marker = benchplot.LinearTicks{}, benchplot.LinearTicks{}
		panels = append(panels, bp)
	}
	loss.X.Tick.Marker, loss.Y.Tick.Marker = benchplot.LinearTicks{}, benchplot.LinearTicks{}
	return benchplot.WriteRow(w, panels, 800*len(panels), 560)
}
