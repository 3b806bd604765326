package paritytest

import (
	"context"
	"math"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Cost returns g's cost at batch 1 and sequence length n, failing the test on error.
func Cost(t testing.TB, g *graph.Graph, n int) graph.Cost {
	t.Helper()
	c, err := g.Cost(map[string][]int{nn.InputTokens: {1, n}, nn.InputKeyPadding: {1, n}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CheckLinearCost checks that doubling a long sequence (4096 → 8192) doubles g's FLOPs and
// peak activation memory within 2 %, as an O(n) variant's must.
func CheckLinearCost(t testing.TB, g *graph.Graph) {
	t.Helper()
	a, b := Cost(t, g, 4096), Cost(t, g, 8192)
	if r := float64(b.FLOPs) / float64(a.FLOPs); math.Abs(r-2) > 0.04 {
		t.Errorf("FLOPs(8192)/FLOPs(4096) = %.4f, want ≈ 2", r)
	}
	if r := float64(b.ActivationBytes) / float64(a.ActivationBytes); math.Abs(r-2) > 0.04 {
		t.Errorf("activations(8192)/activations(4096) = %.4f, want ≈ 2", r)
	}
}

// RunPadded runs g on one sequence of valid tokens followed by padding up to n, on the CPU
// backend at one thread, and returns its hidden output (1, n, d).
func RunPadded(t testing.TB, g *graph.Graph, n, valid int) *tensor.Tensor {
	t.Helper()
	cpu, _ := backends.Lookup("cpu")
	prog, err := cpu.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	tok := make([]int64, n)
	pad := make([]bool, n)
	for i := range tok {
		if i < valid {
			tok[i] = int64(1 + (i*31)%250)
		} else {
			pad[i] = true
		}
	}
	tt, _ := tensor.FromInt64(tok, 1, n)
	pt, _ := tensor.FromBool(pad, 1, n)
	outs, err := prog.Run(context.Background(), map[string]*tensor.Tensor{nn.InputTokens: tt, nn.InputKeyPadding: pt})
	if err != nil {
		t.Fatal(err)
	}
	return outs[nn.OutputHidden]
}

// MaxDiff returns the largest |a[i] - b[i]| over the first count elements.
func MaxDiff(a, b *tensor.Tensor, count int) float64 {
	worst := 0.0
	for i := 0; i < count; i++ {
		worst = math.Max(worst, math.Abs(float64(a.F32[i]-b.F32[i])))
	}
	return worst
}

// With returns a copy of base with the key/value pairs kv (key, value, key, value, …) set.
func With(base map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// BuildGraph resolves v's hyperparameters from layers (later layers win) and builds its
// graph with seed, failing the test on any error.
func BuildGraph(t testing.TB, v variant.Variant, seed uint64, layers ...map[string]any) *graph.Graph {
	t.Helper()
	cfg, err := variant.Resolve(v.Describe(), layers...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(t.Context(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
