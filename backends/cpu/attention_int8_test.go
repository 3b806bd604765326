package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Options.Precision "int8-attention": the fused attention kernel's Q·Kᵀ and P·V on the
// int8 kernels (attention_int8.go), checked against a float64 statement of the same
// quantized arithmetic.

// attn8KBlock is the kernel's key block (attention.go's attnKBlock): V is quantized per
// channel over each block of keys, and the probabilities of a block are quantized against
// the running maximum the block reaches.
const attn8KBlock = 512

// u is the unit roundoff of float32.
const u = 0x1p-24

// expU8Err bounds the relative error of vec.ExpSumU8's exp (vec's TestExpU8Accuracy).
const expU8Err = 7e-6

// symQuant quantizes vals symmetrically as gemm.PackInt8Activation quantizes a column:
// scale max|v|/127 (float32), q = clamp(rne(float32(v·inv)), ±127) with inv =
// float32(127/max); scale 0 and q 0 for a zero column or one whose 127/max overflows.
func symQuant(vals []float32) (q []int32, scale float32) {
	q = make([]int32, len(vals))
	var a float32
	for _, v := range vals {
		a = max(a, float32(math.Abs(float64(v))))
	}
	inv := float32(127 / a)
	if a == 0 || math.IsInf(float64(inv), 0) {
		return q, 0
	}
	for p, v := range vals {
		q[p] = int32(max(-127, min(127, math.RoundToEven(float64(float32(v*inv))))))
	}
	return q, a / 127
}

// asymQuant quantizes a row of Q as the int8 products quantize the rows of A (gemm's
// quantizeRowsGo): u8 with a zero point, over the range widened to hold 0: s =
// float32((hi − lo)/255), inv = float32(1/s), z = rne(−lo·inv), q = clamp(rne(x·inv) + z,
// 0, 255); a zero row gets s = 1, z = 0.
func asymQuant(row []float32) (q []int32, s float32, z int32) {
	var lo, hi float32
	for _, x := range row {
		lo, hi = min(lo, x), max(hi, x)
	}
	q = make([]int32, len(row))
	s = float32((float64(hi) - float64(lo)) / 255)
	inv := float32(1 / float64(s))
	if s == 0 || math.IsInf(float64(inv), 0) {
		s, inv = 1, 1
	} else {
		z = int32(max(0, min(255, math.RoundToEven(float64(float32(-lo*inv))))))
	}
	for p, x := range row {
		q[p] = int32(max(0, min(255, math.RoundToEven(float64(float32(x*inv)))+float64(z))))
	}
	return q, s, z
}

// attn8Matrix is one (batch, head) matrix of an attention: Q (nq×dk), K (nk×dk, keys as
// rows), V (nk×dv), all row-major; alpha, the product of the scores' leading constant
// scalings (1/√dk), which the kernel folds into Q's row scales; and bias(i, j), what the
// ops after them add to score (i, j) (0, a finite bias or −Inf).
type attn8Matrix struct {
	q, k, v    []float32
	nq, nk     int
	dk, dv     int
	alpha      float32
	scale      float64 // the scaling as the graph writes it, for the exact attention
	bias       func(i, j int) float64
	ties, keys int // near-tie probabilities met, probabilities quantized (statistics)
}

