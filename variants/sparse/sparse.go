// Package sparse is the encoder with block-sparse attention: a sliding window of blocks
// (BigBird / Longformer style), optional global tokens (Longformer) and an optional strided
// pattern (Sparse Transformer, Child et al. 2019, bidirectional), computed block by block so
// that only allowed (query, key) pairs are ever multiplied.
//
// # Pattern
//
// Positions are grouped into blocks of b = block tokens; query i lies in block qb = ⌊i/b⌋ and
// key j in block kb = ⌊j/b⌋. Query i may attend key j (before the key-padding mask) iff
//
//   - window: |qb − kb| ≤ window (so (2·window+1)·b keys around it, fewer at the edges);
//   - strided (stride s > 0): (qb − kb) mod s = 0 — every s-th block, in both directions;
//   - global keys: j < global_tokens — every query sees the first global_tokens positions;
//   - global queries: i < global_tokens — those rows attend every key.
//
// With causal=true a pair is allowed only when also j ≤ i: the window keeps its own and
// earlier blocks' keys up to the query, the strided pattern only earlier blocks (the Sparse
// Transformer's own, causal, form), global keys only those before it, and global query rows
// only their past.
//
// Padded keys are excluded from every set; the softmax runs once over the union (each key at
// most once). The PyTorch reference builds exactly this as a dense (n × n) mask.
//
// # Computation
//
// The graph pads the sequence to P = a multiple of b (of b·s with a stride), reshapes queries to
// (B, h, P/b, b, d_k) and gathers for each query block the 2·window+1 neighbouring key blocks by
// slicing a copy of K padded with window blocks of zeros on each side (Concat of shifted Slices):
// scores (B, h, P/b, b, (2·window+1)·b). The strided keys come from a reshape of the blocks into
// s residue classes ((B, h, s, P/s, d_k), dense within a class, pairs already in the window
// masked), the global keys from a Slice of the first global_tokens keys, and the global query
// rows from one dense (global_tokens × P) attention. Nothing of size n × n is formed: the cost is
// O(n·(2·window+1)·b + n·global_tokens) per head, plus O(n²/s) with a stride (the Sparse
// Transformer's strided pattern grows with n by construction). Masked entries get the finite
// bias nn.MaskedOut instead of −∞, so rows of padding with no visible key stay finite and cannot
// poison later layers.
package sparse

