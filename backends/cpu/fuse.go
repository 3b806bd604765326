package cpu

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Graph fusion, run once at compile time after constant folding.
//
// Three patterns are rewritten into single steps, and then linear steps that share their
// only input (an attention block's Q, K and V projections) are merged into one:
//
//   - linear: MatMul(x, W) with a constant 2-D W (a folded Transpose of the initializer, so
//     no per-run copy), then Add of a constant bias over the last axis, optionally followed
//     by Relu or by the exact GELU as zoo builds it (Mul(Mul(h, 0.5), Add(Erf(Div(h, √2)), 1)))
//     or as PyTorch exports it (Mul(Mul(h, Add(Erf(Div(h, √2)), 1)), 0.5)); or Gemm(x, W, b)
//     with a constant W (either orientation) and a constant bias row, as PyTorch exports the
//     attention output projection. The fused step runs the GEMM and applies bias and
//     activation to each output tile while it is in cache.
//   - attention: MatMul(Q, Kᵀ), then any chain of Div or Mul by a scalar constant and Add of
//     a mask bias (or Where(mask, s, const)), then Softmax over the last axis, then MatMul
//     with V. The fused step is the tiled online-softmax kernel of attention.go, which never
//     materialises the n×n score matrix. (A scale that PyTorch applies to Q before the
//     product joins the score ops when it is a power of two, see qScale; any other stays
//     the separate, cheap elementwise step it is.)
//   - permuted residual: Add of a run-time value and a Transpose that keeps the last axis,
//     optionally followed by LayerNormalization, as PyTorch's batch-first attention block
//     ends; one pass over rows reads the transposed rows in place.
//
// A pattern fuses only when every intermediate value has exactly one consumer and is not a
// graph output or kept intermediate, so fusion never changes what Run returns. Each fused
// step keeps the original steps it replaced and runs them instead whenever the run-time
// shapes fall outside what its fast path handles, so fusion never rejects a graph the
// unfused program accepts.

// Fusions reports the patterns fused at compile time and how often each was found:
// "linear", "linear+relu", "linear+gelu" (each also with "+residual" when an Add of
// another run-time value follows, and then "+layernorm" when a LayerNormalization of the
// sum follows), "matmul" (a product by a constant matrix with no bias) and "attention";
// "transpose+residual" (and "transpose+residual+layernorm") counts residual Adds of a
// transposed value, with the LayerNorm after them, run as one pass over rows;
// "shared-input" counts the groups of such linear steps (without a residual) that read the
// same value and run as one step, each layer still counted under its own kind; "layernorm"
// counts LayerNorms written out in elementary ops and recomposed into one step, "shape"
// Shape steps that read a Transpose's input instead of running it, and "split" linear steps
// whose output slices are written directly instead of copied out. It is empty when
// backends.Options.NoFusion was set or nothing matched.
func (p *Program) Fusions() map[string]int {
	out := make(map[string]int, len(p.fusions))
	for k, v := range p.fusions {
		out[k] = v
	}
	return out
}

// fuser holds the use counts of one fusion pass.
type fuser struct {
	p        *Program
	uses     []int // consumers per slot; outputs count as an extra (unfusable) use
	producer []int // step index that produces each slot, -1 otherwise
	consumer [][]int
	dead     []bool
	linears  []fusedLinear // fused linear steps whose only run-time input is x, in order
}

// fusedLinear is a fused linear step with no input besides x, scheduled at step index at.
type fusedLinear struct {
	at   int
	x    int
	spec *linearSpec
	st   step
}

func (p *Program) fuse() {
	p.shapesThroughTransposes()
	p.recomposeLayerNorms()
	readers, producer, output := p.stepGraph()
	f := &fuser{p: p, uses: make([]int, len(p.slots)), producer: producer, consumer: readers, dead: make([]bool, len(p.steps))}
	for s, rs := range readers {
		f.uses[s] = len(rs)
		if output[s] {
			f.uses[s] += 1 << 20
		}
	}
	replaced := map[int]step{} // index of a group's last step → the fused step
	for i := range p.steps {
		if f.dead[i] || p.steps[i].node.Op != "Softmax" {
			continue
		}
		if g, st, ok := f.matchAttention(i); ok {
			f.commit(g, st, replaced)
			p.fusions["attention"]++
		}
	}
	for i := range p.steps {
		if op := p.steps[i].node.Op; f.dead[i] || (op != "MatMul" && op != "Gemm") {
			continue
		}
		if g, st, kind, ok := f.matchLinear(i); ok {
			f.commit(g, st, replaced)
			p.fusions[kind]++
		}
	}
	// After the linears, so that a residual Add a linear step can absorb stays with it.
	for i := range p.steps {
		if f.dead[i] || p.steps[i].node.Op != "Add" {
			continue
		}
		if g, st, kind, ok := f.matchPermutedResidual(i); ok {
			f.commit(g, st, replaced)
			p.fusions[kind]++
		}
	}
	f.splitSlices(replaced)
	f.mergeSiblings(replaced)
	p.rebuild(replaced, f.dead)
}

// stepGraph returns, per slot, the steps that read it (once per input position), the step
// that produces it (-1 for none) and whether it is a graph output or a kept value.
func (p *Program) stepGraph() (readers [][]int, producer []int, output []bool) {
	readers, producer, output = make([][]int, len(p.slots)), make([]int, len(p.slots)), make([]bool, len(p.slots))
	for i := range producer {
		producer[i] = -1
	}
	for i, st := range p.steps {
		for _, s := range st.in {
			if s >= 0 {
				readers[s] = append(readers[s], i)
			}
		}
		for _, s := range st.out {
			if s >= 0 {
				producer[s] = i
			}
		}
	}
	for _, s := range p.outSlot {
		output[s] = true
	}
	return readers, producer, output
}

// rebuild sets p.steps to the steps in order with replace[i] in place of step i where it
// is set, and without step i where drop[i] holds (and no replacement is set).
func (p *Program) rebuild(replace map[int]step, drop []bool) {
	if len(replace) == 0 && !slices.Contains(drop, true) {
		return
	}
	steps := make([]step, 0, len(p.steps))
	for i, st := range p.steps {
		if r, ok := replace[i]; ok {
			steps = append(steps, r)
		} else if !drop[i] {
			steps = append(steps, st)
		}
	}
	p.steps = steps
}

