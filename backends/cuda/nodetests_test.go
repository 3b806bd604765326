package cuda_test

import (
	"os"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cuda"
	"github.com/zoo-dev/zoo/onnx/nodetests"
)

// TestONNXNodeTestsCUDA runs ONNX's node tests (onnx/nodetests) on the CUDA backend, from
// the directory $ZOO_ONNX_NODE_TESTS (written by onnx/testdata/nodetests/gen.py; the GPU
// machine has no python3-onnx, so it is carried there). It fails on a wrong answer, a crash or
// a hang, and on a test the CPU backend passes and CUDA refuses; it logs the counts.
func TestONNXNodeTestsCUDA(t *testing.T) {
	needGPU(t)
	dir := os.Getenv("ZOO_ONNX_NODE_TESTS")
	if dir == "" {
		t.Skip("set ZOO_ONNX_NODE_TESTS to a directory onnx/testdata/nodetests/gen.py wrote")
	}
	tests, err := nodetests.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]nodetests.Outcome{}
	for _, nt := range tests {
		o := nodetests.Run(nt, cuda.Backend{}, backends.Options{})
		if o.Bad() {
			t.Errorf("%s (%s): %s: %s", nt.Name, nt.Op, o.Status, o.Detail)
		}
		if o.Status == nodetests.Refused {
			if c := nodetests.Run(nt, cpu.Backend{}, backends.Options{Threads: 1}); c.Status == nodetests.Pass {
				t.Errorf("%s (%s): the CPU backend passes it, CUDA refuses it: %s", nt.Name, nt.Op, o.Detail)
			}
		}
		outcomes[nt.Name] = o
	}
	report, _, _ := nodetests.Report("CUDA", tests, outcomes)
	t.Log(report)
}
