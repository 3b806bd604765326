package cpu

import (
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestCumSumMatchesReference: the threaded kernel gives EvalNode's sums bit for bit on every
// axis, with exclusive and reverse.
func TestCumSumMatchesReference(t *testing.T) {
	x, _ := tensor.New(tensor.Float32, 5, 300, 7)
	for i := range x.F32 {
		x.F32[i] = float32((i*7919)%1000)/997 - 0.5
	}
	for axis := int64(-3); axis < 3; axis++ {
		for _, attrs := range []graph.Attrs{nil, {"exclusive": graph.Int(1)}, {"reverse": graph.Int(1)}, {"reverse": graph.Int(1), "exclusive": graph.Int(1)}} {
			ax := &tensor.Tensor{DType: tensor.Int64, Shape: []int{}, I64: []int64{axis}}
			got := runOp(t, 3, "CumSum", attrs, x, ax)
			want, err := graph.EvalNode(&graph.Node{Name: "n", Op: "CumSum", Attrs: attrs, Inputs: []string{"x", "a"}, Outputs: []string{"y"}}, []*tensor.Tensor{x, ax})
			if err != nil {
				t.Fatal(err)
			}
			for i := range got.F32 {
				if got.F32[i] != want[0].F32[i] {
					t.Fatalf("axis %d %v: element %d is %v, reference %v", axis, attrs, i, got.F32[i], want[0].F32[i])
				}
			}
		}
	}
}