// shapesThroughTransposes rewrites Shape(Transpose(x)) as a Shape of x that permutes the
// dimensions, and drops the Transpose when nothing else reads it. PyTorch's attention
// export transposes K's head split only to read its shape (the product reads another
// transpose of the same value), so that copy computed nothing anyone used. The rewritten
// step runs the Transpose after all when the permutation does not fit x's rank, so errors
// stay the same. Each rewrite counts as "shape" in Fusions.
func (p *Program) shapesThroughTransposes() {
	readers, _, output := p.stepGraph()
	drop := make([]bool, len(p.steps))
	for ti, tr := range p.steps {
		rawPerm, hasPerm := tr.node.IntList("perm")
		if tr.node.Op != "Transpose" || !hasPerm || len(tr.in) != 1 || tr.in[0] < 0 || len(tr.out) != 1 || tr.out[0] < 0 || output[tr.out[0]] {
			continue
		}
		rs := readers[tr.out[0]]
		if len(rs) == 0 {
			continue
		}
		onlyShapes := true
		for _, r := range rs {
			if p.steps[r].node.Op != "Shape" || len(p.steps[r].in) != 1 {
				onlyShapes = false
			}
		}
		if !onlyShapes {
			continue
		}
		for _, r := range rs {
			sh, tk, tn := p.steps[r], tr.k, tr.node
			p.steps[r].in = []int{tr.in[0]}
			p.steps[r].k = func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				x := in[0]
				var axes []int
				var err error
				if x != nil {
					axes, err = transposeAxes(rawPerm, true, len(x.Shape))
				}
				if x == nil || err != nil {
					t, err := e.call(tk, tn, in)
					if err != nil {
						return nil, fmt.Errorf("node %q (%s): %w", tn.Name, tn.Op, err)
					}
					return sh.k(e, t)
				}
				shape := make([]int, len(axes))
				for i, ax := range axes {
					shape[i] = x.Shape[ax]
				}
				return sh.k(e, []*tensor.Tensor{{DType: x.DType, Shape: shape}})
			}
			p.fusions["shape"]++
		}
		drop[ti] = true
	}
	p.rebuild(nil, drop)
}

// recomposeLayerNorms turns LayerNorm written out in elementary ops, as PyTorch exports it
// below opset 17 (the default of PyTorch 1.13 is 14),
//
//	μ = ReduceMean(x, [-1]); d = x − μ; v = ReduceMean(d², [-1])
//	y = d / √(v + ε) · γ + β      (γ, β constant vectors, ε a constant scalar)
//
// back into one LayerNormalization step (counted as "layernorm" in Fusions), which a linear
// layer before it can then take into its epilogue. The nine steps made nine passes over the
// activations and as many buffers. vec.LayerNorm rounds differently from the chain (it
// multiplies by 1/√(v + ε)), so results move in the last bits. When γ does not have x's
// last length at run time, the step runs the original chain.
func (p *Program) recomposeLayerNorms() {
	readers, _, output := p.stepGraph()
	constOf := func(s int) *tensor.Tensor {
		if s < 0 || p.kinds[s] != slotConst || p.consts[s] == nil || p.consts[s].DType != tensor.Float32 {
			return nil
		}
		return p.consts[s]
	}
	scalar := func(s int) (float32, bool) {
		if c := constOf(s); c != nil && len(c.F32) == 1 {
			return c.F32[0], true
		}
		return 0, false
	}
	// next returns the only reader of step i's single output when it is an op step of the
	// wanted kind with one output and two inputs (one for Sqrt and ReduceMean), and the output
	// is not a graph output; -1 otherwise.
	next := func(i int, op string) int {
		if len(p.steps[i].out) != 1 || p.steps[i].out[0] < 0 {
			return -1
		}
		o := p.steps[i].out[0]
		if output[o] || len(readers[o]) != 1 {
			return -1
		}
		arity := 2
		if op == "Sqrt" || op == "ReduceMean" {
			arity = 1
		}
		r := readers[o][0]
		if st := p.steps[r]; st.node.Op != op || len(st.out) != 1 || st.out[0] < 0 || len(st.in) != arity {
			return -1
		}
		return r
	}
	lastAxisMean := func(i int) bool {
		st := p.steps[i]
		axes, ok := st.node.IntList("axes")
		return st.node.Op == "ReduceMean" && len(st.in) == 1 && ok && len(axes) == 1 && axes[0] == -1 && st.node.Int("keepdims", 1) == 1
	}
	remove := make([]bool, len(p.steps))
	replace := map[int]step{}
	for r1 := range p.steps {
		if remove[r1] || !lastAxisMean(r1) {
			continue
		}
		x := p.steps[r1].in[0]
		sub := next(r1, "Sub")
		if sub < 0 || p.steps[sub].in[0] != x || p.steps[sub].in[1] != p.steps[r1].out[0] {
			continue
		}
		d := p.steps[sub].out[0]
		if output[d] || len(readers[d]) != 2 {
			continue
		}
		pw, dv := readers[d][0], readers[d][1]
		if p.steps[pw].node.Op != "Pow" {
			pw, dv = dv, pw
		}
		if p.steps[pw].node.Op != "Pow" || p.steps[dv].node.Op != "Div" || len(p.steps[pw].in) != 2 || len(p.steps[dv].in) != 2 ||
			len(p.steps[pw].out) != 1 || len(p.steps[dv].out) != 1 || p.steps[pw].in[0] != d || p.steps[dv].in[0] != d {
			continue
		}
		if e, ok := scalar(p.steps[pw].in[1]); !ok || e != 2 {
			continue
		}
		r2 := next(pw, "ReduceMean")
		if r2 < 0 || !lastAxisMean(r2) {
			continue
		}
		addEps := next(r2, "Add")
		if addEps < 0 {
			continue
		}
		epsSlot, _, _ := p.otherInput(addEps, p.steps[r2].out[0])
		eps, ok := scalar(epsSlot)
		if !ok {
			continue
		}
		sq := next(addEps, "Sqrt")
		if sq < 0 || next(sq, "Div") != dv || p.steps[dv].in[1] != p.steps[sq].out[0] {
			continue
		}
		mul := next(dv, "Mul")
		if mul < 0 {
			continue
		}
		gs, _, _ := p.otherInput(mul, p.steps[dv].out[0])
		add := next(mul, "Add")
		if add < 0 {
			continue
		}
		bs, _, _ := p.otherInput(add, p.steps[mul].out[0])
		gamma, beta := constOf(gs), constOf(bs)
		if gamma == nil || beta == nil || len(gamma.Shape) != 1 || !tensor.SameShape(gamma.Shape, beta.Shape) || gamma.Shape[0] < 2 {
			continue
		}
		group := []int{r1, sub, pw, r2, addEps, sq, dv, mul, add}
		chain := make([]step, len(group))
		for j, i := range group {
			chain[j] = p.steps[i]
			remove[i] = true
		}
		last := p.steps[add]
		node := &graph.Node{Op: "LayerNormalization", Name: last.node.Name, Inputs: []string{p.slots[x], p.slots[gs], p.slots[bs]},
			Outputs: []string{p.slots[last.out[0]]}, Attrs: graph.Attrs{"axis": graph.Int(-1), "epsilon": graph.Float(eps)}}
		lnk, err := makeLayerNorm(node)
		if err != nil {
			continue
		}
		fb := &fallback{ext: []int{x, gs, bs}, out: last.out[0], sub: chain, consts: p.constInputs(chain, nil)}
		n := gamma.Shape[0]
		k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if x := in[0]; x != nil && x.DType == tensor.Float32 && len(x.Shape) > 0 && x.Shape[len(x.Shape)-1] == n {
				return lnk(e, in)
			}
			return fb.run(e, in)
		}
		replace[add] = step{node: node, k: k, in: []int{x, gs, bs}, out: []int{last.out[0]}}
		p.fusions["layernorm"]++
	}
	p.rebuild(replace, remove)
}

