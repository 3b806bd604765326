package cpu

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/zoo-dev/zoo/backends/compile"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The LayerNormalization backward as zoo/autodiff writes it (graph's gradLayerNorm), over
// the last axis, for input x, output gradient dy and scale γ:
//
//	m = ReduceMean(x); xc = Sub(x, m); v = ReduceMean(Mul(xc, xc))
//	rstd = Div(1, Sqrt(Add(v, eps))); xhat = Mul(xc, rstd)
//	dxh = Mul(dy, γ)
//	dx = Mul(Sub(Sub(dxh, ReduceMean(dxh)), Mul(xhat, ReduceMean(Mul(dxh, xhat)))), rstd)
//	dγ = ReduceSum(Mul(dy, xhat), leading axes)      dβ = ReduceSum(dy, leading axes)
//
// Unfused that is about twenty passes over the activations, each with a temporary of
// their size; fused it is one pass per row that recomputes the row's statistics, writes
// its dx and adds its share of dγ and dβ. The row pass performs the unfused steps' float32
// operations in their order (means accumulated in float64, as ReduceMean does), so dx
// matches; dγ and dβ are summed in float64 over fixed blocks of lnGradBlock rows and the
// blocks then in order, so they do not depend on the thread count either.

// lnGradBlock is the number of rows whose dγ and dβ shares one task sums before they are
// added up across blocks.
const lnGradBlock = 32

