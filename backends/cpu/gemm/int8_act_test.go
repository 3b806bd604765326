package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/vec"
)

// The run-time int8 packing of attention's keys and values (PackInt8Activation, with the
// vector routines behind absMax, absMaxCols and quantS8Row) and the fixed-scale quantization
// of probabilities (Int8Rows.QuantizeUnit).

// actLengths are the lengths the quantization routines are tested on: empty, below, at and
// past each vector width (8 and 16 floats, and 32 for the AVX2 s8 routine, which packs four
// ymm into one) and long.
var actLengths = []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000}

// actFastWidths returns how many leading values of n absMaxFast (and absMaxColsFast) and
// quantS8Fast do in vector code at the named kernel level: multiples of 16 at avx512, of 8
// (absolute maxima) and 32 (s8) at avx2, none at generic.
func actFastWidths(level string, n int) (absDone, quantDone int) {
	switch level {
	case "avx512":
		return n &^ 15, n &^ 15
	case "avx2":
		return n &^ 7, n &^ 31
	}
	return 0, 0
}

// actAwkward holds the values whose magnitude bits are awkward for absMax: zeros of both
// signs, denormals, NaNs (quiet, signalling with a payload, negative), infinities, the
// largest finite values and the smallest normal one.
var actAwkward = []float32{
	0, float32(math.Copysign(0, -1)),
	math.Float32frombits(1), math.Float32frombits(0x80000001), // ±the smallest denormal
	1e-40, -1e-40, math.Float32frombits(0x007fffff), // the largest denormal
	math.SmallestNonzeroFloat32, 0x1p-126, -0x1p-126,
	math.Float32frombits(0x7fc00000), math.Float32frombits(0x7f800001), math.Float32frombits(0x7fc12345),
	math.Float32frombits(0xffc00000), math.Float32frombits(0xff800001),
	float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, math.Float32frombits(0x7f7ffffe),
	1, -1, 126.5, -2.5, 0.5,
}

// actValueSets returns the inputs the absolute-maximum routines are tested on, n values
// each: random magnitudes over twelve decades, awkward values mixed into them, one awkward
// value alone at every lane position class (first, last, a random one), only −0s, only
// denormals.
func actValueSets(rng *rand.Rand, n int) map[string][]float32 {
	random := func() float32 {
		return float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*12-6))
	}
	sets := map[string][]float32{}
	mk := func(name string, f func(p int) float32) {
		x := make([]float32, n)
		for p := range x {
			x[p] = f(p)
		}
		sets[name] = x
	}
	mk("random", func(int) float32 { return random() })
	mk("mixed", func(int) float32 {
		if rng.IntN(3) == 0 {
			return actAwkward[rng.IntN(len(actAwkward))]
		}
		return random()
	})
	mk("negzero", func(int) float32 { return float32(math.Copysign(0, -1)) })
	mk("denormal", func(int) float32 { return math.Float32frombits(uint32(rng.IntN(0x800000)) | uint32(rng.IntN(2))<<31) })
	if n > 0 {
		for _, v := range []float32{float32(math.NaN()), math.Float32frombits(0xff800001), float32(math.Inf(-1)), -math.MaxFloat32} {
			for _, at := range []int{0, n - 1, rng.IntN(n)} {
				x := make([]float32, n)
				for p := range x {
					x[p] = float32(rng.NormFloat64())
				}
				x[at] = v
				sets[fmt.Sprintf("%#x@%d", math.Float32bits(v), at)] = x
			}
		}
	}
	return sets
}

// TestActAbsMaxTwins holds absMax and absMaxCols, and their vector parts alone
// (absMaxFast, absMaxColsFast), to the Go statements absMaxGo and absMaxColsGo bit for bit
// at every kernel level this machine has, on every length of actLengths, at four
// alignments, and checks that the vector code takes the leading multiple of its width and
// that absMaxCols writes no accumulator past the row.
func TestActAbsMaxTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, n := range actLengths {
				for name, vals := range actValueSets(rng, n) {
					for off := 0; off < 4; off++ {
						buf := make([]float32, n+off)
						x := buf[off:]
						copy(x, vals)
						what := fmt.Sprintf("%s n=%d %s off=%d", lv, n, name, off)
						if got, want := absMax(x), absMaxGo(x); got != want {
							t.Fatalf("%s: absMax = %#x, absMaxGo %#x", what, got, want)
						}
						bits, done := absMaxFast(x)
						wantDone, _ := actFastWidths(lv, n)
						if done != wantDone {
							t.Fatalf("%s: absMaxFast did %d values, want %d", what, done, wantDone)
						}
						if want := absMaxGo(x[:done]); bits != want {
							t.Fatalf("%s: absMaxFast = %#x over %d values, absMaxGo %#x", what, bits, done, want)
						}

						// Accumulators starting from random bits, some of them NaN or
						// infinite already, with three guards past the row.
						acc := make([]uint32, n+3)
						for j := range acc {
							switch rng.IntN(4) {
							case 0:
								acc[j] = 0
							case 1:
								acc[j] = 0x7f800000 + uint32(rng.IntN(0x800000))
							default:
								acc[j] = math.Float32bits(float32(rng.NormFloat64()*math.Pow(10, rng.Float64()*12-6))) &^ (1 << 31)
							}
						}
						want := append([]uint32(nil), acc...)
						absMaxColsGo(want[:n], x)
						got := append([]uint32(nil), acc...)
						absMaxCols(got, x)
						fast := append([]uint32(nil), acc...)
						done = absMaxColsFast(fast, x)
						if done != wantDone {
							t.Fatalf("%s: absMaxColsFast did %d values, want %d", what, done, wantDone)
						}
						for j := range acc {
							if got[j] != want[j] {
								t.Fatalf("%s: absMaxCols acc[%d] = %#x, absMaxColsGo %#x (was %#x)", what, j, got[j], want[j], acc[j])
							}
							if j < done && fast[j] != want[j] || j >= done && fast[j] != acc[j] {
								t.Fatalf("%s: absMaxColsFast acc[%d] = %#x (did %d), was %#x, absMaxColsGo %#x", what, j, fast[j], done, acc[j], want[j])
							}
						}
					}
				}
			}
		})
	}
}