// commit marks the group's steps dead and schedules the fused step at the group's last
// position (where every external input is already computed).
func (f *fuser) commit(group []int, st step, replaced map[int]step) {
	last := 0
	for _, i := range group {
		f.dead[i] = true
		last = max(last, i)
	}
	replaced[last] = st
}

// single reports whether slot s is a run-time value read by exactly one step (and is not an
// output), returning that step.
func (f *fuser) single(s int) (int, bool) {
	if s < 0 || f.p.kinds[s] != slotNode || f.uses[s] != 1 {
		return -1, false
	}
	c := f.consumer[s][0]
	return c, !f.dead[c]
}

// constF32 returns the constant float32 tensor in slot s, or nil.
func (f *fuser) constF32(s int) *tensor.Tensor {
	if s < 0 || f.p.kinds[s] != slotConst {
		return nil
	}
	t := f.p.consts[s]
	if t == nil || t.DType != tensor.Float32 {
		return nil
	}
	return t
}

// scalarConst returns the value of a one-element constant float32 slot.
func (f *fuser) scalarConst(s int) (float32, bool) {
	t := f.constF32(s)
	if t == nil || len(t.F32) != 1 {
		return 0, false
	}
	return t.F32[0], true
}

// otherInput returns the input of binary step i (one output) that is not slot s, whether s
// is input 0, and whether s is an input at all.
func (p *Program) otherInput(i, s int) (int, bool, bool) {
	in := p.steps[i].in
	if len(in) != 2 || len(p.steps[i].out) != 1 {
		return -1, false, false
	}
	switch s {
	case in[0]:
		return in[1], true, true
	case in[1]:
		return in[0], false, true
	}
	return -1, false, false
}

// outOf returns the single output slot of step i.
func (f *fuser) outOf(i int) int {
	if len(f.p.steps[i].out) != 1 {
		return -1
	}
	return f.p.steps[i].out[0]
}

// newFused builds the fused step for group: its external inputs are ext (in order), its
// output is out, and it falls back to the group's own steps.
func (f *fuser) newFused(op string, group []int, ext []int, out int, fast fastKernel, override map[int]func() *tensor.Tensor) step {
	sort.Ints(group)
	sub := make([]step, len(group))
	for j, i := range group {
		sub[j] = f.p.steps[i]
	}
	last := f.p.steps[group[len(group)-1]].node
	node := &graph.Node{Op: op, Name: last.Name, Inputs: make([]string, len(ext)), Outputs: []string{f.p.slots[out]}}
	for j, s := range ext {
		node.Inputs[j] = f.p.slots[s]
	}
	fb := &fallback{ext: ext, out: out, sub: sub, consts: f.p.constInputs(sub, override)}
	k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if t, ok, err := fast(e, in); ok || err != nil {
			return []*tensor.Tensor{t}, err
		}
		return fb.run(e, in)
	}
	return step{node: node, k: k, in: append([]int(nil), ext...), out: []int{out}}
}

// fastKernel is a fused fast path: it returns ok false (and no error) when the run-time
// shapes are outside what it handles, and the fused step then runs the original steps.
type fastKernel func(e *exec, in []*tensor.Tensor) (out *tensor.Tensor, ok bool, err error)

// fallback re-runs the steps a fused step replaced. consts supplies the constant inputs of
// those steps: the compiled program drops every constant no step of its own reads, and a
// large one (a layer's weights) is better rebuilt from its packed copy on the rare run that
// needs it than kept twice.
type fallback struct {
	ext    []int
	out    int
	sub    []step
	consts map[int]func() *tensor.Tensor
}

// constInputs returns a supplier for every constant slot the steps read: the tensor itself,
// or override's supplier where it has one.
func (p *Program) constInputs(sub []step, override map[int]func() *tensor.Tensor) map[int]func() *tensor.Tensor {
	out := map[int]func() *tensor.Tensor{}
	for _, st := range sub {
		for _, s := range st.in {
			if s < 0 || p.kinds[s] != slotConst || out[s] != nil {
				continue
			}
			if o := override[s]; o != nil {
				out[s] = o
			} else {
				t := p.consts[s]
				out[s] = func() *tensor.Tensor { return t }
			}
		}
	}
	return out
}

