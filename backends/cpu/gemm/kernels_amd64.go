//go:build amd64 && !purego

package gemm

import (
	"golang.org/x/sys/cpu"

	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
)

//go:generate go run ./internal/asmgen -o sgemm_amd64.s -int8 int8_amd64.s

// The micro-kernels in sgemm_amd64.s (generated). See that file's header for the contract;
// kernelTwin is the pure-Go statement of it. They never retain or leak their pointers.

//go:noescape
func sgemmKernelAVX512x12x32(kc int, a, b, c *float32, ldc, flags int, beta float32)

//go:noescape
func sgemmKernelAVX512x14x32(kc int, a, b, c *float32, ldc, flags int, beta float32)

//go:noescape
func sgemmKernelAVX512x8x48(kc int, a, b, c *float32, ldc, flags int, beta float32)

//go:noescape
func sgemmKernelAVX512x6x64(kc int, a, b, c *float32, ldc, flags int, beta float32)

//go:noescape
func sgemmKernelAVX512x12x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

// The 8- and 4-row direct kernels cover a trailing partial row panel of 8 or 4 rows (m =
// 128 = 10·12 + 8 is the common case) in place, instead of packing it into a zero-padded
// 12-row panel, running the 12-row kernel into scratch and copying the valid rows out.
//
//go:noescape
func sgemmKernelAVX512x8x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sgemmKernelAVX512x4x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sgemmKernelAVX2x6x16(kc int, a, b, c *float32, ldc, flags int, beta float32)

// The AVX2 direct kernels read A in place like the AVX-512 ones; 4 and 2 rows cover the
// remainders of m = 6q+4 and 6q+2 (m = 128 and 512 leave 2).
//
//go:noescape
func sgemmKernelAVX2x6x16Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sgemmKernelAVX2x4x16Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sgemmKernelAVX2x2x16Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

// packBTrans32AVX512 packs one 32-column panel of a transposed B with gathers; see
// pack_amd64.s.
//
//go:noescape
func packBTrans32AVX512(dst, src *float32, idx *[16]int32, half, kc int)

// packBTrans32T16AVX512 is packBTrans32AVX512 by 16×16 transposes in registers, for kc a
// multiple of 16 (blocks = kc/16, ldb4 B's row stride in bytes); see sgemm_amd64.s.
//
//go:noescape
func packBTrans32T16AVX512(dst, src *float32, ldb4, blocks int)

// transpose16AVX512 transposes blocks 16×16 blocks along a strip of 16 rows (strides in
// bytes); see sgemm_amd64.s.
//
//go:noescape
func transpose16AVX512(dst, src *float32, lds4, ldd4, blocks int)

// transposeFast transposes the leading rows/16 strips of 16 rows and cols/16 blocks of 16
// columns of src into dst (as Transpose) where the CPU has AVX-512 at the kernel level in
// use, and returns how many rows and columns it did (0, 0: none).
func transposeFast(dst, src []float32, rows, cols, lds, ldd int) (fr, fc int) {
	if !atAVX512() {
		return 0, 0
	}
	fr, fc = rows/16*16, cols/16*16
	if fr == 0 || fc == 0 {
		return 0, 0
	}
	for i0 := 0; i0 < fr; i0 += 16 {
		transpose16AVX512(&dst[i0], &src[i0*lds], 4*lds, 4*ldd, fc/16)
	}
	return fr, fc
}

// packARowsAVX512 packs one micro-panel of a row-major A with gathers; see pack_amd64.s.
//
//go:noescape
func packARowsAVX512(dst, src *float32, idx *[16]int32, lanes, mr, kc int, alpha float32)

// packAFast packs the micro-panel of mrb rows of a row-major A starting at a[off] (row
// stride lda) into panel (mr values per k step, zero past mrb, scaled by alpha) with
// AVX-512 gathers, when the CPU has them and the offsets fit int32; it reports whether it
// did. The result equals packA's scalar loop bit for bit (alpha·v rounds the same way).
func packAFast(panel, a []float32, off, lda, kcb, mr, mrb int, alpha float32) bool {
	if mr > 16 || !atAVX512() || mr*lda >= 1<<31 || kcb == 0 || mrb == 0 {
		return false
	}
	_ = a[off+(mrb-1)*lda+kcb-1]
	_ = panel[mr*kcb-1]
	var idx [16]int32
	for i := 0; i < mrb; i++ {
		idx[i] = int32(i * lda)
	}
	packARowsAVX512(&panel[0], &a[off], &idx, mrb, mr, kcb, alpha)
	return true
}

// prefetchL2 asks for lines 64-byte cache lines from p to be brought into L2; see
// pack_amd64.s. A prefetch never faults, but callers keep the range inside one slice.
//
//go:noescape
func prefetchL2(p *float32, lines int)

// packBRowsAVX deals rows of a row-major B out to packed panels; see pack_amd64.s.
//
//go:noescape
func packBRowsAVX(dst, src *float32, ldb, rows, pieces, nr, stride int)