// actTie returns an x with float32(x·inv) = y exactly (y a half-integer: a tie of the
// rounding), found among the floats next to y/inv, or false when none of them is one.
func actTie(y, inv float32) (float32, bool) {
	x := float32(float64(y) / float64(inv))
	up, down := x, x
	for range 4 {
		for _, c := range []float32{up, down} {
			if float32(c*inv) == y {
				return c, true
			}
		}
		up, down = math.Nextafter32(up, float32(math.Inf(1))), math.Nextafter32(down, float32(math.Inf(-1)))
	}
	return 0, false
}

// actInverses are the inverse scales quantS8 is tested with: powers of two (every tie
// exact), 127/max for maxima of many sizes, the largest that does not overflow (whose
// values are denormals), and small ones (values near 10⁸).
var actInverses = []float32{1, 0.5, 2, 0x1p-20, float32(127 / 3.5), float32(127 / 0.0123), float32(127 / 7.7e5), float32(127 / 4e-37), float32(127 / 1e-30), 127}

// actQuantInput returns a value x for which quantS8(x, inv) is within its contract
// (|float32(x·inv)| < 127.5, as inv = float32(127/max|column|) makes every value of the
// column): ties k + ½ where one exists, their neighbours, ±0, denormals, values whose
// product is nearly ±127.5, and random ones.
func actQuantInput(rng *rand.Rand, inv float32) float32 {
	for {
		var x float32
		switch rng.IntN(7) {
		case 0, 1:
			y := float32(rng.IntN(255)-127) + 0.5
			t, ok := actTie(y, inv)
			if !ok {
				continue
			}
			x = t
			if rng.IntN(3) == 0 {
				x = math.Nextafter32(x, float32(math.Inf(2*rng.IntN(2)-1)))
			}
		case 2:
			x = []float32{0, float32(math.Copysign(0, -1)), math.Float32frombits(1), math.Float32frombits(0x80000001), 1e-40, -3e-39}[rng.IntN(6)]
		case 3:
			x = float32(float64(127.49) / float64(inv))
			if rng.IntN(2) == 0 {
				x = -x
			}
		default:
			x = float32((rng.Float64()*254.9 - 127.45) / float64(inv))
		}
		if p := float32(x * inv); p > -127.5 && p < 127.5 {
			return x
		}
	}
}

// TestActQuantS8Twins holds quantS8Row, with one inverse scale and with one per value, to
// its Go statement quantS8 bit for bit at every kernel level, on every length of
// actLengths at four alignments (checking that no byte past the row is written, that the
// vector code takes the leading multiple of its width and, with one inverse, the sums
// both return), and holds quantS8 to its formula: clamp(round-half-even(float32(x·inv)),
// −127, 127).
//
// Only inputs within the routines' contract are used (|x·inv| < 127.5, which every column
// packed by PackInt8Activation satisfies; the generator's comment says so): outside it the
// vector code saturates to −128 where the Go statement clamps to −127 (NaN, ±Inf, and
// products of ±127.5 or more); no caller passes such values (a NaN or infinite column's
// values are set to 0, see TestPackInt8ActivationColumns).
func TestActQuantS8Twins(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, n := range actLengths {
				for _, perValue := range []bool{false, true} {
					for trial := 0; trial < 4; trial++ {
						off := trial
						one := actInverses[rng.IntN(len(actInverses))]
						var inv []float32
						if perValue {
							inv = make([]float32, n+off)[off:]
							for p := range inv {
								inv[p] = actInverses[rng.IntN(len(actInverses))]
							}
						}
						x := make([]float32, n+off)[off:]
						for p := range x {
							in := one
							if perValue {
								in = inv[p]
							}
							x[p] = actQuantInput(rng, in)
						}
						what := fmt.Sprintf("%s n=%d perValue=%v off=%d inv=%g", lv, n, perValue, off, one)
						dst := make([]int8, n+off+3)[off:]
						for p := range dst {
							dst[p] = 0x5a
						}
						sum := quantS8Row(dst, x, one, inv)
						fast := make([]int8, n+3)
						for p := range fast {
							fast[p] = 0x5a
						}
						done, fastSum := quantS8Fast(fast, x, one, inv)
						if _, wantDone := actFastWidths(lv, n); done != wantDone {
							t.Fatalf("%s: quantS8Fast did %d values, want %d", what, done, wantDone)
						}
						// With one inverse both return the sum of what they wrote (the
						// column sum of a transposed pack); with one per value, 0.
						var wantSum, wantFast int32
						for p := 0; p < n && !perValue; p++ {
							wantSum += int32(quantS8(x[p], one))
							if p < done {
								wantFast += int32(quantS8(x[p], one))
							}
						}
						if sum != wantSum || !perValue && fastSum != wantFast {
							t.Fatalf("%s: quantS8Row sum %d, want %d; quantS8Fast sum %d of %d values, want %d", what, sum, wantSum, fastSum, done, wantFast)
						}
						for p := range dst {
							if p >= n {
								if dst[p] != 0x5a || fast[p] != 0x5a {
									t.Fatalf("%s: byte %d past the row written: %d, %d", what, p, dst[p], fast[p])
								}
								continue
							}
							in := one
							if perValue {
								in = inv[p]
							}
							want := quantS8(x[p], in)
							if dst[p] != want {
								t.Fatalf("%s: x[%d] = %g (%#x) · %g → %d, quantS8 %d", what, p, x[p], math.Float32bits(x[p]), in, dst[p], want)
							}
							if p < done && fast[p] != want || p >= done && fast[p] != 0x5a {
								t.Fatalf("%s: quantS8Fast did %d; x[%d] = %g → %d, quantS8 %d", what, done, p, x[p], fast[p], want)
							}
							ref := int8(max(-127, min(127, math.RoundToEven(float64(float32(x[p]*in))))))
							if want != ref {
								t.Fatalf("%s: quantS8(%g, %g) = %d, formula %d", what, x[p], in, want, ref)
							}
						}
					}
				}
			}
		})
	}
}

