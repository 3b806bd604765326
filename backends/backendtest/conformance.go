// Package backendtest is the conformance suite every zoo backend must pass. Each case is a
// small graph (usually one op) built with zoo/graph's Builder, with inputs and expected
// outputs embedded in the table; the expected values were computed independently of any
// backend (by hand, or in float64 and rounded). A backend's test calls Run.
package backendtest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Tolerance is the largest absolute difference allowed between a float32 output and its
// expected value (scaled by the value's magnitude above 1).
const Tolerance = 1e-5

// Arg is one input of a case's op: a run-time graph input, a constant initializer, or an
// omitted optional input.
type Arg struct {
	T     *tensor.Tensor
	Const bool
	Omit  bool
}

// In returns a run-time input.
func In(t *tensor.Tensor) Arg { return Arg{T: t} }

// Const returns an input held as an initializer.
func Const(t *tensor.Tensor) Arg { return Arg{T: t, Const: true} }

// Omitted returns an omitted optional input.
func Omitted() Arg { return Arg{Omit: true} }

// Case is one conformance check: op applied to Args with Attrs must give Want (one tensor
// per output), or fail at compile or run time when WantErr is set.
type Case struct {
	Name    string
	Op      string
	Attrs   graph.Attrs
	Args    []Arg
	Want    []*tensor.Tensor
	WantErr bool
}

