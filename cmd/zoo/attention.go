package main

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"

	"github.com/zoo-dev/zoo/internal/benchplot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func attentionCommand() *cli.Command {
	return &cli.Command{
		Name:      "attention",
		Usage:     "draw a variant's attention weights on a text as heat maps (tokens on the axes), or print them as JSON",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Encodes the first --tokens bytes of --input (one window, byte tokenizer) and reads every layer's attention\n" +
			"softmax from the backend's run (the values are kept as outputs, so the backend computes them as they are).\n" +
			"Each row is one query's weights over the keys. -o writes a PNG: one heat map per layer (rows) and head\n" +
			"(columns), queries top to bottom, keys left to right; --layer and --head pick one. --json prints\n" +
			"{\"tokens\", \"keys\", \"layers\": [{\"layer\", \"heads\": [{\"head\", \"weights\"}]}]} on stdout instead (\"keys\" labels\n" +
			"the columns: the tokens, or linformer's k projected slots). Sparse variants show their block pattern (the\n" +
			"entries outside it are 0); linformer its n×k map; gqa each query head; linear the weights its kernel\n" +
			"implies, φ(q_i)·φ(k_j) / (Σ_j φ(q_i)·φ(k_j) + eps) from its φ(Q) and φ(K) (exactly: out_i = Σ_j w_ij v_j).\n" +
			"performer (random features) and nystrom (three landmark softmaxes, no n×n one) are refused." +
			examples("zoo attention vanilla.tiny --input text.txt -o map.png", "zoo attention sparse --input text.txt --layer 0 --head 1 -o map.png",
				"zoo attention linformer.tiny --weights w.safetensors --input text.txt --json"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` whose first tokens are drawn", Required: true},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the heat maps to `FILE.png`"},
			&cli.IntFlag{Name: "tokens", Value: 32, Usage: "tokens (bytes) of the input to encode, at most the model's maximum length"},
			&cli.IntFlag{Name: "layer", Value: -1, Usage: "draw layer `L` only (from 0; -1: every layer)"},
			&cli.IntFlag{Name: "head", Value: -1, Usage: "draw head `H` only (from 0; -1: every head)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagBackend, flagJSON,
		),
		Action: attentionAction,
	}
}

// attnDoc is what `zoo attention --json` prints.
type attnDoc struct {
	Model  string      `json:"model"`
	Tokens []string    `json:"tokens"`
	Keys   []string    `json:"keys"`
	Layers []attnLayer `json:"layers"`
}

// attnLayer is one layer's attention weights, by head.
type attnLayer struct {
	Layer int        `json:"layer"`
	Heads []attnHead `json:"heads"`
}

// attnHead is one head's weights: one row per query, one column per key.
type attnHead struct {
	Head    int         `json:"head"`
	Weights [][]float32 `json:"weights"`
}

// attnSite is one layer's attention softmax: the value the graph computes it in; for
// linear attention, value is φ(Q) and keys φ(K) (padded keys zeroed), both (1, h, n, d_k).
type attnSite struct {
	layer int
	value string
	keys  string
}

// linearSites finds each layer's φ(Q) and φ(K) in a linear-attention graph: under
// layers.L.self_attn/, the Add(Elu(Q), 1) and the Mul(Add(Elu(K), 1), keep) that follow the
// layer's two Elu nodes (Q's first, as variants/linear builds them).
func linearSites(g *graph.Graph) ([]attnSite, error) {
	readers := map[string][]*graph.Node{}
	for _, nd := range g.Nodes {
		for _, in := range nd.Inputs {
			readers[in] = append(readers[in], nd)
		}
	}
	next := func(v, op string) string {
		for _, r := range readers[v] {
			if r.Op == op {
				return r.Outputs[0]
			}
		}
		return ""
	}
	var sites []attnSite
	for l := 0; ; l++ {
		var elus []*graph.Node
		prefix := fmt.Sprintf("layers.%d.", l)
		found := false
		for _, nd := range g.Nodes {
			found = found || strings.HasPrefix(nd.Name, prefix)
			if nd.Op == "Elu" && strings.HasPrefix(nd.Name, prefix+"self_attn/") {
				elus = append(elus, nd)
			}
		}
		if !found {
			break
		}
		if len(elus) != 2 {
			return nil, fmt.Errorf("layer %d has %d Elu nodes under layers.%d.self_attn/, want φ(Q) and φ(K)", l, len(elus), l)
		}
		fq := next(elus[0].Outputs[0], "Add")
		fk := next(next(elus[1].Outputs[0], "Add"), "Mul")
		if fq == "" || fk == "" {
			return nil, fmt.Errorf("layer %d: φ(Q) = Elu+1 or φ(K)·keep not found after its Elu nodes", l)
		}
		sites = append(sites, attnSite{layer: l, value: fq, keys: fk})
	}
	if len(sites) == 0 {
		return nil, errors.New("the graph has no layers.N nodes")
	}
	return sites, nil
}

// linearWeights returns the weights linear attention implies, w_ij = φq_i·φk_j /
// (Σ_j' φq_i·φk_j' + eps) (sums over j ≤ i when causal), from φ(Q) and φ(K) (1, h, n, d_k):
// the model's output is exactly Σ_j w_ij v_j.
func linearWeights(fq, fk *tensor.Tensor, n, head int, eps float64, causal bool) (attnLayer, error) {
	var l attnLayer
	for _, t := range []*tensor.Tensor{fq, fk} {
		if t == nil || t.DType != tensor.Float32 || len(t.Shape) != 4 || t.Shape[0] != 1 || t.Shape[2] != n || !tensor.SameShape(t.Shape, fq.Shape) {
			return l, fmt.Errorf("φ(Q) and φ(K) are not float32 (1, heads, %d, d_k) values (shapes %v, %v)", n, shapeOf(fq), shapeOf(fk))
		}
	}
	heads, dk := fq.Shape[1], fq.Shape[3]
	for h := 0; h < heads; h++ {
		if head >= 0 && h != head {
			continue
		}
		rows := zeros(n, n)
		for i := 0; i < n; i++ {
			qi := fq.F32[(h*n+i)*dk : (h*n+i+1)*dk]
			sims := make([]float64, n)
			var den float64
			for j := 0; j < n && (!causal || j <= i); j++ {
				kj := fk.F32[(h*n+j)*dk : (h*n+j+1)*dk]
				for t := range qi {
					sims[j] += float64(qi[t]) * float64(kj[t])
				}
				den += sims[j]
			}
			for j := range sims {
				rows[i][j] = float32(sims[j] / (den + eps))
			}
		}
		l.Heads = append(l.Heads, attnHead{Head: h, Weights: rows})
	}
	return l, nil
}

// noSoftmaxWhy says, for the variants known to form no softmax matrix, why.
var noSoftmaxWhy = map[string]string{
	"performer": "performer approximates softmax with random features, φ(Q)·(φ(K)ᵀV), and never forms the matrix",
	"nystrom":   "nystrom multiplies three landmark softmaxes (n×m, m×m pseudo-inverse, m×n) and never forms one n×n matrix",
}

// projectedKeys names, for variants whose softmax runs over projected keys rather than
// tokens, the hyperparameter that sets their number.
var projectedKeys = map[string]string{"linformer": "k"}

func attentionAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("attention: want one variant name (see `zoo list`), got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	if zooroot.IsONNXPath(ref) {
		return badInputf("attention: %s is an .onnx file; zoo attention draws zoo's variants, whose graphs name each layer's attention softmax", ref)
	}
	outPath := c.String("output")
	if outPath == "" && !c.Bool(flagJSON.Name) {
		return badInputf("attention: give -o FILE.png for the picture, or --json for the weights")
	}
	if outPath != "" {
		if err := checkOutputFile("-o", outPath, ".png"); err != nil {
			return badInput(err)
		}
	}
	ntok := c.Int("tokens")
	if ntok < 1 || c.Int("threads") < 0 {
		return badInputf("--tokens must be at least 1 and --threads not negative (got %d, %d)", ntok, c.Int("threads"))
	}
	text, err := readHead(c.String("input"), ntok)
	if err != nil {
		return badInput(err)
	}
	m, err := loadModel(c.Context, c, ref)
	if err != nil {
		return err
	}
	if text, err = fitMaxLen(c, m, text); err != nil {
		return err
	}
	if why, ok := noSoftmaxWhy[m.Variant()]; ok {
		return badInputf("attention: %s has no attention matrix to draw: %s", m.Name(), why)
	}
	var sites []attnSite
	if m.Variant() == "linear" {
		sites, err = linearSites(m.Graph())
	} else {
		sites, err = attentionSites(m.Graph())
	}
	if err != nil {
		return badInputf("attention: %s: %w", m.Name(), err)
	}
	layer, head := c.Int("layer"), c.Int("head")
	if layer >= len(sites) || layer < -1 {
		return badInputf("--layer %d: %s has layers 0 to %d", layer, m.Name(), len(sites)-1)
	}
	heads := m.Config().Int("heads")
	if head >= heads || head < -1 {
		return badInputf("--head %d: %s has heads 0 to %d", head, m.Name(), heads-1)
	}
	if layer >= 0 {
		sites = sites[layer : layer+1]
	}
	plan, err := planFeeds(m.Graph(), nil)
	if err != nil {
		return badInput(err)
	}
	ids := tokenize.Encode(text)
	batch := &tokenize.Batch{B: 1, N: len(ids), Tokens: ids, Lengths: []int{len(ids)}}
	inputs, err := plan.Tensors(batch, tokenize.PadID)
	if err != nil {
		return failed(fmt.Errorf("feed %s: %w", m.Name(), err))
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	var keep []string
	for _, s := range sites {
		keep = append(keep, s.value)
		if s.keys != "" {
			keep = append(keep, s.keys)
		}
	}
	prog, err := choice.Backend.Compile(m.Graph(), backends.Options{Threads: c.Int("threads"), KeepIntermediates: keep})
	if err != nil {
		return failed(fmt.Errorf("compile %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	defer prog.Close()
	outs, err := prog.Run(c.Context, inputs)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	doc := attnDoc{Model: m.Name(), Tokens: tokenLabels(ids)}
	lay := attnLayout{n: len(ids), heads: heads}
	if p, ok := projectedKeys[m.Variant()]; ok {
		lay.projected = m.Config().Int(p)
	}
	if m.Variant() == "sparse" {
		lay.block, lay.window = m.Config().Int("block"), m.Config().Int("window")
		if m.Config().Int("stride") != 0 || m.Config().Int("global_tokens") != 0 {
			return badInputf("attention: %s: only the sliding-window pattern (stride 0, global_tokens 0) is drawn; its strided and global keys are computed in separate pieces", m.Name())
		}
	}
	for _, s := range sites {
		var l attnLayer
		var err error
		if s.keys != "" {
			l, err = linearWeights(outs[s.value], outs[s.keys], len(ids), head, m.Config().Float("attn_eps"), m.Config().Bool("causal"))
		} else {
			l, err = lay.read(outs[s.value], head)
		}
		if err != nil {
			return failed(fmt.Errorf("attention of %s, layer %d (%s): %w", m.Name(), s.layer, s.value, err))
		}
		l.Layer = s.layer
		doc.Layers = append(doc.Layers, l)
	}
	doc.Keys = doc.Tokens
	if lay.projected > 0 {
		doc.Keys = make([]string, len(doc.Layers[0].Heads[0].Weights[0]))
		for i := range doc.Keys {
			doc.Keys[i] = "k" + strconv.Itoa(i)
		}
	}
	if outPath != "" {
		title := fmt.Sprintf("%s on %s of %s", doc.Model, format.Plural(len(ids), "token"), filepath.Base(c.String("input")))
		if err := tensorio.AtomicWriteFile(outPath, func(w io.Writer) error { return drawAttention(w, doc, title) }); err != nil {
			return failed(fmt.Errorf("-o %s: %w", outPath, err))
		}
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, doc)
	}
	fmt.Fprintf(c.App.Writer, "attention of %s (layers: %d, heads each: %d, tokens: %d): %s\n", doc.Model, len(doc.Layers), len(doc.Layers[0].Heads), len(ids), outPath)
	return nil
}

// fitMaxLen cuts text to m's maximum length when it has one, or refuses as bad input when
// the user asked for that many tokens with --tokens.
func fitMaxLen(c *cli.Context, m *zooroot.Model, text []byte) ([]byte, error) {
	p := m.Description().Caps.MaxLenParam
	if p == "" || len(text) <= m.Config().Int(p) {
		return text, nil
	}
	if c.IsSet("tokens") {
		return nil, badInputf("--tokens %d is longer than %s's maximum length %d (max_len)", c.Int("tokens"), m.Name(), m.Config().Int(p))
	}
	return text[:m.Config().Int(p)], nil
}

// readHead returns the first n bytes of the file at path; an empty file or a directory is
// an error naming it.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if k == 0 {
		if err == io.EOF {
			return nil, fmt.Errorf("input %s is empty (0 bytes): nothing to encode", path)
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("input %s: %w", path, err)
		}
	}
	return buf[:k], nil
}

// attentionSites finds each layer's attention softmax: the one Softmax node under the scope
// layers.L.self_attn/ of every layer L, as zoo's variants build them. A layer with none or
// several is an error saying so.
func attentionSites(g *graph.Graph) ([]attnSite, error) {
	byLayer := map[int][]string{}
	layers := 0
	for _, n := range g.Nodes {
		rest, ok := strings.CutPrefix(n.Name, "layers.")
		if !ok {
			continue
		}
		num, scope, ok := strings.Cut(rest, ".")
		l, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		layers = max(layers, l+1)
		if n.Op == "Softmax" && strings.HasPrefix(scope, "self_attn/") && len(n.Outputs) == 1 {
			byLayer[l] = append(byLayer[l], n.Outputs[0])
		}
	}
	if layers == 0 {
		return nil, errors.New("the graph has no layers.N nodes")
	}
	sites := make([]attnSite, layers)
	for l := 0; l < layers; l++ {
		switch v := byLayer[l]; len(v) {
		case 0:
			return nil, fmt.Errorf("layer %d computes no attention softmax (no Softmax node under layers.%d.self_attn/)", l, l)
		case 1:
			sites[l] = attnSite{layer: l, value: v[0]}
		default:
			return nil, fmt.Errorf("layer %d has %d softmaxes under layers.%d.self_attn/ (%s): no single attention matrix", l, len(v), l, strings.Join(v, ", "))
		}
	}
	return sites, nil
}

// attnLayout says how a variant lays out its softmax: n tokens, heads query heads,
// projected > 0 keys when they are projections (linformer's k), and sparse's block and
// window (block > 0) for its block-by-block scores.
type attnLayout struct {
	n, heads      int
	projected     int
	block, window int
}

// read turns one layer's softmax output (batch 1) into per-head query × key weights (head
// only, when ≥ 0): (1, H, M, K) with M = n (a head per H) or M = r·n (gqa: H groups of r
// query heads, head g·r+j in rows j·n…), and sparse's (1, h, P/b, b, (2w+1)·b) scattered to
// n × n with zeros outside the window.
func (a attnLayout) read(t *tensor.Tensor, head int) (attnLayer, error) {
	var l attnLayer
	if t == nil || t.DType != tensor.Float32 || len(t.Shape) < 4 || t.Shape[0] != 1 {
		return l, fmt.Errorf("softmax output is not a float32 tensor of batch 1 and rank ≥ 4 (shape %v)", shapeOf(t))
	}
	keep := func(h int) bool { return head < 0 || h == head }
	if a.block > 0 {
		if len(t.Shape) != 5 || t.Shape[1] != a.heads || t.Shape[3] != a.block || t.Shape[4] != (2*a.window+1)*a.block {
			return l, fmt.Errorf("sparse scores of shape %v: want (1, %d, blocks, %d, %d)", t.Shape, a.heads, a.block, (2*a.window+1)*a.block)
		}
		nb, b, w := t.Shape[2], a.block, a.window
		width := (2*w + 1) * b
		for h := 0; h < a.heads; h++ {
			if !keep(h) {
				continue
			}
			rows := zeros(a.n, a.n)
			for i := 0; i < a.n; i++ {
				qb, qi := i/b, i%b
				base := ((h*nb+qb)*b + qi) * width
				for col := 0; col < width; col++ {
					j := (qb+col/b-w)*b + col%b
					if j >= 0 && j < a.n {
						rows[i][j] = t.F32[base+col]
					}
				}
			}
			l.Heads = append(l.Heads, attnHead{Head: h, Weights: rows})
		}
		return l, nil
	}
	if len(t.Shape) != 4 {
		return l, fmt.Errorf("softmax output of shape %v: want (1, heads, queries, keys)", t.Shape)
	}
	H, M, K := t.Shape[1], t.Shape[2], t.Shape[3]
	if M%a.n != 0 || H*(M/a.n) != a.heads || (a.projected == 0 && K != a.n) || (a.projected > 0 && K != a.projected) {
		return l, fmt.Errorf("softmax output of shape %v does not fit %d heads over %d tokens", t.Shape, a.heads, a.n)
	}
	r := M / a.n
	for g := 0; g < H; g++ {
		for j := 0; j < r; j++ {
			h := g*r + j
			if !keep(h) {
				continue
			}
			rows := make([][]float32, a.n)
			for i := range rows {
				off := (g*M + j*a.n + i) * K
				rows[i] = append([]float32(nil), t.F32[off:off+K]...)
			}
			l.Heads = append(l.Heads, attnHead{Head: h, Weights: rows})
		}
	}
	sort.Slice(l.Heads, func(x, y int) bool { return l.Heads[x].Head < l.Heads[y].Head })
	return l, nil
}

func zeros(r, c int) [][]float32 {
	out := make([][]float32, r)
	for i := range out {
		out[i] = make([]float32, c)
	}
	return out
}

func shapeOf(t *tensor.Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}

// tokenLabels renders byte-tokenizer ids as axis labels: the character, · for a space, \n
// for a newline, \t for a tab, \xNN for other bytes that do not print on their own (the
// plot's font has no glyphs for the usual symbols of blanks).
func tokenLabels(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		b := byte(id - 1)
		switch {
		case id < 1 || id > 256:
			out[i] = fmt.Sprintf("#%d", id)
		case b == ' ':
			out[i] = "·"
		case b == '\n':
			out[i] = `\n`
		case b == '\t':
			out[i] = `\t`
		case b < 0x80 && unicode.IsPrint(rune(b)):
			out[i] = string(rune(b))
		default:
			out[i] = fmt.Sprintf(`\x%02x`, b)
		}
	}
	return out
}

// attnTile returns the size in pixels of one heat map for q queries and k keys: 14 pixels
// per token plus room for the labels, between 240 and 1000.
func attnTile(q, k int) (w, h int) {
	clamp := func(x int) int { return min(max(x, 240), 1000) }
	return clamp(14*k + 90), clamp(14*q + 90)
}

// attnImageSize is the PNG's size for doc: layers × heads tiles plus the title band.
func attnImageSize(doc attnDoc) (w, h int) {
	tw, th := attnTile(len(doc.Tokens), len(doc.Keys))
	return tw * len(doc.Layers[0].Heads), th*len(doc.Layers) + attnTitleBand
}

// attnTitleBand is the height in pixels of the title above the grid.
const attnTitleBand = 30

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

// drawAttention writes doc's heat maps as a PNG: one row per layer, one column per head.
func drawAttention(w io.Writer, doc attnDoc, title string) error {
	W, H := attnImageSize(doc)
	px := func(p int) vg.Length { return vg.Length(p) * vg.Inch / 96 }
	img := vgimg.NewWith(vgimg.UseWH(px(W), px(H)), vgimg.UseDPI(96))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	head := dc
	head.Min.Y = dc.Max.Y - px(attnTitleBand)
	sty := plot.New().Title.TextStyle // the default font, as every plot's title has it
	sty.Color, sty.XAlign, sty.YAlign = color.Black, draw.XCenter, draw.YCenter
	head.FillText(sty, vg.Point{X: (head.Min.X + head.Max.X) / 2, Y: (head.Min.Y + head.Max.Y) / 2}, title)
	grid := dc
	grid.Max.Y = head.Min.Y
	pal := weightPalette(64)
	plots := make([][]*plot.Plot, len(doc.Layers))
	bars := make([][]*plot.Plot, len(doc.Layers))
	for i, l := range doc.Layers {
		for _, h := range l.Heads {
			bars[i] = append(bars[i], colorBar(pal, maxWeight(h.Weights)))
			p := plot.New()
			p.Title.Text = fmt.Sprintf("layer %d, head %d", l.Layer, h.Head)
			hm := plotter.NewHeatMap(weightGrid(h.Weights), pal)
			hm.Min, hm.Max = 0, maxWeight(h.Weights)
			// Cells drawn as rectangles stay sharp; a big map is drawn as an image instead.
			hm.Rasterized = len(h.Weights)*len(h.Weights[0]) > 128*128
			p.Add(hm)
			p.X.Tick.Marker = labelTicks(doc.Keys, false)
			p.Y.Tick.Marker = labelTicks(doc.Tokens, true)
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
			mc, bc := canvases[i][j], canvases[i][j]
			mc.Max.X -= px(colorBarWidth)
			bc.Min.X = mc.Max.X + px(4)
			p.Draw(mc)
			bars[i][j].Draw(bc)
		}
	}
	_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
	return err
}

// colorBarWidth is the width in pixels of the colour bar beside each map, with its labels.
const colorBarWidth = 84

// barGrid is a colour bar's cells: two columns of n rows running from 0 to max.
type barGrid struct {
	n   int
	max float64
}

func (g barGrid) Dims() (c, r int)   { return 2, g.n }
func (g barGrid) Z(c, r int) float64 { return (float64(r) + 0.5) * g.max / float64(g.n) }
func (g barGrid) X(c int) float64    { return float64(c) }
func (g barGrid) Y(r int) float64    { return (float64(r) + 0.5) * g.max / float64(g.n) }

// colorBar is the plot of a map's colour scale: pal from 0 (white) to hi, labelled on the
// right with the weights (ticks that never read twice).
func colorBar(pal palette.Palette, hi float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = "weight"
	hm := plotter.NewHeatMap(barGrid{n: 64, max: hi}, pal)
	hm.Min, hm.Max = 0, hi
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
