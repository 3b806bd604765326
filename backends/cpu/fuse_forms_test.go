package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// attnForm builds one multi-head attention block over x (B, n, d) with key-padding input
// pad (B, n), written one of the ways graphs write it. Each returns the block's output
// (B, n, d).
type attnForm struct {
	name string
	// build writes the block; lin writes a linear layer of x (d → d).
	build func(b *graph.Builder, x, pad string, lin func(string) string) string
}

const formH, formDK = 3, 12 // dk 12: √dk is no power of two, so scale placement matters in the last bits

// formSplit is zoo's head split (B, n, d) → (B, h, n, dk) and formMerge its inverse.
func formSplit(b *graph.Builder, x string) string {
	return b.Transpose(b.Reshape(x, 0, 0, formH, formDK), 0, 2, 1, 3)
}

func formMerge(b *graph.Builder, x string) string {
	return b.Reshape(b.Transpose(x, 0, 2, 1, 3), 0, 0, formH*formDK)
}

// negInfBias is zoo's key-padding bias (B, 1, 1, n): -inf at padding.
func negInfBias(b *graph.Builder, pad string) string {
	return b.Unsqueeze(b.Where(pad, b.ConstFloat(float32(math.Inf(-1))), b.ConstFloat(0)), 1, 2)
}

