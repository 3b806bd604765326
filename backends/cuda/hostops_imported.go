package cuda

import "github.com/zoo-dev/zoo/zoo/graph"

// Ops of imported graphs (quantized, convolution, Trilu and ONNX Runtime's com.microsoft
// ops) run on the host through graph.EvalNode until they have device kernels; the keys are
// the op table's (graph.OpKey).
func init() {
	for _, op := range []string{"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "Trilu", "Conv",
		"BatchNormalization", "Clip", "HardSigmoid", "AveragePool", "GlobalAveragePool", "Pad", "Resize"} {
		hostOps[op] = true
	}
	// The elementwise, reduction, index and type ops of graph's op_math.go, op_reduce.go and
	// op_index.go: small ops of imported files, on the host until they have device kernels.
	for _, op := range []string{
		"Ceil", "Floor", "Round", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
		"Softplus", "Softsign", "LeakyRelu", "ThresholdedRelu", "Celu", "Selu", "HardSwish", "Shrink",
		"GreaterOrEqual", "LessOrEqual", "Xor", "IsNaN", "IsInf", "Mod", "BitShift", "PRelu", "Sum", "Mean",
		"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
		"ArgMax", "ArgMin", "LogSoftmax", "Hardmax", "TopK",
		"GatherElements", "GatherND", "ScatterElements", "OneHot", "NonZero", "Compress", "Size", "EyeLike", "CastLike",
		"InstanceNormalization", "GlobalMaxPool", "Dropout", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
	} {
		hostOps[op] = true
	}
	for _, op := range []string{"Gelu", "BiasGelu", "FastGelu", "SkipLayerNormalization",
		"Attention", "MultiHeadAttention", "EmbedLayerNormalization"} {
		hostOps[graph.OpKey(graph.MicrosoftDomain, op)] = true
	}
}
