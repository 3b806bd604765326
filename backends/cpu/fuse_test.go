package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// compileProgram compiles g on the CPU backend with opts, failing the test on an error.
func compileProgram(t testing.TB, g *graph.Graph, opts backends.Options) *cpu.Program {
	t.Helper()
	p, err := cpu.Backend{}.Compile(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*cpu.Program)
}

func compileBoth(t *testing.T, g *graph.Graph, opts backends.Options) (fused, plain *cpu.Program) {
	t.Helper()
	fused = compileProgram(t, g, opts)
	opts.NoFusion = true
	plain = compileProgram(t, g, opts)
	if n := len(plain.Fusions()); n != 0 {
		t.Fatalf("NoFusion program reports fusions %v", plain.Fusions())
	}
	return fused, plain
}

// maxDiff returns the largest absolute difference between a and b over the positions
// where valid (nil: all) holds, and whether NaNs sit in the same places.
func maxDiff(a, b *tensor.Tensor) (float64, bool) {
	d := 0.0
	for i := range a.F32 {
		x, y := float64(a.F32[i]), float64(b.F32[i])
		if math.IsNaN(x) || math.IsNaN(y) {
			if math.IsNaN(x) != math.IsNaN(y) {
				return math.Inf(1), false
			}
			continue
		}
		d = max(d, math.Abs(x-y))
	}
	return d, true
}

// symDims returns n symbolic dimensions named prefix0, prefix1, ….
func symDims(prefix string, n int) []graph.Dim {
	dims := make([]graph.Dim, n)
	for i := range dims {
		dims[i] = graph.Sym(fmt.Sprintf("%s%d", prefix, i))
	}
	return dims
}

// runBoth runs both programs on in and fails unless the fused one has every output of the
// unfused one, with the same shape; what names the case in the message.
func runBoth(t *testing.T, what string, fused, plain *cpu.Program, in map[string]*tensor.Tensor) (got, want map[string]*tensor.Tensor) {
	t.Helper()
	got, err := fused.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want, err = plain.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if g := got[name]; g == nil || !tensor.SameShape(g.Shape, w.Shape) {
			t.Fatalf("%s: output %s is %v fused, shape %v unfused", what, name, g, w.Shape)
		}
	}
	return got, want
}

func runAgree(t *testing.T, fused, plain *cpu.Program, in map[string]*tensor.Tensor, tol float64) map[string]*tensor.Tensor {
	t.Helper()
	a, b := runBoth(t, "agree", fused, plain, in)
	for name, want := range b {
		if want.DType != tensor.Float32 {
			continue
		}
		if d, ok := maxDiff(a[name], want); !ok || d > tol {
			t.Errorf("output %s: fused and unfused differ by %g (NaN placement ok: %v)", name, d, ok)
		}
	}
	return a
}

// runBitwise is runBoth that also fails unless every float32 output has the unfused bits.
func runBitwise(t *testing.T, what string, fused, plain *cpu.Program, in map[string]*tensor.Tensor) {
	t.Helper()
	got, want := runBoth(t, what, fused, plain, in)
	for name, w := range want {
		for i, v := range w.F32 {
			if g := got[name].F32[i]; math.Float32bits(g) != math.Float32bits(v) {
				t.Fatalf("%s: %s[%d] = %g fused, %g unfused", what, name, i, g, v)
			}
		}
	}
}

// TestFusionVanilla checks that the vanilla encoder (ReLU and GELU) fuses every linear
// layer and every attention block, and that fused and unfused programs agree within 1e-6
// on random lengths, padded batches and n = 1.
func TestFusionVanilla(t *testing.T) {
	for _, act := range []string{"relu", "gelu"} {
		g := vanillaBase(t, map[string]any{"layers": int64(2), "d_model": int64(64), "heads": int64(4), "d_ff": int64(128), "activation": act})
		fused, plain := compileBoth(t, g, backends.Options{})
		fu := fused.Fusions()
		// Per layer: Q, K and V are plain linears (run as one shared-input step), the FFN's
		// first takes the activation, and the output projection and the FFN's second take the
		// residual Add and the post-norm LayerNormalization; plus the final projection.
		if fu["attention"] != 2 || fu["linear+"+act] != 2 || fu["linear"] != 2*3+1 || fu["linear+residual+layernorm"] != 2*2 || fu["shared-input"] != 2 {
			t.Fatalf("%s: fusions %v, want 2 attention, 2 linear+%s, 7 linear, 4 linear+residual+layernorm, 2 shared-input", act, fu, act)
		}
		r := rand.New(rand.NewSource(3))
		for _, sh := range []struct{ batch, n int }{{1, 1}, {1, 7}, {2, 33}, {3, 130}, {1, 600}} {
			in := encoderInputs(sh.batch, sh.n)
			for i := range in[variant.InputTokens].I64 {
				in[variant.InputTokens].I64[i] = 1 + r.Int63n(256)
			}
			// padding: the last sequence keeps only its first key; another loses a third
			mask := in[variant.InputKeyPadding].Bool
			for b := 1; b < sh.batch; b++ {
				for j := 0; j < sh.n; j++ {
					mask[b*sh.n+j] = (b == sh.batch-1 && j > 0) || (b != sh.batch-1 && j >= 2*sh.n/3)
				}
			}
			t.Run(fmt.Sprintf("%s/b=%d/n=%d", act, sh.batch, sh.n), func(t *testing.T) {
				runAgree(t, fused, plain, in, 1e-5)
			})
		}
	}
}

