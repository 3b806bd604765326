package onnx_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/zoo-dev/zoo/internal/goldenjson"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/tensor"
	xcpu "golang.org/x/sys/cpu"
)

// The graphs of testdata/realgraphs (written by its gen.py) use each op and element type
// that real encoder files bring: float16 and bfloat16 weights, QDQ and dynamic
// quantization, MatMulInteger, Trilu, Conv and ONNX Runtime's com.microsoft ops. Their
// expected outputs are ONNX Runtime 1.30's, committed in NAME.json so that this test needs
// no ONNX Runtime; TestRealGraphsMatchORT recomputes them when ONNX Runtime is installed
// (and rewrites the files with ZOO_UPDATE_REALGRAPHS=1).

const realgraphsDir = "testdata/realgraphs"

// rgTensor is a tensor in the fixtures' JSON.
type rgTensor = goldenjson.Tensor

type rgFixture struct {
	Note      string              `json:"note"`
	Tolerance float64             `json:"tolerance"`
	Inputs    map[string]rgTensor `json:"inputs"`
	Outputs   map[string]rgTensor `json:"outputs"`
	// Torch holds PyTorch's float32 outputs, for graphs exported from PyTorch.
	Torch map[string]rgTensor `json:"torch,omitempty"`
}

func loadRealGraphs(t *testing.T) (names []string, fx map[string]*rgFixture) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(realgraphsDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s (%v): run its gen.py", realgraphsDir, err)
	}
	fx = map[string]*rgFixture{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f rgFixture
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		names = append(names, name)
		fx[name] = &f
	}
	sort.Strings(names)
	return names, fx
}

func (f *rgFixture) inputs() (map[string]*tensor.Tensor, error) {
	in := map[string]*tensor.Tensor{}
	for k, v := range f.Inputs {
		x, err := v.Decode()
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", k, err)
		}
		in[k] = x
	}
	return in, nil
}

