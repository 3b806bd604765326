package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Kernels of kernelized (linear-time) attention, matched by fuse_kernelized.go:
//
//   - featureMap: a random-feature map φ(x) = post(exp(α·x·W − shift)), as FAVOR+ writes it
//     (performer), with the shift a sum of per-row terms and a stabiliser (the row maximum
//     of α·x·W, or its maximum over a (batch, head) slab's valid rows), and post a chain of
//     per-row operations (scalar arithmetic, multiplication by a per-row value, Where by a
//     per-row condition). One GEMM per block of rows against the packed W, and the exp and
//     the post chain on each row while it is in cache, instead of eight passes over the
//     (…, n, m) features.
//   - eluFeature: φ(x) = α·(eˣ − 1) + c below 0 and x + c above (Add(Elu(x), c)), then the
//     same post chain, with the vectorised exp.
//   - linearAttention: out = (A·(Bᵀ·V)) ⊙ 1/(A·Σ_j B_j + ε) per slab, the kernelized
//     attention of linear and performer: Bᵀ·V and the key sum in one pass over B, then one
//     GEMM and the normalisation per block of rows, V read and the output written through
//     head split/merge strides.

// rowOp is one elementwise operation of a feature map's post chain, applied to every
// element of a row of the features.
type rowOp struct {
	// kind: '+', '*', '/' by c; '-' (x − c); 'r' (c − x); 'x' multiply by the row's value of
	// operand input; 'W' Where(cond, c, x) and 'w' Where(cond, x, c) with the row's value
	// of the Bool operand input.
	kind  byte
	c     float32
	input int // index among the fused step's inputs, for 'x', 'W' and 'w'
}

// rowTerm is one term of a feature map's exponent shift: the exponent is
// α·x·W − Σ sign·term, evaluated as one subtraction of the summed shift.
type rowTerm struct {
	// kind: 'c' a scalar constant c; 'R' the row's value of operand input (a (…, n, 1)
	// value); 'Q' the row's Σ x² of the input x, then scaled by scale (FAVOR+'s
	// ‖x‖²/2·d_k^(−1/2), computed in the kernel); 'M' the row maximum of α·x·W; 'S' its maximum over the slab's rows (the axes
	// (−2, −1)), only over rows whose Bool operand input is false (invalidWhen true) or true
	// (invalidWhen false) when input ≥ 0.
	kind        byte
	sign        float32
	c           float32
	input       int
	invalidWhen bool
	axes        []int   // the ReduceMax axes of 'M' and 'S'
	scale       []rowOp // '*' and '/' by constants, applied in order to a 'Q' sum
}

// featureSpec is a fused random-feature map: its inputs are x first and then the operands
// its terms and post ops read.
type featureSpec struct {
	w *gemm.PackedB // α·W (k × m), packed once
	// xPerm: x is the source (B, n, h, k) of a head split, read in place through strides.
	xPerm bool
	terms []rowTerm
	post  []rowOp
}

// featureRows is the row block of the feature map and of the linear attention's second
// product: a multiple of every micro-kernel's height, and 96 rows of 266 features (100 KiB)
// stay in L2 between the GEMM and the exp.
const featureRows = 96

// rowIndex maps every row (all axes but the last) of a value of shape out to the element of
// an operand of shape s that broadcasts over it; s must broadcast to out unidirectionally
// with a last axis of 1 (a per-row value), else ok is false.
func rowIndex(s, out []int) (idx []int, ok bool) {
	r := len(out)
	if r == 0 || len(s) > r || (len(s) > 0 && s[len(s)-1] != 1) {
		return nil, false
	}
	strides := make([]int, r-1) // over out's leading axes
	acc := 1
	off := r - len(s)
	for i := len(s) - 1; i >= 0; i-- {
		d := off + i
		if d < r-1 {
			switch {
			case s[i] == out[d]:
				if s[i] != 1 {
					strides[d] = acc
				}
			case s[i] == 1:
			default:
				return nil, false
			}
		}
		acc *= s[i]
	}
	rows := 1
	for _, d := range out[:r-1] {
		rows *= d
	}
	idx = make([]int, rows)
	pos := make([]int, r-1)
	at := 0
	for row := range idx {
		idx[row] = at
		for d := r - 2; d >= 0; d-- {
			pos[d]++
			at += strides[d]
			if pos[d] < out[d] {
				break
			}
			at -= strides[d] * pos[d]
			pos[d] = 0
		}
	}
	return idx, true
}