// reference returns, for every output element, the float64 value of int8-attention's
// arithmetic (want), the bound on the kernel's distance from it (tol), and the exact
// float64 attention (exact).
//
// The reference quantizes exactly as the kernel does: Q per row (asymQuant, scale times
// alpha), K per key and V per channel of each key block (symQuant); the scores are the
// exact integer sums dequantized with the float32 scale product the kernels use, plus the
// bias. The softmax runs online over the key blocks like the kernel's, in float64: m the
// running maximum, e = exp(s − m), l the sum of the e (before quantization), and a block's
// P = clamp(rne(e·255), 0, 255)/255 times the dequantized V, the sums rescaled by exp(m_old
// − m_new) when the maximum grows; out = Σ/l.
//
// The kernel differs from this only by float32 rounding and its exp, bounded as follows
// (u = 2⁻²⁴):
//   - a score: one rounding of the dequantization and one of the bias added, ≤ 2u·|s|;
//     the maximum m moves by no more than u·|m|; s − m rounds once, ≤ u·|s − m|; the exp
//     of vec.ExpSumU8 is within δ = 7e-6 (vec's TestExpU8Accuracy: a cheaper exp for
//     probabilities kept to 1/255); so e is within a relative
//     ρ = u·(2|s| + |m| + |s − m|) + δ, and e·255 rounds once more (u).
//   - a quantized probability is then the reference's unless e·255 lies within 255·e·(ρ + u)
//     of a tie (k + ½): such a key may flip by one step, changing the sum by |V̂_jc|/255
//     (V̂ the dequantized value). tol sums these over the near-tie keys, with the bound
//     doubled for margin.
//   - everything else is relative to A = Σ_j P_j·|V̂_jc|/l: l's sum (16 float32 lanes
//     folded, ⌈512/16⌉ + 4 additions per value of a block, plus the rescaling), the
//     rescaling factors (ρ each), the dequantization of the P·V sums (3 roundings), the
//     accumulation over blocks (1) and the division by l (1; 2 with a single block of keys,
//     where 1/l is rounded and joins P's scale). tol adds ε·A with
//     ε = 2·((blocks + 2)·ρ_max + (41 + 4·blocks)·u).
//
// A tie that does flip uses up its whole share of tol, so the worst |got − want|/tol seen
// (0.98 at n = 700) comes from flips; without one the ratio stays near 0.02.
func (c *attn8Matrix) reference() (want, tol, exact []float64) {
	nq, nk, dk, dv := c.nq, c.nk, c.dk, c.dv
	kq := make([][]int32, nk)
	ks := make([]float32, nk)
	for j := 0; j < nk; j++ {
		kq[j], ks[j] = symQuant(c.k[j*dk : (j+1)*dk])
	}
	// V per channel over each key block.
	nkb := (nk + attn8KBlock - 1) / attn8KBlock
	vq := make([][]int32, nkb*dv) // block b, channel ch: the block's values of the channel
	vs := make([]float32, nkb*dv)
	for b := 0; b < nkb; b++ {
		k0, cols := b*attn8KBlock, min(attn8KBlock, nk-b*attn8KBlock)
		col := make([]float32, cols)
		for ch := 0; ch < dv; ch++ {
			for j := range col {
				col[j] = c.v[(k0+j)*dv+ch]
			}
			vq[b*dv+ch], vs[b*dv+ch] = symQuant(col)
		}
	}
	want, tol, exact = make([]float64, nq*dv), make([]float64, nq*dv), make([]float64, nq*dv)
	s := make([]float64, nk)
	o, ta, aa := make([]float64, dv), make([]float64, dv), make([]float64, dv)
	for i := 0; i < nq; i++ {
		qq, qs, z := asymQuant(c.q[i*dk : (i+1)*dk])
		rs := c.alpha * qs
		for j := 0; j < nk; j++ {
			var sum int64
			for p := 0; p < dk; p++ {
				sum += int64(qq[p]-z) * int64(kq[j][p])
			}
			s[j] = float64(sum)*float64(rs*ks[j]) + c.bias(i, j)
		}
		m, l := math.Inf(-1), 0.0
		clear(o)
		clear(ta)
		clear(aa)
		rho, blocks := 0.0, 0
		for b := 0; b < nkb; b++ {
			k0, cols := b*attn8KBlock, min(attn8KBlock, nk-b*attn8KBlock)
			mnew := m
			for _, x := range s[k0 : k0+cols] {
				mnew = max(mnew, x)
			}
			if math.IsInf(mnew, -1) {
				continue // every key so far masked: the block adds nothing
			}
			blocks++
			resc := math.Exp(m - mnew)
			for ch := range o {
				o[ch], ta[ch], aa[ch] = o[ch]*resc, ta[ch]*resc, aa[ch]*resc
			}
			l *= resc
			m = mnew
			for j := k0; j < k0+cols; j++ {
				d := s[j] - m
				e := math.Exp(d)
				l += e
				if d < -150 {
					continue // 0 in float32 as well
				}
				r := u*(2*math.Abs(s[j])+math.Abs(m)+math.Abs(d)) + expU8Err
				rho = max(rho, r)
				c.keys++
				x := e * 255
				pq := max(0, min(255, math.RoundToEven(x)))
				near := math.Abs(x-math.Floor(x)-0.5) <= 2*255*e*(r+u)
				if near {
					c.ties++
				}
				for ch := 0; ch < dv; ch++ {
					vh := float64(vq[b*dv+ch][j-k0]) * float64(vs[b*dv+ch])
					o[ch] += pq / 255 * vh
					aa[ch] += pq / 255 * math.Abs(vh)
					if near {
						ta[ch] += math.Abs(vh) / 255
					}
				}
			}
		}
		eps := 2 * (float64(blocks+2)*rho + float64(41+4*blocks)*u)
		for ch := 0; ch < dv; ch++ {
			want[i*dv+ch] = o[ch] / l // l = 0 (every key masked): NaN, as the kernel gives
			tol[i*dv+ch] = (ta[ch] + eps*aa[ch]) / l
		}
		// The exact attention, unquantized.
		mx := math.Inf(-1)
		for j := 0; j < nk; j++ {
			var dot float64
			for p := 0; p < dk; p++ {
				dot += float64(c.q[i*dk+p]) * float64(c.k[j*dk+p])
			}
			s[j] = dot*c.scale + c.bias(i, j)
			mx = max(mx, s[j])
		}
		var den float64
		for j := 0; j < nk; j++ {
			e := math.Exp(s[j] - mx)
			den += e
			for ch := 0; ch < dv; ch++ {
				exact[i*dv+ch] += e * float64(c.v[j*dv+ch])
			}
		}
		for ch := 0; ch < dv; ch++ {
			exact[i*dv+ch] /= den
		}
	}
	return want, tol, exact
}

