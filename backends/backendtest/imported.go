package backendtest

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Conformance cases of the ops imported graphs bring: quantized ops (exact), Conv, Trilu
// and ONNX Runtime's com.microsoft ops (values checked against ONNX Runtime 1.30 by
// onnx/realgraphs_test.go's fixtures).

func q8(dt tensor.DType, shape []int, v ...int64) *tensor.Tensor {
	return &tensor.Tensor{DType: dt, Shape: shape, I64: v}
}

func importedCases() []Case {
	const ms = graph.MicrosoftDomain + "."
	u8 := func(shape []int, v ...int64) *tensor.Tensor { return q8(tensor.Uint8, shape, v...) }
	i8 := func(shape []int, v ...int64) *tensor.Tensor { return q8(tensor.Int8, shape, v...) }
	i32 := func(shape []int, v ...int64) *tensor.Tensor { return q8(tensor.Int32, shape, v...) }
	x12 := F32(S(1, 2, 2), 1, 2, 3, 4)
	eye3 := F32(S(2, 6), 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1)
	return []Case{
		{Name: "QuantizeLinear/uint8", Op: "QuantizeLinear", Args: []Arg{In(F32(S(2, 3), 0.5, 1.5, 2.5, -1, 300, 3.49)), Const(F32(S(), 1)), Const(u8(S(), 0))},
			Want: []*tensor.Tensor{u8(S(2, 3), 0, 2, 2, 0, 255, 3)}},
		{Name: "QuantizeLinear/int8 per axis", Op: "QuantizeLinear", Args: []Arg{In(F32(S(2, 2), 1, 2, 3, 4)), Const(F32(S(2), 1, 2)), Const(i8(S(2), 0, -1))},
			Want: []*tensor.Tensor{i8(S(2, 2), 1, 0, 3, 1)}},
		{Name: "DequantizeLinear/int8", Op: "DequantizeLinear", Args: []Arg{Const(i8(S(3), -128, 0, 127)), Const(F32(S(), 0.5)), Const(i8(S(), -1))},
			Want: []*tensor.Tensor{F32(S(3), -63.5, 0.5, 64)}},
		{Name: "DequantizeLinear/uint8 per axis", Op: "DequantizeLinear", Args: []Arg{In(u8(S(2, 2), 0, 10, 255, 20)), Const(F32(S(2), 1, 0.5)), Const(u8(S(2), 128, 10))},
			Want: []*tensor.Tensor{F32(S(2, 2), -128, 0, 127, 5)}},
		{Name: "DynamicQuantizeLinear", Op: "DynamicQuantizeLinear", Args: []Arg{In(F32(S(4), 0, 2, -0.5, 1))},
			Want: []*tensor.Tensor{u8(S(4), 51, 255, 0, 153), F32(S(), 2.5/255), u8(S(), 51)}},
		{Name: "MatMulInteger", Op: "MatMulInteger", Args: []Arg{In(u8(S(2, 2), 1, 2, 3, 4)), Const(i8(S(2, 2), 1, -1, 2, 0)), Const(u8(S(), 1)), Const(i8(S(2), 0, 1))},
			Want: []*tensor.Tensor{i32(S(2, 2), 2, -1, 8, -7)}},
		// QLinearMatMul: the MatMulInteger case's sums [2 -1; 8 -7] requantized per column:
		// multipliers 0.5·1/0.25 = 2 and 0.5·0.25/0.25 = 0.5 (-0.5 rounds to even 0), then with
		// y_scale 0.01 into int8: 50 and 12.5 (-12.5 → -12, 400 saturates at 127).
		{Name: "QLinearMatMul/uint8", Op: "QLinearMatMul", Args: []Arg{In(u8(S(2, 2), 1, 2, 3, 4)), Const(F32(S(), 0.5)), Const(u8(S(), 1)),
			Const(i8(S(2, 2), 1, -1, 2, 0)), Const(F32(S(2), 1, 0.25)), Const(i8(S(2), 0, 1)), Const(F32(S(), 0.25)), Const(u8(S(), 10))},
			Want: []*tensor.Tensor{u8(S(2, 2), 14, 10, 26, 6)}},
		{Name: "QLinearMatMul/int8 saturating", Op: "QLinearMatMul", Args: []Arg{In(u8(S(2, 2), 1, 2, 3, 4)), Const(F32(S(), 0.5)), Const(u8(S(), 1)),
			Const(i8(S(2, 2), 1, -1, 2, 0)), Const(F32(S(2), 1, 0.25)), Const(i8(S(2), 0, 1)), Const(F32(S(), 0.01)), Const(i8(S(), 0))},
			Want: []*tensor.Tensor{i8(S(2, 2), 100, -12, 127, -88)}},
		// Pad: ONNX's documented reflect example, and a crop through the axes input (numpy.pad's numbers).
		{Name: "Pad/reflect", Op: "Pad", Attrs: graph.Attrs{"mode": graph.String("reflect")}, Args: []Arg{In(F32(S(3, 2), 1.0, 1.2, 2.3, 3.4, 4.5, 5.7)), Const(I64(S(4), 0, 2, 0, 0))},
			Want: []*tensor.Tensor{F32(S(3, 4), 1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7)}},
		{Name: "Pad/constant axes crop", Op: "Pad", Args: []Arg{In(F32(S(2, 3), 1, 2, 3, 4, 5, 6)), Const(I64(S(2), 1, -1)), Const(F32(S(), 9)), Const(I64(S(1), 1))},
			Want: []*tensor.Tensor{F32(S(2, 3), 9, 1, 2, 9, 4, 5)}},
		// Resize: ONNX's documented resize_upsample_scales_linear and resize_upsample_sizes_nearest examples.
		{Name: "Resize/linear scales", Op: "Resize", Attrs: graph.Attrs{"mode": graph.String("linear")},
			Args: []Arg{In(F32(S(1, 1, 2, 2), 1, 2, 3, 4)), Const(F32(S(0))), Const(F32(S(4), 1, 1, 2, 2))},
			Want: []*tensor.Tensor{F32(S(1, 1, 4, 4), 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4)}},
		{Name: "Resize/nearest sizes", Op: "Resize", Args: []Arg{In(F32(S(1, 1, 2, 2), 1, 2, 3, 4)), Omitted(), Omitted(), Const(I64(S(4), 1, 1, 3, 2))},
			Want: []*tensor.Tensor{F32(S(1, 1, 3, 2), 1, 2, 1, 2, 3, 4)}},
		{Name: "Trilu/upper", Op: "Trilu", Args: []Arg{In(F32(S(2, 3), 1, 2, 3, 4, 5, 6))}, Want: []*tensor.Tensor{F32(S(2, 3), 1, 2, 3, 0, 5, 6)}},
		{Name: "Trilu/lower k", Op: "Trilu", Attrs: graph.Attrs{"upper": graph.Int(0)}, Args: []Arg{In(I64(S(1, 2, 3), 1, 2, 3, 4, 5, 6)), Const(I64(S(), -1))},
			Want: []*tensor.Tensor{I64(S(1, 2, 3), 0, 0, 0, 4, 0, 0)}},
		{Name: "Conv/2-D", Op: "Conv", Attrs: graph.Attrs{"strides": graph.Ints(2, 2), "pads": graph.Ints(0, 0, 1, 1)},
			Args: []Arg{In(F32(S(1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8)), Const(F32(S(1, 1, 2, 2), 1, 1, 1, 1)), Const(F32(S(1), 0.5))},
			Want: []*tensor.Tensor{F32(S(1, 1, 2, 2), 8.5, 7.5, 13.5, 8.5)}},
		{Name: "ConvInteger", Op: "ConvInteger", Args: []Arg{In(u8(S(1, 1, 3), 10, 12, 200)), Const(i8(S(2, 1, 2), 1, -1, 3, 2)), Const(u8(S(), 10)), Const(i8(S(2), 0, 1))},
			Want: []*tensor.Tensor{i32(S(1, 2, 2), -2, -188, 2, 194)}},
		{Name: "Conv/1-D groups", Op: "Conv", Attrs: graph.Attrs{"group": graph.Int(2)}, Args: []Arg{In(F32(S(1, 2, 2), 1, 2, 3, 4)), Const(F32(S(2, 1, 1), 2, 3))},
			Want: []*tensor.Tensor{F32(S(1, 2, 2), 2, 4, 9, 12)}},
		{Name: "BatchNormalization", Op: "BatchNormalization", Attrs: graph.Attrs{"epsilon": graph.Float(0)},
			Args: []Arg{In(F32(S(1, 2, 2), 1, 3, 5, 7)), Const(F32(S(2), 2, 1)), Const(F32(S(2), 0, 1)), Const(F32(S(2), 2, 6)), Const(F32(S(2), 1, 4))},
			Want: []*tensor.Tensor{F32(S(1, 2, 2), -2, 2, 0.5, 1.5)}},
		{Name: "Clip", Op: "Clip", Args: []Arg{In(F32(S(3), -1, 3, 7)), Const(F32(S(), 0)), Const(F32(S(), 6))}, Want: []*tensor.Tensor{F32(S(3), 0, 3, 6)}},
		{Name: "HardSigmoid", Op: "HardSigmoid", Args: []Arg{In(F32(S(3), -4, 0, 1))}, Want: []*tensor.Tensor{F32(S(3), 0, 0.5, 0.7)}},
		{Name: "AveragePool", Op: "AveragePool", Attrs: graph.Attrs{"kernel_shape": graph.Ints(2, 2), "strides": graph.Ints(2, 2)},
			Args: []Arg{In(F32(S(1, 1, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8))}, Want: []*tensor.Tensor{F32(S(1, 1, 1, 2), 3.5, 5.5)}},
		{Name: "GlobalAveragePool", Op: "GlobalAveragePool", Args: []Arg{In(F32(S(1, 2, 2), 1, 2, 3, 5))}, Want: []*tensor.Tensor{F32(S(1, 2, 1), 1.5, 4)}},
		{Name: "ms.Gelu", Op: ms + "Gelu", Args: []Arg{In(F32(S(4), -1.5, 0, 0.5, 2))}, Want: []*tensor.Tensor{F32(S(4), -0.10021080, 0, 0.34573123, 1.9544997)}},
		{Name: "ms.BiasGelu", Op: ms + "BiasGelu", Args: []Arg{In(F32(S(1, 4), -1.5, 0, 0.5, 2)), Const(F32(S(4), 0.25, -0.5, 1, 0))},
			Want: []*tensor.Tensor{F32(S(1, 4), -0.13206221, -0.15426877, 1.3997892, 1.9544997)}},
		{Name: "ms.FastGelu", Op: ms + "FastGelu", Args: []Arg{In(F32(S(1, 4), -1.5, 0, 0.5, 2)), Const(F32(S(4), 0.25, -0.5, 1, 0))},
			Want: []*tensor.Tensor{F32(S(1, 4), -0.13228580, -0.15428600, 1.3995715, 1.9545977)}},
		{Name: "ms.SkipLayerNormalization", Op: ms + "SkipLayerNormalization",
			Args: []Arg{In(F32(S(1, 2, 2), 1, 2, 3, 5)), In(F32(S(1, 2, 2), 0.5, -1, 1, 1)), Const(F32(S(2), 1, 2)), Const(F32(S(2), 0.1, 0))},
			Want: []*tensor.Tensor{F32(S(1, 2, 2), 1.1, -2, -0.9, 2)}},
		{Name: "ms.EmbedLayerNormalization", Op: ms + "EmbedLayerNormalization",
			Args: []Arg{In(i32(S(1, 2), 1, 0)), Omitted(), Const(F32(S(2, 2), 0, 0, 1, 3)), Const(F32(S(2, 2), 0, 1, 2, 0)), Omitted(),
				Const(F32(S(2), 1, 1)), Const(F32(S(2), 0, 0)), In(i32(S(1, 2), 1, 0))},
			Want: []*tensor.Tensor{F32(S(1, 2, 2), -1, 1, 1, -1), i32(S(1), 1)}},
		{Name: "ms.Attention/key lengths", Op: ms + "Attention", Attrs: graph.Attrs{"num_heads": graph.Int(1)},
			Args: []Arg{In(x12), Const(eye3), Omitted(), In(i32(S(1), 1))}, Want: []*tensor.Tensor{F32(S(1, 2, 2), 1, 2, 1, 2)}},
		{Name: "ms.Attention/causal", Op: ms + "Attention", Attrs: graph.Attrs{"num_heads": graph.Int(1), "unidirectional": graph.Int(1)},
			Args: []Arg{In(x12), Const(eye3)}, Want: []*tensor.Tensor{F32(S(1, 2, 2), 1, 2, 2.9998996, 3.9998996)}},
		{Name: "ms.MultiHeadAttention/2-D mask", Op: ms + "MultiHeadAttention", Attrs: graph.Attrs{"num_heads": graph.Int(2)},
			Args: []Arg{In(x12), In(x12), In(x12), Omitted(), In(i32(S(1, 2), 0, 1))}, Want: []*tensor.Tensor{F32(S(1, 2, 2), 3, 4, 3, 4)}},
	}
}
