package linear_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/linear"
)

// TestParityWithPyTorch compares hidden and logits with the PyTorch reference written by
// testdata/gen_fixtures.py at atol 1e-5 on valid (non-padded) positions (batch 3, lengths 37, 23
// and 1), at thread counts 1 to 3, after checking the recorded config and the weights' sha256.
func TestParityWithPyTorch(t *testing.T) {
	paritytest.Suite{Variant: linear.New(), Fixtures: []string{"tiny", "prenorm_gelu", "tiny_causal", "prenorm_causal"}}.Run(t)
}

// TestGradientParityWithPyTorch compares the loss and every parameter's gradient of a
// label-smoothed cross-entropy (batch 3 with padding, ignored targets) with PyTorch autograd on
// the independent reference in testdata/gen_fixtures.py, rule paritytest.GradRtol.
func TestGradientParityWithPyTorch(t *testing.T) {
	paritytest.Suite{Variant: linear.New()}.RunGradients(t, "tiny_grad", "prenorm_gelu_grad")
}