// attn8Check holds the kernel's output got (one matrix, nq×dv) to the reference: within
// tol of want (NaN where want is NaN), and, where the quantization shows (an RMS distance
// from the exact attention above 1e-5), with an RMS distance from want at most a tenth of
// its distance from the exact attention, so the kernel is seen to compute the quantized
// arithmetic rather than something near the exact one. It returns the worst |got − want|/tol
// and the two RMS distances.
func attn8Check(t *testing.T, what string, got []float32, want, tol, exact []float64) (worst, rmsQ, rmsX float64) {
	t.Helper()
	var n int
	for i, w := range want {
		g := float64(got[i])
		if math.IsNaN(w) {
			if !math.IsNaN(g) {
				t.Fatalf("%s: element %d = %g, want NaN (every key masked)", what, i, g)
			}
			continue
		}
		d := math.Abs(g - w)
		if !(d <= tol[i]) {
			t.Fatalf("%s: element %d = %.9g, quantized reference %.9g (exact %.9g): off by %.3g, tolerance %.3g", what, i, g, w, exact[i], d, tol[i])
		}
		if tol[i] > 0 {
			worst = max(worst, d/tol[i])
		}
		rmsQ += d * d
		rmsX += (g - exact[i]) * (g - exact[i])
		n++
	}
	if n == 0 {
		return 0, 0, 0
	}
	rmsQ, rmsX = math.Sqrt(rmsQ/float64(n)), math.Sqrt(rmsX/float64(n))
	// Where the quantization itself is below float32 noise (one key: P = 1 and V's
	// values are each ±127 steps of their own scale) the two distances are alike.
	if rmsX > 1e-5 && rmsQ > rmsX/10 {
		t.Fatalf("%s: RMS distance %.3g from the quantized reference, %.3g from the exact attention: the kernel does not compute the quantized arithmetic", what, rmsQ, rmsX)
	}
	return worst, rmsQ, rmsX
}

