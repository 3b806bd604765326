package variants_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// tinyConfig resolves the variant's tiny preset with extra settings.
func tinyConfig(t *testing.T, name string, v variant.Variant, extra map[string]any) variant.Config {
	t.Helper()
	e := builtinEntries(t)[name]
	cfg, err := variant.Resolve(v.Describe(), e.Defaults, e.Presets["tiny"], extra)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func runGraph(t *testing.T, g *graph.Graph, feed map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	cpu, _ := backends.Lookup("cpu")
	prog, err := cpu.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	outs, err := prog.Run(context.Background(), feed)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// batch returns one row of n tokens (ids 1 + (i·7 mod 200)), with the tokens from change on
// replaced, and its all-valid padding mask.
func batch(n, change int) map[string]*tensor.Tensor {
	tok := make([]int64, n)
	for i := range tok {
		tok[i] = 1 + int64(i*7%200)
		if i >= change {
			tok[i] = 1 + int64((i*13+5)%250)
		}
	}
	return map[string]*tensor.Tensor{
		variant.InputTokens:     {DType: tensor.Int64, Shape: []int{1, n}, I64: tok},
		variant.InputKeyPadding: {DType: tensor.Bool, Shape: []int{1, n}, Bool: make([]bool, n)},
	}
}

// maxDiffBefore is the largest |a − b| of hidden (1, n, d) over positions below upto.
func maxDiffBefore(a, b *tensor.Tensor, upto int) float64 {
	d := a.Shape[2]
	worst := 0.0
	for i := 0; i < upto*d; i++ {
		worst = math.Max(worst, math.Abs(float64(a.F32[i]-b.F32[i])))
	}
	return worst
}

// TestCausalHidesTheFuture: with causal=true, changing the tokens from position 12 on leaves
// every earlier position's hidden state as it was; with causal=false it does not. Variants
// whose math has no causal form refuse it, saying why.
func TestCausalHidesTheFuture(t *testing.T) {
	const n, change = 24, 12
	for _, name := range sortedKeys(variants.Builtin()) {
		v := variants.Builtin()[name]
		t.Run(name, func(t *testing.T) {
			if _, ok := v.Describe().Param("causal"); !ok {
				t.Skip("no causal hyperparameter")
			}
			g, err := v.Build(t.Context(), tinyConfig(t, name, v, map[string]any{"causal": true}), 1)
			if name == "nystrom" || name == "linformer" {
				if err == nil || !strings.Contains(err.Error(), "causal=true is not possible") {
					t.Fatalf("causal=true: err %v, want a refusal saying why", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := runGraph(t, g, batch(n, n))[variant.OutputHidden]
			b := runGraph(t, g, batch(n, change))[variant.OutputHidden]
			if d := maxDiffBefore(a, b, change); d > 1e-6 {
				t.Errorf("causal: positions before %d moved by %.3g when later tokens changed", change, d)
			}
			if name == "sparse" { // every pattern at once: window, stride and global tokens
				gs, err := v.Build(t.Context(), tinyConfig(t, name, v, map[string]any{"causal": true, "block": 3, "stride": 2, "global_tokens": 4}), 1)
				if err != nil {
					t.Fatal(err)
				}
				as, bs := runGraph(t, gs, batch(n, n))[variant.OutputHidden], runGraph(t, gs, batch(n, change))[variant.OutputHidden]
				if d := maxDiffBefore(as, bs, change); d > 1e-6 {
					t.Errorf("causal with stride and global tokens: positions before %d moved by %.3g", change, d)
				}
			}
			if d := maxDiffBefore(a, b, change+1); d == 0 {
				t.Errorf("causal: position %d did not change with its own token", change)
			}
			open, err := v.Build(t.Context(), tinyConfig(t, name, v, nil), 1)
			if err != nil {
				t.Fatal(err)
			}
			a = runGraph(t, open, batch(n, n))[variant.OutputHidden]
			b = runGraph(t, open, batch(n, change))[variant.OutputHidden]
			if d := maxDiffBefore(a, b, change); d == 0 {
				t.Errorf("causal=false: early positions ignore later tokens; the test cannot tell causal from not")
			}
		})
	}
}

// TestTrainingBuildDropout: inference graphs do not depend on dropout; a training build has
// one dropout input per sub-layer, which with every keep factor 1 gives the inference outputs
// and with lmdata.DropoutFeeds other ones.
func TestTrainingBuildDropout(t *testing.T) {
	for _, name := range sortedKeys(variants.Builtin()) {
		v := variants.Builtin()[name]
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig(t, name, v, nil)
			inf, err := v.Build(t.Context(), cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			other, err := v.Build(t.Context(), tinyConfig(t, name, v, map[string]any{"dropout": 0.5}), 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(inf.Nodes) != len(other.Nodes) || len(inf.Inputs) != 2 || len(other.Inputs) != 2 {
				t.Fatalf("inference graphs differ with dropout: %d vs %d nodes, %d and %d inputs", len(inf.Nodes), len(other.Nodes), len(inf.Inputs), len(other.Inputs))
			}
			tr, err := v.Build(t.Context(), variant.WithTraining(cfg), 3)
			if err != nil {
				t.Fatal(err)
			}
			var drops []string
			for _, in := range tr.Inputs {
				if variant.IsDropoutInput(in.Name) {
					drops = append(drops, in.Name)
				}
			}
			if want := 2 * cfg.Int("layers"); len(drops) != want || drops[0] != "dropout:layers.0.self_attn" {
				t.Fatalf("training graph dropout inputs %v, want %d from dropout:layers.0.self_attn", drops, want)
			}
			const n = 10
			feed := batch(n, n)
			want := runGraph(t, inf, feed)[variant.OutputHidden]
			ones := map[string]*tensor.Tensor{}
			for k, x := range feed {
				ones[k] = x
			}
			d := cfg.Int("d_model")
			for _, in := range drops {
				x, _ := tensor.New(tensor.Float32, 1, n, d)
				for i := range x.F32 {
					x.F32[i] = 1
				}
				ones[in] = x
			}
			if got := runGraph(t, tr, ones)[variant.OutputHidden]; maxDiffBefore(got, want, n) > 1e-6 {
				t.Errorf("training graph with keep = 1 differs from inference by %.3g", maxDiffBefore(got, want, n))
			}
			masks, err := lmdata.DropoutFeeds(tr, 7, 1, 1, n)
			if err != nil {
				t.Fatal(err)
			}
			for k, x := range masks {
				ones[k] = x
			}
			if got := runGraph(t, tr, ones)[variant.OutputHidden]; maxDiffBefore(got, want, n) == 0 {
				t.Error("dropout masks changed nothing")
			}
		})
	}
}
