// Package attnmap reads the attention weights of zoo's variants out of one run of their
// graph. It finds the value each layer's attention is computed in (the one Softmax under
// layers.L.self_attn/, or linear attention's φ(Q) and φ(K)), names those values for a
// backend to keep as outputs (backends.Options.KeepIntermediates), and turns the kept
// tensors into per-head query × key weights, one row per query:
//
//	plan, err := attnmap.NewPlan(g, "vanilla", cfg, n) // after attnmap.NoMatrix("vanilla")
//	prog, err := backend.Compile(g, backends.Options{KeepIntermediates: plan.Keep()})
//	outs, err := prog.Run(ctx, inputs)                  // batch 1, n tokens
//	m, err := plan.Read(outs, ids, -1)                  // every head
//
// The values are the backend's own (kept, not recomputed). Sparse variants give n × n maps
// that are 0 outside their block window; linformer an n × k map over its projected keys; gqa
// each query head; linear attention the weights its kernel implies,
// φ(q_i)·φ(k_j) / (Σ_j φ(q_i)·φ(k_j) + eps), of which its output is exactly Σ_j w_ij v_j.
// performer and nystrom form no n × n matrix (NoMatrix says why).
package attnmap

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Map is a run's attention weights: the query tokens, the key labels (the tokens, or
// linformer's k projected slots "k0", "k1", ...) and the layers read. `zoo attention --json`
// prints it.
type Map struct {
	Model  string   `json:"model"`
	Tokens []string `json:"tokens"`
	Keys   []string `json:"keys"`
	Layers []Layer  `json:"layers"`
}

// Layer is one layer's attention weights, by head.
type Layer struct {
	Layer int    `json:"layer"`
	Heads []Head `json:"heads"`
}

// Head is one head's weights: one row per query, one column per key.
type Head struct {
	Head    int         `json:"head"`
	Weights [][]float32 `json:"weights"`
}

// Site is one layer's attention in a graph: Value is the softmax output it is computed in;
// for linear attention, Value is φ(Q) and Keys φ(K) (padded keys zeroed), both (1, h, n, d_k).
type Site struct {
	Layer int
	Value string
	Keys  string
}

// noMatrixWhy says, for the variants known to form no softmax matrix, why.
var noMatrixWhy = map[string]string{
	"performer": "performer approximates softmax with random features, φ(Q)·(φ(K)ᵀV), and never forms the matrix",
	"nystrom":   "nystrom multiplies three landmark softmaxes (n×m, m×m pseudo-inverse, m×n) and never forms one n×n matrix",
}

// NoMatrix reports whether variant forms no attention matrix to read, and why.
func NoMatrix(variant string) (why string, ok bool) {
	why, ok = noMatrixWhy[variant]
	return why, ok
}

// projectedKeys names, for variants whose softmax runs over projected keys rather than
// tokens, the hyperparameter that sets their number.
var projectedKeys = map[string]string{"linformer": "k"}

// Plan says which values of a variant's run hold its attention and how to read them.
type Plan struct {
	// Sites are the layers read, in order.
	Sites []Site
	// Layout is how the softmax outputs are laid out (unused for linear attention).
	Layout Layout
	// Eps and Causal are linear attention's denominator epsilon and causal flag.
	Eps    float64
	Causal bool
}

// NewPlan finds the attention of every layer of g, the graph of the variant named variant
// (as the registry names it: "vanilla", "linformer", "sparse", ...) built with cfg, to be
// run on n tokens. Its error says why the graph's attention cannot be read (no layers, a
// layer without a single softmax, sparse's strided or global keys).
func NewPlan(g *graph.Graph, variant string, cfg variant.Config, n int) (*Plan, error) {
	p := &Plan{Layout: Layout{N: n, Heads: cfg.Int("heads")}}
	var err error
	if variant == "linear" {
		p.Sites, err = LinearSites(g)
		p.Eps, p.Causal = cfg.Float("attn_eps"), cfg.Bool("causal")
	} else {
		p.Sites, err = Sites(g)
	}
	if err != nil {
		return nil, err
	}
	if k, ok := projectedKeys[variant]; ok {
		p.Layout.Projected = cfg.Int(k)
	}
	if variant == "sparse" {
		p.Layout.Block, p.Layout.Window = cfg.Int("block"), cfg.Int("window")
		if cfg.Int("stride") != 0 || cfg.Int("global_tokens") != 0 {
			return nil, errors.New("only the sliding-window pattern (stride 0, global_tokens 0) is drawn; its strided and global keys are computed in separate pieces")
		}
	}
	return p, nil
}

