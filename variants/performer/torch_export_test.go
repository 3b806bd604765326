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
// PyTorch's own. Its feature maps (einsum against Expand(Ω), Pow, ReduceMax, the masked
// Where) are one FusedFeatureMap each, as in zoo's graph. Gap: the attention's einsums,
// lowered by the importer to Transpose, Reshape, MatMul, Unsqueeze and Squeeze, are not yet
// one FusedLinearAttention: they are not A·(Bᵀ·V) as the linear-attention matcher reads it.
// Extra: the export's elementwise chains, one FusedElementwise each, and its feature maps,
// one FusedFeatureMap each, where zoo's graph computes them inside its FusedLinearAttention.
func TestPyTorchExportFusesAsPerformer(t *testing.T) {
	paritytest.Suite{Variant: performer.New()}.CheckPyTorchExport(t, "torch_tiny_outputs",
		[]string{"torch_tiny_op14", "torch_tiny_op17"},
		map[string]int{"FusedLinearAttention": 2}, map[string]int{"FusedElementwise": 6, "FusedFeatureMap": 4}, 1e-5)
}
