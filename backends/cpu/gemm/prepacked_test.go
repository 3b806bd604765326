package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmPackedLevels holds SgemmPacked and SgemmPackedCols to Sgemm bit for bit, and to
// SgemmGeneric within the rounding bound, on awkward shapes at every level.
func TestSgemmPackedLevels(t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {12, 32, 1}, {13, 33, 17}, {7, 100, 300}, {25, 65, 192}, {130, 70, 513}, {128, 96, 200}, {124, 64, 30}, {200, 1100, 64}, {64, 2100, 20}, {5, 31, 0}}
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			rng := rand.New(rand.NewPCG(7, uint64(len(lv))))
			for _, sh := range shapes {
				for _, transB := range []bool{false, true} {
					for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-1.5, 0.25}} {
						m, n, k := sh[0], sh[1], sh[2]
						g := newCase(rng, false, transB, m, n, k, ab[0], ab[1], 3)
						want := g.cloneC()
						g.run(want, Sgemm)
						ref := g.cloneC()
						g.run(ref, SgemmGeneric)
						g.check(t, want, ref)
						pb := PackB(transB, k, n, g.b[g.offB:], g.ldb)
						got := g.cloneC()
						SgemmPacked(m, n, k, g.alpha, g.a[g.offA:], g.lda, pb, g.beta, got[g.offC:], g.ldc)
						bitwise(t, lv+" SgemmPacked "+g.String(), got, want)
						// Column ranges at every alignment step, in a scrambled order.
						cols := g.cloneC()
						step := pb.ColAlign() * (1 + rng.IntN(3))
						for j := (n - 1) / step * step; j >= 0; j -= step {
							SgemmPackedCols(m, j, min(j+step, n), g.alpha, g.a[g.offA:], g.lda, pb, g.beta, cols[g.offC:], g.ldc)
						}
						bitwise(t, lv+" SgemmPackedCols "+g.String(), cols, want)
					}
				}
			}
		})
	}
}

func bitwise(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if got[i] != want[i] && !(isNaN32(got[i]) && isNaN32(want[i])) {
			t.Fatalf("%s: element %d = %g, want %g (bitwise)", what, i, got[i], want[i])
		}
	}
}

// TestSgemmPackedCaptureLevel checks that a PackedB keeps the level it was packed for.
func TestSgemmPackedCaptureLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := newCase(rng, false, false, 17, 40, 50, 1, 0, 1)
	want := g.cloneC()
	g.run(want, Sgemm)
	pb := PackB(false, g.k, g.n, g.b[g.offB:], g.ldb)
	withLevel(t, "generic", func() {
		got := g.cloneC()
		SgemmPacked(g.m, g.n, g.k, 1, g.a[g.offA:], g.lda, pb, 0, got[g.offC:], g.ldc)
		bitwise(t, "after SetLevel", got, want)
	})
}

// TestPackAFast holds the gather packing of A to packA's scalar loop, bit for bit,
// including the zero padding of partial panels.
func TestPackAFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lda, k := 37, 29
	a := make([]float32, 20*lda)
	for i := range a {
		a[i] = rng.Float32()*2 - 1
	}
	for _, mr := range []int{6, 12, 14, 16} {
		for mrb := 1; mrb <= mr; mrb++ {
			for _, alpha := range []float32{1, -0.75} {
				got := make([]float32, mr*k+7)
				for i := range got {
					got[i] = guard
				}
				want := append([]float32(nil), got...)
				if !packAFast(got, a, lda+2, lda, k, mr, mrb, alpha) {
					t.Skip("no fast A packing on this CPU")
				}
				for p := 0; p < k; p++ {
					for i := 0; i < mr; i++ {
						want[p*mr+i] = 0
						if i < mrb {
							want[p*mr+i] = alpha * a[lda+2+i*lda+p]
						}
					}
				}
				bitwise(t, "packAFast", got, want)
			}
		}
	}
}

