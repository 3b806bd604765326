package gemm

import (
	"math"
	"sync"
	"unsafe"
)

// microKernel describes a register-tiled micro-kernel and the cache blocking the packed
// driver uses with it.
//
// fn computes one mr×nr tile of C from packed panels; see the contract at the top of
// sgemm_amd64.s and its pure-Go statement kernelTwin. Blocking (BLIS/Goto order): a kc×nc
// block of B is packed once per (jc, pc) and stays in L2/L3; an mc×kc block of A is packed
// per (jc, pc, ic) and stays in L2; inside, each kc×nr micro-panel of B is reused across
// the mc/mr micro-panels of A, from L1 when it fits there and from L2 when a long kc (fewer
// C updates) is worth more. mc must be a multiple of mr and nc of nr.
type microKernel struct {
	name       string
	mr, nr     int
	kc, mc, nc int
	fn         func(kc int, a, b, c *float32, ldc, flags int, beta float32)
	// direct, when set, is fn reading an unpacked row-major A in place (row stride lda)
	// with the same FMAs in the same order; SgemmPacked uses it when alpha is 1, and
	// sgemmPacked too when op(A) is row-major, so full tiles need no packing of A at all. It also prefetches into L2, spread over its k loop,
	// the cache lines from pf on (two per four k steps); pf has no effect on the result.
	direct directFn
	// directEdge lists narrower direct kernels (same nr, fewer rows, the same FMAs per
	// element in the same order) for a trailing partial row panel whose height is exactly
	// one of theirs; other heights are packed and zero-padded as before.
	directEdge []directKernel
	// ncDirect, when set, replaces nc in sgemmPacked when A is read in place: B is then
	// packed in narrower blocks.
	ncDirect int
	// restride, when set, lets the driver copy rows of A whose stride aliases in L1 before
	// the direct kernels read them (see restrideRows).
	restride bool
	ok       func() bool // whether this CPU can run fn
}

// directFn is the signature of the direct micro-kernels.
type directFn func(kc int, a, b, c *float32, ldc, flags int, beta float32, lda int, pf *float32)

// directKernel is a direct micro-kernel of mr rows.
type directKernel struct {
	mr int
	fn directFn
}

// edgeKernel returns the direct kernel of exactly rows rows, or nil.
func (k *microKernel) edgeKernel(rows int) directFn {
	for _, d := range k.directEdge {
		if d.mr == rows {
			return d.fn
		}
	}
	return nil
}

// maxTile bounds mr·nr over all kernels; the edge scratch tile lives on the stack.
const maxTile = 16 * 64

// kernelTwin is the pure-Go reference of the assembly micro-kernels: the same FMAs in the
// same order, so the two agree bit for bit (math.FMA rounds once, as VFMADD231PS does).
func kernelTwin(mr, nr, kc int, a, b []float32, c []float32, ldc, flags int, beta float32) {
	tileTwin(mr, nr, kc, a, b, c, ldc, flags, beta, func(acc, x, y float32) float32 { return fma32(x, y, acc) })
}

// tileTwin is the loop every micro-kernel's twin shares: acc = step(acc, a, b) per element
// per k step in increasing k, then C = acc (flags 0, C unread) or C = beta·C + acc, rounded
// once.
func tileTwin(mr, nr, kc int, a, b []float32, c []float32, ldc, flags int, beta float32, step func(acc, a, b float32) float32) {
	var acc [maxTile]float32
	for p := 0; p < kc; p++ {
		ap := a[p*mr : p*mr+mr]
		bp := b[p*nr : p*nr+nr]
		for i, av := range ap {
			row := acc[i*nr : i*nr+nr]
			for j, bv := range bp {
				row[j] = step(row[j], av, bv)
			}
		}
	}
	for i := 0; i < mr; i++ {
		crow := c[i*ldc : i*ldc+nr]
		for j := range crow {
			if flags == 0 {
				crow[j] = acc[i*nr+j]
			} else {
				crow[j] = fma32(beta, crow[j], acc[i*nr+j])
			}
		}
	}
}

