package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/approx"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/zoo/attnmap"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func approxCommand() *cli.Command {
	return &cli.Command{
		Name:      "approx",
		Usage:     "measure how far a variant's attention approximation is from exact softmax attention on a text, sweeping its knob",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Runs vanilla[.PRESET] with --weights on the first --tokens bytes of --input, takes every layer's per-head Q,\n" +
			"K and V from that run, and computes on them exact softmax attention and NAME's approximation (float64), over\n" +
			"a sweep of its knob: linformer's k (E, F drawn N(0, 1/k), the paper's random projection, not trained ones),\n" +
			"performer's random features (FAVOR+), nystrom's landmarks (segment means, exact pseudo-inverse), sparse's\n" +
			"window in blocks (coverage = the fraction of pairs attended), linear's elu+1 kernel (no knob). vanilla\n" +
			"compares the backend's own attention output with the exact one (0 up to rounding). The error is\n" +
			"‖O − O_exact‖_F / ‖O_exact‖_F per layer and head; the table prints the mean over heads per layer, and the mean\n" +
			"and worst over all. --values sets the sweep; --seed seeds the random draws. -o plots error against the knob." +
			examples("zoo approx linformer --weights vanilla.safetensors --input text.txt",
				"zoo approx performer.tiny --weights w.safetensors --input text.txt --values 16,64,256 --json",
				"zoo approx nystrom --weights vanilla.safetensors --input text.txt -o nystrom.png"),
		Flags: []cli.Flag{flagPreset, flagSeed, flagRegistry,
			&cli.StringFlag{Name: "weights", Usage: "the vanilla model's state_dict `FILE`.safetensors (zoo train, zoo export --weights, or PyTorch)", Required: true},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` whose first tokens are encoded", Required: true},
			&cli.IntFlag{Name: "tokens", Value: 256, Usage: "tokens (bytes) of the input, at most vanilla's maximum length"},
			&cli.StringFlag{Name: "values", Usage: "knob values to sweep, `V,V,...` (default: powers of two up to the length)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "plot the error against the knob to `FILE.png`"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagBackend, flagJSON,
		},
		Action: approxAction,
	}
}

// approxDoc is what `zoo approx --json` prints.
type approxDoc struct {
	Variant string        `json:"variant"`
	Vanilla string        `json:"vanilla"`
	Knob    string        `json:"knob"`
	N       int           `json:"n"`
	Points  []approxPoint `json:"points"`
}

// approxPoint is the error at one knob value: per layer, per head.
type approxPoint struct {
	Value    int         `json:"value"`
	Coverage float64     `json:"coverage,omitempty"` // sparse: fraction of (query, key) pairs attended
	Mean     float64     `json:"mean_rel_err"`
	Max      float64     `json:"max_rel_err"`
	Layers   [][]float64 `json:"layers"` // [layer][head]
}

// approxKnobs names each variant's knob; vanilla and linear have none.
var approxKnobs = map[string]string{"linformer": "k", "performer": "features", "nystrom": "landmarks", "sparse": "window", "vanilla": "", "linear": ""}

// headQKV is one layer's Q, K, V per head (n×dk each) and, for vanilla, the backend's
// attention output.
type headQKV struct {
	q, k, v, out [][][]float64 // [head][row][col]
}

func approxAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("approx: want one variant name (see `zoo list`), got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	outPath := c.String("output")
	if outPath != "" {
		if err := checkOutputFile("-o", outPath, ".png"); err != nil {
			return badInput(err)
		}
	}
	ntok := c.Int("tokens")
	if ntok < 2 || c.Int("threads") < 0 {
		return badInputf("--tokens must be at least 2 and --threads not negative (got %d, %d)", ntok, c.Int("threads"))
	}
	_, entry, preset, cfg, err := resolveVariant(c, ref)
	if err != nil {
		return err
	}
	knob, ok := approxKnobs[entry.Name]
	if !ok {
		return badInputf("approx: no approximation of %s is known (variants: linformer, performer, nystrom, sparse, linear, vanilla); its attention is exact softmax attention or not an approximation of it", entry.Name)
	}
	text, err := format.ReadHead(c.String("input"), ntok)
	if err != nil {
		return badInput(err)
	}
	if len(text) < 2 {
		return badInputf("input %s: %d byte: want at least 2 tokens", c.String("input"), len(text))
	}
	vref := "vanilla"
	if preset != "" {
		vref += "." + preset
	}
	m, err := loadModel(c, vref)
	if err != nil {
		return err
	}
	if text, err = fitMaxLen(text, m, ntok, c.IsSet("tokens")); err != nil {
		return err
	}
	n := len(text)
	layers, err := vanillaQKV(c, m, text)
	if err != nil {
		return err
	}
	doc := approxDoc{Variant: entry.Name, Vanilla: m.displayName(), Knob: knob, N: n}
	block := 0
	if entry.Name == "sparse" {
		// The variant's block, but at least 8 blocks over the text, so the sweep shows a range.
		block = max(1, min(cfg.Int("block"), n/8))
	}
	values, err := approxValues(c.String("values"), entry.Name, n, block)
	if err != nil {
		return badInput(err)
	}
	for _, val := range values {
		pt := approxPoint{Value: val}
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
		// One stream per knob value, so a value's draws do not depend on the others swept.
		rng := rand.New(rand.NewPCG(c.Uint64(flagSeed.Name), uint64(val)))
		var sum float64
		count := 0
		for _, l := range layers {
			var errs []float64
			for h := range l.q {
				q, k, v := l.q[h], l.k[h], l.v[h]
				exact := approx.Exact(q, k, v, nil)
				var got [][]float64
				switch entry.Name {
				case "vanilla":
					got = l.out[h]
				case "linear":
					got = approx.Linear(q, k, v)
				case "linformer":
					got = approx.Linformer(q, k, v, val, rng)
				case "performer":
					got = approx.Performer(q, k, v, val, rng)
				case "nystrom":
					if got, err = approx.Nystrom(q, k, v, val); err != nil {
						return failed(err)
					}
				case "sparse":
					got = approx.Exact(q, k, v, sparse.Pattern{Block: block, Window: val}.Allowed)
				}
				e := approx.RelErr(got, exact)
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
	if outPath != "" {
		if err := tensorio.AtomicWriteFile(outPath, func(w io.Writer) error { return plotApprox(w, doc) }); err != nil {
			return failed(fmt.Errorf("-o %s: %w", outPath, err))
		}
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, doc)
	}
	printApprox(c.App.Writer, doc)
	if outPath != "" {
		fmt.Fprintf(c.App.Writer, "plot: %s\n", outPath)
	}
	return nil
}

// approxValues parses --values, or returns the default sweep of variant at length n: powers
// of two (linformer's k and nystrom's landmarks up to n, performer's features 8 to 1024,
// sparse's window 0, 1, 2, 4, ... blocks of block tokens until it covers every block), and one point for variants
// without a knob.
func approxValues(flag, variant string, n, block int) ([]int, error) {
	if approxKnobs[variant] == "" {
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

// vanillaQKV runs m on text and returns every layer's Q, K and V per head, and the
// backend's attention output (softmax(QKᵀ/√d)·V before the heads merge), found around each
// layer's attention softmax: the product it reads is Q·Kᵀ (Kᵀ a Transpose of K), and the
// product that reads it multiplies by V.
func vanillaQKV(c *cli.Context, m *model, text []byte) ([]headQKV, error) {
	sites, err := attnmap.Sites(m.Graph)
	if err != nil {
		return nil, badInputf("approx: %s: %w", m.displayName(), err)
	}
	producer, readers := map[string]*graph.Node{}, map[string][]*graph.Node{}
	for _, nd := range m.Graph.Nodes {
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
			return nil, failed(fmt.Errorf("approx: %s layer %d: the softmax's scores are not MatMul(Q, Transpose(K))", m.displayName(), s.Layer))
		}
		var pv *graph.Node
		for _, r := range readers[s.Value] {
			if r.Op == "MatMul" && r.Inputs[0] == s.Value {
				pv = r
			}
		}
		if pv == nil {
			return nil, failed(fmt.Errorf("approx: %s layer %d: no MatMul(softmax, V) reads the softmax", m.displayName(), s.Layer))
		}
		keep = append(keep, qk.Inputs[0], producer[qk.Inputs[1]].Inputs[0], pv.Inputs[1], pv.Outputs[0])
	}
	plan, err := planFeeds(m.Graph, nil)
	if err != nil {
		return nil, badInput(err)
	}
	ids := tokenize.Encode(text)
	inputs, err := plan.tensors(&tokenize.Batch{B: 1, N: len(ids), Tokens: ids, Lengths: []int{len(ids)}}, tokenize.PadID)
	if err != nil {
		return nil, failed(err)
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return nil, badInput(err)
	}
	prog, err := choice.Backend.Compile(m.Graph, backends.Options{Threads: c.Int("threads"), KeepIntermediates: keep})
	if err != nil {
		return nil, failed(fmt.Errorf("compile %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
	}
	defer prog.Close()
	outs, err := prog.Run(c.Context, inputs)
	if err != nil {
		return nil, failed(fmt.Errorf("run %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
	}
	var layers []headQKV
	for i := range sites {
		var l headQKV
		for j, dst := range []*[][][]float64{&l.q, &l.k, &l.v, &l.out} {
			h, err := perHead(outs[keep[4*i+j]], len(ids))
			if err != nil {
				return nil, failed(fmt.Errorf("approx: layer %d, %s: %w", i, keep[4*i+j], err))
			}
			*dst = h
		}
		layers = append(layers, l)
	}
	return layers, nil
}

// perHead splits a (1, h, n, d) float32 tensor into h n×d float64 matrices.
func perHead(t *tensor.Tensor, n int) ([][][]float64, error) {
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

// printApprox renders the sweep: one row per knob value, the mean error over heads per
// layer, and the mean and worst over all.
func printApprox(w io.Writer, doc approxDoc) {
	fmt.Fprintf(w, "%s vs exact softmax attention on %s's Q, K, V over %d tokens (relative error ‖O − O_exact‖/‖O_exact‖)\n", doc.Variant, doc.Vanilla, doc.N)
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
}

// plotApprox draws the mean error over heads of each layer against the knob (log-log).
func plotApprox(w io.Writer, doc approxDoc) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s vs exact attention on %s, n = %d", doc.Variant, doc.Vanilla, doc.N)
	p.X.Label.Text = doc.Knob
	if doc.Knob == "" {
		p.X.Label.Text = "(no knob)"
	}
	p.Y.Label.Text = "relative error of the attention output"
	logX := doc.Knob != "" && doc.Knob != "window"
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	}
	positive := true
	for _, pt := range doc.Points {
		positive = positive && pt.Mean > 0
	}
	if positive {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
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
	wt, err := p.WriterTo(9*vg.Inch, 5.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
