package cpu

import (
	"slices"
	"sort"
	"sync"

	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Imported quantized linear layers run on the int8 kernels (gemm.GemmU8S8), recognised by
// what the graph computes, whatever the node names:
//
//   - "int8-dynamic": ONNX Runtime's dynamic quantization, DynamicQuantizeLinear(x) and every
//     MatMulInteger reading its output with a constant B, each followed by Cast(float) and a
//     Mul by a scale (Mul(x_scale, W_scale), or a constant), optionally by an Add of a
//     constant bias row and a Relu: one step per x that quantizes x once and runs every
//     layer. Each counts once per layer.
//   - "int8-qdq": QuantizeLinear(x) → DequantizeLinear by the same constant scale and zero
//     point, read only by MatMuls (optionally followed by a bias Add) or Gemms (transA 0,
//     alpha 1, beta 1, C a constant row) whose B is DequantizeLinear of constant int8 or
//     uint8 weights (per tensor, or per output column) folded at compile time, each
//     optionally followed by a Relu.
//   - "int8-qlinear": QLinearMatMul with a constant B and scalar scales and zero points of A
//     and Y (B's per tensor or per column).
//   - "int8-matmulinteger": any other MatMulInteger by a constant B, scalar A zero point.
//
// The integer sums are ONNX's: Σ_p (a − a_zp)(b − b_zp) mod 2³², which GemmU8S8's exact sum
// Σ a·q (q = b, or b − 128 for uint8 B) gives after the zero-point terms, in wrapping int32
// arithmetic (equal mod 2³² to MatMulInteger's int64 sum truncated to int32). The float math
// after them is the graph's, in its order and in float32: float32(sum), times the scale
// (float32(x_scale · W_scale_j), computed once per run as the graph's Mul does), plus the
// bias (vec.BiasAct, with the Relu); QLinearMatMul requantizes through graph.QLinearRequantize; the activation is
// quantized through graph's own DynamicQuantizeLinear and QuantizeLinear functions. So the
// "int8-dynamic", "int8-qlinear" and "int8-matmulinteger" steps give exactly the answer of
// the steps they replace. "int8-qdq" cannot: the graph multiplies dequantized floats (a
// float32 rounding of each (q − zp)·scale, then a float sum), and the step computes the
// same real number from the exact integer sum, scaled once, which is closer to it; the two
// differ by float32 rounding (TestQuantizedFusionQDQ measures it).
//
// Each fused step falls back to the steps it replaced when the run-time shapes are outside
// its fast path (a rank below 2, k not the weights', a per-row zero point). Products with k
// above gemm.MaxInt8K stay on the reference path.

// foldedDQ is DequantizeLinear of a constant integer matrix, folded at compile time: what
// "int8-qdq" needs of a weight whose float value is all the plan keeps.
type foldedDQ struct {
	x, scale, zp *tensor.Tensor
	axis         int
}

// noteFolded records a folded DequantizeLinear of a constant 2-D int8 or uint8 tensor under
// its output's name (Program.dequantized), for fuseQuantized.
func (p *Program) noteFolded(n *graph.Node, in []*tensor.Tensor) {
	if n.Op != "DequantizeLinear" || n.Domain != "" || len(in) < 2 || in[0] == nil || in[1] == nil || len(in[0].Shape) != 2 ||
		(in[0].DType != tensor.Int8 && in[0].DType != tensor.Uint8) || len(n.Outputs) != 1 {
		return
	}
	axis := int(n.Int("axis", 1))
	if axis < 0 {
		axis += 2
	}
	if p.dequantized == nil {
		p.dequantized = map[string]foldedDQ{}
	}
	d := foldedDQ{x: in[0], scale: in[1], axis: axis}
	if len(in) > 2 {
		d.zp = in[2]
	}
	p.dequantized[n.Outputs[0]] = d
}

// qWeights is the constant B (k×n) of a quantized product, packed for GemmU8S8 in int8
// form: q = b (int8 B) or b − 128 (uint8 B), with zero points shifted alike, so that
// (b − zp) = (q − zq).
type qWeights struct {
	k, n   int
	pb     *gemm.PackedB
	colSum []int32 // Σ_p q[p][j]
	zq     []int32 // zq[j], the zero point of column j in int8 form; nil when all are 0
	dt     tensor.DType
}

// packQuantized packs the k×n integer matrix b (int8 or uint8; I64 values, row-major, or
// n×k when trans) with zero point z (nil, one value, or n values); qShape must accept them.
func (p *Program) packQuantized(b, z *tensor.Tensor, trans bool) *qWeights {
	k, n, _ := qShape(b, z, trans)
	shift := int64(0)
	if b.DType == tensor.Uint8 {
		shift = 128
	}
	w := &qWeights{k: k, n: n, colSum: make([]int32, n), dt: b.DType}
	q := make([]int8, k*n)
	for pi := 0; pi < k; pi++ {
		for j := 0; j < n; j++ {
			v := b.I64[pi*n+j]
			if trans {
				v = b.I64[j*k+pi]
			}
			q[pi*n+j] = int8(v - shift)
			w.colSum[j] += int32(v - shift)
		}
	}
	zq := make([]int32, n)
	nonzero := false
	for j := range zq {
		var zv int64
		if z != nil {
			zv = z.I64[min(j, z.Len()-1)]
		}
		zq[j] = int32(zv - shift)
		nonzero = nonzero || zq[j] != 0
	}
	if nonzero {
		w.zq = zq
	}
	w.pb = gemm.PackBInt8Quantized(k, n, q, []float32{1})
	p.packed = append(p.packed, w.pb)
	return w
}

// tensor returns B as the graph held it (k×n, or n×k when trans), rebuilt from the packed
// copy: what a fused step's fallback reads instead of a second copy of the weights.
func (w *qWeights) tensor(trans bool) *tensor.Tensor {
	q, _ := w.pb.Int8Values()
	shape := []int{w.k, w.n}
	if trans {
		shape = []int{w.n, w.k}
	}
	t := &tensor.Tensor{DType: w.dt, Shape: shape, I64: make([]int64, w.k*w.n)}
	shift := int64(0)
	if w.dt == tensor.Uint8 {
		shift = 128
	}
	for pi := 0; pi < w.k; pi++ {
		for j := 0; j < w.n; j++ {
			at := pi*w.n + j
			if trans {
				at = j*w.k + pi
			}
			t.I64[at] = int64(q[pi*w.n+j]) + shift
		}
	}
	return t
}

// dequantized returns DequantizeLinear of B as the graph computed it, (x − zp)·scale_j per
// output column j (k×n, or n×k when trans), rebuilt from the packed copy.
func (w *qWeights) dequantized(trans bool, scale []float32) *tensor.Tensor {
	t := w.tensor(trans)
	out := &tensor.Tensor{DType: tensor.Float32, Shape: t.Shape, F32: make([]float32, len(t.I64))}
	shift := int64(0)
	if w.dt == tensor.Uint8 {
		shift = 128
	}
	for i, v := range t.I64 {
		j := i % w.n
		if trans {
			j = i / w.k
		}
		var z int64
		if w.zq != nil {
			z = int64(w.zq[j]) + shift
		}
		out.F32[i] = graph.Dequantize(v, z, scale[j])
	}
	return out
}

// qRows is the row block a task of a quantized product computes at a time.
const qRows = 32

// qScratch recycles the int32 sums of one row block (qRows × n).
var qScratch = sync.Pool{New: func() any { return new([]int32) }}

// product computes ONNX's integer sums c = (a − za)(B − zb) mod 2³² for the m rows of a (u8,
// row stride w.k) in blocks of qRows rows over e's threads, and hands each block to epi
// (rows [lo, hi), c row-major (hi−lo)×n), which must not keep c.
func (w *qWeights) product(e *exec, m int, a []uint8, za int32, epi func(lo, hi int, c []int32)) {
	k, n := w.k, w.n
	tasks := (m + qRows - 1) / qRows
	workpool.Tasks(e.threads, tasks, func(t int) {
		lo, hi := t*qRows, min(m, (t+1)*qRows)
		buf := qScratch.Get().(*[]int32)
		defer qScratch.Put(buf)
		if cap(*buf) < qRows*n {
			*buf = make([]int32, qRows*n)
		}
		c := (*buf)[:(hi-lo)*n]
		gemm.GemmU8S8(hi-lo, n, k, a[lo*k:], k, w.pb, c, n)
		kza := int32(k) * za
		for i := lo; i < hi; i++ {
			row := c[(i-lo)*n : (i-lo+1)*n]
			if za != 0 {
				for j := range row {
					row[j] -= za * w.colSum[j]
				}
			}
			if w.zq != nil {
				var rs int32
				for _, v := range a[i*k : (i+1)*k] {
					rs += int32(v)
				}
				for j := range row {
					row[j] += w.zq[j] * (kza - rs)
				}
			}
		}
		epi(lo, hi, c)
	})
}

// u8Rows returns a's int8 or uint8 values (I64) as u8, shifted by 128 for int8, with the
// shift to add to its zero point; ok false for another dtype.
func u8Rows(a *tensor.Tensor) (u []uint8, shift int32, ok bool) {
	switch a.DType {
	case tensor.Uint8:
	case tensor.Int8:
		shift = 128
	default:
		return nil, 0, false
	}
	u = make([]uint8, len(a.I64))
	for i, v := range a.I64 {
		u[i] = uint8(v + int64(shift))
	}
	return u, shift, true
}

// rowsOf returns the row count m of a (…, m, k) operand of a product with k columns (the
// leading axes flattened), or false when its rank is below 2 or its last axis is not k.
func rowsOf(shape []int, k int) (int, bool) {
	if len(shape) < 2 || shape[len(shape)-1] != k {
		return 0, false
	}
	return graph.NumElements(shape) / k, true
}

// outShape is a (…, k) operand's shape with n columns.
func outShape(shape []int, n int) []int {
	return append(slices.Clone(shape[:len(shape)-1]), n)
}

// scaleEpi writes y = act(float32(float32(c)·s_j) + bias_j) for rows [lo, hi) of y (n
// columns): the graph's Cast, scale Mul, bias Add (none when bias is nil) and Relu (act
// vec.ActRelu: vec's is the Relu kernel's max(x, 0), NaN kept), in that order.
func scaleEpi(y []float32, n int, s, bias []float32, act vec.Act) func(lo, hi int, c []int32) {
	return func(lo, hi int, c []int32) {
		for i := lo; i < hi; i++ {
			row := y[i*n : (i+1)*n]
			scaleRow(row, c[(i-lo)*n:(i-lo+1)*n], s)
			switch {
			case bias != nil:
				vec.BiasAct(row, bias, act)
			case act == vec.ActRelu:
				vec.Relu(row, row)
			}
		}
	}
}

// scaleRow sets dst[j] = float32(c[j])·s[j], rounded once.
func scaleRow(dst []float32, c []int32, s []float32) {
	s, dst = s[:len(c)], dst[:len(c)]
	for j, v := range c {
		dst[j] = float32(v) * s[j]
	}
}

// colVec returns t's float32 values as one per column of n (a scalar repeated), or false.
func colVec(t *tensor.Tensor, n int) ([]float32, bool) {
	if t == nil || t.DType != tensor.Float32 || (t.Len() != 1 && t.Len() != n) || len(t.Shape) > 1 {
		return nil, false
	}
	if t.Len() == n {
		return t.F32, true
	}
	v := make([]float32, n)
	for j := range v {
		v[j] = t.F32[0]
	}
	return v, true
}

// biasRow returns the constant in slot s as a bias row of n values (shape (n) or (1…, n)).
func (f *fuser) biasRow(s, n int) ([]float32, bool) {
	t := f.constF32(s)
	if t == nil || t.Len() != n || len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] != n {
		return nil, false
	}
	return t.F32, true
}

