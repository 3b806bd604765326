package onnx_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// fixture is one PyTorch export from testdata/gen_fixtures.py with its inputs and outputs.
type fixture struct {
	name      string
	model     []byte
	src, mask *tensor.Tensor
	out       *tensor.Tensor
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/torch/*.onnx")
	if err != nil || len(paths) != 14 {
		t.Fatalf("want 14 PyTorch fixtures (opsets 11 to 17) in testdata/torch, found %d (%v)", len(paths), err)
	}
	var fs []fixture
	for _, p := range paths {
		base := strings.TrimSuffix(p, ".onnx")
		f := fixture{name: filepath.Base(base)}
		if f.model, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		for _, x := range []struct {
			dst **tensor.Tensor
			ext string
		}{{&f.src, ".src.npy"}, {&f.mask, ".mask.npy"}, {&f.out, ".out.npy"}} {
			if *x.dst, err = readNPY(base + x.ext); err != nil {
				t.Fatal(err)
			}
		}
		fs = append(fs, f)
	}
	return fs
}

func TestImportTorchFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			g, err := onnx.Import(f.model)
			if err != nil {
				t.Fatal(err)
			}
			wantOpset := int(f.name[len(f.name)-2]-'0')*10 + int(f.name[len(f.name)-1]-'0')
			// Files older than MinOpset come out of the import adapters in MinOpset's forms.
			if wantOpset = max(wantOpset, onnx.MinOpset); g.Opset != wantOpset {
				t.Errorf("opset %d, want %d", g.Opset, wantOpset)
			}
			if len(g.Inputs) != 2 || g.Inputs[0].Name != "src" || g.Inputs[1].DType != tensor.Bool {
				t.Fatalf("inputs %+v", g.Inputs)
			}
			want := graph.Shape{graph.Sym("batch"), graph.Sym("seq"), graph.Fixed(64)}
			if g.Inputs[0].Shape.String() != want.String() {
				t.Errorf("src shape %v, want %v", g.Inputs[0].Shape, want)
			}
			if len(g.Outputs) != 1 || g.Outputs[0].Name != "out" {
				t.Errorf("outputs %+v", g.Outputs)
			}
			if g.ParamCount() == 0 {
				t.Error("no parameters")
			}
			// Re-export and re-import: same graph.
			data, err := onnx.Export(g, onnx.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			back, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Nodes) != len(g.Nodes) || len(back.Initializers) != len(g.Initializers) {
				t.Errorf("re-import: %d nodes %d initializers, want %d %d", len(back.Nodes), len(back.Initializers), len(g.Nodes), len(g.Initializers))
			}
		})
	}
}

// TestTorchFixturesOnCPU runs each PyTorch export on zoo's CPU backend and compares with
// PyTorch's outputs on valid (non-padded) positions at atol 1e-5.
func TestTorchFixturesOnCPU(t *testing.T) {
	be, ok := backends.Lookup("cpu")
	if !ok {
		t.Fatal("cpu backend not registered")
	}
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			g, err := onnx.Import(f.model)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := be.Compile(g, backends.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			outs, err := prog.Run(context.Background(), map[string]*tensor.Tensor{"src": f.src, "src_key_padding_mask": f.mask})
			if err != nil {
				t.Fatal(err)
			}
			r := parity.Compare("out", outs["out"], f.out, parity.ValidFromPadding(f.mask), 1e-5, 1e-5)
			if !r.Pass {
				var sb strings.Builder
				_ = parity.Render(&sb, []parity.Result{r}, parity.RenderOptions{Got: "zoo cpu", Want: "PyTorch 1.13"})
				t.Fatalf("parity failed:\n%s", sb.String())
			}
			t.Logf("%s: max abs %.3g at %v, min atol %.3g", f.name, r.MaxAbs, r.MaxAbsAt, r.MinAtol)
		})
	}
}

func readNPY(path string) (*tensor.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tensorio.ReadNPY(f)
}

// TestUpconvertedFixturesOnCPU runs the opset-18 to 23 rewrites of the PyTorch exports
// (testdata/gen_upconverted.py: reduction axes as inputs, Gelu, newer opset and IR) on the CPU
// backend against PyTorch's outputs for the same model, at atol 1e-5.
func TestUpconvertedFixturesOnCPU(t *testing.T) {
	be, _ := backends.Lookup("cpu")
	paths, err := filepath.Glob("testdata/torch_up/*.onnx")
	if err != nil || len(paths) != 12 {
		t.Fatalf("want 12 up-converted fixtures in testdata/torch_up, found %d (%v)", len(paths), err)
	}
	seen := map[int]bool{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".onnx")
		t.Run(name, func(t *testing.T) {
			act := strings.Split(name, "_")[1]
			base := filepath.Join("testdata/torch", "enc_"+act+"_op17")
			var src, mask, want *tensor.Tensor
			var err error
			for _, x := range []struct {
				dst **tensor.Tensor
				ext string
			}{{&src, ".src.npy"}, {&mask, ".mask.npy"}, {&want, ".out.npy"}} {
				if *x.dst, err = readNPY(base + x.ext); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			g, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			seen[g.Opset] = true
			if act == "gelu" && g.Opset >= 20 && !slices.Contains(g.OpTypes(), "Gelu") {
				t.Errorf("opset %d: no Gelu node after import (ops %v)", g.Opset, g.OpTypes())
			}
			prog, err := be.Compile(g, backends.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			outs, err := prog.Run(context.Background(), map[string]*tensor.Tensor{"src": src, "src_key_padding_mask": mask})
			if err != nil {
				t.Fatal(err)
			}
			r := parity.Compare("out", outs["out"], want, parity.ValidFromPadding(mask), 1e-5, 1e-5)
			if !r.Pass {
				var sb strings.Builder
				_ = parity.Render(&sb, []parity.Result{r}, parity.RenderOptions{Got: "zoo cpu", Want: "PyTorch 1.13"})
				t.Fatalf("parity failed:\n%s", sb.String())
			}
		})
	}
	for v := 18; v <= onnx.MaxOpset; v++ {
		if !seen[v] {
			t.Errorf("no up-converted fixture at opset %d", v)
		}
	}
}
