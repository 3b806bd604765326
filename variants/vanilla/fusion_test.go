package vanilla_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// PyTorch's export of the seed's encoder (seed_tiny_op14…17: scale, mask and head split as
// torch.onnx.export writes them, shapes computed at run time) compiles to the same fused
// kernels as zoo's own graph of the same model, with no unfused softmax or product left,
// and its fused output is the graph's reference evaluation within float tolerance.
func TestPyTorchExportFusesAsVanilla(t *testing.T) {
	f := loadFixture(t, "seed_tiny_outputs")
	cfg, seed := f.Config(t, vanilla.New())
	own, err := vanilla.New().Build(context.Background(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := paritytest.FusedKernels(t, own)
	if len(want) == 0 {
		t.Fatal("vanilla's own graph has no fused steps")
	}
	feeds := map[string]*tensor.Tensor{"tokens": f.get(t, "tokens"), "key_padding_mask": f.get(t, "key_padding_mask")}
	for _, name := range []string{"seed_tiny_op14", "seed_tiny_op15", "seed_tiny_op16", "seed_tiny_op17"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + name + ".onnx")
			if err != nil {
				t.Fatal(err)
			}
			g, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			got, prog := paritytest.FusedKernels(t, g)
			if !slices.Equal(got, want) {
				t.Fatalf("fused kernels %v, vanilla's %v; report:\n%s", got, want, prog.Report())
			}
			for _, k := range prog.Kernels() {
				if k == "Softmax" || k == "MatMul" || k == "Gemm" {
					t.Fatalf("unfused %s left; report:\n%s", k, prog.Report())
				}
			}
			out, err := prog.Run(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := g.Eval(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			for name, r := range ref {
				if o := out[name]; o == nil || !tensor.SameShape(o.Shape, r.Shape) {
					t.Fatalf("%s: fused %v, reference shape %v", name, o, r.Shape)
				}
				if d := paritytest.MaxDiff(out[name], r, r.Len()); !(d <= 1e-4) {
					t.Errorf("%s: fused and reference differ by %g", name, d)
				}
			}
		})
	}
}

// A causal model's mask is applied inside the fused attention kernel ("attention+causal"):
// the (B, 1, n, n) mask and the comparison it came from are gone from the program, and the
// result is the unfused graph's within float tolerance on lengths 1, odd and beyond the
// kernel's key block, with padding.
func TestCausalMaskInKernel(t *testing.T) {
	g := paritytest.BuildGraph(t, vanilla.New(), 3, map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "causal": true})
	p := paritytest.FusedMatchesUnfused(t, g, [][2]int{{1, 1}, {2, 7}, {1, 600}}, 1e-4)
	if fu := p.Fusions(); fu["attention+causal"] != 2 {
		t.Fatalf("fusions %v, want 2 attention+causal; report:\n%s", fu, p.Report())
	}
	for _, k := range p.Kernels() {
		if k == "Greater" || k == "Range" || k == "Softmax" {
			t.Fatalf("step %s left: %v", k, p.Kernels())
		}
	}
}