// attnGraph is one attention block in isolation: scores = Q·Kᵀ / √dk (+ mask) → softmax
// → ·V, with the mask of the given rank ("" for none), and nothing else, so the fused and
// unfused outputs differ only by the attention kernel.
func attnGraph(t testing.TB, dk int, maskShape string, useWhere bool) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("attn")
	q := b.Input("q", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Sym("n"), graph.Fixed(int64(dk)))
	k := b.Input("k", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Sym("n"), graph.Fixed(int64(dk)))
	v := b.Input("v", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Sym("n"), graph.Sym("dv"))
	s := b.Div(b.MatMul(q, b.Transpose(k, 0, 1, 3, 2)), b.ConstFloat(float32(math.Sqrt(float64(dk)))))
	switch maskShape {
	case "b11n", "b1nn":
		if useWhere {
			m := b.Input("mask", tensor.Bool, graph.Sym("b"), graph.Fixed(1), graph.Sym("m1"), graph.Sym("n"))
			s = b.Where(m, s, b.ConstFloat(float32(math.Inf(-1))))
		} else {
			m := b.Input("mask", tensor.Float32, graph.Sym("b"), graph.Fixed(1), graph.Sym("m1"), graph.Sym("n"))
			s = b.Add(s, m)
		}
	}
	b.Output("y", b.MatMul(b.Softmax(s, -1), v), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func randT(r *rand.Rand, shape ...int) *tensor.Tensor {
	x, _ := tensor.New(tensor.Float32, shape...)
	for i := range x.F32 {
		x.F32[i] = float32(r.NormFloat64())
	}
	return x
}

// TestFusedAttentionRandom compares the tiled online-softmax kernel with the unfused
// graph on random shapes: n below, at and above the key block (512), n = 1, masks of shape
// (B,1,1,n) and (B,1,n,n) as additive biases and as Where conditions, fully padded key
// columns and fully masked rows (NaN in both), and several thread counts (bitwise equal).
func TestFusedAttentionRandom(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	cases := []struct {
		b, h, n, dk, dv int
		mask            string
	}{
		{1, 1, 1, 8, 8, ""}, {2, 3, 5, 16, 7, "b11n"}, {1, 2, 67, 32, 32, "b1nn"}, {2, 2, 129, 64, 64, "b11n"},
		{1, 1, 511, 16, 16, "b11n"}, {1, 2, 513, 32, 24, "b1nn"}, {1, 1, 1100, 64, 64, "b11n"}, {1, 1, 1025, 8, 8, ""},
	}
	for _, c := range cases {
		for _, useWhere := range []bool{false, true} {
			if useWhere && c.mask == "" {
				continue
			}
			name := fmt.Sprintf("b%d_h%d_n%d_dk%d_dv%d_%s_where%v", c.b, c.h, c.n, c.dk, c.dv, c.mask, useWhere)
			t.Run(name, func(t *testing.T) {
				g := attnGraph(t, c.dk, c.mask, useWhere)
				fused, plain := compileBoth(t, g, backends.Options{Threads: 1})
				if fused.Fusions()["attention"] != 1 {
					t.Fatalf("fusions %v", fused.Fusions())
				}
				in := map[string]*tensor.Tensor{
					"q": randT(r, c.b, c.h, c.n, c.dk), "k": randT(r, c.b, c.h, c.n, c.dk), "v": randT(r, c.b, c.h, c.n, c.dv),
				}
				if c.mask != "" {
					m1 := 1
					if c.mask == "b1nn" {
						m1 = c.n
					}
					bias, _ := tensor.New(tensor.Float32, c.b, 1, m1, c.n)
					cond, _ := tensor.New(tensor.Bool, c.b, 1, m1, c.n)
					for bi := 0; bi < c.b; bi++ {
						for i := 0; i < m1; i++ {
							for j := 0; j < c.n; j++ {
								idx := (bi*m1+i)*c.n + j
								masked := j%3 == 1 && j != 0 // padded key columns
								if bi == c.b-1 && c.b > 1 {
									masked = j > 0 // only key 0 survives
								}
								if c.mask == "b1nn" && i == m1-1 && m1 > 1 {
									masked = true // a fully masked query row: NaN
								}
								cond.Bool[idx] = !masked
								if masked {
									bias.F32[idx] = float32(math.Inf(-1))
								}
							}
						}
					}
					if useWhere {
						in["mask"] = cond
					} else {
						in["mask"] = bias
					}
				}
				ref := runAgree(t, fused, plain, in, 1e-6)
				for _, th := range []int{2, 3} {
					p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: th})
					if err != nil {
						t.Fatal(err)
					}
					out, err := p.Run(context.Background(), in)
					if err != nil {
						t.Fatal(err)
					}
					if !tensor.Equal(out["y"], ref["y"]) {
						// tensor.Equal treats NaN as unequal; compare bits
						a, b := out["y"].F32, ref["y"].F32
						for i := range a {
							if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
								t.Fatalf("threads %d: element %d = %v, threads 1 gave %v", th, i, a[i], b[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestFusedAttentionZeroBias: a batch whose additive mask is zero for every key (+0 or −0)
// skips the add, and gives bitwise what the same attention without a mask gives, at every
// precision; a padded batch beside it still takes its mask.
func TestFusedAttentionZeroBias(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, prec := range []string{"fp32", "int8-attention"} {
		for _, n := range []int{67, 600} {
			t.Run(fmt.Sprintf("%s/n=%d", prec, n), func(t *testing.T) {
				const b, h, dk = 3, 2, 32
				masked, err := cpu.Backend{}.Compile(attnGraph(t, dk, "b11n", false), backends.Options{Threads: 2, Precision: prec})
				if err != nil {
					t.Fatal(err)
				}
				bare, err := cpu.Backend{}.Compile(attnGraph(t, dk, "", false), backends.Options{Threads: 2, Precision: prec})
				if err != nil {
					t.Fatal(err)
				}
				in := map[string]*tensor.Tensor{"q": randT(r, b, h, n, dk), "k": randT(r, b, h, n, dk), "v": randT(r, b, h, n, dk)}
				bias, _ := tensor.New(tensor.Float32, b, 1, 1, n)
				negZero := float32(math.Copysign(0, -1))
				for j := 0; j < n; j++ {
					bias.F32[n+j] = negZero // batch 1: −0 everywhere; batch 0: +0
					if j > n/2 {
						bias.F32[2*n+j] = float32(math.Inf(-1)) // batch 2: padded
					}
				}
				got, err := masked.Run(context.Background(), map[string]*tensor.Tensor{"q": in["q"], "k": in["k"], "v": in["v"], "mask": bias})
				if err != nil {
					t.Fatal(err)
				}
				want, err := bare.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				per := h * n * dk
				for i := 0; i < 2*per; i++ {
					if g, w := got["y"].F32[i], want["y"].F32[i]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("batch %d: y[%d] = %g with a zero mask, %g without one", i/per, i, g, w)
					}
				}
				same := true
				for i := 2 * per; i < 3*per; i++ {
					same = same && got["y"].F32[i] == want["y"].F32[i]
				}
				if same {
					t.Error("batch 2: the padding mask changed nothing")
				}
			})
		}
	}
}

// TestFusionRespectsOutputs checks that no pattern fuses when an intermediate is a graph
// output or a kept intermediate.
func TestFusionRespectsOutputs(t *testing.T) {
	g := attnGraph(t, 8, "b11n", false)
	var scores string
	for _, n := range g.Nodes {
		if n.Op == "Softmax" {
			scores = n.Outputs[0]
		}
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{KeepIntermediates: []string{scores}})
	if err != nil {
		t.Fatal(err)
	}
	// The scaling and mask before the softmax still run as one elementwise pass: the kept
	// probabilities are not among its values.
	if f := p.(*cpu.Program).Fusions(); len(f) != 1 || f["elementwise"] != 1 {
		t.Fatalf("fused %v although the probabilities are kept", f)
	}
	g2 := vanillaBase(t, map[string]any{"layers": int64(1), "d_model": int64(32), "heads": int64(2), "d_ff": int64(64)})
	var relu string
	for _, n := range g2.Nodes {
		if n.Op == "Relu" {
			relu = n.Inputs[0]
		}
	}
	p2, err := cpu.Backend{}.Compile(g2, backends.Options{KeepIntermediates: []string{relu}})
	if err != nil {
		t.Fatal(err)
	}
	if f := p2.(*cpu.Program).Fusions(); f["linear+relu"] != 0 || f["attention"] != 1 {
		t.Fatalf("fusions %v: the kept pre-activation must stop linear+relu only", f)
	}
}

// TestFusionTorchExports checks that PyTorch's exports of nn.TransformerEncoder (scale on
// Q, baddbmm-style Mul/Add mask) fuse their attention and linear layers and still match
// PyTorch's outputs.
func TestFusionTorchExports(t *testing.T) {
	for _, name := range []string{"enc_relu_op17", "enc_gelu_op17", "enc_relu_op14", "enc_gelu_op14"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "onnx", "testdata", "torch", name+".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			g, err := onnx.Import(data)
			if err != nil {
				t.Fatal(err)
			}
			fused, plain := compileBoth(t, g, backends.Options{})
			fu := fused.Fusions()
			if fu["attention"] == 0 || fu["linear"]+fu["linear+relu"]+fu["linear+gelu"] == 0 {
				t.Fatalf("fusions %v", fu)
			}
			t.Logf("fusions %v", fu)
			r := rand.New(rand.NewSource(1))
			const n, batch = 9, 2
			src := randT(r, n, batch, int(g.Inputs[0].Shape[2].Size))
			mask, _ := tensor.New(tensor.Bool, batch, n)
			for j := 6; j < n; j++ {
				mask.Bool[n+j] = true
			}
			runAgree(t, fused, plain, map[string]*tensor.Tensor{g.Inputs[0].Name: src, g.Inputs[1].Name: mask}, 1e-5)
		})
	}
}

// TestLinearCuts checks that the linear layer's tiles cover the split axis exactly, in
// order, on the alignments the kernels need, with one big tile per thread first.
func TestLinearCuts(t *testing.T) {
	for _, c := range []struct{ m, n, k, threads int }{
		{128, 512, 512, 2}, {128, 2048, 512, 2}, {1024, 512, 512, 2}, {1024, 512, 2048, 3},
		{128, 257, 512, 2}, {37, 512, 512, 2}, {1, 1, 1, 2}, {128, 512, 512, 1}, {4096, 64, 64, 8},
	} {
		byCols, cuts := cpu.LinearCuts(c.m, c.n, c.k, c.threads)
		l, align := c.m, 4
		if byCols {
			l, align = c.n, 64
		}
		if byCols != (c.n > 4*c.m) || cuts[0] != 0 || cuts[len(cuts)-1] != l {
			t.Fatalf("%+v: byCols %v cuts %v", c, byCols, cuts)
		}
		for i := 1; i < len(cuts); i++ {
			if cuts[i] <= cuts[i-1] || (i < len(cuts)-1 && cuts[i]%align != 0) {
				t.Fatalf("%+v: cuts %v not increasing on multiples of %d", c, cuts, align)
			}
		}
		if len(cuts) > 2 && cuts[1]-cuts[0] < cuts[len(cuts)-1]-cuts[len(cuts)-2] {
			t.Fatalf("%+v: first tile %d smaller than the last %d", c, cuts[1], cuts[len(cuts)-1]-cuts[len(cuts)-2])
		}
	}
}

// TestLinearTiles checks that a linear layer's tiles cover its output exactly once, that
// tiles of one row band are adjacent and numbered in order, that column tiles start on
// linColAlign, and that the last of several row tiles is shared out by columns.
func TestLinearTiles(t *testing.T) {
	for _, c := range []struct {
		m, n, k, threads int
		colsOK           bool
	}{
		{128, 512, 512, 2, true}, {128, 2048, 512, 2, true}, {1024, 512, 512, 2, true}, {1024, 512, 2048, 3, true},
		{128, 257, 512, 2, true}, {37, 512, 512, 2, true}, {1, 1, 1, 2, true}, {128, 512, 512, 1, true},
		{4096, 64, 64, 8, true}, {128, 512, 512, 2, false}, {64, 4096, 512, 2, false}, {300, 130, 64, 2, true},
	} {
		tiles := cpu.LinearTiles(c.m, c.n, c.k, c.threads, c.colsOK)
		cover := make([]int8, c.m*c.n)
		band, rows := 0, [2]int{tiles[0][0], tiles[0][1]}
		for _, tl := range tiles {
			r0, r1, c0, c1, b := tl[0], tl[1], tl[2], tl[3], tl[4]
			if r0 >= r1 || c0 >= c1 || r1 > c.m || c1 > c.n || (c0 != 0 && (!c.colsOK || c0%64 != 0)) {
				t.Fatalf("%+v: bad tile %v in %v", c, tl, tiles)
			}
			switch {
			case b == band && [2]int{r0, r1} == rows:
			case b == band+1:
				band, rows = b, [2]int{r0, r1}
			default:
				t.Fatalf("%+v: tile %v breaks the band order of %v", c, tl, tiles)
			}
			for i := r0; i < r1; i++ {
				for j := c0; j < c1; j++ {
					cover[i*c.n+j]++
				}
			}
		}
		for i, v := range cover {
			if v != 1 {
				t.Fatalf("%+v: element (%d, %d) covered %d times by %v", c, i/c.n, i%c.n, v, tiles)
			}
		}
		last := tiles[len(tiles)-1]
		if c.colsOK && band > 0 && c.n > 64*2*c.threads && (last[2] == 0 || last[3] != c.n) {
			t.Fatalf("%+v: the last row band of %v is not cut by columns", c, tiles)
		}
	}
}

// TestFusedLinearLayerNorm checks the post-norm epilogue (x·W + b + residual, then
// LayerNormalization of each row) against the unfused graph bit for bit, for row tiles
// (whole rows normalised in the epilogue), column tiles (n > 4m, or the last row band) and
// rows wider than the kernel's column block (both normalised by the thread that finishes
// the band's last tile, or by all threads afterwards when a column-cut band is taller than
// 64 rows), at several thread counts.
func TestFusedLinearLayerNorm(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, c := range []struct{ m, k, n int }{{1, 64, 64}, {7, 64, 512}, {128, 96, 512}, {300, 64, 130}, {40, 32, 1100}, {16, 512, 1024}, {100, 256, 1100}, {256, 128, 256}} {
		b := graph.NewBuilder("linln")
		x := b.Input("x", tensor.Float32, graph.Sym("m"), graph.Fixed(int64(c.k)))
		res := b.Input("res", tensor.Float32, graph.Sym("m"), graph.Fixed(int64(c.n)))
		w := randT(r, c.k, c.n)
		bias, scale, shift := randT(r, c.n), randT(r, c.n), randT(r, c.n)
		h := b.Add(b.Add(b.MatMul(x, b.Const(w)), b.Const(bias)), res)
		b.Output("y", b.LayerNorm(h, b.Const(scale), b.Const(shift), 1e-5), tensor.Float32)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]*tensor.Tensor{"x": randT(r, c.m, c.k), "res": randT(r, c.m, c.n)}
		for _, threads := range []int{1, 2, 3} {
			fused, plain := compileBoth(t, g, backends.Options{Threads: threads})
			if fu := fused.Fusions(); fu["linear+residual+layernorm"] != 1 {
				t.Fatalf("%+v: fusions %v", c, fu)
			}
			runBitwise(t, fmt.Sprintf("%+v threads %d", c, threads), fused, plain, in)
		}
	}
}

// TestFusedMatMulNoBias checks that a product by a constant matrix with no bias after it
// runs on the pre-packed weights ("matmul") and equals the unfused MatMul bit for bit,
// including a 3-D input, a column-cut shape and at several thread counts.
func TestFusedMatMulNoBias(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	for _, c := range []struct {
		shape []int
		n     int
	}{{[]int{1, 64}, 64}, {[]int{3, 37, 96}, 130}, {[]int{256, 128}, 256}, {[]int{16, 512}, 1024}} {
		k := c.shape[len(c.shape)-1]
		b := graph.NewBuilder("mm")
		dims := symDims("d", len(c.shape))
		dims[len(dims)-1] = graph.Fixed(int64(k))
		x := b.Input("x", tensor.Float32, dims...)
		b.Output("y", b.MatMul(x, b.Const(randT(r, k, c.n))), tensor.Float32)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]*tensor.Tensor{"x": randT(r, c.shape...)}
		for _, threads := range []int{1, 2, 3} {
			fused, plain := compileBoth(t, g, backends.Options{Threads: threads})
			if fu := fused.Fusions(); fu["matmul"] != 1 {
				t.Fatalf("%+v: fusions %v", c, fu)
			}
			runBitwise(t, fmt.Sprintf("%+v threads %d", c, threads), fused, plain, in)
		}
	}
}

// TestFusedMatMulResidualNoBias checks that a product with no bias (a bias-free output
// projection) still takes the residual Add and the LayerNorm after it into its epilogue, and
// agrees with the unfused steps, on shapes of one row, odd and several tiles.
func TestFusedMatMulResidualNoBias(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	for _, rows := range []int{1, 37, 300} {
		const k, n = 48, 64
		b := graph.NewBuilder("mm-res")
		x := b.Input("x", tensor.Float32, graph.Sym("r"), graph.Fixed(k))
		res := b.Input("res", tensor.Float32, graph.Sym("r"), graph.Fixed(n))
		y := b.Add(res, b.MatMul(x, b.Const(randT(r, k, n))))
		b.Output("y", b.LayerNorm(y, b.Const(randT(r, n)), b.Const(randT(r, n)), 1e-5), tensor.Float32)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
		if fu := fused.Fusions(); fu["matmul+residual+layernorm"] != 1 {
			t.Fatalf("rows %d: fusions %v", rows, fu)
		}
		runAgree(t, fused, plain, map[string]*tensor.Tensor{"x": randT(r, rows, k), "res": randT(r, rows, n)}, 1e-5)
	}
}

// TestFusedSiblingLinears checks that linear layers reading the same input and nothing else
// run as one step ("shared-input") whose outputs equal the unfused layers bit for bit, on
// a single row, odd shapes, tall inputs and several thread counts; a layer that also reads
// a residual keeps its own step.
func TestFusedSiblingLinears(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	const k = 48
	b := graph.NewBuilder("siblings")
	x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(k))
	b.Output("relu", b.Relu(b.Add(b.MatMul(x, b.Const(randT(r, k, 40))), b.Const(randT(r, 40)))), tensor.Float32)
	b.Output("plain", b.MatMul(x, b.Const(randT(r, k, 96))), tensor.Float32)
	b.Output("bias", b.Add(b.MatMul(x, b.Const(randT(r, k, 130))), b.Const(randT(r, 130))), tensor.Float32)
	b.Output("residual", b.Add(b.Add(b.MatMul(x, b.Const(randT(r, k, k))), b.Const(randT(r, k))), x), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 2, 3} {
		fused, plain := compileBoth(t, g, backends.Options{Threads: threads})
		if fu := fused.Fusions(); fu["shared-input"] != 1 || fu["linear+residual"] != 1 {
			t.Fatalf("fusions %v, want one shared-input group and one linear+residual", fu)
		}
		for _, sh := range [][2]int{{1, 1}, {3, 37}, {2, 300}, {4, 317}} {
			in := map[string]*tensor.Tensor{"x": randT(r, sh[0], sh[1], k)}
			runBitwise(t, fmt.Sprintf("threads %d %v", threads, sh), fused, plain, in)
		}
	}
}

// TestFusedGemm checks that Gemm(x, W, C), the form PyTorch exports a 2-D linear layer in,
// fuses like MatMul + Add when op(A) is A, alpha is 1 and C is a constant row kept by
// beta = 1 (or absent, or dropped by beta = 0), with either orientation of W and with the
// activation, residual and LayerNorm that follow it; that the other forms stay unfused; and
// that fused and unfused agree (the bias joins the sum in another order, so not bit for
// bit) at several thread counts, while a 3-D input is still rejected as Gemm rejects it.
func TestFusedGemm(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	const k, n = 96, 130
	for _, c := range []struct {
		name   string
		attrs  graph.Attrs
		cShape []int // nil: no C input
		cInput bool  // C is a graph input, not a constant
		tail   string
		kind   string // "" when nothing should fuse
	}{
		{"transB", graph.Attrs{"transB": graph.Int(1)}, []int{n}, false, "", "linear"},
		{"plain-row2d", nil, []int{1, n}, false, "", "linear"},
		{"noC", graph.Attrs{"transB": graph.Int(1)}, nil, false, "", "matmul"},
		{"beta0", graph.Attrs{"beta": graph.Float(0)}, []int{n}, false, "", "matmul"},
		{"relu", graph.Attrs{"transB": graph.Int(1)}, []int{n}, false, "relu", "linear+relu"},
		{"residual-ln", nil, []int{n}, false, "residual-ln", "linear+residual+layernorm"},
		{"alpha2", graph.Attrs{"alpha": graph.Float(2)}, []int{n}, false, "", ""},
		{"beta2", graph.Attrs{"beta": graph.Float(2)}, []int{n}, false, "", ""},
		{"transA", graph.Attrs{"transA": graph.Int(1)}, []int{n}, false, "", ""},
		{"fullC", nil, []int{7, n}, false, "", ""},
		{"runtimeC", nil, []int{n}, true, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("gemm")
			rows := graph.Sym("m")
			if c.name == "fullC" || c.name == "transA" {
				rows = graph.Fixed(7)
			}
			xDims := []graph.Dim{rows, graph.Fixed(k)}
			if c.name == "transA" {
				xDims = []graph.Dim{graph.Fixed(k), rows}
			}
			x := b.Input("x", tensor.Float32, xDims...)
			w := randT(r, k, n)
			if c.attrs["transB"].I == 1 {
				w = randT(r, n, k)
			}
			ins := []string{x, b.Const(w)}
			in := map[string]*tensor.Tensor{}
			if c.cShape != nil {
				ct := randT(r, c.cShape...)
				if c.cInput {
					ins = append(ins, b.Input("c", tensor.Float32, graph.Fixed(n)))
					in["c"] = ct
				} else {
					ins = append(ins, b.Const(ct))
				}
			}
			y := b.Op("Gemm", ins, c.attrs)
			switch c.tail {
			case "relu":
				y = b.Relu(y)
			case "residual-ln":
				res := b.Input("res", tensor.Float32, rows, graph.Fixed(n))
				y = b.LayerNorm(b.Add(y, res), b.Const(randT(r, n)), b.Const(randT(r, n)), 1e-5)
				in["res"] = randT(r, 7, n)
			}
			b.Output("y", y, tensor.Float32)
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			in["x"] = randT(r, 7, k)
			if c.name == "transA" {
				in["x"] = randT(r, k, 7)
			}
			for _, threads := range []int{1, 2, 3} {
				fused, plain := compileBoth(t, g, backends.Options{Threads: threads})
				fu := fused.Fusions()
				if (c.kind == "" && len(fu) != 0) || (c.kind != "" && fu[c.kind] != 1) {
					t.Fatalf("fusions %v, want %q", fu, c.kind)
				}
				runAgree(t, fused, plain, in, 1e-4)
			}
		})
	}
	// A fused Gemm keeps Gemm's contract: a 3-D input is an error, not a batched product.
	b := graph.NewBuilder("gemm3d")
	x := b.Input("x", tensor.Float32, graph.Sym("a"), graph.Sym("b"), graph.Fixed(k))
	b.Output("y", b.Op("Gemm", []string{x, b.Const(randT(r, k, n)), b.Const(randT(r, n))}, nil), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fused, _ := compileBoth(t, g, backends.Options{Threads: 2})
	if _, err := fused.Run(context.Background(), map[string]*tensor.Tensor{"x": randT(r, 2, 3, k)}); err == nil {
		t.Fatal("fused Gemm accepted a 3-D input")
	}
}

// TestShapeOfTranspose checks that a Transpose read only by Shape steps is not computed:
// the shapes come from the permuted input shape ("shape" in Fusions) and equal the unfused
// program's, start and end included, while a Transpose that something else also reads
// still runs.
func TestShapeOfTranspose(t *testing.T) {
	b := graph.NewBuilder("shapes")
	x := b.Input("x", tensor.Float32, graph.Sym("a"), graph.Sym("b"), graph.Sym("c"))
	tr := b.Transpose(x, 2, 0, 1)
	b.Output("s", b.Shape(tr), tensor.Int64)
	b.Output("tail", b.Op("Shape", []string{tr}, graph.Attrs{"start": graph.Int(1)}), tensor.Int64)
	kept := b.Transpose(x, 1, 0, 2)
	b.Output("k", b.Shape(kept), tensor.Int64)
	b.Output("y", b.Relu(kept), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
	if fu := fused.Fusions(); fu["shape"] != 2 {
		t.Fatalf("fusions %v, want 2 shape", fu)
	}
	in := map[string]*tensor.Tensor{"x": randT(rand.New(rand.NewSource(3)), 2, 3, 5)}
	got, err := fused.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s", "tail", "k"} {
		if fmt.Sprint(got[name].I64) != fmt.Sprint(want[name].I64) {
			t.Errorf("%s = %v, want %v", name, got[name].I64, want[name].I64)
		}
	}
	if fmt.Sprint(got["s"].I64) != "[5 2 3]" {
		t.Errorf("s = %v, want [5 2 3]", got["s"].I64)
	}
	runAgree(t, fused, plain, in, 0)
}

// TestFusedAttentionQScale checks attention whose Q is scaled before the product, as
// PyTorch exports it: by a power of two (Div by 8, Mul by 0.25) or another factor (Div by
// 3) the scale moves onto the scores and Q's head split is read through strides, and fused
// and unfused agree.
func TestFusedAttentionQScale(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	const bh, n, dk = 6, 45, 16
	for _, c := range []struct {
		op string
		v  float32
	}{{"Div", 8}, {"Mul", 0.25}, {"Div", 3}} {
		b := graph.NewBuilder("qscale")
		q := b.Input("q", tensor.Float32, graph.Sym("n"), graph.Fixed(bh), graph.Fixed(dk))
		k := b.Input("k", tensor.Float32, graph.Fixed(bh), graph.Fixed(dk), graph.Sym("n"))
		v := b.Input("v", tensor.Float32, graph.Fixed(bh), graph.Sym("n"), graph.Fixed(dk))
		qs := b.Op(c.op, []string{b.Transpose(q, 1, 0, 2), b.ConstFloat(c.v)}, nil)
		b.Output("y", b.MatMul(b.Softmax(b.MatMul(qs, k), -1), v), tensor.Float32)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
		if fu := fused.Fusions(); fu["attention"] != 1 {
			t.Fatalf("%s %g: fusions %v", c.op, c.v, fu)
		}
		in := map[string]*tensor.Tensor{"q": randT(r, n, bh, dk), "k": randT(r, bh, dk, n), "v": randT(r, bh, n, dk)}
		for i := range in["q"].F32 {
			in["q"].F32[i] *= 4 // make the scale matter to the softmax
		}
		runAgree(t, fused, plain, in, 1e-5)
	}
}

// decomposedLayerNorm writes LayerNorm over the last axis of x the way PyTorch exports it
// below opset 17, returning the output and the deviation d.
func decomposedLayerNorm(b *graph.Builder, x string, gamma, beta *tensor.Tensor, eps float32) (y, d string) {
	mean := func(v string) string { return b.Op("ReduceMean", []string{v}, graph.Attrs{"axes": graph.Ints(-1)}) }
	d = b.Sub(x, mean(x))
	v := mean(b.Op("Pow", []string{d, b.ConstFloat(2)}, nil))
	s := b.Op("Sqrt", []string{b.Add(v, b.ConstFloat(eps))}, nil)
	return b.Add(b.Mul(b.Div(d, s), b.Const(gamma)), b.Const(beta)), d
}

// TestRecomposedLayerNorm checks that LayerNorm written out in elementary ops becomes one
// LayerNormalization step ("layernorm"), which a linear layer with a residual before it
// then takes into its epilogue, that both agree with the unfused chain, that the chain is
// left alone when one of its values is also a graph output, and that an input whose last
// axis does not match γ still fails as the chain fails.
func TestRecomposedLayerNorm(t *testing.T) {
	r := rand.New(rand.NewSource(19))
	const k, n = 48, 40
	gamma, beta := randT(r, n), randT(r, n)
	for _, c := range []struct {
		name   string
		linear bool
		keepD  bool
		want   map[string]int
	}{
		{"alone", false, false, map[string]int{"layernorm": 1}},
		{"after-linear", true, false, map[string]int{"layernorm": 1, "linear+residual+layernorm": 1}},
		{"deviation-kept", false, true, map[string]int{"elementwise": 1}}, // the normalisation after the kept deviation is one pass
	} {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("ln")
			x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("m"), graph.Fixed(n))
			in := map[string]*tensor.Tensor{"x": randT(r, 2, 9, n)}
			h := x
			if c.linear {
				a := b.Input("a", tensor.Float32, graph.Sym("b"), graph.Sym("m"), graph.Fixed(k))
				h = b.Add(b.Add(b.MatMul(a, b.Const(randT(r, k, n))), b.Const(randT(r, n))), x)
				in["a"] = randT(r, 2, 9, k)
			}
			y, d := decomposedLayerNorm(b, h, gamma, beta, 1e-5)
			b.Output("y", y, tensor.Float32)
			if c.keepD {
				b.Output("d", d, tensor.Float32)
			}
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for _, threads := range []int{1, 2} {
				fused, plain := compileBoth(t, g, backends.Options{Threads: threads})
				if fu := fused.Fusions(); fmt.Sprint(fu) != fmt.Sprint(c.want) {
					t.Fatalf("fusions %v, want %v", fu, c.want)
				}
				runAgree(t, fused, plain, in, 2e-6)
			}
		})
	}
	b := graph.NewBuilder("ln-mismatch")
	x := b.Input("x", tensor.Float32, graph.Sym("m"), graph.Sym("n"))
	y, _ := decomposedLayerNorm(b, x, gamma, beta, 1e-5)
	b.Output("y", y, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
	in := map[string]*tensor.Tensor{"x": randT(r, 3, n+1)}
	if _, err := plain.Run(context.Background(), in); err == nil {
		t.Fatal("the unfused chain accepted a mismatched γ")
	}
	if _, err := fused.Run(context.Background(), in); err == nil || !strings.Contains(err.Error(), "broadcast") {
		t.Fatalf("the recomposed LayerNorm gave %v for a mismatched γ, want the chain's broadcast error", err)
	}
	// A last axis of 1 broadcasts against γ: the chain runs, and the fused step runs it too.
	runBitwise(t, "last axis 1", fused, plain, map[string]*tensor.Tensor{"x": randT(r, 3, 1)})
}

// TestFusedFallbacks checks fused linear steps on inputs their fast path leaves to the
// original steps, which then need the constants the compiled program no longer keeps (the
// weights come back from their packed copy, transposed back for a Gemm): a 1-D input to
// MatMul, and residuals that broadcast to a larger output, after MatMul and after Gemm.
func TestFusedFallbacks(t *testing.T) {
	r := rand.New(rand.NewSource(29))
	const k, n = 24, 40
	for _, c := range []struct {
		name string
		gemm bool
		x    []int
		res  []int // nil: no residual
	}{
		{"matmul-1d", false, []int{k}, nil},
		{"matmul-res-broadcast", false, []int{5, k}, []int{3, 5, n}},
		{"gemm-res-broadcast", true, []int{5, k}, []int{2, 5, n}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("fb")
			x := b.Input("x", tensor.Float32, symDims("x", len(c.x))...)
			var y string
			if c.gemm {
				y = b.Op("Gemm", []string{x, b.Const(randT(r, n, k)), b.Const(randT(r, n))}, graph.Attrs{"transB": graph.Int(1)})
			} else {
				y = b.Add(b.MatMul(x, b.Const(randT(r, k, n))), b.Const(randT(r, n)))
			}
			in := map[string]*tensor.Tensor{"x": randT(r, c.x...)}
			if c.res != nil {
				y = b.Add(y, b.Input("res", tensor.Float32, symDims("r", len(c.res))...))
				in["res"] = randT(r, c.res...)
			}
			b.Output("y", y, tensor.Float32)
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
			if len(fused.Fusions()) == 0 {
				t.Fatal("nothing fused")
			}
			runBitwise(t, c.name, fused, plain, in)
		})
	}
}

