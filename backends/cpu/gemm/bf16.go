package gemm

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// bf16KC is the k block of the bf16 products, in pairs: a k of 512 in one block.
const bf16KC = 256

// BF16Path names the bf16 product path this CPU and build run ("avx512-bf16"), or returns
// "" and a one-line reason when there is none. The products above work without one, in Go,
// far slower; the CPU backend refuses bf16 programs then.
func BF16Path() (path, reason string) {
	if bf16Kernel != nil && bf16Kernel.ok() {
		return "avx512-bf16", ""
	}
	return "", bf16Unavailable()
}

// bf16Round rounds x to bfloat16 and returns its bits, as VCVTNEPS2BF16 does: to nearest
// even, a NaN kept (sign and top payload bits) and made quiet, a denormal flushed to a zero
// of its sign (the instruction's DAZ, which TestBF16RoundHardware holds it to).
func bf16Round(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	if u&0x7f800000 == 0 {
		return uint16(u>>16) & 0x8000
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// bf16Float returns the float32 whose top half is the bf16 value h (exact).
func bf16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundBF16 returns x rounded to the nearest bf16 value (as Sbgemm rounds its inputs), as
// a float32: what a caller compares a bf16 product against.
func RoundBF16(x float32) float32 { return bf16Float(bf16Round(x)) }

// dpBF16 is one lane of VDPBF16PS: acc plus the exact product of the high halves of the
// pairs a and b, rounded to fp32 once, then likewise plus the product of the low halves;
// each of the two sums is flushed to a zero of its sign when it is denormal. That is what
// the instruction does, measured on AMD Zen 5: a denormal product is not flushed itself,
// only a denormal sum (TestBF16KernelsBitwise holds the two to the same bits on tiny
// values too).
func dpBF16(acc float32, a, b uint32) float32 {
	acc = ftz(fma32(bf16Float(uint16(a>>16)), bf16Float(uint16(b>>16)), acc))
	return ftz(fma32(bf16Float(uint16(a)), bf16Float(uint16(b)), acc))
}

// ftz flushes a denormal to a zero of its sign.
func ftz(x float32) float32 {
	if u := math.Float32bits(x); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return x
}

// bf16KernelTwin is the pure-Go statement of the sbgemm micro-kernels: kernelTwin over
// pairs, one dpBF16 per element per k step (kc pairs), then the same store rule.
func bf16KernelTwin(mr, nr, kc int, a, b []float32, c []float32, ldc, flags int, beta float32) {
	tileTwin(mr, nr, kc, a, b, c, ldc, flags, beta, func(acc, x, y float32) float32 {
		return dpBF16(acc, math.Float32bits(x), math.Float32bits(y))
	})
}

// Pairs returns the number of bf16 pairs a k-long row takes: ceil(k/2).
func Pairs(k int) int { return (k + 1) / 2 }

// toBF16Pairs rounds the m×k row-major matrix alpha·a (row stride lda) to bf16 pairs:
// dst, m×Pairs(k) row-major, is the A operand of sbgemmPrepackedAt. Rows are independent,
// so callers may convert row ranges concurrently. It panics when a slice is too short.
func toBF16Pairs(dst []uint32, a []float32, m, k, lda int, alpha float32) {
	checkMat("A", m, k, len(a), lda)
	kp := Pairs(k)
	if len(dst) < m*kp {
		panic(fmt.Sprintf("gemm: toBF16Pairs: %d×%d pairs need %d elements, have %d", m, kp, m*kp, len(dst)))
	}
	var scaled []float32
	if alpha != 1 {
		scaled = make([]float32, k)
	}
	for i := 0; i < m; i++ {
		src := a[i*lda : i*lda+k]
		if alpha != 1 {
			for j, v := range src {
				scaled[j] = alpha * v
			}
			src = scaled
		}
		row := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[i*kp])), 2*kp)
		roundBF16Into(row[:k], src)
		if k%2 == 1 {
			row[k] = 0
		}
	}
}

