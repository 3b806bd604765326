// Package attention draws the attention maps of `zoo attention` (attnmap.Map) as one PNG:
// a heat map per layer (rows) and head (columns), queries top to bottom, keys left to right,
// from white (weight 0) to dark blue (the map's largest weight).
package attention

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/zoo-dev/zoo/internal/benchplot"
	"github.com/zoo-dev/zoo/zoo/attnmap"
)

// Tile returns the size in pixels of one heat map for q queries and k keys: 14 pixels
// per token plus room for the labels, between 240 and 1000.
func Tile(q, k int) (w, h int) {
	clamp := func(x int) int { return min(max(x, 240), 1000) }
	return clamp(14*k + 90), clamp(14*q + 90)
}

// ImageSize is the PNG's size for m: layers × heads tiles plus the title band.
func ImageSize(m attnmap.Map) (w, h int) {
	tw, th := Tile(len(m.Tokens), len(m.Keys))
	return tw * len(m.Layers[0].Heads), th*len(m.Layers) + TitleBand
}

// TitleBand is the height in pixels of the title above the grid.
const TitleBand = 30

// weightGrid is one head's weights as a plotter.GridXYZ: column c is key c, row r counts
// from the bottom, so query 0 is drawn at the top.
type weightGrid [][]float32

// Dims returns the keys and the queries.
func (g weightGrid) Dims() (c, r int) { return len(g[0]), len(g) }

// Z is the weight of key c for the query drawn at row r (from the bottom).
func (g weightGrid) Z(c, r int) float64 { return float64(g[len(g)-1-r][c]) }

// X and Y place cells at integer positions, so tick c labels key c.
func (g weightGrid) X(c int) float64 { return float64(c) }
func (g weightGrid) Y(r int) float64 { return float64(r) }

// Draw writes m's heat maps as a PNG with title above them: one row per layer, one column
// per head. m must have at least one layer and head.
func Draw(w io.Writer, m attnmap.Map, title string) error {
	W, H := ImageSize(m)
	px := func(p int) vg.Length { return vg.Length(p) * vg.Inch / 96 }
	img := vgimg.NewWith(vgimg.UseWH(px(W), px(H)), vgimg.UseDPI(96))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	head := dc
	head.Min.Y = dc.Max.Y - px(TitleBand)
	sty := plot.New().Title.TextStyle // the default font, as every plot's title has it
	sty.Color, sty.XAlign, sty.YAlign = color.Black, draw.XCenter, draw.YCenter
	head.FillText(sty, vg.Point{X: (head.Min.X + head.Max.X) / 2, Y: (head.Min.Y + head.Max.Y) / 2}, title)
	grid := dc
	grid.Max.Y = head.Min.Y
	pal := weightPalette(64)
	plots := make([][]*plot.Plot, len(m.Layers))
	bars := make([][]*plot.Plot, len(m.Layers))
	for i, l := range m.Layers {
		for _, h := range l.Heads {
			bars[i] = append(bars[i], colorBar(pal, maxWeight(h.Weights)))
			p := plot.New()
			p.Title.Text = fmt.Sprintf("layer %d, head %d", l.Layer, h.Head)
			hm := plotter.NewHeatMap(weightGrid(h.Weights), pal)
			hm.Min, hm.Max = 0, maxWeight(h.Weights)
			// Cells drawn as rectangles stay sharp; a big map is drawn as an image instead.
			hm.Rasterized = len(h.Weights)*len(h.Weights[0]) > 128*128
			p.Add(hm)
			p.X.Tick.Marker = labelTicks(m.Keys, false)
			p.Y.Tick.Marker = labelTicks(m.Tokens, true)
			p.X.Tick.Label.Rotation = math.Pi / 2
			p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
			p.X.Label.Text, p.Y.Label.Text = "key", "query"
			plots[i] = append(plots[i], p)
		}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0])}
	canvases := plot.Align(plots, tiles, grid)
	for i := range plots {
		for j, p := range plots[i] {
			// Each map's own colour bar at its right: the map scales white to its largest
			// weight, which the bar's ticks read out.
			// Its bar runs the height of the map's cells: the offsets of a plot's data area
			// from its canvas do not depend on the canvas's size.
			mc, bc := canvases[i][j], canvases[i][j]
			mc.Max.X -= px(ColorBarWidth)
			bc.Min.X, bc.Max.X = mc.Max.X+px(4), bc.Max.X-px(6)
			da, bd := p.DataCanvas(mc), bars[i][j].DataCanvas(bc)
			bc.Min.Y += da.Min.Y - bd.Min.Y
			bc.Max.Y += da.Max.Y - bd.Max.Y
			p.Draw(mc)
			bars[i][j].Draw(bc)
		}
	}
	_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
	return err
}

// ColorBarWidth is the width in pixels of the colour bar beside each map, with its labels,
// taken from the right of the map's tile.
const ColorBarWidth = 64

// barGrid is a colour bar's cells: two columns of n rows running from 0 to max.
type barGrid struct {
	n   int
	max float64
}

// Dims returns the bar's two columns and n rows.
func (g barGrid) Dims() (c, r int) { return 2, g.n }

// Z is the weight at the middle of row r, the same in both columns.
func (g barGrid) Z(c, r int) float64 { return (float64(r) + 0.5) * g.max / float64(g.n) }

// X and Y place the cells: columns at integers, rows at the weight they show.
func (g barGrid) X(c int) float64 { return float64(c) }
func (g barGrid) Y(r int) float64 { return (float64(r) + 0.5) * g.max / float64(g.n) }

// colorBar is the plot of a map's colour scale: pal from 0 (white) to hi, labelled on the
// right with the weights (ticks that never read twice).
func colorBar(pal palette.Palette, hi float64) *plot.Plot {
	p := plot.New()
	// Its name along its axis, not as a title: a title sits above the map's and can run
	// into the picture's.
	p.Y.Label.Text = "weight"
	hm := plotter.NewHeatMap(barGrid{n: 64, max: hi}, pal)
	hm.Min, hm.Max = 0, hi
	hm.Rasterized = true // one smooth ramp, not 64 cells with seams
	p.Add(hm)
	p.HideX()
	p.Y.Min, p.Y.Max = 0, hi
	p.Y.Tick.Marker = benchplot.LinearTicks{}
	return p
}

// weightPalette runs from white (weight 0) to dark blue (the map's largest weight), so
// masked-out entries read as blank paper.
type weightPalette int

// Colors returns the n colours, weight 0 first.
func (n weightPalette) Colors() []color.Color {
	out := make([]color.Color, n)
	for i := range out {
		t := float64(i) / float64(n-1)
		out[i] = color.RGBA{R: uint8(255 * (1 - t)), G: uint8(255 - 200*t), B: uint8(255 - 115*t), A: 255}
	}
	return out
}

var _ palette.Palette = weightPalette(0)

// maxWeight is the largest weight (at least the smallest positive float, so that an
// all-zero map still has a range).
func maxWeight(rows [][]float32) float64 {
	m := math.SmallestNonzeroFloat32
	for _, r := range rows {
		for _, x := range r {
			m = max(m, float64(x))
		}
	}
	return m
}

// labelTicks labels every position with its token (every k-th when there are many);
// flipped counts positions from the top, as weightGrid draws queries.
func labelTicks(labels []string, flipped bool) plot.ConstantTicks {
	step := max(1, len(labels)/64)
	var ticks []plot.Tick
	for i := 0; i < len(labels); i += step {
		v := float64(i)
		if flipped {
			v = float64(len(labels) - 1 - i)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: labels[i]})
	}
	return plot.ConstantTicks(ticks)
}
