package linear

import (
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
)

// Linear attention compiles to the CPU backend's kernelized-attention kernels: every
// layer's φ = elu + 1 of the queries and of the keys (with their key-padding Mul) is one
// FusedEluFeature ("elu-feature"), and without causal the attention one
// FusedLinearAttention. The result is the unfused graph's within float tolerance on lengths
// 1, odd and beyond the kernels' 96-row block, with padding.
func TestKernelizedFusion(t *testing.T) {
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprint("causal=", causal), func(t *testing.T) {
			g := paritytest.BuildGraph(t, New(), 3, paritytest.With(tiny, "causal", causal, "max_len", 256))
			p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 200}}, 1e-4)
			fu := p.Fusions()
			want := map[string]int{"elu-feature": 4, "linear-attention": 2}
			if causal {
				want["linear-attention"] = 0
			}
			for k, n := range want {
				if fu[k] != n {
					t.Fatalf("fusions %v, want %s %d; report:\n%s", fu, k, n, p.Report())
				}
			}
			for _, k := range p.Kernels() {
				if k == "Elu" || (k == "MatMul" && !causal) {
					t.Fatalf("step %s left: %v", k, p.Kernels())
				}
			}
		})
	}
}
