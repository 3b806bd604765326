package gemm

import "fmt"

// PackedB is a constant right-hand operand op(B) (k×n) packed once, for every k block, in
// the micro-kernel panel layout of the level that was active when PackB made it. Products
// with it (SgemmPacked, SgemmPackedCols) skip the per-call packing of B, which costs as
// much as the arithmetic when op(A) has few rows. It is read-only after PackB and safe to
// use from many goroutines at once.
type PackedB struct {
	k, n int
	kern *microKernel // nil: the generic level; data then holds op(B) row-major, k×n
	kc   int          // k block length (the last block may be shorter)
	np   int          // panels per k block: ceil(n/nr)
	data []float32    // block q (rows q·kc…) starts at q·kc·np·nr; panel j at +j·kcb·nr
	// bf16 marks a PackBBF16 operand: k and the panels then count bf16 pairs of op(B)'s
	// rows, and kIn is op(B)'s own row count.
	bf16 bool
	kIn  int
	// i8 holds a PackBInt8 or PackBInt8Quantized operand (int8.go); data is then unused.
	i8 *int8Data
}

// PackB packs op(B) for SgemmPacked: B is k×n with row stride ldb, or n×k when transB. The
// layout is that of the kernel level active now; products with the result use that level
// even if simd.Set changes it later, and round exactly as Sgemm on that level does. It
// panics, like Sgemm, when b is too short for the shape and stride.
func PackB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	pb := new(PackedB)
	pb.Pack(transB, k, n, b, ldb)
	return pb
}

// Pack is PackB into pb, reusing its storage when it is large enough: a kernel that packs
// a run-time operand per call keeps one PackedB (the zero value is ready to use) and
// allocates nothing in the steady state. pb must not be in use by another goroutine.
func (pb *PackedB) Pack(transB bool, k, n int, b []float32, ldb int) {
	checkPackB("PackB", transB, k, n, b, ldb)
	pb.pack(activeLevel().kern, transB, k, n, b, ldb)
}