// TestPackBRowsFast holds the vector packing of a row-major B to its definition, with
// unaligned rows and columns, one and many pieces, and rows of 1 and odd counts; the guard
// values past the last panel must survive.
func TestPackBRowsFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ldb := 203
	b := make([]float32, 40*ldb)
	for i := range b {
		b[i] = rng.Float32()*2 - 1
	}
	for _, nr := range []int{8, 16, 32, 48, 64} {
		for _, kcb := range []int{1, 2, 7, 33} {
			for _, pieces := range []int{1, 2, 3} {
				pc, jc := 3, 5
				got := make([]float32, pieces*kcb*nr+5)
				for i := range got {
					got[i] = guard
				}
				want := append([]float32(nil), got...)
				if !packBRowsFast(got, b, ldb, pc, jc, kcb, pieces, nr) {
					t.Skip("no fast B packing on this CPU")
				}
				for q := 0; q < pieces; q++ {
					for p := 0; p < kcb; p++ {
						copy(want[q*kcb*nr+p*nr:][:nr], b[(pc+p)*ldb+jc+q*nr:])
					}
				}
				bitwise(t, fmt.Sprintf("packBRowsFast nr=%d kc=%d pieces=%d", nr, kcb, pieces), got, want)
			}
		}
	}
}

// TestPackBTransFast holds the vector packing of a transposed B (dst[p*32+j] = B[j, p]) to
// its definition, for k step counts below, at and past the transposes' blocks of 16 (and
// their gathered tails), at odd and power-of-two row strides and an unaligned start; the
// guard values past the panel must survive.
func TestPackBTransFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, ldb := range []int{67, 512, 1031} {
		b := make([]float32, 40*ldb)
		for i := range b {
			b[i] = rng.Float32()*2 - 1
		}
		for _, kcb := range []int{1, 15, 16, 17, 31, 64, 100, 256} {
			if kcb+3 > ldb {
				continue
			}
			off := 2*ldb + 3
			got := make([]float32, 32*kcb+5)
			for i := range got {
				got[i] = guard
			}
			want := append([]float32(nil), got...)
			if !packBTransFast(got, b, off, ldb, kcb, 32) {
				t.Skip("no fast transposed B packing on this CPU or level")
			}
			for p := 0; p < kcb; p++ {
				for j := 0; j < 32; j++ {
					want[p*32+j] = b[off+j*ldb+p]
				}
			}
			bitwise(t, fmt.Sprintf("packBTransFast ldb=%d kc=%d", ldb, kcb), got, want)
		}
	}
}

// TestSgemmPackedEpilogue checks that the epilogue blocks partition the column range, each
// passed once and only when final.
func TestSgemmPackedEpilogue(t *testing.T) {
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			rng := rand.New(rand.NewPCG(5, 6))
			for _, sh := range [][3]int{{1, 1, 1}, {13, 33, 17}, {400, 2100, 600}, {30, 70, 0}} {
				m, n, k := sh[0], sh[1], sh[2]
				g := newCase(rng, false, false, m, n, k, 1, 0.5, 2)
				want := g.cloneC()
				g.run(want, Sgemm)
				pb := PackB(false, k, n, g.b[g.offB:], g.ldb)
				got := g.cloneC()
				c := got[g.offC:]
				seen := make([]int, m*n)
				snap := make([]float32, m*n)
				j0 := pb.ColAlign()
				if j0 >= n {
					j0 = 0
				}
				SgemmPackedEpilogue(m, j0, n, 1, g.a[g.offA:], g.lda, pb, 0.5, c, g.ldc, func(i0, i1, c0, c1 int) {
					for i := i0; i < i1; i++ {
						for j := c0; j < c1; j++ {
							seen[i*n+j]++
							snap[i*n+j] = c[i*g.ldc+j]
						}
					}
				})
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						wantSeen := 0
						if j >= j0 {
							wantSeen = 1
						}
						if seen[i*n+j] != wantSeen {
							t.Fatalf("%s %v: element (%d, %d) passed %d times", lv, sh, i, j, seen[i*n+j])
						}
						if wantSeen == 1 && snap[i*n+j] != want[g.offC+i*g.ldc+j] {
							t.Fatalf("%s %v: element (%d, %d) was not final when passed", lv, sh, i, j)
						}
					}
				}
			}
		})
	}
}

