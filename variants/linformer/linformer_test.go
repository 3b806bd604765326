package linformer_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/linformer"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/initrand"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "k": 16, "max_len": 128}

func build(t *testing.T, v variant.Variant, over map[string]any, seed uint64) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, v, seed, over)
}

// Each sharing mode owns exactly the projections the paper describes, of shape (k, max_len)
// ((h, k, max_len) per head without sharing).
func TestProjectionParameters(t *testing.T) {
	cases := []struct {
		sharing string
		want    map[string][]int
		absent  []string
	}{
		{"none", map[string][]int{"layers.0.self_attn.E": {4, 16, 128}, "layers.1.self_attn.F": {4, 16, 128}}, []string{"E"}},
		{"headwise", map[string][]int{"layers.0.self_attn.E": {16, 128}, "layers.1.self_attn.F": {16, 128}}, []string{"E"}},
		{"key-value", map[string][]int{"layers.0.self_attn.E": {16, 128}, "layers.1.self_attn.E": {16, 128}}, []string{"layers.0.self_attn.F", "E"}},
		{"layerwise", map[string][]int{"E": {16, 128}}, []string{"layers.0.self_attn.E", "layers.0.self_attn.F"}},
	}
	for _, c := range cases {
		inits := build(t, linformer.New(), paritytest.With(tiny, "sharing", c.sharing), 1).InitializerMap()
		for name, shape := range c.want {
			x, ok := inits[name]
			if !ok {
				t.Errorf("%s: missing %s", c.sharing, name)
				continue
			}
			if !tensor.SameShape(x.Shape, shape) {
				t.Errorf("%s: %s has shape %v, want %v", c.sharing, name, x.Shape, shape)
			}
			bound := float32(1 / math.Sqrt(16))
			for _, v := range x.F32 {
				if v < -bound || v > bound {
					t.Fatalf("%s: %s has %v outside U(±1/√k)", c.sharing, name, v)
				}
			}
		}
		for _, name := range c.absent {
			if _, ok := inits[name]; ok {
				t.Errorf("%s: unexpected parameter %s", c.sharing, name)
			}
		}
		for _, name := range []string{"layers.1.self_attn.W_K.bias", "pos_encoding.pe", "fc.weight"} {
			if _, ok := inits[name]; !ok {
				t.Errorf("%s: missing %s", c.sharing, name)
			}
		}
	}
	if _, ok := build(t, linformer.New(), paritytest.With(tiny, "attn_bias", false), 1).InitializerMap()["layers.0.self_attn.W_Q.bias"]; ok {
		t.Error("attn_bias=false still has W_Q.bias")
	}
}

func TestSameSeedSameWeights(t *testing.T) {
	a, b, c := build(t, linformer.New(), tiny, 7), build(t, linformer.New(), tiny, 7), build(t, linformer.New(), tiny, 8)
	am, bm, cm := a.InitializerMap(), b.InitializerMap(), c.InitializerMap()
	differ := 0
	for name, ta := range am {
		if !tensor.Equal(ta, bm[name]) {
			t.Errorf("%s differs between two builds with seed 7", name)
		}
		if !tensor.Equal(ta, cm[name]) {
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
		{paritytest.With(tiny, "k", "200"), "k=200 must not exceed max_len=128"},
		{paritytest.With(tiny, "k", "0"), "must be at least 1"},
		{paritytest.With(tiny, "sharing", "per-layer"), "want one of none, headwise, key-value, layerwise"},
		{paritytest.With(tiny, "heads", "5"), "heads=5 must divide d_model=64"},
		{map[string]any{"kk": "5"}, `did you mean "k"`},
	}
	for _, c := range cases {
		cfg, err := variant.Resolve(linformer.New().Describe(), c.over)
		if err == nil {
			_, err = linformer.New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.over, err, c.want)
		}
	}
	if d := linformer.New().Describe(); d.Caps.MaxLenParam != "max_len" {
		t.Errorf("Caps.MaxLenParam = %q, want max_len (the CLI windows inputs by it)", d.Caps.MaxLenParam)
	}
}

