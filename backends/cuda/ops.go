//go:build cgo && linux

package cuda

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// gpuOp computes a node on the device. Inputs may be device or host values; outputs carry
// one reference each.
type gpuOp func(r *run, n *graph.Node, in []value) ([]value, error)

var gpuOps map[string]gpuOp

// Op codes shared with kernels.cu.
var (
	unaryOps  = map[string]int{"Abs": 0, "Neg": 1, "Exp": 2, "Log": 3, "Sqrt": 4, "Erf": 5, "Tanh": 6, "Sigmoid": 7, "Relu": 8, "Elu": 9}
	binaryOps = map[string]int{"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Pow": 4, "Max": 5, "Min": 6}
)

func init() {
	gpuOps = map[string]gpuOp{
		"Where": opWhere, "MatMul": opMatMul, "Gemm": opGemm, "Softmax": opSoftmax,
		"LayerNormalization": opLayerNorm, "Gather": opGather, "Transpose": opTranspose,
		"Slice": opSlice, "Concat": opConcat, "Split": opSplit, "Expand": opExpand, "Tile": opTile,
		"Reshape": opReshape, "Squeeze": axesView(squeezeView), "Unsqueeze": axesView(unsqueezeView), "Identity": opIdentity,
		"ReduceSum": opReduce(0), "ReduceMean": opReduce(1), "ReduceMax": opReduce(2),
	}
	for op := range unaryOps {
		gpuOps[op] = opUnary
	}
	for op := range binaryOps {
		gpuOps[op] = opBinary
	}
}

// SupportedOps returns the op types the CUDA backend accepts, sorted: those with device
// kernels (gpuOps) and the host ops.
func SupportedOps() []string {
	ops := slices.Collect(maps.Keys(gpuOps))
	for op := range hostOps {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// step runs one node: host ops (and any op whose inputs are all int64 or bool) on the
// host through graph.EvalNode, the rest on the device.
func (r *run) step(st *step, in []value) ([]value, error) {
	n := st.Node
	switch n.Op {
	case "Shape":
		return opShape(n, in)
	case "Cast":
		if in[0].dev != nil && tensor.DType(n.Int("to", 0)) == tensor.Float32 {
			return []value{{dev: r.view(in[0].dev, in[0].dev.shape)}}, nil
		}
	}
	anyFloat := false
	for _, v := range in {
		anyFloat = anyFloat || v.isFloat()
	}
	if hostOps[graph.OpKey(n.Domain, n.Op)] || !anyFloat || (n.Op == "Pow" && !powOnDevice(in)) {
		hs := make([]*tensor.Tensor, len(in))
		for i, v := range in {
			if v.host == nil && v.dev != nil {
				t, err := r.download(v.dev)
				if err != nil {
					return nil, err
				}
				hs[i] = t
			} else {
				hs[i] = v.host
			}
		}
		outs, err := graph.EvalNode(n, hs)
		if err != nil {
			return nil, err
		}
		res := make([]value, len(outs))
		for i, t := range outs {
			res[i] = value{host: t}
		}
		return res, nil
	}
	if st.Kernel == nil {
		return nil, fmt.Errorf("no CUDA kernel for %s on float32 data", n.Op)
	}
	return st.Kernel(r, n, in)
}

// hostInts returns an int64 host input's values (shape operands).
func hostInts(v value, what string) ([]int64, error) {
	if v.host == nil {
		if v.dev != nil {
			return nil, fmt.Errorf("%s must be int64, got float32", what)
		}
		return nil, fmt.Errorf("%s is missing", what)
	}
	if v.host.DType != tensor.Int64 && v.host.DType != tensor.Int32 {
		return nil, fmt.Errorf("%s must be int64, got %v", what, v.host.DType)
	}
	return v.host.I64, nil
}

func one(t *dtensor) []value { return []value{{dev: t}} }

// powOnDevice reports whether the device's Pow takes these operands: a float32 base and a
// float32 or int32/int64 exponent (converted to float32 exactly as the reference does).
// ONNX's Pow also takes an integer base (its result keeps the base's type) and unsigned
// exponents; those run on the host.
func powOnDevice(in []value) bool {
	if len(in) != 2 || !in[0].isFloat() {
		return false
	}
	e := in[1]
	return e.dev != nil || (e.host != nil && (e.host.DType == tensor.Float32 || e.host.DType == tensor.Int32 || e.host.DType == tensor.Int64))
}