// TestSgemmPackedEpilogueAt checks that columns [j0, j1) of a product written into a
// matrix of their own (padded rows) equal the same columns of the whole product bit for
// bit, and that the epilogue is given the product's column numbers.
func TestSgemmPackedEpilogueAt(t *testing.T) {
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			rng := rand.New(rand.NewPCG(7, 8))
			for _, sh := range [][3]int{{1, 70, 5}, {13, 130, 17}, {200, 1100, 300}} {
				m, n, k := sh[0], sh[1], sh[2]
				g := newCase(rng, false, false, m, n, k, 1, 0, 2)
				pb := PackB(false, k, n, g.b[g.offB:], g.ldb)
				whole := make([]float32, m*n)
				SgemmPacked(m, n, k, 1, g.a[g.offA:], g.lda, pb, 0, whole, n)
				al := max(pb.ColAlign(), 1)
				j0, j1 := al, n-1
				if j0 >= j1 {
					j0 = 0
				}
				w, ld := j1-j0, j1-j0+3
				part := make([]float32, m*ld)
				cols := map[int]bool{}
				SgemmPackedEpilogueAt(m, j0, j1, 1, g.a[g.offA:], g.lda, pb, 0, part, ld, func(i0, i1, c0, c1 int) {
					for j := c0; j < c1; j++ {
						cols[j] = true
					}
				})
				for j := j0; j < j1; j++ {
					if !cols[j] {
						t.Fatalf("%s %v: the epilogue never saw product column %d", lv, sh, j)
					}
				}
				if len(cols) != w {
					t.Fatalf("%s %v: the epilogue saw %d columns, want %d", lv, sh, len(cols), w)
				}
				for i := 0; i < m; i++ {
					for j := 0; j < w; j++ {
						if got, want := part[i*ld+j], whole[i*n+j0+j]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s %v: (%d, %d) = %g, the whole product has %g", lv, sh, i, j0+j, got, want)
						}
					}
				}
			}
		})
	}
}

// TestPackedBUnpack checks that Unpack gives back op(B) exactly, for both orientations,
// edge panels, several k blocks and empty shapes, on every level.
func TestPackedBUnpack(t *testing.T) {
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			rng := rand.New(rand.NewPCG(9, 10))
			for _, sh := range [][2]int{{1, 1}, {7, 33}, {600, 70}, {0, 5}, {5, 0}} {
				k, n := sh[0], sh[1]
				b := make([]float32, k*n)
				for i := range b {
					b[i] = float32(rng.NormFloat64())
				}
				bt := make([]float32, k*n) // Bᵀ, n×k
				for p := 0; p < k; p++ {
					for j := 0; j < n; j++ {
						bt[j*k+p] = b[p*n+j]
					}
				}
				for _, trans := range []bool{false, true} {
					src, ld := b, n
					if trans {
						src, ld = bt, k
					}
					got := PackB(trans, k, n, src, max(ld, 1)).Unpack()
					if len(got) != k*n {
						t.Fatalf("%s %v trans %v: %d values, want %d", lv, sh, trans, len(got), k*n)
					}
					for i, v := range b {
						if got[i] != v {
							t.Fatalf("%s %v trans %v: element %d = %g, want %g", lv, sh, trans, i, got[i], v)
						}
					}
				}
			}
		})
	}
}

// TestSteadyStateNoAllocs checks that Sgemm and SgemmPacked allocate nothing once their
// pooled workspaces exist, with edge tiles (which go through the scratch tile) included.
func TestSteadyStateNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop pooled workspaces at random")
	}
	m, n, k := 29, 45, 70
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	pb := PackB(false, k, n, b, n)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"Sgemm", func() { Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) }},
		{"SgemmPacked", func() { SgemmPacked(m, n, k, 1, a, k, pb, 0, c, n) }},
	} {
		tc.f()
		if got := testing.AllocsPerRun(100, tc.f); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tc.name, got)
		}
	}
}