func attnForms() []attnForm {
	sq := float32(math.Sqrt(formDK))
	kt := func(b *graph.Builder, k string) string { return b.Transpose(k, 0, 1, 3, 2) }
	return []attnForm{
		{"div-scores", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			q, k, v := formSplit(b, lin(x)), formSplit(b, lin(x)), formSplit(b, lin(x))
			s := b.Add(b.Div(b.MatMul(q, kt(b, k)), b.ConstFloat(sq)), negInfBias(b, pad))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"mul-scores-bias-first", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			q, k, v := formSplit(b, lin(x)), formSplit(b, lin(x)), formSplit(b, lin(x))
			s := b.Add(negInfBias(b, pad), b.Mul(b.ConstFloat(1/sq), b.MatMul(q, kt(b, k))))
			return formMerge(b, b.MatMul(b.Softmax(s, 3), v))
		}},
		{"scale-on-q", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			q := b.Mul(formSplit(b, lin(x)), b.ConstFloat(1/sq))
			k, v := formSplit(b, lin(x)), formSplit(b, lin(x))
			s := b.Add(b.MatMul(q, kt(b, k)), negInfBias(b, pad))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"scale-on-k-before-transpose", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			q, v := formSplit(b, lin(x)), formSplit(b, lin(x))
			k := b.Div(formSplit(b, lin(x)), b.ConstFloat(sq))
			s := b.Where(b.Unsqueeze(pad, 1, 2), b.ConstFloat(float32(math.Inf(-1))), b.MatMul(q, kt(b, k)))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"sqrt-split-on-q-and-kt", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			c := b.ConstFloat(float32(math.Pow(formDK, -0.25)))
			q := b.Mul(formSplit(b, lin(x)), c)
			k := b.Mul(kt(b, formSplit(b, lin(x))), c)
			v := formSplit(b, lin(x))
			s := b.Add(b.MatMul(q, k), negInfBias(b, pad))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"temperature-per-head", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			q, k, v := formSplit(b, lin(x)), formSplit(b, lin(x)), formSplit(b, lin(x))
			temp, _ := tensor.FromFloat32([]float32{0.5, 1, 2.5}, 1, formH, 1, 1)
			s := b.Div(b.MatMul(q, kt(b, k)), b.ConstFloat(sq))
			s = b.Add(b.Mul(s, b.Const(temp)), negInfBias(b, pad))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"runtime-sqrt-dk", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			q, k, v := formSplit(b, lin(x)), formSplit(b, lin(x)), formSplit(b, lin(x))
			dk := b.Op("Cast", []string{b.Slice(b.Shape(q), b.ConstInts(3), b.ConstInts(4), b.ConstInts(0))}, graph.Attrs{"to": graph.Int(int64(tensor.Float32))})
			s := b.Div(b.MatMul(q, kt(b, k)), b.Op("Sqrt", []string{dk}, nil))
			s = b.Add(s, negInfBias(b, pad))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"hf-extended-mask", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			// (1 - keep) · -10000 added to the scores, keep = 1 - pad as float
			q, k, v := formSplit(b, lin(x)), formSplit(b, lin(x)), formSplit(b, lin(x))
			padf := b.Op("Cast", []string{b.Unsqueeze(pad, 1, 2)}, graph.Attrs{"to": graph.Int(int64(tensor.Float32))})
			keep := b.Sub(b.ConstFloat(1), padf)
			ext := b.Mul(b.Sub(b.ConstFloat(1), keep), b.ConstFloat(-10000))
			s := b.Add(b.Div(b.MatMul(q, kt(b, k)), b.ConstFloat(sq)), ext)
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"sub-mask-and-mul-keep", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			// scores·keep − pad·1e9: a Mul by the keep mask and a Sub of the padding bias
			q, k, v := formSplit(b, lin(x)), formSplit(b, lin(x)), formSplit(b, lin(x))
			padf := b.Op("Cast", []string{b.Unsqueeze(pad, 1, 2)}, graph.Attrs{"to": graph.Int(int64(tensor.Float32))})
			keep := b.Sub(b.ConstFloat(1), padf)
			s := b.Mul(keep, b.Div(b.MatMul(q, kt(b, k)), b.ConstFloat(sq)))
			s = b.Sub(s, b.Mul(padf, b.ConstFloat(1e9)))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"k-split-transposed-at-once", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			// Kᵀ (B, h, dk, n) straight from (B, n, h, dk) with perm (0, 2, 3, 1)
			q, v := formSplit(b, lin(x)), formSplit(b, lin(x))
			k := b.Transpose(b.Reshape(lin(x), 0, 0, formH, formDK), 0, 2, 3, 1)
			s := b.Add(b.Div(b.MatMul(q, k), b.ConstFloat(sq)), negInfBias(b, pad))
			return formMerge(b, b.MatMul(b.Softmax(s, -1), v))
		}},
		{"grouped-query", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			// the gqa variant's layout: the formH query heads share one key/value head, folded
			// into the rows of one (B, 1, formH·n, dk) matrix and unfolded after
			q := b.Transpose(b.Reshape(lin(x), 0, 0, 1, formH, formDK), 0, 2, 3, 1, 4) // (B, 1, h, n, dk)
			q = b.Reshape(q, 0, 1, -1, formDK)
			kv := func() string {
				head := b.Slice(lin(x), b.ConstInts(0), b.ConstInts(formDK), b.ConstInts(2))
				return b.Transpose(b.Reshape(head, 0, 0, 1, formDK), 0, 2, 1, 3) // (B, 1, n, dk)
			}
			s := b.Add(b.Div(b.MatMul(q, kt(b, kv())), b.ConstFloat(sq)), negInfBias(b, pad))
			y := b.Reshape(b.MatMul(b.Softmax(s, -1), kv()), 0, 1, formH, -1, formDK)
			return b.Reshape(b.Transpose(y, 0, 3, 1, 2, 4), 0, 0, formH*formDK)
		}},
		{"pytorch-batch-heads", func(b *graph.Builder, x, pad string, lin func(string) string) string {
			// PyTorch's layout: (n, B·h, dk) heads, Q scaled first, 3-D products, softmax axis 2
			xt := b.Transpose(x, 1, 0, 2)                                                               // (n, B, d)
			split := func(y string) string { return b.Transpose(b.Reshape(y, 0, -1, formDK), 1, 0, 2) } // (B·h, n, dk)
			q := b.Mul(split(lin(xt)), b.ConstFloat(1/sq))
			kT := b.Transpose(b.Reshape(lin(xt), 0, -1, formDK), 1, 2, 0) // (B·h, dk, n)
			v := split(lin(xt))
			// the mask (B, n) → (B, 1, 1, n) → (B, h, 1, n) → (B·h, 1, n)
			nOf := b.Slice(b.Shape(x), b.ConstInts(1), b.ConstInts(2), b.ConstInts(0))
			bOf := b.Slice(b.Shape(x), b.ConstInts(0), b.ConstInts(1), b.ConstInts(0))
			cat := func(parts ...string) string { return b.Op("Concat", parts, graph.Attrs{"axis": graph.Int(0)}) }
			wide := b.Op("Expand", []string{negInfBias(b, pad), cat(bOf, b.ConstInts(formH, 1), nOf)}, nil)
			bias := b.Op("Reshape", []string{wide, cat(b.ConstInts(-1, 1), nOf)}, nil)
			s := b.Add(b.MatMul(q, kT), bias)
			o := b.Transpose(b.MatMul(b.Softmax(s, 2), v), 1, 0, 2) // (n, B·h, dk)
			return b.Transpose(b.Reshape(o, 0, -1, formH*formDK), 1, 0, 2)
		}},
	}
}