// fuseQuantized runs the matchers of the package comment above, the groups first.
func (f *fuser) fuseQuantized(replaced map[int]step) {
	for i := range f.p.plan.Steps {
		if f.dead[i] {
			continue
		}
		switch f.p.plan.Steps[i].Node.Op {
		case "DynamicQuantizeLinear":
			f.fuseDynamicGroup(i, replaced)
		case "DequantizeLinear":
			f.fuseQDQGroup(i, replaced)
		}
	}
	f.fuseAt("QLinearMatMul", "int8-qlinear", replaced, kindless(f.matchQLinear))
	f.fuseAt("MatMulInteger", "int8-matmulinteger", replaced, kindless(f.matchMatMulInteger))
	// The integer tensors are in the packed copies now (the keys would keep them alive).
	f.p.dequantized, f.p.qpacked = nil, nil
}

// newFusedAt builds a fused step of group with external inputs ext and results outs, whose
// fallback rebuilds the constants in override, and schedules it at step index at (which
// must come after every producer of ext and before every reader of outs).
func (f *fuser) newFusedAt(op string, at int, group, ext, outs []int, fast multiKernel, override map[int]func() *tensor.Tensor, replaced map[int]step) {
	sort.Ints(group)
	sub := make([]step, len(group))
	for j, i := range group {
		sub[j] = f.p.plan.Steps[i]
		f.dead[i] = true
	}
	node := &graph.Node{Op: op, Name: f.p.plan.Steps[at].Node.Name, Inputs: make([]string, len(ext)), Outputs: make([]string, len(outs))}
	for j, s := range ext {
		node.Inputs[j] = f.p.plan.Slots[s]
	}
	for j, s := range outs {
		node.Outputs[j] = f.p.plan.Slots[s]
	}
	fb := &fallback{ext: ext, out: outs[0], more: outs[1:], sub: sub, consts: f.p.constInputs(sub, override)}
	k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if t, ok, err := fast(e, in); ok || err != nil {
			return t, err
		}
		return fb.run(e, in)
	}
	replaced[at] = step{Node: node, Kernel: k, In: slices.Clone(ext), Out: slices.Clone(outs), Covers: compile.CoversOf(sub)}
}