import (
	"context"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Version is the variant's version; it changes when the graph, the initialisation or the
// meaning of a hyperparameter changes. 1.1.0: scale is nn.ScaleParam's float (0 divides by
// √d_k, 1 leaves the scores unscaled), where 1.0.0 had a bool (true, false).
// 1.2.0: causal and dropout (training builds only).
const Version = "1.2.0"

// Variant is the block-sparse encoder.
type Variant struct{}

// New returns the sparse variant.
func New() Variant { return Variant{} }

// Describe returns the shared encoder schema plus block, window, stride, global_tokens and the
// shared attention parameters (attn_bias, scale).
func (Variant) Describe() variant.Description {
	params := nn.EncoderParams()
	params = append(params,
		variant.Param{Name: "block", Kind: variant.KindInt, Default: int64(64), Min: variant.MinOf(1),
			Doc: "block size b in tokens: the unit of the window and stride patterns"},
		variant.Param{Name: "window", Kind: variant.KindInt, Default: int64(1), Min: variant.MinOf(1),
			Doc: "blocks on each side a query block attends (|qb-kb| <= window: (2·window+1)·b keys); 0 is not allowed"},
		variant.Param{Name: "stride", Kind: variant.KindInt, Default: int64(0), Min: variant.MinOf(0),
			Doc: "strided pattern: also attend every key block kb with (qb-kb) mod stride = 0 (0 = off; cost O(n²/stride))"},
		variant.Param{Name: "global_tokens", Kind: variant.KindInt, Default: int64(0), Min: variant.MinOf(0),
			Doc: "the first global_tokens positions attend every key and are attended by every query"},
	)
	params = append(append(params, nn.AttentionParams()...), nn.CausalParam())
	return variant.Description{
		Name:       "sparse",
		Version:    Version,
		Summary:    "block-sparse attention: sliding window of blocks, optional global tokens and strided blocks, computed block by block",
		Paper:      "https://arxiv.org/abs/1904.10509",
		Complexity: "O(n·w)",
		Params:     params,
		Caps:       variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Pattern is the attention pattern of a sparse encoder.
type Pattern struct {
	// Block is the block size b; Window the blocks on each side; Stride the strided pattern's
	// period in blocks (0: off); Global the number of global tokens.
	Block, Window, Stride, Global int
	// Causal allows only keys at or before the query.
	Causal bool
}

// Allowed reports whether query i may attend key j under the pattern (before padding).
func (p Pattern) Allowed(i, j int) bool {
	if p.Causal && j > i {
		return false
	}
	if i < p.Global || j < p.Global {
		return true
	}
	qb, kb := i/p.Block, j/p.Block
	d := qb - kb
	if d <= p.Window && -d <= p.Window {
		return true
	}
	return p.Stride > 0 && d%p.Stride == 0
}

// Build returns the encoder graph for cfg with weights drawn from seed.
func (v Variant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		return nil, fmt.Errorf("sparse: %w", err)
	}
	p := Pattern{Block: cfg.Int("block"), Window: cfg.Int("window"), Stride: cfg.Int("stride"), Global: cfg.Int("global_tokens"), Causal: e.Causal}
	if p.Window < 1 {
		return nil, fmt.Errorf("sparse: window=%d must be at least 1 block on each side", p.Window)
	}
	if p.Block < 1 {
		return nil, fmt.Errorf("sparse: block=%d must be at least 1", p.Block)
	}
	if p.Stride < 0 || p.Global < 0 {
		return nil, fmt.Errorf("sparse: stride=%d and global_tokens=%d must not be negative", p.Stride, p.Global)
	}
	c := nn.NewCtx(ctx, "sparse", seed)
	c.SetBuildMeta("sparse", Version, cfg)
	a := &attention{p: p, d: e.DModel, heads: cfg.Int("heads"), AttentionOptions: nn.AttentionOptionsFrom(cfg)}
	g, err := c.Encoder(e, a.block)
	if err != nil {
		return nil, fmt.Errorf("sparse: %w", err)
	}
	return g, nil
}

// attention builds the block-sparse attention; frame holds the values every layer shares.
type attention struct {
	p        Pattern
	d, heads int
	nn.AttentionOptions
	f *frame
}

// frame is the padded layout shared by all layers: lengths as 1-D int64 values and the
// additive biases (padding and de-duplication) in each pattern's layout.
type frame struct {
	batch, n, extra string // (1,) values: B, n, P − n
	nb, ng, perS    string // (1,) values: P/b, P/(b·s), P/s
	local           string // (B, 1, P/b, 1, (2w+1)·b)
	strided         string // (B, 1, s, 1, P/s) padding (+ (P/s, P/s) causal), added in group layout
	stridedDup      string // (ng, 1, ng, 1)
	globalKeys      string // (B, 1, 1, 1, g') padding + (P/b, 1, g') dedup
	all             string // (B, 1, 1, P): padding for the global query rows
}

func (a *attention) ci(c *nn.Ctx, v ...int64) string { return c.B.ConstInts(v...) }

// fill returns ConstantOfShape(shape) filled with v.
func fill(c *nn.Ctx, shape string, v float32) string {
	t, _ := tensor.FromFloat32([]float32{v}, 1)
	return c.B.Op("ConstantOfShape", []string{shape}, graph.Attrs{"value": graph.TensorAttr(t)})
}

func concat(c *nn.Ctx, axis int64, xs ...string) string {
	return c.B.Op("Concat", xs, graph.Attrs{"axis": graph.Int(axis)})
}

func reshape(c *nn.Ctx, x string, dims ...string) string {
	return c.B.Op("Reshape", []string{x, concat(c, 0, dims...)}, nil)
}

func scalar(c *nn.Ctx, v string) string {
	return c.B.Op("Squeeze", []string{v, c.B.ConstInts(0)}, nil)
}

// through slices x[from:to] along axis; from and to are (1,) values.
func through(c *nn.Ctx, x, from, to string, axis int64) string {
	return c.B.Slice(x, from, to, c.B.ConstInts(axis))
}

const endOfAxis = math.MaxInt64

// setup builds the frame (a.f) from the key-padding mask.
func (a *attention) setup(c *nn.Ctx, m nn.Mask) {
	b := c.B
	defer b.Scope("sparse")()
	p := a.p
	f := &frame{}
	a.f = f
	shape := b.Shape(m.Pad)
	f.batch = b.Slice(shape, a.ci(c, 0), a.ci(c, 1), a.ci(c, 0))
	f.n = b.Slice(shape, a.ci(c, 1), a.ci(c, 2), a.ci(c, 0))
	unit := int64(p.Block)
	if p.Stride > 0 {
		unit *= int64(p.Stride)
	}
	P := b.Mul(b.Div(b.Add(f.n, a.ci(c, unit-1)), a.ci(c, unit)), a.ci(c, unit))
	f.extra = b.Sub(P, f.n)
	f.nb = b.Div(P, a.ci(c, int64(p.Block)))
	// Padding as an additive bias over the frame: (B, P).
	padF := b.Where(m.Pad, b.ConstFloat(nn.MaskedOut), b.ConstFloat(0))
	padP := concat(c, 1, padF, fill(c, concat(c, 0, f.batch, f.extra), nn.MaskedOut))
	f.all = b.Unsqueeze(padP, 1, 2)

	// Window: the keys of blocks qb−w … qb+w for every query block, padded with w blocks.
	wb := int64(p.Window * p.Block)
	edge := fill(c, concat(c, 0, f.batch, a.ci(c, wb)), nn.MaskedOut)
	blocks := reshape(c, concat(c, 1, edge, padP, edge), a.ci(c, 0, -1, int64(p.Block))) // (B, nb+2w, b)
	f.local = b.Unsqueeze(a.neighbours(c, blocks, 1), 1, 3)
	if p.Causal {
		f.local = b.Add(f.local, b.Const(causalWindow(p)))
	}

	if p.Stride > 0 {
		s := int64(p.Stride)
		f.ng = b.Div(f.nb, a.ci(c, s))
		f.perS = b.Div(P, a.ci(c, s))
		g := b.Transpose(reshape(c, padP, a.ci(c, 0), f.ng, a.ci(c, s, int64(p.Block))), 0, 2, 1, 3) // (B, s, ng, b)
		f.strided = b.Unsqueeze(reshape(c, g, a.ci(c, 0, s, -1)), 1, 3)                              // (B, 1, s, 1, P/s)
		// Pairs of blocks already in the window: |ga − gb|·s ≤ w.
		r := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), scalar(c, f.ng), b.Const(tensor.Scalar64(1))}, nil)
		diff := b.Op("Abs", []string{b.Sub(b.Unsqueeze(r, 1), b.Unsqueeze(r, 0))}, nil)
		dup := b.Op("Less", []string{b.Mul(diff, b.Const(tensor.Scalar64(s))), b.Const(tensor.Scalar64(int64(p.Window + 1)))}, nil)
		f.stridedDup = b.Unsqueeze(b.Where(dup, b.ConstFloat(nn.MaskedOut), b.ConstFloat(0)), 1, 3) // (ng, 1, ng, 1)
		if p.Causal {
			// Row u of a residue class is position (u div b)·s·b + σ·b + u mod b, so key v is
			// after query u when ((v div b) − (u div b))·s·b + v mod b − u mod b > 0, whatever σ.
			bs := b.Const(tensor.Scalar64(int64(p.Block)))
			u := a.positions(c, scalar(c, f.perS))
			at := func(x string) string {
				blk := b.Div(x, bs)
				return b.Add(b.Mul(blk, b.Const(tensor.Scalar64(s*int64(p.Block)))), b.Sub(x, b.Mul(blk, bs)))
			}
			future := b.Op("Greater", []string{b.Unsqueeze(at(u), 0), b.Unsqueeze(at(u), 1)}, nil) // (P/s, P/s)
			f.strided = b.Add(f.strided, b.Where(future, b.ConstFloat(nn.MaskedOut), b.ConstFloat(0)))
		}
	}

	if p.Global > 0 {
		// Global keys, except those already in the window or the strided set of the query block.
		g := int64(p.Global)
		jb := make([]int64, p.Global)
		for j := range jb {
			jb[j] = int64(j / p.Block)
		}
		jbT, _ := tensor.FromInt64(jb, p.Global)
		jbP := through(c, b.Const(jbT), a.ci(c, 0), P, 0) // first min(g, P)
		qb := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), scalar(c, f.nb), b.Const(tensor.Scalar64(1))}, nil)
		diff := b.Sub(b.Unsqueeze(qb, 1), b.Unsqueeze(jbP, 0)) // (nb, g')
		dup := b.Op("Less", []string{b.Op("Abs", []string{diff}, nil), b.Const(tensor.Scalar64(int64(p.Window + 1)))}, nil)
		if p.Stride > 0 {
			s := b.Const(tensor.Scalar64(int64(p.Stride)))
			rem := b.Sub(diff, b.Mul(b.Div(diff, s), s))
			dup = b.Op("Or", []string{dup, b.Op("Equal", []string{rem, b.Const(tensor.Scalar64(0))}, nil)}, nil)
		}
		dupF := b.Unsqueeze(b.Where(dup, b.ConstFloat(nn.MaskedOut), b.ConstFloat(0)), 1) // (nb, 1, g')
		padG := b.Unsqueeze(b.Slice(padP, a.ci(c, 0), a.ci(c, g), a.ci(c, 1)), 1, 2, 3)   // (B, 1, 1, 1, g')
		f.globalKeys = b.Add(padG, dupF)
		if p.Causal {
			// key j of the first g' against query i = qb·b + r: (nb, b, g')
			qpos := b.Add(b.Unsqueeze(b.Mul(qb, b.Const(tensor.Scalar64(int64(p.Block)))), 1, 2), b.Unsqueeze(a.positions(c, b.Const(tensor.Scalar64(int64(p.Block)))), 0, 2))
			future := b.Op("Greater", []string{b.Unsqueeze(a.firstPositions(c, P), 0, 1), qpos}, nil)
			f.globalKeys = b.Add(f.globalKeys, b.Unsqueeze(b.Where(future, b.ConstFloat(nn.MaskedOut), b.ConstFloat(0)), 0, 1))
			// the global query rows i < g' over the frame's keys j: (g', P)
			rows := b.Op("Greater", []string{b.Unsqueeze(a.positions(c, scalar(c, P)), 0), b.Unsqueeze(a.firstPositions(c, P), 1)}, nil)
			f.all = b.Add(f.all, b.Where(rows, b.ConstFloat(nn.MaskedOut), b.ConstFloat(0)))
		}
	}
}

