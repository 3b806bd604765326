package graph

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Matrix products: MatMul (numpy semantics) and Gemm.

func init() {
	register(&OpDef{
		Name: "MatMul", SinceVersion: 9, ThroughVersion: LatestOpset,
		Doc:    "numpy matmul: batched over broadcast leading axes, 1-D operands promoted and the added axis removed",
		Inputs: ps(req("A"), req("B")), Outputs: ps(req("Y")),
		infer:   (*nodeCtx).matmul,
		Eval:    evalMatMul,
		Float64: true,
		Cost: func(n *Node, in, out []TensorType) (OpCost, error) {
			a := in[0].Shape
			if len(a) == 0 || len(in[1].Shape) == 0 {
				return OpCost{}, errors.New("MatMul operand is a scalar")
			}
			o, err := out[0].elems()
			if err != nil {
				return OpCost{}, err
			}
			// Every output element takes K multiply-adds.
			f, err := mulChecked(o, int64(a[len(a)-1]), 2)
			return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, err
		},
		Grad: gradMatMul,
	})
	register(&OpDef{
		Name: "Gemm", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "alpha·A'·B' + beta·C for 2-D A and B (transposed by transA, transB), C broadcast to (M, N)",
		Inputs: ps(req("A"), req("B"), opt("C")), Outputs: ps(req("Y")),
		Attrs: []AttrDef{floatAttr("alpha", 1), floatAttr("beta", 1), intAttr("transA", 0), intAttr("transB", 0)},
		infer: (*nodeCtx).gemm,
		Eval:  evalGemm,
		Cost: func(n *Node, in, out []TensorType) (OpCost, error) {
			a := in[0].Shape
			if len(a) != 2 {
				return OpCost{}, fmt.Errorf("Gemm operand A has rank %d", len(a))
			}
			k := a[1]
			if attrInt(n, "transA") != 0 {
				k = a[0]
			}
			o, err := out[0].elems()
			if err != nil {
				return OpCost{}, err
			}
			f, err := mulChecked(o, int64(k), 2)
			if err != nil {
				return OpCost{}, err
			}
			if len(in) > 2 && in[2].DType != tensor.Invalid {
				f += o
			}
			return OpCost{FLOPs: f, Bytes: ioBytes(in, out)}, nil
		},
		Grad: gradGemm,
	})
}

// evalMatMul multiplies in float64 and rounds each output element once.
func evalMatMul(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, b := in[0], in[1]
	if len(a.Shape) == 0 || len(b.Shape) == 0 {
		return nil, errors.New("MatMul operands must have rank ≥ 1")
	}
	as, bs := a.Shape, b.Shape
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	m, k := as[len(as)-2], as[len(as)-1]
	k2, nn := bs[len(bs)-2], bs[len(bs)-1]
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s × %s", tensor.ShapeString(a.Shape), tensor.ShapeString(b.Shape))
	}
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	batch, err := BroadcastShapes(ab, bb)
	if err != nil {
		return nil, err
	}
	full := append(append([]int{}, batch...), m, nn)
	out, err := newTensor(a.DType, full)
	if err != nil {
		return nil, err
	}
	shapes := []*tensor.Tensor{{Shape: ab}, {Shape: bb}}
	err = broadcastEach(batch, shapes, func(o int, off []int) error {
		ao, bo, oo := off[0]*m*k, off[1]*k*nn, o*m*nn
		for i := 0; i < m; i++ {
			for j := 0; j < nn; j++ {
				var s float64
				for p := 0; p < k; p++ {
					s += numAt(a, ao+i*k+p) * numAt(b, bo+p*nn+j)
				}
				setNum(out, oo+i*nn+j, s)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	shape := append([]int{}, batch...)
	if len(a.Shape) > 1 {
		shape = append(shape, m)
	}
	if len(b.Shape) > 1 {
		shape = append(shape, nn)
	}
	out.Shape = shape
	return []*tensor.Tensor{out}, nil
}

// evalGemm computes alpha·A'·B' + beta·C in float64 and rounds once.
func evalGemm(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, b := in[0], in[1]
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, errors.New("Gemm operands must be 2-D")
	}
	alpha, beta := f64(attrFloat(n, "alpha")), f64(attrFloat(n, "beta"))
	ta, tb := attrInt(n, "transA") != 0, attrInt(n, "transB") != 0
	m, k := a.Shape[0], a.Shape[1]
	if ta {
		m, k = k, m
	}
	k2, nn := b.Shape[0], b.Shape[1]
	if tb {
		k2, nn = nn, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s × %s", tensor.ShapeString(a.Shape), tensor.ShapeString(b.Shape))
	}
	at := func(i, p int) float64 {
		if ta {
			return f64(a.F32[p*m+i])
		}
		return f64(a.F32[i*k+p])
	}
	bt := func(p, j int) float64 {
		if tb {
			return f64(b.F32[j*k+p])
		}
		return f64(b.F32[p*nn+j])
	}
	out, err := newTensor(tensor.Float32, []int{m, nn})
	if err != nil {
		return nil, err
	}
	var cOff []int
	if len(in) > 2 && in[2] != nil {
		c := in[2]
		if s, err := BroadcastShapes([]int{m, nn}, c.Shape); err != nil || !tensor.SameShape(s, []int{m, nn}) {
			return nil, fmt.Errorf("C has shape %s, which does not broadcast to (M, N) = (%d, %d)", tensor.ShapeString(c.Shape), m, nn)
		}
		cOff = make([]int, m*nn)
		_ = broadcastEach([]int{m, nn}, in[2:3], func(o int, off []int) error {
			cOff[o] = off[0]
			return nil
		})
	}
	for i := 0; i < m; i++ {
		for j := 0; j < nn; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
			}
			s *= alpha
			if cOff != nil {
				s += beta * f64(in[2].F32[cOff[i*nn+j]])
			}
			out.F32[i*nn+j] = float32(s)
		}
	}
	return []*tensor.Tensor{out}, nil
}

