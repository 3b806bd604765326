package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// windowGraph is block-sparse attention over sliding windows of w key blocks: queries
// q (B, h, L, b, dk), keys and values as blocks x, y (B, h, N, b, dk) and the window count
// L fed as an int64 (1,) input; each query block attends the Concat of the Slices
// x[t : t + L] (t < w) along the block axis, with an additive bias (B, 1, L, 1, w·b). Node
// names are replaced by meaningless ones.
func windowGraph(t *testing.T, w int, endsLFirst bool, r *rand.Rand) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("window")
	blk := []graph.Dim{graph.Sym("B"), graph.Fixed(2), graph.Sym("N"), graph.Sym("b"), graph.Fixed(8)}
	q := b.Input("q", tensor.Float32, graph.Sym("B"), graph.Fixed(2), graph.Sym("L"), graph.Sym("b"), graph.Fixed(8))
	x := b.Input("x", tensor.Float32, blk...)
	y := b.Input("y", tensor.Float32, blk...)
	bias := b.Input("bias", tensor.Float32, graph.Sym("B"), graph.Fixed(1), graph.Sym("L"), graph.Fixed(1), graph.Sym("wb"))
	l := b.Input("len", tensor.Int64, graph.Fixed(1))
	win := func(z string) string {
		parts := make([]string, w)
		for t := range parts {
			start := b.ConstInts(int64(t))
			end := b.Add(start, l)
			if endsLFirst {
				end = b.Add(l, start)
			}
			parts[t] = b.Slice(z, start, end, b.ConstInts(2))
		}
		return b.Op("Concat", parts, graph.Attrs{"axis": graph.Int(3)})
	}
	kt := b.Transpose(win(x), 0, 1, 2, 4, 3)
	s := b.Add(b.Div(b.MatMul(q, kt), b.ConstFloat(float32(math.Sqrt(8)))), bias)
	s = b.Op("Concat", []string{s}, graph.Attrs{"axis": graph.Int(4)})
	b.Output("o", b.MatMul(b.Softmax(s, -1), win(y)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range g.Nodes {
		n.Name = fmt.Sprintf("w%d", r.Intn(1000)*100+i)
	}
	return g
}

// TestWindowAttention checks that sliding windows of key blocks are read in place by the
// fused attention step (no Concat, Slice or MatMul left) and give what the graph's reference
// evaluation gives, for windows of 1, 2 and 3 blocks, blocks of 1, odd and not a multiple of
// the GEMM tile, a padded window (N > L + w − 1) and a masked key; and that a window count
// the blocks do not hold makes the fused step fall back and fail as the graph does.
func TestWindowAttention(t *testing.T) {
	r := rand.New(rand.NewSource(51))
	for _, w := range []int{1, 2, 3} {
		for _, lFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("w%d_lfirst%v", w, lFirst), func(t *testing.T) {
				g := windowGraph(t, w, lFirst, r)
				p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				prog := p.(*cpu.Program)
				if fu := prog.Fusions(); fu["attention"] != 1 {
					t.Fatalf("fusions %v; report:\n%s", fu, prog.Report())
				}
				for _, k := range []string{"Concat", "Slice", "MatMul", "Softmax"} {
					if slices.Contains(prog.Kernels(), k) {
						t.Fatalf("a %s step is left: %v", k, prog.Kernels())
					}
				}
				for _, c := range []struct{ batch, l, extra, blk int }{{1, 1, 0, 1}, {2, 5, 0, 7}, {1, 9, 2, 13}, {2, 3, 1, 64}} {
					n := c.l + w - 1 + c.extra
					in := map[string]*tensor.Tensor{
						"q": randT(r, c.batch, 2, c.l, c.blk, 8), "x": randT(r, c.batch, 2, n, c.blk, 8), "y": randT(r, c.batch, 2, n, c.blk, 8),
						"bias": randT(r, c.batch, 1, c.l, 1, w*c.blk),
					}
					in["bias"].F32[0] = float32(math.Inf(-1))
					in["len"], _ = tensor.FromInt64([]int64{int64(c.l)}, 1)
					got, err := prog.Run(context.Background(), in)
					if err != nil {
						t.Fatal(err)
					}
					want, err := g.Eval(context.Background(), in)
					if err != nil {
						t.Fatal(err)
					}
					if d, ok := maxDiff(got["o"], want["o"]); !ok || d > 1e-5 {
						t.Errorf("%+v: fused and reference differ by %g", c, d)
					}
				}
				if w > 1 {
					in := map[string]*tensor.Tensor{"q": randT(r, 1, 2, 4, 3, 8), "x": randT(r, 1, 2, 4, 3, 8), "y": randT(r, 1, 2, 4, 3, 8), "bias": randT(r, 1, 1, 4, 1, 3*w)}
					in["len"], _ = tensor.FromInt64([]int64{4}, 1)
					_, errFused := prog.Run(context.Background(), in)
					_, errGraph := g.Eval(context.Background(), in)
					if errFused == nil || errGraph == nil {
						t.Fatalf("a window past the blocks: fused error %v, graph error %v", errFused, errGraph)
					}
				}
			})
		}
	}
}