// positions is Range(0, n) for an int64 scalar n.
func (a *attention) positions(c *nn.Ctx, n string) string {
	return c.B.Op("Range", []string{c.B.Const(tensor.Scalar64(0)), n, c.B.Const(tensor.Scalar64(1))}, nil)
}

// firstPositions is 0 … g'−1, the positions of the global tokens within a frame of P.
func (a *attention) firstPositions(c *nn.Ctx, P string) string {
	pos := make([]int64, a.p.Global)
	for j := range pos {
		pos[j] = int64(j)
	}
	t, _ := tensor.FromInt64(pos, a.p.Global)
	return through(c, c.B.Const(t), a.ci(c, 0), P, 0)
}

// causalWindow is the causal bias of the window layout, (1, 1, 1, b, (2w+1)·b): query r of a
// block against key c of neighbour t (block qb−w+t) is j − i = (t−w)·b + c − r, the same for
// every query block, masked when positive.
func causalWindow(p Pattern) *tensor.Tensor {
	b, width := p.Block, (2*p.Window+1)*p.Block
	data := make([]float32, b*width)
	for r := 0; r < b; r++ {
		for k := 0; k < width; k++ {
			t, col := k/b, k%b
			if (t-p.Window)*b+col-r > 0 {
				data[r*width+k] = nn.MaskedOut
			}
		}
	}
	out, _ := tensor.FromFloat32(data, 1, 1, 1, b, width)
	return out
}

