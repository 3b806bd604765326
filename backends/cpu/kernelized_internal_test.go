package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The kernels of kernelized.go against plain float64 loops that state what they compute
// (their pure-Go twins), on random and awkward shapes: one row, odd sizes, sizes that are
// not multiples of the GEMM tiles (6×16, 12×32) or of the 96-row block, and 1 and 3 threads.

func kzRand(r *rand.Rand, scale float64, shape ...int) *tensor.Tensor {
	t, _ := tensor.New(tensor.Float32, shape...)
	for i := range t.F32 {
		t.F32[i] = float32(scale * r.NormFloat64())
	}
	return t
}

func kzClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		g := float64(got[i])
		if math.IsNaN(w) != math.IsNaN(g) || (!math.IsNaN(w) && math.Abs(g-w) > tol*(1+math.Abs(w))) {
			t.Fatalf("%s: element %d is %g, want %g", what, i, g, w)
		}
	}
}

func TestFeatureMapKernel(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct{ b, n, k, m int }{{1, 1, 1, 1}, {1, 1, 64, 266}, {2, 7, 5, 17}, {3, 97, 12, 29}, {1, 200, 16, 33}} {
		for _, mode := range []string{"row", "slab", "const", "sumsq-split"} {
			for _, threads := range []int{1, 3} {
				t.Run(fmt.Sprintf("%v/%s/t%d", c, mode, threads), func(t *testing.T) {
					x := kzRand(r, 1, c.b, 2, c.n, c.k)
					xv := func(i, q int) float32 { return x.F32[i*c.k+q] } // row i of the (b·2·n) rows
					if mode == "sumsq-split" {
						x = kzRand(r, 1, c.b, c.n, 2, c.k) // the head split's source
						xv = func(i, q int) float32 {
							s, j := i/c.n, i%c.n
							return x.F32[(((s/2)*c.n+j)*2+s%2)*c.k+q]
						}
					}
					w := kzRand(r, 1, c.k, c.m)
					diag := kzRand(r, 1, c.b, 2, c.n, 1)
					pad, _ := tensor.New(tensor.Bool, c.b, 1, c.n, 1)
					for j := range pad.Bool {
						pad.Bool[j] = r.Intn(3) == 0
					}
					const alpha, eps, ratio = 0.35, 1e-4, 0.2
					ws := make([]float32, len(w.F32))
					for j, v := range w.F32 {
						ws[j] = alpha * v
					}
					sp := &featureSpec{w: gemm.PackB(false, c.k, c.m, ws, c.m)}
					sp.terms = []rowTerm{{kind: 'R', sign: 1, input: 1}}
					switch mode {
					case "row":
						sp.terms = append(sp.terms, rowTerm{kind: 'M', sign: 1, input: -1, axes: []int{-1}})
					case "slab":
						sp.terms = append(sp.terms, rowTerm{kind: 'S', sign: 1, input: 2, invalidWhen: true, axes: []int{2, 3}})
					case "const":
						sp.terms = append(sp.terms, rowTerm{kind: 'c', sign: -1, c: 0.5, input: -1})
					case "sumsq-split":
						sp.xPerm = true
						sp.terms = append(sp.terms, rowTerm{kind: 'Q', sign: 1, input: -1, scale: []rowOp{{kind: '/', c: 2}, {kind: '*', c: 0.125}}})
					}
					sp.post = []rowOp{{kind: '+', c: eps}, {kind: '*', c: ratio}, {kind: 'W', c: 0, input: 2}}
					got, ok, err := featureMap(&exec{threads: threads}, []*tensor.Tensor{x, diag, pad}, sp)
					if err != nil || !ok {
						t.Fatalf("ok %v, err %v", ok, err)
					}
					// The twin: P = x·(αW) in float64, then the shift and the post chain.
					rows := c.b * 2 * c.n
					p := make([]float64, rows*c.m)
					for i := 0; i < rows; i++ {
						for j := 0; j < c.m; j++ {
							s := 0.0
							for q := 0; q < c.k; q++ {
								s += float64(xv(i, q)) * float64(ws[q*c.m+j])
							}
							p[i*c.m+j] = s
						}
					}
					padOf := func(i int) bool { return pad.Bool[(i/(2*c.n))*c.n+i%c.n] }
					stab := make([]float64, rows)
					for i := range stab {
						mx := math.Inf(-1)
						switch mode {
						case "row":
							for j := 0; j < c.m; j++ {
								mx = math.Max(mx, p[i*c.m+j])
							}
						case "slab":
							s := i / c.n
							for i2 := s * c.n; i2 < (s+1)*c.n; i2++ {
								for j := 0; j < c.m && !padOf(i2); j++ {
									mx = math.Max(mx, p[i2*c.m+j])
								}
							}
						case "const":
							mx = -0.5
						case "sumsq-split":
							mx = 0
							for q := 0; q < c.k; q++ {
								mx += float64(xv(i, q)) * float64(xv(i, q))
							}
							mx = mx / 2 * 0.125
						}
						stab[i] = mx
					}
					want := make([]float64, rows*c.m)
					for i := 0; i < rows; i++ {
						for j := 0; j < c.m; j++ {
							v := (math.Exp(p[i*c.m+j]-float64(diag.F32[i])-stab[i]) + eps) * ratio
							if padOf(i) {
								v = 0
							}
							want[i*c.m+j] = v
						}
					}
					kzClose(t, "features", got.F32, want, 1e-5)
					if !tensor.SameShape(got.Shape, []int{c.b, 2, c.n, c.m}) {
						t.Fatalf("shape %v", got.Shape)
					}
				})
			}
		}
	}
}

