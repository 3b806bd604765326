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

// kzDims are the heads, head width and random features of a kernelized-attention graph.
type kzDims struct{ h, dk, m int }

// kzSmall has 29 features: not a multiple of any tile width; kzBase is the base preset's.
var kzSmall, kzBase = kzDims{3, 12, 29}, kzDims{8, 64, 266}

// kzForm is one way a graph writes kernelized attention over q, k, v (B, n, h·dk) and the
// key padding pad (B, n); it returns (B, h, n, dk) or, merged, (B, n, h·dk).
type kzForm struct {
	name string
	// fusions are the counts the compiled program must report.
	fusions map[string]int
	build   func(b *graph.Builder, d kzDims, q, k, v, pad, proj string) string
}

func kzSplit(b *graph.Builder, d kzDims, x string) string {
	return b.Transpose(b.Reshape(x, 0, 0, int64(d.h), int64(d.dk)), 0, 2, 1, 3)
}

func kzMerge(b *graph.Builder, d kzDims, x string) string {
	return b.Reshape(b.Transpose(x, 0, 2, 1, 3), 0, 0, int64(d.h*d.dk))
}

// favorFeatures is performer's softmax_kernel as variants/performer writes it; pad "" is a
// query, unstable a causal model's key.
func favorFeatures(b *graph.Builder, d kzDims, x, proj, pad string, unstable bool) string {
	norm := math.Pow(float64(d.dk), -0.25)
	dd := b.MatMul(b.Mul(x, b.ConstFloat(float32(norm))), b.Transpose(proj, 1, 0))
	sq := b.Op("ReduceSum", []string{b.Mul(x, x), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(1)})
	diag := b.Mul(b.Div(sq, b.ConstFloat(2)), b.ConstFloat(float32(norm*norm)))
	var stab string
	switch {
	case unstable:
		stab = b.ConstFloat(0)
	case pad == "":
		stab = b.Op("ReduceMax", []string{dd}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(1)})
	default:
		valid := b.Where(pad, b.ConstFloat(float32(math.Inf(-1))), dd)
		stab = b.Op("ReduceMax", []string{valid}, graph.Attrs{"axes": graph.Ints(2, 3), "keepdims": graph.Int(1)})
	}
	e := b.Op("Exp", []string{b.Sub(b.Sub(dd, diag), stab)}, nil)
	phi := b.Mul(b.Add(e, b.ConstFloat(1e-4)), b.ConstFloat(float32(math.Pow(float64(d.m), -0.5))))
	if pad != "" {
		phi = b.Where(pad, b.ConstFloat(0), phi)
	}
	return phi
}

func kzForms() []kzForm {
	ksumT := func(b *graph.Builder, fk string) string {
		return b.Transpose(b.Op("ReduceSum", []string{fk, b.ConstInts(2)}, graph.Attrs{"keepdims": graph.Int(1)}), 0, 1, 3, 2)
	}
	return []kzForm{
		{"performer", map[string]int{"random-features": 2, "linear-attention": 1}, func(b *graph.Builder, d kzDims, q, k, v, pad, proj string) string {
			p4 := b.Unsqueeze(pad, 1, 3)
			fq := favorFeatures(b, d, kzSplit(b, d, q), proj, "", false)
			fk := favorFeatures(b, d, kzSplit(b, d, k), proj, p4, false)
			dinv := b.Div(b.ConstFloat(1), b.MatMul(fq, ksumT(b, fk)))
			ctx := b.MatMul(b.Transpose(fk, 0, 1, 3, 2), kzSplit(b, d, v))
			return kzMerge(b, d, b.Mul(b.MatMul(fq, ctx), dinv))
		}},
		{"performer-unstable-keys-div", map[string]int{"random-features": 2, "linear-attention": 1}, func(b *graph.Builder, d kzDims, q, k, v, pad, proj string) string {
			fq := favorFeatures(b, d, kzSplit(b, d, q), proj, "", false)
			fk := favorFeatures(b, d, kzSplit(b, d, k), proj, "", true)
			den := b.MatMul(fq, ksumT(b, fk))
			return b.Div(b.MatMul(fq, b.MatMul(b.Transpose(fk, 0, 1, 3, 2), kzSplit(b, d, v))), den)
		}},
		{"linear", map[string]int{"elu-feature": 2, "linear-attention": 1}, func(b *graph.Builder, d kzDims, q, k, v, pad, proj string) string {
			keep := b.Unsqueeze(b.Where(pad, b.ConstFloat(0), b.ConstFloat(1)), 1, 3)
			phi := func(t string) string {
				return b.Add(b.Op("Elu", []string{t}, graph.Attrs{"alpha": graph.Float(1)}), b.ConstFloat(1))
			}
			fq := phi(kzSplit(b, d, q))
			fk := b.Mul(phi(kzSplit(b, d, k)), keep)
			vm := b.Mul(kzSplit(b, d, v), keep)
			kv := b.MatMul(b.Transpose(fk, 0, 1, 3, 2), vm)
			z := b.Div(b.ConstFloat(1), b.Add(b.MatMul(fq, ksumT(b, fk)), b.ConstFloat(1e-6)))
			return kzMerge(b, d, b.Mul(b.MatMul(fq, kv), z))
		}},
		{"linear-eps-first-alpha", map[string]int{"elu-feature": 2, "linear-attention": 1}, func(b *graph.Builder, d kzDims, q, k, v, pad, proj string) string {
			phi := func(t string) string {
				return b.Add(b.ConstFloat(1.5), b.Op("Elu", []string{t}, graph.Attrs{"alpha": graph.Float(0.5)}))
			}
			fq, fk := phi(kzSplit(b, d, q)), phi(kzSplit(b, d, k))
			kv := b.MatMul(b.Transpose(fk, 0, 1, 3, 2), kzSplit(b, d, v))
			z := b.Div(b.ConstFloat(1), b.Add(b.ConstFloat(1e-6), b.MatMul(fq, ksumT(b, fk))))
			return b.Mul(z, b.MatMul(fq, kv))
		}},
	}
}

