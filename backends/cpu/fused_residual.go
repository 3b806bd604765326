package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// permResidual is the fused step of matchPermutedResidual: out = Transpose(y, perm) + r,
// then the LayerNorm ln when set. perm keeps the last axis, so row q of out is a whole row
// of y; each row is added with vec.Add and normalised with vec.LayerNorm in place, the
// kernels the unfused Add and LayerNormalization use, so the result is bitwise theirs.
type permResidual struct {
	perm   []int
	tFirst bool // the transposed value is the Add's first operand
	ln     *lnEpilogue
}

// run is the fast path: ok is false when y and r are not float32, or r is not exactly the
// transposed shape (a broadcasting residual), or the LayerNorm's parameters do not match
// the row length; the original steps then run.
func (s *permResidual) run(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
	y, r := in[0], in[1]
	if y == nil || r == nil || y.DType != tensor.Float32 || r.DType != tensor.Float32 {
		return nil, false, nil
	}
	shape, ys, ok := permView(y.Shape, s.perm)
	if !ok {
		return nil, false, nil
	}
	rank, d := len(shape), shape[len(shape)-1]
	if !tensor.SameShape(shape, r.Shape) || len(r.F32) != len(y.F32) || (s.ln != nil && len(s.ln.scale) != d) {
		return nil, false, nil
	}
	out, err := e.allocRaw(shape)
	if err != nil || d == 0 || len(out.F32) == 0 {
		return out, err == nil, err
	}
	workpool.For(e.threads, len(out.F32)/d, max(1, elemGrain/(2*d)), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			off, rem := 0, q
			for i := rank - 2; i >= 0; i-- {
				off += rem % shape[i] * ys[i]
				rem /= shape[i]
			}
			dst, yr, rr := out.F32[q*d:(q+1)*d], y.F32[off:off+d], r.F32[q*d:(q+1)*d]
			if s.tFirst {
				vec.Add(dst, yr, rr)
			} else {
				vec.Add(dst, rr, yr)
			}
			if s.ln != nil {
				vec.LayerNorm(dst, dst, s.ln.scale, s.ln.bias, s.ln.eps)
			}
		}
	})
	return out, true, nil
}
