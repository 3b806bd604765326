package alibi

import (
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
)

// The ALiBi bias is computed inside the fused attention kernel from the slopes, never
// materialised: every layer's attention fuses with it ("attention+relbias"), the steps that
// built the (h, n, n) bias are gone from the program (a causal model keeps its own Range for
// the causal mask), and the result is the unfused graph's within float tolerance on lengths
// 1, odd and beyond the kernel's key block, with padding, causal or not.
func TestBiasComputedInKernel(t *testing.T) {
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprint("causal=", causal), func(t *testing.T) {
			g := build(t, paritytest.With(tiny, "causal", causal), 3)
			p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 600}}, 1e-4)
			if fu := p.Fusions(); fu["attention+relbias"] != 2 {
				t.Fatalf("fusions %v, want 2 attention+relbias; report:\n%s", fu, p.Report())
			}
			for _, k := range p.Kernels() {
				if k == "Abs" || k == "Softmax" || (k == "Range" && !causal) {
					t.Fatalf("step %s left: %v", k, p.Kernels())
				}
			}
		})
	}
}
