package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// The float-input fixtures (testdata/floatin, written by gen_floatin.py with PyTorch 1.13): a
// ViT-style image encoder and a Conv1d audio front end, their inputs and PyTorch's outputs.
const floatDir = "testdata/floatin"

func TestRunFloatInputsMatchPyTorch(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ model, input, expected string }{
		{"vit.onnx", "vit-pixels.npy", "vit-expected.safetensors"},
		{"vit.onnx", "vit-pixels-f64.npy", "vit-expected.safetensors"},
		{"audio.onnx", "audio-inputs.npz", "audio-expected.safetensors"},
		{"audio.onnx", "audio-inputs.safetensors", "audio-expected.safetensors"},
	} {
		t.Run(c.input, func(t *testing.T) {
			out := filepath.Join(dir, c.input+".out.safetensors")
			code, stdout, errs := zoo(t, "run", filepath.Join(floatDir, c.model), "--input", filepath.Join(floatDir, c.input), "-o", out, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep runout.ArrayReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Inputs) == 0 {
				t.Fatalf("report: %v\n%s", err, stdout)
			}
			got, want := readST(t, out), readST(t, filepath.Join(floatDir, c.expected))
			if len(got) != len(want) {
				t.Fatalf("outputs %d, want %d", len(got), len(want))
			}
			for name, w := range want {
				g := got[name]
				if g == nil || !tensor.SameShape(g.Shape, w.Shape) || !tensor.SameShape(rep.Outputs[name], w.Shape) {
					t.Fatalf("output %s: got %v, want shape %v", name, g, w.Shape)
				}
				if e := maxDiff(g.F32, w.F32); e > 1e-4 {
					t.Errorf("output %s differs from PyTorch by %.3g (> 1e-4)", name, e)
				}
			}
		})
	}
}

// The real binary (this test binary in CLI mode), .npy and .json outputs.
func TestRunFloatInputsProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	dir := t.TempDir()
	want := readST(t, filepath.Join(floatDir, "vit-expected.safetensors"))
	npy, js := filepath.Join(dir, "pooled.npy"), filepath.Join(dir, "out.json")
	for _, args := range [][]string{
		{"run", filepath.Join(floatDir, "vit.onnx"), "--input", filepath.Join(floatDir, "vit-pixels.npy"), "-o", npy, "--select", "pooled"},
		{"run", "--input", filepath.Join(floatDir, "vit-pixels.npy"), filepath.Join(floatDir, "vit.onnx"), "-o", js},
	} {
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "ZOO_BENCH_TEST_CLI=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	f, err := os.Open(npy)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := tensorio.ReadNPY(f)
	if err != nil || !tensor.SameShape(p.Shape, want["pooled"].Shape) {
		t.Fatalf("pooled.npy: %v %v", p, err)
	}
	if e := maxDiff(p.F32, want["pooled"].F32); e > 1e-4 {
		t.Errorf("pooled.npy differs from PyTorch by %.3g", e)
	}
	var doc struct {
		Model   string
		Outputs map[string]struct {
			Shape []int
			Data  []float32
		}
	}
	readJSON(t, js, &doc)
	h := doc.Outputs["hidden"]
	if !tensor.SameShape(h.Shape, want["hidden"].Shape) || maxDiff(h.Data, want["hidden"].F32) > 1e-4 {
		t.Errorf("out.json hidden %v differs from PyTorch's %v", h.Shape, want["hidden"].Shape)
	}
}

func TestRunFloatInputErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, arrays map[string]*tensor.Tensor) string {
		p := filepath.Join(dir, name)
		if err := tensorio.AtomicWriteFile(p, func(w io.Writer) error { return tensorio.WriteSafetensorsMap(w, arrays, nil) }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f32 := func(shape ...int) *tensor.Tensor { x, _ := tensor.New(tensor.Float32, shape...); return x }
	i64 := func(shape ...int) *tensor.Tensor { x, _ := tensor.New(tensor.Int64, shape...); return x }
	vit, audio := filepath.Join(floatDir, "vit.onnx"), filepath.Join(floatDir, "audio.onnx")
	pixels := filepath.Join(floatDir, "vit-pixels.npy")
	for _, c := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"npy for two inputs", []string{"run", audio, "--input", pixels},
			[]string{"holds one array, but " + audio + " has 2 inputs"}},
		{"fixed axis", []string{"run", vit, "--input", write("a.safetensors", map[string]*tensor.Tensor{"pixels": f32(2, 3, 8, 16)})},
			[]string{`input "pixels" wants shape (batch, 3, 16, 16), ` + dir + `/a.safetensors's array is [2 3 8 16]: axis 2 is 8, not 16`}},
		{"rank", []string{"run", vit, "--input", write("b.safetensors", map[string]*tensor.Tensor{"pixels": f32(3, 16, 16)})},
			[]string{`input "pixels" wants shape (batch, 3, 16, 16) (rank 4)`}},
		{"symbolic binds across inputs, and a missing and an extra array", []string{"run", audio, "--input",
			write("c.safetensors", map[string]*tensor.Tensor{"wave": f32(3, 400), "gain": f32(2, 1), "x": f32(1)})},
			[]string{`input "gain" wants shape (batch, 1): axis 0 (batch) is 2, but input "wave" set batch to 3`, `has an array "x", which names no input`}},
		{"missing", []string{"run", audio, "--input", write("d.safetensors", map[string]*tensor.Tensor{"wave": f32(3, 400)})},
			[]string{`input "gain" float32 (batch, 1): ` + dir + `/d.safetensors has no array of that name`}},
		{"float from ints is fine, but not with --pool", []string{"run", vit, "--input", write("e.safetensors", map[string]*tensor.Tensor{"pixels": i64(1, 3, 16, 16)}), "--pool", "mean"},
			[]string{"--pool does not apply to --input"}},
		{"no .npy for two outputs", []string{"run", vit, "--input", pixels, "-o", filepath.Join(dir, "x.npy")},
			[]string{"a .npy file holds one output and the model has 2 (hidden, pooled); name one with --select"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := zoo(t, c.args...)
			if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("exit %d, want 2 and one line: %q", code, errs)
			}
			for _, w := range c.wants {
				if !strings.Contains(errs, w) {
					t.Errorf("error %q lacks %q", errs, w)
				}
			}
		})
	}
	// Integer pixels convert to the float32 input.
	if code, _, errs := zoo(t, "run", vit, "--input", write("f.safetensors", map[string]*tensor.Tensor{"pixels": i64(1, 3, 16, 16)})); code != 0 {
		t.Errorf("int64 pixels: exit %d: %s", code, errs)
	}
}
