package gemm

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
)

// withLevel runs f with the named level selected and restores the previous one after.
func withLevel(t testing.TB, name string, f func()) {
	t.Helper()
	prev := simd.Current().String()
	if err := simd.Set(name); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := simd.Set(prev); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// gemmCase is one Sgemm call with operands embedded in larger buffers: strides exceed the
// row length and every matrix starts at an unaligned offset, with guard values around it.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32 // whole buffers
	offA, offB     int
	offC           int
	lda, ldb, ldc  int
}

const guard = float32(-12345.5)

func newCase(rng *rand.Rand, transA, transB bool, m, n, k int, alpha, beta float32, pad int) *gemmCase {
	g := &gemmCase{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	g.lda, g.ldb, g.ldc = ac+pad, bc+pad, n+pad
	g.offA, g.offB, g.offC = 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3)
	fill := func(rows, cols, ld, off int) []float32 {
		buf := make([]float32, off+rows*ld+5)
		for i := range buf {
			buf[i] = guard
		}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				buf[off+i*ld+j] = rng.Float32()*2 - 1
			}
		}
		return buf
	}
	g.a = fill(ar, ac, g.lda, g.offA)
	g.b = fill(br, bc, g.ldb, g.offB)
	g.c = fill(m, n, g.ldc, g.offC)
	return g
}

func (g *gemmCase) cloneC() []float32 { return append([]float32(nil), g.c...) }

// run calls f on the case's operands, writing into c (a copy of g.c).
func (g *gemmCase) run(c []float32, f func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)) {
	f(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a[g.offA:], g.lda, g.b[g.offB:], g.ldb, g.beta, c[g.offC:], g.ldc)
}

func (g *gemmCase) String() string {
	return fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d alpha=%g beta=%g lda=%d ldb=%d ldc=%d", g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.beta, g.lda, g.ldb, g.ldc)
}

