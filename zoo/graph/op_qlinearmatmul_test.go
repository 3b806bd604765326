package graph_test

import "github.com/zoo-dev/zoo/zoo/tensor"

func init() { goldenSets["QLinearMatMul"] = qlinearMatMulCases }

// QLinearMatMul: the MatMulInteger "zero points" case's sums [2 -1; 8 -7] requantized per
// column with multipliers 0.5·1/0.25 = 2 and 0.5·0.25/0.25 = 0.5 (-0.5 rounds to even 0), and
// into int8 with y_scale 0.01 (multipliers 50 and 12.5: -12.5 → -12, 400 saturates).
func qlinearMatMulCases() []evalCase {
	a, as, az := tu8(sh(2, 2), 1, 2, 3, 4), tf(sh(), 0.5), tu8(sh(), 1)
	b, bs, bz := ti8(sh(2, 2), 1, -1, 2, 0), tf(sh(2), 1, 0.25), ti8(sh(2), 0, 1)
	return []evalCase{
		{name: "uint8 per column", op: "QLinearMatMul", in: []*tensor.Tensor{a, as, az, b, bs, bz, tf(sh(), 0.25), tu8(sh(), 10)},
			want: []*tensor.Tensor{tu8(sh(2, 2), 14, 10, 26, 6)}},
		{name: "int8 saturating", op: "QLinearMatMul", in: []*tensor.Tensor{a, as, az, b, bs, bz, tf(sh(), 0.01), ti8(sh(), 0)},
			want: []*tensor.Tensor{ti8(sh(2, 2), 100, -12, 127, -88)}},
		{name: "float operand", op: "QLinearMatMul", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), as, az, b, bs, bz, tf(sh(), 1), tu8(sh(), 0)}, wantErr: "int8 or uint8"},
		{name: "scale length", op: "QLinearMatMul", in: []*tensor.Tensor{a, as, az, b, tf(sh(3), 1, 2, 3), bz, tf(sh(), 1), tu8(sh(), 0)}, wantErr: "entries"},
	}
}
