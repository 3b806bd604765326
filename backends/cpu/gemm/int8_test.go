package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/vec"
)

// withInt8Path runs f with the named int8 path chosen and restores the automatic choice.
func withInt8Path(t testing.TB, name string, f func()) {
	t.Helper()
	if err := SetInt8Path(name); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := SetInt8Path(""); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// forEachInt8Path runs f on every int8 path this machine has, each under the best kernel
// level that offers it (the paths an AVX-512 CPU has below "vnni512" also run under
// ZOO_CPU=avx2, which is tested by choosing the level too).
func forEachInt8Path(t *testing.T, f func(t *testing.T)) {
	seen := map[string]bool{}
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, path := range Int8Paths() {
				key := lv + "/" + path
				if seen[path] {
					continue
				}
				seen[path] = true
				withInt8Path(t, path, func() { t.Run(key, f) })
			}
		})
	}
}

// TestInt8PathNames checks Int8Path against the table and SetInt8Path's refusals.
func TestInt8PathNames(t *testing.T) {
	paths := Int8Paths()
	if paths[len(paths)-1] != "generic" {
		t.Fatalf("Int8Paths = %v, want generic last", paths)
	}
	if got, why := Int8Path(); got != paths[0] {
		t.Errorf("Int8Path = %q (%q), want the best, %q", got, why, paths[0])
	}
	for _, p := range paths {
		withInt8Path(t, p, func() {
			if got, _ := Int8Path(); got != p {
				t.Errorf("after SetInt8Path(%q), Int8Path = %q", p, got)
			}
			pb := PackBInt8(false, 3, 5, make([]float32, 15), 5)
			if pb.Int8Path() != p {
				t.Errorf("packed under %q, the operand says %q", p, pb.Int8Path())
			}
			// Weights given as int8 keep 8 bits: the same form as PackBInt8's where that
			// quantizes to 8 bits, another on the avx2 path (7).
			pq := PackBInt8Quantized(3, 5, make([]int8, 15), []float32{1})
			if same, bits := pb.Int8SameForm(pq), Int8WeightBits(p); same != (bits == 8) || !pb.Int8SameForm(pb.WithInt8Scales([]float32{2})) {
				t.Errorf("%s: Int8SameForm(PackBInt8Quantized) = %v with %d-bit weights", p, same, bits)
			}
		})
	}
	if err := SetInt8Path("vnni"); err == nil {
		t.Error("SetInt8Path(vnni) accepted an unknown path")
	}
	for _, k := range int8Kernels {
		if !k.ok() {
			if err := SetInt8Path(k.name); err == nil {
				t.Errorf("SetInt8Path(%q) accepted a path this CPU cannot run", k.name)
			} else {
				t.Logf("%s: %v", k.name, err)
			}
		}
	}
	if p, why := Int8Path(); why != "" {
		t.Logf("int8 path %s: %s", p, why)
	}
}

// refQuantRow is the documented quantization of one row of alpha·A, restated: lo and hi
// widened to hold 0, s = (hi−lo)/Q, z = rne(−lo/s), q = clamp(rne(x/s) + z, 0, 255), with
// the inverse scale rounded to float32 as the kernels use it; Q = qmax is 255, or 127 for
// the narrow kernels.
func refQuantRow(row []float32, alpha float32, qmax int32) (q []int32, s float32, z int32) {
	var lo, hi float32
	bad := false
	for _, x := range row {
		lo, hi = min(lo, x), max(hi, x)
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			bad = true
		}
	}
	q = make([]int32, len(row))
	if bad {
		return q, float32(math.NaN()), 0
	}
	s = float32((float64(hi) - float64(lo)) / float64(qmax))
	inv := float32(1 / float64(s))
	if s == 0 || math.IsInf(float64(inv), 0) {
		s, inv = 1, 1
	} else {
		z = int32(math.RoundToEven(float64(-lo * inv)))
	}
	for p, x := range row {
		q[p] = int32(max(0, min(255, math.RoundToEven(float64(x*inv))+float64(z))))
	}
	return q, alpha * s, z
}

// int8Ref is the float64 reference of an int8 product: every row quantized as documented,
// sums exact in int64, dequantized in float64 from the float32 scales.
func int8Ref(m, n, k int, alpha float32, a []float32, lda int, pb *PackedB) []float64 {
	qb, sc := pb.Int8Values()
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		q, s, z := refQuantRow(a[i*lda:i*lda+k], alpha, pb.i8.kern.actMax())
		for j := 0; j < n; j++ {
			var acc int64
			for p := 0; p < k; p++ {
				acc += int64(q[p]-z) * int64(qb[p*n+j])
			}
			out[i*n+j] = float64(acc) * float64(s) * float64(sc[j])
		}
	}
	return out
}

