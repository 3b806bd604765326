// Package gemm holds the CPU backend's matrix-product (SGEMM) kernels. Every kernel has a pure-Go
// reference twin (the *Generic functions) that documents it and serves as the test oracle
// for the SIMD versions chosen at start-up.
//
// # SGEMM
//
// Sgemm runs on one of these levels, the one package simd (backends/cpu/internal/simd)
// holds: the best the CPU supports unless simd.Set (or ZOO_CPU through simd.ApplyEnv)
// chose another:
//
//   - "avx512": packed BLIS-style driver (packed.go) with a 12×32 AVX-512F micro-kernel
//   - "avx2": the same driver with a 6×16 AVX2+FMA micro-kernel
//   - "generic": SgemmGeneric, pure Go, on every GOARCH and with the purego build tag
//
// The micro-kernels are generated Go assembly (sgemm_amd64.s, from internal/asmgen); each
// has a pure-Go twin, kernelTwin, that the tests hold it to bit for bit.
//
// Levels differ only in rounding (FMA, k blocking), and within a level the result does not
// depend on how SgemmParallel splits the work.
//
// # bf16 products
//
// Sbgemm, SbgemmParallel and products with a PackBBF16 operand compute SgemmGeneric's
// C = alpha·op(A)·op(B) + beta·C with alpha·op(A) and op(B) rounded to bfloat16 (round to
// nearest even, as VCVTNEPS2BF16 does: bf16Round) and the products accumulated in fp32.
// Both operands are first turned into pair matrices: element (i, p) of A's holds row i's
// k = 2p in its low 16 bits and k = 2p+1 in its high ones (a zero pads an odd k), and B's
// likewise down its columns. The packed driver then runs over the pairs exactly as over
// floats, with kernels whose k step is one VDPBF16PS (bf16Kernel, AVX512-BF16), or, where
// the CPU has none, with bf16Twin in Go (dpBF16 per k step): the same roundings, so the two agree bit for
// bit. The pairs are 32-bit containers the driver only moves; it never does arithmetic on
// them.
//
// # int8 products
//
// Products with a PackBInt8 or PackBInt8Quantized operand (SgemmPacked and its variants,
// SgemmInt8RowsAt) run in int8 (int8.go). The weights are int8, symmetric, one scale per
// column of op(B), quantized once. The rows of alpha·A are quantized as the product runs,
// each to u8 with its own scale and zero point (asymmetric, the range widened to hold 0;
// see quantizeRowsGo). Per row rather than per tensor: on 64×768 activations against
// gaussian weights (TestInt8Accuracy) the relative RMS error was 0.0107 per row and 0.0128
// per tensor for gaussian rows, 0.0095 and 0.0107 for GELU outputs, 0.033 and 0.074 for
// rows of different ranges with 30σ outliers; a row's quantization also depends on that
// row alone, so tiles and threads never change a result. The sums Σ q·w are exact in
// int32 (k ≤ MaxInt8K), then each element is float32(sum − z·colsum)·(scale_row·scale_col)
// (each operation rounded once), then beta·C by one FMA, then the epilogue, in the tile
// pass as the fp32 products fuse them. GemmU8S8 is the bare integer product.
//
// The paths (Int8Path), each a set of kernels of every height held bit for bit to
// int8TileTwin and int8StoreTwin: "amx-int8" (AMX TDPBUSD on 32×32 tiles of 16×16 int32
// each, where Linux grants the tile state), "vnni512" (AVX512-VNNI VPDPBUSD, 12×32 tiles,
// the VNNI sums four u8·s8 products into an int32 exactly), "avx-vnni" (its VEX form on
// ymm, 6×16), "avx2" and "generic" (Go). The kernel level (simd.Set, ZOO_CPU) bounds the
// path: avx2 turns amx-int8 and vnni512 off; SetInt8Path picks among the rest, for tests
// and benchmarks.
//
// AVX2 has no exact u8·s8 dot product: VPMADDUBSW adds each pair of products in int16 with
// saturation (2·255·127 = 64,770 does not fit). The avx2 path has two kernel sets, each
// exact by construction. Weights PackBInt8 quantizes itself are 7-bit (±63) and the rows
// of A are quantized to 0…127 (rounding can reach 128): VPMADDUBSW's pair sums of two k
// steps add in int16 to at most 4·128·63 = 32,256 in magnitude, then VPMADDWD by ones
// widens them to int32 (asmgen's madd7; 5×16 tiles). That trades a bit of each operand's
// precision (zoo parity vanilla: per-position cosine to fp32 at least 0.99985, against 8
// bits' 0.99994) for 1.6× the speed of the exact 8-bit set. Operands given as int8 (PackBInt8Quantized: imported
// files; PackInt8Activation: attention's keys and values) keep 8 bits on the 8-bit set:
// s8 weights widened to int16 by VPMOVSXBW, A's u8 rows stored as u16, VPMADDWD then
// VPADDD, a pair sum at most 2·255·128 = 65,280 in magnitude (TestInt8NoSaturation).
// Paths that pack the same form (Int8WeightBits) give the same bits.
package gemm

import (
	"fmt"

	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
)

