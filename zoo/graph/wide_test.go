package graph_test

import (
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() { goldenSets["wide"] = wideCases }

// wideCases: float64 computed in float64 (values float32 cannot hold, 1 + 2^-40), uint64 as
// unsigned (values from 2^63 up, which int64 reads as negative).
func wideCases() []evalCase {
	const eps = 1.0 / (1 << 40)
	big := uint64(1)<<63 + 5
	u64 := func(v ...uint64) *tensor.Tensor {
		t := &tensor.Tensor{DType: tensor.Uint64, Shape: sh(len(v))}
		for _, x := range v {
			t.I64 = append(t.I64, int64(x))
		}
		return t
	}
	return []evalCase{
		{name: "add float64", op: "Add", in: []*tensor.Tensor{td(sh(1), 1), td(sh(1), eps)}, want: []*tensor.Tensor{td(sh(1), 1+eps)}},
		{name: "matmul float64", op: "MatMul", in: []*tensor.Tensor{td(sh(1, 2), 1, eps), td(sh(2, 1), 1, 1)}, want: []*tensor.Tensor{td(sh(1, 1), 1+eps)}},
		{name: "cumsum float64", op: "CumSum", in: []*tensor.Tensor{td(sh(3), 1, eps, eps), ti(sh(), 0)}, want: []*tensor.Tensor{td(sh(3), 1, 1+eps, 1+2*eps)}},
		{name: "reduce sum float64", op: "ReduceSum", in: []*tensor.Tensor{td(sh(2), 1, eps)}, want: []*tensor.Tensor{td(sh(1), 1+eps)}},
		{name: "equal float64", op: "Equal", in: []*tensor.Tensor{td(sh(2), 1, 1+eps), td(sh(2), 1, 1)}, want: []*tensor.Tensor{tb(sh(2), T, F)}},
		{name: "exp float64", op: "Exp", in: []*tensor.Tensor{td(sh(1), 1)}, want: []*tensor.Tensor{td(sh(1), math.E)}},
		{name: "transpose float64", op: "Transpose", in: []*tensor.Tensor{td(sh(2, 1), 1, eps)}, want: []*tensor.Tensor{td(sh(1, 2), 1, eps)}},
		{name: "mod float64", op: "Mod", attrs: graph.Attrs{"fmod": graph.Int(1)}, in: []*tensor.Tensor{td(sh(1), 5.5), td(sh(1), 2)}, want: []*tensor.Tensor{td(sh(1), 1.5)}},
		{name: "max float64", op: "Max", in: []*tensor.Tensor{td(sh(2), 1, 1+eps), td(sh(1), 1+eps/2)}, want: []*tensor.Tensor{td(sh(2), 1+eps/2, 1+eps)}},
		{name: "cast float64 to float16 rounds once", op: "Cast", attrs: graph.Attrs{"to": graph.Int(int64(tensor.Float16))},
			// 1 + 2^-11 + 2^-40 is just above the float16 tie 1 + 2^-11: float32 would round it onto the tie, and then to 1.
			in: []*tensor.Tensor{td(sh(1), 1+1.0/2048+eps)}, want: []*tensor.Tensor{{DType: tensor.Float16, Shape: sh(1), F32: []float32{1 + 1.0/1024}}}},
		{name: "cast uint64 to float64", op: "Cast", attrs: graph.Attrs{"to": graph.Int(int64(tensor.Float64))}, in: []*tensor.Tensor{u64(big)}, want: []*tensor.Tensor{td(sh(1), float64(big))}},
		{name: "max uint64", op: "Max", in: []*tensor.Tensor{u64(big, 1), u64(3, 2)}, want: []*tensor.Tensor{u64(big, 2)}},
		{name: "min uint64", op: "Min", in: []*tensor.Tensor{u64(big, 1), u64(3, 2)}, want: []*tensor.Tensor{u64(3, 1)}},
		{name: "mod uint64", op: "Mod", in: []*tensor.Tensor{u64(big), u64(10)}, want: []*tensor.Tensor{u64(big % 10)}},
		{name: "bitshift uint64", op: "BitShift", attrs: graph.Attrs{"direction": graph.String("RIGHT")}, in: []*tensor.Tensor{u64(big), u64(62)}, want: []*tensor.Tensor{u64(2)}},
		{name: "pow with a uint64 exponent", op: "Pow", in: []*tensor.Tensor{tf(sh(1), 2), u64(3)}, want: []*tensor.Tensor{tf(sh(1), 8)}},

		{name: "add of uint64", op: "Add", in: []*tensor.Tensor{u64(1), u64(2)}, wantErr: "does not take"},
		{name: "softmax of float64", op: "Softmax", in: []*tensor.Tensor{td(sh(2), 1, 2)}, wantErr: "float64"},
		{name: "cast float64 out of uint64", op: "Cast", attrs: graph.Attrs{"to": graph.Int(int64(tensor.Uint64))}, in: []*tensor.Tensor{td(sh(1), -1)}, wantErr: "does not fit"},
	}
}