// within2ULP reports whether got is within two float32 ulps (relative) of want, or both
// NaN: the dequantization rounds three times (the int32 to float, the scale product, the
// final product).
func within2ULP(got float32, want float64) bool {
	if math.IsNaN(want) {
		return got != got
	}
	return math.Abs(float64(got)-want) <= 2*math.Abs(want)*(1.0/(1<<24))+1e-45
}

// int8Shapes are the awkward shapes the int8 products are tested on: none a multiple of a
// tile, some one row or column, k up to 4096.
var int8Shapes = [][3]int{{1, 1, 1}, {3, 17, 63}, {17, 63, 64}, {63, 65, 65}, {64, 127, 127}, {65, 3, 768}, {127, 64, 17}, {1, 129, 4096}, {13, 33, 4096}, {200, 1100, 300}}

// int8TestShapes returns int8Shapes, without the last (the one of many row and column
// blocks, whose float64 reference is most of the tests' time) under -short: CI's race run.
func int8TestShapes() [][3]int {
	if testing.Short() {
		return int8Shapes[:len(int8Shapes)-1]
	}
	return int8Shapes
}

// TestSgemmInt8 holds SgemmPacked with an int8 operand, on every path, to the float64
// reference of the same quantized arithmetic within two ulps, to bitwise agreement between
// paths of the same operand form (8-bit, or the avx2 path's 7-bit), and checks beta, column
// ranges and the epilogue's blocks.
func TestSgemmInt8(t *testing.T) {
	type result struct{ c []float32 }
	first := map[string][]float32{}
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, sh := range int8TestShapes() {
			for _, transB := range []bool{false, true} {
				m, n, k := sh[0], sh[1], sh[2]
				if transB && k > 1000 {
					continue
				}
				g := newCase(rng, false, transB, m, n, k, 1, 0, 3)
				// Activations with outliers and a zero row, weights gaussian.
				for i := range g.a {
					g.a[i] = float32(rng.NormFloat64())
					if rng.IntN(97) == 0 {
						g.a[i] *= 20
					}
				}
				if m > 2 {
					clear(g.a[g.offA+g.lda : g.offA+g.lda+k])
				}
				pb := PackBInt8(transB, k, n, g.b[g.offB:], g.ldb)
				for _, ab := range [][2]float32{{1, 0}, {-0.5, 0.75}} {
					alpha, beta := ab[0], ab[1]
					c := g.cloneC()
					SgemmPacked(m, n, k, alpha, g.a[g.offA:], g.lda, pb, beta, c[g.offC:], g.ldc)
					ref := int8Ref(m, n, k, alpha, g.a[g.offA:], g.lda, pb)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							got := c[g.offC+i*g.ldc+j]
							d := ref[i*n+j]
							ok := within2ULP(got, d)
							if beta != 0 {
								// fma(beta, C, d) rounds once more, after d's own roundings.
								want := d + float64(beta)*float64(g.c[g.offC+i*g.ldc+j])
								ok = math.Abs(float64(got)-want) <= (2*math.Abs(d)+math.Abs(want))/(1<<24)+1e-45
								d = want
							}
							if want := d; !ok {
								t.Fatalf("%v transB=%v alpha=%g beta=%g: (%d, %d) = %g, reference %g", sh, transB, alpha, beta, i, j, got, want)
							}
						}
					}
					checkGuards(t, g, c)
					// The paths agree bit for bit within a form of the weights: the avx2
					// path's 7-bit operands are their own.
					key := fmt.Sprint(sh, transB, ab, pb.i8.kern.actMax())
					if prev, ok := first[key]; ok {
						bitwise(t, "against the first path "+key, c, prev)
					} else {
						first[key] = c
					}
					// Column ranges in a scrambled order give the same bits.
					cols := g.cloneC()
					step := pb.ColAlign() * (1 + rng.IntN(3))
					for j := (n - 1) / step * step; j >= 0; j -= step {
						SgemmPackedCols(m, j, min(j+step, n), alpha, g.a[g.offA:], g.lda, pb, beta, cols[g.offC:], g.ldc)
					}
					bitwise(t, "SgemmPackedCols "+key, cols, c)
				}
			}
		}
	})
}

// checkGuards fails when anything outside the m×n window of C changed.
func checkGuards(t *testing.T, g *gemmCase, c []float32) {
	t.Helper()
	for i := range c {
		r, col := (i-g.offC)/g.ldc, (i-g.offC)%g.ldc
		inside := i >= g.offC && r < g.m && col < g.n
		if !inside && math.Float32bits(c[i]) != math.Float32bits(g.c[i]) {
			t.Fatalf("element %d outside C changed: %g, was %g", i, c[i], g.c[i])
		}
	}
}