// rowOperands resolves the per-row operands of a post chain (and terms) against the output
// shape: idx[j] maps rows to elements of input j (nil for inputs no op reads per row). ok is
// false when an operand does not broadcast as a per-row value or has the wrong dtype.
type rowOperands struct {
	idx [][]int
	in  []*tensor.Tensor
}

func resolveRows(in []*tensor.Tensor, out []int, post []rowOp, terms []rowTerm) (*rowOperands, bool) {
	ro := &rowOperands{idx: make([][]int, len(in)), in: in}
	need := func(j int, dt tensor.DType) bool {
		if j < 0 {
			return true
		}
		if j >= len(in) || in[j].DType != dt {
			return false
		}
		if ro.idx[j] != nil {
			return true
		}
		idx, ok := rowIndex(in[j].Shape, out)
		ro.idx[j] = idx
		return ok
	}
	for _, op := range post {
		switch op.kind {
		case 'x':
			if !need(op.input, tensor.Float32) {
				return nil, false
			}
		case 'W', 'w':
			if !need(op.input, tensor.Bool) {
				return nil, false
			}
		}
	}
	for _, t := range terms {
		switch t.kind {
		case 'R':
			if !need(t.input, tensor.Float32) {
				return nil, false
			}
		case 'S':
			if !need(t.input, tensor.Bool) {
				return nil, false
			}
		}
	}
	return ro, true
}

// f32 returns the row's value of float operand j; cond its Bool value.
func (ro *rowOperands) f32(j, row int) float32 { return ro.in[j].F32[ro.idx[j][row]] }
func (ro *rowOperands) cond(j, row int) bool   { return ro.in[j].Bool[ro.idx[j][row]] }

// applyPost applies the post chain to one row of features.
func applyPost(x []float32, post []rowOp, ro *rowOperands, row int) {
	for i := 0; i < len(post); i++ {
		op := post[i]
		switch op.kind {
		case '+':
			vec.AddScalar(x, op.c)
		case '-':
			vec.AddScalar(x, -op.c) // x − c is x + (−c) in IEEE arithmetic, bit for bit
		case 'r':
			for j := range x {
				x[j] = op.c - x[j]
			}
		case '*':
			vec.Scale(x, op.c)
		case '/':
			vec.DivScalar(x, op.c)
		case 'x':
			// a row's mask value, 1 for every token of an unpadded batch (x·1 is x)
			if v := ro.f32(op.input, row); v != 1 {
				vec.Scale(x, v)
			}
		case 'W', 'w':
			if ro.cond(op.input, row) == (op.kind == 'W') {
				for j := range x {
					x[j] = op.c
				}
			}
		}
	}
}

// featureRun is one run of a random-feature map: its input x and operands resolved
// against the output's shape, ready to compute blocks of rows. Row r of the output is
// feature row r of slab r / n (n rows a slab).
type featureRun struct {
	sp           *featureSpec
	x            *tensor.Tensor
	ro           *rowOperands
	shape        []int // the output's shape (…, n, m)
	k, m, n, lda int
	stab         []float32 // per slab, for an 'S' term (set by slabMaxes, or by slab for its own)
}

// prepareFeatures checks and resolves the inputs of a feature map: ok is false unless x is
// float32 of rank ≥ 2 whose last axis is W's k, the stabilisers' axes fit its rank and
// every operand is a per-row value of the right dtype.
func prepareFeatures(in []*tensor.Tensor, sp *featureSpec) (*featureRun, bool) {
	x := in[0]
	r := len(x.Shape)
	k, m := sp.w.K(), sp.w.N()
	if x.DType != tensor.Float32 || r < 2 || x.Shape[r-1] != k || (sp.xPerm && r != 4) || !sp.fits(x) {
		return nil, false
	}
	xs := x.Shape // x's logical shape, after the head split
	if sp.xPerm {
		xs = []int{x.Shape[0], x.Shape[2], x.Shape[1], x.Shape[3]}
	}
	shape := append(append([]int(nil), xs[:r-1]...), m)
	ro, ok := resolveRows(in, shape, sp.post, sp.terms)
	if !ok {
		return nil, false
	}
	fr := &featureRun{sp: sp, x: x, ro: ro, shape: shape, k: k, m: m, n: xs[r-2], lda: k}
	if sp.xPerm {
		fr.lda = xs[1] * k
	}
	return fr, true
}

