//go:build cgo && linux

package cuda

import "testing"

func TestSupportedOpsCoverConformance(t *testing.T) {
	ops := map[string]bool{}
	for _, op := range SupportedOps() {
		ops[op] = true
	}
	for _, op := range []string{"MatMul", "Gemm", "Softmax", "LayerNormalization", "Gather", "Where", "Shape", "Cast"} {
		if !ops[op] {
			t.Errorf("%s is not supported", op)
		}
	}
}