// TestWindowReportSaysWhy checks that scores concatenating two key sets under one softmax
// (block-sparse windows plus strided keys) stay unfused with the reason in the report.
func TestWindowReportSaysWhy(t *testing.T) {
	b := graph.NewBuilder("two-sets")
	dims := []graph.Dim{graph.Sym("b"), graph.Sym("n"), graph.Fixed(8)}
	q := b.Input("q", tensor.Float32, dims...)
	k := b.Input("k", tensor.Float32, dims...)
	kt := b.Transpose(k, 0, 2, 1)
	s := b.Op("Concat", []string{b.MatMul(q, kt), b.MatMul(q, kt)}, graph.Attrs{"axis": graph.Int(2)})
	b.Output("p", b.MatMul(b.Softmax(s, -1), b.Op("Concat", []string{k, k}, graph.Attrs{"axis": graph.Int(1)})), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.(*cpu.Program).Report()
	for _, n := range rep.Notes {
		if n.Pattern == "attention" {
			if n.Fused != "" || !containsAll(n.Why, "Concat", "2 score sets") {
				t.Fatalf("note %+v, want unfused naming the Concat of 2 score sets", n)
			}
			return
		}
	}
	t.Fatalf("no attention note: %+v", rep.Notes)
}

// TestWindowAttentionInt8 runs sliding windows of key blocks in int8-attention: within
// int8's error of the fp32 reference (per-position cosine at least 0.999, error under 10 %
// of the position's largest value: 8 channels) and the same bits for any thread count, for
// blocks that start on the int8 packs' column tiles (64, 32: the runs of keys the windows
// share are packed once) and blocks that do not (13, except on the pure-Go path, whose tiles
// are one column: each window packs its own keys). Then
// the shared packs' property: V's scale per channel comes from all of a parent's keys, so a
// channel that is 1000 times larger in the last block only is quantized at that scale in
// the first window too, which does not hold that block, and loses its values there; a
// window with its own pack keeps them.
func TestWindowAttentionInt8(t *testing.T) {
	r := rand.New(rand.NewSource(53))
	const w, l, dk = 3, 3, 8
	g := windowGraph(t, w, false, r)
	for _, blk := range []int{64, 32, 13} {
		n := l + w - 1
		in := map[string]*tensor.Tensor{
			"q": randT(r, 2, 2, l, blk, dk), "x": randT(r, 2, 2, n, blk, dk), "y": randT(r, 2, 2, n, blk, dk),
			"bias": randT(r, 2, 1, l, 1, w*blk),
		}
		in["len"], _ = tensor.FromInt64([]int64{l}, 1)
		run := func(prec string, threads int) *tensor.Tensor {
			p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads, Precision: prec})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			return out["o"]
		}
		ref := run("fp32", 2)
		got := run("int8-attention", 2)
		closeTo(t, fmt.Sprintf("blocks of %d", blk), got.F32, ref.F32, dk, 0.999, 0.1)
		for _, threads := range []int{1, 3} {
			if o := run("int8-attention", threads); !same(o.F32, got.F32) {
				t.Fatalf("blocks of %d: %d threads differ from 2", blk, threads)
			}
		}
		// channel 0 of V 1000 times larger in the last block of every (batch, head)
		y := in["y"].F32
		for m := 0; m < 2*2; m++ {
			last := (m*n + n - 1) * blk * dk
			for j := 0; j < blk; j++ {
				y[last+j*dk] *= 1000
			}
		}
		ref, got = run("fp32", 2), run("int8-attention", 2)
		worst := 0.0 // channel 0 of the first window's outputs
		for m := 0; m < 2*2; m++ {
			for i := 0; i < blk; i++ {
				at := (m*l*blk + i) * dk
				worst = max(worst, math.Abs(float64(got.F32[at]-ref.F32[at])))
			}
		}
		probe := gemm.PackBInt8(false, 4, 4, make([]float32, 16), 4) // the int8 path's tiles
		if shared := blk%probe.ColAlign() == 0 && blk%probe.Int8KStep() == 0; shared != (worst > 0.1) {
			t.Errorf("blocks of %d: the first window's channel 0 is off by %g; want more than 0.1 only where the windows share V's pack", blk, worst)
		}
	}
}
