package gqa

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "kv_heads": 2, "layers": 2, "d_ff": 128, "max_len": 128}

func with(over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range tiny {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func build(t *testing.T, v variant.Variant, over map[string]any, seed uint64) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, v, seed, over)
}

func TestParameterNamesAndShapes(t *testing.T) {
	for _, kv := range []int{1, 2, 4} {
		inits := build(t, New(), with(map[string]any{"kv_heads": kv}), 1).InitializerMap()
		want := map[string][]int{
			"layers.0.self_attn.W_Q.weight": {64, 64},
			"layers.0.self_attn.W_K.weight": {kv * 16, 64},
			"layers.0.self_attn.W_K.bias":   {kv * 16},
			"layers.1.self_attn.W_V.weight": {kv * 16, 64},
			"layers.1.self_attn.W_V.bias":   {kv * 16},
			"layers.1.self_attn.W_O.weight": {64, 64},
			"fc.weight":                     {257, 64},
		}
		for name, shape := range want {
			tt, ok := inits[name]
			if !ok {
				t.Errorf("kv_heads=%d: missing parameter %s", kv, name)
				continue
			}
			if !tensor.SameShape(tt.Shape, shape) {
				t.Errorf("kv_heads=%d: %s has shape %v, want %v", kv, name, tt.Shape, shape)
			}
		}
	}
	inits := build(t, New(), with(map[string]any{"attn_bias": false}), 1).InitializerMap()
	for _, name := range []string{"layers.0.self_attn.W_Q.bias", "layers.0.self_attn.W_K.bias", "layers.0.self_attn.W_O.bias"} {
		if _, ok := inits[name]; ok {
			t.Errorf("attn_bias=false still has %s", name)
		}
	}
}

func TestBadHyperparameters(t *testing.T) {
	cases := []struct {
		over map[string]any
		want string
	}{
		{map[string]any{"kv_heads": 3}, "kv_heads=3 must divide heads=4"},
		{map[string]any{"kv_heads": 0}, "must be at least 1"},
		{map[string]any{"heads": 5}, "heads=5 must divide d_model=64"},
		{map[string]any{"scale": -1}, "must be at least 0"},
	}
	for _, c := range cases {
		cfg, err := variant.Resolve(New().Describe(), with(c.over))
		if err == nil {
			_, err = New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.over, err, c.want)
		}
	}
}

func run(t *testing.T, g *graph.Graph) *tensor.Tensor {
	t.Helper()
	cpu, ok := backends.Lookup("cpu")
	if !ok {
		t.Fatal("cpu backend not registered")
	}
	prog, err := cpu.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const B, N = 2, 9
	tok := make([]int64, B*N)
	pad := make([]bool, B*N)
	for i := range tok {
		tok[i] = int64(1 + (i*37)%250)
		if i >= N+5 { // second row has 5 tokens
			tok[i], pad[i] = 0, true
		}
	}
	tt, _ := tensor.FromInt64(tok, B, N)
	pt, _ := tensor.FromBool(pad, B, N)
	outs, err := prog.Run(context.Background(), map[string]*tensor.Tensor{nn.InputTokens: tt, nn.InputKeyPadding: pt})
	if err != nil {
		t.Fatal(err)
	}
	return outs[nn.OutputHidden]
}

// With kv_heads = heads the parameters have vanilla's names, shapes and (name-seeded) values,
// so the grouped graph must compute vanilla multi-head attention.
func TestAsManyKVHeadsAsHeadsIsVanilla(t *testing.T) {
	vt := map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}
	got := run(t, build(t, New(), with(map[string]any{"kv_heads": 4}), 5))
	want := run(t, build(t, vanilla.New(), vt, 5))
	worst := 0.0
	for i := range got.F32 {
		if i >= 9*64+5*64 { // padded rows of the second sequence are unspecified
			break
		}
		worst = math.Max(worst, math.Abs(float64(got.F32[i]-want.F32[i])))
	}
	if worst > 1e-5 {
		t.Errorf("gqa with kv_heads=heads differs from vanilla by %.3g", worst)
	}
}

func TestSameSeedSameWeights(t *testing.T) {
	a, b := build(t, New(), tiny, 7).InitializerMap(), build(t, New(), tiny, 7).InitializerMap()
	for name, ta := range a {
		if !tensor.Equal(ta, b[name]) {
			t.Errorf("%s differs between two builds with seed 7", name)
		}
	}
}
