package relbias_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
)

// T5's bucketed bias is computed inside the fused attention kernel from the bucket table and
// the embedding, never materialised as the shared (B, h, n, n) tensor: every layer's
// attention fuses with it ("attention+relbias", the padding mask a separate score op), the
// Gathers, clamps and Range that built it are gone (a causal model's mask is applied in the
// kernel too, "attention+causal"), and the result is the unfused graph's
// within float tolerance on lengths 1, odd and beyond the kernel's key block and max_distance,
// with padding, causal or not.
func TestBiasComputedInKernel(t *testing.T) {
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprint("causal=", causal), func(t *testing.T) {
			g := build(t, paritytest.With(tiny, "causal", causal, "max_distance", 20), 3)
			p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 600}}, 1e-4)
			wantCausal := 0
			if causal {
				wantCausal = 3
			}
			if fu := p.Fusions(); fu["attention+relbias"] != 3 || fu["attention+causal"] != wantCausal {
				t.Fatalf("fusions %v, want 3 attention+relbias; report:\n%s", fu, p.Report())
			}
			ks := p.Kernels()
			for _, k := range []string{"Min", "Max", "Softmax", "Greater", "Range"} {
				if slices.Contains(ks, k) {
					t.Fatalf("step %s left: %v", k, ks)
				}
			}
		})
	}
}
