package vec

import (
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
)

// lengths covers empty, single, odd, below and around the 8- and 16-lane widths, and long.
var lengths = []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257, 1000}

// forLevels runs fn at every level this machine supports (via simd.Set, which vec
// follows), then restores the level it found.
func forLevels(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	defer simd.Set(simd.Current().String())
	for _, lv := range levelNames() {
		if err := simd.Set(lv); err != nil {
			t.Fatal(err)
		}
		t.Run(lv, fn)
	}
}

// randSlice returns n values at an unaligned offset (start) in a larger buffer.
func randSlice(r *rand.Rand, n, start int, scale float64) []float32 {
	buf := make([]float32, n+start+3)
	for i := range buf {
		buf[i] = float32(r.NormFloat64() * scale)
	}
	return buf[start : start+n]
}

func ulps(a, b float32) float64 {
	if a == b || (a != a && b != b) {
		return 0
	}
	if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || a != a || b != b {
		return math.Inf(1)
	}
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia>>31 != ib>>31 {
		return math.Abs(float64(a)-float64(b)) / 1.4e-45
	}
	return math.Abs(float64(ia - ib))
}

func TestExpAccuracy(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		// a dense sweep over the whole float32 range of exp, plus the special values
		var xs []float32
		for x := -110.0; x <= 90; x += 0.0007 {
			xs = append(xs, float32(x))
		}
		inf := float32(math.Inf(1))
		xs = append(xs, 0, float32(math.Copysign(0, -1)), inf, -inf, float32(math.NaN()), 88.72283, 88.7229, -87.33654, -103.97, -104, 1e-30)
		got := make([]float32, len(xs))
		Exp(got, xs)
		worst := 0.0
		for i, x := range xs {
			want := float32(math.Exp(float64(x)))
			if x != x {
				if got[i] == got[i] {
					t.Fatalf("exp(NaN) = %v", got[i])
				}
				continue
			}
			if u := ulps(got[i], want); u > worst {
				worst = u
				if u > 2 {
					t.Fatalf("exp(%v) = %v, want %v (%v ulp)", x, got[i], want, u)
				}
			}
		}
		if got[len(xs)-8] != 0 {
			t.Errorf("exp(-Inf) = %v, want 0", got[len(xs)-8])
		}
		t.Logf("max error %.2f ulp over %d points", worst, len(xs))
	})
}

func TestErfAccuracy(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		var xs []float32
		for x := -12.0; x <= 12; x += 0.0003 {
			xs = append(xs, float32(x))
		}
		xs = append(xs, float32(math.Inf(1)), float32(math.Inf(-1)), 0)
		got := make([]float32, len(xs))
		Erf(got, xs)
		worst := 0.0
		for i, x := range xs {
			d := math.Abs(float64(got[i]) - math.Erf(float64(x)))
			worst = max(worst, d)
		}
		if worst >= 1e-6 {
			t.Fatalf("erf max abs error %g", worst)
		}
		g := make([]float32, len(xs))
		Gelu(g, xs)
		for i, x := range xs[:len(xs)-3] {
			want := 0.5 * float64(x) * (1 + math.Erf(float64(x)/math.Sqrt2))
			if d := math.Abs(float64(g[i]) - want); d > 1e-6*max(1, math.Abs(want)) {
				t.Fatalf("gelu(%v) = %v, want %v", x, g[i], want)
			}
		}
		t.Logf("erf max abs error %.3g", worst)
	})
}