// runTokens runs g on a batch of rows of byte tokens padded to n.
func runTokens(t *testing.T, g *graph.Graph, n int, rows ...[]int64) (map[string]*tensor.Tensor, *tensor.Tensor, error) {
	t.Helper()
	tok := make([]int64, len(rows)*n)
	pad := make([]bool, len(rows)*n)
	for b, r := range rows {
		for i := 0; i < n; i++ {
			if i < len(r) {
				tok[b*n+i] = r[i]
			} else {
				pad[b*n+i] = true
			}
		}
	}
	tt, _ := tensor.FromInt64(tok, len(rows), n)
	pt, _ := tensor.FromBool(pad, len(rows), n)
	cpu, _ := backends.Lookup("cpu")
	prog, err := cpu.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	outs, err := prog.Run(context.Background(), map[string]*tensor.Tensor{nn.InputTokens: tt, nn.InputKeyPadding: pt})
	return outs, pt, err
}

func text(n int, offset int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 1 + (int64(i)*37+offset)%256
	}
	return out
}

// Padding changes nothing: padded rows are zeroed before E/F, so a row padded from 23 to 37
// gives the same valid outputs as the row alone (E sliced to 23 columns).
func TestPaddingInvariance(t *testing.T) {
	for _, sharing := range []string{"none", "headwise", "key-value", "layerwise"} {
		g := build(t, linformer.New(), paritytest.With(tiny, "sharing", sharing), 3)
		row := text(23, 5)
		padded, _, err := runTokens(t, g, 37, text(37, 1), row)
		if err != nil {
			t.Fatal(err)
		}
		alone, _, err := runTokens(t, g, 23, row)
		if err != nil {
			t.Fatal(err)
		}
		p, a := padded[nn.OutputHidden], alone[nn.OutputHidden]
		worst := 0.0
		for i := 0; i < 23; i++ {
			for j := 0; j < 64; j++ {
				worst = math.Max(worst, math.Abs(float64(p.F32[(37+i)*64+j]-a.F32[i*64+j])))
			}
		}
		if worst > 1e-5 {
			t.Errorf("%s: padded row differs from the row alone by %.3g", sharing, worst)
		}
	}
}

// A sequence longer than max_len cannot run: E has max_len columns. The graph cannot check
// it (the CLI windows inputs by Caps.MaxLenParam), but running must fail, not mis-compute.
func TestLongerThanMaxLenFails(t *testing.T) {
	g := build(t, linformer.New(), paritytest.With(tiny, "max_len", 32), 1)
	if _, _, err := runTokens(t, g, 32, text(32, 0)); err != nil {
		t.Fatalf("n = max_len: %v", err)
	}
	_, _, err := runTokens(t, g, 33, text(33, 0))
	if err == nil {
		t.Fatal("n = max_len+1 ran; want an error")
	}
	t.Logf("n > max_len: %v", err)
}

// seedForm is the seed's Linformer attention: E applied as nn.Linear(d_model, k) to the
// FEATURE axis, then the (B, n, k) result viewed as (B, k, h, d_k). It uses the same
// parameter names and shapes as headwise sharing (valid only when max_len == d_model).
func seedForm(d, heads, k, maxLen int) nn.AttentionFunc {
	return func(c *nn.Ctx, prefix string, _ int, x string, m nn.Mask) string {
		dk := d / heads
		param := func(name string) string {
			return c.B.Param(name, initrand.Uniform(c.Seed, name, 1/math.Sqrt(float64(k)), k, maxLen))
		}
		E, F := param(prefix+".E"), param(prefix+".F")
		q := c.SplitHeads(c.Linear(prefix+".W_Q", x, d, d, true), heads, dk)
		kx := c.Linear(prefix+".W_K", x, d, d, true)
		vx := c.Linear(prefix+".W_V", x, d, d, true)
		view := func(y, p string) string { // self.E(K).view(B, k, h, d_k).transpose(1, 2)
			y = c.B.MatMul(y, c.B.Transpose(p, 1, 0))
			return c.B.Transpose(c.B.Reshape(y, 0, int64(k), int64(heads), int64(dk)), 0, 2, 1, 3)
		}
		o := c.MergeHeads(c.ScaledDotProduct(q, view(kx, E), view(vx, F), "", dk), d)
		return c.Linear(prefix+".W_O", o, d, d, true)
	}
}

