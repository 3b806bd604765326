package vanilla_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestImportPyTorchExports imports the seed's encoder as PyTorch 1.13 exports it at opsets 14
// to 17, runs it on the CPU backend and compares with PyTorch's own outputs on valid positions.
func TestImportPyTorchExports(t *testing.T) {
	f := loadFixture(t, "seed_tiny_outputs")
	tokens, mask := f.get(t, "tokens"), f.get(t, "key_padding_mask")
	cpu, _ := backends.Lookup("cpu")
	for opset := 14; opset <= 17; opset++ {
		t.Run(fmt.Sprintf("opset%d", opset), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("seed_tiny_op%d.onnx", opset)))
			if err != nil {
				t.Fatal(err)
			}
			g, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			if g.Opset != opset {
				t.Errorf("imported opset %d, want %d", g.Opset, opset)
			}
			prog, err := cpu.Compile(g, backends.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			outs, err := prog.Run(context.Background(), map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": mask})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"hidden", "logits"} {
				if d, at := compareValid(t, outs[name], f.get(t, name), mask); d > 1e-5 {
					t.Errorf("%s differs from PyTorch by %.3g at %v", name, d, at)
				}
			}
		})
	}
}