func TestEluFeatureKernel(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, c := range []struct{ b, n, d int }{{1, 1, 1}, {2, 7, 5}, {1, 33, 64}, {3, 5, 17}} {
		x := kzRand(r, 2, c.b, 2, c.n, c.d)
		x.F32[0] = float32(math.NaN())
		keep := kzRand(r, 1, c.b, 1, c.n, 1)
		const alpha, add = 0.7, 1
		sp := &eluSpec{alpha: alpha, c: add, post: []rowOp{{kind: 'x', input: 1}}}
		got, ok, err := eluFeature(&exec{threads: 2}, []*tensor.Tensor{x, keep}, sp)
		if err != nil || !ok {
			t.Fatalf("%v: ok %v, err %v", c, ok, err)
		}
		want := make([]float64, len(x.F32))
		for i, v := range x.F32 {
			e := float64(v)
			if e < 0 {
				e = alpha * math.Expm1(e)
			}
			row := i / c.d
			want[i] = (e + add) * float64(keep.F32[(row/(2*c.n))*c.n+row%c.n])
		}
		kzClose(t, fmt.Sprint(c), got.F32, want, 1e-6)
		// The same through a head split: x given as (b, n, 2, d).
		xs, _ := tensor.New(tensor.Float32, c.b, c.n, 2, c.d)
		for i := range x.F32 {
			row, q := i/c.d, i%c.d
			s, j := row/c.n, row%c.n
			xs.F32[(((s/2)*c.n+j)*2+s%2)*c.d+q] = x.F32[i]
		}
		sp.xPerm = true
		got, ok, err = eluFeature(&exec{threads: 3}, []*tensor.Tensor{xs, keep}, sp)
		if err != nil || !ok || !tensor.SameShape(got.Shape, x.Shape) {
			t.Fatalf("%v split: ok %v, err %v, shape %v", c, ok, err, got.Shape)
		}
		kzClose(t, fmt.Sprint(c, " split"), got.F32, want, 1e-6)
	}
}