// TestActQuantS8Ties pins the ties of quantS8 to even on every level: ±0.5 → 0, ±1.5 → ±2,
// ±2.5 → ±2, ±126.5 → ±126, through the vector routines (32 values, a multiple of every
// width).
func TestActQuantS8Ties(t *testing.T) {
	in := []float32{0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -126.5, 3.5, -3.5, 0.49999997, 127.49, -127.49, 1, -1, 0}
	want := []int8{0, 0, 2, -2, 2, -2, 126, -126, 4, -4, 0, 127, -127, 1, -1, 0}
	x := append(append([]float32(nil), in...), in...)
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, inv := range []float32{1, 0.5} {
				xs := make([]float32, len(x))
				for p, v := range x {
					xs[p] = v / inv
				}
				got := make([]int8, len(x))
				quantS8Row(got, xs, inv, nil)
				for p, g := range got {
					if w := want[p%len(in)]; g != w {
						t.Fatalf("%s inv %g: %g → %d, want %d", lv, inv, xs[p], g, w)
					}
				}
			}
		})
	}
}

// refActPack is PackInt8Activation's documented result for op(B) = w (k×n, row-major):
// the q values (k×n) and the column scales, restated from the contract: scale_j =
// max|column j|/127 and q = clamp(rne(float32(v·inv_j)), −127, 127) with inv_j =
// float32(127/max); a column holding a NaN or an infinity has scale NaN and q 0, a zero
// column and one whose 127/max overflows scale 0 and q 0.
func refActPack(k, n int, w []float32) (q []int8, s []float32) {
	q, s = make([]int8, k*n), make([]float32, n)
	for j := 0; j < n; j++ {
		var a float32
		bad := false
		for p := 0; p < k; p++ {
			v := w[p*n+j]
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				bad = true
				continue
			}
			a = max(a, float32(math.Abs(float64(v))))
		}
		if bad {
			s[j] = float32(math.NaN())
			continue
		}
		inv := float32(127 / a)
		if a == 0 || math.IsInf(float64(inv), 0) {
			continue
		}
		s[j] = a / 127
		for p := 0; p < k; p++ {
			q[p*n+j] = int8(max(-127, min(127, math.RoundToEven(float64(float32(w[p*n+j]*inv))))))
		}
	}
	return q, s
}

// actMatrix returns a k×n op(B) of gaussian values whose leading columns are special (as
// many as n allows): zero; when nonFinite a NaN, +Inf and −Inf (a pack of rows then takes
// its Go path: without them it takes the vector one, i8PackRows4); every value tiny (1e-38: 127/max
// overflows, scale 0); every value tiny but above the overflow (4e-37: a denormal scale);
// denormals only; max 127 and 254 (inverses 1 and 0.5) with half-integer values (exact
// ties); the largest magnitude negative; values near MaxFloat32; −0s and a 1.
func actMatrix(rng *rand.Rand, k, n int, nonFinite bool) []float32 {
	w := make([]float32, k*n)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	col := func(j int, f func(p int) float32) {
		if j < n {
			for p := 0; p < k; p++ {
				w[p*n+j] = f(p)
			}
		}
	}
	at := func(j int, v float32) {
		if j < n {
			w[rng.IntN(k)*n+j] = v
		}
	}
	col(0, func(int) float32 { return 0 })
	if nonFinite {
		at(1, float32(math.NaN()))
		at(2, float32(math.Inf(1)))
		at(3, float32(math.Inf(-1)))
	}
	col(4, func(int) float32 { return float32(rng.Float64()*2-1) * 1e-38 })
	col(5, func(int) float32 { return float32(rng.Float64()*2-1) * 4e-37 })
	col(6, func(int) float32 { return math.Float32frombits(uint32(rng.IntN(0x800000)) | uint32(rng.IntN(2))<<31) })
	col(7, func(int) float32 { return float32(rng.IntN(254)-127) + 0.5 })
	at(7, 127)
	col(8, func(int) float32 { return float32(2*rng.IntN(254) - 253) })
	at(8, -254)
	col(9, func(int) float32 { return float32(rng.NormFloat64()) })
	at(9, -50)
	col(10, func(int) float32 { return float32(rng.Float64()*2-1) * math.MaxFloat32 })
	col(11, func(int) float32 { return float32(math.Copysign(0, -1)) })
	at(11, 1)
	return w
}

// actLayouts returns op(B) = w (k×n) stored both ways with strides past the row length,
// the padding filled with 1e30 (a pack that read it would get the wrong scales): as B
// (k×n, ldb n+3) for transB false and as Bᵀ (n×k, ldb k+5) for transB true.
func actLayouts(k, n int, w []float32) (b []float32, ldb int, bt []float32, ldbt int) {
	ldb, ldbt = n+3, k+5
	b, bt = make([]float32, k*ldb), make([]float32, n*ldbt)
	for i := range b {
		b[i] = 1e30
	}
	for i := range bt {
		bt[i] = 1e30
	}
	for p := 0; p < k; p++ {
		for j := 0; j < n; j++ {
			b[p*ldb+j] = w[p*n+j]
			bt[j*ldbt+p] = w[p*n+j]
		}
	}
	return b, ldb, bt, ldbt
}