// Only keeps layer l's site alone (l from 0, below len(p.Sites)); l < 0 keeps every layer.
func (p *Plan) Only(l int) {
	if l >= 0 {
		p.Sites = p.Sites[l : l+1]
	}
}

// Keep names the values a backend must keep as outputs for Read.
func (p *Plan) Keep() []string {
	var keep []string
	for _, s := range p.Sites {
		keep = append(keep, s.Value)
		if s.Keys != "" {
			keep = append(keep, s.Keys)
		}
	}
	return keep
}

// Read turns the kept values of one run (outs, batch 1) of model on the byte-tokenizer ids
// into the weights of every head (head < 0) or of one head.
func (p *Plan) Read(model string, outs map[string]*tensor.Tensor, ids []int64, head int) (*Map, error) {
	m := &Map{Model: model, Tokens: TokenLabels(ids)}
	for _, s := range p.Sites {
		var l Layer
		var err error
		if s.Keys != "" {
			l, err = LinearWeights(outs[s.Value], outs[s.Keys], p.Layout.N, head, p.Eps, p.Causal)
		} else {
			l, err = p.Layout.Read(outs[s.Value], head)
		}
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", s.Layer, s.Value, err)
		}
		l.Layer = s.Layer
		m.Layers = append(m.Layers, l)
	}
	m.Keys = m.Tokens
	if p.Layout.Projected > 0 && len(m.Layers) > 0 && len(m.Layers[0].Heads) > 0 && len(m.Layers[0].Heads[0].Weights) > 0 {
		m.Keys = make([]string, len(m.Layers[0].Heads[0].Weights[0]))
		for i := range m.Keys {
			m.Keys[i] = "k" + strconv.Itoa(i)
		}
	}
	return m, nil
}

// LinearSites finds each layer's φ(Q) and φ(K) in a linear-attention graph: under
// layers.L.self_attn/, the Add(Elu(Q), 1) and the Mul(Add(Elu(K), 1), keep) that follow the
// layer's two Elu nodes (Q's first, as variants/linear builds them).
func LinearSites(g *graph.Graph) ([]Site, error) {
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
	var sites []Site
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
		sites = append(sites, Site{Layer: l, Value: fq, Keys: fk})
	}
	if len(sites) == 0 {
		return nil, errors.New("the graph has no layers.N nodes")
	}
	return sites, nil
}

// LinearWeights returns the weights linear attention implies, w_ij = φq_i·φk_j /
// (Σ_j' φq_i·φk_j' + eps) (sums over j ≤ i when causal), from φ(Q) and φ(K) (1, h, n, d_k),
// for every head (head < 0) or one: the model's output is exactly Σ_j w_ij v_j.
func LinearWeights(fq, fk *tensor.Tensor, n, head int, eps float64, causal bool) (Layer, error) {
	var l Layer
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
		l.Heads = append(l.Heads, Head{Head: h, Weights: rows})
	}
	return l, nil
}