// TestSgemmInt8Epilogue checks that the epilogue blocks of an int8 product partition the
// columns and are final when passed.
func TestSgemmInt8Epilogue(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, sh := range [][3]int{{1, 1, 1}, {13, 33, 17}, {400, 1100, 200}} {
			m, n, k := sh[0], sh[1], sh[2]
			g := newCase(rng, false, false, m, n, k, 1, 0, 2)
			pb := PackBInt8(false, k, n, g.b[g.offB:], g.ldb)
			want := g.cloneC()
			SgemmPacked(m, n, k, 1, g.a[g.offA:], g.lda, pb, 0.5, want[g.offC:], g.ldc)
			got := g.cloneC()
			c := got[g.offC:]
			seen := make([]int, m*n)
			SgemmPackedEpilogue(m, 0, n, 1, g.a[g.offA:], g.lda, pb, 0.5, c, g.ldc, func(i0, i1, c0, c1 int) {
				for i := i0; i < i1; i++ {
					for j := c0; j < c1; j++ {
						seen[i*n+j]++
						if c[i*g.ldc+j] != want[g.offC+i*g.ldc+j] {
							t.Fatalf("%v: (%d, %d) not final when passed", sh, i, j)
						}
					}
				}
			})
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("%v: element %d passed %d times", sh, i, s)
				}
			}
		}
	})
}

// TestGemmU8S8 holds the exact integer product to int64 sums on every path, with extreme
// values in A (0, 255) and in the weights (−128, 127), and threads; and on weights PackBInt8
// quantized itself (the avx2 path's 7-bit form, whose kernels take A up to 128 only).
func TestGemmU8S8(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		for _, sh := range int8TestShapes() {
			m, n, k := sh[0], sh[1], sh[2]
			lda, ldc := k+5, n+2
			a := make([]uint8, m*lda)
			for i := range a {
				a[i] = uint8(rng.IntN(256))
				if rng.IntN(5) == 0 {
					a[i] = 255
				}
			}
			q := make([]int8, k*n)
			for i := range q {
				q[i] = int8(rng.IntN(256) - 128)
				if rng.IntN(5) == 0 {
					q[i] = -128
				}
			}
			wf := make([]float32, k*n)
			for i := range wf {
				wf[i] = float32(rng.NormFloat64())
			}
			pf := PackBInt8(false, k, n, wf, n)
			qf, _ := pf.Int8Values()
			for _, op := range []struct {
				pb *PackedB
				q  []int8
			}{{PackBInt8Quantized(k, n, q, []float32{0.5}), q}, {pf, qf}} {
				pb, q := op.pb, op.q
				for _, threads := range []int{1, 2} {
					c := make([]int32, m*ldc)
					for i := range c {
						c[i] = -7
					}
					GemmU8S8Parallel(threads, m, n, k, a, lda, pb, c, ldc)
					for i := 0; i < m; i++ {
						for j := 0; j < ldc; j++ {
							want := int64(-7)
							if j < n {
								want = 0
								for p := 0; p < k; p++ {
									want += int64(a[i*lda+p]) * int64(q[p*n+j])
								}
							}
							if int64(c[i*ldc+j]) != want {
								t.Fatalf("%v threads=%d path %s: (%d, %d) = %d, want %d", sh, threads, pb.Int8Path(), i, j, c[i*ldc+j], want)
							}
						}
					}
				}
			}
		}
	})
}

// TestInt8NoSaturation proves by construction that no path saturates: every product of the
// extremes, 255·(−128), summed 4096 times (and 255·127), must come out exact. An AVX2 path
// adding pairs in int16 (VPMADDUBSW) would clamp each pair at −32768 and answer −67,108,864
// instead of −133,693,440.
func TestInt8NoSaturation(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		const m, n, k = 13, 37, 4096
		a := make([]uint8, m*k)
		for i := range a {
			a[i] = 255
		}
		for _, w := range []int8{-128, 127} {
			q := make([]int8, k*n)
			for i := range q {
				q[i] = w
			}
			pb := PackBInt8Quantized(k, n, q, []float32{1})
			c := make([]int32, m*n)
			GemmU8S8(m, n, k, a, k, pb, c, n)
			want := int32(255 * int(w) * k)
			for i, v := range c {
				if v != want {
					t.Fatalf("w=%d: element %d = %d, want %d", w, i, v, want)
				}
			}
		}
	})
}