func TestLinearAttentionKernel(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, c := range []struct{ b, h, nq, nk, m, dv int }{{1, 1, 1, 1, 1, 1}, {2, 3, 7, 7, 29, 12}, {1, 2, 97, 97, 64, 64}, {1, 8, 200, 13, 266, 5}} {
		for _, form := range []string{"mul-eps", "div", "heads", "heads-scaled"} {
			t.Run(fmt.Sprintf("%v/%s", c, form), func(t *testing.T) {
				pos := func(shape ...int) *tensor.Tensor { // positive features, as φ makes them
					x := kzRand(r, 1, shape...)
					for i, v := range x.F32 {
						x.F32[i] = float32(math.Abs(float64(v))) + 0.01
					}
					return x
				}
				a, bk := pos(c.b, c.h, c.nq, c.m), pos(c.b, c.h, c.nk, c.m)
				sp := &linAttnSpec{keyAxis: -2}
				v := kzRand(r, 1, c.b, c.h, c.nk, c.dv)
				vAt := func(s, j, d int) float32 { return v.F32[(s*c.nk+j)*c.dv+d] }
				switch form {
				case "mul-eps":
					sp.eps, sp.hasEps = 1e-3, true
				case "div":
					sp.div, sp.keyAxis = true, 2
				case "heads", "heads-scaled":
					sp.vPerm, sp.outPerm = []int{0, 2, 1, 3}, []int{0, 2, 1, 3}
					v = kzRand(r, 1, c.b, c.nk, c.h, c.dv)
					vAt = func(s, j, d int) float32 { return v.F32[(((s/c.h)*c.nk+j)*c.h+s%c.h)*c.dv+d] }
				}
				ins := []*tensor.Tensor{a, bk, v}
				if form == "heads-scaled" {
					sp.vScale = true
					keep := kzRand(r, 1, c.b, 1, c.nk, 1)
					ins = append(ins, keep)
					plain := vAt
					vAt = func(s, j, d int) float32 { return plain(s, j, d) * keep.F32[(s/c.h)*c.nk+j] }
				}
				got, ok, err := linearAttention(&exec{threads: 2}, ins, sp)
				if err != nil || !ok {
					t.Fatalf("ok %v, err %v", ok, err)
				}
				// int8-attention's products (the key sums and denominators stay fp32)
				q8, ok, err := linearAttention(&exec{threads: 2, attn8: true}, ins, sp)
				if err != nil || !ok {
					t.Fatalf("int8: ok %v, err %v", ok, err)
				}
				want := make([]float64, c.b*c.h*c.nq*c.dv)
				for s := 0; s < c.b*c.h; s++ {
					for i := 0; i < c.nq; i++ {
						den := float64(sp.eps)
						num := make([]float64, c.dv)
						for j := 0; j < c.nk; j++ {
							dot := 0.0
							for q := 0; q < c.m; q++ {
								dot += float64(a.F32[(s*c.nq+i)*c.m+q]) * float64(bk.F32[(s*c.nk+j)*c.m+q])
							}
							den += dot
							for d := range num {
								num[d] += dot * float64(vAt(s, j, d))
							}
						}
						for d := range num {
							at := (s*c.nq+i)*c.dv + d
							if sp.outPerm != nil {
								at = (((s/c.h)*c.nq+i)*c.h+s%c.h)*c.dv + d
							}
							want[at] = num[d] / den
						}
					}
				}
				kzClose(t, "output", got.F32, want, 1e-5)
				kzCosine(t, "int8 output", q8.F32, want, c.dv, 0.999)
			})
		}
	}
}

// kzCosine checks got against want row by row (rows of d): cosine similarity at least
// minCos.
func kzCosine(t *testing.T, what string, got []float32, want []float64, d int, minCos float64) {
	t.Helper()
	for r := 0; r < len(want)/d; r++ {
		var dot, gg, ww float64
		for j := r * d; j < (r+1)*d; j++ {
			dot += float64(got[j]) * want[j]
			gg += float64(got[j]) * float64(got[j])
			ww += want[j] * want[j]
		}
		if c := dot / math.Sqrt(gg*ww); !(c >= minCos) {
			t.Fatalf("%s: row %d has cosine %g to the reference, want at least %g", what, r, c, minCos)
		}
	}
}

// TestRowIndex checks the per-row operand map against broadcasting by hand, and that
// operands that are not per-row values are refused.
func TestRowIndex(t *testing.T) {
	idx, ok := rowIndex([]int{2, 1, 3, 1}, []int{2, 4, 3, 5})
	if !ok {
		t.Fatal("refused a per-row operand")
	}
	for row, at := range idx {
		b, n := row/12, row%3
		if at != b*3+n {
			t.Fatalf("row %d maps to %d, want %d", row, at, b*3+n)
		}
	}
	for _, s := range [][]int{{2, 4, 3, 5}, {4, 1}, {2, 2, 3, 1}, {1, 2, 4, 3, 1}} {
		if _, ok := rowIndex(s, []int{2, 4, 3, 5}); ok {
			t.Errorf("operand %v accepted as a per-row value", s)
		}
	}
	if idx, ok := rowIndex(nil, []int{2, 3}); !ok || len(idx) != 2 || idx[1] != 0 {
		t.Errorf("a scalar operand: %v %v", idx, ok)
	}
}

