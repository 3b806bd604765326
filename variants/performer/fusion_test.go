package performer

import (
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
)

// FAVOR+ compiles to the CPU backend's kernelized-attention kernels: without causal, every
// layer's query and key feature maps are matched ("random-features") and the attention is
// one FusedLinearAttention, which computes both maps' features itself
// ("linear-attention+features"), so no FusedFeatureMap step is left; a causal model's prefix
// sums stay unfused (its feature maps are then FusedFeatureMap steps of their own). The result is the unfused graph's within float tolerance on lengths
// 1, odd and beyond the kernels' 96-row block, with padding.
func TestKernelizedFusion(t *testing.T) {
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprint("causal=", causal), func(t *testing.T) {
			g := build(t, 3, paritytest.With(tiny, "causal", causal, "max_len", 256))
			p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 200}}, 1e-4)
			fu := p.Fusions()
			want := map[string]int{"random-features": 4, "linear-attention": 2, "linear-attention+features": 4}
			if causal {
				want = map[string]int{"random-features": 4, "linear-attention": 0, "linear-attention+features": 0}
			}
			for k, n := range want {
				if fu[k] != n {
					t.Fatalf("fusions %v, want %s %d; report:\n%s", fu, k, n, p.Report())
				}
			}
			maps := 0
			for _, k := range p.Kernels() {
				if k == "Exp" || (k == "MatMul" && !causal) {
					t.Fatalf("step %s left: %v", k, p.Kernels())
				}
				if k == "FusedFeatureMap" {
					maps++
				}
			}
			if want := map[bool]int{false: 0, true: 4}[causal]; maps != want {
				t.Fatalf("%d FusedFeatureMap steps, want %d: %v", maps, want, p.Kernels())
			}
		})
	}
}