// neighbours gathers, for x of layout (…, nb+2w, b, …) with the block axis at axis, the
// 2w+1 blocks around each block: (…, nb, (2w+1)·b, …) by Concat of shifted slices along
// axis+1.
func (a *attention) neighbours(c *nn.Ctx, x string, axis int64) string {
	parts := make([]string, 0, 2*a.p.Window+1)
	for t := 0; t <= 2*a.p.Window; t++ {
		start := a.ci(c, int64(t))
		parts = append(parts, through(c, x, start, c.B.Add(start, a.f.nb), axis))
	}
	return concat(c, axis+1, parts...)
}

// block is the nn.AttentionFunc.
func (a *attention) block(c *nn.Ctx, prefix string, layer int, x string, m nn.Mask) string {
	if a.f == nil {
		a.setup(c, m)
	}
	d, heads := a.d, a.heads
	dk := d / heads
	q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, a.Bias), heads, dk)
	k := c.SplitHeads(c.Linear(prefix+".W_K", x, d, d, a.Bias), heads, dk)
	v := c.SplitHeads(c.Linear(prefix+".W_V", x, d, d, a.Bias), heads, dk)
	o := func() string {
		defer c.B.Scope(prefix)()
		return c.MergeHeads(a.core(c, q, k, v, dk), d)
	}()
	return c.Linear(prefix+".W_O", o, d, d, a.Bias)
}

