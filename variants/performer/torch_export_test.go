package performer_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/performer"
)

// The tiny model as PyTorch 1.13 itself exports the reference (testdata/gen_fixtures.py:
// performer-pytorch's einsums, Expand of Ω, Pow, ReduceMax, the masked Where; opsets 14 and 17,
// batch and sequence dynamic) compiles on the CPU backend to the same fused kernels as
// zoo's own graph, and its fused outputs equal the imported graph's evaluation and
// PyTorch's own. Gap: the feature maps and the attention are not yet fused: PyTorch's
// "...id,...jd->...ij" against Expand(Ω), lowered by the importer to Reshape, Transpose and
// MatMul, is not MatMul(x, constant W) as the random-features matcher reads it, and the
// attention's einsums are not A·(Bᵀ·V).
func TestPyTorchExportFusesAsPerformer(t *testing.T) {
	paritytest.Suite{Variant: performer.New()}.CheckPyTorchExport(t, "torch_tiny_outputs",
		[]string{"torch_tiny_op14", "torch_tiny_op17"},
		map[string]int{"FusedFeatureMap": 4, "FusedLinearAttention": 2}, 1e-5)
}