func (fb *fallback) run(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	vals := make(map[int]*tensor.Tensor, len(fb.ext)+len(fb.sub))
	for j, s := range fb.ext {
		vals[s] = in[j]
	}
	for _, st := range fb.sub {
		ins := make([]*tensor.Tensor, len(st.in))
		for j, s := range st.in {
			if s < 0 {
				continue
			}
			if _, ok := vals[s]; !ok && fb.consts[s] != nil {
				vals[s] = fb.consts[s]()
			}
			ins[j] = vals[s]
		}
		res, err := e.call(st.k, st.node, ins)
		if err != nil {
			return nil, fmt.Errorf("node %q (%s): %w", st.node.Name, st.node.Op, err)
		}
		for j, s := range st.out {
			if s >= 0 && j < len(res) {
				vals[s] = res[j]
			}
		}
	}
	return []*tensor.Tensor{vals[fb.out]}, nil
}

// ---- linear ----

// matchLinear matches MatMul(x, W) [+ b [+ activation] [+ residual] [→ LayerNorm]] starting
// at MatMul step i, W a constant matrix, or the same after Gemm(x, W, b) (the form PyTorch
// exports a linear layer of a 2-D input in: transB set, the bias as C).
func (f *fuser) matchLinear(i int) (group []int, st step, kind string, ok bool) {
	p := f.p
	mm := p.steps[i]
	if len(mm.in) < 2 || mm.in[0] < 0 || p.kinds[mm.in[0]] == slotConst {
		return nil, step{}, "", false
	}
	w := f.constF32(mm.in[1])
	if w == nil || len(w.Shape) != 2 {
		return nil, step{}, "", false
	}
	a := f.outOf(i)
	if a < 0 {
		return nil, step{}, "", false
	}
	var (
		b      *tensor.Tensor // the bias, a constant
		addI   = -1           // the step of the bias Add, or -1 for Gemm's own C
		transB bool
		rank2  bool
	)
	switch mm.node.Op {
	case "MatMul":
		if len(mm.in) != 2 {
			return nil, step{}, "", false
		}
		if c, ok := f.single(a); ok && p.steps[c].node.Op == "Add" {
			bs, _, _ := f.p.otherInput(c, a)
			if b = f.constF32(bs); b != nil {
				addI = c
			}
		}
	case "Gemm":
		// op(A) must be A itself and alpha 1; C, when beta keeps it, must be a constant row
		// broadcast over the rows, which the epilogue then adds as the bias (the sum is
		// rounded once either way, though not in the same k order as Gemm's accumulation
		// onto C, so results may differ from the unfused Gemm in the last bit).
		nd := mm.node
		if nd.Int("transA", 0) != 0 || nd.Float("alpha", 1) != 1 || len(mm.in) > 3 {
			return nil, step{}, "", false
		}
		transB, rank2 = nd.Int("transB", 0) != 0, true
		if len(mm.in) == 3 && mm.in[2] >= 0 && nd.Float("beta", 1) != 0 {
			if b = f.constF32(mm.in[2]); b == nil || nd.Float("beta", 1) != 1 || len(b.Shape) > 2 || (len(b.Shape) == 2 && b.Shape[0] != 1) {
				return nil, step{}, "", false
			}
		}
	default:
		return nil, step{}, "", false
	}
	k, n := w.Shape[0], w.Shape[1]
	if transB {
		k, n = n, k
	}
	// Without a bias after it the product alone still fuses ("matmul"): it gains the weights
	// packed once (a bias-free projection, or a plain MatMul by a constant in an imported
	// graph), and nothing else joins it.
	group, ext, out := []int{i}, []int{mm.in[0]}, a
	kind = "matmul"
	act, bias, bRank := actNone, []float32(nil), 0
	var ln *lnEpilogue
	if b != nil && (addI < 0 || len(b.Shape) > 0) && len(b.F32) == n && (len(b.Shape) == 0 || b.Shape[len(b.Shape)-1] == n) {
		if addI >= 0 {
			group = append(group, addI)
			out = f.outOf(addI)
		}
		bias, bRank, kind = b.F32, len(b.Shape), "linear"
		if g2, o2, a2, ok := f.matchActivation(out); ok {
			group = append(group, g2...)
			out, act = o2, a2
			kind = map[activation]string{actRelu: "linear+relu", actGelu: "linear+gelu"}[a2]
		}
	} else if b != nil && addI < 0 {
		return nil, step{}, "", false // a Gemm whose C is not a row of n values
	}
	if bias != nil {
		// A residual Add of a run-time value read by nothing else joins the epilogue (the
		// fast path checks at run time that it has the output's shape).
		if c, ok := f.single(out); ok && p.steps[c].node.Op == "Add" {
			if r, _, ok := f.p.otherInput(c, out); ok && r >= 0 && r != out && p.kinds[r] != slotConst {
				group = append(group, c)
				ext = append(ext, r)
				out = f.outOf(c)
				kind += "+residual"
			}
		}
		// A LayerNormalization of the result over its last axis (the post-norm after a
		// residual block), with constant parameters and read by nothing else, joins as well:
		// rows are normalised in the epilogue while the tile is still in cache.
		if g2, o2, l, ok := f.matchLayerNorm(out, n); ok {
			group = append(group, g2)
			out, ln = o2, l
			kind += "+layernorm"
		}
	}
	// W is packed once here, in the SGEMM micro-kernel layout, so no run packs it again.
	spec := &linearSpec{pw: gemm.PackB(transB, k, n, w.F32, w.Shape[1]), bias: bias, bRank: bRank, act: act, ln: ln, rank2: rank2}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		var res *tensor.Tensor
		if len(in) > 1 {
			res = in[1]
		}
		return linearFast(e, in[0], spec, res)
	}
	// The unfused steps get W back from the packed copy, in the orientation they read it.
	wShape := append([]int(nil), w.Shape...)
	unpackW := func() *tensor.Tensor {
		v := spec.pw.Unpack() // k×n
		if transB {
			t := make([]float32, len(v))
			for p := 0; p < k; p++ {
				for j := 0; j < n; j++ {
					t[j*k+p] = v[p*n+j]
				}
			}
			v = t
		}
		return &tensor.Tensor{DType: tensor.Float32, Shape: wShape, F32: v}
	}
	st = f.newFused("FusedLinear", group, ext, out, fast, map[int]func() *tensor.Tensor{mm.in[1]: unpackW})
	if len(ext) == 1 {
		f.linears = append(f.linears, fusedLinear{at: slices.Max(group), x: ext[0], spec: spec, st: st})
	}
	return group, st, kind, true
}