// onlyReaders reports whether every reader of slot s is one of steps (and s is no output);
// true for an omitted value (s < 0).
func (f *fuser) onlyReaders(s int, steps []int) bool {
	if s < 0 {
		return true
	}
	if f.uses[s] != len(f.consumer[s]) {
		return false
	}
	for _, c := range f.consumer[s] {
		if !slices.Contains(steps, c) {
			return false
		}
	}
	return true
}

// qLayer is one linear layer of a fused group: its weights, the scale of its sums (a
// constant per column, or the activation scale times wScale per column, at run time), its
// bias and its output slot.
type qLayer struct {
	b, zb   *tensor.Tensor // the integer weights and their zero point, packed into w on commit
	k, n    int
	w       *qWeights
	zaConst int32 // the A zero point when it is not the group's own (zaOwn false)
	zaOwn   bool  // the A zero point is the activation quantization's own
	sConst  []float32
	wScale  []float32
	bias    []float32
	act     vec.Act // a Relu of the result joins the epilogue
	out     int
	bSlot   int
	bTrans  bool
	rank2   bool // a Gemm: its input must be a matrix
	dequant bool // B's slot holds the dequantized floats (a folded DequantizeLinear)
	steps   []int
}

// qShape returns the k×n shape of a product by the integer matrix b (n×k when trans) with
// zero point z, or false when packQuantized would refuse it.
func qShape(b, z *tensor.Tensor, trans bool) (k, n int, ok bool) {
	if b == nil || len(b.Shape) != 2 || (b.DType != tensor.Int8 && b.DType != tensor.Uint8) {
		return 0, 0, false
	}
	k, n = b.Shape[0], b.Shape[1]
	if trans {
		k, n = n, k
	}
	if k < 1 || n < 1 || k > gemm.MaxInt8K || (z != nil && ((z.Len() != 1 && z.Len() != n) || z.DType != b.DType || len(z.Shape) > 1)) {
		return 0, 0, false
	}
	return k, n, true
}

// pack packs the layer's weights (once per weight tensor and orientation in the program).
func (l *qLayer) pack(p *Program) {
	l.w = p.packQuantizedOnce(l.b, l.zb, l.bTrans)
}

