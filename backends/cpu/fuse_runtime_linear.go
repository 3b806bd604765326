package cpu

import (
	"sync"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// A linear layer whose weight is a run-time value, as in a training step, where the
// parameters are graph inputs (autodiff.LiftParams) so that one program takes each step's
// weights:
//
//	t = Transpose(W, perm=[1, 0])     W (n, k), PyTorch's (out, in) layout
//	h = MatMul(x, t)
//	[y = Add(h, b)                    b of n values, either order]
//	[z = Relu(y)]
//
// with t, h and y read by nothing else (autodiff's rules read W, not t, and the Relu's
// output, not y; zoo/graph's gradMatMul and unaryGrad). Unfused it is a copy of W, a
// product that packs W again for every row task, and one pass over the output per bias
// and Relu. Fused, W is packed once per run (the layout the inference path packs a constant
// weight in once at compile time) and the product runs through the same tiled kernel as an
// inference linear layer (linearFast), bias and Relu applied to each tile while it is in
// cache. The packed product rounds as the unfused one does (the same micro-kernel, the same
// k order), and bias and Relu are the same float32 operations, so the results agree.

//
// The backward pass's input gradients, Gemm(dY, W) with both operands run-time matrices
// (zoo/graph's gradMatMul), run the same way ("runtime-gemm"): W packed once instead of once
// per row task.

// matchRuntimeGemm matches a Gemm step i with two run-time operands, op(A) = A and alpha 1
// and no C.
func (f *fuser) matchRuntimeGemm(i int) (group []int, st step, ok bool) {
	g := f.p.plan.Steps[i]
	nd := g.Node
	if nd.Op != "Gemm" || len(g.In) != 2 || !f.runtime(g.In[0]) || !f.runtime(g.In[1]) || nd.Int("transA", 0) != 0 || nd.Float("alpha", 1) != 1 {
		return nil, step{}, false
	}
	transB := nd.Int("transB", 0) != 0
	packs := &sync.Pool{New: func() any { return new(gemm.PackedB) }}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		if len(in[0].Shape) != 2 {
			return nil, false, nil
		}
		return runtimeLinear(e, in[0], in[1], transB, nil, actNone, packs)
	}
	return []int{i}, f.newFused("FusedRuntimeGemm", []int{i}, []int{g.In[0], g.In[1]}, f.outOf(i), fast, nil), true
}

// matchRuntimeLinear matches the pattern at MatMul step i.
func (f *fuser) matchRuntimeLinear(i int) (group []int, st step, kind string, ok bool) {
	p := f.p
	mm := p.plan.Steps[i]
	if mm.Node.Op != "MatMul" || len(mm.In) != 2 || !f.runtime(mm.In[0]) {
		return nil, step{}, "", false
	}
	t := mm.In[1]
	if c, ok := f.single(t); !ok || c != i {
		return nil, step{}, "", false
	}
	tr := f.producer[t]
	if tr < 0 || f.dead[tr] || p.plan.Steps[tr].Node.Op != "Transpose" || len(p.plan.Steps[tr].In) != 1 {
		return nil, step{}, "", false
	}
	if perm := transposePerm(p.plan.Steps[tr].Node); len(perm) != 2 || perm[0] != 1 || perm[1] != 0 {
		return nil, step{}, "", false
	}
	w := p.plan.Steps[tr].In[0]
	if !f.runtime(w) {
		return nil, step{}, "", false
	}
	group, ext, out, kind := []int{tr, i}, []int{mm.In[0], w}, f.outOf(i), "runtime-linear"
	if out < 0 {
		return nil, step{}, "", false
	}
	if c, ok := f.single(out); ok && p.plan.Steps[c].Node.Op == "Add" {
		if b, _, ok := p.otherInput(c, out); ok && b >= 0 && b != out {
			group, ext, out, kind = append(group, c), append(ext, b), f.outOf(c), "runtime-linear+bias"
			if r, ok := f.single(out); ok && p.plan.Steps[r].Node.Op == "Relu" && len(p.plan.Steps[r].In) == 1 {
				group, out, kind = append(group, r), f.outOf(r), "runtime-linear+bias+relu"
			}
		}
	}
	act := actNone
	if kind == "runtime-linear+bias+relu" {
		act = actRelu
	}
	packs := &sync.Pool{New: func() any { return new(gemm.PackedB) }}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		var b *tensor.Tensor
		if len(in) > 2 {
			b = in[2]
		}
		return runtimeLinear(e, in[0], in[1], true, b, act, packs)
	}
	return group, f.newFused("FusedRuntimeLinear", group, ext, out, fast, nil), kind, true
}

// runtimeLinear computes act(x·Wᵀ + b) for x (..., k), W (n, k) (or act(x·W + b) for W
// (k, n) when transW is false) and b (n values, or nil for no bias), packing W into a
// PackedB from packs; it declines (ok false) on anything else: other dtypes or ranks, a k
// that does not match, or a bias that is not a vector of n.
func runtimeLinear(e *exec, x, w *tensor.Tensor, transW bool, b *tensor.Tensor, act activation, packs *sync.Pool) (*tensor.Tensor, bool, error) {
	if x.DType != tensor.Float32 || w.DType != tensor.Float32 || len(x.Shape) < 2 || len(w.Shape) != 2 {
		return nil, false, nil
	}
	n, k := w.Shape[0], w.Shape[1]
	if !transW {
		n, k = k, n
	}
	if x.Shape[len(x.Shape)-1] != k {
		return nil, false, nil
	}
	spec := linearSpec{act: act}
	if b != nil {
		if b.DType != tensor.Float32 || len(b.Shape) != 1 || b.Shape[0] != n {
			return nil, false, nil
		}
		spec.bias, spec.bRank = b.F32, 1
	}
	pb := packs.Get().(*gemm.PackedB)
	defer packs.Put(pb)
	e.packB(pb, transW, k, n, w.F32, w.Shape[1])
	spec.pw = pb
	return linearFast(e, x, &spec, nil)
}