// roundBF16Into sets dst[i] = bf16Round(src[i]).
func roundBF16Into(dst []uint16, src []float32) {
	if cvtBF16Fast(dst, src) {
		return
	}
	for i, v := range src {
		dst[i] = bf16Round(v)
	}
}

// zipBF16Pairs returns op(M) (rows×cols, M given rows×cols with stride ld, or cols×rows
// when trans) as a pair matrix down its columns: Pairs(rows)×cols, element (p, j) holding
// op(M)[2p, j] low and op(M)[2p+1, j] high, scaled by alpha first.
func zipBF16Pairs(dst []float32, trans bool, rows, cols int, m []float32, ld int, alpha float32) {
	if !trans && alpha == 1 {
		zipRows(dst, rows, cols, m, ld)
		return
	}
	at := func(r, j int) float32 {
		if r >= rows {
			return 0
		}
		if trans {
			return alpha * m[j*ld+r]
		}
		return alpha * m[r*ld+j]
	}
	for p := 0; p < Pairs(rows); p++ {
		d := dst[p*cols : p*cols+cols]
		for j := range d {
			lo, hi := bf16Round(at(2*p, j)), bf16Round(at(2*p+1, j))
			d[j] = math.Float32frombits(uint32(lo) | uint32(hi)<<16)
		}
	}
}

// zipRows is zipBF16Pairs for a row-major M and alpha 1, the common case (the run-time B of
// a product): each pair of rows is rounded with the vector conversion, then interleaved.
func zipRows(dst []float32, rows, cols int, m []float32, ld int) {
	// Run-time B is zipped on every call (each key block of V in a bf16 attention): the
	// two row buffers come from a pool rather than the heap.
	bp := rowPairBufs.Get().(*[]uint16)
	defer rowPairBufs.Put(bp)
	if cap(*bp) < 2*cols {
		*bp = make([]uint16, 2*cols)
	}
	buf := (*bp)[:2*cols]
	lo, hi := buf[:cols], buf[cols:]
	for p := 0; p < Pairs(rows); p++ {
		roundBF16Into(lo, m[2*p*ld:2*p*ld+cols])
		if 2*p+1 < rows {
			roundBF16Into(hi, m[(2*p+1)*ld:(2*p+1)*ld+cols])
		} else {
			clear(hi)
		}
		d := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst[p*cols:]))), cols)
		for j := range d {
			d[j] = uint32(lo[j]) | uint32(hi[j])<<16
		}
	}
}

// rowBF16Pairs is toBF16Pairs into a float32 container (the driver's element type).
func rowBF16Pairs(dst []float32, a []float32, m, k, lda int, alpha float32) {
	if m == 0 || k == 0 {
		return
	}
	toBF16Pairs(unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)), a, m, k, lda, alpha)
}

// rowPairBufs recycles zipRows' two rounded rows.
var rowPairBufs = sync.Pool{New: func() any { return new([]uint16) }}

// pairBufs recycles the pair matrices of Sbgemm calls.
var pairBufs = sync.Pool{New: func() any { return new([]float32) }}

// bf16Operands converts alpha·op(A) and op(B) to pair matrices in buffers from pairBufs.
// ap holds op(A)'s pairs row-major (m×kp, stride kp), or, when ta, transposed (kp×m, stride
// m: a transposed A's pairs run down its columns), which the driver packs with plain copies;
// bp likewise holds op(B)'s, transposed (n×kp, stride kp) when tb. release returns the
// buffers.
func bf16Operands(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int) (ap []float32, ta bool, ldap int, bp []float32, tb bool, ldbp int, release func()) {
	kp := Pairs(k)
	abuf, bbuf := pairBufs.Get().(*[]float32), pairBufs.Get().(*[]float32)
	*abuf, *bbuf = grow(*abuf, m*kp), grow(*bbuf, n*kp)
	ap, bp = *abuf, *bbuf
	if transA {
		zipBF16Pairs(ap, false, k, m, a, lda, alpha)
		ta, ldap = true, m
	} else {
		rowBF16Pairs(ap, a, m, k, lda, alpha)
		ldap = kp
	}
	if transB {
		rowBF16Pairs(bp, b, n, k, ldb, 1)
		tb, ldbp = true, kp
	} else {
		zipBF16Pairs(bp, false, k, n, b, ldb, 1)
		ldbp = n
	}
	return ap, ta, ldap, bp, tb, ldbp, func() { pairBufs.Put(abuf); pairBufs.Put(bbuf) }
}

