package backendtest

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Conformance cases of the elementwise, reduction, index and type ops of graph's op_math.go,
// op_reduce.go and op_index.go (numpy's answers on the same inputs; ONNX's examples).

func mathCases() []Case {
	x := F32(S(2, 3), -1.5, -0.5, 0.5, 1.5, 2.5, 3)
	unit := F32(S(4), -0.5, 0, 0.25, 0.9)
	u8 := func(shape []int, v ...int64) *tensor.Tensor { return q8(tensor.Uint8, shape, v...) }
	lr := func(op string, attrs graph.Attrs, want ...float32) Case {
		return c1(op, op, attrs, x, F32(S(2, 3), want...))
	}
	keep0 := func(axis int64) graph.Attrs { return graph.Attrs{"axes": graph.Ints(axis), "keepdims": graph.Int(0)} }
	return []Case{
		lr("Ceil", nil, -1, -0, 1, 2, 3, 3),
		lr("Floor", nil, -2, -1, 0, 1, 2, 3),
		lr("Round", nil, -2, -0, 0, 2, 2, 3),
		lr("Sign", nil, -1, -1, 1, 1, 1, 1),
		c1("Sign/int64", "Sign", nil, I64(S(3), -4, 0, 9), I64(S(3), -1, 0, 1)),
		c1("Sin", "Sin", nil, F32(S(3), 0, 1.5707964, -1), F32(S(3), 0, 1, -0.84147096)),
		c1("Cos", "Cos", nil, F32(S(3), 0, 3.1415927, 1), F32(S(3), 1, -1, 0.5403023)),
		c1("Tan", "Tan", nil, F32(S(2), 0, 0.7853982), F32(S(2), 0, 1)),
		c1("Asin", "Asin", nil, unit, F32(S(4), -0.5235988, 0, 0.25268026, 1.1197695)),
		c1("Acos", "Acos", nil, unit, F32(S(4), 2.0943952, 1.5707964, 1.3181161, 0.4510268)),
		c1("Atan", "Atan", nil, unit, F32(S(4), -0.4636476, 0, 0.24497867, 0.7328151)),
		c1("Sinh", "Sinh", nil, unit, F32(S(4), -0.5210953, 0, 0.25261232, 1.0265167)),
		c1("Cosh", "Cosh", nil, unit, F32(S(4), 1.127626, 1, 1.0314131, 1.4330864)),
		c1("Asinh", "Asinh", nil, unit, F32(S(4), -0.4812118, 0, 0.24746646, 0.8088669)),
		c1("Acosh", "Acosh", nil, F32(S(3), 1, 2, 10), F32(S(3), 0, 1.316958, 2.993223)),
		c1("Atanh", "Atanh", nil, unit, F32(S(4), -0.54930615, 0, 0.25541282, 1.4722193)),
		c1("Softplus", "Softplus", nil, F32(S(3), -1, 0, 1), F32(S(3), 0.31326166, 0.6931472, 1.3132616)),
		c1("Softsign", "Softsign", nil, F32(S(3), -1, 0, 3), F32(S(3), -0.5, 0, 0.75)),
		lr("LeakyRelu", graph.Attrs{"alpha": graph.Float(0.1)}, -0.15, -0.05, 0.5, 1.5, 2.5, 3),
		lr("ThresholdedRelu", nil, 0, 0, 0, 1.5, 2.5, 3),
		c1("Celu", "Celu", graph.Attrs{"alpha": graph.Float(2)}, F32(S(3), -1, 0, 1), F32(S(3), -0.7869387, 0, 1)),
		c1("Selu", "Selu", nil, F32(S(3), -1, 0, 1), F32(S(3), -1.1113307, 0, 1.050701)),
		c1("HardSwish", "HardSwish", nil, F32(S(4), -4, -1, 1, 4), F32(S(4), 0, -0.33333334, 0.6666667, 4)),
		lr("Shrink", graph.Attrs{"lambd": graph.Float(1), "bias": graph.Float(0.5)}, -1, 0, 0, 1, 2, 2.5),
		c1("IsNaN", "IsNaN", nil, F32(S(3), 1, nan, inf), Bools(S(3), false, true, false)),
		c1("IsInf", "IsInf", nil, F32(S(4), 1, nan, inf, -inf), Bools(S(4), false, false, true, true)),
		c2("Mod", "Mod", nil, I64(S(4), -4, 7, 5, -3), I64(S(4), 3, -3, 2, -2), I64(S(4), 2, -2, 1, -1)),
		c2("Mod/fmod", "Mod", graph.Attrs{"fmod": graph.Int(1)}, F32(S(2), -4.5, 7.5), F32(S(1), 2), F32(S(2), -0.5, 1.5)),
		c2("Xor", "Xor", nil, Bools(S(4), false, false, true, true), Bools(S(1, 4), false, true, false, true), Bools(S(1, 4), false, true, true, false)),
		c2("BitShift", "BitShift", graph.Attrs{"direction": graph.String("LEFT")}, u8(S(3), 16, 4, 200), u8(S(3), 1, 2, 1), u8(S(3), 32, 16, 144)),
		c2("GreaterOrEqual", "GreaterOrEqual", nil, F32(S(3), 1, 2, nan), F32(S(3), 2, 2, 1), Bools(S(3), false, true, false)),
		c2("LessOrEqual", "LessOrEqual", nil, I64(S(3), 1, 2, 3), I64(S(1), 2), Bools(S(3), true, true, false)),
		c2("PRelu", "PRelu", nil, F32(S(2, 2), -1, 1, -2, 2), F32(S(2), 0.5, 0.25), F32(S(2, 2), -0.5, 1, -1, 2)),
		{Name: "Sum", Op: "Sum", Args: []Arg{In(F32(S(2), 1, 2)), In(F32(S(1), 10)), In(F32(S(2), 100, 200))}, Want: []*tensor.Tensor{F32(S(2), 111, 212)}},
		c2("Mean", "Mean", nil, F32(S(2), 1, 2), F32(S(2), 3, 6), F32(S(2), 2, 4)),
		c1("ReduceMin/keepdims", "ReduceMin", graph.Attrs{"axes": graph.Ints(1)}, x, F32(S(2, 1), -1.5, 1.5)),
		c1("ReduceMin", "ReduceMin", keep0(1), x, F32(S(2), -1.5, 1.5)),
		c1("ReduceProd", "ReduceProd", keep0(0), x, F32(S(3), -2.25, -1.25, 1.5)),
		c1("ReduceL1", "ReduceL1", keep0(1), x, F32(S(2), 2.5, 7)),
		c1("ReduceL2", "ReduceL2", keep0(1), F32(S(2, 2), 3, 4, 6, 8), F32(S(2), 5, 10)),
		c1("ReduceSumSquare", "ReduceSumSquare", keep0(1), x, F32(S(2), 2.75, 17.5)),
		c1("ReduceLogSum", "ReduceLogSum", keep0(1), F32(S(2, 2), 1, 1.7182817, 2, 5.389056), F32(S(2), 1, 2)),
		c1("ReduceLogSumExp", "ReduceLogSumExp", keep0(1), F32(S(2, 2), 0, 0, 1000, 1000), F32(S(2), 0.6931472, 1000.6931)),
		c1("ArgMax", "ArgMax", graph.Attrs{"axis": graph.Int(1)}, F32(S(2, 3), 1, 3, 3, 5, 4, 5), I64(S(2, 1), 1, 0)),
		c1("ArgMin", "ArgMin", graph.Attrs{"keepdims": graph.Int(0), "select_last_index": graph.Int(1)}, I64(S(2, 2), 3, 1, 3, 2), I64(S(2), 1, 0)),
		c1("LogSoftmax", "LogSoftmax", nil, F32(S(1, 3), -1, 0, 1), F32(S(1, 3), -2.407606, -1.4076059, -0.40760595)),
		c1("Hardmax", "Hardmax", nil, F32(S(2, 3), 3, 0, 3, 1, 2, 0), F32(S(2, 3), 1, 0, 0, 0, 1, 0)),
		{Name: "TopK", Op: "TopK", Args: []Arg{In(F32(S(2, 4), 0, 1, 2, 3, 4, 7, 6, 7)), Const(I64(S(1), 3))},
			Want: []*tensor.Tensor{F32(S(2, 3), 3, 2, 1, 7, 7, 6), I64(S(2, 3), 3, 2, 1, 1, 3, 2)}},
		c2("GatherElements", "GatherElements", graph.Attrs{"axis": graph.Int(1)}, F32(S(2, 2), 1, 2, 3, 4), I64(S(2, 2), 0, 0, 1, 0), F32(S(2, 2), 1, 1, 4, 3)),
		c2("GatherND", "GatherND", nil, I64(S(2, 2), 0, 1, 2, 3), I64(S(2, 1), 1, 0), I64(S(2, 2), 2, 3, 0, 1)),
		{Name: "ScatterElements", Op: "ScatterElements", Attrs: graph.Attrs{"axis": graph.Int(1), "reduction": graph.String("add")},
			Args: []Arg{In(F32(S(1, 5), 1, 2, 3, 4, 5)), Const(I64(S(1, 2), 1, 1)), In(F32(S(1, 2), 1.1, 2.1))}, Want: []*tensor.Tensor{F32(S(1, 5), 1, 5.2, 3, 4, 5)}},
		{Name: "OneHot", Op: "OneHot", Args: []Arg{In(I64(S(3), 1, -1, 5)), Const(I64(S(), 3)), Const(F32(S(2), 0, 9))}, Want: []*tensor.Tensor{F32(S(3, 3), 0, 9, 0, 0, 0, 9, 0, 0, 0)}},
		c1("NonZero", "NonZero", nil, F32(S(2, 2), 1, 0, 1, 1), I64(S(2, 3), 0, 1, 1, 0, 0, 1)),
		c2("Compress", "Compress", graph.Attrs{"axis": graph.Int(0)}, F32(S(3, 2), 1, 2, 3, 4, 5, 6), Bools(S(3), false, true, true), F32(S(2, 2), 3, 4, 5, 6)),
		c1("Size", "Size", nil, x, I64(S(), 6)),
		c1("EyeLike", "EyeLike", graph.Attrs{"k": graph.Int(1)}, I64(S(2, 3), 0, 0, 0, 0, 0, 0), I64(S(2, 3), 0, 1, 0, 0, 0, 1)),
		{Name: "InstanceNormalization", Op: "InstanceNormalization", Args: []Arg{In(F32(S(1, 2, 3), 1, 2, 3, 4, 4, 4)), Const(F32(S(2), 2, 1)), Const(F32(S(2), 0, 5))},
			Want: []*tensor.Tensor{F32(S(1, 2, 3), -2.4494715, 0, 2.4494715, 5, 5, 5)}},
		c1("GlobalMaxPool", "GlobalMaxPool", nil, F32(S(1, 2, 2), 1, 3, -1, -2), F32(S(1, 2, 1), 3, -1)),
		{Name: "Dropout", Op: "Dropout", Args: []Arg{In(F32(S(2), 1, 2)), Const(F32(S(), 0.5)), In(Bools(S(), false))},
			Want: []*tensor.Tensor{F32(S(2), 1, 2), Bools(S(2), true, true)}},
		// −log p at each target: (0.5 + 4) / 2, the ignored second target left out of the mean's count.
		{Name: "NegativeLogLikelihoodLoss", Op: "NegativeLogLikelihoodLoss", Attrs: graph.Attrs{"ignore_index": graph.Int(2)},
			Args: []Arg{In(F32(S(3, 2), -0.5, -1, -2, -0.25, -3, -4)), Const(I64(S(3), 0, 2, 1))}, Want: []*tensor.Tensor{F32(S(), 2.25)}},
		{Name: "SoftmaxCrossEntropyLoss", Op: "SoftmaxCrossEntropyLoss", Attrs: graph.Attrs{"reduction": graph.String("none")},
			Args: []Arg{In(F32(S(1, 2), 0, 0)), Const(I64(S(1), 1))}, Want: []*tensor.Tensor{F32(S(1), 0.6931472), F32(S(1, 2), -0.6931472, -0.6931472)}},
		c2("CastLike", "CastLike", nil, F32(S(2), 1.9, -1.9), I64(S(1), 0), I64(S(2), 1, -1)),
	}
}