// closeness compares a with b (rows of dv values): the smallest and the mean cosine
// similarity of their rows, and the relative RMS distance ‖a − b‖/‖b‖. Rows NaN in both
// are passed over; a NaN in one only makes the smallest cosine −1.
func closeness(a, b []float32, dv int) (minCos, meanCos, rel float64) {
	minCos = 1
	var sum, rows, diff, norm float64
	for r := 0; r+dv <= len(a); r += dv {
		var ab, aa, bb float64
		nan := 0
		for j := r; j < r+dv; j++ {
			x, y := float64(a[j]), float64(b[j])
			if math.IsNaN(x) != math.IsNaN(y) {
				return -1, -1, math.Inf(1)
			}
			if math.IsNaN(x) {
				nan++
				continue
			}
			ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
			diff, norm = diff+(x-y)*(x-y), norm+y*y
		}
		if nan > 0 || aa == 0 && bb == 0 {
			continue
		}
		c := ab / math.Sqrt(aa*bb)
		minCos, sum, rows = min(minCos, c), sum+c, rows+1
	}
	if rows == 0 {
		return 1, 1, 0
	}
	return minCos, sum / rows, math.Sqrt(diff / norm)
}

// checkClose fails unless int8-attention's output a stays close to fp32 attention's b:
// 8-bit steps are 0.4 % of each operand's range, and their errors add in quadrature over
// keys and channels, so the whole output is expected within a few percent (relative RMS
// < 3 %) and a row's direction within about that (mean row cosine > 0.9995); the worst of
// thousands of rows, one whose weighted values nearly cancel, may be off by more (smallest
// row cosine > 0.995, 10 % of the row). On these inputs: relative RMS 0.7-2.2 %, mean
// cosine ≥ 0.99977, smallest 0.9986 (causal, 12 channels).
func checkClose(t *testing.T, what string, a, b []float32, dv int) {
	t.Helper()
	minCos, meanCos, rel := closeness(a, b, dv)
	t.Logf("%s: against fp32 attention: row cosine min %.6f mean %.7f, relative RMS %.4f", what, minCos, meanCos, rel)
	if minCos < 0.995 || meanCos < 0.9995 || rel > 0.03 {
		t.Errorf("%s: int8-attention is off fp32 attention: row cosine min %.6f mean %.7f, relative RMS %.4f", what, minCos, meanCos, rel)
	}
}

// compileAttn8 compiles g with Precision int8 (attention in fp32) and int8-attention, and
// checks that both fuse the attention (count each) into a FusedAttention step.
func compileAttn8(t *testing.T, g *graph.Graph, threads int, fusion string, count int) (fp, i8 *cpu.Program) {
	t.Helper()
	progs := make([]*cpu.Program, 2)
	for n, prec := range []string{"int8", "int8-attention"} {
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads, Precision: prec})
		if err != nil {
			t.Fatal(err)
		}
		prog := p.(*cpu.Program)
		if f := prog.Fusions(); f[fusion] != count {
			t.Fatalf("%s: fusions %v, want %d %s", prec, f, count, fusion)
		}
		fused := 0
		for _, k := range prog.Kernels() {
			if k == "FusedAttention" {
				fused++
			}
		}
		if fused != count {
			t.Fatalf("%s: %d FusedAttention steps (%v), want %d", prec, fused, prog.Kernels(), count)
		}
		progs[n] = prog
	}
	return progs[0], progs[1]
}

func run1(t *testing.T, p *cpu.Program, in map[string]*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	out, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out["y"]
}