// sameInt8Storage fails unless a and b hold the same int8 operand down to the padding: the
// same path, the same values in the panels (the zeros past k and past the last column
// included) and the same scales and column sums over whole panels.
func sameInt8Storage(t *testing.T, what string, a, b *PackedB) {
	t.Helper()
	da, db := a.i8, b.i8
	if a.k != b.k || a.n != b.n || da.kern != db.kern || da.kg != db.kg || da.np != db.np || len(da.q) != len(db.q) {
		t.Fatalf("%s: shapes %d×%d (kg %d np %d, %d bytes) and %d×%d (kg %d np %d, %d bytes)", what, a.k, a.n, da.kg, da.np, len(da.q), b.k, b.n, db.kg, db.np, len(db.q))
	}
	for i := range da.q {
		if da.q[i] != db.q[i] {
			t.Fatalf("%s: packed byte %d = %d, fresh pack %d", what, i, da.q[i], db.q[i])
		}
	}
	nr := 1
	if da.kern != nil {
		nr = da.kern.nr
	}
	for j := 0; j < da.np*nr; j++ {
		if math.Float32bits(da.scale[j]) != math.Float32bits(db.scale[j]) && !(isNaN32(da.scale[j]) && isNaN32(db.scale[j])) || da.colSum[j] != db.colSum[j] {
			t.Fatalf("%s: column %d: scale %g sum %d, fresh pack %g %d", what, j, da.scale[j], da.colSum[j], db.scale[j], db.colSum[j])
		}
	}
}

// checkActProducts checks the products with pb, holding op(B) = w (k×n) as
// PackInt8Activation packs it, whose documented values are q and s: GemmU8S8 of a random u8
// A equals the exact sums with q (the panel layout); SgemmPacked equals, bit for bit, the
// dequantization of the exact sums with A's rows quantized as documented (refQuantRow),
// float32(float32(Σ (qa − z)·q) · float32(rs·s_j)) (the column sums), and int8Ref within
// two ulps where rs·s_j is a normal float; nothing outside C's window changes.
func checkActProducts(t *testing.T, what string, rng *rand.Rand, pb *PackedB, k, n int, q []int8, s []float32) {
	t.Helper()
	const m = 9
	lda, ldc := k+2, n+3
	a8 := make([]uint8, m*lda)
	for i := range a8 {
		a8[i] = uint8(rng.IntN(256))
		if rng.IntN(6) == 0 {
			a8[i] = 255
		}
	}
	c32 := make([]int32, m*ldc)
	GemmU8S8(m, n, k, a8, lda, pb, c32, ldc)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var want int64
			for p := 0; p < k; p++ {
				want += int64(a8[i*lda+p]) * int64(q[p*n+j])
			}
			if int64(c32[i*ldc+j]) != want {
				t.Fatalf("%s: GemmU8S8 (%d, %d) = %d, want %d", what, i, j, c32[i*ldc+j], want)
			}
		}
	}
	a := make([]float32, m*lda)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	clear(a[3*lda : 3*lda+k]) // a zero row
	for _, alpha := range []float32{1, -0.7} {
		c := make([]float32, m*ldc)
		for i := range c {
			c[i] = guard
		}
		SgemmPacked(m, n, k, alpha, a, lda, pb, 0, c, ldc)
		ref := int8Ref(m, n, k, alpha, a, lda, pb)
		for i := 0; i < m; i++ {
			qa, rs, z := refQuantRow(a[i*lda:i*lda+k], alpha, pb.i8.kern.actMax())
			for j := 0; j < ldc; j++ {
				got := c[i*ldc+j]
				if j >= n {
					if got != guard {
						t.Fatalf("%s: C (%d, %d) past the window = %g", what, i, j, got)
					}
					continue
				}
				var sum int32
				for p := 0; p < k; p++ {
					sum += (qa[p] - z) * int32(q[p*n+j])
				}
				sc := float32(rs * s[j])
				want := float32(float32(sum) * sc)
				if got != want && !(isNaN32(got) && isNaN32(want)) {
					t.Fatalf("%s alpha %g: SgemmPacked (%d, %d) = %g, dequantized sum %g (sum %d, rs %g, s %g)", what, alpha, i, j, got, want, sum, rs, s[j])
				}
				// Two ulps of the float64 reference hold where rs·s_j is a normal float
				// (a denormal one has fewer bits) and the result is finite (a column of
				// values near MaxFloat32 overflows to ±Inf, as float32 arithmetic does).
				r := ref[i*n+j]
				if math.Abs(r) > math.MaxFloat32 {
					if !math.IsInf(float64(got), int(math.Copysign(1, r))) {
						t.Fatalf("%s alpha %g: SgemmPacked (%d, %d) = %g, int8Ref %g overflows float32", what, alpha, i, j, got, r)
					}
					continue
				}
				if abs := float32(math.Abs(float64(sc))); (abs >= 0x1p-126 || sc == 0) && !within2ULP(got, r) {
					t.Fatalf("%s alpha %g: SgemmPacked (%d, %d) = %g, int8Ref %g", what, alpha, i, j, got, ref[i*n+j])
				}
			}
		}
	}
}

// actShapes are the (k, n) shapes PackInt8Activation is tested on: one value, odd ones,
// an attention block of keys (k = dk, n = 512 keys) and of values (k = 512 keys, n = dv),
// shapes past a panel by one or a few, and k past the transposed pack's 256-value chunks
// by a number of values that is not a multiple of 4.
var actShapes = [][2]int{{1, 1}, {3, 5}, {64, 512}, {512, 64}, {65, 33}, {7, 100}, {300, 17}, {13, 1}, {1, 40}, {261, 3}, {513, 20}}

