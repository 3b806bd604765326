package ort_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// openORT returns the runtime or skips the test when the library is not installed.
func openORT(t *testing.T) *ort.Runtime {
	t.Helper()
	rt, err := ort.Open()
	if errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found: set %s or install it (%v)", ort.LibraryEnv, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func readNPY(t *testing.T, path string) *tensor.Tensor {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := tensorio.ReadNPY(f)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestLibraryPathErrors(t *testing.T) {
	t.Setenv(ort.LibraryEnv, filepath.Join(t.TempDir(), "nope.so"))
	_, err := ort.LibraryPath()
	if !errors.Is(err, ort.ErrNotFound) || !strings.Contains(err.Error(), "npm install onnxruntime-node@1.30.0") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v", err)
	}
	t.Setenv(ort.LibraryEnv, "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if got := ort.DefaultLibraryPath(); got != "/xdg/zoo/onnxruntime/libonnxruntime.so.1" {
		t.Errorf("default path %s", got)
	}
}

// TestTorchFixturesUnderORT runs PyTorch's exports in ONNX Runtime and compares with PyTorch.
func TestTorchFixturesUnderORT(t *testing.T) {
	rt := openORT(t)
	t.Logf("ONNX Runtime %s from %s", rt.Version, rt.Path)
	paths, _ := filepath.Glob("../testdata/torch/*.onnx")
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	be, _ := backends.Lookup("cpu")
	for _, p := range paths {
		base := strings.TrimSuffix(p, ".onnx")
		t.Run(filepath.Base(base), func(t *testing.T) {
			model, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			src, mask, want := readNPY(t, base+".src.npy"), readNPY(t, base+".mask.npy"), readNPY(t, base+".out.npy")
			s, err := rt.NewSession(model, ort.SessionOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			inputs := map[string]*tensor.Tensor{"src": src, "src_key_padding_mask": mask}
			got, err := s.Run(inputs, []string{"out"})
			if err != nil {
				t.Fatal(err)
			}
			valid := parity.ValidFromPadding(mask)
			r := parity.Compare("out", got["out"], want, valid, 1e-5, 1e-5)
			if !r.Pass {
				t.Errorf("ORT vs PyTorch: max abs %g at %v", r.MaxAbs, r.MaxAbsAt)
			}
			// zoo's import of the same file on the cpu backend against ORT.
			g, err := onnx.Import(model)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := be.Compile(g, backends.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			zoo, err := prog.Run(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			r2 := parity.Compare("out", zoo["out"], got["out"], valid, 1e-5, 1e-5)
			if !r2.Pass {
				t.Errorf("zoo cpu vs ORT: max abs %g at %v", r2.MaxAbs, r2.MaxAbsAt)
			}
			t.Logf("ORT vs PyTorch max abs %.3g; zoo cpu vs ORT max abs %.3g", r.MaxAbs, r2.MaxAbs)
		})
	}
}

// TestZooExportUnderORT exports zoo's vanilla variant (tiny config) and checks that ONNX
// Runtime loads it and agrees with zoo's cpu backend on valid positions.
func TestZooExportUnderORT(t *testing.T) {
	rt := openORT(t)
	cfg, err := variant.Resolve(vanilla.New().Describe(), map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 64})
	if err != nil {
		t.Fatal(err)
	}
	g, err := vanilla.New().Build(context.Background(), cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	model, err := onnx.Export(g, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const B, N = 2, 37
	tokens, _ := tensor.New(tensor.Int64, B, N)
	mask, _ := tensor.New(tensor.Bool, B, N)
	for i := range tokens.I64 {
		tokens.I64[i] = int64(1 + (i*31)%256)
	}
	for i := N - 9; i < N; i++ {
		tokens.I64[N+i] = 0
		mask.Bool[N+i] = true
	}
	inputs := map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": mask}
	s, err := rt.NewSession(model, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Run(inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	be, _ := backends.Lookup("cpu")
	imported, err := onnx.Import(model)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := be.Compile(imported, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	got, err := prog.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	var results []parity.Result
	for _, o := range s.Outputs() {
		results = append(results, parity.Compare(o.Name, got[o.Name], want[o.Name], parity.ValidFromPadding(mask), 1e-4, 1e-4))
	}
	var sb strings.Builder
	_ = parity.Render(&sb, results, parity.RenderOptions{Got: "zoo cpu", Want: "onnxruntime " + rt.Version})
	if len(results) < 2 || !parity.AllPass(results) {
		t.Fatalf("parity:\n%s", sb.String())
	}
	t.Logf("\n%s", sb.String())
}

func TestRunErrors(t *testing.T) {
	rt := openORT(t)
	model, err := os.ReadFile("../testdata/torch/enc_relu_op17.onnx")
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.NewSession(model, ort.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := readNPY(t, "../testdata/torch/enc_relu_op17.src.npy")
	mask := readNPY(t, "../testdata/torch/enc_relu_op17.mask.npy")
	for _, tc := range []struct {
		in   map[string]*tensor.Tensor
		outs []string
		want string
	}{
		{map[string]*tensor.Tensor{"src": src}, nil, `input "src_key_padding_mask" is missing`},
		{map[string]*tensor.Tensor{"src": src, "src_key_padding_mask": mask, "x": src}, nil, `no input "x"`},
		{map[string]*tensor.Tensor{"src": src, "src_key_padding_mask": mask}, []string{"logits"}, `no output "logits"`},
		{map[string]*tensor.Tensor{"src": mask, "src_key_padding_mask": mask}, nil, "run"},
	} {
		if _, err := s.Run(tc.in, tc.outs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
	// Concurrent runs are safe.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Run(map[string]*tensor.Tensor{"src": src, "src_key_padding_mask": mask}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(nil, nil); err == nil {
		t.Error("run after close")
	}
	if _, err := rt.NewSession([]byte("garbage"), ort.SessionOptions{}); err == nil {
		t.Error("garbage model loaded")
	}
}