// attnKtGraph is attnGraph with Kᵀ fed as it is multiplied, (b, h, dk, n) (the kernel then
// packs Kᵀ's rows, the untransposed form), and the scores multiplied by 0.1 (a Mul, folded
// as '*'; 0.1 is no power of two) instead of divided by √dk, then, with mask, an additive
// key-padding mask (b, 1, 1, n) added.
func attnKtGraph(t *testing.T, dk int, mask bool) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("attn-kt")
	q := b.Input("q", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Sym("n"), graph.Fixed(int64(dk)))
	kt := b.Input("kt", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Fixed(int64(dk)), graph.Sym("n"))
	v := b.Input("v", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Sym("n"), graph.Sym("dv"))
	s := b.Mul(b.MatMul(q, kt), b.ConstFloat(0.1))
	if mask {
		s = b.Add(s, b.Input("mask", tensor.Float32, graph.Sym("b"), graph.Fixed(1), graph.Fixed(1), graph.Sym("n")))
	}
	b.Output("y", b.MatMul(b.Softmax(s, -1), v), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// slab returns the (batch b, head h) matrix of x (B, H, rows, cols) as a slice.
func slab(x *tensor.Tensor, b, h int) []float32 {
	H, rows, cols := x.Shape[1], x.Shape[2], x.Shape[3]
	off := (b*H + h) * rows * cols
	return x.F32[off : off+rows*cols]
}

// transposed returns the rows×cols matrix m as cols×rows.
func transposed(m []float32, rows, cols int) []float32 {
	out := make([]float32, len(m))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			out[j*rows+i] = m[i*cols+j]
		}
	}
	return out
}