// matchScaledLayer matches, from MatMulInteger step mi reading the group's quantized x
// (with za the group's zero-point slot, xs its scale slot), Cast(float) → Mul by the scale
// → optional bias Add.
func (f *fuser) matchScaledLayer(mi, xq, za, xs int) (*qLayer, bool) {
	p := f.p
	mm := p.plan.Steps[mi]
	if mm.Node.Op != "MatMulInteger" || len(mm.In) < 2 || mm.In[0] != xq || f.dead[mi] {
		return nil, false
	}
	b := p.plan.Consts[mm.In[1]]
	if p.plan.Kinds[mm.In[1]] != slotConst {
		return nil, false
	}
	var zb *tensor.Tensor
	if len(mm.In) > 3 && mm.In[3] >= 0 {
		if p.plan.Kinds[mm.In[3]] != slotConst {
			return nil, false
		}
		zb = p.plan.Consts[mm.In[3]]
	}
	l := &qLayer{bSlot: mm.In[1], steps: []int{mi}, b: b, zb: zb}
	var ok bool
	if l.k, l.n, ok = qShape(b, zb, false); !ok {
		return nil, false
	}
	switch {
	case len(mm.In) < 3 || mm.In[2] < 0:
	case mm.In[2] == za:
		l.zaOwn = true
	case p.plan.Kinds[mm.In[2]] == slotConst && p.plan.Consts[mm.In[2]].Len() == 1 && p.plan.Consts[mm.In[2]].DType == tensor.Uint8:
		l.zaConst = int32(p.plan.Consts[mm.In[2]].I64[0])
	default:
		return nil, false
	}
	acc := f.outOf(mi)
	ci, ok := f.single(acc)
	if !ok || p.plan.Steps[ci].Node.Op != "Cast" || tensor.DType(p.plan.Steps[ci].Node.Int("to", 0)) != tensor.Float32 {
		return nil, false
	}
	cast := f.outOf(ci)
	mul, ok := f.single(cast)
	if !ok || p.plan.Steps[mul].Node.Op != "Mul" {
		return nil, false
	}
	s, _, ok := p.otherInput(mul, cast)
	if !ok || s < 0 {
		return nil, false
	}
	l.steps = append(l.steps, ci, mul)
	if t := f.constF32(s); t != nil {
		if l.sConst, ok = colVec(t, l.n); !ok {
			return nil, false
		}
	} else {
		sm, ok := f.single(s)
		if !ok || sm != mul || f.producer[s] < 0 || p.plan.Steps[f.producer[s]].Node.Op != "Mul" {
			return nil, false
		}
		pi := f.producer[s]
		ws, _, ok := p.otherInput(pi, xs)
		if !ok || ws < 0 || f.dead[pi] {
			return nil, false
		}
		if l.wScale, ok = colVec(f.constF32(ws), l.n); !ok {
			return nil, false
		}
		l.steps = append(l.steps, pi)
	}
	l.out = f.outOf(mul)
	if c, ok := f.single(l.out); ok && p.plan.Steps[c].Node.Op == "Add" {
		if bs, _, ok := p.otherInput(c, l.out); ok {
			if bias, ok := f.biasRow(bs, l.n); ok {
				l.bias, l.out = bias, f.outOf(c)
				l.steps = append(l.steps, c)
			}
		}
	}
	f.matchRelu(l)
	return l, true
}

// matchRelu joins a Relu that is the only reader of the layer's result to its epilogue.
func (f *fuser) matchRelu(l *qLayer) {
	if r, ok := f.single(l.out); ok && f.p.plan.Steps[r].Node.Op == "Relu" && len(f.p.plan.Steps[r].In) == 1 {
		l.act, l.out = vec.ActRelu, f.outOf(r)
		l.steps = append(l.steps, r)
	}
}

// qKey identifies packed integer weights: the tensor, its zero point and orientation.
type qKey struct {
	b, z  *tensor.Tensor
	trans bool
}

// packQuantizedOnce is packQuantized once per program and key: layers that share a weight
// share its packed copy.
func (p *Program) packQuantizedOnce(b, z *tensor.Tensor, trans bool) *qWeights {
	if p.qpacked == nil {
		p.qpacked = map[qKey]*qWeights{}
	}
	key := qKey{b, z, trans}
	if w, ok := p.qpacked[key]; ok {
		return w
	}
	w := p.packQuantized(b, z, trans)
	p.qpacked[key] = w
	return w
}