// SgemmGeneric computes C = alpha·op(A)·op(B) + beta·C for row-major float32 matrices, where
// op(A) is m×k (A is k×m when transA), op(B) is k×n (B is n×k when transB), and lda, ldb, ldc
// are row strides in elements. When beta is 0, C is overwritten without being read (so NaNs
// in C do not propagate), as in BLAS.
func SgemmGeneric(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		crow := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(crow)
		} else if beta != 1 {
			for j := range crow {
				crow[j] *= beta
			}
		}
		for p := 0; p < k; p++ {
			var av float32
			if transA {
				av = a[p*lda+i]
			} else {
				av = a[i*lda+p]
			}
			av *= alpha
			if transB {
				for j := 0; j < n; j++ {
					crow[j] += av * b[j*ldb+p]
				}
			} else {
				brow := b[p*ldb : p*ldb+n]
				for j, bv := range brow {
					crow[j] += av * bv
				}
			}
		}
	}
}

// Sgemm is the entry point the backend calls: SgemmGeneric's contract, computed by the
// kernel level in use (simd.Current). It runs on the calling goroutine only and is safe to call
// from many goroutines at once: packing buffers come from a sync.Pool and no state is shared.
// The results of different levels differ in rounding (the SIMD levels use FMA and block the
// k sum), not beyond float32 accuracy.
//
// It panics, like SgemmGeneric, when a slice is too short for the shape and strides, or a
// stride is smaller than its row length for more than one row (the BLAS rules); the SIMD
// levels check this up front because their assembly does no bounds checks.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	lv := activeLevel()
	if lv.kern == nil {
		SgemmGeneric(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	sgemmPacked(lv.kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// parallelMinFlops is the problem size (2·m·n·k) below which SgemmParallel stays on the
// calling goroutine: under about 8 MFLOP (≈40 µs on one AVX-512 core) the goroutine
// wake-up and the extra packing of the shared operand cost more than a second core gains.
const parallelMinFlops = 8 << 20

// SgemmParallel computes the same as Sgemm, splitting C into up to threads contiguous
// blocks of rows or columns (along the larger of m and n) that run on separate goroutines.
// The split never divides the k sum and falls on micro-tile boundaries, so the result is
// bitwise identical to Sgemm's for every threads value. Problems under about 8 MFLOP, or
// threads <= 1, run on the calling goroutine.
func SgemmParallel(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	splitRun(threads, activeLevel().kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// splitRun is SgemmParallel's body with the kernel set given (nil: SgemmGeneric), on
// arguments that have passed checkArgs; SbgemmParallel runs its pair matrices through it.
func splitRun(threads int, kern *microKernel, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	lv := &level{kern: kern}
	run := func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
		if lv.kern == nil {
			SgemmGeneric(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		} else {
			sgemmPacked(lv.kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		}
	}
	// Split the larger output dimension in whole micro-tiles; the tile grid of every part is
	// then a sub-grid of the undivided one.
	splitN := n >= m
	dim, unit := m, 1
	if lv.kern != nil {
		unit = lv.kern.mr
	}
	if splitN {
		dim = n
		if lv.kern != nil {
			unit = lv.kern.nr
		}
	}
	tiles := (dim + unit - 1) / unit
	parts := min(threads, tiles)
	if threads <= 1 || 2*float64(m)*float64(n)*float64(k) < parallelMinFlops {
		parts = 1
	}
	if parts <= 1 {
		run(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// The parts run on the shared spinning worker pool: a goroutine started per call waited
	// 50-90 µs to be scheduled on this kind of VM, a sixth of a 128×512×512 product.
	workpool.Tasks(threads, parts, func(t int) {
		lo := t * tiles / parts * unit
		hi := min((t+1)*tiles/parts*unit, dim)
		if lo >= hi {
			return
		}
		// Sub-slices start at the part's first row or column; their ends are left to the
		// original slices, which checkArgs has already validated.
		pa, pb, pc := a, b, c
		pm, pn := m, n
		if splitN {
			pn = hi - lo
			if transB {
				pb = b[lo*ldb:]
			} else {
				pb = b[lo:]
			}
			pc = c[lo:]
		} else {
			pm = hi - lo
			if transA {
				pa = a[lo:]
			} else {
				pa = a[lo*lda:]
			}
			pc = c[lo*ldc:]
		}
		run(transA, transB, pm, pn, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
	})
}

// checkArgs panics with a descriptive message when the slices cannot hold the matrices the
// shape and strides describe. The assembly kernels write whole tiles through raw pointers,
// so this is what keeps invalid input a panic rather than memory corruption.
func checkArgs(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: Sgemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	checkMat("A", ar, ac, len(a), lda)
	checkMat("B", br, bc, len(b), ldb)
	checkMat("C", m, n, len(c), ldc)
}

func checkMat(name string, rows, cols, length, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < 0 || (rows > 1 && ld < cols) {
		panic(fmt.Sprintf("gemm: Sgemm: %s is %d×%d but its stride is %d", name, rows, cols, ld))
	}
	if need := (rows-1)*ld + cols; length < need {
		panic(fmt.Sprintf("gemm: Sgemm: %s is %d×%d with stride %d and needs %d elements, has %d", name, rows, cols, ld, need, length))
	}
}

// level is one selectable implementation of Sgemm.
type level struct {
	simd simd.Level
	kern *microKernel // nil: the pure-Go SgemmGeneric
}

// genericLevel is the pure-Go fallback, available everywhere. It uses the straight
// SgemmGeneric loop rather than the packed driver, because without SIMD the i-k-j loop
// (which streams rows of B and C) is faster than a packed, register-tiled pure-Go kernel.
var genericLevel = &level{simd: simd.Generic}

// levels is every level this build has kernels for, best first.
var levels = platformLevels()

// activeLevel returns the level of simd.Current (which simd only lets be one this CPU runs).
func activeLevel() *level {
	cur := simd.Current()
	for _, lv := range levels {
		if lv.simd == cur {
			return lv
		}
	}
	return genericLevel
}