// TestPackInt8ActivationColumns packs op(B), stored both ways with strides past the row,
// with PackInt8Activation on every int8 path under every kernel level that offers it (the
// vector routines differ by level: a k step of four rows goes to the panels in one pass at
// 16 or 8 columns a time, i8PackRows4) and checks Int8Values (q and scales) against the
// documented formula bit for bit, the two orientations against each other down to the
// padding, and the products (checkActProducts), on actShapes with special columns (zero,
// too tiny for 127/max, denormal scale, denormals only, exact ties, ±MaxFloat32), with and
// without a NaN and infinite ones (which send a pack of rows to its Go path).
func TestPackInt8ActivationColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, path := range Int8Paths() {
				withInt8Path(t, path, func() {
					for _, sh := range actShapes {
						for _, nonFinite := range []bool{false, true} {
							k, n := sh[0], sh[1]
							w := actMatrix(rng, k, n, nonFinite)
							q, s := refActPack(k, n, w)
							b, ldb, bt, ldbt := actLayouts(k, n, w)
							var packs [2]*PackedB
							for o, transB := range []bool{false, true} {
								what := fmt.Sprintf("%s/%s %v nonFinite=%v transB=%v", lv, path, sh, nonFinite, transB)
								pb := new(PackedB)
								if transB {
									pb.PackInt8Activation(true, k, n, bt, ldbt)
								} else {
									pb.PackInt8Activation(false, k, n, b, ldb)
								}
								packs[o] = pb
								if !pb.Int8() || pb.Int8Path() != path {
									t.Fatalf("%s: packed for path %q", what, pb.Int8Path())
								}
								gq, gs := pb.Int8Values()
								for j := 0; j < n; j++ {
									if math.Float32bits(gs[j]) != math.Float32bits(s[j]) && !(isNaN32(gs[j]) && isNaN32(s[j])) {
										t.Fatalf("%s: column %d scale %g (%#x), want %g (%#x)", what, j, gs[j], math.Float32bits(gs[j]), s[j], math.Float32bits(s[j]))
									}
									for p := 0; p < k; p++ {
										if gq[p*n+j] != q[p*n+j] {
											t.Fatalf("%s: q(%d, %d) = %d from %g, want %d (scale %g)", what, p, j, gq[p*n+j], w[p*n+j], q[p*n+j], s[j])
										}
									}
								}
								checkActProducts(t, what, rng, pb, k, n, q, s)
							}
							sameInt8Storage(t, fmt.Sprintf("%s/%s %v nonFinite=%v: transB against not", lv, path, sh, nonFinite), packs[1], packs[0])
						}
					}
				})
			}
		})
	}
}

// TestPackInt8ActivationReuse packs into one PackedB, again and again, shapes that grow,
// shrink and grow again, both ways round, after an fp32 pack and after a pack for another
// int8 path, and holds each result, down to the padding of the panels and of the scales
// and column sums, to a fresh pack of the same matrix, and its products to the fresh
// pack's bit for bit: nothing stale survives a reuse.
func TestPackInt8ActivationReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	type step struct {
		k, n   int
		transB bool
	}
	seq := []step{{300, 100, false}, {7, 5, true}, {300, 100, false}, {65, 33, true}, {512, 64, false}, {64, 512, true}, {3, 5, false}, {512, 64, true}}
	prevPath := "an fp32 pack"
	reused := new(PackedB)
	reused.Pack(false, 40, 50, make([]float32, 40*50), 50) // an fp32 operand first
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, path := range Int8Paths() {
				withInt8Path(t, path, func() {
					for si, st := range seq {
						// gaussian columns beside the special ones: a stale value left in
						// the padding would be nonzero
						w := actMatrix(rng, st.k, st.n, si%2 == 0)
						b, ldb, bt, ldbt := actLayouts(st.k, st.n, w)
						src, ld := b, ldb
						if st.transB {
							src, ld = bt, ldbt
						}
						reused.PackInt8Activation(st.transB, st.k, st.n, src, ld)
						fresh := new(PackedB)
						fresh.PackInt8Activation(st.transB, st.k, st.n, src, ld)
						what := fmt.Sprintf("%s/%s step %d %+v (after %s)", lv, path, si, st, prevPath)
						sameInt8Storage(t, what, reused, fresh)
						m := 5
						a := make([]float32, m*st.k)
						for i := range a {
							a[i] = float32(rng.NormFloat64())
						}
						got, want := make([]float32, m*st.n), make([]float32, m*st.n)
						SgemmPacked(m, st.n, st.k, 1, a, st.k, reused, 0, got, st.n)
						SgemmPacked(m, st.n, st.k, 1, a, st.k, fresh, 0, want, st.n)
						bitwise(t, what, got, want)
						prevPath = lv + "/" + path
					}
				})
			}
		})
	}
}

// unitTies returns, for every j in 0…254 where one exists, an x with float32(x·255) =
// j + ½ exactly (a tie of the rounding to u8).
func unitTies() []float32 {
	var out []float32
	for j := 0; j < 255; j++ {
		if x, ok := actTie(float32(j)+0.5, 255); ok {
			out = append(out, x)
		}
	}
	return out
}

// refUnit is QuantizeUnit's documented value of x: clamp(rne(float32(x·255)), 0, 255), 0
// for a NaN.
func refUnit(x float32) int32 {
	if isNaN32(x) {
		return 0
	}
	return int32(max(0, min(255, math.RoundToEven(float64(float32(x*255))))))
}

