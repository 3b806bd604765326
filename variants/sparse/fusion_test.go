package sparse_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// The sliding-window pattern runs as one fused attention step per layer whose keys and values
// are read in place from the padded K and V (backends/cpu/fuse_sparse.go): no softmax, no
// score product and no Concat of the shifted key blocks is left, in zoo's graph and in its
// ONNX export re-imported (what bench --against runs), causal or not, and the result is the
// unfused graph's within float tolerance on lengths 1, odd, a multiple of the block and not.
// Patterns with strided or global keys concatenate several score sets before the softmax and
// stay unfused, with the same result.
func TestWindowAttentionFused(t *testing.T) {
	for _, c := range []struct {
		name  string
		over  map[string]any
		fused bool
	}{
		{"window", paritytest.With(tiny), true},
		{"window2-causal", paritytest.With(tiny, "window", 2, "causal", true), true},
		{"strided-global", paritytest.With(tiny, "stride", 2, "global_tokens", 3), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := build(t, sparse.New(), c.over, 3)
			data, err := onnx.Export(g, onnx.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			imported, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []struct {
				name string
				g    *graph.Graph
			}{{"own", g}, {"export", imported}} {
				t.Run(v.name, func(t *testing.T) {
					p := paritytest.FusedMatchesUnfused(t, v.g, [][2]int{{1, 1}, {2, 7}, {1, 16}, {2, 37}}, 1e-4)
					if !c.fused {
						if rep := p.Report().String(); !strings.Contains(rep, "not fused: attention at Softmax") {
							t.Fatalf("the report does not say why the attention did not fuse:\n%s", rep)
						}
						return
					}
					if fu := p.Fusions(); fu["attention"] != 2 {
						t.Fatalf("fusions %v, want 2 attention; report:\n%s", fu, p.Report())
					}
					ks := p.Kernels()
					for _, k := range []string{"Softmax", "MatMul"} {
						if slices.Contains(ks, k) {
							t.Fatalf("step %s left: %v", k, ks)
						}
					}
					plain, err := cpu.Backend{}.Compile(v.g, backends.Options{NoFusion: true})
					if err != nil {
						t.Fatal(err)
					}
					// per layer: the key and value windows and the one-input Concat of the scores
					if got, want := count(ks, "Concat"), count(plain.(*cpu.Program).Kernels(), "Concat")-3*2; got != want {
						t.Fatalf("%d Concat steps, want %d: %v", got, want, ks)
					}
				})
			}
		})
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
