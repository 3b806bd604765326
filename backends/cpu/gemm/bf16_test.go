package gemm

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// needBF16 skips t where this CPU has no bf16 kernels.
func needBF16(t *testing.T) {
	t.Helper()
	if path, why := BF16Path(); path == "" {
		t.Skipf("no bf16 path on this machine: %s", why)
	}
}

// TestBF16Round holds bf16Round to round-to-nearest-even on hand-picked values.
func TestBF16Round(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80},                       // 1
		{0x3f808000, 0x3f80},                       // tie, even stays
		{0x3f818000, 0x3f82},                       // tie, odd rounds up
		{0x3f808001, 0x3f81},                       // above the tie
		{0x3f807fff, 0x3f80},                       // below the tie
		{0xbf818000, 0xbf82},                       // negative tie
		{0x7f7fffff, 0x7f80},                       // max float rounds to +Inf
		{0x7f800000, 0x7f80},                       // +Inf
		{0xff800000, 0xff80},                       // -Inf
		{0x7f800001, 0x7fc0},                       // signalling NaN becomes quiet
		{0xffc12345, 0xffc1},                       // quiet NaN keeps sign and payload top
		{0x00000000, 0x0000}, {0x80000000, 0x8000}, // zeros
		{0x007fffff, 0x0000}, {0x807fffff, 0x8000}, // denormals flush
	} {
		if got := bf16Round(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("bf16Round(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

// bf16Awkward returns float32 bit patterns that probe the conversion's edges: ties, NaNs,
// infinities, denormals, the largest values, and random ones.
func bf16Awkward(rng *rand.Rand, n int) []float32 {
	fixed := []uint32{0, 0x80000000, 0x3f808000, 0x3f818000, 0x3f808001, 0x7f7fffff, 0xff7fffff,
		0x7f800000, 0xff800000, 0x7f800001, 0x7fbfffff, 0xffc00001, 0x00000001, 0x807fffff,
		0x00400000, 0x00008000, 0x00018000, 0x00800000, 0x007fffff, 0x7f7f8000, 0x3380ffff}
	out := make([]float32, 0, n)
	for _, u := range fixed {
		out = append(out, math.Float32frombits(u))
	}
	for len(out) < n {
		out = append(out, math.Float32frombits(rng.Uint32()))
	}
	return out[:n]
}

// TestBF16RoundHardware holds VCVTNEPS2BF16 (cvtBF16Fast) to bf16Round bit for bit on every
// kind of value, at lengths that leave tails.
func TestBF16RoundHardware(t *testing.T) {
	needBF16(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 15, 16, 17, 33, 1000, 4096 + 5} {
		src := bf16Awkward(rng, n)
		got := make([]uint16, n)
		if !cvtBF16Fast(got, src) {
			t.Fatal("cvtBF16Fast refused on a CPU with AVX512-BF16")
		}
		for i, v := range src {
			if want := bf16Round(v); got[i] != want {
				t.Fatalf("n=%d: VCVTNEPS2BF16(%#08x) = %#04x, bf16Round says %#04x", n, math.Float32bits(v), got[i], want)
			}
		}
	}
}

// randPairs returns n random pairs of bf16 values in [-2, 2)·scale, some exact zeros.
func randPairs(rng *rand.Rand, n int, scale float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		lo, hi := bf16Round((rng.Float32()*4-2)*scale), bf16Round((rng.Float32()*4-2)*scale)
		if rng.IntN(16) == 0 {
			lo = 0
		}
		out[i] = math.Float32frombits(uint32(lo) | uint32(hi)<<16)
	}
	return out
}

// TestBF16KernelsBitwise holds every sbgemm micro-kernel (packed and direct, every height) to
// bf16KernelTwin bit for bit.
func TestBF16KernelsBitwise(t *testing.T) {
	needBF16(t)
	kern := bf16Kernel
	rng := rand.New(rand.NewPCG(3, 4))
	directs := append([]directKernel{{kern.mr, kern.direct}}, kern.directEdge...)
	// At scale 1e-19 the products are denormal or near it: the kernels flush them.
	for _, scale := range []float32{1, 1e-19} {
		for _, kc := range []int{1, 2, 3, 4, 5, 8, 17, 256} {
			for _, flags := range []int{0, 1} {
				b := randPairs(rng, kc*kern.nr, scale)
				// Packed kernel.
				ap := randPairs(rng, kc*kern.mr, scale)
				ldc := kern.nr + 3
				c := make([]float32, kern.mr*ldc)
				for i := range c {
					c[i] = rng.Float32()*2 - 1
				}
				got, want := append([]float32(nil), c...), append([]float32(nil), c...)
				kern.fn(kc, &ap[0], &b[0], &got[0], ldc, flags, 0.75)
				bf16KernelTwin(kern.mr, kern.nr, kc, ap, b, want, ldc, flags, 0.75)
				sameBits(t, got, want, "packed", kern.mr, kc, flags, scale != 1)
				for _, d := range directs {
					lda := kc + 5
					a := randPairs(rng, d.mr*lda, scale)
					ap := make([]float32, kc*d.mr)
					for p := 0; p < kc; p++ {
						for i := 0; i < d.mr; i++ {
							ap[p*d.mr+i] = a[i*lda+p]
						}
					}
					c := c[:d.mr*ldc]
					got, want := append([]float32(nil), c...), append([]float32(nil), c...)
					d.fn(kc, &a[0], &b[0], &got[0], ldc, flags, 0.75, lda, &b[0])
					bf16KernelTwin(d.mr, kern.nr, kc, ap, b, want, ldc, flags, 0.75)
					sameBits(t, got, want, "direct", d.mr, kc, flags, scale != 1)
				}
			}
		}
	}
}

// sameBits fails t unless got and want agree bit for bit. With tiny set (products in and
// near the denormal range), a CPU other than the AMD Zen 5 whose VDPBF16PS the twin's
// flush rules were measured on may differ where a sum lands next to the normal range: there
// an element may instead be flushed or one ulp away (Intel documents the same rules, "DAZ
// in, FTZ out", without saying where tininess is detected).
func sameBits(t *testing.T, got, want []float32, kind string, mr, kc, flags int, tiny bool) {
	t.Helper()
	lenient := tiny && cpuVendor() != "AuthenticAMD"
	for i := range got {
		if lenient && nearlySame(got[i], want[i]) {
			continue
		}
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
			t.Fatalf("%s %d rows kc=%d flags=%d: c[%d] = %g (%#08x), twin %g (%#08x)", kind, mr, kc, flags, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// roundedCase returns a copy of g with A and B rounded to bf16 (alpha folded into A when
// it is not 1), so SgemmGeneric on it is the exact-input reference of Sbgemm on g.
func roundedCase(g *gemmCase) *gemmCase {
	r := *g
	r.a = append([]float32(nil), g.a...)
	r.b = append([]float32(nil), g.b...)
	for i, v := range r.a {
		r.a[i] = RoundBF16(g.alpha * v)
	}
	for i, v := range r.b {
		r.b[i] = RoundBF16(v)
	}
	r.alpha = 1
	return &r
}

// TestSbgemm checks Sbgemm over awkward shapes, transposes, alpha, beta and strides: against
// SgemmGeneric on the bf16-rounded inputs within fp32 summation error (the products are the
// same exact values; only the order and grouping of the sums differ), against the pure-Go
// twin bit for bit where the kernels run, and for the same bits at every thread count.
func TestSbgemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []int{1, 2, 3, 13, 33, 64, 100, 257}
	betas := []float32{0, 1, 0.5}
	alphas := []float32{1, 0.5}
	i := 0
	for _, m := range sizes {
		for _, n := range sizes {
			for _, k := range []int{1, 2, 7, 64, 513, 1030} {
				if testing.Short() && m*n*k > 1<<18 {
					continue // CI's race run: the small shapes, every edge case among them
				}
				i++
				tA, tB := i%2 == 1, i%3 == 1
				g := newCase(rng, tA, tB, m, n, k, alphas[i%2], betas[i%3], i%4)
				got := g.cloneC()
				g.run(got, Sbgemm)
				ref := roundedCase(g)
				want := ref.cloneC()
				ref.run(want, SgemmGeneric)
				ref.check(t, got, want)
				if kern := bf16Active(); kern != nil && i%5 == 0 {
					// The twin on the same pairs.
					ap, ta, ldap, bp, tb, ldbp, release := bf16Operands(g.transA, g.transB, m, n, k, g.alpha, g.a[g.offA:], g.lda, g.b[g.offB:], g.ldb)
					twin := g.cloneC()
					bf16Twin(ta, tb, m, n, Pairs(k), ap, ldap, bp, ldbp, g.beta, twin[g.offC:], g.ldc)
					release()
					for idx := range got {
						if math.Float32bits(got[idx]) != math.Float32bits(twin[idx]) {
							t.Fatalf("%v: kernels and twin differ at %d: %g vs %g", g, idx, got[idx], twin[idx])
						}
					}
				}
				if i%7 == 0 {
					par := g.cloneC()
					g.run(par, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
						SbgemmParallel(3, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					})
					for idx := range got {
						if math.Float32bits(got[idx]) != math.Float32bits(par[idx]) {
							t.Fatalf("%v: SbgemmParallel(3) differs from Sbgemm at %d", g, idx)
						}
					}
				}
			}
		}
	}
}

// TestPackBBF16 checks products with a PackBBF16 operand against Sbgemm bit for bit (both
// forms of A: float32 through SgemmPackedEpilogueAt and pairs through sbgemmPrepackedAt,
// on column ranges), and Unpack against the rounded B.
func TestPackBBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ m, n, k int }{{1, 1, 1}, {5, 33, 7}, {12, 64, 512}, {37, 96, 1030}, {200, 130, 64}} {
		for _, transB := range []bool{false, true} {
			g := newCase(rng, false, transB, sh.m, sh.n, sh.k, 1, 0, 3)
			want := g.cloneC()
			g.run(want, Sbgemm)
			pb := PackBBF16(transB, sh.k, sh.n, g.b[g.offB:], g.ldb)
			if !pb.BF16() || pb.K() != sh.k || pb.N() != sh.n {
				t.Fatalf("PackBBF16 shape %d×%d, bf16 %v", pb.K(), pb.N(), pb.BF16())
			}
			got := g.cloneC()
			SgemmPacked(sh.m, sh.n, sh.k, 1, g.a[g.offA:], g.lda, pb, 0, got[g.offC:], g.ldc)
			for idx := range got {
				if math.Float32bits(got[idx]) != math.Float32bits(want[idx]) {
					t.Fatalf("%v: SgemmPacked(bf16) differs from Sbgemm at %d: %g vs %g", g, idx, got[idx], want[idx])
				}
			}
			// Pairs converted once, two column ranges.
			kp := Pairs(sh.k)
			pairs := make([]uint32, sh.m*kp)
			toBF16Pairs(pairs, g.a[g.offA:], sh.m, sh.k, g.lda, 1)
			cols := g.cloneC()
			split := min(pb.ColAlign(), sh.n)
			if split%pb.ColAlign() != 0 {
				split = 0
			}
			sbgemmPrepackedAt(sh.m, 0, split, pairs, kp, pb, 0, cols[g.offC:], g.ldc, nil)
			sbgemmPrepackedAt(sh.m, split, sh.n, pairs, kp, pb, 0, cols[g.offC+split:], g.ldc, nil)
			for idx := range cols {
				if math.Float32bits(cols[idx]) != math.Float32bits(want[idx]) {
					t.Fatalf("%v: sbgemmPrepackedAt in two ranges differs at %d", g, idx)
				}
			}
			un := pb.Unpack()
			for p := 0; p < sh.k; p++ {
				for j := 0; j < sh.n; j++ {
					if w := RoundBF16(g.at(false, p, j)); un[p*sh.n+j] != w {
						t.Fatalf("Unpack[%d,%d] = %g, want %g", p, j, un[p*sh.n+j], w)
					}
				}
			}
		}
	}
}

// TestBF16PairsLayout pins the pair layout: the even k in the low half, a zero pad.
func TestBF16PairsLayout(t *testing.T) {
	a := []float32{1, 2, 3, 9, 4, 5, 6, 9} // 2×3, stride 4
	dst := make([]uint32, 4)
	toBF16Pairs(dst, a, 2, 3, 4, 1)
	h := func(x float32) uint32 { return uint32(bf16Round(x)) }
	want := []uint32{h(1) | h(2)<<16, h(3), h(4) | h(5)<<16, h(6)}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("pair %d = %#08x, want %#08x", i, dst[i], want[i])
		}
	}
}

// nearlySame reports whether x and y are within one ulp, or one of them is a flushed zero
// of a value at most twice the smallest normal.
func nearlySame(x, y float32) bool {
	a, b := math.Float32bits(x), math.Float32bits(y)
	if a == b || a+1 == b || b+1 == a {
		return true
	}
	const minNormal = 0x1p-126
	return (x == 0 && math.Abs(float64(y)) < 2*minNormal) || (y == 0 && math.Abs(float64(x)) < 2*minNormal)
}

// cpuVendor returns the vendor string of /proc/cpuinfo ("AuthenticAMD", "GenuineIntel"),
// or "" where it cannot be read.
func cpuVendor() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "vendor_id" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
