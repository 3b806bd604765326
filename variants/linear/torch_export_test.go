package linear_test

import (
	"testing"

	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/linear"
)

// The tiny model as PyTorch 1.13 itself exports the reference (testdata/gen_fixtures.py:
// fast-transformers' einsums, Reciprocal, elu + 1, the key-padding Mul; opsets 14 and 17,
// batch and sequence dynamic) compiles on the CPU backend to the same fused kernels as
// zoo's own graph, and its fused outputs equal the imported graph's evaluation and
// PyTorch's own. Gap: the attention itself (PyTorch's (N, L, H, D) einsums, lowered by the
// importer to MatMul, Transpose, Unsqueeze and Squeeze) is not yet one FusedLinearAttention;
// its MatMuls are not A·(Bᵀ·V) as the linear-attention matcher reads it. Extra: the
// export's elementwise chains around the attention, one FusedElementwise each.
func TestPyTorchExportFusesAsLinear(t *testing.T) {
	paritytest.Suite{Variant: linear.New()}.CheckPyTorchExport(t, "torch_tiny_outputs",
		[]string{"torch_tiny_op14", "torch_tiny_op17"},
		map[string]int{"FusedLinearAttention": 2}, map[string]int{"FusedElementwise": 2}, 1e-5)
}