// TestInt8AttentionReference compiles one attention block with Precision "int8" and
// "int8-attention" (both fuse it into one FusedAttention step) and holds the
// int8-attention result, matrix by matrix, to the float64 statement of its quantized
// arithmetic (attn8Matrix.reference, whose comment derives the tolerance), on n = 1, 37,
// 512 and 700 (two key blocks, each with its own V scales and a rescaling between them),
// with a key-padding mask as an additive bias (−Inf and finite values) and as Where, a
// batch whose first key block is wholly padded (the block adds nothing and the second
// starts the sums) and one where only key 0 is left, Kᵀ given transposed or not, and
// queries scaled up so that most probabilities are small, on every int8 path (gemm's
// SetInt8Path, the rows of probabilities u8 or u16). It also checks that the result
// stays close to fp32 attention (checkClose, against the Precision "int8" program, whose
// attention is fp32) and does not depend on the thread count (bitwise).
func TestInt8AttentionReference(t *testing.T) {
	r := rand.New(rand.NewSource(81))
	cases := []struct {
		b, h, n, dk, dv int
		mask            string // "", "bias" (additive, b11n), "where" (b11n)
		kt              bool   // Kᵀ fed as (b, h, dk, n)
		qscale          float32
	}{
		{1, 1, 1, 64, 64, "", false, 1},
		{2, 3, 37, 64, 40, "where", false, 1},
		{2, 2, 37, 48, 24, "bias", true, 3},
		{1, 2, 512, 64, 64, "bias", false, 2},
		{3, 2, 700, 64, 48, "bias", false, 2},
		{1, 1, 700, 32, 16, "", true, 1},
	}
	for _, c := range cases {
		name := fmt.Sprintf("b%d_h%d_n%d_dk%d_dv%d_%s_kt%v", c.b, c.h, c.n, c.dk, c.dv, c.mask, c.kt)
		t.Run(name, func(t *testing.T) {
			var g *graph.Graph
			alpha, scale := float32(0.1), float64(float32(0.1))
			if c.kt {
				if c.mask == "where" {
					t.Fatal("attnKtGraph takes an additive mask only")
				}
				g = attnKtGraph(t, c.dk, c.mask == "bias")
			} else {
				mask := ""
				if c.mask != "" {
					mask = "b11n"
				}
				g = attnGraph(t, c.dk, mask, c.mask == "where")
				sq := float32(math.Sqrt(float64(c.dk)))
				alpha, scale = 1/sq, 1/float64(sq)
			}
			fp, i8 := compileAttn8(t, g, 2, "attention", 1)
			q, k, v := randT(r, c.b, c.h, c.n, c.dk), randT(r, c.b, c.h, c.n, c.dk), randT(r, c.b, c.h, c.n, c.dv)
			for i := range q.F32 {
				q.F32[i] *= c.qscale
			}
			in := map[string]*tensor.Tensor{"q": q, "v": v}
			if c.kt {
				kt, _ := tensor.New(tensor.Float32, c.b, c.h, c.dk, c.n)
				for b := 0; b < c.b; b++ {
					for h := 0; h < c.h; h++ {
						copy(slab(kt, b, h), transposed(slab(k, b, h), c.n, c.dk))
					}
				}
				in["kt"] = kt
			} else {
				in["k"] = k
			}
			// The mask: in batch 1 the keys from n/2 padded, or with two key blocks the
			// whole first block; in batch 2 only key 0 kept; in batch 0 every fifth key
			// biased by a finite amount (additive form only).
			bias := make([]float64, c.b*c.n)
			if c.mask != "" {
				biasT, _ := tensor.New(tensor.Float32, c.b, 1, 1, c.n)
				cond, _ := tensor.New(tensor.Bool, c.b, 1, 1, c.n)
				for b := 0; b < c.b; b++ {
					for j := 0; j < c.n; j++ {
						x := 0.0
						switch {
						case b == 1 && c.n > attn8KBlock:
							if j < attn8KBlock {
								x = math.Inf(-1) // the first key block wholly padded
							}
						case b == 1:
							if j >= c.n/2 && j > 0 {
								x = math.Inf(-1)
							}
						case b == 2:
							if j > 0 {
								x = math.Inf(-1) // only key 0 left
							}
						case c.mask == "bias" && j%5 == 2:
							x = float64(float32(-3 * r.Float64()))
						}
						if c.mask == "where" && !math.IsInf(x, -1) {
							x = 0
						}
						bias[b*c.n+j] = x
						biasT.F32[b*c.n+j] = float32(x)
						cond.Bool[b*c.n+j] = !math.IsInf(x, -1)
					}
				}
				in["mask"] = biasT
				if c.mask == "where" {
					in["mask"] = cond
				}
			}
			type refs struct{ want, tol, exact []float64 }
			var mats []refs
			ties, keys := 0, 0
			for b := 0; b < c.b; b++ {
				for h := 0; h < c.h; h++ {
					bb := b
					m := &attn8Matrix{
						q: slab(q, b, h), k: slab(k, b, h), v: slab(v, b, h),
						nq: c.n, nk: c.n, dk: c.dk, dv: c.dv, alpha: alpha, scale: scale,
						bias: func(i, j int) float64 { return bias[bb*c.n+j] },
					}
					want, tol, exact := m.reference()
					mats = append(mats, refs{want, tol, exact})
					ties, keys = ties+m.ties, keys+m.keys
				}
			}
			// Every int8 path: the u8 ones quantize the probabilities in the exp's pass
			// (vec.ExpSumU8), the avx2 one (u16 rows) after it (QuantizeUnit).
			var worst, rq, rx float64
			for _, path := range gemm.Int8Paths() {
				out := func() *tensor.Tensor {
					if err := gemm.SetInt8Path(path); err != nil {
						t.Fatal(err)
					}
					defer gemm.SetInt8Path("")
					return run1(t, i8, in)
				}()
				for b := 0; b < c.b; b++ {
					for h := 0; h < c.h; h++ {
						r := mats[b*c.h+h]
						w, q1, x1 := attn8Check(t, fmt.Sprintf("%s %s (%d, %d)", name, path, b, h), slab(out, b, h), r.want, r.tol, r.exact)
						worst, rq, rx = max(worst, w), max(rq, q1), max(rx, x1)
					}
				}
			}
			got := run1(t, i8, in)
			ref := run1(t, fp, in)
			t.Logf("worst |got−want|/tol %.3f; RMS from the quantized reference ≤ %.3g, from exact ≤ %.3g; %d of %d quantized probabilities near a tie", worst, rq, rx, ties, keys)
			checkClose(t, name, got.F32, ref.F32, c.dv)
			if c.n >= attn8KBlock {
				p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 3, Precision: "int8-attention"})
				if err != nil {
					t.Fatal(err)
				}
				other := run1(t, p.(*cpu.Program), in)
				for i := range got.F32 {
					if math.Float32bits(got.F32[i]) != math.Float32bits(other.F32[i]) {
						t.Fatalf("threads 3: element %d = %g, threads 2 gave %g", i, other.F32[i], got.F32[i])
					}
				}
			}
		})
	}
}

