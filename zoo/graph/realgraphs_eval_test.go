package graph_test

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Golden cases of the quantized, convolution, Trilu and com.microsoft ops (values by hand or
// from numpy in float64; ONNX Runtime's own outputs for the same ops are compared in
// onnx/realgraphs_test.go).

func init() {
	goldenSets["realgraphs"] = realgraphCases
}

func tu8(shape []int, v ...int64) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Uint8, Shape: shape, I64: append([]int64{}, v...)}
}
func ti8(shape []int, v ...int64) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Int8, Shape: shape, I64: append([]int64{}, v...)}
}

const ms = graph.MicrosoftDomain + "."

func realgraphCases() []evalCase {
	eye3 := tf(sh(2, 6), 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1) // [I | I | I]: q = k = v = x
	x12 := tf(sh(1, 2, 2), 1, 2, 3, 4)
	return []evalCase{
		// QuantizeLinear: ties to even, saturation, zero points, per axis.
		{name: "uint8 ties", op: "QuantizeLinear", in: []*tensor.Tensor{tf(sh(6), 0.5, 1.5, 2.5, -1, 300, 3.49), tf(sh(), 1), tu8(sh(), 0)},
			want: []*tensor.Tensor{tu8(sh(6), 0, 2, 2, 0, 255, 3)}},
		{name: "no zero point is uint8", op: "QuantizeLinear", in: []*tensor.Tensor{tf(sh(2), -3, 7), tf(sh(), 2)},
			want: []*tensor.Tensor{tu8(sh(2), 0, 4)}},
		{name: "int8 zero point", op: "QuantizeLinear", in: []*tensor.Tensor{tf(sh(4), -0.5, 0.25, -400, 400), tf(sh(), 0.5), ti8(sh(), 1)},
			want: []*tensor.Tensor{ti8(sh(4), 0, 1, -128, 127)}},
		{name: "per axis", op: "QuantizeLinear", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), tf(sh(2), 1, 2), ti8(sh(2), 0, -1)},
			want: []*tensor.Tensor{ti8(sh(2, 2), 1, 0, 3, 1)}},
		{name: "per axis 0", op: "QuantizeLinear", attrs: graph.Attrs{"axis": graph.Int(0)}, in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), tf(sh(2), 1, 2), ti8(sh(2), 0, -1)},
			want: []*tensor.Tensor{ti8(sh(2, 2), 1, 2, 1, 1)}},
		{name: "float zero point", op: "QuantizeLinear", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(), 1), tf(sh(), 0)}, wantErr: "int8"},
		{name: "scale length", op: "QuantizeLinear", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), tf(sh(3), 1, 2, 3)}, wantErr: "entries"},
		// DequantizeLinear.
		{name: "int8", op: "DequantizeLinear", in: []*tensor.Tensor{ti8(sh(3), -128, 0, 127), tf(sh(), 0.5), ti8(sh(), -1)},
			want: []*tensor.Tensor{tf(sh(3), -63.5, 0.5, 64)}},
		{name: "uint8 per axis", op: "DequantizeLinear", in: []*tensor.Tensor{tu8(sh(2, 2), 0, 10, 255, 20), tf(sh(2), 1, 0.5), tu8(sh(2), 128, 10)},
			want: []*tensor.Tensor{tf(sh(2, 2), -128, 0, 127, 5)}},
		{name: "int32 bias", op: "DequantizeLinear", in: []*tensor.Tensor{ti32(sh(2), -7, 1000), tf(sh(), 0.25)},
			want: []*tensor.Tensor{tf(sh(2), -1.75, 250)}},
		{name: "float input", op: "DequantizeLinear", in: []*tensor.Tensor{tf(sh(1), 1), tf(sh(), 1)}, wantErr: "int8"},
		// DynamicQuantizeLinear: scale 2.5/255, zero point 51.
		{name: "range", op: "DynamicQuantizeLinear", in: []*tensor.Tensor{tf(sh(4), 0, 2, -0.5, 1)},
			want: []*tensor.Tensor{tu8(sh(4), 51, 255, 0, 153), tf(sh(), 2.5/255), tu8(sh(), 51)}},
		{name: "int input", op: "DynamicQuantizeLinear", in: []*tensor.Tensor{ti(sh(1), 1)}, nOut: 3, wantErr: "float32"},
		// MatMulInteger.
		{name: "zero points", op: "MatMulInteger", in: []*tensor.Tensor{tu8(sh(2, 2), 1, 2, 3, 4), ti8(sh(2, 2), 1, -1, 2, 0), tu8(sh(), 1), ti8(sh(2), 0, 1)},
			want: []*tensor.Tensor{ti32(sh(2, 2), 2, -1, 8, -7)}},
		{name: "batched", op: "MatMulInteger", in: []*tensor.Tensor{ti8(sh(2, 1, 2), 1, 2, -3, 4), ti8(sh(2, 1), 5, 6)},
			want: []*tensor.Tensor{ti32(sh(2, 1, 1), 17, 9)}},
		{name: "float", op: "MatMulInteger", in: []*tensor.Tensor{tf(sh(1, 1), 1), tf(sh(1, 1), 1)}, wantErr: "int8 or uint8"},
		// Trilu.
		{name: "upper", op: "Trilu", in: []*tensor.Tensor{tf(sh(2, 3), 1, 2, 3, 4, 5, 6)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 2, 3, 0, 5, 6)}},
		{name: "upper k=1 bool", op: "Trilu", in: []*tensor.Tensor{tb(sh(2, 2), T, T, T, T), ti(sh(), 1)}, want: []*tensor.Tensor{tb(sh(2, 2), F, T, F, F)}},
		{name: "lower k=-1", op: "Trilu", attrs: graph.Attrs{"upper": graph.Int(0)}, in: []*tensor.Tensor{ti(sh(1, 2, 3), 1, 2, 3, 4, 5, 6), ti(sh(), -1)},
			want: []*tensor.Tensor{ti(sh(1, 2, 3), 0, 0, 0, 4, 0, 0)}},
		{name: "rank 1", op: "Trilu", in: []*tensor.Tensor{tf(sh(2), 1, 2)}, wantErr: "rank"},
		// Conv.
		{name: "1-D pads", op: "Conv", attrs: graph.Attrs{"pads": graph.Ints(1, 0)}, in: []*tensor.Tensor{tf(sh(1, 1, 4), 1, 2, 3, 4), tf(sh(1, 1, 2), 1, -1)},
			want: []*tensor.Tensor{tf(sh(1, 1, 4), -1, -1, -1, -1)}},
		{name: "2-D strides pads bias", op: "Conv", attrs: graph.Attrs{"strides": graph.Ints(2, 2), "pads": graph.Ints(0, 0, 1, 1)},
			in:   []*tensor.Tensor{tf(sh(1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8), tf(sh(1, 1, 2, 2), 1, 1, 1, 1), tf(sh(1), 0.5)},
			want: []*tensor.Tensor{tf(sh(1, 1, 2, 2), 8.5, 7.5, 13.5, 8.5)}},
		{name: "groups", op: "Conv", attrs: graph.Attrs{"group": graph.Int(2)}, in: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 3, 4), tf(sh(2, 1, 1), 2, 3)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), 2, 4, 9, 12)}},
		{name: "same upper dilated", op: "Conv", attrs: graph.Attrs{"auto_pad": graph.String("SAME_UPPER"), "dilations": graph.Ints(2)},
			in: []*tensor.Tensor{tf(sh(1, 1, 3), 1, 2, 3), tf(sh(1, 1, 2), 1, 1)}, want: []*tensor.Tensor{tf(sh(1, 1, 3), 2, 1+3, 2)}},
		{name: "zero points", op: "ConvInteger", in: []*tensor.Tensor{tu8(sh(1, 1, 3), 10, 12, 200), ti8(sh(2, 1, 2), 1, -1, 3, 2), tu8(sh(), 10), ti8(sh(2), 0, 1)},
			want: []*tensor.Tensor{ti32(sh(1, 2, 2), -2, -188, 2, 194)}},
		{name: "float", op: "ConvInteger", in: []*tensor.Tensor{tf(sh(1, 1, 2), 1, 2), tf(sh(1, 1, 1), 1)}, wantErr: "int8 or uint8"},
		{name: "channels", op: "Conv", in: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 3, 4), tf(sh(1, 1, 1), 2)}, wantErr: "channels"},
		// Convolutional front ends: BatchNormalization, Clip, HardSigmoid, pools.
		{name: "inference", op: "BatchNormalization", attrs: graph.Attrs{"epsilon": graph.Float(0)},
			in:   []*tensor.Tensor{tf(sh(1, 2, 2), 1, 3, 5, 7), tf(sh(2), 2, 1), tf(sh(2), 0, 1), tf(sh(2), 2, 6), tf(sh(2), 1, 4)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), -2, 2, 0.5, 1.5)}},
		// Training mode: the batch's mean 2 and variance 1; running = input · 0.9 + batch · 0.1.
		{name: "training", op: "BatchNormalization", attrs: graph.Attrs{"training_mode": graph.Int(1)},
			in:   []*tensor.Tensor{tf(sh(2, 1, 1), 1, 3), tf(sh(1), 1), tf(sh(1), 0), tf(sh(1), 0), tf(sh(1), 1)},
			want: []*tensor.Tensor{tf(sh(2, 1, 1), -0.999995, 0.999995), tf(sh(1), 0.2), tf(sh(1), 1)}},
		{name: "running statistics in inference", op: "BatchNormalization", nOut: 3,
			in: []*tensor.Tensor{tf(sh(1, 1, 1), 1), tf(sh(1), 1), tf(sh(1), 0), tf(sh(1), 0), tf(sh(1), 1)}, wantErr: "training mode only"},
		{name: "relu6", op: "Clip", in: []*tensor.Tensor{tf(sh(4), -1, 3, 7, nan), tf(sh(), 0), tf(sh(), 6)}, want: []*tensor.Tensor{tf(sh(4), 0, 3, 6, nan)}},
		{name: "int max only", op: "Clip", in: []*tensor.Tensor{ti(sh(3), -5, 2, 9), nil, ti(sh(), 3)}, want: []*tensor.Tensor{ti(sh(3), -5, 2, 3)}},
		{name: "vector bound", op: "Clip", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(2), 0, 0)}, wantErr: "scalar"},
		{name: "hard swish gate", op: "HardSigmoid", attrs: graph.Attrs{"alpha": graph.Float(0.25)}, in: []*tensor.Tensor{tf(sh(3), -4, 0, 1)},
			want: []*tensor.Tensor{tf(sh(3), 0, 0.5, 0.75)}},
		{name: "int", op: "HardSigmoid", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "float32"},
		{name: "2-D", op: "AveragePool", attrs: graph.Attrs{"kernel_shape": graph.Ints(2, 2), "strides": graph.Ints(2, 2)},
			in: []*tensor.Tensor{tf(sh(1, 1, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8)}, want: []*tensor.Tensor{tf(sh(1, 1, 1, 2), 3.5, 5.5)}},
		{name: "pads count_include_pad", op: "AveragePool", attrs: graph.Attrs{"kernel_shape": graph.Ints(2), "pads": graph.Ints(1, 1), "count_include_pad": graph.Int(1)},
			in: []*tensor.Tensor{tf(sh(1, 1, 2), 2, 4)}, want: []*tensor.Tensor{tf(sh(1, 1, 3), 1, 3, 2)}},
		{name: "pads exclude ceil", op: "AveragePool", attrs: graph.Attrs{"kernel_shape": graph.Ints(2), "strides": graph.Ints(2), "ceil_mode": graph.Int(1)},
			in: []*tensor.Tensor{tf(sh(1, 1, 3), 2, 4, 9)}, want: []*tensor.Tensor{tf(sh(1, 1, 2), 3, 9)}},
		{name: "kernel too big", op: "AveragePool", attrs: graph.Attrs{"kernel_shape": graph.Ints(3)}, in: []*tensor.Tensor{tf(sh(1, 1, 2), 1, 2)}, wantErr: "smaller"},
		{name: "global", op: "GlobalAveragePool", in: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 3, 5)}, want: []*tensor.Tensor{tf(sh(1, 2, 1), 1.5, 4)}},
		{name: "rank 2", op: "GlobalAveragePool", in: []*tensor.Tensor{tf(sh(1, 2), 1, 2)}, wantErr: "spatial"},
		// com.microsoft GELUs (numpy, float64).
		{name: "erf", op: ms + "Gelu", in: []*tensor.Tensor{tf(sh(4), -1.5, 0, 0.5, 2)}, want: []*tensor.Tensor{tf(sh(4), -0.10021080076694489, 0, 0.3457312285900116, 1.9544997215270996)}},
		{name: "int", op: ms + "Gelu", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "float32"},
		{name: "bias", op: ms + "BiasGelu", in: []*tensor.Tensor{tf(sh(1, 4), -1.5, 0, 0.5, 2), tf(sh(4), 0.25, -0.5, 1, 0)},
			want: []*tensor.Tensor{tf(sh(1, 4), -0.13206221163272858, -0.1542687714099884, 1.3997892141342163, 1.9544997215270996)}},
		{name: "bias length", op: ms + "BiasGelu", in: []*tensor.Tensor{tf(sh(1, 4), 1, 2, 3, 4), tf(sh(3), 1, 2, 3)}, wantErr: "bias length"},
		{name: "tanh", op: ms + "FastGelu", in: []*tensor.Tensor{tf(sh(1, 4), -1.5, 0, 0.5, 2), tf(sh(4), 0.25, -0.5, 1, 0)},
			want: []*tensor.Tensor{tf(sh(1, 4), -0.13228580355644226, -0.1542859971523285, 1.3995715379714966, 1.9545977115631104)}},
		{name: "bias rank", op: ms + "FastGelu", in: []*tensor.Tensor{tf(sh(1, 2), 1, 2), tf(sh(1, 2), 1, 2)}, wantErr: "1-D"},
		// com.microsoft SkipLayerNormalization.
		{name: "skip bias", op: ms + "SkipLayerNormalization", in: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 3, 5), tf(sh(2, 2), 0.5, -1, 1, 1), tf(sh(2), 1, 2), tf(sh(2), 0.1, 0)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), 1.1, -2, -0.9, 2), tf(sh(1, 2, 1), 1.25, 5), tf(sh(1, 2, 1), 4, 1), tf(sh(1, 2, 2), 1.5, 1, 4, 6)}},
		{name: "skip shape", op: ms + "SkipLayerNormalization", in: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 3, 5), tf(sh(3, 2), 1, 2, 3, 4, 5, 6), tf(sh(2), 1, 2)}, wantErr: "skip"},
		{name: "embed", op: ms + "EmbedLayerNormalization",
			in:   []*tensor.Tensor{ti32(sh(1, 2), 1, 0), nil, tf(sh(2, 2), 0, 0, 1, 3), tf(sh(2, 2), 0, 1, 2, 0), nil, tf(sh(2), 1, 1), tf(sh(2), 0, 0), ti32(sh(1, 2), 1, 0)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), -1, 1, 1, -1), ti32(sh(1), 1)}},
		{name: "embed int64 ids", op: ms + "EmbedLayerNormalization",
			in: []*tensor.Tensor{ti(sh(1, 1), 0), nil, tf(sh(1, 2), 0, 0), tf(sh(1, 2), 0, 1), nil, tf(sh(2), 1, 1), tf(sh(2), 0, 0)}, wantErr: "int32"},
		// com.microsoft attention: q = k = v = x; a key length of 1 leaves only key 0.
		{name: "key lengths", op: ms + "Attention", attrs: graph.Attrs{"num_heads": graph.Int(1)}, in: []*tensor.Tensor{x12, eye3, nil, ti32(sh(1), 1)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 1, 2)}},
		{name: "2-D mask", op: ms + "Attention", attrs: graph.Attrs{"num_heads": graph.Int(2)}, in: []*tensor.Tensor{x12, eye3, tf(sh(6), 0, 0, 0, 0, 0, 0), ti32(sh(1, 2), 0, 1)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), 3, 4, 3, 4)}},
		{name: "causal", op: ms + "Attention", attrs: graph.Attrs{"num_heads": graph.Int(1), "unidirectional": graph.Int(1)}, in: []*tensor.Tensor{x12, eye3},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 2.9998996, 3.9998996)}},
		{name: "past", op: ms + "Attention", attrs: graph.Attrs{"num_heads": graph.Int(1)}, in: []*tensor.Tensor{x12, eye3, nil, nil, zeros(2, 1, 1, 1, 2)}, wantErr: "past"},
		{name: "key lengths", op: ms + "MultiHeadAttention", attrs: graph.Attrs{"num_heads": graph.Int(1)}, in: []*tensor.Tensor{x12, x12, x12, nil, ti32(sh(1), 1)},
			want: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 2, 1, 2)}},
		{name: "packed", op: ms + "MultiHeadAttention", attrs: graph.Attrs{"num_heads": graph.Int(1)}, in: []*tensor.Tensor{x12}, wantErr: "packed"},
	}
}
