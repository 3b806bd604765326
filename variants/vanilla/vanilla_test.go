package vanilla

import (
	"context"

	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}

func build(t *testing.T, over map[string]any, seed uint64) *variantGraph {
	t.Helper()
	cfg, err := variant.Resolve(New().Describe(), over)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New().Build(context.Background(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return &variantGraph{g.InitializerMap(), g.ParamCount(), len(g.Initializers)}
}

type variantGraph struct {
	inits  map[string]*tensor.Tensor
	params int64
	n      int
}

// The parameter names and shapes are the seed's state_dict keys.
func TestParameterNamesAndShapes(t *testing.T) {
	g := build(t, tiny, 1)
	want := map[string][]int{
		"embedding.weight":              {257, 64},
		"pos_encoding.pe":               {128, 64},
		"layers.0.self_attn.W_Q.weight": {64, 64},
		"layers.0.self_attn.W_Q.bias":   {64},
		"layers.1.self_attn.W_O.weight": {64, 64},
		"layers.1.ffn.0.weight":         {128, 64},
		"layers.1.ffn.2.weight":         {64, 128},
		"layers.1.norm2.bias":           {64},
		"fc.weight":                     {257, 64},
		"fc.bias":                       {257},
	}
	for name, shape := range want {
		tt, ok := g.inits[name]
		if !ok {
			t.Errorf("missing parameter %s", name)
			continue
		}
		if !tensor.SameShape(tt.Shape, shape) {
			t.Errorf("%s has shape %v, want %v", name, tt.Shape, shape)
		}
	}
	// embedding + 2 × (4·(64·64+64) + (64·128+128) + (128·64+64) + 4·64) + fc
	wantParams := int64(257*64 + 2*(4*(64*64+64)+(64*128+128)+(128*64+64)+4*64) + 257*64 + 257)
	if g.params != wantParams {
		t.Errorf("parameter count %d, want %d", g.params, wantParams)
	}
}

func TestSameSeedSameWeights(t *testing.T) {
	a, b, c := build(t, tiny, 7), build(t, tiny, 7), build(t, tiny, 8)
	differ := 0
	for name, ta := range a.inits {
		if !tensor.Equal(ta, b.inits[name]) {
			t.Errorf("%s differs between two builds with seed 7", name)
		}
		if !tensor.Equal(ta, c.inits[name]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("seeds 7 and 8 give identical weights")
	}
}

func TestBadHyperparameters(t *testing.T) {
	cases := []struct {
		over map[string]any
		want string
	}{
		{map[string]any{"heads": "7"}, "heads=7 must divide d_model=512"},
		{map[string]any{"heads": "-1"}, "must be at least 1"},
		{map[string]any{"d_model": "abc"}, "want an integer"},
		{map[string]any{"activation": "swish"}, "want one of relu, gelu"},
		{map[string]any{"dmodel": "5"}, `did you mean "d_model"`},
	}
	for _, c := range cases {
		cfg, err := variant.Resolve(New().Describe(), c.over)
		if err == nil {
			_, err = New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.over, err, c.want)
		}
	}
}