// unitRows returns m rows of k values for QuantizeUnit: uniform in [0, 1]; the exact ties
// (j + ½)/255 and their neighbours; 0, −0, 1, denormals; a NaN, values above 1 and below 0
// mixed into probabilities; zeros only; probabilities as a softmax makes them (exp of
// gaussian scores minus their maximum, mostly small).
func unitRows(rng *rand.Rand, m, k int) []float32 {
	ties := unitTies()
	x := make([]float32, m*k)
	for i := 0; i < m; i++ {
		row := x[i*k : i*k+k]
		for p := range row {
			switch i % 6 {
			case 0:
				row[p] = rng.Float32()
			case 1:
				v := ties[rng.IntN(len(ties))]
				switch rng.IntN(4) {
				case 0:
					v = math.Nextafter32(v, 2)
				case 1:
					v = math.Nextafter32(v, -1)
				}
				row[p] = v
			case 2:
				row[p] = []float32{0, float32(math.Copysign(0, -1)), 1, math.Float32frombits(1), 1e-39, math.Nextafter32(1, 0), 0.5 / 255, rng.Float32()}[rng.IntN(8)]
			case 3:
				row[p] = []float32{float32(math.NaN()), 1.0000001, 1.5, 2, 1000, -1e-8, -0.5, -1, float32(math.Inf(-1)), -math.MaxFloat32, rng.Float32()}[rng.IntN(11)]
			case 4:
				row[p] = 0
			default:
				row[p] = float32(math.Exp(rng.NormFloat64()*2 - 4))
			}
		}
	}
	return x
}

// TestInt8RowsQuantizeUnit quantizes probability rows with Int8Rows.QuantizeUnit on every
// int8 path, for lengths around the vector widths and an attention block's 512 keys, some
// rows given short (the rest taken as 0) and some filled by the caller through UnitRow
// (u8 rows only; nil for the u16 rows of the avx2 path), and checks the stored rows (u8, or u16 for the AVX2 kernels) against clamp(rne(x·255), 0,
// 255) value by value, the zeros up to the padded length, the row scale alpha·(1/255) and
// zero point 0; then the products with SgemmInt8RowsAt, by an int8 operand given its
// values (PackBInt8Quantized) and by one packed at run time (PackInt8Activation, as
// attention packs V), against float32(float32(Σ q·b) · float32(rs·s_j)) bit for bit (the
// kernels' dequantization, see int8StoreTwin), and with beta 1 (attention's later key
// blocks) against fma(1, C, that) bit for bit.
func TestInt8RowsQuantizeUnit(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(39, 40))
		path, _ := Int8Path()
		for _, k := range []int{1, 7, 15, 16, 17, 31, 32, 33, 64, 100, 512, 700} {
			const m, n = 12, 37
			bq := make([]int8, k*n)
			for i := range bq {
				bq[i] = int8(rng.IntN(256) - 128)
			}
			bs := make([]float32, n)
			for j := range bs {
				bs[j] = rng.Float32() / 32
			}
			vw := make([]float32, k*n)
			for i := range vw {
				vw[i] = float32(rng.NormFloat64())
			}
			act := new(PackedB)
			act.PackInt8Activation(false, k, n, vw, n)
			aq, as := act.Int8Values()
			rows := unitRows(rng, m, k)
			for _, op := range []struct {
				name string
				pb   *PackedB
				q    []int8
				s    []float32
			}{{"quantized", PackBInt8Quantized(k, n, bq, bs), bq, bs}, {"activation", act, aq, as}} {
				for _, alpha := range []float32{1, 0.37} {
					what := fmt.Sprintf("%s k=%d %s alpha=%g", path, k, op.name, alpha)
					x := append([]float32(nil), rows...)
					var r Int8Rows
					r.Prepare(op.pb, m, alpha)
					// Stale bytes first, so that what QuantizeUnit leaves is checked.
					for i := range r.q {
						r.q[i] = 0xa5
					}
					// Rows in a random order, some of them given short (their first
					// values only: the rest are 0, as a causal block's keys past its
					// query), and, where the rows are u8, some filled through UnitRow.
					given := make([]int, m)
					for _, i := range rng.Perm(m) {
						given[i] = k
						if rng.IntN(3) == 0 {
							given[i] = rng.IntN(k + 1)
						}
						row := x[i*k : i*k+given[i]]
						if i%4 == 3 {
							if d := r.UnitRow(i, len(row)); d != nil {
								for p, v := range row {
									d[p] = uint8(refUnit(v))
								}
								continue
							}
						}
						r.QuantizeUnit(i, row)
					}
					// the values past a short row count as 0 from here on
					for i := 0; i < m; i++ {
						clear(x[i*k+given[i] : (i+1)*k])
					}
					wide := r.kern != nil && r.kern.wideA
					rs := alpha * float32(1.0/255)
					for i := 0; i < m; i++ {
						if math.Float32bits(r.rs[i]) != math.Float32bits(rs) || r.rz[i] != 0 {
							t.Fatalf("%s row %d: scale %g zero point %d, want %g and 0", what, i, r.rs[i], r.rz[i], rs)
						}
						d := r.q[i*r.ld:]
						for p := 0; p < r.kpad; p++ {
							v := int32(d[p])
							if wide {
								v = int32(d[2*p]) | int32(d[2*p+1])<<8
							}
							if p >= k {
								if v != 0 {
									t.Fatalf("%s row %d: padding value %d of %d is %d", what, i, p, r.kpad, v)
								}
								continue
							}
							if xv := x[i*k+p]; v != refUnit(xv) {
								t.Fatalf("%s row %d: value %d = %g (%#x; ·255 = %g) stored as %d, want %d", what, i, p, xv, math.Float32bits(xv), float32(xv*255), v, refUnit(xv))
							}
						}
					}
					want := make([]float32, m*n)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							var sum int32
							for p := 0; p < k; p++ {
								sum += refUnit(x[i*k+p]) * int32(op.q[p*n+j])
							}
							want[i*n+j] = float32(float32(sum) * float32(rs*op.s[j]))
						}
					}
					got := make([]float32, m*n)
					SgemmInt8RowsAt(&r, 0, m, 0, n, op.pb, 0, got, n, nil)
					bitwise(t, what+" beta 0", got, want)
					c := make([]float32, m*n)
					for i := range c {
						c[i] = float32(rng.NormFloat64())
					}
					acc := append([]float32(nil), c...)
					SgemmInt8RowsAt(&r, 0, m, 0, n, op.pb, 1, acc, n, nil)
					for i := range want {
						want[i] = refFma32(1, c[i], want[i])
					}
					bitwise(t, what+" beta 1", acc, want)
				}
			}
		}
	})
}

