package graph_test

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() { goldenSets["ScatterND"] = scatterNDCases }

func scatterNDCases() []evalCase {
	add := graph.Attrs{"reduction": graph.String("add")}
	return []evalCase{
		{name: "rows", op: "ScatterND", in: []*tensor.Tensor{tf(sh(3, 2), 1, 2, 3, 4, 5, 6), ti(sh(2, 1), 2, 0), tf(sh(2, 2), 10, 20, 30, 40)},
			want: []*tensor.Tensor{tf(sh(3, 2), 30, 40, 3, 4, 10, 20)}},
		{name: "elements", op: "ScatterND", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), ti(sh(2, 2), 0, 1, 1, -2), tf(sh(2), 7, 8)},
			want: []*tensor.Tensor{tf(sh(2, 2), 1, 7, 8, 4)}},
		{name: "add repeats (embedding gradient)", op: "ScatterND", attrs: add, in: []*tensor.Tensor{zeros(3, 2), ti(sh(2, 2, 1), 1, 0, 1, 1), tf(sh(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)},
			want: []*tensor.Tensor{tf(sh(3, 2), 3, 4, 13, 16, 0, 0)}},
		{name: "mul", op: "ScatterND", attrs: graph.Attrs{"reduction": graph.String("mul")}, in: []*tensor.Tensor{tf(sh(3), 1, 2, 3), ti(sh(2, 1), 2, 2), tf(sh(2), 2, 5)},
			want: []*tensor.Tensor{tf(sh(3), 1, 2, 30)}},
		{name: "int64 add", op: "ScatterND", attrs: add, in: []*tensor.Tensor{ti(sh(2), 1, 2), ti(sh(1, 1), 1), ti(sh(1), 5)},
			want: []*tensor.Tensor{ti(sh(2), 1, 7)}},
		{name: "repeat without reduction", op: "ScatterND", in: []*tensor.Tensor{tf(sh(2), 1, 2), ti(sh(2, 1), 0, 0), tf(sh(2), 3, 4)}, wantErr: "undefined"},
		{name: "index out of range", op: "ScatterND", in: []*tensor.Tensor{tf(sh(2), 1, 2), ti(sh(1, 1), 2), tf(sh(1), 3)}, wantErr: "out of range"},
		{name: "updates misshaped", op: "ScatterND", in: []*tensor.Tensor{tf(sh(3, 2), 1, 2, 3, 4, 5, 6), ti(sh(2, 1), 2, 0), tf(sh(2, 3), 1, 2, 3, 4, 5, 6)}, wantErr: "updates have shape"},
		{name: "float indices", op: "ScatterND", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(1, 1), 0), tf(sh(1), 3)}, wantErr: "int64"},
		{name: "bad reduction", op: "ScatterND", attrs: graph.Attrs{"reduction": graph.String("max")}, in: []*tensor.Tensor{tf(sh(2), 1, 2), ti(sh(1, 1), 0), tf(sh(1), 3)}, wantErr: "reduction"},
	}
}
