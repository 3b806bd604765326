package approx

import (
	"math"
	"math/rand/v2"
	"testing"
)

// qkv draws one head's Q, K, V (n×d) with scores of spread like a trained model's (not the
// near-uniform attention of tiny random ones).
func qkv(n, d int, seed uint64) (q, k, v [][]float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	return gaussian(n, d, 1, r), gaussian(n, d, 1, r), gaussian(n, d, 1, r)
}

// TestExactLimits: the approximations that become exact at their knob's end (Nyström with a
// landmark per row, the window covering every block) agree with Exact to rounding, and a
// restricted softmax differs.
func TestExactLimits(t *testing.T) {
	q, k, v := qkv(24, 8, 1)
	ex := Exact(q, k, v, nil)
	ny, err := Nystrom(q, k, v, 24)
	if err != nil {
		t.Fatal(err)
	}
	if e := RelErr(ny, ex); e > 1e-9 {
		t.Errorf("nystrom with n landmarks: error %g", e)
	}
	if e := RelErr(Exact(q, k, v, func(i, j int) bool { return true }), ex); e != 0 {
		t.Errorf("every pair allowed: error %g", e)
	}
	if e := RelErr(Exact(q, k, v, func(i, j int) bool { return i/4 == j/4 }), ex); e < 0.05 {
		t.Errorf("block-diagonal attention: error %g, want clearly non-zero", e)
	}
	if e := RelErr(Linear(q, k, v), ex); e < 0.05 || math.IsNaN(e) {
		t.Errorf("linear attention: error %g, want clearly non-zero", e)
	}
}

// TestErrorFallsWithKnob: averaged over 8 heads, with a fixed seed, the error of Linformer
// and Performer falls as k or the feature count grows fourfold (their errors shrink like
// 1/√k), and Nyström's as the landmarks grow.
func TestErrorFallsWithKnob(t *testing.T) {
	const n, d, heads = 128, 16, 8
	mean := func(f func(q, k, v [][]float64, r *rand.Rand) [][]float64) float64 {
		r := rand.New(rand.NewPCG(7, 7))
		var s float64
		for h := 0; h < heads; h++ {
			q, k, v := qkv(n, d, uint64(h)+10)
			for i := range q {
				for j := range q[i] {
					q[i][j] *= 0.5
					k[i][j] *= 0.5
				}
			}
			s += RelErr(f(q, k, v, r), Exact(q, k, v, nil))
		}
		return s / heads
	}
	for _, tc := range []struct {
		name string
		at   func(knob int) func(q, k, v [][]float64, r *rand.Rand) [][]float64
		ks   []int
	}{
		{"linformer", func(kn int) func(q, k, v [][]float64, r *rand.Rand) [][]float64 {
			return func(q, k, v [][]float64, r *rand.Rand) [][]float64 { return Linformer(q, k, v, kn, r) }
		}, []int{4, 16, 64, 256}},
		{"performer", func(m int) func(q, k, v [][]float64, r *rand.Rand) [][]float64 {
			return func(q, k, v [][]float64, r *rand.Rand) [][]float64 { return Performer(q, k, v, m, r) }
		}, []int{8, 32, 128, 512}},
		{"nystrom", func(m int) func(q, k, v [][]float64, r *rand.Rand) [][]float64 {
			return func(q, k, v [][]float64, _ *rand.Rand) [][]float64 {
				o, err := Nystrom(q, k, v, m)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
		}, []int{4, 16, 64, 128}},
	} {
		prev := math.Inf(1)
		for _, kn := range tc.ks {
			e := mean(tc.at(kn))
			t.Logf("%s %d: mean relative error %.4f", tc.name, kn, e)
			if !(e < prev) {
				t.Errorf("%s: error %.4f at %d, not below %.4f at the smaller knob", tc.name, e, kn, prev)
			}
			prev = e
		}
	}
}
