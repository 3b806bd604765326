package graph_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

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

// TestQuantizeU8 checks the fast quantizer against quantize (float64 RoundToEven, math.Max
// and Min) on ties, saturation, NaN, infinities and random values.
func TestQuantizeU8(t *testing.T) {
	vals := []float32{0, -0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 254.5, 255.5, -127.5, -128.5, 511.5, 512, -512, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Nextafter32(0.5, 1), math.Nextafter32(0.5, 0), 4194303.5, 8388607}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		vals = append(vals, float32(rng.NormFloat64()*200), float32(rng.Intn(1200)-600)/2)
	}
	for _, r := range [][3]int32{{0, 0, 255}, {128, 0, 255}, {255, 0, 255}, {0, -128, 127}, {-5, -128, 127}, {3, -128, 127}} {
		for _, v := range vals {
			got := graph.QuantizeU8(v, r[0], r[1], r[2])
			want := graph.Quantize(v, 1, int64(r[0]), float64(r[1]), float64(r[2]))
			if int64(int8(got)) != want && int64(got) != want {
				t.Fatalf("QuantizeU8(%v, zp %d, [%d, %d]) = %d, quantize gives %d", v, r[0], r[1], r[2], got, want)
			}
		}
	}
}
