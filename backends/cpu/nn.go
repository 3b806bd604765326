package cpu

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Softmax, LayerNormalization and the reductions work row by row; every row is computed by
// the same code in the same order whichever thread runs it, so results do not depend on
// the thread count. Contiguous softmax rows and LayerNorm rows use the SIMD kernels of
// package vec (float32, 16 lanes folded in a fixed order); the strided softmax accumulates
// in float64.

// makeSoftmax implements Softmax (opset 13): along one axis, default -1. The row maximum is
// subtracted first, so -inf entries (masked keys) give 0; a row of only -inf gives NaN.
func makeSoftmax(n *graph.Node) (kernel, error) {
	axisAttr := n.Int("axis", -1)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 1); err != nil {
			return nil, err
		}
		x := in[0]
		if x.DType != tensor.Float32 {
			return nil, fmt.Errorf("dtype %v is not supported (float32 is)", x.DType)
		}
		axis, err := graph.NormAxis(axisAttr, len(x.Shape))
		if err != nil {
			return nil, err
		}
		out, err := e.allocOverwrite(x.DType, x.Shape)
		if err != nil {
			return nil, err
		}
		outer, dim, inner := graph.NumElements(x.Shape[:axis]), x.Shape[axis], graph.NumElements(x.Shape[axis+1:])
		rows := outer * inner
		if dim == 0 || rows == 0 {
			return []*tensor.Tensor{out}, nil
		}
		if inner == 1 {
			// Contiguous rows (the attention case): the SIMD row softmax of package vec.
			workpool.For(e.threads, rows, max(1, elemGrain/(4*dim)), func(lo, hi int) {
				for r := lo; r < hi; r++ {
					vec.Softmax(out.F32[r*dim:(r+1)*dim], x.F32[r*dim:(r+1)*dim])
				}
			})
			return []*tensor.Tensor{out}, nil
		}
		workpool.For(e.threads, rows, max(1, elemGrain/(4*dim)), func(lo, hi int) {
			scratch := make([]float64, dim)
			for r := lo; r < hi; r++ {
				o, j := r/inner, r%inner
				base := o*dim*inner + j
				softmaxRow(out.F32[base:], x.F32[base:], dim, inner, scratch)
			}
		})
		return []*tensor.Tensor{out}, nil
	}, nil
}

// softmaxRow computes one softmax row of n elements at stride s.
func softmaxRow(dst, src []float32, n, s int, ex []float64) {
	mx := float32(math.Inf(-1))
	for i := 0; i < n; i++ {
		if v := src[i*s]; v > mx || v != v {
			mx = v
			if v != v {
				break
			}
		}
	}
	m := float64(mx)
	sum := 0.0
	for i := 0; i < n; i++ {
		v := math.Exp(float64(src[i*s]) - m)
		ex[i] = v
		sum += v
	}
	inv := 1 / sum
	for i := 0; i < n; i++ {
		dst[i*s] = float32(ex[i] * inv)
	}
}

// vectorArg broadcasts an optional parameter (LayerNorm scale or bias) to the normalized
// shape and returns it as a flat vector, or nil when t is nil.
func vectorArg(e *exec, t *tensor.Tensor, norm []int, what string) ([]float32, error) {
	if t == nil {
		return nil, nil
	}
	if t.DType != tensor.Float32 {
		return nil, fmt.Errorf("%s has dtype %v; only float32 is supported", what, t.DType)
	}
	if tensor.SameShape(t.Shape, norm) {
		return t.F32, nil
	}
	shape, err := graph.BroadcastShapes(t.Shape, norm)
	if err != nil || !tensor.SameShape(shape, norm) {
		return nil, fmt.Errorf("%s of shape %s does not broadcast to the normalized shape %s", what, tensor.ShapeString(t.Shape), tensor.ShapeString(norm))
	}
	v := make([]float32, graph.NumElements(norm))
	if len(v) > 0 {
		expandInto(e.threads, v, norm, t.F32, t.Shape)
	}
	return v, nil
}

