package performer

import (
	"math"
	"testing"

	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}

func build(t *testing.T, seed uint64, layers ...map[string]any) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, New(), seed, layers...)
}

func TestFeatureCount(t *testing.T) {
	for _, c := range [][3]int{{0, 64, 266}, {0, 16, 44}, {100, 64, 100}, {0, 1, 1}} {
		if got := Features(c[0], c[1]); got != c[2] {
			t.Errorf("Features(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}

func TestOrthogonalFeatures(t *testing.T) {
	const dk, m = 16, 40 // two full blocks and a partial one
	for _, sqrt := range []bool{false, true} {
		w := OrthogonalFeatures(9, "x", m, dk, sqrt)
		if !tensor.SameShape(w.Shape, []int{m, dk}) {
			t.Fatalf("shape %v", w.Shape)
		}
		row := func(i int) []float64 {
			r := make([]float64, dk)
			for j := range r {
				r[j] = float64(w.F32[i*dk+j])
			}
			return r
		}
		norm := func(r []float64) float64 {
			s := 0.0
			for _, x := range r {
				s += x * x
			}
			return math.Sqrt(s)
		}
		for i := 0; i < m; i++ {
			ri := row(i)
			if sqrt && math.Abs(norm(ri)-4) > 1e-5 {
				t.Errorf("sqrt_dk: row %d has norm %v, want 4", i, norm(ri))
			}
			for j := i + 1; j < m && j/dk == i/dk; j++ {
				rj := row(j)
				dot := 0.0
				for k := range ri {
					dot += ri[k] * rj[k]
				}
				if c := dot / (norm(ri) * norm(rj)); math.Abs(c) > 1e-5 {
					t.Errorf("rows %d and %d of one block have cosine %g", i, j, c)
				}
			}
		}
	}
	if !tensor.Equal(OrthogonalFeatures(1, "a", 20, 8, false), OrthogonalFeatures(1, "a", 20, 8, false)) {
		t.Error("features are not deterministic")
	}
}

func TestFeaturesAreBuffers(t *testing.T) {
	g := build(t, 1, tiny)
	var p0, p1 *tensor.Tensor
	for _, in := range g.Initializers {
		switch in.Name {
		case "layers.0.self_attn.projection_matrix":
			p0 = in.Tensor
			if !in.Buffer {
				t.Error("projection_matrix is not a buffer")
			}
		case "layers.1.self_attn.projection_matrix":
			p1 = in.Tensor
		}
	}
	if p0 == nil || p1 == nil || !tensor.SameShape(p0.Shape, []int{44, 16}) {
		t.Fatalf("projection matrices missing or wrong shape")
	}
	if tensor.Equal(p0, p1) {
		t.Error("layers share the same random features")
	}
	g2 := build(t, 1, tiny, map[string]any{"nb_features": 7})
	if p := g2.Initializer("layers.0.self_attn.projection_matrix"); p == nil || !tensor.SameShape(p.Shape, []int{7, 16}) {
		t.Errorf("nb_features=7 gives %v", p)
	}
}

// The cost grows linearly in n.
func TestCostIsLinear(t *testing.T) {
	g := build(t, 1, map[string]any{"max_len": 20000})
	paritytest.CheckLinearCost(t, g)
}

// Padded keys and the key stabiliser are per sequence: valid outputs do not depend on padding.
func TestPaddingInvariance(t *testing.T) {
	g := build(t, 3, tiny)
	runOne := func(n, valid int) *tensor.Tensor { return paritytest.RunPadded(t, g, n, valid) }
	a, b := runOne(11, 11), runOne(50, 11)
	for i := 0; i < 11*64; i++ {
		if d := math.Abs(float64(a.F32[i] - b.F32[i])); d > 1e-5 {
			t.Fatalf("padding changes valid output %d by %g", i, d)
		}
	}
}
