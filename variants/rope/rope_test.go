package rope_test

import (
	"context"

	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/rope"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}

func build(t *testing.T, over map[string]any, seed uint64) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, rope.New(), seed, over)
}

// No additive positional table; one pair of rotation buffers (max_len, rope_dim) for all layers.
func TestParameters(t *testing.T) {
	inits := build(t, paritytest.With(tiny, "rope_dim", 8), 1).InitializerMap()
	if _, ok := inits["pos_encoding.pe"]; ok {
		t.Error("rope has an additive positional table pos_encoding.pe")
	}
	for _, name := range []string{"rope.cos", "rope.sin"} {
		if x := inits[name]; x == nil || !tensor.SameShape(x.Shape, []int{128, 8}) {
			t.Errorf("%s: %v, want shape (128, 8)", name, x)
		}
	}
	for _, name := range []string{"embedding.weight", "layers.1.self_attn.W_K.bias", "layers.1.ffn.2.weight", "fc.bias"} {
		if _, ok := inits[name]; !ok {
			t.Errorf("missing %s", name)
		}
	}
	if _, ok := build(t, paritytest.With(tiny, "attn_bias", false), 1).InitializerMap()["layers.0.self_attn.W_O.bias"]; ok {
		t.Error("attn_bias=false still has W_O.bias")
	}
}

// The tables hold cos/sin(p·base^(-2i/d)) with the layout's pairing.
func TestTables(t *testing.T) {
	for _, layout := range []string{rope.LayoutHalf, rope.LayoutInterleaved} {
		cos, sin := rope.Tables(600, 8, 10000, layout)
		for _, p := range []int{0, 1, 17, 599} {
			for j := 0; j < 8; j++ {
				i := j % 4
				if layout == rope.LayoutInterleaved {
					i = j / 2
				}
				a := float64(p) / math.Pow(10000, float64(2*i)/8)
				if d := math.Abs(float64(cos.F32[p*8+j]) - math.Cos(a)); d > 1e-7 {
					t.Errorf("%s cos[%d,%d] off by %g", layout, p, j, d)
				}
				if d := math.Abs(float64(sin.F32[p*8+j]) - math.Sin(a)); d > 1e-7 {
					t.Errorf("%s sin[%d,%d] off by %g", layout, p, j, d)
				}
			}
		}
	}
}

func TestBadHyperparameters(t *testing.T) {
	cases := []struct {
		over map[string]any
		want string
	}{
		{paritytest.With(tiny, "rope_dim", "7"), "rope_dim=7 must be even and at most d_k=16"},
		{paritytest.With(tiny, "rope_dim", "18"), "rope_dim=18 must be even and at most d_k=16"},
		{paritytest.With(tiny, "rope_layout", "neox"), "want one of half, interleaved"},
		{paritytest.With(tiny, "rope_base", "0.5"), "must be at least 1"},
		{paritytest.With(tiny, "heads", "3"), "heads=3 must divide d_model=64"},
	}
	for _, c := range cases {
		cfg, err := variant.Resolve(rope.New().Describe(), c.over)
		if err == nil {
			_, err = rope.New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.over, err, c.want)
		}
	}
}

func TestSameSeedSameWeights(t *testing.T) {
	a, b, c := build(t, tiny, 7).InitializerMap(), build(t, tiny, 7).InitializerMap(), build(t, tiny, 8).InitializerMap()
	differ := 0
	for name, ta := range a {
		if !tensor.Equal(ta, b[name]) {
			t.Errorf("%s differs between two builds with seed 7", name)
		}
		if !tensor.Equal(ta, c[name]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("seeds 7 and 8 give identical weights")
	}
}

// Mixing layouts is the classic RoPE bug: the interleaved fixture's weights run with the
// half layout must NOT match PyTorch, so the parity test can tell the layouts apart.
func TestWrongLayoutFailsParity(t *testing.T) {
	f := loadFixture(t, "tiny_interleaved")
	cfg, seed := f.config(t)
	cfg["rope_layout"] = rope.LayoutHalf
	g, err := rope.New().Build(context.Background(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := run(t, g, f, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := compareValid(t, outs[nn.OutputHidden], f.get(t, nn.OutputHidden), f.get(t, "key_padding_mask"))
	if d < 1e-3 {
		t.Fatalf("half layout matches the interleaved reference within %.3g", d)
	}
	t.Logf("half layout vs interleaved reference: %.3g", d)
}
