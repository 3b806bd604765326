package graph

// com.microsoft LayerNormalization: ONNX Runtime's contrib layer norm, which predates (and
// has the same inputs, outputs, attributes and math as) ai.onnx LayerNormalization-17.

func init() {
	register(&OpDef{
		Name: "LayerNormalization", Domain: MicrosoftDomain, SinceVersion: 1, ThroughVersion: 1,
		Doc:     "(x − mean) / sqrt(var + epsilon) · scale + B over the axes from axis on (ONNX Runtime's contrib op)",
		Inputs:  ps(req("X"), req("Scale"), opt("B")),
		Outputs: ps(req("Y"), opt("Mean"), opt("InvStdDev")),
		Attrs:   []AttrDef{intAttr("axis", -1), floatAttr("epsilon", 1e-5), intAttr("stash_type", 1)},
		infer:   (*nodeCtx).layerNorm,
		Eval:    evalLayerNorm,
		Cost:    perInput(8),
	})
}
