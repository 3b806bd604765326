package cpu

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// importedOps are the ops that imported graphs bring (quantized, convolutional, Pad, Resize, Trilu and ONNX
// Runtime's com.microsoft ops), by op-table key. Their CPU kernel is the op table's own
// evaluation (graph.EvalNode): exact for the integer ops and float64-accumulated for the
// float ones, so the semantics live in one place; the contrib attentions have SGEMM kernels
// (imported_attention.go).
var importedOps = []string{
	"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "Trilu", "Conv",
	"BatchNormalization", "Clip", "HardSigmoid", "AveragePool", "GlobalAveragePool", "Pad", "Resize",
	graph.MicrosoftDomain + ".Gelu", graph.MicrosoftDomain + ".BiasGelu", graph.MicrosoftDomain + ".FastGelu",
	graph.MicrosoftDomain + ".SkipLayerNormalization",
	graph.MicrosoftDomain + ".Attention", graph.MicrosoftDomain + ".MultiHeadAttention",
	graph.MicrosoftDomain + ".EmbedLayerNormalization",
}

// addImportedOps adds importedOps to the kernel table.
func addImportedOps(table map[string]kernelMaker) {
	for _, op := range importedOps {
		table[op] = makeReference
	}
	table[graph.MicrosoftDomain+".Attention"] = makeMSAttention
	table[graph.MicrosoftDomain+".MultiHeadAttention"] = makeMSMultiHeadAttention
}

// makeReference returns a kernel that evaluates the node with the op table's reference.
func makeReference(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		return graph.EvalNode(n, in)
	}, nil
}

// wideKernel returns node n's kernel from mk, for an op that takes float64 or uint64 values
// (graph.OpDef's Float64, Uint64) wrapped so that a run with such values goes through the op
// table's reference evaluation (which computes float64 in float64): the CPU's own kernels
// compute float32 and int64. A node whose output type comes from an attribute (a Cast to
// float64) takes that path whatever its inputs.
func wideKernel(n *graph.Node, mk kernelMaker) (kernel, error) {
	d, ok := graph.LookupNodeOp(n)
	if !ok || !(d.Float64 || d.Uint64) {
		return mk(n)
	}
	if graph.IsWide(tensor.DType(n.Int("to", 0))) {
		return makeReference(n)
	}
	if a, ok := n.Attrs["value"]; ok && a.T != nil && graph.IsWide(a.T.DType) {
		return makeReference(n)
	}
	k, err := mk(n)
	if err != nil {
		return nil, err
	}
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		for _, t := range in {
			if t != nil && graph.IsWide(t.DType) {
				return graph.EvalNode(n, in)
			}
		}
		return k(e, in)
	}, nil
}

// castSmallInt fills out (int8, uint8, int16, uint16 or uint32) from x with C semantics:
// floats truncate toward zero, integers wrap, true is 1.
func castSmallInt(x, out *tensor.Tensor, to tensor.DType) (*tensor.Tensor, error) {
	wrap := to.Wrap
	for i := range out.I64 {
		switch {
		case x.DType.IsFloat():
			out.I64[i] = wrap(int64(x.F32[i]))
		case x.DType == tensor.Bool:
			if x.Bool[i] {
				out.I64[i] = 1
			}
		default:
			out.I64[i] = wrap(x.I64[i])
		}
	}
	return out, nil
}