// BenchmarkKernelizedKernels times the kernels at the performer base shapes (8 heads of 64,
// 266 features, n = 512) next to a packed 512×512×512 GEMM of about the same FLOPs as each
// (2·8·512·266·64·2 ≈ 279 MFLOP against 268), to calibrate on a shared machine.
func BenchmarkKernelizedKernels(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	const h, n, dk, m = 8, 512, 64, 266
	e := &exec{threads: 2}
	b.Run("gemm512", func(b *testing.B) {
		x, w := kzRand(r, 1, 512, 512), kzRand(r, 1, 512, 512)
		pb := gemm.PackB(false, 512, 512, w.F32, 512)
		c := make([]float32, 512*512)
		for i := 0; i < b.N; i++ {
			gemm.SgemmPacked(512, 512, 512, 1, x.F32, 512, pb, 0, c, 512)
		}
	})
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("linear-attention/t%d", threads), func(b *testing.B) {
			a, bk, v := kzRand(r, 1, 1, h, n, m), kzRand(r, 1, 1, h, n, m), kzRand(r, 1, 1, n, h, dk)
			sp := &linAttnSpec{keyAxis: -2, vPerm: []int{0, 2, 1, 3}, outPerm: []int{0, 2, 1, 3}}
			for i := 0; i < b.N; i++ {
				linearAttention(&exec{threads: threads}, []*tensor.Tensor{a, bk, v}, sp)
			}
		})
	}
	b.Run("feature-map", func(b *testing.B) {
		x, w, diag := kzRand(r, 1, 1, h, n, dk), kzRand(r, 0.1, dk, m), kzRand(r, 1, 1, h, n, 1)
		sp := &featureSpec{w: gemm.PackB(false, dk, m, w.F32, m), terms: []rowTerm{{kind: 'R', sign: 1, input: 1}, {kind: 'M', sign: 1, input: -1, axes: []int{-1}}},
			post: []rowOp{{kind: '+', c: 1e-4}, {kind: '*', c: 0.06}}}
		for i := 0; i < b.N; i++ {
			featureMap(e, []*tensor.Tensor{x, diag}, sp)
		}
	})
}

// BenchmarkKernelizedLinearShapes times the kernels at the linear variant's base shapes
// (8 heads of 64, n = 512): the elu feature map of the keys with their padding Mul, and the
// attention with V's padding Mul.
func BenchmarkKernelizedLinearShapes(b *testing.B) {
	r := rand.New(rand.NewSource(2))
	const h, n, dk = 8, 512, 64
	e := &exec{threads: 2}
	keep := kzRand(r, 1, 1, 1, n, 1)
	b.Run("elu-feature", func(b *testing.B) {
		x := kzRand(r, 1, 1, n, h, dk)
		sp := &eluSpec{alpha: 1, c: 1, xPerm: true, post: []rowOp{{kind: 'x', input: 1}}}
		for i := 0; i < b.N; i++ {
			eluFeature(e, []*tensor.Tensor{x, keep}, sp)
		}
	})
	b.Run("linear-attention", func(b *testing.B) {
		a, bk, v := kzRand(r, 1, 1, h, n, dk), kzRand(r, 1, 1, h, n, dk), kzRand(r, 1, 1, n, h, dk)
		sp := &linAttnSpec{keyAxis: -2, hasEps: true, eps: 1e-6, vPerm: []int{0, 2, 1, 3}, outPerm: []int{0, 2, 1, 3}, vScale: true}
		for i := 0; i < b.N; i++ {
			linearAttention(e, []*tensor.Tensor{a, bk, v, keep}, sp)
		}
	})
}