// splitSlices turns a fused linear step (no residual, no LayerNorm) whose output is read
// only by Slice steps, as their data, and by Shape steps into one step that writes the
// slices directly (linearSplitFast): PyTorch's attention computes Q, K and V as one
// product and slices them apart, three copies of the activations per layer. The Shape
// steps read x instead, their answer being x's shape with the last axis n wide. The step
// runs where the last Slice was, when all slice bounds (run-time values in PyTorch's
// export) are known; when they are not a plain slice of the last axis at run time, it runs
// the layer and the Slices as before. Each such step counts as "split" in Fusions.
func (f *fuser) splitSlices(replaced map[int]step) {
	p := f.p
	kept := f.linears[:0]
	for _, l := range f.linears {
		o := l.st.out[0]
		var cuts, shapes []int
		ok := l.spec.ln == nil && f.uses[o] == len(f.consumer[o])
		for _, c := range f.consumer[o] {
			st := p.steps[c]
			switch {
			case f.dead[c]:
				ok = false
			case st.node.Op == "Slice" && len(st.in) >= 3 && len(st.in) <= 5 && len(st.out) == 1 && st.out[0] >= 0 && st.in[0] == o && !slices.Contains(st.in[1:], o):
				cuts = append(cuts, c)
			case st.node.Op == "Shape" && len(st.in) == 1:
				shapes = append(shapes, c)
			default:
				ok = false
			}
		}
		// The step runs where the last Slice was: every reader of a slice must come later.
		last := 0
		for _, c := range cuts {
			last = max(last, c)
		}
		for _, c := range cuts {
			for _, r := range f.consumer[p.steps[c].out[0]] {
				ok = ok && r > last
			}
		}
		if !ok || len(cuts) == 0 {
			kept = append(kept, l)
			continue
		}
		n := l.spec.pw.N()
		for _, c := range shapes {
			sh := p.steps[c]
			p.steps[c].in = []int{l.x}
			p.steps[c].k = func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				x := in[0]
				if x == nil || len(x.Shape) == 0 {
					return nil, fmt.Errorf("the input of the product %q has no axes", l.st.node.Name)
				}
				shape := append(append([]int{}, x.Shape[:len(x.Shape)-1]...), n)
				return sh.k(e, []*tensor.Tensor{{DType: tensor.Float32, Shape: shape}})
			}
		}
		// ext: x, then each Slice's starts, ends, axes and steps (-1 when absent).
		ext, outs := []int{l.x}, make([]int, len(cuts))
		subs := make([]step, len(cuts))
		at := 0
		for i, c := range cuts {
			st := p.steps[c]
			for j := 1; j <= 4; j++ {
				if j < len(st.in) {
					ext = append(ext, st.in[j])
				} else {
					ext = append(ext, -1)
				}
			}
			outs[i], subs[i] = st.out[0], st
			f.dead[c] = true
			at = max(at, c)
		}
		delete(replaced, l.at)
		lin, spec := l.st, l.spec
		k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x := in[0]
			if x != nil {
				cols := make([][2]int, len(subs))
				fast := true
				for i := range subs {
					lo, hi, ok := lastAxisSlice(in[1+4*i:5+4*i], len(x.Shape), n)
					fast = fast && ok
					cols[i] = [2]int{lo, hi}
				}
				if fast {
					if ts, ok, err := linearSplitFast(e, x, spec, cols); ok || err != nil {
						return ts, err
					}
				}
			}
			full, err := e.call(lin.k, lin.node, in[:1])
			if err != nil {
				return nil, fmt.Errorf("node %q (%s): %w", lin.node.Name, lin.node.Op, err)
			}
			ts := make([]*tensor.Tensor, len(subs))
			for i, sub := range subs {
				args := append([]*tensor.Tensor{full[0]}, in[1+4*i:1+4*i+len(sub.in)-1]...)
				r, err := e.call(sub.k, sub.node, args)
				if err != nil {
					return nil, fmt.Errorf("node %q (%s): %w", sub.node.Name, sub.node.Op, err)
				}
				ts[i] = r[0]
			}
			return ts, nil
		}
		names := make([]string, len(outs))
		for i, s := range outs {
			names[i] = p.slots[s]
		}
		inNames := make([]string, len(ext))
		for i, s := range ext {
			if s >= 0 {
				inNames[i] = p.slots[s]
			}
		}
		node := &graph.Node{Op: "FusedLinearSplit", Name: lin.node.Name, Inputs: inNames, Outputs: names}
		replaced[at] = step{node: node, k: k, in: ext, out: outs}
		p.fusions["split"]++
	}
	f.linears = kept
}

// lastAxisSlice reads a Slice's starts, ends, axes and steps (nil when absent) for an input
// of rank r whose last axis is n long, and returns the half-open range it takes when it is
// a plain slice of that axis (one axis, the last, step 1), with ONNX's clamping of the
// bounds; ok is false for anything else.
func lastAxisSlice(args []*tensor.Tensor, r, n int) (lo, hi int, ok bool) {
	one := func(t *tensor.Tensor, what string) (int64, bool) {
		if t == nil {
			return 0, false
		}
		v, err := shapeArg(t, what)
		if err != nil || len(v) != 1 {
			return 0, false
		}
		return v[0], true
	}
	s, ok1 := one(args[0], "starts")
	e, ok2 := one(args[1], "ends")
	a, ok3 := one(args[2], "axes")
	if !ok1 || !ok2 || !ok3 || (a != -1 && a != int64(r-1)) {
		return 0, 0, false
	}
	if args[3] != nil {
		if st, ok := one(args[3], "steps"); !ok || st != 1 {
			return 0, 0, false
		}
	}
	first, count := graph.SliceBound(s, e, 1, int64(n))
	return int(first), int(first + count), true
}

