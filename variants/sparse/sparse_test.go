package sparse_test

import (
	"context"

	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var tiny = map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 512, "block": 4}

func build(t *testing.T, v variant.Variant, over map[string]any, seed uint64) *graph.Graph {
	t.Helper()
	return paritytest.BuildGraph(t, v, seed, over)
}

// The documented pattern (Pattern.Allowed) is the one the PyTorch reference masked with.
func TestPatternMatchesReference(t *testing.T) {
	for _, name := range []string{"tiny", "tiny_global", "tiny_stride", "tiny_all", "tiny_long"} {
		f := loadFixture(t, name)
		cfg, _ := f.config(t)
		p := sparse.Pattern{Block: cfg.Int("block"), Window: cfg.Int("window"), Stride: cfg.Int("stride"), Global: cfg.Int("global_tokens")}
		ref := f.get(t, "pattern")
		n := ref.Shape[0]
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if got, want := p.Allowed(i, j), ref.Bool[i*n+j]; got != want {
					t.Fatalf("%s: Allowed(%d, %d) = %v, reference %v", name, i, j, got, want)
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
		{paritytest.With(tiny, "window", "0"), "window=0: must be at least 1"},
		{paritytest.With(tiny, "block", "0"), "must be at least 1"},
		{paritytest.With(tiny, "stride", "-1"), "must be at least 0"},
		{paritytest.With(tiny, "heads", "3"), "heads=3 must divide d_model=64"},
	}
	for _, c := range cases {
		cfg, err := variant.Resolve(sparse.New().Describe(), c.over)
		if err == nil {
			_, err = sparse.New().Build(context.Background(), cfg, 1)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.over, err, c.want)
		}
	}
	// Build rejects a window of 0 even when the schema's minimum is bypassed.
	cfg, err := variant.Resolve(sparse.New().Describe(), tiny)
	if err != nil {
		t.Fatal(err)
	}
	cfg["window"] = int64(0)
	if _, err := sparse.New().Build(context.Background(), cfg, 1); err == nil || !strings.Contains(err.Error(), "window=0 must be at least 1") {
		t.Errorf("Build with window 0: %v", err)
	}
}

func TestSameSeedSameWeights(t *testing.T) {
	a, b, c := build(t, sparse.New(), tiny, 7).InitializerMap(), build(t, sparse.New(), tiny, 7).InitializerMap(), build(t, sparse.New(), tiny, 8).InitializerMap()
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
	// The parameters are the seed's: sparsity adds none.
	v := build(t, vanilla.New(), map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 512}, 7)
	if got, want := build(t, sparse.New(), tiny, 7).ParamCount(), v.ParamCount(); got != want {
		t.Errorf("parameter count %d, vanilla's %d", got, want)
	}
}

// No value of the graph is n × n: the largest one at n = 4096 is far below one head's dense
// score matrix.
func TestNoDenseScores(t *testing.T) {
	n := 4096
	for _, over := range []map[string]any{paritytest.With(tiny, "block", 16), paritytest.With(tiny, "block", 16, "global_tokens", 8, "window", 2)} {
		g := build(t, sparse.New(), paritytest.With(over, "max_len", n), 1)
		shapes, err := g.ConcreteShapes(map[string][]int{nn.InputTokens: {1, n}, nn.InputKeyPadding: {1, n}})
		if err != nil {
			t.Fatal(err)
		}
		largest, which := 0, ""
		for name, s := range shapes {
			if e := tensor.NumElements(s); e > largest {
				largest, which = e, name
			}
		}
		if largest >= n*n/8 {
			t.Errorf("%v: value %s has %d elements at n=%d (n² = %d): dense scores?", over, which, largest, n, n*n)
		}
		t.Logf("%v: largest value %s: %d elements (n² = %d)", over, which, largest, n*n)
	}
}

// Sparse cost grows linearly in n (Cost(2n) ≈ 2·Cost(n)); vanilla's quadratically.
func TestCostLinearInN(t *testing.T) {
	cost := func(g *graph.Graph, n int) float64 { return float64(paritytest.Cost(t, g, n).FLOPs) }
	n := 8192
	sp := build(t, sparse.New(), paritytest.With(tiny, "max_len", 2*n, "block", 32, "global_tokens", 4), 1)
	van := build(t, vanilla.New(), map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 2 * n}, 1)
	if r := cost(sp, 2*n) / cost(sp, n); math.Abs(r-2) > 0.04 {
		t.Errorf("sparse: Cost(2n)/Cost(n) = %.3f at n=%d, want ≈ 2", r, n)
	} else {
		t.Logf("sparse: Cost(2n)/Cost(n) = %.4f at n=%d", r, n)
	}
	if r := cost(van, 2*n) / cost(van, n); r < 3.5 {
		t.Errorf("vanilla: Cost(2n)/Cost(n) = %.3f at n=%d, want ≈ 4 (quadratic)", r, n)
	} else {
		t.Logf("vanilla: Cost(2n)/Cost(n) = %.4f at n=%d", r, n)
	}
}