// check compares got against want (both computed from g.c) element by element. The bound is
// the first-order worst case of two float32 evaluations of the same sum of k products
// (recursive summation, one rounding each for alpha, product and add): (2k+4)·2⁻²⁴ times the
// magnitude Σ|alpha·a·b| + |beta·c|, computed in float64. Everything outside C must be
// untouched guard values.
func (g *gemmCase) check(t *testing.T, got, want []float32) {
	t.Helper()
	u := math.Ldexp(1, -24)
	bad := 0
	for idx := range got {
		i, j := (idx-g.offC)/g.ldc, (idx-g.offC)%g.ldc
		inside := idx >= g.offC && i < g.m && j < g.n
		if !inside {
			if got[idx] != g.c[idx] {
				t.Fatalf("%v: wrote outside C at buffer index %d", g, idx)
			}
			continue
		}
		mag := math.Abs(float64(g.beta) * float64(g.c[idx]))
		if g.beta == 0 {
			mag = 0
		}
		for p := 0; p < g.k; p++ {
			mag += math.Abs(float64(g.alpha) * float64(g.at(true, i, p)) * float64(g.at(false, p, j)))
		}
		tol := float64(2*g.k+4)*u*mag + 1e-30
		if d := math.Abs(float64(got[idx]) - float64(want[idx])); !(d <= tol) {
			if bad++; bad <= 5 {
				t.Errorf("%v: C[%d,%d] = %g, want %g (diff %g > tol %g)", g, i, j, got[idx], want[idx], d, tol)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%v: %d elements out of tolerance", g, bad)
	}
}

// at returns op(A)[r,c] (isA) or op(B)[r,c].
func (g *gemmCase) at(isA bool, r, c int) float32 {
	if isA {
		if g.transA {
			return g.a[g.offA+c*g.lda+r]
		}
		return g.a[g.offA+r*g.lda+c]
	}
	if g.transB {
		return g.b[g.offB+c*g.ldb+r]
	}
	return g.b[g.offB+r*g.ldb+c]
}

var awkward = []int{1, 2, 3, 7, 13, 17, 31, 33, 64, 100, 257}

// TestSgemmLevels runs every level this machine has over the cross product of awkward sizes;
// transposes, alpha, beta and padding cycle through their values so each combination of
// sizes is covered once per level without the quadratic blow-up of a full product.
func TestSgemmLevels(t *testing.T) {
	betas := []float32{0, 1, 0.5}
	alphas := []float32{1, -0.75, 2}
	for _, name := range levelNames() {
		t.Run(name, func(t *testing.T) {
			withLevel(t, name, func() {
				rng := rand.New(rand.NewPCG(1, 2))
				idx := 0
				for _, m := range awkward {
					for _, n := range awkward {
						for _, k := range awkward {
							if testing.Short() && m*n*k > 1<<18 {
								continue
							}
							idx++
							g := newCase(rng, idx&1 != 0, idx&2 != 0, m, n, k, alphas[idx%3], betas[(idx/4)%3], idx%5)
							want, got := g.cloneC(), g.cloneC()
							g.run(want, SgemmGeneric)
							g.run(got, Sgemm)
							g.check(t, got, want)
						}
					}
				}
			})
		})
	}
}

// TestSgemmAllVariants covers all four transpose combinations and all betas on a few shapes
// large enough to span several k blocks (kc = 256) and n blocks of the packed driver.
func TestSgemmAllVariants(t *testing.T) {
	shapes := [][3]int{{33, 65, 300}, {100, 257, 513}, {13, 2100, 40}}
	if testing.Short() {
		shapes = shapes[:1]
	}
	for _, name := range levelNames() {
		t.Run(name, func(t *testing.T) {
			withLevel(t, name, func() {
				rng := rand.New(rand.NewPCG(3, 4))
				for _, s := range shapes {
					for tr := 0; tr < 4; tr++ {
						for _, beta := range []float32{0, 1, 0.5} {
							g := newCase(rng, tr&1 != 0, tr&2 != 0, s[0], s[1], s[2], 1.5, beta, 7)
							want, got := g.cloneC(), g.cloneC()
							g.run(want, SgemmGeneric)
							g.run(got, Sgemm)
							g.check(t, got, want)
						}
					}
				}
			})
		})
	}
}

// TestPackedDriverTwin runs the packed driver with the pure-Go twin of every kernel shape
// and tiny block sizes, so block and edge logic is exercised on any architecture and with
// many kc/mc/nc boundaries.
func TestPackedDriverTwin(t *testing.T) {
	shapes := [][2]int{{12, 32}, {14, 32}, {8, 48}, {6, 64}, {6, 16}, {4, 8}}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range shapes {
		mr, nr := sh[0], sh[1]
		kern := &microKernel{name: "twin", mr: mr, nr: nr, kc: 5, mc: 2 * mr, nc: 2 * nr, ok: func() bool { return true }}
		kern.fn = func(kc int, a, b, c *float32, ldc, flags int, beta float32) {
			kernelTwin(mr, nr, kc, unsafe.Slice(a, kc*mr), unsafe.Slice(b, kc*nr), unsafe.Slice(c, (mr-1)*ldc+nr), ldc, flags, beta)
		}
		for _, dims := range [][3]int{{1, 1, 1}, {mr, nr, 5}, {2*mr + 1, 3*nr - 1, 11}, {5*mr - 1, 2*nr + 3, 17}, {3, 150, 0}} {
			for tr := 0; tr < 4; tr++ {
				for _, beta := range []float32{0, 1, 0.5} {
					g := newCase(rng, tr&1 != 0, tr&2 != 0, dims[0], dims[1], dims[2], 0.5, beta, 3)
					want, got := g.cloneC(), g.cloneC()
					g.run(want, SgemmGeneric)
					g.run(got, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
						sgemmPacked(kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					})
					g.check(t, got, want)
				}
			}
		}
	}
}

// TestSgemmDirectA holds the driver's in-place reading of A (alpha 1, A row-major) to the
// packed-A path it replaces, bit for bit: full panels, the 8- and 4-row remainders the narrower direct
// kernels take, other remainders that are still packed, several row blocks, partial column
// panels, several k blocks, and the beta cases.
func TestSgemmDirectA(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, kern := range asmKernels {
		if kern.direct == nil || !kern.ok() {
			continue
		}
		packed := *kern
		packed.direct, packed.directEdge = nil, nil
		for _, dims := range [][3]int{{1, 1, 1}, {kern.mr, kern.nr, 7}, {128, 100, 2*kern.kc + 3}, {124, 65, 40}, {kern.mc, 2*kern.nr + 5, 33}, {17, 31, 9}, {kern.mc + 1, 40, 20}, {2*kern.mc + 8, 70, kern.kc + 9}} {
			for _, tb := range []bool{false, true} {
				for _, beta := range []float32{0, 1, 0.5} {
					g := newCase(rng, false, tb, dims[0], dims[1], dims[2], 1, beta, 3)
					want, got := g.cloneC(), g.cloneC()
					g.run(want, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
						sgemmPacked(&packed, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					})
					g.run(got, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
						sgemmPacked(kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					})
					bitwise(t, fmt.Sprintf("%s %v", kern.name, g), got, want)
				}
			}
		}
	}
}

// TestSgemmRestridedA covers rows of A at a 4 KiB-multiple stride, which the driver copies
// to a padded stride before the direct kernels read them (restrideRows): SgemmPacked,
// SgemmPackedCols and the plain driver must equal the packed-A path bit for bit, with full
// panels, edge-kernel and packed remainders, several row and k blocks, partial column
// panels, and products too narrow to be copied.
func TestSgemmRestridedA(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			kern := activeLevel().kern
			if kern == nil || kern.direct == nil {
				return
			}
			packed := *kern
			packed.direct, packed.directEdge = nil, nil
			for _, dims := range [][3]int{{kern.mr, 4 * kern.nr, 1024}, {100, 300, 1000}, {101, 130, 2048}, {2*kern.mc + 8, 256, 700}, {kern.mr + 4, 2 * kern.nr, 1024}, {1, 200, 1024}} {
				m, n, k := dims[0], dims[1], dims[2]
				for _, beta := range []float32{0, 1} {
					g := newCase(rng, false, false, m, n, k, 1, beta, (1024-k%1024)%1024)
					if copied := new(workspace).restride(kern, true, g.lda, kern.mc, kern.kc, n) != nil; copied != (kern.restride && n >= restrideMinPanels*kern.nr) {
						t.Fatalf("%s %v: rows copied = %v", lv, g, copied)
					}
					want := g.cloneC()
					g.run(want, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
						sgemmPacked(&packed, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					})
					direct := g.cloneC()
					g.run(direct, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
						sgemmPacked(kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					})
					bitwise(t, fmt.Sprintf("%s driver %v", lv, g), direct, want)
					pb := PackB(false, k, n, g.b[g.offB:], g.ldb)
					got := g.cloneC()
					SgemmPacked(m, n, k, 1, g.a[g.offA:], g.lda, pb, beta, got[g.offC:], g.ldc)
					bitwise(t, fmt.Sprintf("%s SgemmPacked %v", lv, g), got, want)
					cols := g.cloneC()
					SgemmPackedCols(m, kern.nr, n, 1, g.a[g.offA:], g.lda, pb, beta, cols[g.offC:], g.ldc)
					SgemmPackedCols(m, 0, kern.nr, 1, g.a[g.offA:], g.lda, pb, beta, cols[g.offC:], g.ldc)
					bitwise(t, fmt.Sprintf("%s SgemmPackedCols %v", lv, g), cols, want)
				}
			}
		})
	}
}