// TestAgainstTwins holds every kernel to its pure-Go twin on random data of awkward
// lengths at unaligned offsets, in place and out of place.
func TestAgainstTwins(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(1))
		for _, n := range lengths {
			for _, start := range []int{0, 1, 3} {
				x := randSlice(r, n, start, 3)
				y := randSlice(r, n, start+1, 3)
				g := randSlice(r, n, 2, 1)
				out := make([]float32, n)
				ref := make([]float32, n)
				close := func(what string, got, want []float32, tol float64) {
					t.Helper()
					for i := range want {
						if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*max(1, math.Abs(float64(want[i]))) || (got[i] != got[i]) != (want[i] != want[i]) {
							t.Fatalf("%s n=%d start=%d [%d]: got %v, want %v", what, n, start, i, got[i], want[i])
						}
					}
				}
				s := ExpSum(out, x, 1.5)
				rs := expSumGeneric(ref, x, 1.5)
				close("ExpSum", out, ref, 3e-7)
				close("ExpSum sum", []float32{s}, []float32{rs}, 1e-6)
				// ExpSumFlush with a shift that puts some values at or below −87.
				s = ExpSumFlush(out, x, 85)
				rs = expSumFlushGeneric(ref, x, 85)
				close("ExpSumFlush", out, ref, 3e-7)
				close("ExpSumFlush sum", []float32{s}, []float32{rs}, 1e-6)
				// ExpSumU8 at the row maximum (values in [0, 1]) and below it (values clamp at
				// 255): its sum is its twin's, its bytes expSumU8Generic's, one step apart at
				// most where the two exps straddle a rounding tie of e·255.
				for _, shift := range []float32{maxGeneric(x), 0.5} {
					q, rq := make([]uint8, n), make([]uint8, n)
					s := ExpSumU8(q, x, shift)
					rs := expSumU8Generic(rq, x, shift)
					close("ExpSumU8 sum", []float32{s}, []float32{rs}, 1e-6)
					for i, v := range x {
						ref[i] = expU8(v - shift)
					}
					for i := range q {
						d := int(q[i]) - int(rq[i])
						tie := math.Abs(math.Mod(float64(ref[i])*255, 1)-0.5) < 1e-4
						if d > 1 || d < -1 || (d != 0 && !tie) || rq[i] != quantU8(ref[i]) {
							t.Fatalf("ExpSumU8 n=%d shift %v [%d]: %d, twin %d (exp %v)", n, shift, i, q[i], rq[i], ref[i])
						}
					}
				}
				// Dot: the same lanes as its twin, the asm fusing each multiply-add.
				if d, rd := Dot(x, y), dotGeneric(x, y); math.Abs(float64(d-rd)) > 1e-5*(1+math.Abs(float64(rd))) {
					t.Fatalf("Dot n=%d start=%d: %v, twin %v", n, start, d, rd)
				}
				if m, rm := Max(x), maxGeneric(x); m != rm {
					t.Fatalf("Max n=%d: %v, want %v", n, m, rm)
				}
				copy(out, x)
				copy(ref, x)
				Scale(out, 0.37)
				scaleGeneric(ref, 0.37)
				close("Scale", out, ref, 0)
				copy(out, x)
				copy(ref, x)
				DivScalar(out, 8)
				divGeneric(ref, 8)
				close("DivScalar", out, ref, 0)
				copy(out, x)
				copy(ref, x)
				AddScalar(out, -1.25)
				shiftGeneric(ref, -1.25)
				close("AddScalar", out, ref, 0)
				Add(out, x, y)
				addGeneric(ref, x, y)
				close("Add", out, ref, 0)
				Sub(out, x, y)
				subGeneric(ref, x, y)
				close("Sub", out, ref, 0)
				Relu(out, x)
				reluGeneric(ref, x)
				close("Relu", out, ref, 0)
				Gelu(out, x)
				geluGeneric(ref, x)
				close("Gelu", out, ref, 1e-6)
				EluAdd(out, x, 0.7, 1)
				eluAddGeneric(ref, x, 0.7, 1)
				close("EluAdd", out, ref, 3e-7)
				for _, act := range []Act{ActNone, ActRelu, ActGelu} {
					copy(out, x)
					copy(ref, x)
					BiasAct(out, y, act)
					biasActGeneric(ref, y, act)
					close("BiasAct", out, ref, 1e-6)
				}
				Softmax(out, x)
				if n > 0 {
					m := maxGeneric(x)
					rs := expSumFlushGeneric(ref, x, m)
					scaleGeneric(ref, 1/rs)
					close("Softmax", out, ref, 1e-6)
				}
				for _, beta := range [][]float32{nil, y} {
					mu, is := LayerNorm(out, x, g, beta, 1e-5)
					if n == 0 {
						continue
					}
					rmu := sumGeneric(x) / float32(n)
					ris := 1 / sqrt32(sqDevGeneric(x, rmu)/float32(n)+1e-5)
					if math.Abs(float64(mu-rmu)) > 1e-6 || math.Abs(float64(is-ris)) > 1e-5*float64(ris) {
						t.Fatalf("LayerNorm stats n=%d: %v %v, want %v %v", n, mu, is, rmu, ris)
					}
					normAffineGeneric(ref, x, g, beta, rmu, ris)
					close("LayerNorm", out, ref, 1e-5)
				}
				// in place
				copy(out, x)
				Relu(out, out)
				reluGeneric(ref, x)
				close("Relu in place", out, ref, 0)
			}
		}
	})
}

