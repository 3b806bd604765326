package alibi

import (
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
)

// The ALiBi bias is computed inside the fused attention kernel from the slopes, never
// materialised: every layer's attention fuses with it ("attention+relbias"), the steps that
// built the (h, n, n) bias are gone from the program (and in a causal model the causal mask
// is applied in the kernel too, "attention+causal", its Range and comparison gone), and the result is the unfused graph's within float tolerance on lengths
// 1, odd and beyond the kernel's key block, with padding, causal or not.
func TestBiasComputedInKernel(t *testing.T) {
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprint("causal=", causal), func(t *testing.T) {
			g := build(t, paritytest.With(tiny, "causal", causal), 3)
			p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 600}}, 1e-4)
			wantCausal := 0
			if causal {
				wantCausal = 2
			}
			if fu := p.Fusions(); fu["attention+relbias"] != 2 || fu["attention+causal"] != wantCausal {
				t.Fatalf("fusions %v, want 2 attention+relbias; report:\n%s", fu, p.Report())
			}
			for _, k := range p.Kernels() {
				if k == "Abs" || k == "Softmax" || k == "Range" || k == "Greater" {
					t.Fatalf("step %s left: %v", k, p.Kernels())
				}
			}
		})
	}
}