// TestFusedLinearSplit checks a linear layer whose output is only sliced apart along its
// last axis (and read by Shape, which the slice bounds come from in PyTorch's export): the
// slices are written directly ("split") and equal the unfused ones bit for bit, including
// bounds computed at run time and, through the fallback, bounds a tile cannot start at and
// slices with a step; a layer whose output something else also reads is not split.
func TestFusedLinearSplit(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	const k, n = 40, 96
	for _, c := range []struct {
		name  string
		cuts  [][2]int64 // start, end (end -1: n/3 computed from Shape at run time)
		step  int64
		other bool // a Relu also reads the product
		early bool // each slice's output is read before the next Slice (not split)
	}{
		{"thirds", [][2]int64{{0, 32}, {32, 64}, {64, 96}}, 1, false, false},
		{"runtime-ends", [][2]int64{{0, -1}}, 1, false, false},
		{"overlap-clamp", [][2]int64{{64, 1000}, {-64, -32}, {0, 96}}, 1, false, false},
		{"unaligned", [][2]int64{{0, 30}, {30, 96}}, 1, false, false},
		{"step2", [][2]int64{{0, 96}}, 2, false, false},
		{"also-read", [][2]int64{{0, 32}}, 1, true, false},
		{"read-early", [][2]int64{{0, 32}, {32, 96}}, 1, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("split")
			x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("m"), graph.Fixed(k))
			o := b.Add(b.MatMul(x, b.Const(randT(r, k, n))), b.Const(randT(r, n)))
			third := b.Op("Div", []string{b.Gather(b.Shape(o), b.ConstInts(-1), 0), b.ConstInts(3)}, nil)
			var parts []string
			for _, cut := range c.cuts {
				end := b.ConstInts(cut[1])
				if cut[1] == -1 {
					end = third
				}
				ins := []string{o, b.ConstInts(cut[0]), end, b.ConstInts(-1)}
				if c.step != 1 {
					ins = append(ins, b.ConstInts(c.step))
				}
				parts = append(parts, b.Op("Slice", ins, nil))
				if c.early {
					parts[len(parts)-1] = b.Relu(parts[len(parts)-1])
				}
			}
			// The outputs' Identity steps come after every Slice, as the readers of the
			// slices do in PyTorch's export (the split step runs where the last Slice was).
			for i, s := range parts {
				b.Output(fmt.Sprintf("s%d", i), s, tensor.Float32)
			}
			if c.other {
				b.Output("relu", b.Relu(o), tensor.Float32)
			}
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			in := map[string]*tensor.Tensor{"x": randT(r, 2, 37, k)}
			for _, threads := range []int{1, 2, 3} {
				fused, plain := compileBoth(t, g, backends.Options{Threads: threads})
				if want := map[bool]int{false: 1, true: 0}[c.other || c.early]; fused.Fusions()["split"] != want {
					t.Fatalf("fusions %v, want split %d", fused.Fusions(), want)
				}
				runBitwise(t, fmt.Sprintf("threads %d", threads), fused, plain, in)
			}
		})
	}
}