// TestMaxEveryPosition puts the maximum, and then a NaN, at every index of rows long enough
// for the unrolled loop, so each of its accumulators and the fold that joins them are
// exercised at every level.
func TestMaxEveryPosition(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(2))
		for _, n := range []int{64, 100, 257} {
			x := make([]float32, n)
			for p := range x {
				for i := range x {
					x[i] = -r.Float32() * 100
				}
				x[p] = 7
				if m := Max(x); m != 7 {
					t.Fatalf("n=%d max at %d: Max = %v", n, p, m)
				}
				x[p] = float32(math.NaN())
				if m := Max(x); m == m {
					t.Fatalf("n=%d NaN at %d: Max = %v", n, p, m)
				}
			}
		}
	})
}

func TestSpecialValues(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		inf, nan := float32(math.Inf(1)), float32(math.NaN())
		negZero := float32(math.Copysign(0, -1))
		x := []float32{1, -inf, 3, 2, -inf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}
		if m := Max(x); m != 5 {
			t.Errorf("Max = %v", m)
		}
		x[16] = nan
		if m := Max(x); m == m {
			t.Errorf("Max with NaN = %v", m)
		}
		if m := Max([]float32{-inf, -inf, -inf}); m != -inf {
			t.Errorf("Max of -Inf = %v", m)
		}
		if m := Max([]float32{-3, -2, -7}); m != -2 {
			t.Errorf("Max of negatives (tail) = %v", m)
		}
		out := make([]float32, 3)
		Relu(out, []float32{negZero, nan, -1})
		if math.Signbit(float64(out[0])) || out[1] == out[1] || out[2] != 0 {
			t.Errorf("Relu(-0, NaN, -1) = %v", out)
		}
		// a fully masked row is NaN, as the unfused softmax gives
		Softmax(out, []float32{-inf, -inf, -inf})
		if out[0] == out[0] {
			t.Errorf("Softmax of -Inf row = %v", out)
		}
		Softmax(out, []float32{-inf, 0, -inf})
		if out[0] != 0 || out[1] != 1 || out[2] != 0 {
			t.Errorf("Softmax with masked entries = %v", out)
		}
	})
}

func BenchmarkExpSum(b *testing.B) {
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(-i) / 50
	}
	y := make([]float32, 512)
	b.SetBytes(4 * 512)
	for i := 0; i < b.N; i++ {
		ExpSum(y, x, 0)
	}
}

func BenchmarkExpSumU8(b *testing.B) {
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(-i) / 50
	}
	q := make([]uint8, 512)
	b.SetBytes(4 * 512)
	for i := 0; i < b.N; i++ {
		ExpSumU8(q, x, 0)
	}
}

func BenchmarkMax(b *testing.B) {
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(-i) / 50
	}
	b.SetBytes(4 * 512)
	for i := 0; i < b.N; i++ {
		Max(x)
	}
}