// core computes the block-sparse attention of q, k, v (B, h, n, dk) → (B, h, n, dk).
func (a *attention) core(c *nn.Ctx, q, k, v string, dk int) string {
	b, f, p := c.B, a.f, a.p
	h, bs, DK := int64(a.heads), int64(p.Block), int64(dk)
	// Pad to the frame: (B, h, P, dk).
	zeros := fill(c, concat(c, 0, f.batch, a.ci(c, h), f.extra, a.ci(c, DK)), 0)
	q, k, v = concat(c, 2, q, zeros), concat(c, 2, k, zeros), concat(c, 2, v, zeros)
	qb := b.Reshape(q, 0, 0, -1, bs, DK) // (B, h, nb, b, dk)

	// Window keys and values: (B, h, nb, (2w+1)·b, dk).
	wz := fill(c, concat(c, 0, f.batch, a.ci(c, h, int64(p.Window)*bs, DK)), 0)
	win := func(x string) string {
		blocks := b.Reshape(concat(c, 2, wz, x, wz), 0, 0, -1, bs, DK) // (B, h, nb+2w, b, dk)
		return a.neighbours(c, blocks, 2)
	}
	kl, vl := win(k), win(v)
	scores := []string{c.AttentionScores(qb, kl, f.local, 5, dk, a.Scale)}
	widths := []string{a.ci(c, int64(2*p.Window+1)*bs)}

	var qs, ks, vs string
	if p.Stride > 0 {
		s := int64(p.Stride)
		group := func(x string) string { // (B, h, P, dk) → (B, h, s, P/s, dk)
			g := reshape(c, x, a.ci(c, 0, 0), f.ng, a.ci(c, s, bs, DK))
			return b.Reshape(b.Transpose(g, 0, 1, 3, 2, 4, 5), 0, 0, s, -1, DK)
		}
		qs, ks, vs = group(q), group(k), group(v)
		ss := c.AttentionScores(qs, ks, f.strided, 5, dk, a.Scale) // (B, h, s, P/s, P/s)
		ss = reshape(c, ss, a.ci(c, 0, 0, s), f.ng, a.ci(c, bs), f.ng, a.ci(c, bs))
		ss = b.Add(ss, b.Unsqueeze(f.stridedDup, 0)) // drop pairs already in the window
		ss = b.Transpose(ss, 0, 1, 3, 2, 4, 5, 6)    // (B, h, ng, s, b, ng, b)
		ss = reshape(c, ss, a.ci(c, 0, 0), f.nb, a.ci(c, bs), f.perS)
		scores = append(scores, ss)
		widths = append(widths, f.perS)
	}
	var kg, vg string
	if p.Global > 0 {
		g := a.ci(c, int64(p.Global))
		kg = b.Unsqueeze(through(c, k, a.ci(c, 0), g, 2), 2) // (B, h, 1, g', dk)
		vg = b.Unsqueeze(through(c, v, a.ci(c, 0), g, 2), 2)
		scores = append(scores, c.AttentionScores(qb, kg, f.globalKeys, 5, dk, a.Scale))
	}
	probs := b.Softmax(concat(c, 4, scores...), -1)
	part := func(i int) string { // probabilities of the i-th key set
		if len(scores) == 1 {
			return probs
		}
		start := a.ci(c, 0)
		for _, w := range widths[:i] {
			start = b.Add(start, w)
		}
		end := a.ci(c, endOfAxis)
		if i < len(widths) {
			end = b.Add(start, widths[i])
		}
		return through(c, probs, start, end, 4)
	}
	out := b.MatMul(part(0), vl) // (B, h, nb, b, dk)
	i := 1
	if p.Stride > 0 {
		s := int64(p.Stride)
		ps := reshape(c, part(i), a.ci(c, 0, 0), f.ng, a.ci(c, s, bs), f.perS)
		ps = reshape(c, b.Transpose(ps, 0, 1, 3, 2, 4, 5), a.ci(c, 0, 0, s), f.perS, f.perS) // (B, h, s, P/s, P/s)
		os := reshape(c, b.MatMul(ps, vs), a.ci(c, 0, 0, s), f.ng, a.ci(c, bs, DK))
		out = b.Add(out, b.Reshape(b.Transpose(os, 0, 1, 3, 2, 4, 5), 0, 0, -1, bs, DK))
		i++
	}
	if p.Global > 0 {
		out = b.Add(out, b.MatMul(part(i), vg))
	}
	o := b.Reshape(out, 0, 0, -1, DK) // (B, h, P, dk)
	if p.Global > 0 {
		// Global query rows attend every key of the frame.
		g := a.ci(c, int64(p.Global))
		qg := through(c, q, a.ci(c, 0), g, 2)
		og := c.DotProductAttention(qg, k, v, f.all, dk, a.Scale)
		o = concat(c, 2, og, through(c, o, g, a.ci(c, endOfAxis), 2))
	}
	return through(c, o, a.ci(c, 0), f.n, 2)
}
