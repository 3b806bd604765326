package graph_test

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() { goldenSets["Pad"] = padCases }

// The constant, reflect, edge and wrap cases are ONNX's documented Pad examples; the others'
// numbers are numpy.pad's (which ONNX's reference implementation calls).
func padCases() []evalCase {
	x := tf(sh(3, 2), 1.0, 1.2, 2.3, 3.4, 4.5, 5.7)
	mode := func(m string) graph.Attrs { return graph.Attrs{"mode": graph.String(m)} }
	p := func(v ...int64) *tensor.Tensor { return ti(sh(len(v)), v...) }
	y := tf(sh(5), 1, 2, 3, 4, 5)
	return []evalCase{
		{name: "constant", op: "Pad", in: []*tensor.Tensor{x, p(0, 2, 0, 0), tf(sh(), 0)},
			want: []*tensor.Tensor{tf(sh(3, 4), 0, 0, 1.0, 1.2, 0, 0, 2.3, 3.4, 0, 0, 4.5, 5.7)}},
		{name: "reflect", op: "Pad", attrs: mode("reflect"), in: []*tensor.Tensor{x, p(0, 2, 0, 0)},
			want: []*tensor.Tensor{tf(sh(3, 4), 1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7)}},
		{name: "edge", op: "Pad", attrs: mode("edge"), in: []*tensor.Tensor{x, p(0, 2, 0, 0)},
			want: []*tensor.Tensor{tf(sh(3, 4), 1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7)}},
		{name: "wrap", op: "Pad", attrs: mode("wrap"), in: []*tensor.Tensor{x, p(2, 1, 1, 1)},
			want: []*tensor.Tensor{tf(sh(6, 4), 3.4, 2.3, 3.4, 2.3, 5.7, 4.5, 5.7, 4.5, 1.2, 1.0, 1.2, 1.0, 3.4, 2.3, 3.4, 2.3, 5.7, 4.5, 5.7, 4.5, 1.2, 1.0, 1.2, 1.0)}},
		{name: "reflect beyond one period", op: "Pad", attrs: mode("reflect"), in: []*tensor.Tensor{y, p(3, 4)},
			want: []*tensor.Tensor{tf(sh(12), 4, 3, 2, 1, 2, 3, 4, 5, 4, 3, 2, 1)}},
		{name: "edge 1-D", op: "Pad", attrs: mode("edge"), in: []*tensor.Tensor{y, p(2, 1)}, want: []*tensor.Tensor{tf(sh(8), 1, 1, 1, 2, 3, 4, 5, 5)}},
		{name: "axes, negative pad crops, int value", op: "Pad", in: []*tensor.Tensor{ti(sh(3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), p(1, -1), ti(sh(), 9), p(-1)},
			want: []*tensor.Tensor{ti(sh(3, 4), 9, 0, 1, 2, 9, 4, 5, 6, 9, 8, 9, 10)}},
		{name: "no constant is zero", op: "Pad", in: []*tensor.Tensor{tf(sh(1), 7), p(1, 1)}, want: []*tensor.Tensor{tf(sh(3), 0, 7, 0)}},
		{name: "bad mode", op: "Pad", attrs: mode("mirror"), in: []*tensor.Tensor{y, p(1, 1)}, wantErr: "mode"},
		{name: "pads of wrong length", op: "Pad", in: []*tensor.Tensor{x, p(1, 1)}, wantErr: "pads has 2 entries"},
		{name: "reflect of size 1", op: "Pad", attrs: mode("reflect"), in: []*tensor.Tensor{tf(sh(1), 1), p(1, 0)}, wantErr: "reflect"},
		{name: "crop below zero", op: "Pad", in: []*tensor.Tensor{y, p(-3, -3)}, wantErr: "below zero"},
		{name: "constant of another dtype", op: "Pad", in: []*tensor.Tensor{y, p(1, 1), ti(sh(), 1)}, wantErr: "constant_value"},
	}
}