// ---- inference ----

func (c *nodeCtx) matmul() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i, v := range []*absVal{a, b} {
		if !isFloatVal(v.dt) || v.dt != a.dt {
			return nil, fmt.Errorf("input %q has dtype %v, want float32 (or float64 for both)", c.name(i), v.dt)
		}
	}
	out, err := matmulShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	return one(mk(a.dt, out)), nil
}

// matmulShape is numpy matmul's output shape.
func matmulShape(a, b Shape) (Shape, error) {
	if a == nil || b == nil {
		return nil, nil
	}
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("MatMul operands must have rank ≥ 1, got %v and %v", a, b)
	}
	aa, bb := a, b
	if len(aa) == 1 {
		aa = Shape{Fixed(1), aa[0]}
	}
	if len(bb) == 1 {
		bb = Shape{bb[0], Fixed(1)}
	}
	ka, kb := aa[len(aa)-1], bb[len(bb)-2]
	if ka.Known() && kb.Known() && ka.Size != kb.Size {
		return nil, fmt.Errorf("inner dimensions differ: %v × %v (%d vs %d)", a, b, ka.Size, kb.Size)
	}
	batch, err := Broadcast(aa[:len(aa)-2], bb[:len(bb)-2])
	if err != nil {
		return nil, fmt.Errorf("batch dimensions of %v and %v: %w", a, b, err)
	}
	out := append(Shape{}, batch...)
	if len(a) > 1 {
		out = append(out, aa[len(aa)-2])
	}
	if len(b) > 1 {
		out = append(out, bb[len(bb)-1])
	}
	return out, nil
}

func (c *nodeCtx) gemm() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i := range c.in {
		if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	if a.shape == nil || b.shape == nil {
		return one(mk(tensor.Float32, Shape{unknownDim, unknownDim})), nil
	}
	if len(a.shape) != 2 || len(b.shape) != 2 {
		return nil, fmt.Errorf("Gemm operands must be 2-D, got %v and %v", a.shape, b.shape)
	}
	m, ka := a.shape[0], a.shape[1]
	if attrInt(c.n, "transA") != 0 {
		m, ka = ka, m
	}
	kb, n := b.shape[0], b.shape[1]
	if attrInt(c.n, "transB") != 0 {
		kb, n = n, kb
	}
	if ka.Known() && kb.Known() && ka.Size != kb.Size {
		return nil, fmt.Errorf("inner dimensions differ: %v × %v (%d vs %d, after transA/transB)", a.shape, b.shape, ka.Size, kb.Size)
	}
	out := Shape{m, n}
	if cv := c.arg(2); cv != nil && cv.shape != nil {
		bs, err := Broadcast(out, cv.shape)
		if err != nil {
			return nil, fmt.Errorf("C: %w", err)
		}
		if len(cv.shape) > 2 {
			return nil, fmt.Errorf("C has shape %v, which does not broadcast to (M, N) = %v", cv.shape, out)
		}
		for i := range out {
			if bs[i].Known() && out[i].Known() && bs[i].Size != out[i].Size {
				return nil, fmt.Errorf("C has shape %v, which does not broadcast to (M, N) = %v", cv.shape, out)
			}
		}
	}
	return one(mk(tensor.Float32, out)), nil
}
