package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func readST(t *testing.T, path string) map[string]*tensor.Tensor {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]*tensor.Tensor{}
	for _, nt := range list {
		out[nt.Name] = nt.Tensor
	}
	return out
}

func writeST(t *testing.T, path string, tensors map[string]*tensor.Tensor) {
	t.Helper()
	var buf bytes.Buffer
	if err := tensorio.WriteSafetensorsMap(&buf, tensors, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWeightsFromTorch loads state_dicts that PyTorch initialised and saved in float64,
// float16 and bfloat16 (testdata/gen_weights.py) and compares zoo's outputs with the seed's
// module's on the same window.
func TestWeightsFromTorch(t *testing.T) {
	for _, dt := range []string{"f64", "f16", "bf16"} {
		t.Run(dt, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			code, _, errs := zoo(t, "run", "vanilla.tiny", "--set", "max_len=64", "--input", text, "--window", "37", "--max-windows", "1",
				"--weights", "testdata/torch_tiny_"+dt+".safetensors", "--output", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got, want := readST(t, out), readST(t, "testdata/torch_tiny_"+dt+"_outputs.safetensors")
			if !equalInts(got["tokens"].I64, want["tokens"].I64) {
				t.Fatalf("tokens differ from the fixture's window")
			}
			for _, name := range []string{"hidden", "logits"} {
				g, w := got[name].F32, want[name].F32
				if len(g) != len(w) {
					t.Fatalf("%s: %d values, fixture %d", name, len(g), len(w))
				}
				worst := 0.0
				for i := range g {
					worst = math.Max(worst, math.Abs(float64(g[i]-w[i])))
				}
				if worst > 1e-4 {
					t.Errorf("%s: max |zoo − torch| = %.3g, want ≤ 1e-4", name, worst)
				}
			}
		})
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWeightsReplaceSeed: weights exported from seed 5 and loaded over seed 0 give seed 5's
// outputs bit for bit, and the report says the weights are trained.
func TestWeightsReplaceSeed(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	if code, _, errs := zoo(t, "export", "vanilla.tiny", "--seed", "5", "--weights", w); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if code, _, errs := zoo(t, "run", "vanilla.tiny", "--seed", "5", "--input", text, "--output", a); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	code, out, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "--output", b, "--weights", w, "--json")
	if code != 0 {
		t.Fatalf("run --weights: exit %d: %s", code, errs)
	}
	var rep runout.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Weights.Source != "trained" || rep.Weights.File != w || rep.Weights.Seed != nil {
		t.Errorf("report weights %+v, want trained from %s", rep.Weights, w)
	}
	ta, tb := readST(t, a), readST(t, b)
	for _, name := range []string{"hidden", "logits"} {
		for i := range ta[name].F32 {
			if ta[name].F32[i] != tb[name].F32[i] {
				t.Fatalf("%s[%d]: seed 5 gives %v, seed 0 with seed 5's weights %v", name, i, ta[name].F32[i], tb[name].F32[i])
			}
		}
	}
	_, txt, _ := zoo(t, "run", "vanilla.tiny", "--input", text, "--seed", "3")
	if !strings.Contains(txt, "weights   random (seed 3)") {
		t.Errorf("text report does not say the weights are random:\n%s", txt)
	}
	// export --from-weights writes back exactly what it loaded.
	w2 := filepath.Join(dir, "w2.safetensors")
	if code, _, errs := zoo(t, "export", "vanilla.tiny", "--from-weights", w, "--weights", w2); code != 0 {
		t.Fatalf("export --from-weights: exit %d: %s", code, errs)
	}
	t1, t2 := readST(t, w), readST(t, w2)
	for name, x := range t1 {
		y := t2[name]
		if y == nil || len(x.F32) != len(y.F32) {
			t.Fatalf("%s: missing or resized after the round trip", name)
		}
		for i := range x.F32 {
			if x.F32[i] != y.F32[i] {
				t.Fatalf("%s[%d] changed in the round trip", name, i)
			}
		}
	}
}

func TestWeightsBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if code, _, errs := zoo(t, "export", "vanilla.tiny", "--weights", good); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	base := readST(t, good)
	variantFile := func(name string, edit func(map[string]*tensor.Tensor)) string {
		m := map[string]*tensor.Tensor{}
		for k, v := range base {
			m[k] = v
		}
		edit(m)
		p := filepath.Join(dir, name+".safetensors")
		writeST(t, p, m)
		return p
	}
	missing := variantFile("missing", func(m map[string]*tensor.Tensor) { delete(m, "layers.1.norm2.bias") })
	extra := variantFile("extra", func(m map[string]*tensor.Tensor) { m["layers.9.W_Q.weight"] = base["fc.bias"] })
	misshaped := variantFile("misshaped", func(m map[string]*tensor.Tensor) { m["fc.bias"] = base["layers.0.norm1.bias"] })
	buffer := variantFile("nobuffer", func(m map[string]*tensor.Tensor) { delete(m, "pos_encoding.pe") })
	junk := filepath.Join(dir, "junk.safetensors")
	if err := os.WriteFile(junk, []byte("not a safetensors file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "vanilla.tiny", "--input", text, "--weights", missing}, "missing tensor layers.1.norm2.bias"},
		{[]string{"show", "vanilla.tiny", "--weights", extra}, "unexpected tensor layers.9.W_Q.weight"},
		{[]string{"run", "vanilla.tiny", "--input", text, "--weights", misshaped}, "misshaped tensor fc.bias is float32 (64), the model's is float32 (257)"},
		{[]string{"run", "vanilla.tiny", "--input", text, "--weights", buffer}, "missing tensor pos_encoding.pe"},
		{[]string{"export", "vanilla.tiny", "--onnx", "-o", filepath.Join(dir, "x.onnx"), "--from-weights", missing}, "missing tensor layers.1.norm2.bias"},
		{[]string{"run", "vanilla.tiny", "--input", text, "--weights", junk}, "junk.safetensors: safetensors:"},
		{[]string{"run", "vanilla.tiny", "--input", text, "--weights", filepath.Join(dir, "none.safetensors")}, "no such file"},
		{[]string{"run", "vanilla.tiny", "--input", text, "--weights", filepath.Join(dir, "model.pt")}, "state_dict_to_safetensors.py"},
		{[]string{"run", "vanilla", "--input", text, "--weights", good}, "--weights " + good + " were written for vanilla with d_ff=128 d_model=64 heads=4 layers=2, not vanilla's d_ff=2048 d_model=512 heads=8 layers=6"},
		{[]string{"export", "--onnx", "-o", dir, "--from-weights", good}, "name the model"},
	} {
		code, _, errs := zoo(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestWeightsOfAnotherModel: weights zoo train wrote are refused by another variant, or by
// the same variant with another config, whatever the shapes (linear.tiny's parameters have
// vanilla.tiny's names and shapes), in one line naming both; a dropout rate, which only
// training reads, may differ.
func TestWeightsOfAnotherModel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if code, _, stderr := zoo(t, trainArgs("--steps", "1", "-o", out)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "linear.tiny", "--input", text}, "--weights " + out + " were written for vanilla.tiny, not linear.tiny; load them into vanilla.tiny"},
		{[]string{"run", "vanilla.tiny", "--set", "layers=3", "--input", text}, "were written for vanilla.tiny with layers=2, not vanilla.tiny's layers=3; give --set layers=2 to load them"},
		{[]string{"run", "vanilla.tiny", "--set", "causal=true", "--input", text}, "with causal=false, not vanilla.tiny's causal=true"},
	} {
		code, _, stderr := zoo(t, append(tc.args, "--weights", out)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, stderr := zoo(t, "eval", "vanilla.tiny", "--set", "dropout=0.3", "--input", text, "--weights", out); code != 0 {
		t.Errorf("another dropout rate: exit %d: %s", code, stderr)
	}
}
