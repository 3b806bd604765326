package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Shared rules of the quantized, convolution and ONNX Runtime contrib ops (op_quantize*.go,
// op_matmulinteger.go, op_conv.go, op_trilu.go, op_ms_*.go).

// MicrosoftDomain is the operator set of ONNX Runtime's contrib ops.
const MicrosoftDomain = "com.microsoft"

// quantRange returns the representable range of a quantized integer type.
func quantRange(dt tensor.DType) (lo, hi float64, ok bool) {
	switch dt {
	case tensor.Uint8:
		return 0, 255, true
	case tensor.Int8:
		return -128, 127, true
	case tensor.Int32:
		return math.MinInt32, math.MaxInt32, true
	}
	return 0, 0, false
}

// quantize is ONNX's saturate(round_half_to_even(v) + zp) into the range of dt.
func quantize(v float64, zp int64, lo, hi float64) int64 {
	q := math.RoundToEven(v) + float64(zp)
	if math.IsNaN(q) {
		return 0
	}
	return int64(math.Max(lo, math.Min(hi, q)))
}

// wantFloats returns an error naming the first present input among idx that is not float32.
func (c *nodeCtx) wantFloats(idx ...int) error {
	for _, i := range idx {
		if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
			return fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	return nil
}

// wantRank returns an error when v's rank is known and not among ranks.
func (c *nodeCtx) wantRank(i int, what string, ranks ...int) error {
	v := c.arg(i)
	if v == nil || v.shape == nil {
		return nil
	}
	for _, r := range ranks {
		if len(v.shape) == r {
			return nil
		}
	}
	return fmt.Errorf("%s %q has shape %v, want rank %v", what, c.name(i), v.shape, ranks)
}

// dimOf returns dimension i of v's shape, or an unknown dimension.
func dimOf(v *absVal, i int) Dim {
	if v == nil || v.shape == nil || i < 0 || i >= len(v.shape) {
		return unknownDim
	}
	return v.shape[i]
}

// sameDim reports an error when two dimensions are both known and differ.
func sameDim(a, b Dim, what string) error {
	if a.Known() && b.Known() && a.Size != b.Size {
		return fmt.Errorf("%s: %d vs %d", what, a.Size, b.Size)
	}
	return nil
}

// optIn returns in[i], or nil when the node has no such input.
func optIn(in []*tensor.Tensor, i int) *tensor.Tensor {
	if i < len(in) {
		return in[i]
	}
	return nil
}

// gelu is the erf GELU in float64.
func gelu(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// layerNormRow normalizes x (one row) into y with gamma and beta (nil: none), in float64,
// and returns the mean and 1/sqrt(var+eps).
func layerNormRow(y, x, gamma, beta []float32, eps float64) (mean, inv float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	var vs float64
	for _, v := range x {
		d := float64(v) - mean
		vs += d * d
	}
	inv = 1 / math.Sqrt(vs/float64(len(x))+eps)
	for i, v := range x {
		r := (float64(v) - mean) * inv * float64(gamma[i])
		if beta != nil {
			r += float64(beta[i])
		}
		y[i] = float32(r)
	}
	return mean, inv
}