// fuseDynamicGroup fuses DynamicQuantizeLinear step i with every layer reading its output
// into one step ("int8-dynamic"), scheduled where it was: its only run-time input is x.
func (f *fuser) fuseDynamicGroup(i int, replaced map[int]step) bool {
	p := f.p
	dq := p.plan.Steps[i]
	if len(dq.In) != 1 || len(dq.Out) != 3 || dq.In[0] < 0 || p.plan.Kinds[dq.In[0]] == slotConst {
		return false
	}
	xq, xs, xz := dq.Out[0], dq.Out[1], dq.Out[2]
	if xq < 0 || len(f.consumer[xq]) == 0 {
		return false
	}
	var layers []*qLayer
	group := []int{i}
	for _, c := range f.consumer[xq] {
		l, ok := f.matchScaledLayer(c, xq, xz, xs)
		if !ok {
			return false
		}
		layers = append(layers, l)
		group = append(group, l.steps...)
	}
	if !f.onlyReaders(xq, group) || !f.onlyReaders(xs, group) || !f.onlyReaders(xz, group) {
		return false
	}
	for _, l := range layers {
		for _, s := range l.steps[:len(l.steps)-1] {
			if !f.onlyReaders(f.outOf(s), group) {
				return false
			}
		}
	}
	k, outs, ok := layerOuts(layers)
	if !ok {
		return false
	}
	override := packLayers(p, layers)
	specs, za := dynamicSpecs(layers)
	ext := []int{dq.In[0]}
	if specs != nil && len(layers) == 1 {
		// A residual Add and a LayerNormalization after a lone layer (an attention block's
		// output projection, an FFN's second layer) join its epilogue, as they join an fp32
		// or zoo int8 layer's (matchLinear): two passes over the result and two steps fewer.
		if c, r, ok := f.dynamicResidual(layers[0].out, i); ok {
			group, ext, outs[0] = append(group, c), append(ext, r), f.outOf(c)
			if g2, o2, ln, ok := f.matchLayerNorm(outs[0], layers[0].n); ok {
				group, outs[0], specs[0].ln = append(group, g2), o2, ln
			}
		}
	}
	fast := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, bool, error) {
		x := in[0]
		if x == nil || x.DType != tensor.Float32 {
			return nil, false, nil
		}
		m, ok := rowsOf(x.Shape, k)
		if !ok {
			return nil, false, nil
		}
		if specs != nil {
			var res *tensor.Tensor
			if len(in) > 1 {
				if res = in[1]; !specs[0].fits(x, res) {
					return nil, false, nil
				}
			}
			scale, zp := dynamicParams(e, x.F32)
			z := za
			if z < 0 {
				z = int32(zp)
			}
			return runDynamicLinears(e, x, m, k, scale, z, specs, res)
		}
		scale, zp, a := dynamicQuantize(e, x.F32)
		res := make([]*tensor.Tensor, len(layers))
		for j, l := range layers {
			y, err := e.allocRaw(outShape(x.Shape, l.w.n))
			if err != nil {
				return nil, false, err
			}
			s := l.sConst
			if s == nil {
				s = make([]float32, l.w.n)
				for c, ws := range l.wScale {
					s[c] = float32(scale * ws)
				}
			}
			za := l.zaConst
			if l.zaOwn {
				za = int32(zp)
			}
			l.w.product(e, m, a, za, scaleEpi(y.F32, l.w.n, s, l.bias, l.act))
			res[j] = y
		}
		return res, true, nil
	}
	f.newFusedAt("Int8DynamicLinear", i, group, ext, outs, fast, override, replaced)
	p.fusions["int8-dynamic"] += len(layers)
	return true
}

// dynamicResidual finds the residual Add that is the only reader of a dynamic layer's
// result h: its step and its other input, a run-time value produced before step at (where
// the fused group runs), so the group can read it.
func (f *fuser) dynamicResidual(h, at int) (c, r int, ok bool) {
	c, ok = f.single(h)
	if !ok || f.p.plan.Steps[c].Node.Op != "Add" {
		return -1, -1, false
	}
	r, _, ok = f.p.otherInput(c, h)
	if !ok || r < 0 || r == h || f.p.plan.Kinds[r] == slotConst || f.producer[r] >= at {
		return -1, -1, false
	}
	return c, r, true
}

// dynamicSpecs returns the group's layers as int8 linear layers of the fused-linear path
// (their weights rescaled by wScale, bias and Relu in the epilogue) with the A zero point
// they share (−1: the activation quantization's own), or nil when the group is outside
// that path: a constant scale (the graph's scale is then not x_scale·w_scale_j, which the
// kernels' store computes), weight zero points, zero points that differ between layers,
// or a Relu without a bias (the epilogue applies activations with the bias).
func dynamicSpecs(layers []*qLayer) ([]*linearSpec, int32) {
	za := int32(-1)
	if !layers[0].zaOwn {
		za = layers[0].zaConst
	}
	specs := make([]*linearSpec, len(layers))
	for i, l := range layers {
		if l.sConst != nil || l.w.zq != nil || l.zaOwn != layers[0].zaOwn || (!l.zaOwn && l.zaConst != za) ||
			(l.bias == nil && l.act != vec.ActNone) || !l.w.pb.Int8SameForm(layers[0].w.pb) {
			return nil, 0
		}
		specs[i] = &linearSpec{pw: l.w.pb.WithInt8Scales(l.wScale), bias: l.bias}
		if l.act == vec.ActRelu {
			specs[i].act = actRelu
		}
		specs[i].epilogueInKernel()
	}
	return specs, za
}

// runDynamicLinears runs an "int8-dynamic" group on the fused-linear path (a lone layer with
// its residual res, when the group took one, else res nil): x's m rows are
// quantized once with DynamicQuantizeLinear's scale and zero point (za: the one the layers
// subtract) straight into the int8 kernels' layout, and the layers run as one parallel step
// whose kernels dequantize in their store (float32(float32(sum − za·colsum) ·
// float32(scale·w_scale_j)), the graph's Cast and Mul(x_scale, w_scale) rounded alike)
// and add the bias and apply the Relu there too (gemm's SetInt8Epilogue, rounded as the
// graph's Add).
func runDynamicLinears(e *exec, x *tensor.Tensor, m, k int, scale float32, za int32, specs []*linearSpec, res *tensor.Tensor) ([]*tensor.Tensor, bool, error) {
	jobs := make([]*linearJob, len(specs))
	for i, s := range specs {
		j, err := s.plan(e, x, res)
		if err != nil {
			return nil, true, err
		}
		jobs[i] = j
	}
	r := int8RowSets.Get().(*gemm.Int8Rows)
	defer int8RowSets.Put(r)
	r.Prepare(specs[0].pw, m, 1)
	tasks := (m + int8QuantRows - 1) / int8QuantRows
	workpool.Tasks(e.threads, tasks, func(t int) {
		lo, hi := t*int8QuantRows, min((t+1)*int8QuantRows, m)
		r.QuantizeTensorRange(lo, hi, x.F32, k, scale, za)
	})
	for _, j := range jobs {
		j.rows = r
	}
	return runLinearJobs(e, jobs), true, nil
}