// runZoo imports the graph from its file and runs it on the CPU backend.
func runZoo(name string, f *rgFixture) (map[string]*tensor.Tensor, error) {
	g, err := onnx.ImportFile(filepath.Join(realgraphsDir, name+".onnx"))
	if err != nil {
		return nil, err
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	in, err := f.inputs()
	if err != nil {
		return nil, err
	}
	return p.Run(context.Background(), in)
}

// compare checks got against want: integers exactly, floats within tol·(1 + |want|)
// (numpy's allclose with rtol = atol = tol); it returns the worst float error found.
func compare(got *tensor.Tensor, want rgTensor, tol float64) (float64, error) {
	w, err := want.Decode()
	if err != nil {
		return 0, err
	}
	if !tensor.SameShape(got.Shape, w.Shape) {
		return 0, fmt.Errorf("shape %v, want %v", got.Shape, w.Shape)
	}
	if w.DType != tensor.Float32 {
		if !got.DType.IsInt() {
			return 0, fmt.Errorf("dtype %v, want %v", got.DType, w.DType)
		}
		for i := range w.I64 {
			if got.I64[i] != w.I64[i] {
				return 0, fmt.Errorf("element %d: %d, want %d (integer ops are exact)", i, got.I64[i], w.I64[i])
			}
		}
		return 0, nil
	}
	if !got.DType.IsFloat() {
		return 0, fmt.Errorf("dtype %v, want float32", got.DType)
	}
	worst := 0.0
	for i := range w.F32 {
		d := math.Abs(float64(got.F32[i]) - float64(w.F32[i]))
		worst = math.Max(worst, d/(1+math.Abs(float64(w.F32[i]))))
		if !(d <= tol*(1+math.Abs(float64(w.F32[i])))) {
			return worst, fmt.Errorf("element %d: %g, want %g (|diff| %.3g > %g·(1+|want|))", i, got.F32[i], w.F32[i], d, tol)
		}
	}
	return worst, nil
}

func TestRealGraphsOnCPU(t *testing.T) {
	names, fx := loadRealGraphs(t)
	for _, name := range names {
		f := fx[name]
		t.Run(name, func(t *testing.T) {
			if len(f.Outputs) == 0 {
				t.Fatalf("%s.json has no expected outputs: run TestRealGraphsMatchORT with ONNX Runtime and ZOO_UPDATE_REALGRAPHS=1", name)
			}
			got, err := runZoo(name, f)
			if err != nil {
				t.Fatal(err)
			}
			for out, want := range f.Outputs {
				g, ok := got[out]
				if !ok {
					t.Fatalf("no output %q", out)
				}
				if _, err := compare(g, want, f.Tolerance); err != nil {
					t.Errorf("%s (%s): output %s: %v", name, f.Note, out, err)
				}
			}
		})
	}
}

// ortSaturates names the graphs whose integer products ONNX Runtime computes with its u8s8
// kernels (MatMulInteger, and a QDQ MatMul it fuses into one).
var ortSaturates = map[string]bool{"dynamic_quant_matmul": true, "qdq_per_axis_matmul": true}

// TestRealGraphsMatchORT runs every graph in ONNX Runtime and checks that zoo matches it
// (and that the committed outputs still are ONNX Runtime's); it skips without ONNX Runtime.
// With ZOO_UPDATE_REALGRAPHS=1 it writes ONNX Runtime's outputs into the fixtures.
func TestRealGraphsMatchORT(t *testing.T) {
	rt, err := ort.Open()
	if errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found: set %s or install it (%v)", ort.LibraryEnv, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	update := os.Getenv("ZOO_UPDATE_REALGRAPHS") == "1"
	names, fx := loadRealGraphs(t)
	for _, name := range names {
		f := fx[name]
		t.Run(name, func(t *testing.T) {
			if ortSaturates[name] && !xcpu.X86.HasAVX512VNNI && !xcpu.X86.HasAVXVNNI {
				t.Skip("ONNX Runtime's x86 u8s8 kernels without VNNI add pairs of products in int16 with saturation " +
					"(VPMADDUBSW), so on this CPU its answer departs from ONNX's definition; the committed outputs are " +
					"the exact ones (numpy's int64 sum), and TestRealGraphsOnCPU checks zoo against them")
			}
			model, err := os.ReadFile(filepath.Join(realgraphsDir, name+".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := rt.NewSession(model, ort.SessionOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in, err := f.inputs()
			if err != nil {
				t.Fatal(err)
			}
			var outNames []string
			for _, o := range s.Outputs() {
				outNames = append(outNames, o.Name)
			}
			want, err := s.Run(in, outNames)
			if err != nil {
				t.Fatal(err)
			}
			if update {
				f.Outputs = map[string]rgTensor{}
				for k, v := range want {
					f.Outputs[k] = goldenjson.Encode(v)
				}
				data, err := json.Marshal(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(realgraphsDir, name+".json"), append(data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := runZoo(name, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, out := range outNames {
				worst, err := compare(got[out], goldenjson.Encode(want[out]), f.Tolerance)
				if err != nil {
					t.Errorf("output %s against ONNX Runtime: %v", out, err)
				}
				t.Logf("%s: worst relative error %.2g", out, worst)
				if c, ok := f.Outputs[out]; ok && !update {
					if _, err := compare(want[out], c, 1e-6); err != nil {
						t.Errorf("output %s: the committed rgFixture is not ONNX Runtime's: %v", out, err)
					}
				}
			}
		})
	}
}

// TestTorchEncoderFP16Weights checks the PyTorch exports of gen_torch_fp16.py against
// PyTorch's float32 output: the float32-weight export at 1e-4, the float16-weight one within
// float16 rounding of the weights (5e-3 relative to 1 + |want|).
func TestTorchEncoderFP16Weights(t *testing.T) {
	names, fx := loadRealGraphs(t)
	seen := 0
	for _, name := range names {
		f := fx[name]
		if f.Torch == nil {
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			tol := 1e-4
			if strings.HasSuffix(name, "_fp16w") {
				tol = 5e-3
			}
			got, err := runZoo(name, f)
			if err != nil {
				t.Fatal(err)
			}
			for out, want := range f.Torch {
				worst, err := compare(got[out], want, tol)
				if err != nil {
					t.Errorf("%s against PyTorch float32: %v", out, err)
				}
				t.Logf("%s: worst error against PyTorch float32 %.2g (tolerance %g)", out, worst, tol)
			}
		})
	}
	if seen == 0 {
		t.Fatal("no PyTorch exports in the fixtures: run gen_torch_fp16.py")
	}
}