// rows returns the number of feature rows.
func (fr *featureRun) rows() int { return graph.NumElements(fr.shape[:len(fr.shape)-1]) }

// xAt returns the offset of row `row` of x (logical).
func (fr *featureRun) xAt(row int) int {
	if !fr.sp.xPerm {
		return row * fr.k
	}
	n := max(fr.n, 1)
	s, i := row/n, row%n
	h := fr.x.Shape[2]
	return (((s/h)*n+i)*h + s%h) * fr.k
}

// product computes rows [r0, r1) of x·W into dst (row stride m).
func (fr *featureRun) product(dst []float32, r0, r1 int) {
	if fr.k == 0 {
		clear(dst[:(r1-r0)*fr.m])
		return
	}
	gemm.SgemmPacked(r1-r0, fr.m, fr.k, 1, fr.x.F32[fr.xAt(r0):], fr.lda, fr.sp.w, 0, dst, fr.m)
}

// finish turns rows [r0, r1) of slab s's products in dst (row stride m) into features: the
// shift of the terms, the exp and the post chain.
func (fr *featureRun) finish(dst []float32, r0, r1, s int) {
	m := fr.m
	for row := r0; row < r1; row++ {
		f := dst[(row-r0)*m : (row-r0+1)*m]
		var shift float32
		for _, t := range fr.sp.terms {
			var v float32
			switch t.kind {
			case 'c':
				v = t.c
			case 'R':
				v = fr.ro.f32(t.input, row)
			case 'M':
				v = vec.Max(f)
			case 'Q':
				at := fr.xAt(row)
				xr := fr.x.F32[at : at+fr.k]
				v = vec.Dot(xr, xr)
				for _, op := range t.scale {
					if op.kind == '/' {
						v /= op.c
					} else {
						v *= op.c
					}
				}
			case 'S':
				v = fr.stab[s]
			}
			shift += t.sign * v
		}
		vec.ExpSum(f, f, shift)
		applyPost(f, fr.sp.post, fr.ro, row)
	}
}

// block computes feature rows [r0, r1) of slab s into dst (row stride m); a map with an
// 'S' term needs slabMaxes first.
func (fr *featureRun) block(dst []float32, r0, r1, s int) {
	fr.product(dst, r0, r1)
	fr.finish(dst, r0, r1, s)
}

// slabTerm returns the index of the map's 'S' term (the maximum over a whole slab), or -1.
func (sp *featureSpec) slabTerm() int {
	for i, t := range sp.terms {
		if t.kind == 'S' {
			return i
		}
	}
	return -1
}

// featureMap runs a fused random-feature map; it declines as prepareFeatures does.
func featureMap(e *exec, in []*tensor.Tensor, sp *featureSpec) (*tensor.Tensor, bool, error) {
	fr, ok := prepareFeatures(in, sp)
	if !ok {
		return nil, false, nil
	}
	out, err := e.allocRaw(fr.shape)
	if err != nil {
		return nil, false, fmt.Errorf("feature map: %w", err)
	}
	n, m := fr.n, fr.m
	rows := fr.rows()
	if rows == 0 || m == 0 {
		return out, true, nil
	}
	slabs := rows / max(n, 1)
	nb := (n + featureRows - 1) / featureRows
	slabMax := sp.slabTerm()
	if slabMax >= 0 {
		// The products are kept in out between the two passes: the slab's maximum first.
		fr.slabMaxes(e, out.F32)
	}
	workpool.Tasks(e.threads, slabs*nb, func(task int) {
		s, b := task/nb, task%nb
		r0 := s*n + b*featureRows
		r1 := min(r0+featureRows, (s+1)*n)
		if slabMax < 0 {
			fr.product(out.F32[r0*m:], r0, r1)
		}
		fr.finish(out.F32[r0*m:], r0, r1, s)
	})
	return out, true, nil
}