// dynamicQuantize is DynamicQuantizeLinear of x into u8 with its scale and zero point, the
// answer of graph's functions (MinMax0, DynamicQuantParams, DynamicQuantize) computed in
// parallel over e's threads and in vector code: the range by gemm.Range0 (min and max are
// exact in any order; TestRange0Definition), the values by gemm.QuantizeTensorU8 (a true
// division, rounded and clamped as DynamicQuantize does; TestQuantizeTensorU8Definition).
func dynamicQuantize(e *exec, x []float32) (scale float32, zp uint8, q []uint8) {
	scale, zp = dynamicParams(e, x)
	q = make([]uint8, len(x))
	if scale == 0 {
		return scale, zp, q // DynamicQuantize's 0 for every element
	}
	quantizeU8(e, q, x, scale, int32(zp), 0, 255)
	return scale, zp, q
}

// dynamicParams returns DynamicQuantizeLinear's scale and zero point for x, its range found
// in parallel over e's threads.
func dynamicParams(e *exec, x []float32) (scale float32, zp uint8) {
	const grain = 1 << 13
	parts := max(1, min(e.threads, len(x)/grain))
	los, his := make([]float32, parts), make([]float32, parts)
	workpool.Tasks(e.threads, parts, func(t int) {
		los[t], his[t] = gemm.Range0(x[t*len(x)/parts : (t+1)*len(x)/parts])
	})
	return graph.DynamicQuantParams(graph.MinMax0(append(los, his...)))
}

// qDivScratch recycles quantizeU8's blocks of quotients (kept off the goroutine stack: a
// 16 KiB array there made every call grow the stack).
var qDivScratch = sync.Pool{New: func() any { return new([1 << 12]float32) }}

// quantizeU8 sets q[i] = graph.QuantizeU8(x[i]/scale, zp, lo, hi), in blocks over e's threads:
// for the u8 range through gemm.QuantizeTensorU8's vector code (the same answer,
// TestQuantizeTensorU8Definition), else dividing in vector code and rounding in Go.
func quantizeU8(e *exec, q []uint8, x []float32, scale float32, zp, lo, hi int32) {
	const block = 1 << 12
	if lo == 0 && hi == 255 && zp >= 0 && zp <= 255 {
		workpool.For(e.threads, len(x), 1<<13, func(a, b int) { gemm.QuantizeTensorU8(q[a:b], x[a:b], scale, zp) })
		return
	}
	workpool.For(e.threads, len(x), 1<<13, func(a, b int) {
		buf := qDivScratch.Get().(*[block]float32)
		defer qDivScratch.Put(buf)
		for s := a; s < b; s += block {
			t := min(b, s+block)
			d := buf[:t-s]
			copy(d, x[s:t])
			vec.DivScalar(d, scale)
			dst := q[s:t]
			for i, v := range d {
				dst[i] = graph.QuantizeU8(v, zp, lo, hi)
			}
		}
	})
}

// fuseQDQGroup fuses DequantizeLinear step i of QuantizeLinear(x) with every MatMul or Gemm
// reading it by folded quantized weights ("int8-qdq"), scheduled where the QuantizeLinear was.
func (f *fuser) fuseQDQGroup(i int, replaced map[int]step) bool {
	p := f.p
	dq := p.plan.Steps[i]
	if len(dq.In) < 2 || len(dq.Out) != 1 || dq.In[0] < 0 || p.plan.Kinds[dq.In[0]] != slotNode {
		return false
	}
	qi := f.producer[dq.In[0]]
	if qi < 0 || f.dead[qi] || p.plan.Steps[qi].Node.Op != "QuantizeLinear" || !f.onlyReaders(dq.In[0], []int{i}) {
		return false
	}
	ql := p.plan.Steps[qi]
	if len(ql.In) < 2 || ql.In[0] < 0 || p.plan.Kinds[ql.In[0]] == slotConst {
		return false
	}
	// The same constant scalar scale and zero point on both sides.
	scalar := func(in []int, j int) *tensor.Tensor {
		if j >= len(in) || in[j] < 0 || p.plan.Kinds[in[j]] != slotConst || p.plan.Consts[in[j]] == nil || p.plan.Consts[in[j]].Len() != 1 {
			return nil
		}
		return p.plan.Consts[in[j]]
	}
	qs, ds := scalar(ql.In, 1), scalar(dq.In, 1)
	qz, dz := scalar(ql.In, 2), scalar(dq.In, 2)
	if qs == nil || ds == nil || qs.DType != tensor.Float32 || ds.DType != tensor.Float32 || qs.F32[0] != ds.F32[0] || qs.F32[0] == 0 {
		return false
	}
	dt, zx := tensor.Uint8, int64(0)
	if qz != nil {
		dt, zx = qz.DType, qz.I64[0]
	}
	if (dt != tensor.Uint8 && dt != tensor.Int8) || (dz == nil) != (qz == nil) || (dz != nil && (dz.DType != dt || dz.I64[0] != zx)) ||
		tensor.DType(ql.Node.Int("output_dtype", 0)) != tensor.Invalid {
		return false
	}
	xdq := dq.Out[0]
	group := []int{qi, i}
	var layers []*qLayer
	for _, c := range f.consumer[xdq] {
		l, ok := f.matchQDQLayer(c, xdq)
		if !ok {
			return false
		}
		layers = append(layers, l)
		group = append(group, l.steps...)
	}
	if len(layers) == 0 || !f.onlyReaders(xdq, group) {
		return false
	}
	k, outs, ok := layerOuts(layers)
	if !ok {
		return false
	}
	for _, l := range layers {
		for c := range l.sConst {
			l.sConst[c] = float32(qs.F32[0] * l.wScale[c])
		}
	}
	override := packLayers(p, layers)
	sx, lo, hi := qs.F32[0], int32(0), int32(255)
	shift := int64(0)
	if dt == tensor.Int8 {
		lo, hi, shift = -128, 127, 128
	}
	za, zx32 := int32(zx+shift), int32(zx)
	fast := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, bool, error) {
		x := in[0]
		if x == nil || x.DType != tensor.Float32 {
			return nil, false, nil
		}
		m, ok := rowsOf(x.Shape, k)
		if !ok || (len(x.Shape) != 2 && slices.ContainsFunc(layers, func(l *qLayer) bool { return l.rank2 })) {
			return nil, false, nil
		}
		// QuantizeLinear's values, as u8 (int8 ones shifted by 128).
		a := make([]uint8, len(x.F32))
		quantizeU8(e, a, x.F32, sx, zx32, lo, hi)
		if shift != 0 {
			for j := range a {
				a[j] += uint8(shift)
			}
		}
		res := make([]*tensor.Tensor, len(layers))
		for j, l := range layers {
			y, err := e.allocRaw(outShape(x.Shape, l.w.n))
			if err != nil {
				return nil, false, err
			}
			l.w.product(e, m, a, za, scaleEpi(y.F32, l.w.n, l.sConst, l.bias, l.act))
			res[j] = y
		}
		return res, true, nil
	}
	f.newFusedAt("Int8QDQLinear", qi, group, []int{ql.In[0]}, outs, fast, override, replaced)
	p.fusions["int8-qdq"] += len(layers)
	return true
}

