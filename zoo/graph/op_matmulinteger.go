package graph

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// MatMulInteger: (A − a_zero_point) · (B − b_zero_point) in int32, numpy matmul shapes, with
// per-tensor zero points or per-row (A) and per-column (B) ones.

func init() {
	register(&OpDef{
		Name: "MatMulInteger", SinceVersion: 10, ThroughVersion: LatestOpset,
		Doc:     "int32 product (A − a_zero_point)(B − b_zero_point) of int8/uint8 matrices",
		Inputs:  ps(req("A"), req("B"), opt("a_zero_point"), opt("b_zero_point")),
		Outputs: ps(req("Y")),
		infer:   (*nodeCtx).matmulInteger,
		Eval:    evalMatMulInteger,
		Cost:    matmulIntegerCost,
		Grad:    NoGrad,
	})
}

func (c *nodeCtx) matmulInteger() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i, v := range []*absVal{a, b, c.arg(2), c.arg(3)} {
		if v != nil && v.dt != tensor.Int8 && v.dt != tensor.Uint8 {
			return nil, fmt.Errorf("input %q has dtype %v, want int8 or uint8", c.name(i), v.dt)
		}
	}
	if z := c.arg(2); z != nil && z.dt != a.dt {
		return nil, fmt.Errorf("a_zero_point %q has dtype %v, A has %v", c.name(2), z.dt, a.dt)
	}
	if z := c.arg(3); z != nil && z.dt != b.dt {
		return nil, fmt.Errorf("b_zero_point %q has dtype %v, B has %v", c.name(3), z.dt, b.dt)
	}
	if (a.shape != nil && len(a.shape) < 2) || (b.shape != nil && len(b.shape) < 2) {
		return nil, fmt.Errorf("MatMulInteger operands must have rank ≥ 2, got %v and %v", a.shape, b.shape)
	}
	for i, z := range []*absVal{c.arg(2), c.arg(3)} {
		if z != nil && z.shape != nil && len(z.shape) > 1 {
			return nil, fmt.Errorf("zero point %q has shape %v; zoo reads scalar and 1-D zero points", c.name(2+i), z.shape)
		}
	}
	out, err := matmulShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	return one(mk(tensor.Int32, out)), nil
}

func evalMatMulInteger(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, b, az, bz := in[0], in[1], optIn(in, 2), optIn(in, 3)
	ra, rb := len(a.Shape), len(b.Shape)
	m, k, nn := a.Shape[ra-2], a.Shape[ra-1], b.Shape[rb-1]
	batch, err := BroadcastShapes(a.Shape[:ra-2], b.Shape[:rb-2])
	if err != nil {
		return nil, err
	}
	if az != nil && az.Len() != 1 && az.Len() != m {
		return nil, fmt.Errorf("a_zero_point has %d entries for %d rows", az.Len(), m)
	}
	if bz != nil && bz.Len() != 1 && bz.Len() != nn {
		return nil, fmt.Errorf("b_zero_point has %d entries for %d columns", bz.Len(), nn)
	}
	zp := func(z *tensor.Tensor, i int) int64 {
		switch {
		case z == nil:
			return 0
		case z.Len() == 1:
			return z.I64[0]
		}
		return z.I64[i]
	}
	out, err := newTensor(tensor.Int32, append(append([]int{}, batch...), m, nn))
	if err != nil {
		return nil, err
	}
	aOff := batchOffsets(batch, a.Shape[:ra-2], m*k)
	bOff := batchOffsets(batch, b.Shape[:rb-2], k*nn)
	for bi := range aOff {
		o := out.I64[bi*m*nn:]
		for i := 0; i < m; i++ {
			za := zp(az, i)
			for j := 0; j < nn; j++ {
				zb := zp(bz, j)
				var s int64
				for p := 0; p < k; p++ {
					s += (a.I64[aOff[bi]+i*k+p] - za) * (b.I64[bOff[bi]+p*nn+j] - zb)
				}
				o[i*nn+j] = int64(int32(s))
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// batchOffsets returns, for every index of the broadcast batch shape, the element offset of
// the matching matrix in an operand with batch shape own and matrices of size mat.
func batchOffsets(batch, own []int, mat int) []int {
	offs := make([]int, NumElements(batch))
	st := tensor.Strides(own)
	lead := len(batch) - len(own)
	_ = forIndex(batch, func(o int, idx []int) error {
		off := 0
		for j, d := range own {
			if d != 1 {
				off += idx[lead+j] * st[j]
			}
		}
		offs[o] = off * mat
		return nil
	})
	return offs
}

func matmulIntegerCost(n *Node, in, out []TensorType) (OpCost, error) {
	if len(in) < 2 || len(out) < 1 || len(in[0].Shape) < 2 {
		return OpCost{}, fmt.Errorf("MatMulInteger cost needs both operands")
	}
	e, err := out[0].elems()
	if err != nil {
		return OpCost{}, err
	}
	f, err := mulChecked(e, int64(in[0].Shape[len(in[0].Shape)-1]), 2)
	return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, err
}
