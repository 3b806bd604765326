package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/show"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The default --seq is clamped to the model's max_len with a note; an explicit length
// beyond it stays an error.
func TestShowClampsDefaultSeq(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		ns     []int
		stderr string
	}{
		{"default within max_len", []string{"show", "vanilla.tiny", "--json"}, 0, []int{128, 512}, ""},
		{"default clamped", []string{"show", "linformer.tiny", "--json"}, 0, []int{128}, "clamped to linformer.tiny's maximum length 128"},
		{"default partly clamped", []string{"show", "linformer.tiny", "--set", "max_len=300", "--json"}, 0, []int{128, 300}, "showing n = 128,300"},
		{"explicit beyond max_len", []string{"show", "linformer.tiny", "--seq", "128,512"}, 2, nil, "--seq 512 is longer than linformer.tiny's maximum length 128"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := zoo(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, errs)
			}
			if c.stderr == "" && errs != "" || !strings.Contains(errs, c.stderr) || strings.Count(errs, "\n") > 1 {
				t.Errorf("stderr %q, want one line with %q (or nothing)", errs, c.stderr)
			}
			if code != 0 {
				return
			}
			var res show.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			var ns []int
			for _, cost := range res.Costs {
				ns = append(ns, cost.N)
			}
			if len(ns) != len(c.ns) || ns[0] != c.ns[0] || ns[len(ns)-1] != c.ns[len(c.ns)-1] {
				t.Errorf("costs at n = %v, want %v", ns, c.ns)
			}
		})
	}
}

// TestShowFloatInputFile: a file whose input is a float tensor (src (B, n, 8), no text) is
// shown with its costs at its declared shape, batch 1 and each n (it failed: no shape for
// src), or at the shape --shape gives; a scalar constant initializer is not counted as a
// parameter, and the seed formula, which needs a variant's layers and d_model, reads n/a.
func TestShowFloatInputFile(t *testing.T) {
	b := graph.NewBuilder("floatin")
	src := b.Input("src", tensor.Float32, graph.Sym("B"), graph.Sym("n"), graph.Fixed(8))
	w, _ := tensor.New(tensor.Float32, 8, 8)
	scale := b.Param("scale", tensor.ScalarF(0.5))
	b.Output("y", b.Mul(b.Op("MatMul", []string{src, b.Param("w", w)}, nil), scale), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := onnx.Export(g, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "floatin.onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := zoo(t, "show", path, "--seq", "16")
	if code != 0 || !strings.Contains(out, "parameters: 64 ") || !strings.Contains(out, "n/a") || strings.Contains(out, "paper:") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	flops := func(args ...string) int64 {
		t.Helper()
		code, out, errs := zoo(t, append([]string{"show", path, "--seq", "16", "--json"}, args...)...)
		var res struct {
			Costs []struct {
				FLOPs int64 `json:"flops"`
			} `json:"costs"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Costs) != 1 {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errs)
		}
		return res.Costs[0].FLOPs
	}
	one := flops()
	if one < 2*16*8*8 {
		t.Errorf("FLOPs at the declared shape (1, 16, 8): %d, want at least the MatMul's %d", one, 2*16*8*8)
	}
	if three := flops("--shape", "src=3xnx8"); three != 3*one {
		t.Errorf("FLOPs at --shape src=3xnx8: %d, want 3 × %d", three, one)
	}
	for _, c := range []struct{ spec, err string }{
		{"x=1xnx8", `has no input "x"`},
		{"src=1xnx9", "axis 2 is fixed at 8"},
		{"src=1xn", "of 3 dimensions, not 2"},
		{"src=1xmx8", `dimension "m" is neither`},
		{"src", "want NAME=DIMS"},
	} {
		if code, _, errs := zoo(t, "show", path, "--shape", c.spec); code != 2 || !strings.Contains(errs, c.err) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("--shape %s: exit %d, stderr %q, want 2 and one line with %q", c.spec, code, errs, c.err)
		}
	}
}
