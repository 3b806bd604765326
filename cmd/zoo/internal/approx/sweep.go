package approx

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/benchplot"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/zoo/attnmap"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Doc is a sweep of one variant's approximation knob (`zoo approx`; --json prints it).
type Doc struct {
	Variant string  `json:"variant"`
	Vanilla string  `json:"vanilla"`
	Knob    string  `json:"knob"`
	N       int     `json:"n"`
	Points  []Point `json:"points"`
}

// Point is the error at one knob value: per layer, per head.
type Point struct {
	Value    int         `json:"value"`
	Coverage float64     `json:"coverage,omitempty"` // sparse: fraction of (query, key) pairs attended
	Mean     float64     `json:"mean_rel_err"`
	Max      float64     `json:"max_rel_err"`
	Layers   [][]float64 `json:"layers"` // [layer][head]
}

// knobs names each variant's knob; vanilla and linear have none.
var knobs = map[string]string{"linformer": "k", "performer": "features", "nystrom": "landmarks", "sparse": "window", "vanilla": "", "linear": ""}

// Knob names variant's approximation knob ("" for vanilla and linear, which have none);
// ok is false for a variant whose approximation is not known.
func Knob(variant string) (knob string, ok bool) {
	knob, ok = knobs[variant]
	return knob, ok
}

// Layer is one layer's Q, K, V per head (n×dk each) and, for vanilla, the backend's
// attention output, each [head][row][col].
type Layer struct {
	Q, K, V, Out [][][]float64
}

// SparseBlock is the block sparse's sweep uses on n tokens: the variant's block, but at
// least 8 blocks over the text, so that the sweep shows a range; 0 for other variants.
func SparseBlock(variant string, block, n int) int {
	if variant != "sparse" {
		return 0
	}
	return max(1, min(block, n/8))
}

// Values parses --values (flag), or returns the default sweep of variant at length n: powers
// of two (linformer's k and nystrom's landmarks up to n, performer's features 8 to 1024,
// sparse's window 0, 1, 2, 4, ... blocks of block tokens until it covers every block), and one
// point for variants without a knob.
func Values(flag, variant string, n, block int) ([]int, error) {
	if knobs[variant] == "" {
		if flag != "" {
			return nil, fmt.Errorf("--values: %s has no approximation knob to sweep", variant)
		}
		return []int{0}, nil
	}
	if flag != "" {
		vals, err := format.ParseCounts("values", flag)
		if variant == "sparse" && err != nil {
			// a window of 0 blocks (the query's own block) is a valid point
			vals = nil
			for _, s := range strings.Split(flag, ",") {
				v, e := strconv.Atoi(strings.TrimSpace(s))
				if e != nil || v < 0 {
					return nil, fmt.Errorf("--values %q: want window sizes ≥ 0 separated by commas", flag)
				}
				vals = append(vals, v)
			}
			err = nil
		}
		return vals, err
	}
	var out []int
	switch variant {
	case "performer":
		for m := 8; m <= 1024; m *= 2 {
			out = append(out, m)
		}
	case "sparse":
		out = append(out, 0)
		for w := 1; ; w *= 2 {
			out = append(out, w)
			if w*block >= n {
				break
			}
		}
	default:
		for k := 2; k < n; k *= 2 {
			out = append(out, k)
		}
		out = append(out, n)
	}
	return out, nil
}

// Setup is a sweep of Variant's knob on the Q, K and V of a run of Vanilla (the model, as
// reports name it) over N tokens.
type Setup struct {
	Variant, Vanilla string
	N                int
	// Values are the knob's values (see Values); Block is SparseBlock's.
	Values []int
	Block  int
	// Seed seeds the random draws, one stream per value, so that a value's draws do not
	// depend on the others swept.
	Seed uint64
}

// Sweep reads the values Probes named out of a run's outputs and computes, for every value of
// the variant's knob, the relative error of its approximation against exact softmax attention
// on every layer's and head's Q, K and V.
func Sweep(s Setup, outs map[string]*tensor.Tensor, keep []string) (*Doc, error) {
	layers, err := Layers(outs, keep, s.N)
	if err != nil {
		return nil, err
	}
	return SweepLayers(s, layers)
}