// TestFeatureMapInt8 runs the feature map with its projection packed as int8 (as an
// int8-attention program packs it, Program.packProjection) against the same map in fp32:
// the int8 kernel really ran (some feature differs), every row stays within int8's error
// (cosine at least 0.999, largest error under 10 % of the row's largest feature: exp turns
// the product's absolute error into a relative one), and the thread count changes no bit.
func TestFeatureMapInt8(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, c := range []struct{ b, n, k, m int }{{1, 1, 64, 266}, {2, 7, 5, 17}, {3, 97, 12, 29}, {1, 200, 64, 266}} {
		for _, mode := range []string{"row", "slab"} {
			t.Run(fmt.Sprintf("%v/%s", c, mode), func(t *testing.T) {
				// FAVOR+'s scaled inputs: x·d^(−1/4), so the products stay a few units
				x := kzRand(r, math.Pow(float64(c.k), -0.25), c.b, 2, c.n, c.k)
				w := kzRand(r, 1, c.k, c.m)
				pad, _ := tensor.New(tensor.Bool, c.b, 1, c.n, 1)
				for j := range pad.Bool {
					pad.Bool[j] = r.Intn(4) == 0
				}
				terms := []rowTerm{{kind: 'M', sign: 1, input: -1, axes: []int{-1}}}
				if mode == "slab" {
					terms = []rowTerm{{kind: 'S', sign: 1, input: 1, invalidWhen: true, axes: []int{2, 3}}}
				}
				run := func(pb *gemm.PackedB, threads int) *tensor.Tensor {
					sp := &featureSpec{w: pb, terms: terms}
					got, ok, err := featureMap(&exec{threads: threads}, []*tensor.Tensor{x, pad}, sp)
					if err != nil || !ok {
						t.Fatalf("ok %v, err %v", ok, err)
					}
					return got
				}
				fp := run(gemm.PackB(false, c.k, c.m, w.F32, c.m), 2)
				pb := gemm.PackBInt8(false, c.k, c.m, w.F32, c.m)
				q := run(pb, 1)
				differs := false
				for i := range q.F32 {
					differs = differs || q.F32[i] != fp.F32[i]
				}
				if !differs {
					t.Fatal("the int8 projection gives fp32's features bit for bit: the int8 kernel did not run")
				}
				for row := 0; row < len(q.F32)/c.m; row++ {
					g, f := q.F32[row*c.m:(row+1)*c.m], fp.F32[row*c.m:(row+1)*c.m]
					var dot, gg, ff, top, worst float64
					for j := range f {
						dot += float64(g[j]) * float64(f[j])
						gg += float64(g[j]) * float64(g[j])
						ff += float64(f[j]) * float64(f[j])
						top = max(top, math.Abs(float64(f[j])))
						worst = max(worst, math.Abs(float64(g[j])-float64(f[j])))
					}
					if cos := dot / math.Sqrt(gg*ff); !(cos >= 0.999) || !(worst <= 0.1*top) {
						t.Fatalf("row %d: cosine %.6f, error %.3g of %.3g", row, cos, worst, top)
					}
				}
				for _, threads := range []int{2, 3} {
					if got := run(pb, threads); fmt.Sprint(got.F32) != fmt.Sprint(q.F32) {
						t.Fatalf("%d threads give other features than 1", threads)
					}
				}
			})
		}
	}
}

