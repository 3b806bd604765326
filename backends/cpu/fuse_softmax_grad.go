package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The softmax backward as zoo/autodiff writes it (graph's gradSoftmax):
//
//	t = Mul(dy, y)            (either order)
//	s = ReduceSum(t, [axis], keepdims=1)
//	d = Sub(dy, s)
//	dx = Mul(y, d)            (either order)
//
// where y is a Softmax over the same axis, the last one (checked at run time). Unfused it is four passes over the n×n
// probabilities of every attention head, and three temporaries of their size; fused it is one
// pass per row (a dot product, then dx = y·(dy − dot)).

// matchSoftmaxGrad matches the pattern at ReduceSum step i.
func (f *fuser) matchSoftmaxGrad(i int) (group []int, st step, ok bool) {
	p := f.p
	rs := p.plan.Steps[i]
	if len(rs.In) != 2 || len(rs.Out) != 1 || rs.Node.Int("keepdims", 1) != 1 || rs.Node.Int("noop_with_empty_axes", 0) != 0 {
		return nil, step{}, false
	}
	ax := rs.In[1]
	if ax < 0 || p.plan.Kinds[ax] != slotConst || p.plan.Consts[ax] == nil || p.plan.Consts[ax].DType != tensor.Int64 || len(p.plan.Consts[ax].I64) != 1 {
		return nil, step{}, false
	}
	axis := p.plan.Consts[ax].I64[0]
	t := rs.In[0]
	if c, ok := f.single(t); !ok || c != i {
		return nil, step{}, false
	}
	mul1 := f.producer[t]
	if mul1 < 0 || f.dead[mul1] || p.plan.Steps[mul1].Node.Op != "Mul" || len(p.plan.Steps[mul1].In) != 2 {
		return nil, step{}, false
	}
	isSoftmax := func(s int) bool {
		pr := f.producer[s]
		return pr >= 0 && !f.dead[pr] && p.plan.Steps[pr].Node.Op == "Softmax" && p.plan.Steps[pr].Node.Int("axis", -1) == axis
	}
	for side := 0; side < 2; side++ {
		y, dy := p.plan.Steps[mul1].In[side], p.plan.Steps[mul1].In[1-side]
		if y < 0 || dy < 0 || y == dy || !isSoftmax(y) {
			continue
		}
		sub, ok := f.single(rs.Out[0])
		if !ok || p.plan.Steps[sub].Node.Op != "Sub" || len(p.plan.Steps[sub].In) != 2 || p.plan.Steps[sub].In[0] != dy || p.plan.Steps[sub].In[1] != rs.Out[0] {
			continue
		}
		d := f.outOf(sub)
		mul2, ok := f.single(d)
		if !ok || p.plan.Steps[mul2].Node.Op != "Mul" {
			continue
		}
		if other, _, ok := p.otherInput(mul2, d); !ok || other != y {
			continue
		}
		group = []int{mul1, i, sub, mul2}
		fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
			if r := int64(len(in[1].Shape)); axis != -1 && axis != r-1 {
				return nil, false, nil
			}
			return softmaxGrad(e, in)
		}
		return group, f.newFused("FusedSoftmaxGrad", group, []int{dy, y}, f.outOf(mul2), fast, nil), true
	}
	return nil, step{}, false
}

// softmaxGrad computes dx = y·(dy − Σ dy·y) over the last axis; it declines (so the
// unfused steps run) unless dy and y are float32 of one shape.
func softmaxGrad(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
	dy, y := in[0], in[1]
	if dy.DType != tensor.Float32 || y.DType != tensor.Float32 || !tensor.SameShape(dy.Shape, y.Shape) || len(y.Shape) == 0 {
		return nil, false, nil
	}
	out, err := e.alloc(tensor.Float32, y.Shape)
	if err != nil {
		return nil, false, fmt.Errorf("softmax backward: %w", err)
	}
	l := y.Shape[len(y.Shape)-1]
	if l == 0 || out.Len() == 0 {
		return out, true, nil
	}
	rows := out.Len() / l
	workpool.For(e.threads, rows, max(1, elemGrain/l), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			g, p, o := dy.F32[r*l:(r+1)*l], y.F32[r*l:(r+1)*l], out.F32[r*l:(r+1)*l]
			var dot float32
			for k, v := range g {
				dot += v * p[k]
			}
			for k, v := range g {
				o[k] = p[k] * (v - dot)
			}
		}
	})
	return out, true, nil
}