// packBRowsFast packs the full nr-wide panels of rows pc..pc+kcb-1 of a row-major B,
// columns jc..jc+pieces·nr-1, into dst (panel q at dst[q·kcb·nr:]) with AVX moves, when the
// CPU has AVX and nr is a multiple of 8; it reports whether it did.
func packBRowsFast(dst, b []float32, ldb, pc, jc, kcb, pieces, nr int) bool {
	if !cpu.X86.HasAVX || nr%8 != 0 || pieces == 0 || kcb == 0 {
		return false
	}
	_ = b[(pc+kcb-1)*ldb+jc+pieces*nr-1]
	_ = dst[(pieces-1)*kcb*nr+kcb*nr-1]
	packBRowsAVX(&dst[0], &b[pc*ldb+jc], ldb, kcb, pieces, nr, kcb*nr)
	return true
}

// packBTransFast packs a full 32-wide panel of transposed B with AVX-512 when the CPU has
// it and the row offsets fit the gather's int32 indices: the k steps in blocks of 16 by
// transposes in registers, the rest with gathers; it reports whether it did.
func packBTransFast(panel, b []float32, off, ldb, kcb, nr int) bool {
	if nr != 32 || !atAVX512() || 32*ldb >= 1<<31 || kcb == 0 {
		return false
	}
	_ = b[off+31*ldb+kcb-1]
	_ = panel[32*kcb-1]
	blocks := kcb / 16
	if blocks > 0 {
		packBTrans32T16AVX512(&panel[0], &b[off], 4*ldb, blocks)
	}
	if p := 16 * blocks; p < kcb {
		var idx [16]int32
		for j := range idx {
			idx[j] = int32(j * ldb)
		}
		packBTrans32AVX512(&panel[32*p], &b[off+p], &idx, 16*ldb*4, kcb-p)
	}
	return true
}

// The bf16 micro-kernels (VDPBF16PS; see sgemm_amd64.s): the sgemm kernels' contract over
// bf16 pairs, kc counting pairs. bf16KernelTwin states their roundings.

//go:noescape
func sbgemmKernelAVX512x12x32(kc int, a, b, c *float32, ldc, flags int, beta float32)

//go:noescape
func sbgemmKernelAVX512x12x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x11x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x10x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x9x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x8x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x7x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x6x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x5x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x4x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x3x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x2x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

