package rope_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
)

// A causal rope model's mask is applied inside the fused attention kernel
// ("attention+causal"): the (B, 1, n, n) mask and its comparison are gone from the program,
// and the result is the unfused graph's within float tolerance on lengths 1, odd and beyond
// the kernel's key block, with padding.
func TestCausalMaskInKernel(t *testing.T) {
	g := build(t, map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 1024, "causal": true}, 3)
	p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 600}}, 1e-4)
	if fu := p.Fusions(); fu["attention+causal"] != 2 {
		t.Fatalf("fusions %v, want 2 attention+causal; report:\n%s", fu, p.Report())
	}
	for _, k := range p.Kernels() {
		if k == "Greater" || k == "Softmax" {
			t.Fatalf("step %s left: %v", k, p.Kernels())
		}
	}
}