// TestMicroKernelsBitwise checks every assembly micro-kernel the CPU can run (not only those
// a level selects) against its pure-Go twin, bit for bit.
func TestMicroKernelsBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, kern := range asmKernels {
		if !kern.ok() {
			t.Logf("%s: not supported by this CPU, skipped", kern.name)
			continue
		}
		t.Run(kern.name, func(t *testing.T) {
			mr, nr := kern.mr, kern.nr
			for _, kc := range []int{1, 2, 3, 4, 5, 8, 17, 256} {
				for _, flags := range []int{0, 1} {
					a := make([]float32, kc*mr)
					b := make([]float32, kc*nr)
					for i := range a {
						a[i] = rng.Float32()*2 - 1
					}
					for i := range b {
						b[i] = rng.Float32()*2 - 1
					}
					ldc := nr + 3
					c := make([]float32, mr*ldc)
					for i := range c {
						c[i] = rng.Float32()*2 - 1
					}
					if flags == 0 {
						for i := range c {
							c[i] = float32(math.NaN())
						}
					}
					got := append([]float32(nil), c...)
					want := append([]float32(nil), c...)
					kern.fn(kc, &a[0], &b[0], &got[0], ldc, flags, 0.75)
					kernelTwin(mr, nr, kc, a, b, want, ldc, flags, 0.75)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
							t.Fatalf("kc=%d flags=%d: c[%d] = %g, twin %g", kc, flags, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

func isNaN32(x float32) bool { return x != x }

// TestBetaZeroIgnoresNaN: with beta == 0, C is write-only, so NaN or Inf already in C must
// not reach the result (0·NaN would be NaN).
func TestBetaZeroIgnoresNaN(t *testing.T) {
	for _, name := range levelNames() {
		t.Run(name, func(t *testing.T) {
			withLevel(t, name, func() {
				rng := rand.New(rand.NewPCG(9, 10))
				for _, dims := range [][3]int{{1, 1, 1}, {13, 33, 7}, {100, 64, 300}, {5, 5, 0}} {
					g := newCase(rng, false, true, dims[0], dims[1], dims[2], 1, 0, 2)
					for i := 0; i < g.m; i++ {
						for j := 0; j < g.n; j++ {
							if (i+j)%2 == 0 {
								g.c[g.offC+i*g.ldc+j] = float32(math.NaN())
							} else {
								g.c[g.offC+i*g.ldc+j] = float32(math.Inf(1))
							}
						}
					}
					got := g.cloneC()
					g.run(got, Sgemm)
					for i := 0; i < g.m; i++ {
						for j := 0; j < g.n; j++ {
							if v := got[g.offC+i*g.ldc+j]; isNaN32(v) || math.IsInf(float64(v), 0) {
								t.Fatalf("%v: C[%d,%d] = %g, prior C leaked", g, i, j, v)
							}
						}
					}
				}
			})
		})
	}
}

// TestSgemmParallelBitwise: any thread count gives exactly Sgemm's bits, for splits along
// both n (n >= m) and m.
func TestSgemmParallelBitwise(t *testing.T) {
	shapes := [][3]int{{128, 512, 512}, {300, 100, 257}, {1001, 97, 70}, {61, 1000, 129}}
	if testing.Short() {
		shapes = shapes[1:3]
	}
	for _, name := range levelNames() {
		t.Run(name, func(t *testing.T) {
			withLevel(t, name, func() {
				rng := rand.New(rand.NewPCG(11, 12))
				for si, s := range shapes {
					g := newCase(rng, si&1 != 0, si&2 == 0, s[0], s[1], s[2], 0.5, 0.5, 1)
					want := g.cloneC()
					g.run(want, Sgemm)
					for threads := 1; threads <= 4; threads++ {
						got := g.cloneC()
						g.run(got, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
							SgemmParallel(threads, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
						})
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v threads=%d: index %d = %g, Sgemm %g", g, threads, i, got[i], want[i])
							}
						}
					}
				}
			})
		})
	}
}

// TestSgemmConcurrent calls Sgemm from several goroutines at once (run with -race), each
// with its own C, and checks each against a serial result.
func TestSgemmConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	g := newCase(rng, false, true, 70, 90, 300, 1, 0.5, 2)
	want := g.cloneC()
	g.run(want, Sgemm)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 0; it < 5; it++ {
				got := g.cloneC()
				g.run(got, Sgemm)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						errs <- fmt.Sprintf("index %d = %g, want %g", i, got[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestLevelFollowsSimd checks that Sgemm's level is simd's, and that a level PackB used
// stays with the packed operand.
func TestLevelFollowsSimd(t *testing.T) {
	for _, name := range levelNames() {
		withLevel(t, name, func() {
			if got := activeLevel().simd.String(); got != name {
				t.Errorf("simd level %s, gemm runs %s", name, got)
			}
		})
	}
}

// TestFma32 checks the twin's single-rounding float32 FMA against exact math/big arithmetic,
// including sums that land exactly on a float32 rounding midpoint in float64 (where a naive
// float32(float64 FMA) rounds twice).
func TestFma32(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	check := func(x, y, z float32) {
		got, want := fma32(x, y, z), refFma32(x, y, z)
		if math.Float32bits(got) != math.Float32bits(want) && !(isNaN32(got) && isNaN32(want)) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", x, y, z, got, want)
		}
	}
	// x·y = 1 + 2⁻¹¹ + 2⁻²⁴ exactly: a float32 midpoint. A tiny z moves the exact value off
	// it, but not the float64 sum.
	x := float32(1 + 0x1p-12)
	for _, z := range []float32{0, 0x1p-70, -0x1p-70, 0x1p-100, -0x1p-100} {
		check(x, x, z)
	}
	for i := 0; i < 200000; i++ {
		x := math.Float32frombits(rng.Uint32())
		y := math.Float32frombits(rng.Uint32())
		z := math.Float32frombits(rng.Uint32())
		if i%2 == 0 {
			x, y, z = rng.Float32()*2-1, rng.Float32()*2-1, (rng.Float32()*2-1)*float32(math.Ldexp(1, -rng.IntN(60)))
		}
		check(x, y, z)
	}
}

// refFma32 is x·y+z computed exactly with math/big and rounded once to float32.
func refFma32(x, y, z float32) float32 {
	if isNaN32(x) || isNaN32(y) || isNaN32(z) || math.IsInf(float64(x), 0) || math.IsInf(float64(y), 0) || math.IsInf(float64(z), 0) {
		return float32(float64(x)*float64(y) + float64(z))
	}
	bx := new(big.Float).SetPrec(2000).SetFloat64(float64(x))
	by := new(big.Float).SetPrec(2000).SetFloat64(float64(y))
	bz := new(big.Float).SetPrec(2000).SetFloat64(float64(z))
	r := new(big.Float).SetPrec(2000).Mul(bx, by)
	r.Add(r, bz)
	f, _ := r.Float32()
	return f
}

// TestZooCPUEnv re-runs the test binary with ZOO_CPU set: TestMain applies a good value and
// stops with exit 2 and one line on a bad one.
func TestZooCPUEnv(t *testing.T) {
	if os.Getenv("ZOO_TEST_CHILD") != "" {
		fmt.Printf("level=%s\n", activeLevel().simd)
		return
	}
	for _, tc := range []struct {
		env  string
		code int
		want string
	}{
		{"generic", 0, "level=generic"},
		{"bogus", 2, `ZOO_CPU="bogus": want one of auto, avx512, avx2, generic`},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestZooCPUEnv$")
		cmd.Env = append(os.Environ(), "ZOO_TEST_CHILD=1", "ZOO_CPU="+tc.env)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("ZOO_CPU=%s: exit %d, output %q; want exit %d and %q", tc.env, code, out, tc.code, tc.want)
		}
		if tc.code != 0 && strings.Count(string(out), "\n") != 1 {
			t.Errorf("ZOO_CPU=%s: output is not one line: %q", tc.env, out)
		}
	}
}

// TestDirectKernelsBitwise checks every direct micro-kernel (A read in place with a row
// stride, including the narrower edge kernels) against the pure-Go twin on the packed
// copy of the same rows, bit for bit.
func TestDirectKernelsBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, kern := range asmKernels {
		if !kern.ok() || kern.direct == nil {
			continue
		}
		directs := append([]directKernel{{kern.mr, kern.direct}}, kern.directEdge...)
		for _, d := range directs {
			mr, nr := d.mr, kern.nr
			for _, kc := range []int{1, 2, 3, 4, 5, 8, 17, 256} {
				for _, flags := range []int{0, 1} {
					lda := kc + 7
					a := make([]float32, mr*lda)
					for i := range a {
						a[i] = rng.Float32()*2 - 1
					}
					ap := make([]float32, kc*mr) // packed: kc steps of mr values
					for p := 0; p < kc; p++ {
						for i := 0; i < mr; i++ {
							ap[p*mr+i] = a[i*lda+p]
						}
					}
					b := make([]float32, kc*nr)
					for i := range b {
						b[i] = rng.Float32()*2 - 1
					}
					ldc := nr + 3
					c := make([]float32, mr*ldc)
					for i := range c {
						c[i] = rng.Float32()*2 - 1
						if flags == 0 {
							c[i] = float32(math.NaN())
						}
					}
					got := append([]float32(nil), c...)
					want := append([]float32(nil), c...)
					d.fn(kc, &a[0], &b[0], &got[0], ldc, flags, 0.75, lda, &b[0])
					kernelTwin(mr, nr, kc, ap, b, want, ldc, flags, 0.75)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
							t.Fatalf("%s direct %d rows kc=%d flags=%d: c[%d] = %g, twin %g", kern.name, mr, kc, flags, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