// The seed's feature-axis form is not Linformer: with the very same weights (max_len ==
// d_model == 64, the only shape where its nn.Linear(d_model, k) fits E) it cannot run at n = 37
// != d_model (its view(B, k, h, d_k) is illegal, as PyTorch says too), and at n == d_model,
// where the view happens to be legal, it disagrees with the paper's form computed by PyTorch,
// which zoo matches (TestParityWithPyTorch/tiny_n64).
func TestSeedFormFails(t *testing.T) {
	f := loadFixture(t, "tiny_n64")
	cfg, seed := f.config(t)
	e, err := nn.EncoderConfigFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, k, maxLen := cfg.Int("d_model"), cfg.Int("k"), cfg.Int("max_len")
	if maxLen != d || f.get(t, "tokens").Shape[1] != d {
		t.Fatalf("fixture tiny_n64 must have max_len == n == d_model")
	}
	c := nn.NewCtx(context.Background(), "linformer", seed)
	g, err := c.Encoder(e, seedForm(d, cfg.Int("heads"), k, maxLen))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := weightsSHA256(t, g, f), f.meta["weights_sha256"]; got != want {
		t.Fatalf("the seed's form should hold the fixture's weights: sha256 %s, want %s", got, want)
	}
	outs, err := run(t, g, f, 1)
	if err != nil {
		t.Fatalf("seed's form at n == d_model: %v", err)
	}
	diff, _ := compareValid(t, outs[nn.OutputHidden], f.get(t, nn.OutputHidden), f.get(t, "key_padding_mask"))
	if diff < 1e-2 {
		t.Fatalf("the seed's form matches the paper's within %.3g; the test cannot tell them apart", diff)
	}
	t.Logf("seed's form differs from the paper's (PyTorch) by %.3g at n == d_model", diff)

	short := loadFixture(t, "tiny") // n = 37
	_, err = run(t, g, short, 1)
	if err == nil || !strings.Contains(err.Error(), "Reshape") {
		t.Fatalf("seed's form at n=37 != d_model: error %v, want its view (Reshape) to fail", err)
	}
	t.Logf("seed's form at n=37 fails as in PyTorch (%q): %v", short.meta["seed_form_error_n37"], err)
}

// Linformer's cost grows linearly in n (Cost(2n) ≈ 2·Cost(n)); vanilla's quadratically.
func TestCostLinearInN(t *testing.T) {
	cost := func(g *graph.Graph, n int) float64 { return float64(paritytest.Cost(t, g, n).FLOPs) }
	lin := build(t, linformer.New(), paritytest.With(tiny, "max_len", 16384), 1)
	van := build(t, vanilla.New(), map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 16384}, 1)
	n := 8192
	if r := cost(lin, 2*n) / cost(lin, n); math.Abs(r-2) > 0.04 {
		t.Errorf("linformer: Cost(2n)/Cost(n) = %.3f at n=%d, want ≈ 2", r, n)
	} else {
		t.Logf("linformer: Cost(2n)/Cost(n) = %.4f at n=%d", r, n)
	}
	if r := cost(van, 2*n) / cost(van, n); r < 3.5 {
		t.Errorf("vanilla: Cost(2n)/Cost(n) = %.3f at n=%d, want ≈ 4 (quadratic)", r, n)
	} else {
		t.Logf("vanilla: Cost(2n)/Cost(n) = %.4f at n=%d", r, n)
	}
}