// matchQDQLayer matches MatMul(xdq, W) [+ bias] or Gemm(xdq, W, C) at step c, W a folded
// DequantizeLinear of constant integer weights per tensor or per output column.
func (f *fuser) matchQDQLayer(c, xdq int) (*qLayer, bool) {
	p := f.p
	st := p.plan.Steps[c]
	if f.dead[c] || len(st.In) < 2 || st.In[0] != xdq || st.In[1] < 0 || p.plan.Kinds[st.In[1]] != slotConst {
		return nil, false
	}
	d, ok := p.dequantized[p.plan.Slots[st.In[1]]]
	if !ok {
		return nil, false
	}
	l := &qLayer{bSlot: st.In[1], steps: []int{c}, b: d.x, zb: d.zp, dequant: true}
	gemmC := -1
	switch st.Node.Op {
	case "MatMul":
		if len(st.In) != 2 {
			return nil, false
		}
	case "Gemm":
		nd := st.Node
		if nd.Int("transA", 0) != 0 || nd.Float("alpha", 1) != 1 || len(st.In) > 3 {
			return nil, false
		}
		l.bTrans, l.rank2 = nd.Int("transB", 0) != 0, true
		if len(st.In) == 3 && st.In[2] >= 0 && nd.Float("beta", 1) != 0 {
			if nd.Float("beta", 1) != 1 {
				return nil, false
			}
			gemmC = st.In[2]
		}
	default:
		return nil, false
	}
	// The scale must be one per output column (or one in all): axis 1 of a (k, n) B,
	// axis 0 of Gemm's (n, k) transB one.
	colAxis := 1
	if l.bTrans {
		colAxis = 0
	}
	if d.scale.Len() != 1 && d.axis != colAxis {
		return nil, false
	}
	var ok2 bool
	if l.k, l.n, ok2 = qShape(d.x, d.zp, l.bTrans); !ok2 {
		return nil, false
	}
	if l.wScale, ok = colVec(d.scale, l.n); !ok {
		return nil, false
	}
	l.sConst = make([]float32, l.n)
	l.out = f.outOf(c)
	if gemmC >= 0 {
		if l.bias, ok = f.biasRow(gemmC, l.n); !ok {
			return nil, false
		}
	} else if a, ok := f.single(l.out); ok && p.plan.Steps[a].Node.Op == "Add" && st.Node.Op == "MatMul" {
		if bs, _, ok := p.otherInput(a, l.out); ok {
			if bias, ok := f.biasRow(bs, l.n); ok {
				l.bias, l.out = bias, f.outOf(a)
				l.steps = append(l.steps, a)
			}
		}
	}
	f.matchRelu(l)
	return l, true
}