// Sbgemm is Sgemm with bf16 inputs (see the section comment): C = alpha·op(A)·op(B) + beta·C
// with alpha·op(A) and op(B) rounded to bf16 and fp32 accumulation. It runs on the calling
// goroutine and is safe for concurrent use. It panics, like Sgemm, when a slice is too
// short for the shape and strides.
func Sbgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	SbgemmParallel(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SbgemmParallel is Sbgemm split over up to threads goroutines as SgemmParallel splits
// Sgemm; the result is bitwise the same for every threads value.
func SbgemmParallel(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	ap, ta, ldap, bp, tb, ldbp, release := bf16Operands(transA, transB, m, n, k, alpha, a, lda, b, ldb)
	defer release()
	kp := Pairs(k)
	if kern := bf16Active(); kern != nil {
		splitRun(threads, kern, ta, tb, m, n, kp, 1, ap, ldap, bp, ldbp, beta, c, ldc)
		return
	}
	bf16Twin(ta, tb, m, n, kp, ap, ldap, bp, ldbp, beta, c, ldc)
}

// bf16Active returns the bf16 kernel set when this CPU runs it, else nil.
func bf16Active() *microKernel {
	if bf16Kernel != nil && bf16Kernel.ok() {
		return bf16Kernel
	}
	return nil
}

// bf16Twin computes the bf16 product over pair matrices in Go with the driver's k blocking
// (kcBlock(kp, bf16KC)) and store rules, so it equals the kernels' result bit for bit.
func bf16Twin(transA, transB bool, m, n, kp int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	kc := kcBlock(kp, bf16KC)
	for pc := 0; pc < kp; pc += kc {
		kcb := min(kc, kp-pc)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var acc float32
				for p := pc; p < pc+kcb; p++ {
					var bv float32
					if transB {
						bv = b[j*ldb+p]
					} else {
						bv = b[p*ldb+j]
					}
					var av float32
					if transA {
						av = a[p*lda+i]
					} else {
						av = a[i*lda+p]
					}
					acc = dpBF16(acc, math.Float32bits(av), math.Float32bits(bv))
				}
				cv := &c[i*ldc+j]
				switch {
				case pc > 0:
					*cv += acc
				case beta == 0:
					*cv = acc
				default:
					*cv = fma32(beta, *cv, acc)
				}
			}
		}
	}
}

// PackBBF16 packs op(B) (as PackB takes it) rounded to bf16 pairs, for products whose A is
// rounded too (SgemmPacked and its variants then compute Sbgemm's result). Weights are
// converted once here. It panics, like PackB, when b is too short.
func PackBBF16(transB bool, k, n int, b []float32, ldb int) *PackedB {
	pb := new(PackedB)
	pb.PackBF16(transB, k, n, b, ldb)
	return pb
}

// PackBF16 is PackBBF16 into pb, reusing its storage as Pack does: for a run-time operand
// packed per call. pb must not be in use by another goroutine.
func (pb *PackedB) PackBF16(transB bool, k, n int, b []float32, ldb int) {
	checkPackB("PackBBF16", transB, k, n, b, ldb)
	kp := Pairs(k)
	buf := pairBufs.Get().(*[]float32)
	*buf = grow(*buf, kp*n)
	if transB {
		// Rows of B are op(B)'s columns: their pairs are contiguous, as A's are.
		rowBF16Pairs(*buf, b, n, k, ldb, 1)
		pb.pack(bf16Active(), true, kp, n, *buf, kp)
	} else {
		zipBF16Pairs(*buf, false, k, n, b, ldb, 1)
		pb.pack(bf16Active(), false, kp, n, *buf, n)
	}
	pairBufs.Put(buf)
	pb.bf16, pb.kIn = true, k
}

