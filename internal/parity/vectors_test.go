package parity

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestCompareVectors(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name      string
		got, want *tensor.Tensor
		valid     []bool
		err       string
		positions int
		maxRel    float64
		maxRelAt  []int
		meanRel   float64
		cosine    []float64
	}{
		{name: "identical", got: f32([]int{2, 2}, 1, 2, 3, 4), want: f32([]int{2, 2}, 1, 2, 3, 4),
			positions: 2, maxRel: 0, maxRelAt: []int{0, 0}, meanRel: 0, cosine: []float64{1, 1}},
		// The scale is the vector's largest magnitude (4), not the element's (0.001).
		{name: "scaled by the vector", got: f32([]int{1, 2}, 0.101, 4), want: f32([]int{1, 2}, 0.001, 4),
			positions: 1, maxRel: 0.1 / 4, maxRelAt: []int{0, 0}, meanRel: 0.1 / 8},
		{name: "opposite", got: f32([]int{1, 1, 2}, -1, 0), want: f32([]int{1, 1, 2}, 1, 0),
			positions: 1, maxRel: 2, maxRelAt: []int{0, 0, 0}, meanRel: 1, cosine: []float64{-1}},
		{name: "orthogonal", got: f32([]int{1, 2}, 0, 1), want: f32([]int{1, 2}, 1, 0),
			positions: 1, maxRel: 1, maxRelAt: []int{0, 0}, meanRel: 1, cosine: []float64{0}},
		{name: "zero reference: absolute error", got: f32([]int{1, 2}, 0.5, 0), want: f32([]int{1, 2}, 0, 0),
			positions: 1, maxRel: 0.5, maxRelAt: []int{0, 0}, meanRel: 0.25, cosine: []float64{0}},
		{name: "both zero", got: f32([]int{1, 2}, 0, 0), want: f32([]int{1, 2}, 0, 0),
			positions: 1, maxRelAt: []int{0, 0}, cosine: []float64{1}},
		// The padded position's huge error is not counted.
		{name: "mask", got: f32([]int{1, 2, 2}, 1, 1, 100, 0), want: f32([]int{1, 2, 2}, 1, 1, 0, 1), valid: []bool{true, false},
			positions: 1, maxRel: 0, maxRelAt: []int{0, 0, 0}, cosine: []float64{1}},
		{name: "nil", got: nil, want: f32([]int{1}, 1), err: "missing output"},
		{name: "dtype", got: &tensor.Tensor{DType: tensor.Int64, Shape: []int{1}, I64: []int64{1}}, want: f32([]int{1}, 1), err: "float32"},
		{name: "shapes", got: f32([]int{1, 2}, 1, 2), want: f32([]int{2, 1}, 1, 2), err: "shapes differ"},
		{name: "scalar", got: f32(nil, 1), want: f32(nil, 1), err: "no vectors"},
		{name: "mask length", got: f32([]int{2, 1}, 1, 2), want: f32([]int{2, 1}, 1, 2), valid: []bool{true}, err: "1 entries for 2 positions"},
		{name: "nothing valid", got: f32([]int{1, 1}, 1), want: f32([]int{1, 1}, 1), valid: []bool{false}, err: "no valid position"},
		{name: "nan", got: f32([]int{1, 2}, 1, nan), want: f32([]int{1, 2}, 1, 1), err: "non-finite value at [0 1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompareVectors(c.got, c.want, c.valid)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6 }
			if s.Positions != c.positions || len(s.Cosine) != c.positions || !near(s.MaxRel, c.maxRel) || !near(s.MeanRel, c.meanRel) ||
				!slices.Equal(s.MaxRelAt, c.maxRelAt) {
				t.Errorf("got %+v; want %d positions, max rel %g at %v, mean rel %g", s, c.positions, c.maxRel, c.maxRelAt, c.meanRel)
			}
			for i, want := range c.cosine {
				if !near(s.Cosine[i], want) {
					t.Errorf("cosine[%d] = %g, want %g", i, s.Cosine[i], want)
				}
			}
			if lo, mean := slices.Min(s.Cosine), 0.0; !near(s.MinCosine, lo) {
				t.Errorf("min cosine %g, want %g", s.MinCosine, lo)
			} else {
				for _, x := range s.Cosine {
					mean += x / float64(len(s.Cosine))
				}
				if !near(s.MeanCosine, mean) {
					t.Errorf("mean cosine %g, want %g", s.MeanCosine, mean)
				}
			}
		})
	}
}