// TestInt8AttentionCausal runs causal attention (TestFusedAttentionCausal's graphs: a −∞
// causal mask, whose key blocks past a query block are skipped and whose blocks across the
// diagonal are cut short, their keys past the block's last query quantized as 0, and a
// finite −1e9 one, applied in full) with a padded sequence under int8-attention, and holds
// it to the quantized reference, and close to fp32 attention.
func TestInt8AttentionCausal(t *testing.T) {
	r := rand.New(rand.NewSource(83))
	forms := map[string]causalForm{}
	for _, f := range causalForms() {
		forms[f.name] = f
	}
	const batch = 2
	for _, c := range []struct {
		form string
		skip bool // −∞: blocks past the diagonal skipped, blocks across it cut short
	}{{"zoo-greater-where-plus-pad", true}, {"finite-mask-value", false}} {
		t.Run(c.form, func(t *testing.T) {
			g := causalGraph(t, forms[c.form], r)
			fp, i8 := compileAttn8(t, g, 2, "attention+causal", 1)
			for _, n := range []int{37, 700} {
				in := map[string]*tensor.Tensor{
					"q": randT(r, batch, formH, n, formDK), "k": randT(r, batch, formH, n, formDK), "v": randT(r, batch, formH, n, formDK),
				}
				pad, _ := tensor.New(tensor.Bool, batch, n)
				for j := 2 * n / 3; j < n; j++ {
					pad.Bool[n+j] = true // sequence 1 padded from 2n/3
				}
				in["pad"] = pad
				got := run1(t, i8, in)
				ref := run1(t, fp, in)
				sq := float32(math.Sqrt(formDK))
				var worst float64
				for b := 0; b < batch; b++ {
					for h := 0; h < formH; h++ {
						bb := b
						m := &attn8Matrix{
							q: slab(in["q"], b, h), k: slab(in["k"], b, h), v: slab(in["v"], b, h),
							nq: n, nk: n, dk: formDK, dv: formDK, alpha: 1 / sq, scale: 1 / float64(sq),
							bias: func(i, j int) float64 {
								x := 0.0
								if j > i {
									x = -1e9
									if c.skip {
										x = math.Inf(-1)
									}
								}
								if pad.Bool[bb*n+j] {
									x = math.Inf(-1)
								}
								return x
							},
						}
						want, tol, exact := m.reference()
						w, _, _ := attn8Check(t, fmt.Sprintf("%s n=%d (%d, %d)", c.form, n, b, h), slab(got, b, h), want, tol, exact)
						worst = max(worst, w)
					}
				}
				t.Logf("n=%d: worst |got−want|/tol %.3f", n, worst)
				checkClose(t, fmt.Sprintf("%s n=%d", c.form, n), got.F32, ref.F32, formDK)
			}
		})
	}
}