// slabMaxes sets fr.stab, each slab's largest product over its valid rows (the 'S' term's
// value), from the products of the blocks of featureRows rows, which it computes into dst
// (row stride m) for finish to turn into features.
func (fr *featureRun) slabMaxes(e *exec, dst []float32) {
	t := fr.sp.terms[fr.sp.slabTerm()]
	n, m := fr.n, fr.m
	slabs := fr.rows() / max(n, 1)
	nb := (n + featureRows - 1) / featureRows
	bmax := make([]float32, slabs*nb)
	workpool.Tasks(e.threads, slabs*nb, func(task int) {
		s, b := task/nb, task%nb
		r0 := s*n + b*featureRows
		r1 := min(r0+featureRows, (s+1)*n)
		p := dst[r0*m : r1*m]
		fr.product(p, r0, r1)
		bmax[task] = fr.validMax(t, p, r0, r1)
	})
	fr.stab = make([]float32, slabs)
	for s := range fr.stab {
		mx := float32(math.Inf(-1))
		for b := 0; b < nb; b++ {
			mx = maxNaN(mx, bmax[s*nb+b])
		}
		fr.stab[s] = mx
	}
}

// validMax returns the largest of the products p of rows [r0, r1) (row stride m) that the
// slab term t counts (the valid rows), −∞ when none is.
func (fr *featureRun) validMax(t rowTerm, p []float32, r0, r1 int) float32 {
	m := fr.m
	mx := float32(math.Inf(-1))
	for row := r0; row < r1; row++ {
		if t.input >= 0 && fr.ro.cond(t.input, row) == t.invalidWhen {
			continue
		}
		mx = maxNaN(mx, vec.Max(p[(row-r0)*m:(row-r0+1)*m]))
	}
	return mx
}

// slab computes the features of slab s, all n rows, into dst (row stride m). A map with an
// 'S' term computes the slab's products once, sets its stab entry from them and finishes
// them in place, so fr.stab must have an entry per slab (slabs may run concurrently: each
// writes its own).
func (fr *featureRun) slab(dst []float32, s int) {
	n := fr.n
	st := fr.sp.slabTerm()
	if st < 0 {
		for r0 := 0; r0 < n; r0 += featureRows {
			r1 := min(r0+featureRows, n)
			fr.block(dst[r0*fr.m:], s*n+r0, s*n+r1, s)
		}
		return
	}
	fr.product(dst, s*n, (s+1)*n)
	fr.stab[s] = fr.validMax(fr.sp.terms[st], dst, s*n, (s+1)*n)
	fr.finish(dst, s*n, (s+1)*n, s)
}

// maxNaN is max that propagates NaN, as ReduceMax does.
func maxNaN(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	return max(a, b)
}

// eluSpec is a fused Add(Elu(x, alpha), c) with a post chain; inputs are x and then the
// post chain's operands.
type eluSpec struct {
	alpha, c float32
	post     []rowOp
	xPerm    bool // x is the source (B, n, h, d) of a head split, read through strides
}

// eluFeature runs a fused elu feature map; it declines unless x is float32 of rank ≥ 1 and
// the post chain's operands are per-row values.
func eluFeature(e *exec, in []*tensor.Tensor, sp *eluSpec) (*tensor.Tensor, bool, error) {
	x := in[0]
	r := len(x.Shape)
	if x.DType != tensor.Float32 || r == 0 || (sp.xPerm && r != 4) {
		return nil, false, nil
	}
	shape := x.Shape
	if sp.xPerm {
		shape = []int{x.Shape[0], x.Shape[2], x.Shape[1], x.Shape[3]}
	}
	ro, ok := resolveRows(in, shape, sp.post, nil)
	if !ok {
		return nil, false, nil
	}
	out, err := e.allocRaw(shape)
	if err != nil {
		return nil, false, fmt.Errorf("elu feature map: %w", err)
	}
	l := shape[r-1]
	if l == 0 || len(out.F32) == 0 {
		return out, true, nil
	}
	rows := len(out.F32) / l
	// The rows are visited in x's order, so a head split's source is read as one stream
	// (visited in the output's order, its rows are a head's width apart and every one
	// started a new run of cache lines); outRow maps x's row q to the output's row.
	outRow := func(q int) int { return q }
	if sp.xPerm {
		h, n := shape[1], shape[2]
		outRow = func(q int) int {
			b, i, hh := q/(n*h), (q/h)%n, q%h
			return (b*h+hh)*n + i
		}
	}
	workpool.For(e.threads, rows, max(1, elemGrain/l), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			row := outRow(q)
			src, dst := x.F32[q*l:(q+1)*l], out.F32[row*l:(row+1)*l]
			vec.EluAdd(dst, src, sp.alpha, sp.c)
			applyPost(dst, sp.post, ro, row)
		}
	})
	return out, true, nil
}