//go:noescape
func sbgemmKernelAVX512x1x32Direct(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

// cvtBF16AVX512 rounds n floats (a multiple of 16) to bf16 with VCVTNEPS2BF16.
//
//go:noescape
func cvtBF16AVX512(dst *uint16, src *float32, n int)

// bf16Kernel is the AVX512-BF16 kernel set: 12×32 tiles over pairs, kc = 256 pairs (a k of
// 512 in one block, the B panel 32 KiB), and a direct kernel for every row count so the
// driver never packs A (packARowsAVX512's multiply would quiet the NaN bit pattern some
// pairs of finite bf16 values make).
var bf16Kernel = &microKernel{name: "avx512bf16-12x32", mr: 12, nr: 32, kc: 256, mc: 192, nc: 512,
	fn: sbgemmKernelAVX512x12x32, direct: sbgemmKernelAVX512x12x32Direct, restride: true,
	directEdge: []directKernel{{11, sbgemmKernelAVX512x11x32Direct}, {10, sbgemmKernelAVX512x10x32Direct}, {9, sbgemmKernelAVX512x9x32Direct}, {8, sbgemmKernelAVX512x8x32Direct}, {7, sbgemmKernelAVX512x7x32Direct}, {6, sbgemmKernelAVX512x6x32Direct}, {5, sbgemmKernelAVX512x5x32Direct}, {4, sbgemmKernelAVX512x4x32Direct}, {3, sbgemmKernelAVX512x3x32Direct}, {2, sbgemmKernelAVX512x2x32Direct}, {1, sbgemmKernelAVX512x1x32Direct}},
	ok:         hasAVX512BF16}

// cpuAVX512BF16 is whether this CPU has AVX512-BF16 (VDPBF16PS, VCVTNEPS2BF16).
var cpuAVX512BF16 = cpu.X86.HasAVX512BF16

// hasAVX512BF16 needs AVX512-BF16 and the AVX-512 level being in use: ZOO_CPU=avx2 turns
// the bf16 path off with the rest of AVX-512.
func hasAVX512BF16() bool { return cpuAVX512BF16 && atAVX512() }

// cvtBF16Fast rounds src to bf16 into dst (same length) with VCVTNEPS2BF16 where the CPU
// has it, the tail of fewer than 16 in Go; it reports whether it did.
func cvtBF16Fast(dst []uint16, src []float32) bool {
	if !cpuAVX512BF16 {
		return false
	}
	n := len(src) &^ 15
	if n > 0 {
		_ = dst[n-1]
		cvtBF16AVX512(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = bf16Round(src[i])
	}
	return true
}

// asmKernels lists every assembly micro-kernel with the CPU feature test it needs, so tests
// can check each one against its pure-Go twin, not only the one a level selects.
//
// Blocking for the AVX-512 12×32 kernel (Xeon, 48 KiB L1d and 2 MiB L2 per core): kc = 512
// runs a K = 512 product, the encoder's common case, as one k block. Its 64 KiB B
// micro-panel streams from L2 rather than staying in L1, but each C tile is then loaded and
// stored once instead of three times (kc = 192 cut K = 512 into 3×171) and the fixed cost
// of a kernel call is spread over three times the work. Interleaved A/B against kc = 192
// (nc = 1024): pre-packed weights, one thread, K = 512, m = 48-1024, 0.94-0.99 of the time;
// K = 2048 (4×512 against 11×187) 0.98-1.03; the base encoder, 2 threads, 1.005-1.024 faster
// at b=8 n=128 and n=512 (30 pairs each, two runs). Sgemm, which packs B per call, is
// unchanged against OpenBLAS (blasbench GemmPaired, 60 pairs, two runs each). nc = 512 keeps
// the packed B block (1 MiB) in L2 next to the A block.
var asmKernels = []*microKernel{
	{name: "avx512-12x32", mr: 12, nr: 32, kc: 512, mc: 192, nc: 512, fn: sgemmKernelAVX512x12x32, direct: sgemmKernelAVX512x12x32Direct, restride: true,
		directEdge: []directKernel{{8, sgemmKernelAVX512x8x32Direct}, {4, sgemmKernelAVX512x4x32Direct}}, ok: hasAVX512},
	{name: "avx512-14x32", mr: 14, nr: 32, kc: 256, mc: 196, nc: 2048, fn: sgemmKernelAVX512x14x32, ok: hasAVX512},
	{name: "avx512-8x48", mr: 8, nr: 48, kc: 256, mc: 192, nc: 2064, fn: sgemmKernelAVX512x8x48, ok: hasAVX512},
	{name: "avx512-6x64", mr: 6, nr: 64, kc: 256, mc: 192, nc: 2048, fn: sgemmKernelAVX512x6x64, ok: hasAVX512},
	// nc = 1024 for AVX2: a 2048-wide block (2 MiB at kc = 256) filled this Xeon's L2 and ran
	// 10 % slower on 128×2048×512 and 3 % on 512×2048×512 (interleaved A/B, 40 rounds).
	// With A read in place (then only when m ≤ mc) narrower blocks are better still; the
	// driver now reads every row-major A in place, so ncDirect = 256 is the width it uses.
	// Paired against OpenBLAS Haswell on 128×2048×512, one thread: 0.88-0.89 with 1024,
	// 0.96-0.99 with 512, 0.97-1.02 with 256 (five runs each way); two threads: 0.95-0.98
	// with 1024, 1.04 with 256. 512×2048×512, then with packed A, lost 3 % with 512, so nc
	// stays 1024 for the packed kernel.
	{name: "avx2-6x16", mr: 6, nr: 16, kc: 256, mc: 192, nc: 1024, ncDirect: 256, fn: sgemmKernelAVX2x6x16, direct: sgemmKernelAVX2x6x16Direct,
		directEdge: []directKernel{{4, sgemmKernelAVX2x4x16Direct}, {2, sgemmKernelAVX2x2x16Direct}}, ok: hasAVX2},
}

// The CPU's features, as simd reads them (once; the packing fast paths ask per panel).
var cpuAVX512, cpuAVX2 = simd.Supported(simd.AVX512), simd.Supported(simd.AVX2)

// hasAVX512 needs only AVX-512F (VFMADD231PS/VBROADCASTSS/VMOVUPS on zmm).
func hasAVX512() bool { return cpuAVX512 }

// packAVX512 says whether the packing routines may use AVX-512: the CPU has it and the
// kernel level in use is avx512, so that ZOO_CPU=avx2 runs only what an AVX2 CPU has (the
// packs are the same bits either way).
func atAVX512() bool { return cpuAVX512 && simd.Current() == simd.AVX512 }

// hasAVX2 needs AVX2 and FMA3 (the ymm kernel uses VFMADD231PS).
func hasAVX2() bool { return cpuAVX2 }

// platformLevels lists the levels in order of preference; simd says which this CPU runs.
func platformLevels() []*level {
	return []*level{
		{simd: simd.AVX512, kern: asmKernels[0]},
		{simd: simd.AVX2, kern: asmKernels[4]},
		genericLevel,
	}
}

// bf16Unavailable says why bf16Kernel cannot run here.
func bf16Unavailable() string {
	if !cpuAVX512BF16 {
		return "this CPU has neither AMX-BF16 nor AVX512-BF16 (VDPBF16PS)"
	}
	return "the bf16 kernels need the avx512 kernel level, and " + simd.Current().String() + " is in use (ZOO_CPU)"
}