// TestQuantizeRows holds quantizeRows (the vector routines where a kernel has them) to
// quantizeRowsGo bit for bit, and quantizeRowsGo to the documented formulas, including
// zero, NaN, infinite, one-signed and tiny rows.
func TestQuantizeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, k := range []int{1, 3, 7, 8, 9, 16, 31, 33, 64, 100, 768} {
		rows := 9
		lda := k + 3
		a := make([]float32, rows*lda)
		for i := range a {
			a[i] = float32(rng.NormFloat64()) * 3
		}
		a[1*lda] = float32(math.NaN())
		a[2*lda+k-1] = float32(math.Inf(1))
		clear(a[3*lda : 3*lda+k])
		for p := 0; p < k; p++ {
			a[4*lda+p] = float32(math.Abs(float64(a[4*lda+p]))) // one-signed
			a[5*lda+p] = -a[4*lda+p]
			a[6*lda+p] *= 1e-39 // denormal range: taken as zeros
		}
		for _, kern := range append([]*int8Kernel{nil}, int8KernelSets()...) {
			if kern != nil && !kern.cpuOK() {
				continue
			}
			ldq, kpad, _ := int8Blocking(kern, k)
			for _, alpha := range []float32{1, -2} {
				got := make([]byte, rows*ldq)
				want := make([]byte, rows*ldq)
				for i := range got {
					got[i], want[i] = 0xAA, 0xAA
				}
				rs, rz := make([]float32, rows), make([]int32, rows)
				ws, wz := make([]float32, rows), make([]int32, rows)
				quantizeRows(kern, got, ldq, a, lda, rows, k, kpad, alpha, rs, rz)
				wide := kern != nil && kern.wideA
				quantizeRowsGo(want, ldq, wide, kern.actMax(), a, lda, rows, k, kpad, alpha, ws, wz)
				name := "generic"
				if kern != nil {
					name = kern.name
				}
				for i := 0; i < rows; i++ {
					if math.Float32bits(rs[i]) != math.Float32bits(ws[i]) && !(rs[i] != rs[i] && ws[i] != ws[i]) || rz[i] != wz[i] {
						t.Fatalf("%s k=%d row %d: scale %g zero %d, Go %g %d", name, k, i, rs[i], rz[i], ws[i], wz[i])
					}
					end := kpad
					if wide {
						end = 2 * kpad
					}
					for p := 0; p < end; p++ {
						if got[i*ldq+p] != want[i*ldq+p] {
							t.Fatalf("%s k=%d alpha=%g row %d byte %d = %d, Go %d", name, k, alpha, i, p, got[i*ldq+p], want[i*ldq+p])
						}
					}
					q, s, z := refQuantRow(a[i*lda:i*lda+k], alpha, kern.actMax())
					for _, v := range q {
						if v > kern.actMax()+1 {
							t.Fatalf("%s k=%d row %d: a value %d past the bound %d", name, k, i, v, kern.actMax()+1)
						}
					}
					if math.Float32bits(s) != math.Float32bits(ws[i]) && !(s != s && ws[i] != ws[i]) || z != wz[i] {
						t.Fatalf("k=%d row %d: scale %g zero %d, reference %g %d", k, i, ws[i], wz[i], s, z)
					}
					for p := 0; p < k; p++ {
						v := int32(want[i*ldq+p])
						if wide {
							v = int32(want[i*ldq+2*p]) | int32(want[i*ldq+2*p+1])<<8
						}
						if v != q[p] {
							t.Fatalf("k=%d row %d: q[%d] = %d, reference %d", k, i, p, v, q[p])
						}
					}
				}
			}
		}
	}
}

