package onnx_test

import (
	"context"
	"os"
	"path/filepath"
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
	if err != nil || len(paths) != 8 {
		t.Fatalf("want 8 PyTorch fixtures in testdata/torch, found %d (%v)", len(paths), err)
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
			if g.Opset != wantOpset {
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