// TestExpSumU8Special checks ExpSumU8 on the values a masked, padded or broken score row
// holds: −Inf (a masked key: 0), the maximum itself (255), NaN (byte 0, NaN sum), and
// scores far below the maximum, whose exp underflows (0), on every level.
// TestExpU8Accuracy bounds the exp of ExpSumU8 (expU8 and its vector forms) against
// math.Exp: relative error below 7e-6 wherever the result is a normal float32, absolute
// below 1e-37 where it underflows, exactly 1 at 0 (a row's maximum is probability 255), and
// its bytes are quantU8 of its values. Each value is read back as the sum of 16 copies of
// itself, which float32 adds exactly.
func TestExpU8Accuracy(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		// the polynomial's 5.4e-6 (in float32), the reduction by a float32 ln2 (|n|·1.9e-9,
		// 2.4e-7 at the bottom of the normal range) and the roundings
		const bound = 7e-6
		worst := 0.0
		x, q := make([]float32, 16), make([]uint8, 16)
		for v := -110.0; v <= 80; v += 0.00071 { // 16 copies of e^80 still sum to a finite float32
			xs := float32(v)
			if v > -1e-4 && v < 1e-4 {
				xs = 0
			}
			for i := range x {
				x[i] = xs
			}
			e := ExpSumU8(q, x, 0) / 16
			want := math.Exp(float64(xs))
			if q[0] != quantU8(e) {
				t.Fatalf("x %v: byte %d, want quantU8(%v) = %d", xs, q[0], e, quantU8(e))
			}
			switch {
			case want < 1.2e-38:
				if math.Abs(float64(e)-want) > 1e-37 {
					t.Fatalf("x %v: %v, want %v", xs, e, want)
				}
			default:
				rel := math.Abs(float64(e)-want) / want
				worst = max(worst, rel)
				if rel > bound {
					t.Fatalf("x %v: %v, want %v: relative error %.3g above %g", xs, e, want, rel, bound)
				}
			}
			if xs == 0 && (e != 1 || q[0] != 255) {
				t.Fatalf("exp(0) = %v (byte %d), want 1 (255)", e, q[0])
			}
		}
		t.Logf("worst relative error %.3g", worst)
	})
}

func TestExpSumU8Special(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		ninf, nan := float32(math.Inf(-1)), float32(math.NaN())
		x := []float32{ninf, 2, 2 - 1e-3, -200, 2 + float32(math.Log(0.5)), ninf, 0, 1, ninf, ninf, ninf, ninf, ninf, ninf, ninf, ninf, 2, ninf, -90}
		want := []uint8{0, 255, 255, 0, 128, 0, 35, 94, 0, 0, 0, 0, 0, 0, 0, 0, 255, 0, 0}
		q := make([]uint8, len(x))
		s := ExpSumU8(q, x, 2)
		for i := range want {
			if q[i] != want[i] {
				t.Fatalf("ExpSumU8(%v)[%d] = %d, want %d", x[i], i, q[i], want[i])
			}
		}
		// expU8's relative error is below 7e-6 (TestExpU8Accuracy)
		if d := math.Abs(float64(s) - (2 + math.Exp(-1e-3) + 0.5 + math.Exp(-2) + math.Exp(-1))); d > 4*7e-6 {
			t.Fatalf("sum %v", s)
		}
		x[3] = nan
		if s := ExpSumU8(q, x, 2); s == s || q[3] != 0 {
			t.Fatalf("with a NaN: sum %v, byte %d; want NaN and 0", s, q[3])
		}
	})
}

// TestEluAdd holds EluAdd, on every level, bit for bit to its definition through Exp (the
// same vector exp): max(x, 0) + (alpha·(Exp(min(x, 0)) − 1) + c), min and max by the sign
// bit, each operation rounded. The values cover both signs, ±0, ±Inf, NaN of both signs,
// the exp's clamps and underflow, and random ones, over lengths that leave every tail.
func TestEluAdd(t *testing.T) {
	specials := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-30, -1e-30, 3.5, -3.5, -87, -88.7, -104, -200, -1e30, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001)}
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(5))
		for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 64, 100} {
			x := randSlice(r, n, 1, 4)
			for i := range x {
				if i%3 == 0 {
					x[i] = specials[(i/3)%len(specials)]
				}
			}
			for _, ac := range [][2]float32{{1, 1}, {0.3, -2}, {2.5, 0}} {
				got := make([]float32, n)
				EluAdd(got, x, ac[0], ac[1])
				neg := make([]float32, n)
				for i, v := range x {
					b := math.Float32bits(v)
					neg[i] = math.Float32frombits(b & uint32(int32(b)>>31))
				}
				e := make([]float32, n)
				Exp(e, neg)
				for i, v := range x {
					b := math.Float32bits(v)
					want := math.Float32frombits(b&^uint32(int32(b)>>31)) + (float32(ac[0]*(e[i]-1)) + ac[1])
					if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
						t.Fatalf("EluAdd(%v, alpha %v, c %v) n=%d [%d] = %v, want %v", v, ac[0], ac[1], n, i, got[i], want)
					}
				}
			}
		}
	})
}

