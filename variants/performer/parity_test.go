package performer_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/performer"
)

// TestParityWithPyTorch compares hidden and logits with the PyTorch reference written by
// testdata/gen_fixtures.py at atol 1e-5 on valid (non-padded) positions (batch 3, lengths 37, 23
// and 1), at thread counts 1 to 3, after checking the recorded config and the weights' sha256.
func TestParityWithPyTorch(t *testing.T) {
	paritytest.Suite{Variant: performer.New(), Fixtures: []string{"tiny", "sqrt_prenorm", "tiny_causal"}}.Run(t)
}

// TestGradientParityWithPyTorch compares the loss and every parameter's gradient of a
// label-smoothed cross-entropy (batch 3 with padding, ignored targets) with PyTorch autograd on
// the independent reference in testdata/gen_fixtures.py, rule paritytest.GradRtol.
func TestGradientParityWithPyTorch(t *testing.T) {
	paritytest.Suite{Variant: performer.New()}.RunGradients(t, "tiny_grad", "sqrt_prenorm_grad")
}
