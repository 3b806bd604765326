package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// matchLinear matches MatMul(x, W) [+ b [+ activation] [+ residual] [→ LayerNorm]] starting
// at MatMul step i, W a constant matrix, or the same after Gemm(x, W, b) (the form PyTorch
// exports a linear layer of a 2-D input in: transB set, the bias as C).
func (f *fuser) matchLinear(i int) (group []int, st step, kind string, ok bool) {
	p := f.p
	mm := p.plan.Steps[i]
	if len(mm.In) < 2 || mm.In[0] < 0 || p.plan.Kinds[mm.In[0]] == slotConst {
		return nil, step{}, "", false
	}
	w := f.constF32(mm.In[1])
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
	switch mm.Node.Op {
	case "MatMul":
		if len(mm.In) != 2 {
			return nil, step{}, "", false
		}
		if c, ok := f.single(a); ok && !f.productOnly && p.plan.Steps[c].Node.Op == "Add" {
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
		nd := mm.Node
		if nd.Int("transA", 0) != 0 || nd.Float("alpha", 1) != 1 || len(mm.In) > 3 {
			return nil, step{}, "", false
		}
		transB, rank2 = nd.Int("transB", 0) != 0, true
		if len(mm.In) == 3 && mm.In[2] >= 0 && nd.Float("beta", 1) != 0 {
			if b = f.constF32(mm.In[2]); b == nil || nd.Float("beta", 1) != 1 || len(b.Shape) > 2 || (len(b.Shape) == 2 && b.Shape[0] != 1) {
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
	group, ext, out := []int{i}, []int{mm.In[0]}, a
	kind = "matmul"
	act, bias, bRank := actNone, []float32(nil), 0
	var ln *lnEpilogue
	if b != nil && (addI < 0 || len(b.Shape) > 0) && len(b.F32) == n && (len(b.Shape) == 0 || b.Shape[len(b.Shape)-1] == n) {
		if addI >= 0 {
			group = append(group, addI)
			out = f.outOf(addI)
		}
		bias, bRank, kind = b.F32, len(b.Shape), "linear"
		if g2, o2, a2, ok := f.matchActivation(out); ok && !f.productOnly {
			group = append(group, g2...)
			out, act = o2, a2
			kind = map[activation]string{actRelu: "linear+relu", actGelu: "linear+gelu"}[a2]
		}
	} else if b != nil && addI < 0 {
		return nil, step{}, "", false // a Gemm whose C is not a row of n values
	}
	if !f.productOnly {
		// A residual Add of a run-time value read by nothing else joins the epilogue (the
		// fast path checks at run time that it has the output's shape), with a bias or
		// without (a bias-free output projection, as plugins with attn_bias off write it).
		if c, ok := f.single(out); ok && p.plan.Steps[c].Node.Op == "Add" {
			if r, _, ok := f.p.otherInput(c, out); ok && r >= 0 && r != out && p.plan.Kinds[r] != slotConst {
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
	spec := &linearSpec{pw: f.p.packLinear(transB, k, n, w.F32, w.Shape[1]), bias: bias, bRank: bRank, act: act, ln: ln, rank2: rank2}
	spec.epilogueInKernel()
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
	st = f.newFused("FusedLinear", group, ext, out, fast, map[int]func() *tensor.Tensor{mm.In[1]: unpackW})
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
		o := l.st.Out[0]
		var cuts, shapes []int
		ok := l.spec.ln == nil && f.uses[o] == len(f.consumer[o])
		for _, c := range f.consumer[o] {
			st := p.plan.Steps[c]
			switch {
			case f.dead[c]:
				ok = false
			case st.Node.Op == "Slice" && len(st.In) >= 3 && len(st.In) <= 5 && len(st.Out) == 1 && st.Out[0] >= 0 && st.In[0] == o && !slices.Contains(st.In[1:], o):
				cuts = append(cuts, c)
			case st.Node.Op == "Shape" && len(st.In) == 1:
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
			for _, r := range f.consumer[p.plan.Steps[c].Out[0]] {
				ok = ok && r > last
			}
		}
		if !ok || len(cuts) == 0 {
			kept = append(kept, l)
			continue
		}
		n := l.spec.pw.N()
		for _, c := range shapes {
			sh := p.plan.Steps[c]
			p.plan.Steps[c].In = []int{l.x}
			p.plan.Steps[c].Kernel = func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				x := in[0]
				if x == nil || len(x.Shape) == 0 {
					return nil, fmt.Errorf("the input of the product %q has no axes", l.st.Node.Name)
				}
				shape := append(append([]int{}, x.Shape[:len(x.Shape)-1]...), n)
				return sh.Kernel(e, []*tensor.Tensor{{DType: tensor.Float32, Shape: shape}})
			}
		}
		// ext: x, then each Slice's starts, ends, axes and steps (-1 when absent).
		ext, outs := []int{l.x}, make([]int, len(cuts))
		subs := make([]step, len(cuts))
		at := 0
		for i, c := range cuts {
			st := p.plan.Steps[c]
			for j := 1; j <= 4; j++ {
				if j < len(st.In) {
					ext = append(ext, st.In[j])
				} else {
					ext = append(ext, -1)
				}
			}
			outs[i], subs[i] = st.Out[0], st
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
			full, err := e.call(lin.Kernel, lin.Node, in[:1])
			if err != nil {
				return nil, fmt.Errorf("node %q (%s): %w", lin.Node.Name, lin.Node.Op, err)
			}
			ts := make([]*tensor.Tensor, len(subs))
			for i, sub := range subs {
				args := append([]*tensor.Tensor{full[0]}, in[1+4*i:1+4*i+len(sub.In)-1]...)
				r, err := e.call(sub.Kernel, sub.Node, args)
				if err != nil {
					return nil, fmt.Errorf("node %q (%s): %w", sub.Node.Name, sub.Node.Op, err)
				}
				ts[i] = r[0]
			}
			return ts, nil
		}
		names := make([]string, len(outs))
		for i, s := range outs {
			names[i] = p.plan.Slots[s]
		}
		inNames := make([]string, len(ext))
		for i, s := range ext {
			if s >= 0 {
				inNames[i] = p.plan.Slots[s]
			}
		}
		node := &graph.Node{Op: "FusedLinearSplit", Name: lin.Node.Name, Inputs: inNames, Outputs: names}
		replaced[at] = step{Node: node, Kernel: k, In: ext, Out: outs, Covers: compile.CoversOf(append([]step{lin}, subs...))}
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
			specs[i], subs[i], outs[i], names[i] = l.spec, l.st, l.st.Out[0], l.st.Node.Outputs[0]
			delete(replaced, l.at)
			at = min(at, l.at)
		}
		k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if ts, ok, err := linearsFast(e, in[0], specs); ok || err != nil {
				return ts, err
			}
			ts := make([]*tensor.Tensor, len(subs))
			for i, sub := range subs {
				r, err := e.call(sub.Kernel, sub.Node, in)
				if err != nil {
					return nil, fmt.Errorf("node %q (%s): %w", sub.Node.Name, sub.Node.Op, err)
				}
				ts[i] = r[0]
			}
			return ts, nil
		}
		first := group[0].st.Node
		node := &graph.Node{Op: "FusedLinears", Name: first.Name, Inputs: first.Inputs, Outputs: names}
		replaced[at] = step{Node: node, Kernel: k, In: []int{x}, Out: outs, Covers: compile.CoversOf(subs)}
		f.p.fusions["shared-input"]++
	}
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
	if h < 0 || p.plan.Kinds[h] != slotNode || f.uses[h] > 2 {
		return nil, -1, 0, false
	}
	if c, ok := f.single(h); ok && p.plan.Steps[c].Node.Op == "Relu" {
		return []int{c}, f.outOf(c), actRelu, true
	}
	if f.uses[h] != 2 {
		return nil, -1, 0, false
	}
	// Both GELU forms read h twice: Div(h, √2) → Erf → Add(·, 1), and a Mul.
	var div, mulH = -1, -1
	for _, c := range f.consumer[h] {
		switch p.plan.Steps[c].Node.Op {
		case "Div":
			div = c
		case "Mul":
			mulH = c
		}
	}
	if div < 0 || mulH < 0 || p.plan.Steps[div].In[0] != h {
		return nil, -1, 0, false
	}
	if v, ok := f.scalarConst(p.plan.Steps[div].In[1]); !ok || v != float32(math.Sqrt2) {
		return nil, -1, 0, false
	}
	erf, ok := f.single(f.outOf(div))
	if !ok || p.plan.Steps[erf].Node.Op != "Erf" {
		return nil, -1, 0, false
	}
	add1, ok := f.single(f.outOf(erf))
	if !ok || p.plan.Steps[add1].Node.Op != "Add" {
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
		if !ok1 || !ok2 || m1 != m2 || p.plan.Steps[m1].Node.Op != "Mul" {
			return nil, -1, 0, false
		}
		final = m1
	} else if mo == f.outOf(add1) {
		// PyTorch: Mul(Mul(h, Add(erf, 1)), 0.5)
		m2, ok := f.single(f.outOf(mulH))
		if !ok || p.plan.Steps[m2].Node.Op != "Mul" {
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