// SweepLayers is Sweep on layers already read (see Layers).
func SweepLayers(s Setup, layers []Layer) (*Doc, error) {
	variant, n, block := s.Variant, s.N, s.Block
	if len(layers) == 0 {
		return nil, fmt.Errorf("approx: %s: no layer to compare", s.Vanilla)
	}
	doc := &Doc{Variant: variant, Vanilla: s.Vanilla, Knob: knobs[variant], N: n}
	for _, val := range s.Values {
		pt := Point{Value: val}
		if block > 0 {
			pat := sparse.Pattern{Block: block, Window: val}
			pairs := 0
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					if pat.Allowed(i, j) {
						pairs++
					}
				}
			}
			pt.Coverage = float64(pairs) / float64(n*n)
		}
		rng := rand.New(rand.NewPCG(s.Seed, uint64(val)))
		var sum float64
		count := 0
		for _, l := range layers {
			var errs []float64
			for h := range l.Q {
				q, k, v := l.Q[h], l.K[h], l.V[h]
				exact := Exact(q, k, v, nil)
				var got [][]float64
				switch variant {
				case "vanilla":
					got = l.Out[h]
				case "linear":
					got = Linear(q, k, v)
				case "linformer":
					got = Linformer(q, k, v, val, rng)
				case "performer":
					got = Performer(q, k, v, val, rng)
				case "nystrom":
					var err error
					if got, err = Nystrom(q, k, v, val); err != nil {
						return nil, err
					}
				case "sparse":
					got = Exact(q, k, v, sparse.Pattern{Block: block, Window: val}.Allowed)
				default:
					return nil, fmt.Errorf("approx: no approximation of %s is known", variant)
				}
				e := RelErr(got, exact)
				errs = append(errs, e)
				sum += e
				count++
				pt.Max = math.Max(pt.Max, e)
			}
			pt.Layers = append(pt.Layers, errs)
		}
		pt.Mean = sum / float64(count)
		doc.Points = append(doc.Points, pt)
	}
	return doc, nil
}

// Probes finds, around each layer's attention softmax (sites, from attnmap.Sites), the values
// a run must keep for Sweep, four per layer: Q and K (the product the softmax's scores come
// from is Q·Kᵀ, Kᵀ a Transpose of K), V and the attention output (the product that reads the
// softmax multiplies by V). name is the model, for errors.
func Probes(g *graph.Graph, sites []attnmap.Site, name string) ([]string, error) {
	producer, readers := map[string]*graph.Node{}, map[string][]*graph.Node{}
	for _, nd := range g.Nodes {
		for _, o := range nd.Outputs {
			producer[o] = nd
		}
		for _, in := range nd.Inputs {
			readers[in] = append(readers[in], nd)
		}
	}
	var keep []string
	for _, s := range sites {
		sm := producer[s.Value]
		x := sm.Inputs[0]
		// Back through the score ops (scale, mask bias) to the product.
		for producer[x] != nil && producer[x].Op != "MatMul" && (producer[x].Op == "Div" || producer[x].Op == "Mul" || producer[x].Op == "Add") {
			x = producer[x].Inputs[0]
		}
		qk := producer[x]
		if qk == nil || qk.Op != "MatMul" || producer[qk.Inputs[1]] == nil || producer[qk.Inputs[1]].Op != "Transpose" {
			return nil, fmt.Errorf("approx: %s layer %d: the softmax's scores are not MatMul(Q, Transpose(K))", name, s.Layer)
		}
		var pv *graph.Node
		for _, r := range readers[s.Value] {
			if r.Op == "MatMul" && r.Inputs[0] == s.Value {
				pv = r
			}
		}
		if pv == nil {
			return nil, fmt.Errorf("approx: %s layer %d: no MatMul(softmax, V) reads the softmax", name, s.Layer)
		}
		keep = append(keep, qk.Inputs[0], producer[qk.Inputs[1]].Inputs[0], pv.Inputs[1], pv.Outputs[0])
	}
	return keep, nil
}

// Layers reads the values Probes named out of a run's outputs (batch 1, n tokens), per layer.
func Layers(outs map[string]*tensor.Tensor, keep []string, n int) ([]Layer, error) {
	var layers []Layer
	for i := 0; i+3 < len(keep); i += 4 {
		var l Layer
		for j, dst := range []*[][][]float64{&l.Q, &l.K, &l.V, &l.Out} {
			h, err := PerHead(outs[keep[i+j]], n)
			if err != nil {
				return nil, fmt.Errorf("approx: layer %d, %s: %w", i/4, keep[i+j], err)
			}
			*dst = h
		}
		layers = append(layers, l)
	}
	return layers, nil
}