// linAttnSpec is a fused linear attention: inputs A (…, nq, m), B (…, nk, m) and V
// (…, nk, dv), or V's source before a head split when vPerm is set.
type linAttnSpec struct {
	eps    float32
	hasEps bool
	div    bool // Div(num, den) rather than Mul(num, 1/den)
	// keyAxis is the ReduceSum axis of the key sum (−2 or rank−2, checked at run time).
	keyAxis int
	// vPerm and outPerm are the head split of V and the merge of the output ((0, 2, 1, 3))
	// read and written through strides, or nil.
	vPerm, outPerm []int
	// vScale: input 3 is a per-row value (…, nk, 1) V's rows are multiplied by.
	vScale bool
}

// linearAttention runs a fused linear attention; it declines unless A, B and V are float32
// of one rank with the same leading axes, and the permutations are head splits of rank 4.
func linearAttention(e *exec, in []*tensor.Tensor, sp *linAttnSpec) (*tensor.Tensor, bool, error) {
	return linearAttentionOf(e, in, nil, nil, sp)
}

// linearAttentionOf is linearAttention whose A, when fr is set, is the feature map fr
// computes, a block of rows at a time in the second product's tasks, and whose B, when frB
// is set, is the feature map frB computes, a slab at a time in the first product's (in[0]
// and in[1] are then not read).
func linearAttentionOf(e *exec, in []*tensor.Tensor, fr, frB *featureRun, sp *linAttnSpec) (*tensor.Tensor, bool, error) {
	a, b, v := in[0], in[1], in[2]
	var aShape, bShape []int
	if fr != nil {
		aShape = fr.shape
	} else {
		if a.DType != tensor.Float32 {
			return nil, false, nil
		}
		aShape = a.Shape
	}
	if frB != nil {
		bShape = frB.shape
	} else {
		if b.DType != tensor.Float32 {
			return nil, false, nil
		}
		bShape = b.Shape
	}
	r := len(aShape)
	if v.DType != tensor.Float32 || r < 2 || len(bShape) != r || len(v.Shape) != r {
		return nil, false, nil
	}
	if ax := sp.keyAxis; ax != -2 && ax != r-2 {
		return nil, false, nil
	}
	vs := v.Shape
	if sp.vPerm != nil {
		if r != 4 {
			return nil, false, nil
		}
		vs = []int{v.Shape[0], v.Shape[2], v.Shape[1], v.Shape[3]}
	}
	if sp.outPerm != nil && r != 4 {
		return nil, false, nil
	}
	for d := 0; d < r-2; d++ {
		if bShape[d] != aShape[d] || vs[d] != aShape[d] {
			return nil, false, nil
		}
	}
	nq, m, nk, dv := aShape[r-2], aShape[r-1], bShape[r-2], vs[r-1]
	if bShape[r-1] != m || vs[r-2] != nk {
		return nil, false, nil
	}
	if frB != nil && frB.sp.slabTerm() >= 0 {
		// the keys' features need their slab's maximum: each slab's task computes its
		// products once, takes the maximum and finishes them in place (frB.slab)
		frB.stab = make([]float32, frB.rows()/max(nk, 1))
	}
	var vsc *rowOperands
	if sp.vScale {
		ro, ok := resolveRows(in, vs, []rowOp{{kind: 'x', input: 3}}, nil)
		if !ok {
			return nil, false, nil
		}
		vsc = ro
	}
	shape := append(append([]int(nil), aShape[:r-1]...), dv)
	if sp.outPerm != nil {
		shape = []int{aShape[0], nq, aShape[1], dv}
	}
	out, err := e.allocRaw(shape)
	if err != nil {
		return nil, false, fmt.Errorf("linear attention: %w", err)
	}
	slabs := 1
	for _, d := range aShape[:r-2] {
		slabs *= d
	}
	if len(out.F32) == 0 {
		return out, true, nil
	}
	heads := 1
	if r == 4 {
		heads = aShape[1]
	}
	// vAt and outAt return the offset of row 0 of slab s and the row stride.
	vAt := func(s int) (int, int) {
		if sp.vPerm != nil {
			return (s/heads)*nk*heads*dv + (s%heads)*dv, heads * dv
		}
		return s * nk * dv, dv
	}
	outAt := func(s int) (int, int) {
		if sp.outPerm != nil {
			return (s/heads)*nq*heads*dv + (s%heads)*dv, heads * dv
		}
		return s * nq * dv, dv
	}
	// In an int8-attention program both products run in int8 as softmax attention's do:
	// Vᵀ·B with B (the keys' features) quantized per feature over the keys and Vᵀ per
	// channel, then A·(Vᵀ·B)ᵀ with the product quantized per channel and A per row; the key
	// sums, the denominators and the division stay fp32.
	attn8 := e.attn8 && nk <= gemm.MaxInt8K && m <= gemm.MaxInt8K
	// (Bᵀ·V)ᵀ = Vᵀ·B per slab: the transposed operand the GEMM packs is then V (dv × nk),
	// not B (m × nk, four times larger for FAVOR+'s 266 features of 64-wide heads); the
	// product is packed once per slab as the right operand of the second GEMM.
	ctxBuf := linAttnScratch(slabs * dv * m)
	defer linAttnBufs.Put(ctxBuf)
	ctxT := *ctxBuf                  // every slab's product stored whole (beta 0) or cleared
	ksum := make([]float32, slabs*m) // Σ_j B_j per slab
	packed := make([]*gemm.PackedB, slabs)
	// V is transposed into contiguous dv × nk copies first (row stride ldt): the GEMM's
	// packing of a transposed operand gathers mr values per k, slower than this copy and
	// the in-place row reads it enables. A head split's source (B, nk, h·dv) is transposed
	// whole, per batch and block of its rows, so it is read as one stream: slab (b, hh) is
	// then rows hh·dv … of batch b's transpose. Read a head at a time, V's rows are h·dv
	// apart, and at n = 8192 that cost more than the GEMMs.
	ldt := padStride(nk)
	vtBuf := linAttnScratch(slabs * dv * ldt)
	defer linAttnBufs.Put(vtBuf)
	vtAll := *vtBuf // the products read only the nk columns the transposes write
	if nk > 0 && dv > 0 {
		const chunk = 256
		nc := (nk + chunk - 1) / chunk
		workpool.Tasks(e.threads, slabs/heads*nc, func(t int) {
			bt, c0 := t/nc, (t%nc)*chunk
			c1 := min(c0+chunk, nk)
			if sp.vPerm != nil {
				src := v.F32[bt*nk*heads*dv+c0*heads*dv:]
				gemm.Transpose(vtAll[bt*heads*dv*ldt+c0:], src, c1-c0, heads*dv, heads*dv, ldt)
				return
			}
			for hh := 0; hh < heads; hh++ {
				s := bt*heads + hh
				vo, ldv := vAt(s)
				gemm.Transpose(vtAll[s*dv*ldt+c0:], v.F32[vo+c0*ldv:], c1-c0, dv, ldv, ldt)
			}
		})
	}
	workpool.Tasks(e.threads, slabs, func(s int) {
		var bs []float32 // the slab's B
		if frB != nil {
			buf := linAttnScratch(nk * m)
			defer linAttnBufs.Put(buf)
			bs = *buf
			if m > 0 && nk > 0 {
				frB.slab(bs, s)
			}
		} else {
			bs = b.F32[s*nk*m : (s+1)*nk*m]
		}
		ks := ksum[s*m : (s+1)*m]
		// int8 packs B in a pass that also sums its rows (the same additions in the same
		// order); fp32 sums them in one of their own
		summed := attn8 && nk > 0 && m > 0 && dv > 0
		for j := 0; j < nk && !summed; j++ {
			vec.Add(ks, ks, bs[j*m:(j+1)*m])
		}
		c := ctxT[s*dv*m : (s+1)*dv*m]
		if nk > 0 && m > 0 && dv > 0 {
			vt := vtAll[s*dv*ldt : (s+1)*dv*ldt]
			if vsc != nil {
				cs := make([]float32, nk)
				ones := true
				for j := range cs {
					cs[j] = vsc.f32(3, s*nk+j)
					ones = ones && cs[j] == 1
				}
				for d := 0; d < dv && !ones; d++ { // x·1 is x: an unpadded batch's mask is all 1
					row := vt[d*ldt : d*ldt+nk]
					for j, c := range cs {
						row[j] *= c
					}
				}
			}
			if attn8 {
				pb := linAttnPacks.Get().(*gemm.PackedB)
				pb.PackInt8ActivationSum(nk, m, bs, m, ks)
				gemm.SgemmPacked(dv, m, nk, 1, vt, ldt, pb, 0, c, m)
				linAttnPacks.Put(pb)
			} else {
				e.sgemm(false, false, dv, m, nk, 1, vt, ldt, bs, m, 0, c, m)
			}
		} else {
			clear(c)
		}
		packed[s] = linAttnPacks.Get().(*gemm.PackedB)
		if attn8 {
			packed[s].PackInt8Activation(true, m, dv, c, max(m, 1))
		} else {
			e.packB(packed[s], true, m, dv, c, max(m, 1))
		}
	})
	defer func() {
		for _, pb := range packed {
			linAttnPacks.Put(pb)
		}
	}()
	nb := (nq + featureRows - 1) / featureRows
	workpool.Tasks(e.threads, slabs*nb, func(task int) {
		s, blk := task/nb, task%nb
		r0, r1 := blk*featureRows, min((blk+1)*featureRows, nq)
		var as []float32 // rows r0 … r1 of the slab's A
		if fr != nil {
			buf := linAttnScratch((r1 - r0) * m)
			defer linAttnBufs.Put(buf)
			as = *buf
			if m > 0 {
				fr.block(as, s*nq+r0, s*nq+r1, s)
			}
		} else {
			as = a.F32[(s*nq+r0)*m : (s*nq+r1)*m]
		}
		oo, ldo := outAt(s)
		if m == 0 {
			for i := r0; i < r1; i++ {
				clear(out.F32[oo+i*ldo : oo+i*ldo+dv])
			}
		} else {
			gemm.SgemmPacked(r1-r0, dv, m, 1, as, m, packed[s], 0, out.F32[oo+r0*ldo:], ldo)
		}
		ks := ksum[s*m : (s+1)*m]
		for i := r0; i < r1; i++ {
			den := vec.Dot(as[(i-r0)*m:(i-r0+1)*m], ks)
			if sp.hasEps {
				den += sp.eps
			}
			row := out.F32[oo+i*ldo : oo+i*ldo+dv]
			if sp.div {
				vec.DivScalar(row, den)
			} else {
				vec.Scale(row, 1/den)
			}
		}
	})
	return out, true, nil
}

// linAttnBufs recycles linearAttention's per-call buffers (V's transposed copies and the
// products Vᵀ·B: about 13 MB a layer at base b8 n512), which make would zero first.
var linAttnBufs = sync.Pool{New: func() any { return new([]float32) }}

// linAttnScratch returns a buffer of linAttnBufs holding n values (unspecified).
func linAttnScratch(n int) *[]float32 {
	b := linAttnBufs.Get().(*[]float32)
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	return b
}

// linAttnPacks recycles linearAttention's packed operands (a slab's Bᵀ·V, and in int8 its
// B), whose storage PackedB reuses from pack to pack.
var linAttnPacks = sync.Pool{New: func() any { return new(gemm.PackedB) }}

// padStride returns a row stride of at least n elements that is not a multiple of 256
// bytes: rows at a power-of-two stride (n = 512) fall into a few L1 sets, and the
// transpose's stores to them evicted each other (2.4 ms per call at the performer's base
// shapes, n = 512, against 0.x ms padded).
func padStride(n int) int {
	if n%64 == 0 {
		return n + 16
	}
	return n
}