// TestInt8KernelsBitwise checks every int8 micro-kernel this CPU can run, at every height,
// against int8TileTwin and int8StoreTwin bit for bit, in all three store modes, and the
// dequantizing ones with the bias and ReLU epilogue bits (biases of both signs, a −0, and
// values the ReLU cuts). The narrow (7-bit) kernels get operands in their range, and at
// k = 1024 the extremes: every A value 128 against weights all 63 or all −63, whose pairs
// of k steps sum four products to ±32256 in int16, the most that can occur; one more
// would saturate VPADDW, and the sums would no longer be the twin's.
func TestInt8KernelsBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, kern := range int8KernelSets() {
		if kern.fns == nil {
			t.Logf("%s: a place in the table, no kernels yet", kern.name)
			continue
		}
		if !kern.cpuOK() {
			t.Logf("%s: skipped: %s", kern.name, kern.why())
			continue
		}
		name := kern.name
		if kern.narrow {
			name += "-7bit"
		}
		t.Run(name, func(t *testing.T) {
			mr, nr, g := kern.mr, kern.nr, kern.group
			for _, kg := range []int{1, 2, 3, 5, 16, 17, 47, 192, 1024} {
				lda := 4*kg + 64
				a := make([]byte, mr*lda)
				for i := range a {
					a[i] = byte(rng.IntN(256))
					if kern.narrow {
						a[i] = byte(rng.IntN(129))
					}
					if kern.wideA && i%2 == 1 {
						a[i] = 0
					}
				}
				b := make([]int8, kg*nr*g)
				for i := range b {
					b[i] = int8(rng.IntN(256) - 128)
					if kern.narrow {
						b[i] = int8(rng.IntN(127) - 63)
					}
				}
				if kern.narrow && kg == 1024 {
					for i := range a {
						a[i] = 128
					}
					for i := range b {
						b[i] = 63
						if i/g%nr%2 == 1 {
							b[i] = -63 // odd columns
						}
					}
				}
				rs, rz := make([]float32, mr), make([]int32, mr)
				for i := range rs {
					rs[i], rz[i] = rng.Float32()*0.1, int32(rng.IntN(256))
				}
				cs, csum, bias := make([]float32, nr), make([]int32, nr), make([]float32, nr)
				for j := range cs {
					cs[j], csum[j] = rng.Float32()*0.02, int32(rng.IntN(60000)-30000)
					bias[j] = float32(rng.NormFloat64() * 50)
				}
				bias[0] = float32(math.Copysign(0, -1))
				acc := make([]int32, mr*nr)
				for h := 1; h <= mr; h++ {
					int8TileTwin(kern, h, kg, a, lda, b, acc)
					for _, flags := range []int{int8Store, int8Accum, int8Raw, int8Store | int8Bias, int8Accum | int8Bias,
						int8Store | int8Relu, int8Store | int8Bias | int8Relu, int8Accum | int8Bias | int8Relu} {
						ldc := nr + 5
						c := make([]float32, h*ldc)
						for i := range c {
							c[i] = rng.Float32()
						}
						want := append([]float32(nil), c...)
						kern.fns[h-1](kg, &a[0], &b[0], &c[0], ldc, flags, 0.75, lda, &rs[0], &rz[0], &cs[0], &csum[0], &bias[0])
						int8StoreTwin(h, nr, acc, want, ldc, flags, 0.75, rs, rz, cs, csum, bias)
						for i := range c {
							if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
								t.Fatalf("kg=%d h=%d flags=%d: c[%d] = %#x, twin %#x", kg, h, flags, i, math.Float32bits(c[i]), math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		})
	}
}

// TestPackBInt8 checks the quantized weights: within half a step of the floats, the scale
// max|column|/W (W = 127, or 63 for the avx2 path's 7-bit form), Unpack and Int8Values consistent, zero and non-finite columns, the
// transposed form, and the packed size against fp32's.
func TestPackBInt8(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(19, 20))
		for _, sh := range [][2]int{{1, 1}, {7, 5}, {65, 33}, {768, 768}} {
			k, n := sh[0], sh[1]
			w := make([]float32, k*n)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for p := 0; p < k; p++ {
				w[p*n] = 0 // column 0 is zero
			}
			wt := make([]float32, n*k)
			for p := 0; p < k; p++ {
				for j := 0; j < n; j++ {
					wt[j*k+p] = w[p*n+j]
				}
			}
			pb := PackBInt8(false, k, n, w, n)
			pt := PackBInt8(true, k, n, wt, k)
			q, s := pb.Int8Values()
			qt, st := pt.Int8Values()
			un := pb.Unpack()
			wmax := float32(pb.i8.kern.weightMax())
			for j := 0; j < n; j++ {
				var amax float32
				for p := 0; p < k; p++ {
					amax = max(amax, abs32(w[p*n+j]))
				}
				if s[j] != amax/wmax || st[j] != s[j] {
					t.Fatalf("%v column %d: scale %g (transposed %g), want %g", sh, j, s[j], st[j], amax/wmax)
				}
				for p := 0; p < k; p++ {
					i := p*n + j
					if q[i] != qt[i] || float32(q[i]) < -wmax || float32(q[i]) > wmax {
						t.Fatalf("%v (%d, %d): q %d, transposed %d", sh, p, j, q[i], qt[i])
					}
					if un[i] != float32(q[i])*s[j] || math.Abs(float64(un[i]-w[i])) > float64(s[j])/2*1.0001 {
						t.Fatalf("%v (%d, %d): unpacked %g from %g (scale %g)", sh, p, j, un[i], w[i], s[j])
					}
				}
			}
			// What a program keeps of an int8 weight matrix: at most 30 % of its fp32 bytes
			// once the matrix is of a layer's size.
			if k*n >= 1<<16 {
				if ratio := float64(pb.Bytes()) / float64(4*k*n); ratio > 0.30 {
					t.Fatalf("%v: int8 operand holds %d bytes, %.2f of fp32's", sh, pb.Bytes(), ratio)
				}
			}
		}
		w := []float32{1, float32(math.NaN()), 2, 3}
		pb := PackBInt8(false, 2, 2, w, 2)
		_, s := pb.Int8Values()
		if wmax := float32(pb.i8.kern.weightMax()); s[0] != 2/wmax || s[1] == s[1] {
			t.Fatalf("scales %v, want 2/%g and NaN", s, wmax)
		}
	})
}

// TestInt8Accuracy compares int8 products with fp32 ones on activations of the kinds a
// transformer layer sees (gaussian, gaussian with a few large outliers per row, and
// GELU-like one-signed outputs) and measures the two ways of quantizing A: per row (what
// the products do) and per tensor (one scale for the whole matrix, as ONNX Runtime's
// dynamic quantization). Per row must be at least as accurate everywhere and the int8
// error stay small.
func TestInt8Accuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const m, n, k = 64, 256, 768
	w := make([]float32, k*n)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	pb := PackBInt8(false, k, n, w, n)
	exact := func(a []float32) []float64 {
		out := make([]float64, m*n)
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				av := float64(a[i*k+p])
				for j := 0; j < n; j++ {
					out[i*n+j] += av * float64(w[p*n+j])
				}
			}
		}
		return out
	}
	relErr := func(got []float32, want []float64) float64 {
		var num, den float64
		for i, v := range want {
			d := float64(got[i]) - v
			num += d * d
			den += v * v
		}
		return math.Sqrt(num / den)
	}
	// The error bound of each kind: a row whose range a few outliers widen 30-fold keeps
	// fewer levels for the rest of its values.
	bound := map[string]float64{"gaussian": 0.015, "outliers": 0.05, "gelu": 0.015}
	kinds := map[string]func(i, p int) float32{
		"gaussian": func(i, p int) float32 { return float32(rng.NormFloat64()) },
		"outliers": func(i, p int) float32 {
			v := rng.NormFloat64()
			if p%97 == i%7 {
				v *= 30 // a few features far out, as in trained transformers
			}
			return float32(v * float64(1+i%5)) // rows of different ranges
		},
		"gelu": func(i, p int) float32 {
			x := rng.NormFloat64() * 2
			return float32(0.5 * x * (1 + math.Erf(x/math.Sqrt2)))
		},
	}
	for name, gen := range kinds {
		a := make([]float32, m*k)
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				a[i*k+p] = gen(i, p)
			}
		}
		want := exact(a)
		perRow := make([]float32, m*n)
		SgemmPacked(m, n, k, 1, a, k, pb, 0, perRow, n)
		// Per tensor: every row scaled to the whole matrix's range, by prepending the
		// matrix's extremes to each row's quantization (a row with the tensor's lo and hi
		// gets the tensor's scale and zero point).
		var lo, hi float32
		for _, v := range a {
			lo, hi = min(lo, v), max(hi, v)
		}
		perTensor := make([]float32, m*n)
		s, inv, z := rowQuant(lo, hi, false, pb.i8.kern.actMax())
		qb, sc := pb.Int8Values()
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var acc int32
				for p := 0; p < k; p++ {
					acc += (quantOne(a[i*k+p], inv, z) - z) * int32(qb[p*n+j])
				}
				perTensor[i*n+j] = float32(acc) * s * sc[j]
			}
		}
		eRow, eTensor := relErr(perRow, want), relErr(perTensor, want)
		t.Logf("%s: relative RMS error per row %.5f, per tensor %.5f", name, eRow, eTensor)
		if eRow > eTensor || eRow > bound[name] {
			t.Errorf("%s: per-row error %.5f (per tensor %.5f): per row should be the better and under %g", name, eRow, eTensor, bound[name])
		}
	}
}