// kzGraph builds form f over fed q, k, v and pad, with the random features as a constant.
func kzGraph(t testing.TB, f kzForm, d kzDims, r *rand.Rand) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("kz-" + f.name)
	dims := []graph.Dim{graph.Sym("b"), graph.Sym("n"), graph.Fixed(int64(d.h * d.dk))}
	q := b.Input("q", tensor.Float32, dims...)
	k := b.Input("k", tensor.Float32, dims...)
	v := b.Input("v", tensor.Float32, dims...)
	pad := b.Input("pad", tensor.Bool, graph.Sym("b"), graph.Sym("n"))
	m := d.m
	if f.name[0] == 'l' {
		m = d.dk // linear attention's features are the head itself; proj is unused
	}
	proj := b.Const(randT(r, m, d.dk))
	b.Output("y", f.build(b, d, q, k, v, pad, proj), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func kzInputs(r *rand.Rand, d kzDims, batch, n int) map[string]*tensor.Tensor {
	w := d.h * d.dk
	in := map[string]*tensor.Tensor{"q": randT(r, batch, n, w), "k": randT(r, batch, n, w), "v": randT(r, batch, n, w)}
	pad, _ := tensor.New(tensor.Bool, batch, n)
	for j := n / 2; j < n && batch > 1; j++ {
		pad.Bool[n+j] = j > 0 // the second sequence is padded after its first half
	}
	in["pad"] = pad
	return in
}

// TestKernelizedFusionForms checks that each form of kernelized attention fuses completely
// (no MatMul, Exp or Elu left) and that the fused program matches the graph's reference
// evaluation on shapes around the kernels' row block (96), with padding, and n = 1.
func TestKernelizedFusionForms(t *testing.T) {
	r := rand.New(rand.NewSource(41))
	for _, f := range kzForms() {
		t.Run(f.name, func(t *testing.T) {
			g := kzGraph(t, f, kzSmall, r)
			p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			prog := p.(*cpu.Program)
			rep := prog.Report()
			for k, n := range f.fusions {
				if rep.Fusions[k] != n {
					t.Fatalf("fusions %v, want %s %d; report:\n%s", rep.Fusions, k, n, rep)
				}
			}
			for _, op := range []string{"MatMul", "Exp", "Elu", "ReduceMax"} {
				if slices.Contains(prog.Kernels(), op) {
					t.Fatalf("an unfused %s is left: %v", op, prog.Kernels())
				}
			}
			for _, sh := range [][2]int{{1, 1}, {2, 7}, {2, 97}, {1, 300}} {
				in := kzInputs(r, kzSmall, sh[0], sh[1])
				got, err := prog.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := g.Eval(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if d, ok := maxDiff(got["y"], want["y"]); !ok || d > 2e-5 {
					t.Errorf("b=%d n=%d: fused and reference differ by %g (NaN placement ok: %v)", sh[0], sh[1], d, ok)
				}
			}
		})
	}
}

// TestKernelizedNotFusedSaysWhy checks that a feature map whose product is also read
// elsewhere (as a training graph's backward reads it) and a linear attention whose
// numerator is an output stay unfused, with the reasons in the report, and still compute
// the reference.
func TestKernelizedNotFusedSaysWhy(t *testing.T) {
	r := rand.New(rand.NewSource(43))
	b := graph.NewBuilder("kz-outputs")
	d := kzSmall
	x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Fixed(int64(d.h)), graph.Sym("n"), graph.Fixed(int64(d.dk)))
	proj := b.Const(randT(r, d.m, d.dk))
	dd := b.MatMul(x, b.Transpose(proj, 1, 0))
	stab := b.Op("ReduceMax", []string{dd}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(1)})
	phi := b.Op("Exp", []string{b.Sub(dd, stab)}, nil)
	num := b.MatMul(phi, b.MatMul(b.Transpose(phi, 0, 1, 3, 2), x))
	ksum := b.Transpose(b.Op("ReduceSum", []string{phi, b.ConstInts(2)}, graph.Attrs{"keepdims": graph.Int(1)}), 0, 1, 3, 2)
	b.Output("y", b.Div(num, b.MatMul(phi, ksum)), tensor.Float32)
	b.Output("dd", dd, tensor.Float32)
	b.Output("num", num, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	prog := p.(*cpu.Program)
	rep := prog.Report()
	why := map[string]string{}
	for _, n := range rep.Notes {
		if n.Fused == "" {
			why[n.Pattern] = n.Why
		}
	}
	if !containsAll(why["random-features"], "also read outside") || !containsAll(why["linear-attention"], "numerator", "output") {
		t.Fatalf("notes %+v", rep.Notes)
	}
	if rep.Fusions["random-features"]+rep.Fusions["linear-attention"] != 0 {
		t.Fatalf("fusions %v", rep.Fusions)
	}
	in := map[string]*tensor.Tensor{"x": randT(r, 2, d.h, 9, d.dk)}
	got, err := prog.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := g.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := maxDiff(got["y"], want["y"]); !ok || d > 1e-5 {
		t.Errorf("differ by %g", d)
	}
}

// BenchmarkKernelized times one kernelized attention block of each form at 8 heads of 64
// (performer: 266 features), n = 512, batch 1, 2 threads, fused and unfused.
func BenchmarkKernelized(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, f := range kzForms()[:3] {
		for _, nofuse := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/nofusion=%v", f.name, nofuse), func(b *testing.B) {
				g := kzGraph(b, f, kzBase, r)
				p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, NoFusion: nofuse})
				if err != nil {
					b.Fatal(err)
				}
				in := kzInputs(r, kzBase, 1, 512)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := p.Run(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestKernelizedFallback checks that a fused feature map whose post-chain operand turns out
// at run time not to be a per-row value (here a full (b, n, d) tensor) runs its original
// steps and still computes the reference, as does one whose operand is per-row.
func TestKernelizedFallback(t *testing.T) {
	r := rand.New(rand.NewSource(47))
	b := graph.NewBuilder("kz-fallback")
	x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(8))
	s := b.Input("s", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Sym("d"))
	phi := b.Add(b.Op("Elu", []string{x}, graph.Attrs{"alpha": graph.Float(1)}), b.ConstFloat(1))
	b.Output("y", b.Mul(phi, s), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if fu := p.(*cpu.Program).Fusions(); fu["elu-feature"] != 1 {
		t.Fatalf("fusions %v", fu)
	}
	for _, d := range []int{8, 1} { // a full operand (fallback), then a per-row one (fast path)
		in := map[string]*tensor.Tensor{"x": randT(r, 2, 5, 8), "s": randT(r, 2, 5, d)}
		got, err := p.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := g.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if dd, ok := maxDiff(got["y"], want["y"]); !ok || dd > 1e-5 {
			t.Errorf("operand width %d: differ by %g", d, dd)
		}
	}
}

// TestKernelizedOperandInsidePattern checks that a feature map whose post chain multiplies
// by the product itself (an operand the pattern computes) is not fused, says why, and still
// computes the reference.
func TestKernelizedOperandInsidePattern(t *testing.T) {
	r := rand.New(rand.NewSource(53))
	b := graph.NewBuilder("kz-inside")
	x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(6))
	dd := b.MatMul(x, b.Const(randT(r, 6, 7)))
	stab := b.Op("ReduceMax", []string{dd}, graph.Attrs{"axes": graph.Ints(-1), "keepdims": graph.Int(1)})
	b.Output("y", b.Mul(b.Op("Exp", []string{b.Sub(dd, stab)}, nil), dd), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.(*cpu.Program).Report()
	if rep.Fusions["random-features"] != 0 || !strings.Contains(rep.String(), "computed inside the pattern") {
		t.Fatalf("report:\n%s", rep)
	}
	in := map[string]*tensor.Tensor{"x": randT(r, 2, 3, 6)}
	got, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := g.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := maxDiff(got["y"], want["y"]); !ok || d > 1e-5 {
		t.Errorf("differ by %g", d)
	}
}