// matchLayerNormGrad matches the pattern at the ReduceMean step i (the mean of x).
func (f *fuser) matchLayerNormGrad(i int) (group []int, st step, ok bool) {
	p := f.p
	steps := p.plan.Steps
	op := func(s int, name string, nin int) bool {
		return s >= 0 && !f.dead[s] && steps[s].Node.Op == name && len(steps[s].In) == nin && len(steps[s].Out) == 1
	}
	meanAxis := func(s int) (int64, bool) {
		nd := steps[s].Node
		axes, ok := nd.IntList("axes")
		if !op(s, "ReduceMean", 1) || !ok || len(axes) != 1 || nd.Int("keepdims", 1) != 1 {
			return 0, false
		}
		return axes[0], true
	}
	// next returns the single reader of slot s when it runs op name.
	next := func(s int, name string, nin int) (int, bool) {
		c, ok := f.single(s)
		return c, ok && op(c, name, nin)
	}
	axis, ok := meanAxis(i)
	if !ok {
		return nil, step{}, false
	}
	x, m := steps[i].In[0], f.outOf(i)
	sub, ok := next(m, "Sub", 2)
	if !ok || steps[sub].In[0] != x || steps[sub].In[1] != m {
		return nil, step{}, false
	}
	xc := f.outOf(sub)
	if f.p.plan.Kinds[xc] != slotNode || f.uses[xc] != 3 {
		return nil, step{}, false
	}
	sq, xh := -1, -1
	for _, c := range f.consumer[xc] {
		if !op(c, "Mul", 2) {
			return nil, step{}, false
		}
		if steps[c].In[0] == xc && steps[c].In[1] == xc {
			sq = c
		} else {
			xh = c
		}
	}
	if sq < 0 || xh < 0 {
		return nil, step{}, false
	}
	v, ok := next(f.outOf(sq), "ReduceMean", 1)
	if a, ok2 := meanAxis(v); !ok || !ok2 || a != axis {
		return nil, step{}, false
	}
	addEps, ok := next(f.outOf(v), "Add", 2)
	if !ok || steps[addEps].In[0] != f.outOf(v) {
		return nil, step{}, false
	}
	eps, ok := f.scalarConst(steps[addEps].In[1])
	if !ok {
		return nil, step{}, false
	}
	sqrt, ok := next(f.outOf(addEps), "Sqrt", 1)
	if !ok {
		return nil, step{}, false
	}
	div, ok := next(f.outOf(sqrt), "Div", 2)
	if one, ok2 := f.scalarConst(steps[div].In[0]); !ok || !ok2 || one != 1 || steps[div].In[1] != f.outOf(sqrt) {
		return nil, step{}, false
	}
	rstd := f.outOf(div)
	if other, _, ok := p.otherInput(xh, xc); !ok || other != rstd || f.p.plan.Kinds[rstd] != slotNode || f.uses[rstd] != 2 {
		return nil, step{}, false
	}
	xhat := f.outOf(xh)
	if f.p.plan.Kinds[xhat] != slotNode || f.uses[xhat] != 3 {
		return nil, step{}, false
	}
	// xhat's readers: Mul(dxh, xhat), Mul(xhat, m2) and Mul(dy, xhat), where dxh is
	// Mul(dy, γ): told apart by what their other operands are.
	var pm, qm, gs, dxhStep = -1, -1, -1, -1
	var rest []int
	for _, c := range f.consumer[xhat] {
		if !op(c, "Mul", 2) {
			return nil, step{}, false
		}
		other, _, _ := p.otherInput(c, xhat)
		if pr := f.producer[other]; pr >= 0 && op(pr, "ReduceMean", 1) && qm < 0 {
			qm = c
		} else {
			rest = append(rest, c)
		}
	}
	if qm < 0 || len(rest) != 2 {
		return nil, step{}, false
	}
	for k := 0; k < 2 && pm < 0; k++ {
		c1, c2 := rest[k], rest[1-k]
		o1, _, _ := p.otherInput(c1, xhat)
		o2, _, _ := p.otherInput(c2, xhat)
		if pr := f.producer[o1]; pr >= 0 && op(pr, "Mul", 2) && steps[pr].In[0] == o2 && f.p.plan.Kinds[o1] == slotNode && f.uses[o1] == 3 {
			pm, gs, dxhStep = c1, c2, pr
		}
	}
	if pm < 0 {
		return nil, step{}, false
	}
	dy, scale := steps[dxhStep].In[0], steps[dxhStep].In[1]
	if !f.runtime(dy) || scale < 0 {
		return nil, step{}, false
	}
	dxh := f.outOf(dxhStep)
	m1, a := -1, -1
	for _, c := range f.consumer[dxh] {
		switch {
		case c == pm:
		case op(c, "ReduceMean", 1):
			m1 = c
		case op(c, "Sub", 2) && steps[c].In[0] == dxh:
			a = c
		}
	}
	if m1 < 0 || a < 0 || steps[a].In[1] != f.outOf(m1) {
		return nil, step{}, false
	}
	if ax, ok := meanAxis(m1); !ok || ax != axis {
		return nil, step{}, false
	}
	m2, ok := next(f.outOf(pm), "ReduceMean", 1)
	if ax, ok2 := meanAxis(m2); !ok || !ok2 || ax != axis || steps[qm].In[0] != xhat || steps[qm].In[1] != f.outOf(m2) {
		return nil, step{}, false
	}
	if c, ok := f.single(f.outOf(m1)); !ok || c != a {
		return nil, step{}, false
	}
	inner, ok := next(f.outOf(a), "Sub", 2)
	if !ok || steps[inner].In[1] != f.outOf(qm) {
		return nil, step{}, false
	}
	if c, ok := f.single(f.outOf(qm)); !ok || c != inner {
		return nil, step{}, false
	}
	dxm, ok := next(f.outOf(inner), "Mul", 2)
	if !ok || steps[dxm].In[1] != rstd {
		return nil, step{}, false
	}
	lead := func(s int) ([]int64, bool) {
		if !op(s, "ReduceSum", 2) || steps[s].Node.Int("keepdims", 1) != 0 || steps[s].Node.Int("noop_with_empty_axes", 0) != 0 {
			return nil, false
		}
		t := p.plan.Consts[steps[s].In[1]]
		if p.plan.Kinds[steps[s].In[1]] != slotConst || t == nil || t.DType != tensor.Int64 || len(t.I64) == 0 {
			return nil, false
		}
		return t.I64, true
	}
	dsc, ok := f.single(f.outOf(gs))
	leadAxes, ok2 := lead(dsc)
	if !ok || !ok2 {
		return nil, step{}, false
	}
	dbias := -1
	for _, c := range f.consumer[dy] {
		if la, ok := lead(c); ok && steps[c].In[0] == dy && slices.Equal(la, leadAxes) {
			dbias = c
		}
	}
	if dbias < 0 {
		return nil, step{}, false
	}
	group = []int{i, sub, sq, xh, v, addEps, sqrt, div, dxhStep, m1, a, pm, m2, qm, inner, dxm, gs, dsc, dbias}
	outs := []int{f.outOf(dxm), f.outOf(dsc), f.outOf(dbias)}
	// The fused step runs where the group's last step ran: every reader of its results must
	// come after that.
	last := slices.Max(group)
	for _, o := range outs {
		for _, c := range f.consumer[o] {
			if c <= last {
				return nil, step{}, false
			}
		}
	}
	fast := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, bool, error) {
		return layerNormGrad(e, in[0], in[1], in[2], eps, axis, leadAxes)
	}
	return group, f.newFusedMulti("FusedLayerNormGrad", group, []int{x, dy, scale}, outs, fast), true
}