// PerHead splits a (1, h, n, d) float32 tensor into h n×d float64 matrices.
func PerHead(t *tensor.Tensor, n int) ([][][]float64, error) {
	if t == nil || t.DType != tensor.Float32 || len(t.Shape) != 4 || t.Shape[0] != 1 || t.Shape[2] != n {
		var shape []int
		if t != nil {
			shape = t.Shape
		}
		return nil, fmt.Errorf("want a float32 (1, heads, %d, d) value, got shape %v", n, shape)
	}
	h, d := t.Shape[1], t.Shape[3]
	out := make([][][]float64, h)
	for a := range out {
		out[a] = make([][]float64, n)
		for i := range out[a] {
			row := t.F32[(a*n+i)*d : (a*n+i+1)*d]
			out[a][i] = make([]float64, d)
			for j, x := range row {
				out[a][i][j] = float64(x)
			}
		}
	}
	return out, nil
}

// Print renders the sweep: one row per knob value, the mean error over heads per layer, and
// the mean and worst over all; then "plot: PATH" when plotPath is not "".
func Print(w io.Writer, doc Doc, plotPath string) {
	fmt.Fprintf(w, "%s vs exact softmax attention on %s's Q, K, V over %s (relative error ‖O − O_exact‖/‖O_exact‖)\n", doc.Variant, doc.Vanilla, format.Plural(doc.N, "token"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	knob := doc.Knob
	if knob == "" {
		knob = "-"
	}
	hdr := []string{knob}
	if doc.Variant == "sparse" {
		hdr = append(hdr, "coverage")
	}
	for l := range doc.Points[0].Layers {
		hdr = append(hdr, fmt.Sprintf("layer %d", l))
	}
	fmt.Fprintln(tw, strings.Join(append(hdr, "mean", "worst"), "\t")+"\t")
	for _, p := range doc.Points {
		row := []string{strconv.Itoa(p.Value)}
		if doc.Knob == "" {
			row[0] = "-"
		}
		if doc.Variant == "sparse" {
			row = append(row, fmt.Sprintf("%.1f %%", 100*p.Coverage))
		}
		for _, l := range p.Layers {
			var s float64
			for _, e := range l {
				s += e
			}
			row = append(row, fmt.Sprintf("%.3g", s/float64(len(l))))
		}
		row = append(row, fmt.Sprintf("%.3g", p.Mean), fmt.Sprintf("%.3g", p.Max))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	if plotPath != "" {
		fmt.Fprintf(w, "plot: %s\n", plotPath)
	}
}

// Plot draws the mean error over heads of each layer against the knob (log-log) as a PNG.
func Plot(w io.Writer, doc Doc) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s vs exact attention on %s, n = %d", doc.Variant, doc.Vanilla, doc.N)
	if strings.HasPrefix(doc.Variant, "linformer") {
		// The sweep draws E and F; a trained linformer's would do better.
		p.Title.Text += "\nE and F random, N(0, 1/k), not trained"
	}
	p.X.Label.Text = doc.Knob
	if doc.Knob == "" {
		p.X.Label.Text = "(no knob)"
	}
	p.Y.Label.Text = "relative error of the attention output"
	logX := doc.Knob != "" && doc.Knob != "window"
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, benchplot.LogTicks{}
	} else {
		p.X.Tick.Marker = benchplot.LinearTicks{}
	}
	positive := true
	for _, pt := range doc.Points {
		positive = positive && pt.Mean > 0
	}
	if positive {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, benchplot.LogTicks{}
	} else {
		p.Y.Tick.Marker = benchplot.LinearTicks{}
	}
	var lines []any // name, points, name, points, ...: one call gives each line its own colour
	for l := range doc.Points[0].Layers {
		var xy plotter.XYs
		for _, pt := range doc.Points {
			var s float64
			for _, e := range pt.Layers[l] {
				s += e
			}
			if x := float64(pt.Value); (!logX || x > 0) && (!positive || s > 0) {
				xy = append(xy, plotter.XY{X: x, Y: s / float64(len(pt.Layers[l]))})
			}
		}
		lines = append(lines, fmt.Sprintf("layer %d", l), xy)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	p.Legend.Top = true
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(12), -vg.Points(6) // clear of the image's edge
	wt, err := p.WriterTo(9*vg.Inch, 5.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
