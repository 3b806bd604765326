package cpu

import (
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

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
		if s < 0 || p.plan.Kinds[s] != slotConst || p.plan.Consts[s] == nil || p.plan.Consts[s].DType != tensor.Float32 {
			return nil
		}
		return p.plan.Consts[s]
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
		if len(p.plan.Steps[i].Out) != 1 || p.plan.Steps[i].Out[0] < 0 {
			return -1
		}
		o := p.plan.Steps[i].Out[0]
		if output[o] || len(readers[o]) != 1 {
			return -1
		}
		arity := 2
		if op == "Sqrt" || op == "ReduceMean" {
			arity = 1
		}
		r := readers[o][0]
		if st := p.plan.Steps[r]; st.Node.Op != op || len(st.Out) != 1 || st.Out[0] < 0 || len(st.In) != arity {
			return -1
		}
		return r
	}
	lastAxisMean := func(i int) bool {
		st := p.plan.Steps[i]
		axes, ok := st.Node.IntList("axes")
		return st.Node.Op == "ReduceMean" && len(st.In) == 1 && ok && len(axes) == 1 && axes[0] == -1 && st.Node.Int("keepdims", 1) == 1
	}
	remove := make([]bool, len(p.plan.Steps))
	replace := map[int]step{}
	for r1 := range p.plan.Steps {
		if remove[r1] || !lastAxisMean(r1) {
			continue
		}
		x := p.plan.Steps[r1].In[0]
		sub := next(r1, "Sub")
		if sub < 0 || p.plan.Steps[sub].In[0] != x || p.plan.Steps[sub].In[1] != p.plan.Steps[r1].Out[0] {
			continue
		}
		d := p.plan.Steps[sub].Out[0]
		if output[d] || len(readers[d]) != 2 {
			continue
		}
		pw, dv := readers[d][0], readers[d][1]
		if p.plan.Steps[pw].Node.Op != "Pow" {
			pw, dv = dv, pw
		}
		if p.plan.Steps[pw].Node.Op != "Pow" || p.plan.Steps[dv].Node.Op != "Div" || len(p.plan.Steps[pw].In) != 2 || len(p.plan.Steps[dv].In) != 2 ||
			len(p.plan.Steps[pw].Out) != 1 || len(p.plan.Steps[dv].Out) != 1 || p.plan.Steps[pw].In[0] != d || p.plan.Steps[dv].In[0] != d {
			continue
		}
		if e, ok := scalar(p.plan.Steps[pw].In[1]); !ok || e != 2 {
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
		epsSlot, _, _ := p.otherInput(addEps, p.plan.Steps[r2].Out[0])
		eps, ok := scalar(epsSlot)
		if !ok {
			continue
		}
		sq := next(addEps, "Sqrt")
		if sq < 0 || next(sq, "Div") != dv || p.plan.Steps[dv].In[1] != p.plan.Steps[sq].Out[0] {
			continue
		}
		mul := next(dv, "Mul")
		if mul < 0 {
			continue
		}
		gs, _, _ := p.otherInput(mul, p.plan.Steps[dv].Out[0])
		add := next(mul, "Add")
		if add < 0 {
			continue
		}
		bs, _, _ := p.otherInput(add, p.plan.Steps[mul].Out[0])
		gamma, beta := constOf(gs), constOf(bs)
		if gamma == nil || beta == nil || len(gamma.Shape) != 1 || !tensor.SameShape(gamma.Shape, beta.Shape) || gamma.Shape[0] < 2 {
			continue
		}
		group := []int{r1, sub, pw, r2, addEps, sq, dv, mul, add}
		chain := make([]step, len(group))
		for j, i := range group {
			chain[j] = p.plan.Steps[i]
			remove[i] = true
		}
		last := p.plan.Steps[add]
		node := &graph.Node{Op: "LayerNormalization", Name: last.Node.Name, Inputs: []string{p.plan.Slots[x], p.plan.Slots[gs], p.plan.Slots[bs]},
			Outputs: []string{p.plan.Slots[last.Out[0]]}, Attrs: graph.Attrs{"axis": graph.Int(-1), "epsilon": graph.Float(eps)}}
		lnk, err := makeLayerNorm(node)
		if err != nil {
			continue
		}
		fb := &fallback{ext: []int{x, gs, bs}, out: last.Out[0], sub: chain, consts: p.constInputs(chain, nil)}
		n := gamma.Shape[0]
		k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if x := in[0]; x != nil && x.DType == tensor.Float32 && len(x.Shape) > 0 && x.Shape[len(x.Shape)-1] == n {
				return lnk(e, in)
			}
			return fb.run(e, in)
		}
		replace[add] = step{Node: node, Kernel: k, In: []int{x, gs, bs}, Out: []int{last.Out[0]}, Covers: compile.CoversOf(chain)}
		p.fusions["layernorm"]++
	}
	p.rebuild(replace, remove)
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
	st := p.plan.Steps[c]
	if st.Node.Op != "LayerNormalization" || st.Node.Int("axis", -1) != -1 || len(st.Out) != 1 ||
		len(st.In) < 2 || st.In[0] != h {
		return -1, -1, nil, false
	}
	scale := f.constF32(st.In[1])
	if scale == nil || len(scale.F32) != n {
		return -1, -1, nil, false
	}
	ln = &lnEpilogue{scale: scale.F32, eps: st.Node.Float("epsilon", 1e-5)}
	if len(st.In) > 2 && st.In[2] >= 0 {
		bias := f.constF32(st.In[2])
		if bias == nil || len(bias.F32) != n {
			return -1, -1, nil, false
		}
		ln.bias = bias.F32
	}
	return c, st.Out[0], ln, true
}

// matchPermutedResidual matches Add(Transpose(y), r), in either operand order, where the
// Transpose (or a chain of them) keeps the last axis in place and is read by nothing else,
// optionally followed by a LayerNormalization of the sum over the last axis with constant
// parameters. PyTorch's batch-first attention block ends this way at batch > 1: the output
// projection, a Reshape to (n, b, d), a Transpose back to (b, n, d), the residual Add and
// norm1. The fused step (permResidual) reads y's rows through the permutation instead of
// copying them, and adds and normalises each row while it is in cache.
func (f *fuser) matchPermutedResidual(i int) (group []int, st step, kind string, ok bool) {
	p := f.p
	add := p.plan.Steps[i]
	if len(add.In) != 2 || len(add.Out) != 1 || add.Out[0] < 0 {
		return nil, step{}, "", false
	}
	for side := 0; side < 2; side++ {
		t, r := add.In[side], add.In[1-side]
		if t < 0 || r < 0 {
			continue
		}
		y, perm, tsteps := f.walkTransposes(t)
		if len(tsteps) == 0 || !keepsLastAxis(perm) {
			continue
		}
		group = append(append([]int{}, tsteps...), i)
		out := add.Out[0]
		kind = "transpose+residual"
		pr := &permResidual{perm: perm, tFirst: side == 0}
		if c, ok := f.single(out); ok && p.plan.Steps[c].Node.Op == "LayerNormalization" && len(p.plan.Steps[c].In) >= 2 {
			if scale := f.constF32(p.plan.Steps[c].In[1]); scale != nil {
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