// TestInt8BadArgs checks the refusals: non-int8 operand to GemmU8S8, wrong lengths, k
// over MaxInt8K.
func TestInt8BadArgs(t *testing.T) {
	mustPanic(t, "GemmU8S8 on fp32 weights", func() {
		GemmU8S8(1, 2, 2, make([]uint8, 2), 2, PackB(false, 2, 2, make([]float32, 4), 2), make([]int32, 2), 2)
	})
	mustPanic(t, "PackBInt8Quantized with 3 scales for 2 columns", func() { PackBInt8Quantized(2, 2, make([]int8, 4), make([]float32, 3)) })
	mustPanic(t, "PackBInt8 with k over MaxInt8K", func() { PackBInt8(false, MaxInt8K+1, 1, make([]float32, MaxInt8K+1), 1) })
	mustPanic(t, "WithInt8Scales on fp32 weights", func() { PackB(false, 2, 2, make([]float32, 4), 2).WithInt8Scales([]float32{1}) })
	mustPanic(t, "QuantizeTensorRange with zero point 256", func() {
		var r Int8Rows
		r.Prepare(PackBInt8Quantized(2, 2, make([]int8, 4), []float32{1}), 1, 1)
		r.QuantizeTensorRange(0, 1, make([]float32, 2), 2, 1, 256)
	})
	mustPanic(t, "GemmU8S8 with a short A", func() {
		GemmU8S8(2, 2, 2, make([]uint8, 3), 2, PackBInt8Quantized(2, 2, make([]int8, 4), []float32{1}), make([]int32, 4), 2)
	})
}