// normArgs checks what LayerNormalization and RMSNormalization share: a float32 input x, its
// first normalised axis (from the axis attribute) and the scale, broadcast to the normalised
// shape x.Shape[axis:].
func normArgs(e *exec, in []*tensor.Tensor, axisAttr int64) (*tensor.Tensor, int, []float32, error) {
	if err := need(in, 2); err != nil {
		return nil, 0, nil, err
	}
	x := in[0]
	if x.DType != tensor.Float32 {
		return nil, 0, nil, fmt.Errorf("dtype %v is not supported (float32 is)", x.DType)
	}
	axis, err := graph.NormAxis(axisAttr, len(x.Shape))
	if err != nil {
		return nil, 0, nil, err
	}
	scale, err := vectorArg(e, in[1], x.Shape[axis:], "scale")
	if err != nil {
		return nil, 0, nil, err
	}
	return x, axis, scale, nil
}

// makeLayerNorm implements LayerNormalization (opset 17): normalises over the axes from
// axis to the last, then applies scale and the optional bias. The optional Mean and
// InvStdDev outputs have the input's shape with the normalized axes set to 1.
func makeLayerNorm(n *graph.Node) (kernel, error) {
	axisAttr := n.Int("axis", -1)
	eps := float64(n.Float("epsilon", 1e-5))
	nout := len(n.Outputs)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x, axis, scale, err := normArgs(e, in, axisAttr)
		if err != nil {
			return nil, err
		}
		norm := x.Shape[axis:]
		var bias []float32
		if len(in) > 2 {
			if bias, err = vectorArg(e, in[2], norm, "bias"); err != nil {
				return nil, err
			}
		}
		y, err := e.allocOverwrite(tensor.Float32, x.Shape)
		if err != nil {
			return nil, err
		}
		statShape := append([]int{}, x.Shape...)
		for i := axis; i < len(statShape); i++ {
			statShape[i] = 1
		}
		rows, d := graph.NumElements(x.Shape[:axis]), graph.NumElements(norm)
		var mean, inv []float32
		outs := []*tensor.Tensor{y}
		if nout > 1 {
			mt, _ := e.alloc(tensor.Float32, statShape)
			it, _ := e.alloc(tensor.Float32, statShape)
			mean, inv = mt.F32, it.F32
			outs = append(outs, mt, it)
		}
		if d == 0 {
			return outs, nil
		}
		workpool.For(e.threads, rows, max(1, elemGrain/(2*d)), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				src, dst := x.F32[r*d:(r+1)*d], y.F32[r*d:(r+1)*d]
				if eps32 := float32(eps); float64(eps32) == eps {
					// The SIMD two-pass row of package vec (float32 statistics in 16 lanes).
					mu, is := vec.LayerNorm(dst, src, scale, bias, eps32)
					if mean != nil {
						mean[r], inv[r] = mu, is
					}
					continue
				}
				s := 0.0
				for _, v := range src {
					s += float64(v)
				}
				mu := s / float64(d)
				ss := 0.0
				for _, v := range src {
					dv := float64(v) - mu
					ss += dv * dv
				}
				is := 1 / math.Sqrt(ss/float64(d)+eps)
				if bias != nil {
					for i, v := range src {
						dst[i] = float32((float64(v)-mu)*is*float64(scale[i]) + float64(bias[i]))
					}
				} else {
					for i, v := range src {
						dst[i] = float32((float64(v) - mu) * is * float64(scale[i]))
					}
				}
				if mean != nil {
					mean[r], inv[r] = float32(mu), float32(is)
				}
			}
		})
		return outs, nil
	}, nil
}

// reduceKind selects a reduction.
type reduceKind int

const (
	reduceSum reduceKind = iota
	reduceMean
	reduceMax
)

