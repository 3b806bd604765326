package paritytest

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// FusedKernels compiles g on the CPU backend (two threads, fusion on) and returns the
// program's fused steps (their kernel names, sorted) and the program.
func FusedKernels(t testing.TB, g *graph.Graph) ([]string, *cpu.Program) {
	t.Helper()
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	prog := p.(*cpu.Program)
	var fused []string
	for _, k := range prog.Kernels() {
		if strings.HasPrefix(k, "Fused") {
			fused = append(fused, k)
		}
	}
	slices.Sort(fused)
	return fused, prog
}

// CheckPyTorchExport imports each testdata/<file>.onnx (the variant's model as
// torch.onnx.export wrote it, gen_fixtures.py --onnx) and fails unless it compiles on the
// CPU backend to the same fused kernels as zoo's own graph of the same config and seed (the
// fixture's), less gaps (fused kernels zoo's graph has and the export does not yet, by
// name and count), plus extra (fused kernels the export has beyond zoo's graph: chains PyTorch
// writes in several ops where zoo writes one; the export fusing more or less fails), its
// fused outputs equal the
// imported graph's reference evaluation within 1e-4, and they equal PyTorch's (the
// fixture's hidden and logits) on valid positions within tol.
func (s Suite) CheckPyTorchExport(t *testing.T, fixture string, files []string, gaps, extra map[string]int, tol float64) {
	f := s.Load(t, fixture)
	cfg, seed := f.Config(t, s.Variant)
	own, err := s.Variant.Build(context.Background(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := FusedKernels(t, own)
	if len(all) == 0 {
		t.Fatalf("%s's own graph has no fused steps", s.Name())
	}
	left := maps.Clone(gaps)
	var want []string
	for _, k := range all {
		if left[k] > 0 {
			left[k]--
			continue
		}
		want = append(want, k)
	}
	for k, n := range left {
		if n > 0 {
			t.Fatalf("gap %s ×%d: %s's own graph has fewer %s steps", k, gaps[k], s.Name(), k)
		}
	}
	for k, n := range extra {
		for range n {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	mask := f.Get(t, "key_padding_mask")
	feeds := map[string]*tensor.Tensor{"tokens": f.Get(t, "tokens"), "key_padding_mask": mask}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name+".onnx"))
			if err != nil {
				t.Fatalf("read export (regenerate with %s --onnx): %v", f.Regenerate, err)
			}
			g, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			got, prog := FusedKernels(t, g)
			if !slices.Equal(got, want) {
				t.Errorf("fused kernels %v, want %s's own less gaps %v plus %v: %v; report:\n%s", got, s.Name(), gaps, extra, want, prog.Report())
			}
			out, err := prog.Run(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := g.Eval(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []string{"hidden", "logits"} {
				if out[o] == nil || ref[o] == nil || !tensor.SameShape(out[o].Shape, ref[o].Shape) {
					t.Fatalf("%s: fused %v, reference %v", o, out[o], ref[o])
				}
				if d := MaxDiff(out[o], ref[o], ref[o].Len()); !(d <= 1e-4) {
					t.Errorf("%s: fused and reference differ by %g", o, d)
				}
				if d, at := CompareValid(t, out[o], f.Get(t, o), mask); !(d <= tol) {
					t.Errorf("%s differs from PyTorch by %.3g at %v", o, d, at)
				}
			}
		})
	}
}