// TestInt8Rows holds products on rows quantized once (Int8Rows, in two ranges) to
// SgemmPackedEpilogueAt on the same rows bit for bit, for row and column sub-ranges, and
// checks the rows the epilogue is given.
func TestInt8Rows(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		for _, sh := range [][3]int{{1, 1, 1}, {17, 70, 33}, {300, 130, 517}} {
			m, n, k := sh[0], sh[1], sh[2]
			g := newCase(rng, false, false, m, n, k, -0.5, 0, 2)
			pb := PackBInt8(false, k, n, g.b[g.offB:], g.ldb)
			var r Int8Rows
			r.Prepare(pb, m, g.alpha)
			r.QuantizeRange(m/2, m, g.a[g.offA:], g.lda)
			r.QuantizeRange(0, m/2, g.a[g.offA:], g.lda)
			al := pb.ColAlign()
			for _, rc := range [][4]int{{0, m, 0, n}, {m / 3, m - m/3, min(al, n-1) / al * al, n - 1}} {
				i0, i1, j0, j1 := rc[0], rc[1], rc[2], rc[3]
				if j1 <= j0 || i1 <= i0 {
					continue
				}
				w := j1 - j0
				want := make([]float32, (i1-i0)*w)
				SgemmPackedEpilogueAt(i1-i0, j0, j1, g.alpha, g.a[g.offA+i0*g.lda:], g.lda, pb, 0, want, w, nil)
				got := make([]float32, (i1-i0)*w)
				rows := 0
				SgemmInt8RowsAt(&r, i0, i1-i0, j0, j1, pb, 0, got, w, func(a, b, c0, c1 int) {
					if a < 0 || b > i1-i0 || c0 < j0 || c1 > j1 {
						t.Fatalf("%v: epilogue block rows [%d, %d) columns [%d, %d)", sh, a, b, c0, c1)
					}
					rows += (b - a) * (c1 - c0)
				})
				if rows != (i1-i0)*w {
					t.Fatalf("%v: the epilogue covered %d elements, want %d", sh, rows, (i1-i0)*w)
				}
				bitwise(t, fmt.Sprint(sh, rc), got, want)
			}
		}
	})
}

// TestInt8RowsTensorRange: rows quantized with one scale and zero point (QuantizeTensorRange,
// in two ranges) times an operand rescaled by WithInt8Scales give, on every path,
// float32(float32(Σ (q − zp)·b) · float32(scale·s_j)) bit for bit, q the values
// QuantizeTensorU8 gives: ONNX's Cast of MatMulInteger's sum times its Mul(x_scale,
// w_scale). A zero scale quantizes to zeros. The original operand keeps its scales.
func TestInt8RowsTensorRange(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(25, 26))
		for _, sh := range [][3]int{{1, 1, 1}, {17, 70, 33}, {300, 130, 517}, {5, 33, 4096}} {
			m, n, k := sh[0], sh[1], sh[2]
			lda := k + 3
			x := make([]float32, m*lda)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			b := make([]int8, k*n)
			for i := range b {
				b[i] = int8(rng.IntN(256) - 128)
			}
			s := make([]float32, n)
			for j := range s {
				s[j] = rng.Float32() / 64
			}
			base := PackBInt8Quantized(k, n, b, []float32{1})
			pb := base.WithInt8Scales(s)
			for _, scale := range []float32{0.0137, 0} {
				zp := int32(rng.IntN(256))
				var r Int8Rows
				r.Prepare(pb, m, 1)
				r.QuantizeTensorRange(m/2, m, x, lda, scale, zp)
				r.QuantizeTensorRange(0, m/2, x, lda, scale, zp)
				got := make([]float32, m*n)
				SgemmInt8RowsAt(&r, 0, m, 0, n, pb, 0, got, n, nil)
				want := make([]float32, m*n)
				for i := 0; i < m; i++ {
					q := make([]uint8, k)
					if scale != 0 {
						QuantizeTensorU8(q, x[i*lda:i*lda+k], scale, zp)
					}
					for j := 0; j < n; j++ {
						var sum int32
						for p := 0; p < k; p++ {
							sum += (int32(q[p]) - zp) * int32(b[p*n+j])
						}
						want[i*n+j] = float32(float32(sum) * float32(scale*s[j]))
					}
				}
				bitwise(t, fmt.Sprint(sh, scale), got, want)
			}
			if _, bs := base.Int8Values(); bs[n-1] != 1 {
				t.Fatalf("%v: WithInt8Scales changed the original operand's scales", sh)
			}
		}
	})
}