// matchQLinear matches QLinearMatMul with a constant B and scalar constant A and Y scales and
// zero points ("int8-qlinear").
func (f *fuser) matchQLinear(i int) ([]int, step, bool) {
	p := f.p
	st := p.plan.Steps[i]
	if len(st.In) != 8 || st.In[0] < 0 || p.plan.Kinds[st.In[0]] == slotConst || len(st.Out) != 1 {
		return nil, step{}, false
	}
	c := func(j int) *tensor.Tensor {
		if st.In[j] < 0 || p.plan.Kinds[st.In[j]] != slotConst {
			return nil
		}
		return p.plan.Consts[st.In[j]]
	}
	as, az, b, bs, bz, ys, yz := c(1), c(2), c(3), c(4), c(5), c(6), c(7)
	for _, t := range []*tensor.Tensor{as, az, b, bs, bz, ys, yz} {
		if t == nil {
			return nil, step{}, false
		}
	}
	if as.Len() != 1 || az.Len() != 1 || ys.Len() != 1 || yz.Len() != 1 || as.DType != tensor.Float32 || ys.DType != tensor.Float32 {
		return nil, step{}, false
	}
	_, n, ok := qShape(b, bz, false)
	if !ok {
		return nil, step{}, false
	}
	bsv, ok := colVec(bs, n)
	if !ok {
		return nil, step{}, false
	}
	w := p.packQuantizedOnce(b, bz, false)
	mult := make([]float32, w.n)
	for j := range mult {
		mult[j] = graph.QLinearMultiplier(as.F32[0], bsv[j], ys.F32[0])
	}
	zy, dt, az0 := yz.I64[0], yz.DType, int32(az.I64[0])
	bSlot := st.In[3]
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		x := in[0]
		m, ok := rowsOf(x.Shape, w.k)
		if !ok {
			return nil, false, nil
		}
		a, shift, ok := u8Rows(x)
		if !ok {
			return nil, false, nil
		}
		y, err := alloc(dt, outShape(x.Shape, w.n))
		if err != nil {
			return nil, false, err
		}
		w.product(e, m, a, az0+shift, func(lo, hi int, c []int32) {
			for r := lo; r < hi; r++ {
				row := y.I64[r*w.n : (r+1)*w.n]
				for j, v := range c[(r-lo)*w.n : (r-lo+1)*w.n] {
					row[j] = graph.QLinearRequantize(v, mult[j], zy, dt)
				}
			}
		})
		return y, true, nil
	}
	override := map[int]func() *tensor.Tensor{bSlot: func() *tensor.Tensor { return w.tensor(false) }}
	return []int{i}, f.newFused("Int8QLinearMatMul", []int{i}, []int{st.In[0]}, st.Out[0], fast, override), true
}

// matchMatMulInteger matches MatMulInteger by a constant B whose A zero point is absent, a
// constant or a run-time scalar ("int8-matmulinteger").
func (f *fuser) matchMatMulInteger(i int) ([]int, step, bool) {
	p := f.p
	st := p.plan.Steps[i]
	if len(st.In) < 2 || st.In[0] < 0 || p.plan.Kinds[st.In[0]] == slotConst || st.In[1] < 0 || p.plan.Kinds[st.In[1]] != slotConst || len(st.Out) != 1 {
		return nil, step{}, false
	}
	var zb *tensor.Tensor
	if len(st.In) > 3 && st.In[3] >= 0 {
		if p.plan.Kinds[st.In[3]] != slotConst {
			return nil, step{}, false
		}
		zb = p.plan.Consts[st.In[3]]
	}
	if _, _, ok := qShape(p.plan.Consts[st.In[1]], zb, false); !ok {
		return nil, step{}, false
	}
	w := p.packQuantizedOnce(p.plan.Consts[st.In[1]], zb, false)
	ext := []int{st.In[0]}
	zaSlot := -1
	if len(st.In) > 2 && st.In[2] >= 0 {
		zaSlot = st.In[2]
		if p.plan.Kinds[zaSlot] != slotConst {
			ext = append(ext, zaSlot)
		}
	}
	var zaConst *tensor.Tensor
	if zaSlot >= 0 && p.plan.Kinds[zaSlot] == slotConst {
		zaConst = p.plan.Consts[zaSlot]
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		x := in[0]
		m, ok := rowsOf(x.Shape, w.k)
		if !ok {
			return nil, false, nil
		}
		zt := zaConst
		if len(in) > 1 {
			zt = in[1]
		}
		var za int32
		if zt != nil {
			if zt.Len() != 1 || zt.DType != x.DType {
				return nil, false, nil
			}
			za = int32(zt.I64[0])
		}
		a, shift, ok := u8Rows(x)
		if !ok {
			return nil, false, nil
		}
		y, err := alloc(tensor.Int32, outShape(x.Shape, w.n))
		if err != nil {
			return nil, false, err
		}
		w.product(e, m, a, za+shift, func(lo, hi int, c []int32) {
			for r := lo; r < hi; r++ {
				row := y.I64[r*w.n : (r+1)*w.n]
				for j, v := range c[(r-lo)*w.n : (r-lo+1)*w.n] {
					row[j] = int64(v)
				}
			}
		})
		return y, true, nil
	}
	override := map[int]func() *tensor.Tensor{st.In[1]: func() *tensor.Tensor { return w.tensor(false) }}
	return []int{i}, f.newFused("Int8MatMulInteger", []int{i}, ext, st.Out[0], fast, override), true
}

// packLayers packs every layer's weights and returns the suppliers that rebuild them, by
// slot, for the fused step's fallback.
func packLayers(p *Program, layers []*qLayer) map[int]func() *tensor.Tensor {
	override := map[int]func() *tensor.Tensor{}
	for _, l := range layers {
		l.pack(p)
		w, trans, ws := l.w, l.bTrans, l.wScale
		if l.dequant {
			override[l.bSlot] = func() *tensor.Tensor { return w.dequantized(trans, ws) }
		} else {
			override[l.bSlot] = func() *tensor.Tensor { return w.tensor(trans) }
		}
	}
	return override
}

// layerOuts returns the inner dimension k that a group of layers reading one input share,
// and their output slots; ok is false when their k differ (they cannot read one input).
func layerOuts(layers []*qLayer) (k int, outs []int, ok bool) {
	k = layers[0].k
	outs = make([]int, len(layers))
	for j, l := range layers {
		if l.k != k {
			return 0, nil, false
		}
		outs[j] = l.out
	}
	return k, outs, true
}
