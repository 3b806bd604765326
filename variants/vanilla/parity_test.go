package vanilla_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

var suite = paritytest.Suite{Variant: vanilla.New(), Fixtures: []string{"tiny", "base_layer", "tiny_causal"}}

// TestParityWithPyTorch compares hidden and logits with the seed's PyTorch modules at atol
// 1e-5 on valid (non-padded) positions, for the tiny preset and one base-sized layer, at every
// thread count from 1 to 3.
func TestParityWithPyTorch(t *testing.T) { suite.Run(t) }

// fixture is a paritytest.Fixture with the helpers this package's other tests use.
type fixture struct{ *paritytest.Fixture }

func loadFixture(t *testing.T, name string) fixture { return fixture{suite.Load(t, name)} }

func (f fixture) get(t *testing.T, name string) *tensor.Tensor { return f.Get(t, name) }

var compareValid = paritytest.CompareValid

// TestGradientParityWithPyTorch compares the loss and every parameter's gradient of a
// label-smoothed cross-entropy (batch 3 with padding, ignored targets) with PyTorch autograd on
// the seed's modules, rule paritytest.GradRtol.
func TestGradientParityWithPyTorch(t *testing.T) { suite.RunGradients(t, "tiny_grad") }