// Sites finds each layer's attention softmax: the one Softmax node under the scope
// layers.L.self_attn/ of every layer L, as zoo's variants build them. A layer with none or
// several is an error saying so.
func Sites(g *graph.Graph) ([]Site, error) {
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
	sites := make([]Site, layers)
	for l := 0; l < layers; l++ {
		switch v := byLayer[l]; len(v) {
		case 0:
			return nil, fmt.Errorf("layer %d computes no attention softmax (no Softmax node under layers.%d.self_attn/)", l, l)
		case 1:
			sites[l] = Site{Layer: l, Value: v[0]}
		default:
			return nil, fmt.Errorf("layer %d has %d softmaxes under layers.%d.self_attn/ (%s): no single attention matrix", l, len(v), l, strings.Join(v, ", "))
		}
	}
	return sites, nil
}

// Layout says how a variant lays out its softmax: N tokens, Heads query heads,
// Projected > 0 keys when they are projections (linformer's k), and sparse's Block and
// Window (Block > 0) for its block-by-block scores.
type Layout struct {
	N, Heads      int
	Projected     int
	Block, Window int
}

// Read turns one layer's softmax output (batch 1) into per-head query × key weights (head
// only, when ≥ 0): (1, H, M, K) with M = N (a head per H) or M = r·N (gqa: H groups of r
// query heads, head g·r+j in rows j·N…), and sparse's (1, h, P/b, b, (2w+1)·b) scattered to
// N × N with zeros outside the window.
func (a Layout) Read(t *tensor.Tensor, head int) (Layer, error) {
	var l Layer
	if t == nil || t.DType != tensor.Float32 || len(t.Shape) < 4 || t.Shape[0] != 1 {
		return l, fmt.Errorf("softmax output is not a float32 tensor of batch 1 and rank ≥ 4 (shape %v)", shapeOf(t))
	}
	keep := func(h int) bool { return head < 0 || h == head }
	if a.Block > 0 {
		if len(t.Shape) != 5 || t.Shape[1] != a.Heads || t.Shape[3] != a.Block || t.Shape[4] != (2*a.Window+1)*a.Block {
			return l, fmt.Errorf("sparse scores of shape %v: want (1, %d, blocks, %d, %d)", t.Shape, a.Heads, a.Block, (2*a.Window+1)*a.Block)
		}
		nb, b, w := t.Shape[2], a.Block, a.Window
		width := (2*w + 1) * b
		for h := 0; h < a.Heads; h++ {
			if !keep(h) {
				continue
			}
			rows := zeros(a.N, a.N)
			for i := 0; i < a.N; i++ {
				qb, qi := i/b, i%b
				base := ((h*nb+qb)*b + qi) * width
				for col := 0; col < width; col++ {
					j := (qb+col/b-w)*b + col%b
					if j >= 0 && j < a.N {
						rows[i][j] = t.F32[base+col]
					}
				}
			}
			l.Heads = append(l.Heads, Head{Head: h, Weights: rows})
		}
		return l, nil
	}
	if len(t.Shape) != 4 {
		return l, fmt.Errorf("softmax output of shape %v: want (1, heads, queries, keys)", t.Shape)
	}
	H, M, K := t.Shape[1], t.Shape[2], t.Shape[3]
	if M%a.N != 0 || H*(M/a.N) != a.Heads || (a.Projected == 0 && K != a.N) || (a.Projected > 0 && K != a.Projected) {
		return l, fmt.Errorf("softmax output of shape %v does not fit %d heads over %d tokens", t.Shape, a.Heads, a.N)
	}
	r := M / a.N
	for g := 0; g < H; g++ {
		for j := 0; j < r; j++ {
			h := g*r + j
			if !keep(h) {
				continue
			}
			rows := make([][]float32, a.N)
			for i := range rows {
				off := (g*M + j*a.N + i) * K
				rows[i] = append([]float32(nil), t.F32[off:off+K]...)
			}
			l.Heads = append(l.Heads, Head{Head: h, Weights: rows})
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

// TokenLabels renders byte-tokenizer ids as axis labels: the character, · for a space, \n
// for a newline, \t for a tab, \xNN for other bytes that do not print on their own (a plot's
// font has no glyphs for the usual symbols of blanks), #ID for ids outside the bytes.
func TokenLabels(ids []int64) []string {
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
