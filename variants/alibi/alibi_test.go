package alibi

import (
	"context"

	"math"
	"strings"
	"testing"

	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}

func build(t *testing.T, over map[string]any, seed uint64) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, New(), seed, over)
}

func TestSlopes(t *testing.T) {
	s := math.Sqrt2
	cases := map[int][]float64{
		1:  {1.0 / 256},
		4:  {1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256},
		8:  {1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256},
		6:  {1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8},
		12: {1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256, 1 / s, 1 / (2 * s), 1 / (4 * s), 1 / (8 * s)},
	}
	for h, want := range cases {
		got := Slopes(h)
		if len(got) != len(want) {
			t.Fatalf("Slopes(%d) has %d values, want %d", h, len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("Slopes(%d)[%d] = %v, want %v", h, i, got[i], want[i])
			}
		}
	}
}

func TestNoPositionalTable(t *testing.T) {
	g := build(t, tiny, 1)
	inits := g.InitializerMap()
	if _, ok := inits["pos_encoding.pe"]; ok {
		t.Error("alibi has a positional table")
	}
	for name, shape := range map[string][]int{"layers.0.self_attn.W_Q.weight": {64, 64}, "layers.1.self_attn.W_O.bias": {64}, "embedding.weight": {257, 64}} {
		if tt, ok := inits[name]; !ok || !tensor.SameShape(tt.Shape, shape) {
			t.Errorf("%s: missing or wrong shape (want %v)", name, shape)
		}
	}
	if _, ok := New().Describe().Param("max_len"); ok {
		t.Error("alibi documents max_len but has no length limit")
	}
}

func TestBadHyperparameters(t *testing.T) {
	for over, want := range map[string]string{"7": "heads=7 must divide d_model=64"} {
		cfg, err := variant.Resolve(New().Describe(), tiny, map[string]any{"heads": over})
		if err == nil {
			_, err = New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("heads=%s: error %v, want %q", over, err, want)
		}
	}
	if _, err := variant.Resolve(New().Describe(), map[string]any{"max_len": 10}); err == nil {
		t.Error("max_len accepted")
	}
}

// A sequence's valid outputs do not depend on how much padding follows it, and a length far
// beyond any table works (there is no positional table).
func TestPaddingAndLength(t *testing.T) {
	g := build(t, tiny, 3)
	runOne := func(n, valid int) *tensor.Tensor { return paritytest.RunPadded(t, g, n, valid) }
	a, b := runOne(11, 11), runOne(40, 11)
	for i := 0; i < 11*64; i++ {
		if d := math.Abs(float64(a.F32[i] - b.F32[i])); d > 1e-5 {
			t.Fatalf("padding changes valid output %d by %g", i, d)
		}
	}
	if out := runOne(700, 700); out.Shape[1] != 700 {
		t.Errorf("n=700 gave shape %v", out.Shape)
	}
}