// formGraph is x → attention block (in the form's writing, with linear layers written as
// MatMul by Wᵀ + bias, MatMul alone, Add(bias, MatMul) or Gemm) → output projection. Every
// node name is then replaced by a meaningless one: matching must not depend on names.
func formGraph(t *testing.T, f attnForm, linStyle int, r *rand.Rand) *graph.Graph {
	t.Helper()
	const d = formH * formDK
	b := graph.NewBuilder("form")
	x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(d))
	pad := b.Input("pad", tensor.Bool, graph.Sym("b"), graph.Sym("n"))
	lin := func(y string) string {
		w, bias := randT(r, d, d), randT(r, d)
		for i := range w.F32 {
			w.F32[i] /= float32(math.Sqrt(d)) // keep activations O(1), as trained layers do
		}
		switch linStyle {
		case 1:
			return b.MatMul(y, b.Const(w))
		case 2:
			return b.Add(b.Const(bias), b.MatMul(y, b.Transpose(b.Const(w), 1, 0)))
		case 3:
			// Gemm on the rows, as PyTorch exports a linear layer of a flattened input
			flat := b.Reshape(y, -1, d)
			g := b.Op("Gemm", []string{flat, b.Const(w), b.Const(bias)}, graph.Attrs{"transB": graph.Int(1)})
			return b.Op("Reshape", []string{g, b.Shape(y)}, nil)
		}
		return b.Add(b.MatMul(y, b.Transpose(b.Const(w), 1, 0)), b.Const(bias))
	}
	b.Output("y", lin(f.build(b, x, pad, lin)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range g.Nodes {
		n.Name = fmt.Sprintf("n%d", r.Intn(1000)*100+i)
	}
	return g
}

// TestFusedAttentionForms checks that attention is fused by what it computes: every form
// (scale on the scores, on Q, on K, split over both, per head, at run time; masks added,
// subtracted, multiplied, as Where; zoo's and PyTorch's head layouts) and every way of
// writing the linear layers compiles to one FusedAttention step and fused linear steps,
// with no softmax or score product left, and gives what the graph's reference evaluation
// gives, on lengths 1, odd and above the kernel's key block, with padded keys.
func TestFusedAttentionForms(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	for _, f := range attnForms() {
		for ls, style := range []string{"matmul-add", "matmul", "add-bias-first", "gemm"} {
			if style == "gemm" && f.name != "div-scores" && f.name != "pytorch-batch-heads" {
				continue
			}
			t.Run(f.name+"/"+style, func(t *testing.T) {
				g := formGraph(t, f, ls, r)
				p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				prog := p.(*cpu.Program)
				rep := prog.Report()
				if rep.Fusions["attention"] != 1 {
					t.Fatalf("fusions %v; report:\n%s", rep.Fusions, rep)
				}
				ks := prog.Kernels()
				for _, op := range []string{"Softmax", "MatMul", "Gemm"} {
					if slices.Contains(ks, op) {
						t.Fatalf("an unfused %s is left: steps %v", op, ks)
					}
				}
				for _, sh := range []struct{ batch, n int }{{1, 1}, {2, 7}, {2, 515}} {
					in := map[string]*tensor.Tensor{"x": randT(r, sh.batch, sh.n, formH*formDK)}
					mask, _ := tensor.New(tensor.Bool, sh.batch, sh.n)
					for j := sh.n / 2; j < sh.n && sh.batch > 1; j++ {
						mask.Bool[sh.n+j] = j > 0 // the second sequence is padded after its first half
					}
					in["pad"] = mask
					got, err := prog.Run(context.Background(), in)
					if err != nil {
						t.Fatal(err)
					}
					want, err := g.Eval(context.Background(), in)
					if err != nil {
						t.Fatal(err)
					}
					if d, ok := maxDiff(got["y"], want["y"]); !ok || d > 1e-5 {
						t.Errorf("b=%d n=%d: fused and reference differ by %g (NaN placement ok: %v)", sh.batch, sh.n, d, ok)
					}
				}
			})
		}
	}
}

// TestFusionReportSaysWhy checks that a candidate that does not fuse is in the report
// with the reason: here the scores pass through a Relu before the softmax.
func TestFusionReportSaysWhy(t *testing.T) {
	b := graph.NewBuilder("relu-scores")
	q := b.Input("q", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(8))
	k := b.Input("k", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(8))
	s := b.Relu(b.MatMul(q, b.Transpose(k, 0, 2, 1)))
	b.Output("y", b.MatMul(b.Softmax(s, -1), k), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.(*cpu.Program).Report()
	var notes []cpu.FusionNote
	for _, n := range rep.Notes {
		if n.Pattern == "attention" {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || notes[0].Fused != "" || !containsAll(notes[0].Why, "Relu") {
		t.Fatalf("attention notes %+v, want one unfused naming the Relu", notes)
	}
	if txt := p.(backends.CompileReporter).CompileReport(); !containsAll(txt, "not fused: attention", "Relu", "steps:") {
		t.Fatalf("report text:\n%s", txt)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestRelBiasFallback checks the in-kernel ALiBi bias where the positions come from a length
// fed at run time: at the score matrix's length the bias is computed in the kernel (its
// steps gone from the program), at another length that still broadcasts (1) the fused step
// runs its fallback, which rebuilds the bias; both agree with the reference evaluation.
func TestRelBiasFallback(t *testing.T) {
	b := graph.NewBuilder("alibi")
	dims := []graph.Dim{graph.Sym("b"), graph.Fixed(2), graph.Sym("n"), graph.Fixed(8)}
	q := b.Input("q", tensor.Float32, dims...)
	k := b.Input("k", tensor.Float32, dims...)
	v := b.Input("v", tensor.Float32, dims...)
	m := b.Input("len", tensor.Int64)
	pos := b.Op("Range", []string{b.Const(tensor.Scalar64(0)), m, b.Const(tensor.Scalar64(1))}, nil)
	dist := b.Op("Abs", []string{b.Sub(b.Unsqueeze(pos, 0), b.Unsqueeze(pos, 1))}, nil)
	slopes, _ := tensor.FromFloat32([]float32{-0.5, -0.25}, 2, 1, 1)
	bias := b.Mul(b.Op("Cast", []string{dist}, graph.Attrs{"to": graph.Int(int64(tensor.Float32))}), b.Const(slopes))
	s := b.Add(b.Div(b.MatMul(q, b.Transpose(k, 0, 1, 3, 2)), b.ConstFloat(float32(math.Sqrt(8)))), bias)
	b.Output("y", b.MatMul(b.Softmax(s, -1), v), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	prog := p.(*cpu.Program)
	if fu := prog.Fusions(); fu["attention+relbias"] != 1 || slices.Contains(prog.Kernels(), "Abs") {
		t.Fatalf("fusions %v, steps %v", fu, prog.Kernels())
	}
	r := rand.New(rand.NewSource(31))
	for _, c := range []struct{ n, m int }{{1, 1}, {9, 9}, {600, 600}, {9, 1}} {
		in := map[string]*tensor.Tensor{"q": randT(r, 2, 2, c.n, 8), "k": randT(r, 2, 2, c.n, 8), "v": randT(r, 2, 2, c.n, 8), "len": tensor.Scalar64(int64(c.m))}
		got, err := prog.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := g.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := maxDiff(got["y"], want["y"]); !ok || d > 1e-5 {
			t.Errorf("n %d, len %d: fused and reference differ by %g", c.n, c.m, d)
		}
	}
}

// TestGroupedQueryRows checks that grouped-query attention's row merges are read and written
// in place: the fused program keeps no Transpose, and gives, bit for bit, what it gives
// when the merged Q must be materialized (kept as an intermediate, so the kernel reads the
// copy and the output goes through its own Transpose), in fp32 and in int8-attention, on
// lengths whose segments of rows end inside a block of the kernel (n 200: blocks of 128),
// and whatever the thread count.
func TestGroupedQueryRows(t *testing.T) {
	r := rand.New(rand.NewSource(29))
	var form attnForm
	for _, f := range attnForms() {
		if f.name == "grouped-query" {
			form = f
		}
	}
	g := formGraph(t, form, 0, r)
	var merged string // Q's Transpose to (B, 1, h, n, dk)
	for _, n := range g.Nodes {
		if perm, _ := n.IntList("perm"); n.Op == "Transpose" && slices.Equal(perm, []int64{0, 2, 3, 1, 4}) {
			merged = n.Outputs[0]
		}
	}
	in := map[string]*tensor.Tensor{"x": randT(r, 2, 200, formH*formDK)}
	pad, _ := tensor.New(tensor.Bool, 2, 200)
	for j := 150; j < 200; j++ {
		pad.Bool[200+j] = true
	}
	in["pad"] = pad
	for _, prec := range []string{"fp32", "int8-attention"} {
		run := func(threads int, keep []string) (*tensor.Tensor, []string) {
			p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads, Precision: prec, KeepIntermediates: keep})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			return out["y"], p.(*cpu.Program).Kernels()
		}
		got, ks := run(2, nil)
		if slices.Contains(ks, "Transpose") || !slices.Contains(ks, "FusedAttention") {
			t.Fatalf("%s: steps %v, want a FusedAttention and no Transpose", prec, ks)
		}
		copied, ks := run(2, []string{merged})
		if !slices.Contains(ks, "Transpose") {
			t.Fatalf("%s: with the merged Q kept, steps %v have no Transpose", prec, ks)
		}
		if !same(got.F32, copied.F32) {
			t.Fatalf("%s: in place and through the copies differ", prec)
		}
		for _, threads := range []int{1, 3} {
			if o, _ := run(threads, nil); !same(o.F32, got.F32) {
				t.Fatalf("%s: %d threads differ from 2", prec, threads)
			}
		}
	}
}
