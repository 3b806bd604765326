package linformer_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/linformer"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// suite is linformer's parity test: every sharing mode, the pre-LN/GELU/bias-free conventions,
// n == d_model == max_len (tiny_n64, the seed's form's only legal shape) and one base-sized layer.
var suite = paritytest.Suite{Variant: linformer.New(),
	Fixtures: []string{"tiny", "tiny_none", "tiny_kv", "tiny_layerwise", "tiny_prenorm", "tiny_n64", "base_layer"}}

// TestParityWithPyTorch compares hidden and logits with the independent PyTorch implementation
// (numpy-allclose style, absolute rule: |zoo - pytorch| <= 1e-5 on every valid position) for
// every sharing mode, the pre-LN/GELU/bias-free conventions and one base-sized layer, at every
// thread count from 1 to 3 (threads must not change the numbers by more than 1e-6).
func TestParityWithPyTorch(t *testing.T) { suite.Run(t) }

// fixture is a paritytest.Fixture with the helpers this package's other tests use.
type fixture struct {
	*paritytest.Fixture
	meta map[string]string
}

func loadFixture(t *testing.T, name string) fixture {
	f := suite.Load(t, name)
	return fixture{f, f.Meta}
}

func (f fixture) get(t *testing.T, name string) *tensor.Tensor { return f.Get(t, name) }

func (f fixture) config(t *testing.T) (variant.Config, uint64) { return f.Config(t, suite.Variant) }

func weightsSHA256(t *testing.T, g *graph.Graph, f fixture) string {
	return suite.WeightsSHA256(t, g, f.Fixture)
}

func run(t *testing.T, g *graph.Graph, f fixture, threads int) (map[string]*tensor.Tensor, error) {
	return paritytest.Run(t, g, f.Fixture, threads)
}

var compareValid = paritytest.CompareValid

// TestGradientParityWithPyTorch compares the loss and every parameter's gradient of a
// label-smoothed cross-entropy (batch 3 with padding, ignored targets) with PyTorch autograd on
// the independent reference in testdata/gen_fixtures.py, rule paritytest.GradRtol.
func TestGradientParityWithPyTorch(t *testing.T) {
	suite.RunGradients(t, "tiny_grad", "tiny_none_grad")
}