// TestInt8AttentionTraining: a training step's forward attention keeps its log-sum-exp for
// the backward pass and stays fp32 under int8-attention (attention_int8.go), so a training
// graph compiled with int8-attention fuses the same "attention-train" steps and gives the
// loss and every gradient bit for bit as with Precision "int8".
func TestInt8AttentionTraining(t *testing.T) {
	set := map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64}
	train := vanillaTrainGraph(t, set)
	var progs [2]*cpu.Program
	for i, prec := range []string{"int8", "int8-attention"} {
		p, err := cpu.Backend{}.Compile(train, backends.Options{Threads: 2, Precision: prec})
		if err != nil {
			t.Fatal(err)
		}
		progs[i] = p.(*cpu.Program)
		if f := progs[i].Fusions(); f["attention-train"] != 2 {
			t.Fatalf("%s: fusions %v, want 2 attention-train", prec, f)
		}
	}
	r := rand.New(rand.NewSource(85))
	for _, n := range []int{9, 67} {
		in := trainInputs(r, 2, n)
		runBitwise(t, fmt.Sprintf("n=%d", n), progs[1], progs[0], in)
	}
}

// TestInt8AttentionEncoder compiles a small vanilla encoder (2 layers, 4 heads of 16) with
// int8 and int8-attention: both fuse both attention blocks, and the int8-attention
// program's outputs stay close (checkClose) to the int8 program's, whose attention is fp32,
// on lengths of one, odd ones and past a key block, with padding.
func TestInt8AttentionEncoder(t *testing.T) {
	g := vanillaBase(t, map[string]any{"layers": int64(2), "d_model": int64(64), "heads": int64(4), "d_ff": int64(128)})
	fp, i8 := compileAttn8(t, g, 2, "attention", 2)
	r := rand.New(rand.NewSource(87))
	for _, sh := range []struct{ batch, n int }{{1, 1}, {2, 37}, {2, 600}} {
		in := encoderInputs(sh.batch, sh.n)
		for i := range in["tokens"].I64 {
			in["tokens"].I64[i] = 1 + r.Int63n(256)
		}
		for j := 2 * sh.n / 3; j < sh.n && sh.batch > 1; j++ {
			in["key_padding_mask"].Bool[sh.n+j] = true
		}
		a, err := i8.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fp.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range b {
			if want.DType != tensor.Float32 {
				continue
			}
			checkClose(t, fmt.Sprintf("b=%d n=%d %s", sh.batch, sh.n, name), a[name].F32, want.F32, want.Shape[len(want.Shape)-1])
		}
	}
}

// TestInt8AttentionKernelized compiles the kernelized variants (linear, performer) with int8
// and int8-attention: int8-attention runs their attention's two products (Vᵀ·φ(K) and
// φ(Q)·(Vᵀ·φ(K))ᵀ) in int8 too, so the hidden states differ from int8's, yet stay as close
// to them as softmax attention's do (checkClose), with padding, and do not depend on the
// thread count.
func TestInt8AttentionKernelized(t *testing.T) {
	_, in := smallBuiltins()
	for _, name := range []string{"linear", "performer"} {
		t.Run(name, func(t *testing.T) {
			g := smallBuiltin(t, name)
			outs := map[string]*tensor.Tensor{}
			for _, o := range []struct {
				prec    string
				threads int
			}{{"int8", 2}, {"int8-attention", 2}, {"int8-attention", 1}} {
				p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: o.threads, Precision: o.prec})
				if err != nil {
					t.Fatal(err)
				}
				if f := p.(*cpu.Program).Fusions(); f["linear-attention"] == 0 {
					t.Fatalf("%s: the linear attention is not fused: %v", o.prec, f)
				}
				out, err := p.Run(context.Background(), in)
				p.Close()
				if err != nil {
					t.Fatal(err)
				}
				outs[fmt.Sprint(o.prec, o.threads)] = out["hidden"]
			}
			i8, a8 := outs["int82"], outs["int8-attention2"]
			if same(i8.F32, a8.F32) {
				t.Fatal("int8-attention's hidden states equal int8's bit for bit: the attention's products were not quantized")
			}
			if !same(a8.F32, outs["int8-attention1"].F32) {
				t.Fatal("int8-attention's hidden states differ between 1 and 2 threads")
			}
			checkClose(t, name, a8.F32, i8.F32, i8.Shape[len(i8.Shape)-1])
		})
	}
}