// mergeSiblings turns fused linear steps that read the same run-time value and nothing else
// (an attention block's Q, K and V projections) into one step with one output per layer,
// run by linearsFast, scheduled where the first of them was (its only input is ready
// there, and the others' outputs may be made earlier than before). When the fast path
// does not apply at run time, the merged step runs each layer's own fused step.
func (f *fuser) mergeSiblings(replaced map[int]step) {
	byX := map[int][]fusedLinear{}
	var order []int
	for _, l := range f.linears {
		if len(byX[l.x]) == 0 {
			order = append(order, l.x)
		}
		byX[l.x] = append(byX[l.x], l)
	}
	for _, x := range order {
		group := byX[x]
		if len(group) < 2 {
			continue
		}
		specs := make([]*linearSpec, len(group))
		subs := make([]step, len(group))
		outs := make([]int, len(group))
		names := make([]string, len(group))
		at := group[0].at
		for i, l := range group {
			specs[i], subs[i], outs[i], names[i] = l.spec, l.st, l.st.out[0], l.st.node.Outputs[0]
			delete(replaced, l.at)
			at = min(at, l.at)
		}
		k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if ts, ok, err := linearsFast(e, in[0], specs); ok || err != nil {
				return ts, err
			}
			ts := make([]*tensor.Tensor, len(subs))
			for i, sub := range subs {
				r, err := e.call(sub.k, sub.node, in)
				if err != nil {
					return nil, fmt.Errorf("node %q (%s): %w", sub.node.Name, sub.node.Op, err)
				}
				ts[i] = r[0]
			}
			return ts, nil
		}
		first := group[0].st.node
		node := &graph.Node{Op: "FusedLinears", Name: first.Name, Inputs: first.Inputs, Outputs: names}
		replaced[at] = step{node: node, k: k, in: []int{x}, out: outs}
		f.p.fusions["shared-input"]++
	}
}

// lnEpilogue is a LayerNormalization over the last axis fused into a linear step.
type lnEpilogue struct {
	scale, bias []float32 // bias may be nil
	eps         float32
}

// matchLayerNorm matches LayerNormalization(h, scale[, bias]) over the last axis of h (n
// wide) with constant parameters of length n and only its Y output, h read by nothing else.
func (f *fuser) matchLayerNorm(h, n int) (step int, out int, ln *lnEpilogue, ok bool) {
	p := f.p
	c, ok := f.single(h)
	if !ok {
		return -1, -1, nil, false
	}
	st := p.steps[c]
	if st.node.Op != "LayerNormalization" || st.node.Int("axis", -1) != -1 || len(st.out) != 1 ||
		len(st.in) < 2 || st.in[0] != h {
		return -1, -1, nil, false
	}
	scale := f.constF32(st.in[1])
	if scale == nil || len(scale.F32) != n {
		return -1, -1, nil, false
	}
	ln = &lnEpilogue{scale: scale.F32, eps: st.node.Float("epsilon", 1e-5)}
	if len(st.in) > 2 && st.in[2] >= 0 {
		bias := f.constF32(st.in[2])
		if bias == nil || len(bias.F32) != n {
			return -1, -1, nil, false
		}
		ln.bias = bias.F32
	}
	return c, st.out[0], ln, true
}

// ---- permuted residual ----

// matchPermutedResidual matches Add(Transpose(y), r), in either operand order, where the
// Transpose (or a chain of them) keeps the last axis in place and is read by nothing else,
// optionally followed by a LayerNormalization of the sum over the last axis with constant
// parameters. PyTorch's batch-first attention block ends this way at batch > 1: the output
// projection, a Reshape to (n, b, d), a Transpose back to (b, n, d), the residual Add and
// norm1. The fused step (permResidual) reads y's rows through the permutation instead of
// copying them, and adds and normalises each row while it is in cache.
func (f *fuser) matchPermutedResidual(i int) (group []int, st step, kind string, ok bool) {
	p := f.p
	add := p.steps[i]
	if len(add.in) != 2 || len(add.out) != 1 || add.out[0] < 0 {
		return nil, step{}, "", false
	}
	for side := 0; side < 2; side++ {
		t, r := add.in[side], add.in[1-side]
		if t < 0 || r < 0 {
			continue
		}
		y, perm, tsteps := f.walkTransposes(t)
		if len(tsteps) == 0 || !keepsLastAxis(perm) {
			continue
		}
		group = append(append([]int{}, tsteps...), i)
		out := add.out[0]
		kind = "transpose+residual"
		pr := &permResidual{perm: perm, tFirst: side == 0}
		if c, ok := f.single(out); ok && p.steps[c].node.Op == "LayerNormalization" && len(p.steps[c].in) >= 2 {
			if scale := f.constF32(p.steps[c].in[1]); scale != nil {
				if ls, lout, ln, ok := f.matchLayerNorm(out, len(scale.F32)); ok {
					group, out, pr.ln = append(group, ls), lout, ln
					kind += "+layernorm"
				}
			}
		}
		return group, f.newFused("FusedPermutedResidual", group, []int{y, r}, out, pr.run, nil), kind, true
	}
	return nil, step{}, "", false
}

// keepsLastAxis reports whether perm is a permutation of 0…r−1 (r ≥ 2) that leaves the last
// axis last, so that it moves whole rows.
func keepsLastAxis(perm []int) bool {
	r := len(perm)
	if r < 2 || perm[r-1] != r-1 {
		return false
	}
	seen := make([]bool, r)
	for _, ax := range perm {
		if ax < 0 || ax >= r || seen[ax] {
			return false
		}
		seen[ax] = true
	}
	return true
}

