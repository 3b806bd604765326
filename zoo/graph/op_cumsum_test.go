package graph_test

import (
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() { goldenSets["cumsum"] = cumSumCases }

func cumSumCases() []evalCase {
	x := tf(sh(2, 3), 1, 2, 3, 4, 5, 6)
	axis := func(a int64) *tensor.Tensor { return ti(sh(), a) }
	return []evalCase{
		{name: "last axis", op: "CumSum", in: []*tensor.Tensor{x, axis(1)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 3, 6, 4, 9, 15)}},
		{name: "first axis, 1-element axis", op: "CumSum", in: []*tensor.Tensor{x, ti(sh(1), 0)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 2, 3, 5, 7, 9)}},
		{name: "negative axis", op: "CumSum", in: []*tensor.Tensor{x, axis(-1)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 3, 6, 4, 9, 15)}},
		{name: "exclusive", op: "CumSum", attrs: graph.Attrs{"exclusive": graph.Int(1)}, in: []*tensor.Tensor{x, axis(1)},
			want: []*tensor.Tensor{tf(sh(2, 3), 0, 1, 3, 0, 4, 9)}},
		{name: "reverse", op: "CumSum", attrs: graph.Attrs{"reverse": graph.Int(1)}, in: []*tensor.Tensor{x, axis(1)},
			want: []*tensor.Tensor{tf(sh(2, 3), 6, 5, 3, 15, 11, 6)}},
		{name: "reverse exclusive", op: "CumSum", attrs: graph.Attrs{"reverse": graph.Int(1), "exclusive": graph.Int(1)}, in: []*tensor.Tensor{x, axis(1)},
			want: []*tensor.Tensor{tf(sh(2, 3), 5, 3, 0, 11, 6, 0)}},
		// float64 accumulation: 2^24 + 1 + 1 is exact in float64, not in float32 steps
		{name: "sums in float64", op: "CumSum", in: []*tensor.Tensor{tf(sh(3), 1<<24, 1, 1), axis(0)}, want: []*tensor.Tensor{tf(sh(3), 1<<24, 1<<24, 1<<24+2)}},
		{name: "int64", op: "CumSum", in: []*tensor.Tensor{ti(sh(3), 1, -2, 5), axis(0)}, want: []*tensor.Tensor{ti(sh(3), 1, -1, 4)}},
		{name: "int32 wraps", op: "CumSum", in: []*tensor.Tensor{ti32(sh(2), math.MaxInt32, 1), axis(0)}, want: []*tensor.Tensor{ti32(sh(2), math.MaxInt32, math.MinInt32)}},
		{name: "empty axis", op: "CumSum", in: []*tensor.Tensor{tf(sh(2, 0)), axis(1)}, want: []*tensor.Tensor{tf(sh(2, 0))}},
		{name: "axis out of range", op: "CumSum", in: []*tensor.Tensor{x, axis(2)}, wantErr: "axis"},
		{name: "axis of two elements", op: "CumSum", in: []*tensor.Tensor{x, ti(sh(2), 0, 1)}, wantErr: "one"},
		{name: "float axis", op: "CumSum", in: []*tensor.Tensor{x, tf(sh(), 1)}, wantErr: "int64"},
		{name: "bool data", op: "CumSum", in: []*tensor.Tensor{tb(sh(2), true, false), axis(0)}, wantErr: "dtype"},
	}
}