// TestRotateHalf holds RotateHalf, on every level, bit for bit to its definition (each
// product rounded to float32, then the sum; the first half's rotated value negated): half
// widths below, at and past the vector widths, random values with specials (±0, ±Inf,
// NaN, huge products), and a y longer than x whose tail must survive.
func TestRotateHalf(t *testing.T) {
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38, -3e38, 1e-40}
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(6))
		for _, h := range []int{1, 3, 7, 8, 9, 15, 16, 17, 24, 32, 33, 64} {
			n := 2 * h
			x, c, s := randSlice(r, n, 1, 2), randSlice(r, n, 2, 1), randSlice(r, n, 3, 1)
			for i := 0; i < n; i += 5 {
				x[i] = specials[(i/5)%len(specials)]
			}
			y := make([]float32, n+3)
			for i := range y {
				y[i] = -7
			}
			RotateHalf(y, x, c, s)
			for i := 0; i < n; i++ {
				var want float32
				if i < h {
					want = float32(x[i]*c[i]) + float32(-x[i+h]*s[i])
				} else {
					want = float32(x[i]*c[i]) + float32(x[i-h]*s[i])
				}
				if math.Float32bits(y[i]) != math.Float32bits(want) && !(y[i] != y[i] && want != want) {
					t.Fatalf("h=%d [%d]: %v, want %v", h, i, y[i], want)
				}
			}
			if y[n] != -7 || y[n+2] != -7 {
				t.Fatalf("h=%d: wrote past x's length", h)
			}
		}
	})
}

// TestAccF64 holds AccF64, on every level, bit for bit to Go's float64 accumulation
// acc[i] += float64(x[i]), onto accumulators that already hold values of other magnitudes
// (so that the sums round), with ±0, ±Inf, NaN and subnormals among the inputs, over lengths
// that leave every tail; a short accumulator panics.
func TestAccF64(t *testing.T) {
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-45, 3e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(9))
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100} {
			x := randSlice(r, n, 1, 4)
			for i := range x {
				if i%5 == 0 {
					x[i] = specials[(i/5)%len(specials)]
				}
			}
			acc := make([]float64, n+3)
			for i := range acc {
				acc[i] = r.NormFloat64() * 1e8
			}
			want := append([]float64(nil), acc...)
			for i, v := range x {
				want[i] += float64(v)
			}
			AccF64(acc, x)
			for i := range want {
				if math.Float64bits(acc[i]) != math.Float64bits(want[i]) && !(acc[i] != acc[i] && want[i] != want[i]) {
					t.Fatalf("AccF64 n=%d [%d] = %v, want %v", n, i, acc[i], want[i])
				}
			}
		}
	})
	defer func() {
		if recover() == nil {
			t.Error("AccF64 with 2 accumulators for 3 values did not panic")
		}
	}()
	AccF64(make([]float64, 2), make([]float32, 3))
}

// TestExpSumFlush checks where ExpSumFlush's values end, at every level: exp(x) above −87
// (as ExpSum has it, normal down there), 0 at −87 and below, where ExpSum's run on into
// subnormals, and NaN kept.
func TestExpSumFlush(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		xs := []float32{0, -1, -86.99, -87, -87.0001, -90, -100, -103.9, -200, float32(math.Inf(-1)), float32(math.NaN()), 3}
		for n := 1; n <= 40; n += 13 { // a masked tail, and whole vectors
			src := make([]float32, 0, n*len(xs))
			for len(src) < n*len(xs) {
				src = append(src, xs...)
			}
			src = src[:n*len(xs)-n%3]
			got, plain := make([]float32, len(src)), make([]float32, len(src))
			ExpSumFlush(got, src, 0)
			ExpSum(plain, src, 0)
			for i, x := range src {
				switch {
				case x != x:
					if got[i] == got[i] {
						t.Fatalf("ExpSumFlush(NaN) = %v", got[i])
					}
				case x <= -87:
					if got[i] != 0 {
						t.Fatalf("ExpSumFlush(%v) = %v, want 0", x, got[i])
					}
				default:
					if got[i] != plain[i] || got[i] < 0x1p-126 {
						t.Fatalf("ExpSumFlush(%v) = %v, ExpSum %v", x, got[i], plain[i])
					}
				}
			}
		}
		sub := make([]float32, 1)
		ExpSum(sub, []float32{-90}, 0)
		if !(sub[0] > 0 && sub[0] < 0x1p-126) {
			t.Fatalf("ExpSum(−90) = %v: not the subnormal the flush is for", sub[0])
		}
	})
}