// TestQuantizeTensorU8 holds the vector quantization to its Go twin (quantDivOne) on every
// kernel level, on lengths around the vector widths and on awkward values: exact ties
// (k + ½)·scale, which a product by 1/scale can round the other way, NaN, ±Inf, quotients
// past ±512 and past 2³¹ (which convert to INT_MIN in vector code), and zero points 0 and 255.
func TestQuantizeTensorU8(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	x := make([]float32, 1000)
	const scale = float32(0.0123)
	// Values whose product by the inverse scale rounds to another integer than their
	// quotient does (a few ulps from (k + ½)·scale): the vector code must divide these. (A
	// product with a division only near half integers was tried; on Zen 5 it ran slower
	// than VDIVPS, the pass being bound by its memory.)
	inv := float32(1 / scale)
	var split []float32
	for k := -150; k < 150 && len(split) < 60; k++ {
		v := (float32(k) + 0.5) * scale
		for d := -4; d <= 4; d++ {
			u := math.Float32frombits(uint32(int32(math.Float32bits(v)) + int32(d)))
			a, _ := rne512(float32(u * inv))
			b, _ := rne512(u / scale)
			if a != b {
				split = append(split, u)
			}
		}
	}
	if len(split) == 0 {
		t.Fatal("found no value whose product by the inverse rounds apart from its quotient")
	}
	for i := range x {
		switch i % 7 {
		case 0:
			x[i] = (float32(rng.IntN(300)-150) + 0.5) * scale
		case 2:
			x[i] = split[rng.IntN(len(split))]
		case 1:
			x[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 3e9, -3e9, 7, -7, 0}[rng.IntN(8)]
		default:
			x[i] = float32(rng.NormFloat64()) * 2
		}
	}
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, zp := range []int32{0, 128, 255} {
				for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000} {
					got := make([]uint8, n+1)
					got[n] = 77
					QuantizeTensorU8(got, x[:n], scale, zp)
					for p := 0; p < n; p++ {
						if want := quantDivOne(x[p], scale, zp); got[p] != want {
							t.Fatalf("%s zp %d n %d: x[%d] = %v → %d, want %d", lv, zp, n, p, x[p], got[p], want)
						}
					}
					if got[n] != 77 {
						t.Fatalf("%s n %d: wrote past the end", lv, n)
					}
				}
			}
		})
	}
}

// TestInt8Epilogue checks SetInt8Epilogue on every int8 path: with a bias, and with a bias
// and ReLU, the product (tiles full and partial) is bit for bit the plain int8 product with
// vec.BiasAct's bias add and ReLU (and with beta 1, C plus that); without either it is the
// plain product again; a repack drops it; bad operands are refused.
func TestInt8Epilogue(t *testing.T) {
	forEachInt8Path(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(41, 42))
		const m, k, n = 37, 70, 45
		a, w, bias := make([]float32, m*k), make([]float32, k*n), make([]float32, n)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range w {
			w[i] = float32(rng.NormFloat64() * 0.1)
		}
		for j := range bias {
			bias[j] = float32(rng.NormFloat64())
		}
		plain := make([]float32, m*n)
		SgemmPacked(m, n, k, 1, a, k, PackBInt8(false, k, n, w, n), 0, plain, n)
		for _, relu := range []bool{false, true} {
			pb := PackBInt8(false, k, n, w, n)
			if err := pb.SetInt8Epilogue(bias, relu); err != nil {
				t.Fatal(err)
			}
			for _, beta := range []float32{0, 1} {
				got := make([]float32, m*n)
				for i := range got {
					got[i] = 0.5
				}
				SgemmPacked(m, n, k, 1, a, k, pb, beta, got, n)
				want := slices.Clone(plain)
				act := vec.ActNone
				if relu {
					act = vec.ActRelu
				}
				for i := 0; i < m; i++ {
					vec.BiasAct(want[i*n:(i+1)*n], bias, act)
				}
				for i := range got {
					if beta != 0 {
						want[i] = fma32(beta, 0.5, want[i])
					}
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("relu %v beta %v: [%d] = %v, want %v", relu, beta, i, got[i], want[i])
					}
				}
			}
			if err := pb.SetInt8Epilogue(nil, false); err != nil {
				t.Fatal(err)
			}
			again := make([]float32, m*n)
			SgemmPacked(m, n, k, 1, a, k, pb, 0, again, n)
			for i := range again {
				if math.Float32bits(again[i]) != math.Float32bits(plain[i]) {
					t.Fatalf("epilogue removed: [%d] = %v, plain %v", i, again[i], plain[i])
				}
			}
		}
		pb := PackBInt8(false, k, n, w, n)
		if err := pb.SetInt8Epilogue(bias[:n-1], false); err == nil {
			t.Error("a bias one short: no error")
		}
		if err := PackB(false, k, n, w, n).SetInt8Epilogue(bias, false); err == nil {
			t.Error("an fp32 operand: no error")
		}
		if err := pb.SetInt8Epilogue(bias, true); err != nil {
			t.Fatal(err)
		}
		pb.PackInt8Activation(false, k, n, w, n)
		if pb.i8.bias != nil || pb.i8.relu {
			t.Error("PackInt8Activation kept the epilogue of the operand it reused")
		}
	})
}