// activation is the epilogue of a fused linear step.
type activation uint8

const (
	actNone activation = iota
	actRelu
	actGelu
)

// matchActivation matches Relu(h) or one of the two exact-GELU subgraphs reading h.
func (f *fuser) matchActivation(h int) (group []int, out int, act activation, ok bool) {
	p := f.p
	if h < 0 || p.kinds[h] != slotNode || f.uses[h] > 2 {
		return nil, -1, 0, false
	}
	if c, ok := f.single(h); ok && p.steps[c].node.Op == "Relu" {
		return []int{c}, f.outOf(c), actRelu, true
	}
	if f.uses[h] != 2 {
		return nil, -1, 0, false
	}
	// Both GELU forms read h twice: Div(h, √2) → Erf → Add(·, 1), and a Mul.
	var div, mulH = -1, -1
	for _, c := range f.consumer[h] {
		switch p.steps[c].node.Op {
		case "Div":
			div = c
		case "Mul":
			mulH = c
		}
	}
	if div < 0 || mulH < 0 || p.steps[div].in[0] != h {
		return nil, -1, 0, false
	}
	if v, ok := f.scalarConst(p.steps[div].in[1]); !ok || v != float32(math.Sqrt2) {
		return nil, -1, 0, false
	}
	erf, ok := f.single(f.outOf(div))
	if !ok || p.steps[erf].node.Op != "Erf" {
		return nil, -1, 0, false
	}
	add1, ok := f.single(f.outOf(erf))
	if !ok || p.steps[add1].node.Op != "Add" {
		return nil, -1, 0, false
	}
	if o, _, ok := f.p.otherInput(add1, f.outOf(erf)); !ok {
		return nil, -1, 0, false
	} else if v, ok := f.scalarConst(o); !ok || v != 1 {
		return nil, -1, 0, false
	}
	mo, _, ok := f.p.otherInput(mulH, h)
	if !ok {
		return nil, -1, 0, false
	}
	final := -1
	if v, ok := f.scalarConst(mo); ok && v == 0.5 {
		// zoo: Mul(Mul(h, 0.5), Add(erf, 1))
		m1, ok1 := f.single(f.outOf(mulH))
		m2, ok2 := f.single(f.outOf(add1))
		if !ok1 || !ok2 || m1 != m2 || p.steps[m1].node.Op != "Mul" {
			return nil, -1, 0, false
		}
		final = m1
	} else if mo == f.outOf(add1) {
		// PyTorch: Mul(Mul(h, Add(erf, 1)), 0.5)
		m2, ok := f.single(f.outOf(mulH))
		if !ok || p.steps[m2].node.Op != "Mul" {
			return nil, -1, 0, false
		}
		if o, _, ok := f.p.otherInput(m2, f.outOf(mulH)); !ok {
			return nil, -1, 0, false
		} else if v, ok := f.scalarConst(o); !ok || v != 0.5 {
			return nil, -1, 0, false
		}
		final = m2
	} else {
		return nil, -1, 0, false
	}
	return []int{div, erf, add1, mulH, final}, f.outOf(final), actGelu, true
}

// ---- attention ----

// scoreOp is one elementwise step between the score product and the softmax.
type scoreOp struct {
	kind  byte    // '/', '*', '+' (add operand), 'w' (Where(cond, s, c)), 'W' (Where(cond, c, s))
	c     float32 // the scalar for '/', '*' and Where's constant
	input int     // index of the operand among the fused step's inputs ('+', 'w', 'W')
}

// divOp is the score op for a division by c: a multiplication by 1/c when that is a power of
// two whose reciprocal is a normal float32 (√64 = 8 for the usual head size), since x·2⁻ᵏ
// and x/2ᵏ are the same real number and so round to the same float32, subnormals included;
// a vector multiply costs a fraction of a divide. The division was 7 % of the fused block's
// profile; interleaved A/B, 8 heads of 64, 2 threads: n = 128 and 512 ran 2.2-2.4 % faster,
// n = 2048 6 %.
func divOp(c float32) scoreOp {
	if frac, exp := math.Frexp(float64(c)); frac == 0.5 && exp-1 > -126 && exp-1 < 126 {
		return scoreOp{kind: '*', c: 1 / c}
	}
	return scoreOp{kind: '/', c: c}
}

// matchAttention matches MatMul(Q, Kᵀ) → scalar/mask chain → Softmax(-1) → MatMul(·, V)
// around the Softmax step sm.
func (f *fuser) matchAttention(sm int) (group []int, st step, ok bool) {
	p := f.p
	if p.steps[sm].node.Int("axis", -1) != -1 || len(p.steps[sm].in) != 1 {
		return nil, step{}, false
	}
	pv, ok := f.single(f.outOf(sm))
	if !ok || p.steps[pv].node.Op != "MatMul" || p.steps[pv].in[0] != f.outOf(sm) {
		return nil, step{}, false
	}
	ops, operands, steps, q, kt, ok := f.walkScores(p.steps[sm].in[0], sm, 0)
	if !ok {
		return nil, step{}, false
	}
	group = append([]int{sm, pv}, steps...)
	if x, c, si, ok := f.qScale(q); ok {
		ops = append([]scoreOp{{kind: '*', c: c}}, ops...)
		group = append(group, si)
		q = x
	}
	// Head splits and merges around the products (Transpose steps) are absorbed: the fast
	// path reads Q, K and V and writes the output through strides instead of copies.
	var perms [3][]int
	srcs := []int{q, kt, p.steps[pv].in[1]}
	for j, s := range srcs {
		src, perm, tsteps := f.walkTransposes(s)
		srcs[j], perms[j] = src, perm
		group = append(group, tsteps...)
	}
	out := f.outOf(pv)
	var outPerm []int
	if c, ok := f.single(out); ok && p.steps[c].node.Op == "Transpose" && len(p.steps[c].out) == 1 && transposePerm(p.steps[c].node) != nil {
		outPerm = transposePerm(p.steps[c].node)
		group = append(group, c)
		out = f.outOf(c)
	}
	ext := append(srcs, operands...)
	for j := range ops {
		ops[j].input += 3
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		return attentionFast(e, in, ops, perms, outPerm)
	}
	return group, f.newFused("FusedAttention", group, ext, out, fast, nil), true
}