// TestLinearAttentionOfFeatures holds the linear attention that computes its features
// itself (linearAttentionOf with featureRuns: the fused step of the feature maps and the
// attention reading them) bit for bit to the maps' outputs fed to linearAttention, in fp32
// and int8-attention, on 1 and 3 threads: the queries' map with its row, constant and
// sum-of-squares terms (the latter through a head split, heads merged after), the keys' map
// with its maximum over the slab's valid rows (a padding condition) computed first, alone and
// together, on lengths around the 96-row block.
func TestLinearAttentionOfFeatures(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	for _, c := range []struct{ b, h, n, k, m, dv int }{{1, 1, 1, 3, 5, 2}, {2, 2, 97, 12, 29, 8}, {1, 2, 200, 16, 266, 16}} {
		for _, mode := range []string{"row", "const", "sumsq-split"} {
			t.Run(fmt.Sprintf("%v/%s", c, mode), func(t *testing.T) {
				x := kzRand(r, 0.5, c.b, c.h, c.n, c.k)
				sp := &featureSpec{w: gemm.PackB(false, c.k, c.m, kzRand(r, 0.5, c.k, c.m).F32, c.m)}
				switch mode {
				case "row":
					sp.terms = []rowTerm{{kind: 'M', sign: 1, input: -1, axes: []int{-1}}}
				case "const":
					sp.terms = []rowTerm{{kind: 'c', sign: -1, c: 0.5, input: -1}}
				case "sumsq-split":
					sp.xPerm = true
					x = kzRand(r, 0.5, c.b, c.n, c.h, c.k)
					sp.terms = []rowTerm{{kind: 'Q', sign: 1, input: -1, scale: []rowOp{{kind: '/', c: 2}}}}
				}
				sp.post = []rowOp{{kind: '+', c: 1e-3}}
				// the keys' map: the slab's maximum over rows the padding does not mark
				xk := kzRand(r, 0.5, c.b, c.h, c.n, c.k)
				pad, _ := tensor.New(tensor.Bool, c.b, 1, c.n, 1)
				for j := range pad.Bool {
					pad.Bool[j] = j%c.n > 0 && r.Intn(4) == 0
				}
				spk := &featureSpec{w: gemm.PackB(false, c.k, c.m, kzRand(r, 0.5, c.k, c.m).F32, c.m)}
				spk.terms = []rowTerm{{kind: 'S', sign: 1, input: 1, invalidWhen: true, axes: []int{2, 3}}}
				spk.post = []rowOp{{kind: '+', c: 1e-3}, {kind: 'W', c: 0, input: 1}}
				kin := []*tensor.Tensor{xk, pad}
				v := kzRand(r, 1, c.b, c.h, c.n, c.dv)
				la := &linAttnSpec{keyAxis: -2, eps: 1e-3, hasEps: true}
				if mode == "sumsq-split" {
					la.outPerm = []int{0, 2, 1, 3}
				}
				for _, attn8 := range []bool{false, true} {
					if attn8 {
						sp.w = gemm.PackBInt8(false, c.k, c.m, sp.w.Unpack(), c.m)
						spk.w = gemm.PackBInt8(false, c.k, c.m, spk.w.Unpack(), c.m)
					}
					for _, threads := range []int{1, 3} {
						e := &exec{threads: threads, attn8: attn8}
						a, ok, err := featureMap(e, []*tensor.Tensor{x}, sp)
						if err != nil || !ok {
							t.Fatalf("feature map: ok %v, err %v", ok, err)
						}
						bk, ok, err := featureMap(e, kin, spk)
						if err != nil || !ok {
							t.Fatalf("keys' feature map: ok %v, err %v", ok, err)
						}
						want, ok, err := linearAttention(e, []*tensor.Tensor{a, bk, v}, la)
						if err != nil || !ok {
							t.Fatalf("linear attention: ok %v, err %v", ok, err)
						}
						fq, ok1 := prepareFeatures([]*tensor.Tensor{x}, sp)
						fk, ok2 := prepareFeatures(kin, spk)
						if !ok1 || !ok2 {
							t.Fatal("prepareFeatures declined")
						}
						for _, fused := range []struct {
							name   string
							in     []*tensor.Tensor
							fq, fk *featureRun
						}{{"queries", []*tensor.Tensor{nil, bk, v}, fq, nil}, {"keys", []*tensor.Tensor{a, nil, v}, nil, fk}, {"both", []*tensor.Tensor{nil, nil, v}, fq, fk}} {
							got, ok, err := linearAttentionOf(e, fused.in, fused.fq, fused.fk, la)
							if err != nil || !ok {
								t.Fatalf("fused %s: ok %v, err %v", fused.name, ok, err)
							}
							if fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) || fmt.Sprint(got.F32) != fmt.Sprint(want.F32) {
								t.Fatalf("attn8 %v, %d threads: the %s' features computed in place give other outputs", attn8, threads, fused.name)
							}
						}
					}
				}
			})
		}
	}
}