// TestInt8RowsQuantizeUnitConcurrent quantizes the rows of one Int8Rows from eight
// goroutines at once (QuantizeUnit allows calls for different rows to run concurrently;
// `go test -race` checks that they share nothing) and holds the product to one made from
// rows quantized in order, bit for bit.
func TestInt8RowsQuantizeUnitConcurrent(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(41, 42))
		const m, n, k = 64, 40, 300
		w := make([]float32, k*n)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		pb := new(PackedB)
		pb.PackInt8Activation(false, k, n, w, n)
		x := unitRows(rng, m, k)
		var seq, par Int8Rows
		seq.Prepare(pb, m, 1)
		par.Prepare(pb, m, 1)
		for i := 0; i < m; i++ {
			seq.QuantizeUnit(i, x[i*k:(i+1)*k])
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < m; i += 8 {
					par.QuantizeUnit(i, x[i*k:(i+1)*k])
				}
			}()
		}
		wg.Wait()
		want, got := make([]float32, m*n), make([]float32, m*n)
		SgemmInt8RowsAt(&seq, 0, m, 0, n, pb, 0, want, n, nil)
		SgemmInt8RowsAt(&par, 0, m, 0, n, pb, 0, got, n, nil)
		bitwise(t, "concurrent QuantizeUnit", got, want)
	})
}

// TestInt8RowsQuantizeUnitBadArgs checks the refusals of QuantizeUnit (an unprepared
// Int8Rows, a row outside the prepared ones, a row longer than k), of UnitRow and of
// PackInt8Activation.
func TestInt8RowsQuantizeUnitBadArgs(t *testing.T) {
	pb := PackBInt8Quantized(4, 2, make([]int8, 8), []float32{1})
	mustPanic(t, "QuantizeUnit unprepared", func() {
		var r Int8Rows
		r.QuantizeUnit(0, make([]float32, 4))
	})
	mustPanic(t, "QuantizeUnit row 2 of 2", func() {
		var r Int8Rows
		r.Prepare(pb, 2, 1)
		r.QuantizeUnit(2, make([]float32, 4))
	})
	mustPanic(t, "QuantizeUnit of 5 values for k 4", func() {
		var r Int8Rows
		r.Prepare(pb, 2, 1)
		r.QuantizeUnit(0, make([]float32, 5))
	})
	mustPanic(t, "UnitRow of 5 values for k 4", func() {
		var r Int8Rows
		r.Prepare(pb, 2, 1)
		r.UnitRow(1, 5)
	})
	mustPanic(t, "ScaleRow of row 2 of 2", func() {
		var r Int8Rows
		r.Prepare(pb, 2, 1)
		r.ScaleRow(2, 1)
	})
	mustPanic(t, "PackInt8Activation with a short b", func() {
		new(PackedB).PackInt8Activation(false, 3, 4, make([]float32, 11), 4)
	})
	mustPanic(t, "PackInt8Activation with k over MaxInt8K", func() {
		new(PackedB).PackInt8Activation(true, MaxInt8K+1, 1, make([]float32, MaxInt8K+1), MaxInt8K+1)
	})
}

// TestInt8RowsQuantizeUnitLarge holds QuantizeUnit to its documented clamping for values
// far above 1: "A value outside [0, 1] is clamped", so +Inf, 3e38, 1e10 and 8.5e6 (x·255
// past 2³¹) must be stored as 255, as 2 and 1000 are, and −Inf and −1e10 as 0. Every path
// stores 0 for the large ones: the rounding (quantOne, and VCVTPS2DQ in the vector code)
// turns x·255 ≥ 2³¹ into INT_MIN before the clamp. Attention's probabilities are at most
// 1, so attention never meets this; a caller of the exported QuantizeUnit may.
func TestInt8RowsQuantizeUnitLarge(t *testing.T) {
	in := []float32{float32(math.Inf(1)), 3e38, 1e10, 8.5e6, 2, 1000, float32(math.Inf(-1)), -1e10}
	want := []int32{255, 255, 255, 255, 255, 255, 0, 0}
	forEachInt8Path(t, func(t *testing.T) {
		for _, k := range []int{8, 64} { // Go only, and the vector routines
			x := make([]float32, k)
			for p := range x {
				x[p] = in[p%len(in)]
			}
			var r Int8Rows
			r.Prepare(PackBInt8Quantized(k, 1, make([]int8, k), []float32{1}), 1, 1)
			r.QuantizeUnit(0, x)
			wide := r.kern != nil && r.kern.wideA
			for p := range x {
				v := int32(r.q[p])
				if wide {
					v = int32(r.q[2*p]) | int32(r.q[2*p+1])<<8
				}
				if w := want[p%len(in)]; v != w {
					t.Errorf("k=%d: QuantizeUnit of %g stored %d, want %d (clamped)", k, x[p], v, w)
				}
			}
		}
	})
}