// checkPackB panics, naming the function, when op(B)'s shape is negative or b is too
// short for it.
func checkPackB(fn string, transB bool, k, n int, b []float32, ldb int) {
	if k < 0 || n < 0 {
		panic(fmt.Sprintf("gemm: %s: negative dimension k=%d n=%d", fn, k, n))
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	checkMat("B", br, bc, len(b), ldb)
}

// pack is Pack with the kernel set given (nil: the generic layout).
func (pb *PackedB) pack(kern *microKernel, transB bool, k, n int, b []float32, ldb int) {
	*pb = PackedB{k: k, n: n, kern: kern, data: pb.data[:0]}
	if kern == nil {
		pb.data = grow(pb.data, k*n)
		for p := 0; p < k; p++ {
			row := pb.data[p*n : p*n+n]
			for j := range row {
				if transB {
					row[j] = b[j*ldb+p]
				} else {
					row[j] = b[p*ldb+j]
				}
			}
		}
		return
	}
	if k == 0 || n == 0 {
		return
	}
	nr := kern.nr
	pb.kc = kcBlock(k, kern.kc)
	pb.np = (n + nr - 1) / nr
	pb.data = grow(pb.data, k*pb.np*nr)
	for pc := 0; pc < k; pc += pb.kc {
		kcb := min(pb.kc, k-pc)
		packB(transB, b, ldb, pc, 0, kcb, n, nr, pb.data[pc*pb.np*nr:])
	}
}

// Unpack returns op(B) as the k×n row-major matrix PackB was given (transposed back when
// it was given as Bᵀ): what the unfused product of a fused layer needs in the rare run
// that leaves the packed path, without keeping a second copy of the weights all along.
func (pb *PackedB) Unpack() []float32 {
	if pb.i8 != nil {
		return pb.unpackInt8()
	}
	if pb.bf16 {
		return pb.unpackBF16()
	}
	out := make([]float32, pb.k*pb.n)
	if pb.kern == nil || len(out) == 0 {
		copy(out, pb.data)
		return out
	}
	nr := pb.kern.nr
	for pc := 0; pc < pb.k; pc += pb.kc {
		kcb := min(pb.kc, pb.k-pc)
		block := pb.data[pc*pb.np*nr:]
		for j := 0; j < pb.np; j++ {
			panel := block[j*kcb*nr:]
			cols := min(nr, pb.n-j*nr)
			for p := 0; p < kcb; p++ {
				copy(out[(pc+p)*pb.n+j*nr:(pc+p)*pb.n+j*nr+cols], panel[p*nr:p*nr+cols])
			}
		}
	}
	return out
}

// K and N return the shape of op(B).
func (pb *PackedB) K() int {
	if pb.bf16 {
		return pb.kIn
	}
	return pb.k
}

// N returns the number of columns of op(B).
func (pb *PackedB) N() int { return pb.n }

// ColAlign is the column granularity of SgemmPackedCols: ranges must start at a multiple
// of it (the micro-kernel's tile width, or 1 on the generic level).
func (pb *PackedB) ColAlign() int {
	if pb.i8 != nil {
		if pb.i8.kern == nil {
			return 1
		}
		return pb.i8.kern.nr
	}
	if pb.kern == nil {
		return 1
	}
	return pb.kern.nr
}

// kcBlock splits k into equal blocks no longer than kc (with kc = 192, 512 → 3×171 rather
// than 192+192+128), so no block is a short one that pays the C update for little work.
func kcBlock(k, kc int) int {
	nb := (k + kc - 1) / kc
	return (k + nb - 1) / nb
}

// SgemmPacked computes C = alpha·op(A)·op(B) + beta·C like Sgemm with transA false, op(B)
// given pre-packed by PackB (n and k must be its shape). The result is bitwise equal to
// Sgemm's on the level pb was packed for. It panics when the shapes disagree or a slice is
// too short.
func SgemmPacked(m, n, k int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int) {
	if pb == nil || n != pb.n || k != pb.K() {
		panic(fmt.Sprintf("gemm: SgemmPacked: shape %d×%d does not match the packed operand", k, n))
	}
	SgemmPackedCols(m, 0, n, alpha, a, lda, pb, beta, c, ldc)
}

// SgemmPackedCols computes only columns [j0, j1) of SgemmPacked's product: c addresses
// column 0 of C (element (i, j) is c[i·ldc+j]) and nothing outside those columns is read or
// written. j0 must be a multiple of pb.ColAlign(). Calls on disjoint column ranges may run
// concurrently, and every element is bitwise the same as in the full product, so the
// columns of one product can be split across threads without repacking op(B).
func SgemmPackedCols(m, j0, j1 int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int) {
	SgemmPackedEpilogue(m, j0, j1, alpha, a, lda, pb, beta, c, ldc, nil)
}

// Epilogue is called by SgemmPackedEpilogue on each block of C, rows [i0, i1) and columns
// [j0, j1), as soon as that block is final, while it is still in cache.
type Epilogue func(i0, i1, j0, j1 int)

// SgemmPackedEpilogue is SgemmPackedCols followed by epi on every block of the columns
// [j0, j1) of C; the blocks partition them, and each is passed once. A nil epi does
// nothing. It is how a fused layer applies bias, activation and residual to an output tile
// before the tile leaves the cache.
func SgemmPackedEpilogue(m, j0, j1 int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	if pb == nil || m < 0 || j0 < 0 || j1 > pb.n || j0 > j1 || j0%pb.ColAlign() != 0 {
		panic(fmt.Sprintf("gemm: SgemmPackedCols: bad column range [%d, %d) of a packed operand", j0, j1))
	}
	if m == 0 || j0 == j1 {
		return
	}
	checkMat("C", m, j1, len(c), ldc)
	SgemmPackedEpilogueAt(m, j0, j1, alpha, a, lda, pb, beta, c[j0:], ldc, epi)
}

// SgemmPackedEpilogueAt is SgemmPackedEpilogue writing the columns [j0, j1) of the product
// into a matrix of their own: c addresses column j0 (element (i, j) of the product is
// c[i·ldc+j−j0]), so a slice of the product's columns needs no copy. epi still receives
// the product's column numbers. It panics like SgemmPackedEpilogue.
func SgemmPackedEpilogueAt(m, j0, j1 int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	if pb == nil || m < 0 || j0 < 0 || j1 > pb.n || j0 > j1 || j0%pb.ColAlign() != 0 {
		panic(fmt.Sprintf("gemm: SgemmPackedCols: bad column range [%d, %d) of a packed operand", j0, j1))
	}
	n, k := j1-j0, pb.K()
	if m == 0 || n == 0 {
		return
	}
	checkMat("A", m, k, len(a), lda)
	checkMat("C", m, n, len(c), ldc)
	if pb.bf16 {
		sbgemmPacked(m, j0, j1, alpha, a, lda, pb, beta, c, ldc, epi)
		return
	}
	if pb.i8 != nil && k > 0 {
		sgemmInt8(pb, m, j0, n, alpha, a, lda, beta, c, ldc, epi)
		return
	}
	if k == 0 || pb.kern == nil {
		if k == 0 {
			scaleC(m, n, beta, c, ldc)
		} else {
			SgemmGeneric(false, false, m, n, k, alpha, a, lda, pb.data[j0:], pb.n, beta, c, ldc)
		}
		if epi != nil {
			epi(0, m, j0, j1)
		}
		return
	}
	sgemmPrepacked(pb, m, j0, n, alpha, a, lda, beta, c, ldc, epi)
}

// sgemmPrepacked is sgemmPacked's loop nest with op(B)'s packing replaced by indexing into
// pb: the same k blocks, tiles and edge handling, hence the same rounding.
func sgemmPrepacked(pb *PackedB, m, j0, n int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int, epi Epilogue) {
	kern := pb.kern
	mr, nr := kern.mr, kern.nr
	k, kcMax := pb.k, pb.kc
	mcMax := min(kern.mc, roundUp(m, mr))
	ncMax := min(kern.nc, roundUp(n, nr))

	ws := workspaces.Get().(*workspace)
	ws.a = grow(ws.a, mcMax*kcMax)
	abuf := ws.a
	direct := kern.direct != nil && alpha == 1
	rbuf := ws.restride(kern, direct, lda, mcMax, kcMax, n)

	for jc := 0; jc < n; jc += ncMax {
		ncb := min(ncMax, n-jc)
		for pc := 0; pc < k; pc += kcMax {
			kcb := min(kcMax, k-pc)
			// Panels of this k block for columns j0+jc….
			bbuf := pb.data[pc*pb.np*nr+(j0+jc)/nr*kcb*nr:]
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
				full, edge, ra, rlda := kern.rowBlock(direct, false, a, lda, ic, pc, mcb, kcb, alpha, abuf, rbuf)
				for jr := 0; jr < ncb; jr += nr {
					nrb := min(nr, ncb-jr)
					bp := &bbuf[jr*kcb]
					// On the first row block the packed weights come from memory (later row
					// blocks find them in L2), each panel used by only mcb/mr kernel calls:
					// fetch the next panel while this one runs. The direct kernels spread
					// the prefetches over their k loops (pfStep floats of the next panel per
					// call); the packed kernels cannot, and get one burst here.
					var next []float32
					if ic == 0 {
						next = pb.nextPanel(bbuf, pc, kcb, j0+jc, jr, ncb, mcb == m)
						if !direct && len(next) > 0 {
							prefetchL2(&next[0], len(next)/16)
						}
					}
					pfStep := kcb / 4 * 32 // two lines per four k steps
					for ir := 0; ir < mcb; ir += mr {
						mrb := min(mr, mcb-ir)
						off := (ic+ir)*ldc + jc + jr
						pf := bp
						if o := ir / mr * pfStep; o < len(next) {
							pf = &next[o]
						}
						ad, ap, dfn := kern.rowPanel(ra, rlda, abuf, ir, full, kcb, edge)
						kern.tile(dfn, ad, rlda, ap, bp, pf, c, off, ldc, kcb, mrb, nrb, flags, bt, &ws.scratch)
					}
				}
				if epi != nil && pc+kcb == k {
					epi(ic, ic+mcb, j0+jc, j0+jc+ncb)
				}
			}
		}
	}
	workspaces.Put(ws)
}

// nextPanel returns the packed panel of op(B) that the first row block of sgemmPrepacked
// reads after panel jr of the k block at pc (kcb rows, ncb columns from col): the next panel
// of the block, or, after the last one, the first panel of the next k block when the row
// block is the only one (so nothing else runs in between), else the panel just right of
// these columns in this k block. It returns nil when there is none.
func (pb *PackedB) nextPanel(bbuf []float32, pc, kcb, col, jr, ncb int, onlyRowBlock bool) []float32 {
	nr := pb.kern.nr
	if jr+nr < ncb {
		return bbuf[(jr+nr)*kcb : (jr+2*nr)*kcb]
	}
	if !onlyRowBlock || pc+kcb >= pb.k {
		if col/nr+(ncb+nr-1)/nr < pb.np {
			// The panel after these columns: when a product is cut into column tiles that
			// threads claim in order, the start of the tile claimed next.
			o := (ncb + nr - 1) / nr * kcb * nr
			return bbuf[o : o+kcb*nr]
		}
		return nil
	}
	pc += kcb
	kcb = min(pb.kc, pb.k-pc)
	start := pc*pb.np*nr + col/nr*kcb*nr
	return pb.data[start : start+kcb*nr]
}
