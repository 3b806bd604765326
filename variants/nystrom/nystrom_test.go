package nystrom

import (
	"testing"

	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128, "num_landmarks": 8}

func build(t *testing.T, v variant.Variant, seed uint64, layers ...map[string]any) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, v, seed, layers...)
}

// zoo's rule for n not divisible by m is "pad with masked positions to the next multiple":
// 37 tokens alone (padded inside the graph to 40) and 37 tokens + 3 pad positions (n = 40,
// no extension) give the same outputs; so do 35 tokens + 2 pads and 35 + 5 pads.
func TestRaggedLengthIsMaskedPadding(t *testing.T) {
	g := build(t, New(), 2, tiny)
	if d := paritytest.MaxDiff(paritytest.RunPadded(t, g, 37, 37), paritytest.RunPadded(t, g, 40, 37), 37*64); d > 1e-5 {
		t.Errorf("n=37 vs n=40 with 3 pads: valid outputs differ by %g", d)
	}
	if d := paritytest.MaxDiff(paritytest.RunPadded(t, g, 37, 35), paritytest.RunPadded(t, g, 40, 35), 35*64); d > 1e-5 {
		t.Errorf("35 valid at n=37 vs n=40: valid outputs differ by %g", d)
	}
}

// With one landmark per position (m = n, no padding) and a converged pseudo-inverse,
// F·A⁺ = I and Nyström attention is exact softmax attention; the weights carry vanilla's
// names, so the model must match vanilla.
func TestOneLandmarkPerTokenIsSoftmax(t *testing.T) {
	const n = 12
	vt := map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}
	ny := build(t, New(), 4, vt, map[string]any{"num_landmarks": n, "pinv_iterations": 40, "pinv_init": "per_matrix"})
	va := build(t, vanilla.New(), 4, vt)
	d := paritytest.MaxDiff(paritytest.RunPadded(t, ny, n, n), paritytest.RunPadded(t, va, n, n), n*64)
	t.Logf("m = n Nyström vs softmax attention: max |diff| = %.3g", d)
	if d > 1e-3 {
		t.Errorf("m = n Nyström differs from softmax attention by %g", d)
	}
}

// The cost grows linearly in n.
func TestCostIsLinear(t *testing.T) {
	g := build(t, New(), 1, map[string]any{"max_len": 20000})
	paritytest.CheckLinearCost(t, g)
	// n = 4097 is not a multiple of 64: the landmark padding must still give concrete shapes.
	paritytest.Cost(t, g, 4097)
}

func TestPinvInitChangesOutputOnlyThroughBatch(t *testing.T) {
	// A batch of one: the global and the per-matrix maximum differ only across heads.
	a := paritytest.RunPadded(t, build(t, New(), 5, tiny), 20, 20)
	b := paritytest.RunPadded(t, build(t, New(), 5, tiny, map[string]any{"pinv_init": "per_matrix"}), 20, 20)
	d := paritytest.MaxDiff(a, b, 20*64)
	t.Logf("original vs per_matrix init: max |diff| = %.3g", d)
	if d == 0 || d > 1 {
		t.Errorf("original vs per_matrix init differ by %g (want a small non-zero difference)", d)
	}
}

func TestLandmarkParams(t *testing.T) {
	for _, bad := range []map[string]any{{"num_landmarks": 0}, {"pinv_iterations": 0}, {"pinv_init": "exact"}} {
		if _, err := variant.Resolve(New().Describe(), bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
