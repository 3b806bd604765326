package cuda

import "github.com/zoo-dev/zoo/zoo/graph"

// Ops of imported graphs (quantized, convolution, Trilu and ONNX Runtime's com.microsoft
// ops) run on the host through graph.EvalNode until they have device kernels; the keys are
// the op table's (graph.OpKey).
func init() {
	for _, op := range []string{"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QLinearMatMul", "ConvInteger", "Trilu", "Conv",
		"BatchNormalization", "Clip", "HardSigmoid", "AveragePool", "GlobalAveragePool", "Pad", "Resize"} {
		hostOps[op] = true
	}
	for _, op := range []string{"Gelu", "BiasGelu", "FastGelu", "SkipLayerNormalization",
		"Attention", "MultiHeadAttention", "EmbedLayerNormalization"} {
		hostOps[graph.OpKey(graph.MicrosoftDomain, op)] = true
	}
}
