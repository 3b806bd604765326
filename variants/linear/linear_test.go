package linear

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

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}

func build(t *testing.T, seed uint64, layers ...map[string]any) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, New(), seed, layers...)
}

func TestParameterNames(t *testing.T) {
	inits := build(t, 1, tiny).InitializerMap()
	for name, shape := range map[string][]int{
		"layers.0.self_attn.W_Q.weight": {64, 64}, "layers.0.self_attn.W_K.bias": {64},
		"layers.1.self_attn.W_O.weight": {64, 64}, "pos_encoding.pe": {128, 64}, "fc.bias": {257},
	} {
		if tt, ok := inits[name]; !ok || !tensor.SameShape(tt.Shape, shape) {
			t.Errorf("%s: missing or not %v", name, shape)
		}
	}
	inits = build(t, 1, tiny, map[string]any{"attn_bias": false}).InitializerMap()
	if _, ok := inits["layers.0.self_attn.W_V.bias"]; ok {
		t.Error("attn_bias=false still has biases")
	}
}

func TestBadHyperparameters(t *testing.T) {
	for _, c := range []struct {
		over map[string]any
		want string
	}{
		{map[string]any{"attn_eps": -1}, "must be at least 0"},
		{map[string]any{"heads": 3}, "heads=3 must divide d_model=64"},
	} {
		cfg, err := variant.Resolve(New().Describe(), tiny, c.over)
		if err == nil {
			_, err = New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.over, err, c.want)
		}
	}
}

// The cost grows linearly in n: doubling a long sequence doubles FLOPs and peak activation
// memory (no n×n value anywhere).
func TestCostIsLinear(t *testing.T) {
	g := build(t, 1, map[string]any{"max_len": 20000})
	paritytest.CheckLinearCost(t, g)
}

// Padding is excluded exactly: a sequence's valid outputs do not depend on what follows it.
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