// TestInt8RowsScaleRow: a row's products come out multiplied by ScaleRow's factor (within
// the one more rounding of the scale), the other rows' unchanged, on every int8 path.
func TestInt8RowsScaleRow(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(51, 52))
		const m, k, n = 5, 40, 33
		a, w := make([]float32, m*k), make([]float32, k*n)
		for i := range a {
			a[i] = rng.Float32()
		}
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		pb := PackBInt8(false, k, n, w, n)
		var r Int8Rows
		r.Prepare(pb, m, 1)
		for i := 0; i < m; i++ {
			r.QuantizeUnit(i, a[i*k:(i+1)*k])
		}
		plain := make([]float32, m*n)
		SgemmInt8RowsAt(&r, 0, m, 0, n, pb, 0, plain, n, nil)
		r.ScaleRow(2, 1/3.7)
		got := make([]float32, m*n)
		SgemmInt8RowsAt(&r, 0, m, 0, n, pb, 0, got, n, nil)
		for i := range got {
			want := float64(plain[i])
			if i/n == 2 {
				want /= 3.7
			}
			if d := math.Abs(float64(got[i]) - want); d > 0x1p-21*math.Abs(want) || (i/n != 2 && got[i] != plain[i]) {
				t.Fatalf("[%d] (row %d) = %v, want %v", i, i/n, got[i], want)
			}
		}
	})
}

// TestSgemmInt8RowsKAt multiplies rows of probabilities by windows of an operand packed
// once (as attention over sliding windows of keys multiplies each window by V): for windows
// starting at every multiple of the k step up to the end, of lengths that are and are not
// multiples of it, with column ranges and beta 0 and 1, the product equals bit for bit
// SgemmInt8RowsAt's with the same rows extended by zeros to the whole operand. Rows with a
// zero point, and windows that start off a step or pass the operand's end, panic.
func TestSgemmInt8RowsKAt(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(61, 62))
		path, _ := Int8Path()
		const m, n, ktot = 13, 70, 200
		v := make([]float32, ktot*n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		pb := new(PackedB)
		pb.PackInt8Activation(false, ktot, n, v, n)
		step := pb.Int8KStep()
		for _, kw := range []int{1, 5, 64, 96, 131} {
			for k0 := 0; k0+kw <= ktot; k0 += step * (1 + rng.IntN(9)) {
				if k0+(kw+step-1)/step*step > ktot+(step-1) {
					break
				}
				what := fmt.Sprintf("%s window [%d, %d)", path, k0, k0+kw)
				rows := unitRows(rng, m, kw)
				var win, full Int8Rows
				win.PrepareK(pb, m, kw, 1)
				full.Prepare(pb, m, 1)
				wide := make([]float32, m*ktot)
				for i := 0; i < m; i++ {
					copy(wide[i*ktot+k0:], rows[i*kw:(i+1)*kw])
					win.QuantizeUnit(i, rows[i*kw:(i+1)*kw])
					full.QuantizeUnit(i, wide[i*ktot:(i+1)*ktot])
				}
				for _, cols := range [][2]int{{0, n}, {pb.ColAlign(), n}} {
					c := make([]float32, m*n)
					for i := range c {
						c[i] = float32(rng.NormFloat64())
					}
					for _, beta := range []float32{0, 1} {
						got, want := append([]float32(nil), c...), append([]float32(nil), c...)
						SgemmInt8RowsKAt(&win, 0, m, cols[0], cols[1], k0, pb, beta, got, n, nil)
						SgemmInt8RowsAt(&full, 0, m, cols[0], cols[1], pb, beta, want, n, nil)
						bitwise(t, fmt.Sprintf("%s columns %v beta %g", what, cols, beta), got, want)
					}
				}
			}
		}
		var r Int8Rows
		r.PrepareK(pb, 2, 8, 1)
		r.QuantizeUnit(0, []float32{0.5})
		r.QuantizeUnit(1, []float32{0.25})
		c := make([]float32, 2*n)
		if step > 1 {
			mustPanic(t, "a window off a k step", func() { SgemmInt8RowsKAt(&r, 0, 2, 0, n, 1, pb, 0, c, n, nil) })
		}
		mustPanic(t, "a window past the end", func() { SgemmInt8RowsKAt(&r, 0, 2, 0, n, ktot-step, pb, 0, c, n, nil) })
		var z Int8Rows
		z.PrepareK(pb, 2, 8, 1)
		z.QuantizeRange(0, 2, []float32{-1, 2, 3, 4, 5, 6, 7, 8, -1, 2, 3, 4, 5, 6, 7, 8}, 8)
		mustPanic(t, "rows with a zero point", func() { SgemmInt8RowsKAt(&z, 0, 2, 0, n, 0, pb, 0, c, n, nil) })
	})
}

// mustPanic fails t when f returns without panicking.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// TestPackInt8ActivationSum checks that packing with the row sums packs what
// PackInt8Activation packs (the same values and scales) and adds B's rows into the sums
// as vec.Add does row after row, bit for bit, onto sums that already hold values, on every
// int8 path and on shapes around the vector widths; short sums panic.
func TestPackInt8ActivationSum(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(71, 72))
		for _, sh := range [][2]int{{1, 1}, {7, 15}, {64, 266}, {33, 17}} {
			k, n := sh[0], sh[1]
			b := make([]float32, k*(n+3))
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			start := make([]float32, n)
			for j := range start {
				start[j] = float32(rng.NormFloat64())
			}
			want := append([]float32(nil), start...)
			for p := 0; p < k; p++ {
				vec.Add(want, want, b[p*(n+3):p*(n+3)+n])
			}
			got := append([]float32(nil), start...)
			var plain, summed PackedB
			plain.PackInt8Activation(false, k, n, b, n+3)
			summed.PackInt8ActivationSum(k, n, b, n+3, got)
			bitwise(t, fmt.Sprintf("sums of %d×%d", k, n), got, want)
			pq, ps := plain.Int8Values()
			sq, ss := summed.Int8Values()
			if !slices.Equal(pq, sq) {
				t.Fatalf("%d×%d: the values differ from PackInt8Activation's", k, n)
			}
			bitwise(t, fmt.Sprintf("scales of %d×%d", k, n), ss, ps)
		}
		var pb PackedB
		mustPanic(t, "3 sums for 4 columns", func() { pb.PackInt8ActivationSum(2, 4, make([]float32, 8), 4, make([]float32, 3)) })
	})
}