// F32 returns a float32 tensor of shape with values v.
func F32(shape []int, v ...float32) *tensor.Tensor {
	t, err := tensor.FromFloat32(v, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// I64 returns an int64 tensor of shape with values v.
func I64(shape []int, v ...int64) *tensor.Tensor {
	t, err := tensor.FromInt64(v, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// Bools returns a bool tensor of shape with values v.
func Bools(shape []int, v ...bool) *tensor.Tensor {
	t, err := tensor.FromBool(v, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// S is shorthand for a shape literal.
func S(d ...int) []int {
	if d == nil {
		return []int{}
	}
	return d
}

var (
	inf    = float32(math.Inf(1))
	nan    = float32(math.NaN())
	maxI64 = int64(math.MaxInt64)
	minI64 = int64(math.MinInt64)
)

func iota32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return v
}

func c1(name, op string, attrs graph.Attrs, x, want *tensor.Tensor) Case {
	return Case{Name: name, Op: op, Attrs: attrs, Args: []Arg{In(x)}, Want: []*tensor.Tensor{want}}
}

func c2(name, op string, attrs graph.Attrs, a, b, want *tensor.Tensor) Case {
	return Case{Name: name, Op: op, Attrs: attrs, Args: []Arg{In(a), In(b)}, Want: []*tensor.Tensor{want}}
}

// Cases returns the conformance table.
func Cases() []Case {
	matA := F32(S(2, 3), 1, 2, 3, 4, 5, 6)
	bmmA := F32(S(2, 1, 2, 3), iota32(12)...)
	bmmBv := make([]float32, 18)
	for i := range bmmBv {
		bmmBv[i] = float32(i%5 - 2)
	}
	bmmB := F32(S(3, 3, 2), bmmBv...)
	x234 := F32(S(2, 3, 4), iota32(24)...)
	cases := []Case{
		// unary
		c1("Abs", "Abs", nil, F32(S(2, 2), -1.5, 0, 2, float32(math.Copysign(0, -1))), F32(S(2, 2), 1.5, 0, 2, 0)),
		c1("Abs/int64", "Abs", nil, I64(S(2), -3, 4), I64(S(2), 3, 4)),
		c1("Neg", "Neg", nil, F32(S(3), 1, -2, 0.5), F32(S(3), -1, 2, -0.5)),
		c1("Neg/int64", "Neg", nil, I64(S(2), 5, -7), I64(S(2), -5, 7)),
		c1("Exp", "Exp", nil, F32(S(3), 0, 1, -1), F32(S(3), 1, 2.71828183, 0.367879441)),
		c1("Exp/scalar", "Exp", nil, F32(S(), 0), F32(S(), 1)),
		c1("Log", "Log", nil, F32(S(3), 1, 2.7182817, 0.5), F32(S(3), 0, 0.999999953, -0.693147181)),
		c1("Log/zero", "Log", nil, F32(S(1), 0), F32(S(1), -inf)),
		c1("Sqrt", "Sqrt", nil, F32(S(3), 0, 4, 2), F32(S(3), 0, 2, 1.41421356)),
		c1("Erf", "Erf", nil, F32(S(4), 0, 0.5, -1, 2), F32(S(4), 0, 0.520499878, -0.842700793, 0.995322265)),
		c1("Tanh", "Tanh", nil, F32(S(3), 0, 0.5, -2), F32(S(3), 0, 0.462117157, -0.96402758)),
		c1("Sigmoid", "Sigmoid", nil, F32(S(3), 0, 2, -3), F32(S(3), 0.5, 0.880797078, 0.0474258732)),
		c1("Sigmoid/extreme", "Sigmoid", nil, F32(S(2), -200, 200), F32(S(2), 0, 1)),
		c1("Relu", "Relu", nil, F32(S(1, 3), -1, 0, 3.5), F32(S(1, 3), 0, 0, 3.5)),
		c1("Elu", "Elu", nil, F32(S(3), -1, 0, 2), F32(S(3), -0.632120559, 0, 2)),
		c1("Elu/alpha", "Elu", graph.Attrs{"alpha": graph.Float(2)}, F32(S(3), -1, 0, 2), F32(S(3), -1.26424112, 0, 2)),
		c1("Not", "Not", nil, Bools(S(2), true, false), Bools(S(2), false, true)),

		// binary arithmetic with broadcasting
		c2("Add", "Add", nil, F32(S(2, 2), 1, 2, 3, 4), F32(S(2, 2), 10, 20, 30, 40), F32(S(2, 2), 11, 22, 33, 44)),
		c2("Add/row", "Add", nil, matA, F32(S(3), 10, 20, 30), F32(S(2, 3), 11, 22, 33, 14, 25, 36)),
		c2("Add/outer", "Add", nil, F32(S(2, 1), 1, 2), F32(S(1, 3), 10, 20, 30), F32(S(2, 3), 11, 21, 31, 12, 22, 32)),
		c2("Add/scalar", "Add", nil, F32(S(), 1), matA, F32(S(2, 3), 2, 3, 4, 5, 6, 7)),
		c2("Add/rank-up", "Add", nil, F32(S(2, 1, 1), 100, 200), F32(S(3, 1), 1, 2, 3), F32(S(2, 3, 1), 101, 102, 103, 201, 202, 203)),
		c2("Add/int64", "Add", nil, I64(S(2), 1, -2), I64(S(1), 5), I64(S(2), 6, 3)),
		c2("Add/bad-shapes", "Add", nil, F32(S(2), 1, 2), F32(S(3), 1, 2, 3), nil),
		c2("Sub", "Sub", nil, F32(S(3, 1), 1, 2, 3), F32(S(2), 1, 10), F32(S(3, 2), 0, -9, 1, -8, 2, -7)),
		c2("Mul", "Mul", nil, matA, F32(S(1), 0.5), F32(S(2, 3), 0.5, 1, 1.5, 2, 2.5, 3)),
		c2("Mul/int64", "Mul", nil, I64(S(2, 1), 2, 3), I64(S(2), 4, 5), I64(S(2, 2), 8, 10, 12, 15)),
		c2("Div", "Div", nil, F32(S(3), 1, -3, 1), F32(S(3), 4, 2, 0), F32(S(3), 0.25, -1.5, inf)),
		c2("Div/int64", "Div", nil, I64(S(4), 7, -7, 6, 0), I64(S(1), 2), I64(S(4), 3, -3, 3, 0)),
		c2("Pow/square", "Pow", nil, F32(S(3), -3, 0.5, 2), F32(S(), 2), F32(S(3), 9, 0.25, 4)),
		c2("Pow/sqrt", "Pow", nil, F32(S(3), 4, 2, 0), F32(S(1), 0.5), F32(S(3), 2, 1.41421356, 0)),
		c2("Pow/int-exponent", "Pow", nil, F32(S(2), 2, -1.5), I64(S(), 3), F32(S(2), 8, -3.375)),
		c2("Pow/broadcast", "Pow", nil, F32(S(2, 1), 2, 3), F32(S(3), 0, 1, -1), F32(S(2, 3), 1, 2, 0.5, 1, 3, 0.333333333)),
		{Name: "Max/variadic", Op: "Max", Args: []Arg{In(F32(S(2, 1), 1, 5)), In(F32(S(3), 0, 2, 7)), In(F32(S(), 3))},
			Want: []*tensor.Tensor{F32(S(2, 3), 3, 3, 7, 5, 5, 7)}},
		c1("Max/single", "Max", nil, F32(S(2), 1, -1), F32(S(2), 1, -1)),
		c2("Max/nan", "Max", nil, F32(S(2), nan, 1), F32(S(2), 0, nan), F32(S(2), nan, nan)),
		c2("Min", "Min", nil, F32(S(2, 2), 1, 5, -2, 0), F32(S(2), 0, 3), F32(S(2, 2), 0, 3, -2, 0)),
		c2("Min/int64", "Min", nil, I64(S(3), 4, -1, 9), I64(S(1), 2), I64(S(3), 2, -1, 2)),

		// comparisons and logic
		c2("Equal", "Equal", nil, F32(S(3), 1, 2, 3), F32(S(3), 1, 0, 3), Bools(S(3), true, false, true)),
		c2("Equal/int64", "Equal", nil, I64(S(2, 1), 1, 2), I64(S(2), 1, 2), Bools(S(2, 2), true, false, false, true)),
		c2("Equal/bool", "Equal", nil, Bools(S(2), true, false), Bools(S(), false), Bools(S(2), false, true)),
		c2("Greater", "Greater", nil, F32(S(3), 1, 2, 3), F32(S(), 2), Bools(S(3), false, false, true)),
		c2("Less", "Less", nil, I64(S(3), 1, 2, 3), I64(S(1), 2), Bools(S(3), true, false, false)),
		c2("And", "And", nil, Bools(S(2, 2), true, true, false, false), Bools(S(2), true, false), Bools(S(2, 2), true, false, false, false)),
		c2("Or", "Or", nil, Bools(S(2, 2), true, true, false, false), Bools(S(2), true, false), Bools(S(2, 2), true, true, true, false)),
		{Name: "Where", Op: "Where", Args: []Arg{In(Bools(S(2, 1), true, false)), In(F32(S(1, 3), 1, 2, 3)), In(F32(S(), -1))},
			Want: []*tensor.Tensor{F32(S(2, 3), 1, 2, 3, -1, -1, -1)}},
		{Name: "Where/mask", Op: "Where", Args: []Arg{In(Bools(S(1, 3), true, false, true)), In(F32(S(2, 3), iota32(6)...)), Const(F32(S(), -inf))},
			Want: []*tensor.Tensor{F32(S(2, 3), 0, -inf, 2, 3, -inf, 5)}},

		// casts
		c1("Cast/float-int64", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Int64))}, F32(S(3), 1.7, -1.7, 0), I64(S(3), 1, -1, 0)),
		c1("Cast/int64-float", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Float32))}, I64(S(2), 3, -4), F32(S(2), 3, -4)),
		c1("Cast/float-bool", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Bool))}, F32(S(3), 0, 0.5, -2), Bools(S(3), false, true, true)),
		c1("Cast/bool-float", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Float32))}, Bools(S(2), true, false), F32(S(2), 1, 0)),
		c1("Cast/int64-bool", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Bool))}, I64(S(3), 0, 2, -1), Bools(S(3), false, true, true)),
		// Casts to 16-bit floats round to nearest, ties to even (0.48033667 is bfloat16 0.48046875).
		c1("Cast/float-bfloat16", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.BFloat16))}, F32(S(4), 0.48033667, 1.00390625, 1.01171875, -3.1415927),
			&tensor.Tensor{DType: tensor.BFloat16, Shape: S(4), F32: []float32{0.48046875, 1, 1.015625, -3.140625}}),
		c1("Cast/float-float16", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Float16))}, F32(S(3), 1.00048828125, 65520, 1e-8),
			&tensor.Tensor{DType: tensor.Float16, Shape: S(3), F32: []float32{1, inf, 0}}),
		c1("Cast/bool-int64", "Cast", graph.Attrs{"to": graph.Int(int64(tensor.Int64))}, Bools(S(2), false, true), I64(S(2), 0, 1)),

		// constants and shapes
		c1("Identity", "Identity", nil, matA, matA),
		{Name: "Constant/value", Op: "Constant", Attrs: graph.Attrs{"value": graph.TensorAttr(F32(S(2), 1.5, -2))}, Want: []*tensor.Tensor{F32(S(2), 1.5, -2)}},
		{Name: "Constant/value_float", Op: "Constant", Attrs: graph.Attrs{"value_float": graph.Float(3)}, Want: []*tensor.Tensor{F32(S(), 3)}},
		{Name: "Constant/value_ints", Op: "Constant", Attrs: graph.Attrs{"value_ints": graph.Ints(1, -1)}, Want: []*tensor.Tensor{I64(S(2), 1, -1)}},
		c1("ConstantOfShape", "ConstantOfShape", nil, I64(S(2), 2, 3), F32(S(2, 3), 0, 0, 0, 0, 0, 0)),
		c1("ConstantOfShape/int64", "ConstantOfShape", graph.Attrs{"value": graph.TensorAttr(I64(S(1), 7))}, I64(S(1), 2), I64(S(2), 7, 7)),
		c1("Shape", "Shape", nil, x234, I64(S(3), 2, 3, 4)),
		c1("Shape/start", "Shape", graph.Attrs{"start": graph.Int(1)}, x234, I64(S(2), 3, 4)),
		c1("Shape/end", "Shape", graph.Attrs{"end": graph.Int(-1)}, x234, I64(S(2), 2, 3)),
		c1("Shape/scalar", "Shape", nil, F32(S(), 1), I64(S(0))),
		c2("Reshape/zero-and-infer", "Reshape", nil, x234, I64(S(2), 0, -1), F32(S(2, 12), iota32(24)...)),
		c2("Reshape/flat", "Reshape", nil, x234, I64(S(1), -1), F32(S(24), iota32(24)...)),
		c2("Reshape/copy-middle", "Reshape", nil, x234, I64(S(3), 4, 0, 2), F32(S(4, 3, 2), iota32(24)...)),
		c2("Reshape/bad", "Reshape", nil, x234, I64(S(2), 5, -1), nil),
		c2("Squeeze/axes", "Squeeze", nil, F32(S(1, 3, 1), 1, 2, 3), I64(S(1), -1), F32(S(1, 3), 1, 2, 3)),
		c1("Squeeze/all", "Squeeze", nil, F32(S(1, 3, 1), 1, 2, 3), F32(S(3), 1, 2, 3)),
		c2("Squeeze/not-one", "Squeeze", nil, F32(S(1, 3), 1, 2, 3), I64(S(1), 1), nil),
		c2("Unsqueeze", "Unsqueeze", nil, F32(S(3), 1, 2, 3), I64(S(2), 0, -1), F32(S(1, 3, 1), 1, 2, 3)),
		c2("Unsqueeze/scalar", "Unsqueeze", nil, F32(S(), 5), I64(S(1), 0), F32(S(1), 5)),
		c1("Transpose/default", "Transpose", nil, matA, F32(S(3, 2), 1, 4, 2, 5, 3, 6)),
		c1("Transpose/perm", "Transpose", graph.Attrs{"perm": graph.Ints(1, 0, 2)}, F32(S(2, 3, 1), iota32(6)...), F32(S(3, 2, 1), 0, 3, 1, 4, 2, 5)),
		c1("Transpose/heads", "Transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1, 3)}, F32(S(1, 2, 2, 2), iota32(8)...), F32(S(1, 2, 2, 2), 0, 1, 4, 5, 2, 3, 6, 7)),
		{Name: "Concat/axis1", Op: "Concat", Attrs: graph.Attrs{"axis": graph.Int(1)}, Args: []Arg{In(F32(S(2, 1), 1, 2)), In(F32(S(2, 2), 3, 4, 5, 6))},
			Want: []*tensor.Tensor{F32(S(2, 3), 1, 3, 4, 2, 5, 6)}},
		{Name: "Concat/negative-axis", Op: "Concat", Attrs: graph.Attrs{"axis": graph.Int(-1)}, Args: []Arg{In(F32(S(1, 2), 1, 2)), In(F32(S(1, 0))), In(F32(S(1, 1), 3))},
			Want: []*tensor.Tensor{F32(S(1, 3), 1, 2, 3)}},
		{Name: "Concat/int64", Op: "Concat", Attrs: graph.Attrs{"axis": graph.Int(0)}, Args: []Arg{In(I64(S(1), 1)), Const(I64(S(2), 2, 3))},
			Want: []*tensor.Tensor{I64(S(3), 1, 2, 3)}},
		{Name: "Split/equal", Op: "Split", Attrs: graph.Attrs{"axis": graph.Int(1)}, Args: []Arg{In(F32(S(2, 4), iota32(8)...))},
			Want: []*tensor.Tensor{F32(S(2, 2), 0, 1, 4, 5), F32(S(2, 2), 2, 3, 6, 7)}},
		{Name: "Split/sizes", Op: "Split", Attrs: graph.Attrs{"axis": graph.Int(-1)}, Args: []Arg{In(F32(S(2, 3), iota32(6)...)), Const(I64(S(2), 1, 2))},
			Want: []*tensor.Tensor{F32(S(2, 1), 0, 3), F32(S(2, 2), 1, 2, 4, 5)}},
		{Name: "Split/bad-sizes", Op: "Split", Args: []Arg{In(F32(S(3), 1, 2, 3)), Const(I64(S(2), 1, 1))},
			Want: []*tensor.Tensor{nil, nil}, WantErr: true},
		slice("Slice/basic", F32(S(2, 4), iota32(8)...), I64(S(2), 0, 1), I64(S(2), 1, 3), nil, nil, F32(S(1, 2), 1, 2)),
		slice("Slice/negative", F32(S(5), iota32(5)...), I64(S(1), -3), I64(S(1), -1), nil, nil, F32(S(2), 2, 3)),
		slice("Slice/clamped", F32(S(5), iota32(5)...), I64(S(1), 2), I64(S(1), maxI64), nil, nil, F32(S(3), 2, 3, 4)),
		slice("Slice/reverse", F32(S(5), iota32(5)...), I64(S(1), -1), I64(S(1), minI64), nil, I64(S(1), -1), F32(S(5), 4, 3, 2, 1, 0)),
		slice("Slice/step2-axis", F32(S(2, 5), iota32(10)...), I64(S(1), 1), I64(S(1), 100), I64(S(1), -1), I64(S(1), 2), F32(S(2, 2), 1, 3, 6, 8)),
		slice("Slice/neg-step", F32(S(2, 5), iota32(10)...), I64(S(1), 3), I64(S(1), 0), I64(S(1), 1), I64(S(1), -2), F32(S(2, 2), 3, 1, 8, 6)),
		slice("Slice/empty", F32(S(3), 1, 2, 3), I64(S(1), 2), I64(S(1), 1), nil, nil, F32(S(0))),
		// Bounds far outside the axis: negative bounds count from the end, then clamp to
		// [0, dim] for a positive step and to [0, dim-1] (start), [-1, dim-1] (end) for a
		// negative one, so a start below -dim with a negative step takes x[0].
		slice("Slice/neg-step-start-below", F32(S(4), iota32(4)...), I64(S(1), -10), I64(S(1), -20), nil, I64(S(1), -1), F32(S(1), 0)),
		slice("Slice/neg-step-start-above", F32(S(4), iota32(4)...), I64(S(1), 100), I64(S(1), -100), nil, I64(S(1), -1), F32(S(4), 3, 2, 1, 0)),
		slice("Slice/neg-step2-far", F32(S(5), iota32(5)...), I64(S(1), 100), I64(S(1), -100), nil, I64(S(1), -2), F32(S(3), 4, 2, 0)),
		slice("Slice/neg-step-end-above", F32(S(4), iota32(4)...), I64(S(1), -1), I64(S(1), 10), nil, I64(S(1), -1), F32(S(0))),
		slice("Slice/neg-step-end-below", F32(S(4), iota32(4)...), I64(S(1), 2), I64(S(1), -100), nil, I64(S(1), -1), F32(S(3), 2, 1, 0)),
		slice("Slice/start-below", F32(S(4), iota32(4)...), I64(S(1), -100), I64(S(1), 100), nil, nil, F32(S(4), 0, 1, 2, 3)),
		slice("Slice/start-above", F32(S(4), iota32(4)...), I64(S(1), 10), I64(S(1), 20), nil, nil, F32(S(0))),
		slice("Slice/end-below", F32(S(4), iota32(4)...), I64(S(1), 0), I64(S(1), -10), nil, nil, F32(S(0))),
		slice("Slice/neg-step-min-int", F32(S(2, 3), iota32(6)...), I64(S(1), maxI64), I64(S(1), minI64), I64(S(1), 1), I64(S(1), -1), F32(S(2, 3), 2, 1, 0, 5, 4, 3)),
		c2("Gather/axis0", "Gather", nil, F32(S(3, 2), iota32(6)...), I64(S(2), -1, 0), F32(S(2, 2), 4, 5, 0, 1)),
		c2("Gather/axis1-2d", "Gather", graph.Attrs{"axis": graph.Int(1)}, F32(S(2, 3), iota32(6)...), I64(S(2, 2), 2, 0, 1, 1), F32(S(2, 2, 2), 2, 0, 1, 1, 5, 3, 4, 4)),
		c2("Gather/scalar-index", "Gather", nil, F32(S(3, 2), iota32(6)...), I64(S(), 1), F32(S(2), 2, 3)),
		c2("Gather/embedding", "Gather", nil, F32(S(4, 2), iota32(8)...), I64(S(1, 3), 3, 0, 3), F32(S(1, 3, 2), 6, 7, 0, 1, 6, 7)),
		c2("Gather/out-of-range", "Gather", nil, F32(S(3), 1, 2, 3), I64(S(1), 3), nil),
		c2("Expand", "Expand", nil, F32(S(3, 1), 1, 2, 3), I64(S(3), 2, 1, 2), F32(S(2, 3, 2), 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3)),
		c2("Expand/smaller-shape", "Expand", nil, F32(S(2, 2), 1, 2, 3, 4), I64(S(1), 2), F32(S(2, 2), 1, 2, 3, 4)),
		c2("Tile", "Tile", nil, F32(S(2, 2), 1, 2, 3, 4), I64(S(2), 1, 2), F32(S(2, 4), 1, 2, 1, 2, 3, 4, 3, 4)),
		c2("Tile/rows", "Tile", nil, F32(S(1, 2), 1, 2), I64(S(2), 3, 1), F32(S(3, 2), 1, 2, 1, 2, 1, 2)),
		{Name: "Range/float", Op: "Range", Args: []Arg{In(F32(S(), 0)), In(F32(S(), 1)), In(F32(S(), 0.25))},
			Want: []*tensor.Tensor{F32(S(4), 0, 0.25, 0.5, 0.75)}},
		{Name: "Range/int64-down", Op: "Range", Args: []Arg{In(I64(S(), 10)), In(I64(S(), 4)), In(I64(S(), -3))},
			Want: []*tensor.Tensor{I64(S(2), 10, 7)}},
		{Name: "Range/empty", Op: "Range", Args: []Arg{In(I64(S(), 3)), In(I64(S(), 3)), In(I64(S(), 1))},
			Want: []*tensor.Tensor{I64(S(0))}},

		// matrix products
		c2("MatMul", "MatMul", nil, matA, F32(S(3, 2), 1, 0, 0, 1, 1, 1), F32(S(2, 2), 4, 5, 10, 11)),
		c2("MatMul/vec-mat", "MatMul", nil, F32(S(3), 1, 2, 3), F32(S(3, 2), 1, 0, 0, 1, 1, 1), F32(S(2), 4, 5)),
		c2("MatMul/mat-vec", "MatMul", nil, matA, F32(S(3), 1, 0, -1), F32(S(2), -2, -2)),
		c2("MatMul/dot", "MatMul", nil, F32(S(3), 1, 2, 3), F32(S(3), 4, 5, 6), F32(S(), 32)),
		c2("MatMul/batch-2d", "MatMul", nil, F32(S(2, 1, 3), 1, 2, 3, 4, 5, 6), F32(S(3, 1), 1, 1, 1), F32(S(2, 1, 1), 6, 15)),
		c2("MatMul/2d-batch", "MatMul", nil, F32(S(1, 2), 1, 2), F32(S(2, 2, 1), 1, 2, 3, 4), F32(S(2, 1, 1), 5, 11)),
		c2("MatMul/broadcast-batch", "MatMul", nil, bmmA, bmmB, F32(S(2, 3, 2, 2), 4, -3, 4, -9, -3, 0, -9, 3, 0, -2, 3, -5, 4, -15, 4, -21, -15, 6, -21, 9, 6, -8, 9, -11)),
		c2("MatMul/mismatch", "MatMul", nil, matA, matA, nil),
		{Name: "Gemm/trans-alpha-beta", Op: "Gemm", Attrs: graph.Attrs{"transA": graph.Int(1), "transB": graph.Int(1), "alpha": graph.Float(0.5), "beta": graph.Float(2)},
			Args: []Arg{In(F32(S(3, 2), 1, 2, 3, 4, 5, 6)), In(F32(S(4, 3), -3, -2, -1, 0, 1, 2, 3, -3, -2, -1, 0, 1)), In(F32(S(4), 0.5, -1, 2, 0))},
			Want: []*tensor.Tensor{F32(S(2, 4), -6, 4.5, -4, 2, -9, 6, -5, 2)}},
		{Name: "Gemm/no-C", Op: "Gemm", Args: []Arg{In(matA), In(F32(S(3, 1), 1, 1, 1))},
			Want: []*tensor.Tensor{F32(S(2, 1), 6, 15)}},
		{Name: "Gemm/C-column", Op: "Gemm", Attrs: graph.Attrs{"transB": graph.Int(1)}, Args: []Arg{In(matA), Const(F32(S(2, 3), 1, 0, 0, 0, 0, 1)), Const(F32(S(2, 1), 10, 20))},
			Want: []*tensor.Tensor{F32(S(2, 2), 11, 13, 24, 26)}},

		// normalisation and reductions
		c1("Softmax", "Softmax", nil, F32(S(2, 3), 1, 2, 3, 1000, 1001, 1002), F32(S(2, 3), 0.0900305732, 0.244728471, 0.665240956, 0.0900305732, 0.244728471, 0.665240956)),
		c1("Softmax/masked", "Softmax", graph.Attrs{"axis": graph.Int(-1)}, F32(S(2, 3), 0, -inf, 0, -inf, -inf, -inf), F32(S(2, 3), 0.5, 0, 0.5, nan, nan, nan)),
		c1("Softmax/axis0", "Softmax", graph.Attrs{"axis": graph.Int(0)}, F32(S(2, 2), 1, 2, 3, 5), F32(S(2, 2), 0.119202922, 0.0474258732, 0.880797078, 0.952574127)),
		c1("Softmax/single", "Softmax", nil, F32(S(3, 1), 5, -1, 0), F32(S(3, 1), 1, 1, 1)),
		{Name: "LayerNormalization", Op: "LayerNormalization", Attrs: graph.Attrs{"epsilon": graph.Float(1e-5)},
			Args: []Arg{In(F32(S(2, 3), 1, 2, 3, -1, 0, 4)), Const(F32(S(3), 1, 2, 0.5)), Const(F32(S(3), 0, 1, -1))},
			Want: []*tensor.Tensor{F32(S(2, 3), -1.22473569, 1, -0.387632157, -0.925819108, 0.0741808922, -0.305635669)}},
		{Name: "LayerNormalization/no-bias", Op: "LayerNormalization",
			Args: []Arg{In(F32(S(1, 3), 1, 2, 3)), Const(F32(S(3), 1, 1, 1))},
			Want: []*tensor.Tensor{F32(S(1, 3), -1.22473569, 0, 1.22473569)}},
		{Name: "LayerNormalization/axis-stats", Op: "LayerNormalization", Attrs: graph.Attrs{"axis": graph.Int(1)},
			Args: []Arg{In(F32(S(2, 2, 2), 1, 2, 3, 4, 0, 0, 2, 2)), Const(F32(S(2, 2), 1, 1, 1, 1)), Omitted()},
			Want: []*tensor.Tensor{
				F32(S(2, 2, 2), -1.34163542, -0.447211807, 0.447211807, 1.34163542, -0.999995, -0.999995, 0.999995, 0.999995),
				F32(S(2, 1, 1), 2.5, 1),
				F32(S(2, 1, 1), 0.894423613, 0.999995),
			}},
		c2("ReduceSum/axis-keep", "ReduceSum", nil, x234, I64(S(1), 1), F32(S(2, 1, 4), 12, 15, 18, 21, 48, 51, 54, 57)),
		c2("ReduceSum/axes-drop", "ReduceSum", graph.Attrs{"keepdims": graph.Int(0)}, x234, I64(S(2), -1, 0), F32(S(3), 60, 92, 124)),
		c1("ReduceSum/all", "ReduceSum", graph.Attrs{"keepdims": graph.Int(0)}, matA, F32(S(), 21)),
		c1("ReduceSum/noop", "ReduceSum", graph.Attrs{"noop_with_empty_axes": graph.Int(1)}, matA, matA),
		c2("ReduceSum/int64", "ReduceSum", nil, I64(S(2, 2), 1, 2, 3, 4), I64(S(1), 0), I64(S(1, 2), 4, 6)),
		c2("CumSum/middle-axis", "CumSum", nil, x234, I64(S(), 1), F32(S(2, 3, 4), 0, 1, 2, 3, 4, 6, 8, 10, 12, 15, 18, 21, 12, 13, 14, 15, 28, 30, 32, 34, 48, 51, 54, 57)),
		c2("CumSum/reverse-exclusive", "CumSum", graph.Attrs{"reverse": graph.Int(1), "exclusive": graph.Int(1)}, matA, I64(S(1), -1), F32(S(2, 3), 5, 3, 0, 11, 6, 0)),
		c2("CumSum/int64", "CumSum", nil, I64(S(3), 4, -1, 2), I64(S(), 0), I64(S(3), 4, 3, 5)),
		c1("ReduceMean", "ReduceMean", graph.Attrs{"axes": graph.Ints(-1)}, matA, F32(S(2, 1), 2, 5)),
		c1("ReduceMean/axis0-drop", "ReduceMean", graph.Attrs{"axes": graph.Ints(0), "keepdims": graph.Int(0)}, matA, F32(S(3), 2.5, 3.5, 4.5)),
		c1("ReduceMean/all", "ReduceMean", nil, matA, F32(S(1, 1), 3.5)),
		c1("ReduceMax", "ReduceMax", graph.Attrs{"axes": graph.Ints(1)}, F32(S(2, 3), -inf, -2, -3, 4, 9, 1), F32(S(2, 1), -2, 9)),
		c1("ReduceMax/middle", "ReduceMax", graph.Attrs{"axes": graph.Ints(1), "keepdims": graph.Int(0)}, x234, F32(S(2, 4), 8, 9, 10, 11, 20, 21, 22, 23)),
		{Name: "ScatterND/add-rows", Op: "ScatterND", Attrs: graph.Attrs{"reduction": graph.String("add")}, Args: []Arg{In(F32(S(3, 2), iota32(6)...)), In(I64(S(2, 2, 1), 1, 0, 1, -1)), In(F32(S(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8))},
			Want: []*tensor.Tensor{F32(S(3, 2), 3, 5, 8, 11, 11, 13)}},
		{Name: "ScatterND/elements", Op: "ScatterND", Args: []Arg{In(F32(S(2, 2), 1, 2, 3, 4)), In(I64(S(2, 2), 0, 1, 1, 0)), In(F32(S(2), 7, 8))},
			Want: []*tensor.Tensor{F32(S(2, 2), 1, 7, 8, 4)}},
		// Opset 20 and 23 ops; the values come from zoo/graph/testdata/gen_opset23.py's numpy.
		c1("Gelu", "Gelu", nil, F32(S(3), -1, 0, 1.5), F32(S(3), -0.158655254, 0, 1.3997892)),
		c1("Gelu/tanh", "Gelu", graph.Attrs{"approximate": graph.String("tanh")}, F32(S(3), -1, 0, 1.5), F32(S(3), -0.158808009, 0, 1.39957158)),
		{Name: "RMSNormalization", Op: "RMSNormalization",
			Args: []Arg{In(F32(S(2, 3), 1, 2, 3, -1, 0, 4)), Const(F32(S(3), 1, 2, 0.5))},
			Want: []*tensor.Tensor{F32(S(2, 3), 0.462909554, 1.85163822, 0.694364331, -0.420083655, 0, 0.840167309)}},
		{Name: "RotaryEmbedding", Op: "RotaryEmbedding",
			Args: []Arg{In(F32(S(1, 1, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8)), In(F32(S(1, 2, 2), 1, 0.5, 0, 0.8)), In(F32(S(1, 2, 2), 0, 0.5, 1, 0.6))},
			Want: []*tensor.Tensor{F32(S(1, 1, 2, 4), 1, -1, 3, 3, -7, 0, 5, 10)}},
		{Name: "RotaryEmbedding/interleaved", Op: "RotaryEmbedding", Attrs: graph.Attrs{"interleaved": graph.Int(1)},
			Args: []Arg{In(F32(S(1, 1, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8)), In(F32(S(1, 2, 2), 1, 0.5, 0, 0.8)), In(F32(S(1, 2, 2), 0, 0.5, 1, 0.6))},
			Want: []*tensor.Tensor{F32(S(1, 1, 2, 4), 1, 2, -0.5, 3.5, -6, 5, 0.8, 10.6)}},
		{Name: "Attention", Op: "Attention",
			Args: []Arg{In(F32(S(1, 1, 3, 2), 1, 0, 0, 1, 1, 1)), In(F32(S(1, 1, 3, 2), 1, 0, 0, 1, 2, 0)), In(F32(S(1, 1, 3, 2), 1, 2, 3, 4, 5, 6))},
			Want: []*tensor.Tensor{F32(S(1, 1, 3, 2), 3.58395987, 4.58395987, 3, 4, 3.51046953, 4.51046953)}},
		{Name: "Attention/causal", Op: "Attention", Attrs: graph.Attrs{"is_causal": graph.Int(1)},
			Args: []Arg{In(F32(S(1, 1, 3, 2), 1, 0, 0, 1, 1, 1)), In(F32(S(1, 1, 3, 2), 1, 0, 0, 1, 2, 0)), In(F32(S(1, 1, 3, 2), 1, 2, 3, 4, 5, 6))},
			Want: []*tensor.Tensor{F32(S(1, 1, 3, 2), 1, 2, 2.3395231, 3.3395231, 3.51046953, 4.51046953)}},
		{Name: "Attention/bool-mask", Op: "Attention",
			Args: []Arg{In(F32(S(1, 1, 3, 2), 1, 0, 0, 1, 1, 1)), In(F32(S(1, 1, 3, 2), 1, 0, 0, 1, 2, 0)), In(F32(S(1, 1, 3, 2), 1, 2, 3, 4, 5, 6)),
				In(&tensor.Tensor{DType: tensor.Bool, Shape: []int{3}, Bool: []bool{true, true, false}})},
			Want: []*tensor.Tensor{F32(S(1, 1, 3, 2), 1.6604769, 2.6604769, 2.3395231, 3.3395231, 2, 3)}},
	}
	// A case whose expected output is nil must fail.
	for i := range cases {
		for _, w := range cases[i].Want {
			if w == nil {
				cases[i].WantErr = true
			}
		}
	}
	return append(append(cases, importedCases()...), mathCases()...)
}

func slice(name string, x, starts, ends, axes, steps, want *tensor.Tensor) Case {
	args := []Arg{In(x), Const(starts), Const(ends)}
	if axes != nil || steps != nil {
		if axes != nil {
			args = append(args, Const(axes))
		} else {
			args = append(args, Omitted())
		}
	}
	if steps != nil {
		args = append(args, Const(steps))
	}
	return Case{Name: name, Op: "Slice", Args: args, Want: []*tensor.Tensor{want}}
}

// BuildCase returns the single-node graph of c. When allConst is set, run-time inputs
// become initializers too (exercising constant folding). It also returns the run inputs.
func BuildCase(c Case, allConst bool) (*graph.Graph, map[string]*tensor.Tensor, error) {
	b := graph.NewBuilder(c.Name)
	inputs := map[string]*tensor.Tensor{}
	var names []string
	for i, a := range c.Args {
		switch {
		case a.Omit:
			names = append(names, "")
		case a.Const || allConst:
			names = append(names, b.Param(fmt.Sprintf("w%d", i), a.T))
		default:
			name := fmt.Sprintf("x%d", i)
			dims := make([]graph.Dim, len(a.T.Shape))
			for d, n := range a.T.Shape {
				if d == 0 && len(a.T.Shape) > 1 {
					dims[d] = graph.Sym("batch")
				} else {
					dims[d] = graph.Fixed(int64(n))
				}
			}
			names = append(names, b.Input(name, a.T.DType, dims...))
			inputs[name] = a.T
		}
	}
	outs := b.OpN(c.Op, names, len(c.Want), c.Attrs)
	for i, o := range outs {
		dt := tensor.Float32
		if w := c.Want[i]; w != nil {
			dt = w.DType
		}
		b.Output(fmt.Sprintf("y%d", i), o, dt)
	}
	g, err := b.Build()
	return g, inputs, err
}

// Run checks backend b against every case of the conformance table, once with run-time
// inputs and once with every input held as an initializer.
func Run(t *testing.T, b backends.Backend) {
	t.Helper()
	RunOptions(t, b, backends.Options{}, nil)
}

// RunOptions is Run with the compile options opts (a precision, say); the outputs of cases
// whose op is a key of loose are compared with its tolerance instead of Tolerance (an int8
// program's matrix products by constant weights are exact only to int8's rounding), and
// those cases run a third time with their first input at run time and the others constant
// (a layer's weights: "/weights").
func RunOptions(t *testing.T, b backends.Backend, opts backends.Options, loose map[string]float64) {
	t.Helper()
	if p := b.Probe(); !p.Available {
		t.Skipf("backend %s is not available: %s", b.Name(), p.Reason)
	}
	var cases []Case
	for _, c := range Cases() {
		cases = append(cases, c)
		if _, ok := loose[c.Op]; ok && len(c.Args) > 1 {
			w := c
			w.Name += "/weights"
			w.Args = append([]Arg(nil), c.Args...)
			w.Args[0].Const = false
			for i := 1; i < len(w.Args); i++ {
				w.Args[i].Const = true
			}
			cases = append(cases, w)
		}
	}
	for _, c := range cases {
		for _, allConst := range []bool{false, true} {
			name := c.Name
			if allConst {
				name += "/const"
			}
			t.Run(name, func(t *testing.T) {
				got, err := runCase(b, c, allConst, opts)
				if c.WantErr {
					if err == nil {
						t.Fatalf("%s: want an error, got outputs %v", c.Op, got)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				tol := Tolerance
				if l, ok := loose[c.Op]; ok {
					tol = l
				}
				for i, want := range c.Want {
					name := fmt.Sprintf("y%d", i)
					if err := Compare(got[name], want, tol); err != nil {
						t.Errorf("%s output %d: %v", c.Op, i, err)
					}
				}
			})
		}
	}
}

// RunCase builds, compiles and runs one case on b and returns its outputs by name (y0, y1…).
func RunCase(b backends.Backend, c Case, allConst bool) (map[string]*tensor.Tensor, error) {
	return runCase(b, c, allConst, backends.Options{})
}

// runCase is RunCase with compile options.
func runCase(b backends.Backend, c Case, allConst bool, opts backends.Options) (map[string]*tensor.Tensor, error) {
	g, inputs, err := BuildCase(c, allConst)
	if err != nil {
		return nil, err
	}
	p, err := b.Compile(g, opts)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Run(context.Background(), inputs)
}

// Compare reports how got differs from want: dtype, shape, or any element. Floats match when
// |got-want| <= tol·max(1, |want|); NaN matches NaN and infinities must match exactly.
func Compare(got, want *tensor.Tensor, tol float64) error {
	if got == nil {
		return fmt.Errorf("output is missing")
	}
	if got.DType != want.DType {
		return fmt.Errorf("dtype %v, want %v", got.DType, want.DType)
	}
	if !tensor.SameShape(got.Shape, want.Shape) {
		return fmt.Errorf("shape %s, want %s", tensor.ShapeString(got.Shape), tensor.ShapeString(want.Shape))
	}
	if err := got.Check(); err != nil {
		return err
	}
	switch {
	case want.DType.IsFloat():
		for i, w := range want.F32 {
			g := got.F32[i]
			wf, gf := float64(w), float64(g)
			switch {
			case math.IsNaN(wf) || math.IsNaN(gf):
				if math.IsNaN(wf) != math.IsNaN(gf) {
					return fmt.Errorf("element %d is %v, want %v (got %v)", i, g, w, got.F32)
				}
			case math.IsInf(wf, 0) || math.IsInf(gf, 0):
				if wf != gf {
					return fmt.Errorf("element %d is %v, want %v (got %v)", i, g, w, got.F32)
				}
			case math.Abs(gf-wf) > tol*math.Max(1, math.Abs(wf)):
				return fmt.Errorf("element %d is %v, want %v (diff %.3g; got %v)", i, g, w, math.Abs(gf-wf), got.F32)
			}
		}
	case want.DType == tensor.Bool:
		for i, w := range want.Bool {
			if got.Bool[i] != w {
				return fmt.Errorf("element %d is %v, want %v (got %v)", i, got.Bool[i], w, got.Bool)
			}
		}
	default:
		for i, w := range want.I64 {
			if got.I64[i] != w {
				return fmt.Errorf("element %d is %v, want %v (got %v)", i, got.I64[i], w, got.I64)
			}
		}
	}
	return nil
}