// qScale recognises Q = x / c or x · c with c a power of two (PyTorch scales Q by 1/√dk
// before the product, and √64 = 8), Q read only by the product, and returns x, the factor
// and the scaling step. Scaling Q by a power of two scales every product and partial sum of
// Q·Kᵀ exactly, so the factor can as well be applied to the scores, and the scaled copy of
// Q (and the head split copied into it) disappears. The two orders differ only when a
// scaled value falls into the subnormal range. Other factors stay the separate step.
func (f *fuser) qScale(q int) (x int, c float32, step int, ok bool) {
	p := f.p
	pi := f.producer[q]
	if pi < 0 || f.dead[pi] || len(p.steps[pi].in) != 2 {
		return -1, 0, -1, false
	}
	if _, ok := f.single(q); !ok {
		return -1, 0, -1, false
	}
	in := p.steps[pi].in
	switch p.steps[pi].node.Op {
	case "Div":
		if v, ok := f.scalarConst(in[1]); ok && in[0] >= 0 {
			if op := divOp(v); op.kind == '*' {
				return in[0], op.c, pi, true
			}
		}
	case "Mul":
		for j := 0; j < 2; j++ {
			if v, ok := f.scalarConst(in[j]); ok && in[1-j] >= 0 && p.kinds[in[1-j]] != slotConst {
				if op := divOp(1 / v); op.kind == '*' && op.c == v {
					return in[1-j], v, pi, true
				}
			}
		}
	}
	return -1, 0, -1, false
}

// walkTransposes follows slot s back through Transpose steps whose output only the next
// step of the chain reads, returning the first slot that is not such an output, the
// composed permutation (axis i of s is axis perm[i] of src; nil when no step was walked)
// and the steps walked.
func (f *fuser) walkTransposes(s int) (src int, perm []int, steps []int) {
	p := f.p
	for depth := 0; depth < 4; depth++ {
		pi := f.producer[s]
		if pi < 0 || f.dead[pi] || p.steps[pi].node.Op != "Transpose" || len(p.steps[pi].in) != 1 || p.steps[pi].in[0] < 0 {
			break
		}
		if _, ok := f.single(s); !ok {
			break
		}
		tp := transposePerm(p.steps[pi].node)
		if tp == nil || (perm != nil && len(tp) != len(perm)) {
			break
		}
		if perm == nil {
			perm = make([]int, len(tp))
			for i := range perm {
				perm[i] = i
			}
		}
		for i := range perm {
			perm[i] = tp[perm[i]]
		}
		steps = append(steps, pi)
		s = p.steps[pi].in[0]
	}
	return s, perm, steps
}

// transposePerm returns the perm attribute of a Transpose node, or nil when it is absent
// (the reversal, whose rank is only known at run time).
func transposePerm(n *graph.Node) []int {
	perm, ok := n.IntList("perm")
	if !ok {
		return nil
	}
	out := make([]int, len(perm))
	for i, v := range perm {
		out[i] = int(v)
	}
	return out
}

// walkScores follows the score value cur (read only by step next) back to the score
// MatMul, returning the elementwise ops in graph order, their tensor operands (op.input
// indexes operands), the steps walked, and the MatMul's Q and Kᵀ slots. An Add of two
// run-time values is tried both ways, since either may be the scores (PyTorch scales the
// mask too, so both sides can be single-use Muls).
func (f *fuser) walkScores(cur, next, depth int) (ops []scoreOp, operands, steps []int, q, kt int, ok bool) {
	p := f.p
	if depth > 8 {
		return nil, nil, nil, 0, 0, false
	}
	if c, ok := f.single(cur); !ok || c != next {
		return nil, nil, nil, 0, 0, false
	}
	pi := f.producer[cur]
	if pi < 0 || f.dead[pi] || len(p.steps[pi].out) != 1 {
		return nil, nil, nil, 0, 0, false
	}
	ps := p.steps[pi]
	// try continues the walk at chain value ch with op applied after it.
	try := func(ch int, op scoreOp, operand int) ([]scoreOp, []int, []int, int, int, bool) {
		o, ops2, st2, q, kt, ok := f.walkScores(ch, pi, depth+1)
		if !ok {
			return nil, nil, nil, 0, 0, false
		}
		if operand >= 0 {
			op.input = len(ops2)
			ops2 = append(ops2, operand)
		}
		return append(o, op), ops2, append(st2, pi), q, kt, true
	}
	switch ps.node.Op {
	case "MatMul":
		if len(ps.in) != 2 || ps.in[0] < 0 || ps.in[1] < 0 {
			break
		}
		return nil, nil, []int{pi}, ps.in[0], ps.in[1], true
	case "Div":
		if v, ok := f.scalarConst(ps.in[1]); ok {
			return try(ps.in[0], divOp(v), -1)
		}
	case "Mul":
		if v, ok := f.scalarConst(ps.in[1]); ok {
			return try(ps.in[0], scoreOp{kind: '*', c: v}, -1)
		}
		if v, ok := f.scalarConst(ps.in[0]); ok {
			return try(ps.in[1], scoreOp{kind: '*', c: v}, -1)
		}
	case "Add":
		for j := 0; j < 2; j++ {
			if o, ops2, st2, q, kt, ok := try(ps.in[j], scoreOp{kind: '+'}, ps.in[1-j]); ok {
				return o, ops2, st2, q, kt, true
			}
		}
	case "Where":
		if len(ps.in) != 3 {
			break
		}
		if v, ok := f.scalarConst(ps.in[2]); ok {
			return try(ps.in[1], scoreOp{kind: 'w', c: v}, ps.in[0])
		}
		if v, ok := f.scalarConst(ps.in[1]); ok {
			return try(ps.in[2], scoreOp{kind: 'W', c: v}, ps.in[0])
		}
	}
	return nil, nil, nil, 0, 0, false
}