// layerNormGrad computes dx, dγ and dβ of a LayerNorm over the last axis; it declines (ok
// false) unless x and dy are float32 of one shape of rank ≥ 2, γ is a float32 vector of the
// last axis' size, axis names the last axis and lead every axis before it.
func layerNormGrad(e *exec, x, dy, scale *tensor.Tensor, eps float32, axis int64, lead []int64) ([]*tensor.Tensor, bool, error) {
	r := len(x.Shape)
	if x.DType != tensor.Float32 || dy.DType != tensor.Float32 || scale.DType != tensor.Float32 || r < 2 || !tensor.SameShape(x.Shape, dy.Shape) {
		return nil, false, nil
	}
	if a, err := graph.NormAxis(axis, r); err != nil || a != r-1 || len(lead) != r-1 {
		return nil, false, nil
	}
	for k, a := range lead {
		if n, err := graph.NormAxis(a, r); err != nil || n != k {
			return nil, false, nil
		}
	}
	d := x.Shape[r-1]
	if len(scale.Shape) != 1 || scale.Shape[0] != d || d == 0 {
		return nil, false, nil
	}
	dx, err := e.alloc(tensor.Float32, x.Shape)
	if err != nil {
		return nil, true, fmt.Errorf("layernorm backward: %w", err)
	}
	dscale, err := e.alloc(tensor.Float32, []int{d})
	if err != nil {
		return nil, true, fmt.Errorf("layernorm backward: %w", err)
	}
	dbias, err := e.alloc(tensor.Float32, []int{d})
	if err != nil {
		return nil, true, fmt.Errorf("layernorm backward: %w", err)
	}
	rows := x.Len() / d
	blocks := (rows + lnGradBlock - 1) / lnGradBlock
	part := make([]float64, blocks*2*d) // per block: Σ dy·xhat, then Σ dy
	workpool.For(e.threads, blocks, max(1, elemGrain/(lnGradBlock*d)), func(lo, hi int) {
		xhat := make([]float32, d)
		for bk := lo; bk < hi; bk++ {
			ps, pb := part[bk*2*d:bk*2*d+d], part[bk*2*d+d:(bk+1)*2*d]
			for row := bk * lnGradBlock; row < min(rows, (bk+1)*lnGradBlock); row++ {
				lnGradRow(x.F32[row*d:(row+1)*d], dy.F32[row*d:(row+1)*d], scale.F32, dx.F32[row*d:(row+1)*d], xhat, eps, ps, pb)
			}
		}
	})
	for j := 0; j < d; j++ {
		var s, b float64
		for bk := 0; bk < blocks; bk++ {
			s += part[bk*2*d+j]
			b += part[bk*2*d+d+j]
		}
		dscale.F32[j], dbias.F32[j] = float32(s), float32(b)
	}
	return []*tensor.Tensor{dx, dscale, dbias}, true, nil
}

// lnGradRow is one row of layerNormGrad: it writes dx and adds dy·xhat and dy into ps and
// pb, with the unfused steps' float32 operations in their order (xhat is scratch).
func lnGradRow(x, dy, scale, dx, xhat []float32, eps float32, ps, pb []float64) {
	n := float64(len(x))
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	mean := float32(s / n)
	s = 0
	for j, v := range x {
		c := v - mean
		xhat[j] = c
		s += float64(c * c)
	}
	v := float32(s/n) + eps
	rstd := 1 / float32(math.Sqrt(float64(v)))
	var s1, s2 float64
	for j, c := range xhat {
		h := c * rstd
		xhat[j] = h
		g := dy[j] * scale[j]
		dx[j] = g
		s1 += float64(g)
		s2 += float64(g * h)
		ps[j] += float64(dy[j] * h)
		pb[j] += float64(dy[j])
	}
	m1, m2 := float32(s1/n), float32(s2/n)
	for j, g := range dx {
		dx[j] = ((g - m1) - xhat[j]*m2) * rstd
	}
}

// multiKernel is the fast path of a fused step with several results (see fastKernel).
type multiKernel func(e *exec, in []*tensor.Tensor) (outs []*tensor.Tensor, ok bool, err error)

// newFusedMulti is newFused for a group with several results, outs, in order.
func (f *fuser) newFusedMulti(op string, group []int, ext []int, outs []int, fast multiKernel) step {
	sort.Ints(group)
	sub := make([]step, len(group))
	for j, i := range group {
		sub[j] = f.p.plan.Steps[i]
	}
	last := f.p.plan.Steps[group[len(group)-1]].Node
	node := &graph.Node{Op: op, Name: last.Name, Inputs: make([]string, len(ext)), Outputs: make([]string, len(outs))}
	for j, s := range ext {
		node.Inputs[j] = f.p.plan.Slots[s]
	}
	for j, s := range outs {
		node.Outputs[j] = f.p.plan.Slots[s]
	}
	fb := &fallback{ext: ext, out: outs[0], more: outs[1:], sub: sub, consts: f.p.constInputs(sub, nil)}
	k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if t, ok, err := fast(e, in); ok || err != nil {
			return t, err
		}
		return fb.run(e, in)
	}
	return step{Node: node, Kernel: k, In: append([]int(nil), ext...), Out: append([]int(nil), outs...), Covers: compile.CoversOf(sub)}
}
