package cpu

import (
	"fmt"
	"sort"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// kernel computes a node's outputs from its inputs (nil for an omitted optional input).
// Kernels never modify their inputs; they may return an input (or a view sharing its
// storage) as an output.
type kernel func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error)

// kernelMaker parses a node's attributes once, at compile time, and returns its kernel.
type kernelMaker func(n *graph.Node) (kernel, error)

// opTable maps every supported op type to its kernel maker.
var opTable map[string]kernelMaker

func init() {
	opTable = map[string]kernelMaker{
		"Abs":                unaryOp(absF, absI, nil),
		"Neg":                unaryOp(negF, negI, nil),
		"Exp":                unaryOp(expF, nil, nil),
		"Log":                unaryOp(logF, nil, nil),
		"Sqrt":               unaryOp(sqrtF, nil, nil),
		"Erf":                unaryOp(erfF, nil, nil),
		"Tanh":               unaryOp(tanhF, nil, nil),
		"Sigmoid":            unaryOp(sigmoidF, nil, nil),
		"Relu":               unaryOp(reluF, reluI, nil),
		"Not":                unaryOp(nil, nil, func(v bool) bool { return !v }),
		"Elu":                makeElu,
		"Add":                makeAdd,
		"Sub":                arithOp('-', func(a, b float32) float32 { return a - b }, func(a, b int64) int64 { return a - b }),
		"Mul":                arithOp('*', func(a, b float32) float32 { return a * b }, func(a, b int64) int64 { return a * b }),
		"Div":                makeDiv,
		"Pow":                makePow,
		"Max":                minMaxOp(true),
		"Min":                minMaxOp(false),
		"Equal":              compareOp(func(a, b float32) bool { return a == b }, func(a, b int64) bool { return a == b }, func(a, b bool) bool { return a == b }),
		"Greater":            compareOp(func(a, b float32) bool { return a > b }, func(a, b int64) bool { return a > b }, nil),
		"Less":               compareOp(func(a, b float32) bool { return a < b }, func(a, b int64) bool { return a < b }, nil),
		"And":                compareOp(nil, nil, func(a, b bool) bool { return a && b }),
		"Or":                 compareOp(nil, nil, func(a, b bool) bool { return a || b }),
		"Where":              makeWhere,
		"Cast":               makeCast,
		"Identity":           makeIdentity,
		"Constant":           makeConstant,
		"ConstantOfShape":    makeConstantOfShape,
		"Shape":              makeShape,
		"Reshape":            makeReshape,
		"Squeeze":            makeSqueeze,
		"Unsqueeze":          makeUnsqueeze,
		"Transpose":          makeTranspose,
		"Concat":             makeConcat,
		"Split":              makeSplit,
		"Slice":              makeSlice,
		"Gather":             makeGather,
		"Expand":             makeExpand,
		"Tile":               makeTile,
		"Range":              makeRange,
		"MatMul":             makeMatMul,
		"Gemm":               makeGemm,
		"Softmax":            makeSoftmax,
		"LayerNormalization": makeLayerNorm,
		"ReduceSum":          reduceOp(reduceSum),
		"ReduceMean":         reduceOp(reduceMean),
		"ReduceMax":          reduceOp(reduceMax),
		"ScatterND":          makeScatterND,
		"CumSum":             makeCumSum, // cumsum.go
		"Gelu":               makeGelu,
		"RMSNormalization":   makeRMSNorm,
		"RotaryEmbedding":    makeRotary,
		"Attention":          makeAttentionOp,
	}
	addImportedOps(opTable)
	addMathOps(opTable) // math_ops.go
}

// UnsupportedOps returns the ops of graph's op table that the CPU backend deliberately
// lacks, each with the reason (none today: the CPU backend is the reference and runs every
// op). The op-table coverage test (backends/optable_test.go) accepts only these gaps.
func UnsupportedOps() map[string]string { return map[string]string{} }

// SupportedOps returns the op types the CPU backend implements.
func SupportedOps() []string {
	ops := make([]string, 0, len(opTable))
	for op := range opTable {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// unsupported returns an *UnsupportedOpError; compile fills in the op and node names.
func unsupported(format string, args ...any) error {
	return &backends.UnsupportedOpError{Detail: fmt.Sprintf(format, args...)}
}

// isInt reports whether dt is an integer type (held in I64).
func isInt(dt tensor.DType) bool { return dt.IsInt() }

// alloc returns a zero-filled tensor. Kernels call e.alloc instead, which recycles the
// buffers of dead activations during a Run.
func alloc(dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	t, err := tensor.New(dt, shape...)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// one wraps a single output.
func one(t *tensor.Tensor, err error) ([]*tensor.Tensor, error) {
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{t}, nil
}

// intValues returns the values of an integer tensor.
func intValues(t *tensor.Tensor, what string) ([]int64, error) {
	if t == nil {
		return nil, fmt.Errorf("%s is missing", what)
	}
	if !isInt(t.DType) {
		return nil, fmt.Errorf("%s must be int64, got %v", what, t.DType)
	}
	return t.I64, nil
}

// need checks that required inputs are present.
func need(in []*tensor.Tensor, n int) error {
	if len(in) < n {
		return fmt.Errorf("want %d inputs, got %d", n, len(in))
	}
	for i := 0; i < n; i++ {
		if in[i] == nil {
			return fmt.Errorf("required input %d is missing", i)
		}
	}
	return nil
}

// view returns a tensor with a new shape sharing t's storage.
func view(t *tensor.Tensor, shape []int) *tensor.Tensor {
	return &tensor.Tensor{DType: t.DType, Shape: shape, F32: t.F32, I64: t.I64, Bool: t.Bool}
}

// sameDType checks that every non-nil input has the dtype of the first.
func sameDType(in []*tensor.Tensor) error {
	for i := 1; i < len(in); i++ {
		if in[i] != nil && in[i].DType != in[0].DType {
			return fmt.Errorf("input %d has dtype %v, input 0 has %v", i, in[i].DType, in[0].DType)
		}
	}
	return nil
}