// fma32 returns x·y+z rounded once to float32, as VFMADD231PS computes it. The product of
// two float32 values is exact in float64, but rounding p+z first to float64 and then to
// float32 can round twice; TwoSum recovers the exact error e of the float64 sum, and the
// only case where the second rounding goes wrong (the float64 sum landing exactly on a
// float32 midpoint while the true value is off it) is then resolved by the sign of e.
func fma32(x, y, z float32) float32 {
	p := float64(x) * float64(y)
	s := p + float64(z)
	bb := s - p
	e := (p - (s - bb)) + (float64(z) - bb)
	r := float32(s)
	if e == 0 || float64(r) == s || math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	var other float32
	if float64(r) < s {
		other = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		other = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if s != (float64(r)+float64(other))/2 {
		return r
	}
	if e > 0 {
		return max(r, other)
	}
	return min(r, other)
}

// workspace holds one goroutine's packing buffers. They come from a sync.Pool so that
// concurrent Sgemm calls never share one and steady-state calls do not allocate.
type workspace struct {
	a, b []float32
	r    []float32 // rows of A copied at a padded stride (see rowBlock); nil when unused
	// scratch takes partial tiles. A local array would be moved to the heap, 4 KiB per
	// call, because the kernels are called through func values.
	scratch [maxTile]float32
}

var workspaces = sync.Pool{New: func() any { return new(workspace) }}

// restride returns the buffer rowBlock copies aliasing rows of A into (see restrideRows),
// or nil when the product does not read A in place at such a stride or is too narrow (n
// columns, fewer than restrideMinPanels panels) for the copy to pay: each row block is
// copied once and read once per panel.
func (ws *workspace) restride(kern *microKernel, direct bool, lda, mc, kc, n int) []float32 {
	if !direct || !kern.restrideRows(lda) || n < restrideMinPanels*kern.nr {
		return nil
	}
	ws.r = grow(ws.r, mc*(kc+restridePad))
	return ws.r
}

func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// sgemmPacked is the BLIS-style driver: SgemmGeneric's contract computed with kern.
// The arguments must already have passed checkArgs.
func sgemmPacked(kern *microKernel, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	mr, nr := kern.mr, kern.nr
	// The direct kernels read a row-major A in place (the same FMAs in the same order, so the
	// result is unchanged) and cover an 8- or 4-row remainder without a zero-padded panel,
	// as sgemmPrepacked always does. Packing the A blocks of a tall A paid for itself only
	// with AVX-512's old kc of 192 (in place lost 2.5 % on 512×2048×512). With today's
	// blocking, interleaved A/B against packed A blocks (SgemmParallel, 40 pairs, two runs):
	// AVX-512 one thread 0.97 at 256 rows and 0.99-1.01 at 512-1024, two threads 0.93-0.96
	// at 256-512 rows; AVX2 one thread 0.96-1.00, two threads 0.92-0.94 on 256 and 512
	// rows by 512 columns.
	direct := kern.direct != nil && alpha == 1 && !transA
	nc := kern.nc
	if direct && kern.ncDirect > 0 {
		nc = kern.ncDirect
	}
	kcMax := kcBlock(k, kern.kc)
	mcMax := min(kern.mc, roundUp(m, mr))
	ncMax := min(nc, roundUp(n, nr))

	ws := workspaces.Get().(*workspace)
	ws.a = grow(ws.a, mcMax*kcMax)
	ws.b = grow(ws.b, ncMax*kcMax)
	rbuf := ws.restride(kern, direct, lda, mcMax, kcMax, n)
	abuf, bbuf := ws.a, ws.b

	for jc := 0; jc < n; jc += ncMax {
		ncb := min(ncMax, n-jc)
		for pc := 0; pc < k; pc += kcMax {
			kcb := min(kcMax, k-pc)
			packB(transB, b, ldb, pc, jc, kcb, ncb, nr, bbuf)
			// The first k block applies beta; later ones accumulate onto it.
			flags, bt := 1, float32(1)
			if pc == 0 {
				if beta == 0 {
					flags = 0
				} else {
					bt = beta
				}
			}
			for ic := 0; ic < m; ic += mcMax {
				mcb := min(mcMax, m-ic)
				full, edge, ra, rlda := kern.rowBlock(direct, transA, a, lda, ic, pc, mcb, kcb, alpha, abuf, rbuf)
				for jr := 0; jr < ncb; jr += nr {
					nrb := min(nr, ncb-jr)
					bp := &bbuf[jr*kcb]
					for ir := 0; ir < mcb; ir += mr {
						mrb := min(mr, mcb-ir)
						off := (ic+ir)*ldc + jc + jr
						// bp as the prefetch pointer: B is already in cache, packed just now.
						ad, ap, dfn := kern.rowPanel(ra, rlda, abuf, ir, full, kcb, edge)
						kern.tile(dfn, ad, rlda, ap, bp, bp, c, off, ldc, kcb, mrb, nrb, flags, bt, &ws.scratch)
					}
				}
			}
		}
	}
	workspaces.Put(ws)
}

// rowBlock prepares op(A)'s row block at row ic, k block at pc (mcb rows, kcb steps), for
// the tile loop. When direct, the first full rows (whole mr panels) are read in place; a
// remainder that a narrower direct kernel covers exactly is read in place by edge, and any
// other remainder is packed into abuf's first panel. Otherwise the whole block is packed
// into abuf and full is 0. ra and rlda address the rows read in place: element (ic+i, pc+p)
// is ra[i·rlda+p]. That is A itself, or, when rbuf is given (see restride), a copy of the
// block's rows in rbuf at a stride one cache line longer than kcb. The kernels read the
// same values either way, so the result does not change.
func (kern *microKernel) rowBlock(direct, transA bool, a []float32, lda, ic, pc, mcb, kcb int, alpha float32, abuf, rbuf []float32) (full int, edge directFn, ra []float32, rlda int) {
	if !direct {
		packA(transA, a, lda, ic, pc, mcb, kcb, kern.mr, alpha, abuf)
		return 0, nil, nil, 0
	}
	full = mcb / kern.mr * kern.mr
	if full < mcb {
		if edge = kern.edgeKernel(mcb - full); edge == nil {
			packA(false, a, lda, ic+full, pc, mcb-full, kcb, kern.mr, alpha, abuf)
		}
	}
	rows := full
	if edge != nil {
		rows = mcb
	}
	if rbuf != nil {
		rlda = kcb + restridePad
		for i := 0; i < rows; i++ {
			copy(rbuf[i*rlda:i*rlda+kcb], a[(ic+i)*lda+pc:])
		}
		return full, edge, rbuf, rlda
	}
	return full, edge, a[ic*lda+pc:], lda
}

// restridePad is the padding, in elements (one cache line), rowBlock adds to copied rows.
const restridePad = 16

// restrideMinPanels is the least number of B panels a copied row block must serve.
const restrideMinPanels = 4

// restrideRows reports whether kern's direct kernel should read A's rows, at stride lda
// (elements), from a copy: with kern.restride, when the stride is a multiple of 4 KiB.
// Such rows put the same k's cache line of every row in one L1 set, so a 12-row direct
// kernel holds 12 lines in a 12-way set besides its share of the B panel, and they evict
// each other. This is the FFN output layer's input (k = 2048). Interleaved A/B, one
// thread, copy/in place: 1024×512×2048 0.91-0.93, 256×512×2048 0.88-0.91, 48×512×2048
// 0.88-0.97, 128×512×1024 0.89-0.95; the base encoder at batch 8, n = 128, 2 threads,
// 0.958 and 0.977 (30 pairs each), n = 512 0.973 and 0.995. A 2 KiB rule (six rows per set)
// gained nothing more on the encoder; the 6-row AVX2 kernel gains nothing (0.98-1.01).
func (kern *microKernel) restrideRows(lda int) bool { return kern.restride && lda%1024 == 0 }

// rowPanel chooses how the row panel at row ir of the row block is read: in place at ad by
// dfn (from rowBlock's ra and rlda), the full direct kernel for the first full rows and the
// edge kernel (when there is one) after them, or else packed, at ap in abuf, whose first
// panel follows the full rows.
func (kern *microKernel) rowPanel(ra []float32, rlda int, abuf []float32, ir, full, kcb int, edge directFn) (ad, ap *float32, dfn directFn) {
	if ir < full {
		dfn = kern.direct
	} else {
		dfn = edge
	}
	if dfn != nil {
		return &ra[ir*rlda], nil, dfn
	}
	return nil, &abuf[(ir-full)*kcb], nil
}

// tile computes the mrb×nrb tile of C at c[off] (row stride ldc) over one k block of kcb
// steps from B panel bp: with dfn reading A's rows in place from ad (row stride lda,
// prefetching from pf) when dfn is set, else with kern.fn on the packed A panel ap. A tile
// narrower than nr (or, packed, shorter than mr) is computed whole into scratch, the packed
// panels being zero-padded, and merged with the single-rounding update the kernel would
// have applied; flags and bt are the kernel's (see sgemm_amd64.s).
func (kern *microKernel) tile(dfn directFn, ad *float32, lda int, ap, bp, pf *float32, c []float32, off, ldc, kcb, mrb, nrb, flags int, bt float32, scratch *[maxTile]float32) {
	nr := kern.nr
	if dfn != nil {
		if nrb == nr {
			dfn(kcb, ad, bp, &c[off], ldc, flags, bt, lda, pf)
			return
		}
		dfn(kcb, ad, bp, &scratch[0], nr, 0, 0, lda, pf)
	} else {
		if mrb == kern.mr && nrb == nr {
			kern.fn(kcb, ap, bp, &c[off], ldc, flags, bt)
			return
		}
		kern.fn(kcb, ap, bp, &scratch[0], nr, 0, 0)
	}
	for i := 0; i < mrb; i++ {
		crow := c[off+i*ldc : off+i*ldc+nrb]
		srow := scratch[i*nr : i*nr+nrb]
		if flags == 0 {
			copy(crow, srow)
		} else if bt == 1 {
			// fma32(1, x, s) is x+s rounded once: a plain add.
			for j, s := range srow {
				crow[j] += s
			}
		} else {
			for j, s := range srow {
				crow[j] = fma32(bt, crow[j], s)
			}
		}
	}
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// scaleC applies C = beta·C (k == 0: the product is empty). beta == 0 stores zeros without
// reading C.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// packA copies op(A)[ic:ic+mcb, pc:pc+kcb]·alpha into dst as consecutive micro-panels of mr
// rows: panel q holds, for each p, the mr values op(A)[ic+q·mr+i, pc+p] (i < mr), zero-padded
// past row mcb. Folding alpha in here costs nothing extra and matches SgemmGeneric, which
// also scales the A element before multiplying.
func packA(transA bool, a []float32, lda, ic, pc, mcb, kcb, mr int, alpha float32, dst []float32) {
	for ir := 0; ir < mcb; ir += mr {
		mrb := min(mr, mcb-ir)
		panel := dst[ir*kcb : ir*kcb+mr*kcb]
		if transA {
			// op(A) row i is column i of A: each p gives mrb contiguous values.
			for p := 0; p < kcb; p++ {
				src := a[(pc+p)*lda+ic+ir : (pc+p)*lda+ic+ir+mrb]
				d := panel[p*mr : p*mr+mr]
				if alpha == 1 {
					// A plain copy (memmove) is several times faster than the scaling loop,
					// and a training step's weight gradients pack all their A this way.
					copy(d, src)
				} else {
					for i, v := range src {
						d[i] = alpha * v
					}
				}
				clear(d[mrb:])
			}
			continue
		}
		if packAFast(panel, a, (ic+ir)*lda+pc, lda, kcb, mr, mrb, alpha) {
			continue
		}
		// Row-major A: read each row contiguously and scatter with stride mr.
		for i := 0; i < mrb; i++ {
			src := a[(ic+ir+i)*lda+pc : (ic+ir+i)*lda+pc+kcb]
			if alpha == 1 {
				scatter(panel[i:], src, mr)
			} else {
				scatterScaled(panel[i:], src, mr, alpha)
			}
		}
		for i := mrb; i < mr; i++ {
			for p := 0; p < kcb; p++ {
				panel[p*mr+i] = 0
			}
		}
	}
}

// scatter writes src[p] to dst[p*stride]. The bounds are proven once up front so the loop
// runs without per-element checks.
func scatter(dst, src []float32, stride int) {
	if len(src) == 0 {
		return
	}
	_ = dst[(len(src)-1)*stride]
	d := unsafe.Pointer(unsafe.SliceData(dst))
	for p, v := range src {
		*(*float32)(unsafe.Add(d, p*stride*4)) = v
	}
}

func scatterScaled(dst, src []float32, stride int, alpha float32) {
	if len(src) == 0 {
		return
	}
	_ = dst[(len(src)-1)*stride]
	d := unsafe.Pointer(unsafe.SliceData(dst))
	for p, v := range src {
		*(*float32)(unsafe.Add(d, p*stride*4)) = alpha * v
	}
}

// packB copies op(B)[pc:pc+kcb, jc:jc+ncb] into dst as consecutive micro-panels of nr
// columns: panel q holds, for each p, the nr values op(B)[pc+p, jc+q·nr+j], zero-padded past
// column ncb.
func packB(transB bool, b []float32, ldb, pc, jc, kcb, ncb, nr int, dst []float32) {
	if !transB {
		// Walk B row by row so the reads are sequential (the hardware prefetcher follows
		// them); each row is dealt out to the panels in nr-wide pieces.
		full := ncb / nr * nr
		fast := packBRowsFast(dst, b, ldb, pc, jc, kcb, full/nr, nr)
		for p := 0; p < kcb; p++ {
			src := b[(pc+p)*ldb+jc : (pc+p)*ldb+jc+ncb]
			if !fast {
				copyPieces(dst[p*nr:], src[:full], nr, kcb*nr)
			}
			if full < ncb {
				d := dst[full*kcb+p*nr : full*kcb+p*nr+nr]
				copy(d, src[full:])
				clear(d[ncb-full:])
			}
		}
		return
	}
	for jr := 0; jr < ncb; jr += nr {
		nrb := min(nr, ncb-jr)
		panel := dst[jr*kcb : jr*kcb+nr*kcb]
		if nrb == nr && packBTransFast(panel, b, (jc+jr)*ldb+pc, ldb, kcb, nr) {
			continue
		}
		// op(B) column j is row j of B: read it contiguously, scatter with stride nr.
		for j := 0; j < nrb; j++ {
			row := (jc+jr+j)*ldb + pc
			scatter(panel[j:], b[row:row+kcb], nr)
		}
		for j := nrb; j < nr; j++ {
			for p := 0; p < kcb; p++ {
				panel[p*nr+j] = 0
			}
		}
	}
}

// copyPieces copies src in nr-element pieces to dst, piece q going to dst[q*stride:]. The
// common widths copy through fixed-size array types, which the compiler turns into a few
// inline vector moves; a copy() call per 64-256 bytes would spend most of its time in
// runtime.memmove's dispatch.
func copyPieces(dst, src []float32, nr, stride int) {
	if len(src) == 0 {
		return
	}
	_ = dst[(len(src)/nr-1)*stride+nr-1]
	d := unsafe.Pointer(unsafe.SliceData(dst))
	s := unsafe.Pointer(unsafe.SliceData(src))
	switch nr {
	case 16:
		for q := 0; q < len(src)/16; q++ {
			*(*[16]float32)(unsafe.Add(d, q*stride*4)) = *(*[16]float32)(unsafe.Add(s, q*64))
		}
	case 32:
		for q := 0; q < len(src)/32; q++ {
			*(*[32]float32)(unsafe.Add(d, q*stride*4)) = *(*[32]float32)(unsafe.Add(s, q*128))
		}
	default:
		for q := 0; q < len(src)/nr; q++ {
			copy(dst[q*stride:q*stride+nr], src[q*nr:q*nr+nr])
		}
	}
}