// TestFusedPermutedResidual checks the residual Add of a transposed value, with and without
// the LayerNorm after it, against the unfused steps bit for bit: both operand orders, a
// chain of two transposes, batch 1 (where the Transpose is a view), a row of one element,
// and a broadcasting residual (which takes the fallback). A transpose that moves the last
// axis, or whose result is read elsewhere, must not fuse.
func TestFusedPermutedResidual(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	const d = 37
	gamma, beta := randT(r, d), randT(r, d)
	cases := []struct {
		name  string
		build func(b *graph.Builder, y, res string) string
		kind  string // the Fusions kind expected, "" for none
	}{
		{"add+ln", func(b *graph.Builder, y, res string) string {
			return b.LayerNorm(b.Add(b.Transpose(y, 1, 0, 2), res), b.Param("g", gamma), b.Param("b", beta), 1e-5)
		}, "transpose+residual+layernorm"},
		{"residual first", func(b *graph.Builder, y, res string) string {
			return b.LayerNorm(b.Add(res, b.Transpose(y, 1, 0, 2)), b.Param("g", gamma), b.Param("b", beta), 1e-5)
		}, "transpose+residual+layernorm"},
		{"add only", func(b *graph.Builder, y, res string) string {
			return b.Add(b.Transpose(y, 1, 0, 2), res)
		}, "transpose+residual"},
		{"two transposes", func(b *graph.Builder, y, res string) string {
			return b.Add(b.Transpose(b.Transpose(y, 1, 0, 2), 0, 1, 2), res)
		}, "transpose+residual"},
		{"last axis moves", func(b *graph.Builder, y, res string) string {
			return b.Add(b.Transpose(y, 1, 2, 0), res)
		}, ""},
		{"transpose kept", func(b *graph.Builder, y, res string) string {
			tr := b.Transpose(y, 1, 0, 2)
			b.Output("tr", tr, tensor.Float32, symDims("t", 3)...)
			return b.Add(tr, res)
		}, ""},
	}
	for _, c := range cases {
		b := graph.NewBuilder("permres")
		y := b.Input("y", tensor.Float32, symDims("y", 3)...)
		res := b.Input("res", tensor.Float32, symDims("r", 3)...)
		b.Output("out", c.build(b, y, res), tensor.Float32, symDims("o", 3)...)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
		fu := fused.Fusions()
		if c.kind != "" && fu[c.kind] != 1 || c.kind == "" && fu["transpose+residual"]+fu["transpose+residual+layernorm"] != 0 {
			t.Fatalf("%s: fusions %v, want %q", c.name, fu, c.kind)
		}
		for _, sh := range [][3]int{{5, 3, d}, {7, 1, d}, {1, 4, d}} {
			yt := randT(r, sh[0], sh[1], sh[2])
			rs := []int{sh[1], sh[0], sh[2]}
			if c.name == "last axis moves" {
				rs = []int{sh[1], sh[2], sh[0]}
			}
			runBitwise(t, fmt.Sprintf("%s %v", c.name, sh), fused, plain, map[string]*tensor.Tensor{"y": yt, "res": randT(r, rs...)})
			if c.name == "last axis moves" {
				continue
			}
			// a residual broadcast over the first axis: the fallback runs the original steps
			runBitwise(t, fmt.Sprintf("%s %v broadcast", c.name, sh), fused, plain, map[string]*tensor.Tensor{"y": yt, "res": randT(r, 1, sh[0], sh[2])})
		}
	}
}