// BF16 reports whether pb was packed by PackBBF16.
func (pb *PackedB) BF16() bool { return pb.bf16 }

// sbgemmPrepackedAt is SgemmPackedEpilogueAt for a PackBBF16 operand with A already
// converted by toBF16Pairs (ap, m×Pairs(k), row stride lda in pairs). Converting each tile's
// rows just before its product (sbgemmPacked) beat converting a layer's whole input once
// and sharing it across the tiles: vanilla base in bf16 at batch 8, n = 512 ran 249 ms that
// way against 257-265 shared, the rows being hot in cache when the product reads them. It
// panics when pb is not bf16, the ranges are bad or a slice is too short.
func sbgemmPrepackedAt(m, j0, j1 int, ap []uint32, lda int, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	if pb == nil || !pb.bf16 || m < 0 || j0 < 0 || j1 > pb.n || j0 > j1 || j0%pb.ColAlign() != 0 {
		panic(fmt.Sprintf("gemm: sbgemmPrepackedAt: bad column range [%d, %d) or not a bf16 operand", j0, j1))
	}
	n, kp := j1-j0, pb.k
	if m == 0 || n == 0 {
		return
	}
	checkMat("C", m, n, len(c), ldc)
	if kp == 0 {
		scaleC(m, n, beta, c, ldc)
		if epi != nil {
			epi(0, m, j0, j1)
		}
		return
	}
	if len(ap) < (m-1)*lda+kp || lda < kp {
		panic(fmt.Sprintf("gemm: sbgemmPrepackedAt: A pairs %d×%d with stride %d need %d elements, have %d", m, kp, lda, (m-1)*lda+kp, len(ap)))
	}
	a := unsafe.Slice((*float32)(unsafe.Pointer(&ap[0])), len(ap))
	if pb.kern == nil {
		bf16Twin(false, false, m, n, kp, a, lda, pb.data[j0:], pb.n, beta, c, ldc)
		if epi != nil {
			epi(0, m, j0, j1)
		}
		return
	}
	sgemmPrepacked(pb, m, j0, n, 1, a, lda, beta, c, ldc, epi)
}

// sbgemmPacked is SgemmPackedEpilogueAt's body for a bf16 pb: A (float32, m×pb.K()) is
// rounded to pairs first.
func sbgemmPacked(m, j0, j1 int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	kp := pb.k
	buf := pairBufs.Get().(*[]float32)
	defer pairBufs.Put(buf)
	*buf = grow(*buf, max(m*kp, 1))
	rowBF16Pairs(*buf, a, m, pb.kIn, lda, alpha)
	sbgemmPrepackedAt(m, j0, j1, unsafe.Slice((*uint32)(unsafe.Pointer(&(*buf)[0])), len(*buf)), kp, pb, beta, c, ldc, epi)
}

// unpackBF16 is Unpack for a PackBBF16 operand: op(B) as its bf16 values, k×n row-major.
func (pb *PackedB) unpackBF16() []float32 {
	inner := *pb
	inner.bf16 = false
	pairs := inner.Unpack()
	out := make([]float32, pb.kIn*pb.n)
	for p := 0; p < pb.k; p++ {
		for j := 0; j < pb.n; j++ {
			u := math.Float32bits(pairs[p*pb.n+j])
			out[2*p*pb.n+j] = bf16Float(uint16(u))
			if 2*p+1 < pb.kIn {
				out[(2*p+1)*pb.n+j] = bf16Float(uint16(u >> 16))
			}
		}
	}
	return out
}