// reduceOp implements ReduceSum, ReduceMean and ReduceMax with keepdims (default 1) and
// noop_with_empty_axes (default 0). Axes come from input 1 (ReduceSum since opset 13, all
// three since opset 18) or from the axes attribute (ReduceMean and ReduceMax in opset 17).
func reduceOp(kind reduceKind) kernelMaker {
	return func(n *graph.Node) (kernel, error) {
		keep := n.Int("keepdims", 1) != 0
		noop := n.Int("noop_with_empty_axes", 0) != 0
		return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if err := need(in, 1); err != nil {
				return nil, err
			}
			x := in[0]
			axes, _, err := axesArg(n, in, 1)
			if err != nil {
				return nil, err
			}
			r := len(x.Shape)
			if len(axes) == 0 && noop {
				return []*tensor.Tensor{x}, nil
			}
			mark := make([]bool, r)
			if len(axes) == 0 {
				fill(mark, true)
			} else if mark, err = axisMask(axes, r); err != nil {
				return nil, err
			}
			return one(reduce(e, x, mark, keep, kind))
		}, nil
	}
}

func reduce(e *exec, x *tensor.Tensor, mark []bool, keep bool, kind reduceKind) (*tensor.Tensor, error) {
	if out, ok, err := reduceRun(e, x, mark, keep, kind); ok || err != nil {
		return out, err
	}
	return reduceGeneric(e, x, mark, keep, kind)
}

// reduceGeneric reduces any axes: it moves them last (a strided copy unless they already
// are) and reduces each contiguous block.
func reduceGeneric(e *exec, x *tensor.Tensor, mark []bool, keep bool, kind reduceKind) (*tensor.Tensor, error) {
	if x.DType != tensor.Float32 && !isInt(x.DType) {
		return nil, fmt.Errorf("dtype %v is not supported", x.DType)
	}
	var outShape, keptDims, redDims, perm []int
	for i, d := range x.Shape {
		if mark[i] {
			redDims = append(redDims, d)
			if keep {
				outShape = append(outShape, 1)
			}
		} else {
			keptDims = append(keptDims, d)
			outShape = append(outShape, d)
			perm = append(perm, i)
		}
	}
	for i := range x.Shape {
		if mark[i] {
			perm = append(perm, i)
		}
	}
	trailing := true // the reduced axes are already the last ones
	for i := 0; i < len(x.Shape)-len(redDims); i++ {
		if mark[i] {
			trailing = false
		}
	}
	src := x
	if !trailing {
		// Move the reduced axes last so that every output element reduces a contiguous block.
		st := tensor.Strides(x.Shape)
		shape := make([]int, len(perm))
		strides := make([]int, len(perm))
		for i, ax := range perm {
			shape[i], strides[i] = x.Shape[ax], st[ax]
		}
		var err error
		if src, err = copyStrided(e, x, shape, 0, strides); err != nil {
			return nil, err
		}
	}
	out, err := e.allocOverwrite(x.DType, outShape)
	if err != nil {
		return nil, err
	}
	rows, d := graph.NumElements(keptDims), graph.NumElements(redDims)
	grain := max(1, elemGrain/max(d, 1))
	if x.DType == tensor.Float32 {
		workpool.For(e.threads, rows, grain, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				out.F32[r] = reduceRowF(src.F32[r*d:(r+1)*d], kind)
			}
		})
	} else {
		workpool.For(e.threads, rows, grain, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				out.I64[r] = reduceRowI(src.I64[r*d:(r+1)*d], kind)
			}
		})
	}
	return out, nil
}

func reduceRowF(v []float32, kind reduceKind) float32 {
	switch kind {
	case reduceMax:
		m := float32(math.Inf(-1))
		for _, x := range v {
			if x != x {
				return x
			}
			if x > m {
				m = x
			}
		}
		return m
	case reduceMean:
		s := 0.0
		for _, x := range v {
			s += float64(x)
		}
		return float32(s / float64(len(v)))
	default:
		s := 0.0
		for _, x := range v {
			s += float64(x)
		}
		return float32(s)
	}
}

func reduceRowI(v []int64, kind reduceKind) int64 {
	switch kind {
	case reduceMax:
		m := int64(math.MinInt64)
		for _, x := range v {
			if x > m {
				m = x
			}
		}
		return m
	default:
		var s int64
		for _, x := range v {
			s += x
		}
		if kind == reduceMean && len(v) > 0 {
			s /= int64(len(v))
		}
		return s
	}
}
