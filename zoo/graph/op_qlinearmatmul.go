package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// QLinearMatMul: the int32 product C = (a − a_zero_point)(b − b_zero_point) of MatMulInteger,
// requantized into y's type: y = saturate(round_half_to_even(float32(C) · M) + y_zero_point)
// with M = float32(a_scale · b_scale) / y_scale, all in float32 as ONNX Runtime's kernel
// computes it (the ONNX reference leaves the float width open). Scales and zero points of a
// and y are scalars or per row (M entries), those of b scalars or per column (N entries).

func init() {
	register(&OpDef{
		Name: "QLinearMatMul", SinceVersion: 10, ThroughVersion: LatestOpset,
		Doc: "int8/uint8 matrix product requantized to y's scale and zero point",
		Inputs: ps(req("a"), req("a_scale"), req("a_zero_point"), req("b"), req("b_scale"), req("b_zero_point"),
			req("y_scale"), req("y_zero_point")),
		Outputs: ps(req("y")),
		infer:   (*nodeCtx).qlinearMatMul,
		Eval:    evalQLinearMatMul,
		Cost:    matmulIntegerCost,
		Grad:    NoGrad,
	})
}

func (c *nodeCtx) qlinearMatMul() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(3)
	if err != nil {
		return nil, err
	}
	y, err := c.req(7)
	if err != nil {
		return nil, err
	}
	for _, i := range []int{0, 2, 3, 5, 7} {
		if v := c.arg(i); v.dt != tensor.Int8 && v.dt != tensor.Uint8 {
			return nil, fmt.Errorf("input %q has dtype %v, want int8 or uint8", c.name(i), v.dt)
		}
	}
	for _, p := range [][2]int{{0, 2}, {3, 5}} {
		if c.arg(p[0]).dt != c.arg(p[1]).dt {
			return nil, fmt.Errorf("zero point %q has dtype %v, its operand %v", c.name(p[1]), c.arg(p[1]).dt, c.arg(p[0]).dt)
		}
	}
	for i := 1; i < 8; i++ {
		v := c.arg(i)
		if i == 1 || i == 4 || i == 6 {
			if v.dt != tensor.Float32 {
				return nil, fmt.Errorf("scale %q has dtype %v, want float32", c.name(i), v.dt)
			}
		}
		if v.shape != nil && len(v.shape) > 1 && i != 3 {
			return nil, fmt.Errorf("%q has shape %v: scales and zero points are scalars or vectors", c.name(i), v.shape)
		}
	}
	if (a.shape != nil && len(a.shape) < 2) || (b.shape != nil && len(b.shape) < 2) {
		return nil, fmt.Errorf("QLinearMatMul operands must have rank ≥ 2, got %v and %v", a.shape, b.shape)
	}
	out, err := matmulShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	return one(mk(y.dt, out)), nil
}

func evalQLinearMatMul(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, as, az, b, bs, bz, ys, yz := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
	ra, rb := len(a.Shape), len(b.Shape)
	if ra < 2 || rb < 2 {
		return nil, fmt.Errorf("QLinearMatMul operands must have rank ≥ 2, got %v and %v", a.Shape, b.Shape)
	}
	m, nn := a.Shape[ra-2], b.Shape[rb-1]
	for _, v := range []struct {
		t    *tensor.Tensor
		want int
		what string
	}{{as, m, "a_scale"}, {az, m, "a_zero_point"}, {ys, m, "y_scale"}, {yz, m, "y_zero_point"}, {bs, nn, "b_scale"}, {bz, nn, "b_zero_point"}} {
		if v.t.Len() != 1 && v.t.Len() != v.want {
			return nil, fmt.Errorf("%s has %d entries, want 1 or %d", v.what, v.t.Len(), v.want)
		}
	}
	acc, err := evalMatMulInteger(n, []*tensor.Tensor{a, b, az, bz})
	if err != nil {
		return nil, err
	}
	c := acc[0]
	out, err := newTensor(yz.DType, c.Shape)
	if err != nil {
		return nil, err
	}
	at := func(t *tensor.Tensor, i int) int {
		if t.Len() == 1 {
			return 0
		}
		return i
	}
	for o, v := range c.I64 {
		i, j := (o/nn)%m, o%nn
		mult := QLinearMultiplier(as.F32[at(as, i)], bs.F32[at(bs, j)], ys.F32[at(ys, i)])
		out.I64[o] = QLinearRequantize(int32(v), mult, yz.I64[at(yz, i)], yz.DType)
	}
	return []*tensor.Tensor{out}, nil
}

// QLinearMultiplier is QLinearMatMul's requantization factor float32(aScale · bScale) /
// yScale, computed in float32 as evalQLinearMatMul does, for kernels that must agree with it.
func QLinearMultiplier(aScale, bScale, yScale float32) float32 {
	return float32(aScale*bScale) / yScale
}

// QLinearRequantize is QLinearMatMul's output for an int32 product c: saturate(round half to
// even(float32(c) · mult) + zp) into the range of dt (int8 or uint8; anything else returns 0).
func QLinearRequantize(c int32, mult float32, zp int64, dt tensor.DType) int64 {
	lo, hi, ok := quantRange(dt)
	if !ok {
		return 0
	}
	return quantize(float64(float32(float32(c)*mult)), zp, lo, hi)
}
