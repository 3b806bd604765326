package sparse_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var suite = paritytest.Suite{Variant: sparse.New(),
	Fixtures: []string{"tiny", "tiny_global", "tiny_stride", "tiny_all", "tiny_prenorm", "tiny_long", "base_layer", "tiny_causal", "tiny_causal_global", "tiny_causal_all"}}

// TestParityWithPyTorch compares hidden and logits with the independent dense-masked PyTorch
// reference (numpy-allclose style, absolute rule: |zoo - pytorch| <= 1e-5 on every valid
// position) for the sliding window, global tokens, strided blocks, all three together, the
// pre-LN/GELU/bias-free/unscaled conventions, a 300-token batch and one base-sized layer, at every
// thread count from 1 to 3 (threads must not change the numbers by more than 1e-6).
func TestParityWithPyTorch(t *testing.T) { suite.Run(t) }

// fixture is a paritytest.Fixture with the helpers this package's other tests use.
type fixture struct{ *paritytest.Fixture }

func loadFixture(t *testing.T, name string) fixture { return fixture{suite.Load(t, name)} }

func (f fixture) get(t *testing.T, name string) *tensor.Tensor { return f.Get(t, name) }

func (f fixture) config(t *testing.T) (variant.Config, uint64) { return f.Config(t, suite.Variant) }

// TestGradientParityWithPyTorch compares the loss and every parameter's gradient of a
// label-smoothed cross-entropy (batch 3 with padding, ignored targets) with PyTorch autograd on
// the independent reference in testdata/gen_fixtures.py, rule paritytest.GradRtol.
func TestGradientParityWithPyTorch(t *testing.T) {
	suite.RunGradients(t, "tiny_grad", "tiny_global_grad")
}
