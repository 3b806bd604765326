package cpu

import (
	"github.com/zoo-dev/zoo/zoo/graph"
)

// Kernels of the elementwise ops imported files bring (graph's op_math.go). Their element
// functions come from the op table (graph.UnaryFunc, graph.BinaryFunc), so the semantics live
// in one place; the CPU applies them in parallel over the elements, each float computed in
// float64 and rounded once as the reference does.

// mathOps are the ops with such kernels.
var mathOps = []string{
	"Ceil", "Floor", "Round", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
	"Softplus", "Softsign", "LeakyRelu", "ThresholdedRelu", "Celu", "Selu", "HardSwish", "Shrink",
	"GreaterOrEqual", "LessOrEqual", "Xor",
}

// referenceOps are the ops imported files bring whose CPU kernel is the op table's reference
// evaluation (graph.EvalNode): reductions, index and type ops, and the elementwise ops whose
// elements can fail (Mod by zero) or need a shape check (PRelu's slope).
var referenceOps = []string{
	"IsNaN", "IsInf", "Mod", "BitShift", "PRelu", "Sum", "Mean",
	"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
	"ArgMax", "ArgMin", "LogSoftmax", "Hardmax", "TopK",
	"GatherElements", "GatherND", "ScatterElements", "OneHot", "NonZero", "Compress", "Size", "EyeLike", "CastLike",
	"InstanceNormalization", "GlobalMaxPool", "Dropout", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
}

// addMathOps adds mathOps and referenceOps to the kernel table.
func addMathOps(table map[string]kernelMaker) {
	for _, op := range mathOps {
		table[op] = makeMath
	}
	for _, op := range referenceOps {
		table[op] = makeReference
	}
}

// makeMath returns the kernel of an elementwise op of graph's op_math.go.
func makeMath(n *graph.Node) (kernel, error) {
	if f, i, ok := graph.UnaryFunc(n); ok {
		var ff func(float32) float32
		if f != nil {
			ff = func(v float32) float32 { return float32(f(float64(v))) }
		}
		return unaryOp(ff, i, nil)(n)
	}
	fs, ok := graph.BinaryFunc(n)
	if !ok {
		return nil, unsupported("no element function for %s", n.Op)
	}
	var ff func(a, b float32) bool
	if fs.FB != nil {
		ff = func(a, b float32) bool { return fs.FB(float64(a), float64(b)) }
	}
	return compareOp(ff, fs.IB, fs.B)(n)
}
