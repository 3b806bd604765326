package cpu

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The fused kernels behind fuse.go's patterns.

// Attention tiling. A task is one (batch, head) matrix and one block of query rows; it
// walks the keys in blocks, keeping a running row maximum m and sum l (the online softmax
// of FlashAttention): for each key block it computes the scores S = Q·Kᵀ with one SGEMM,
// applies the scale and mask ops, rescales what it has accumulated when the maximum grows,
// and adds exp(S − m)·V into the output with a second SGEMM. The n×n score matrix never
// exists; a task's scratch is one attnQBlock × attnKBlock tile (256 KiB), sized to stay in
// L2 next to the V block. Shares of one matrix's query rows (see attnSharedTasks) read Kᵀ and
// V blocks packed for all of them beforehand; a whole matrix packs its own as it goes. The
// shared packs hold all of Kᵀ and V once more, which only steps of few matrices use.
//
// The partition into tasks and blocks depends only on the shapes, and every task runs the
// same code in the same order whichever goroutine takes it, so the result is bitwise the
// same for any thread count.
const (
	attnQBlock = 128 // query rows per task (fewer when that leaves too few tasks)
	attnKBlock = 512 // keys per block: sequences up to 512 need no rescaling at all
	attnMinQ   = 32  // smallest query block used to create parallel tasks
	attnTasks  = 8   // aim for at least this many tasks (independent of the thread count)
	// attnSharedTasks: with fewer matrices than this, their query rows are also shared out
	// in whole attnQBlock blocks, up to this many tasks, the packed Kᵀ and V blocks being
	// shared by the shares of a matrix. One task per head (8 at batch 1) leaves a core idle
	// for up to one task's time at the end of every step when the two cores of a shared VM
	// run at different speeds. Interleaved A/B on the base encoder, 2 threads, against one
	// task per head: batch 1 n=512 1.000-1.016 faster, batch 2 n=512 1.005-1.014, n=2048
	// 1.011. Shares of 32 rows at n=128 ran 3.6 % slower, hence whole blocks only.
	attnSharedTasks = 32
)

// attnState is one task's scratch: the score tile, the running row maxima and sums, and
// the packed Kᵀ and V blocks of its head.
type attnState struct {
	s, m, l []float32
	kt, v   gemm.PackedB
}

var attnStates = sync.Pool{New: func() any {
	return &attnState{s: make([]float32, attnQBlock*attnKBlock)}
}}

// attnPacks holds the packed Kᵀ and V blocks of every matrix of one attention step when its
// query rows are shared out (block kb of matrix b at index b·nkb+kb); a pool keeps their
// storage from step to step.
type attnPacks struct {
	kt, v []gemm.PackedB
}

var attnPackSets = sync.Pool{New: func() any { return new(attnPacks) }}

// grow makes room for n blocks, keeping the storage of those already there.
func (p *attnPacks) grow(n int) {
	if len(p.kt) < n {
		p.kt = append(p.kt, make([]gemm.PackedB, n-len(p.kt))...)
		p.v = append(p.v, make([]gemm.PackedB, n-len(p.v))...)
	}
}

// bcastOperand is a mask (or Where condition) broadcast to the score shape: element
// (b, i, j) is at base[b] + i·rs + j·cs.
type bcastOperand struct {
	t      *tensor.Tensor
	base   []int
	rs, cs int
	// replace, for a Where condition that does not vary along the query axis (rs == 0, the
	// key-padding mask), lists per batch matrix the key indices whose score the Where
	// replaces, in increasing order; nil otherwise. Rows then touch only those keys,
	// usually none, instead of testing every condition element of every row.
	replace [][]int32
}

// planReplace fills bo.replace for a Where op of kind 'w' (keep where the condition holds)
// or 'W' (keep where it does not) when the condition is the same for every query row.
func (bo *bcastOperand) planReplace(kind byte, nk int) {
	if bo.rs != 0 {
		return
	}
	keep := kind == 'w'
	bo.replace = make([][]int32, len(bo.base))
	for b, base := range bo.base {
		if b > 0 && base == bo.base[b-1] {
			bo.replace[b] = bo.replace[b-1] // broadcast over heads: same condition row
			continue
		}
		var idx []int32
		for j := 0; j < nk; j++ {
			if bo.t.Bool[base+j*bo.cs] != keep {
				idx = append(idx, int32(j))
			}
		}
		bo.replace[b] = idx
	}
}

// planOperand checks that t broadcasts unidirectionally to scores of shape batch×nq×nk and
// returns its offsets; ok is false otherwise.
func planOperand(t *tensor.Tensor, batch []int, nq, nk int) (bcastOperand, bool) {
	full := append(append([]int{}, batch...), nq, nk)
	r := len(full)
	if len(t.Shape) > r {
		return bcastOperand{}, false
	}
	st := make([]int, r)
	acc := 1
	for i := len(t.Shape) - 1; i >= 0; i-- {
		d, fd := t.Shape[i], full[r-len(t.Shape)+i]
		switch {
		case d == fd:
			if d != 1 {
				st[r-len(t.Shape)+i] = acc
			}
		case d == 1:
		default:
			return bcastOperand{}, false
		}
		acc *= d
	}
	nb := prod(batch)
	base := make([]int, nb)
	idx := make([]int, len(batch))
	off := 0
	for b := 0; b < nb; b++ {
		base[b] = off
		for d := len(batch) - 1; d >= 0; d-- {
			idx[d]++
			off += st[d]
			if idx[d] < batch[d] {
				break
			}
			off -= st[d] * batch[d]
			idx[d] = 0
		}
	}
	return bcastOperand{t: t, base: base, rs: st[r-2], cs: st[r-1]}, true
}

// strided is a matrix operand of attention read in place: matrix t of the batch starts at
// off[t], consecutive rows are ld apart and consecutive columns cs apart (one of ld and cs
// is 1).
type strided struct {
	off    []int
	ld, cs int
}

// permView returns the logical shape of Transpose(src, perm) (src itself when perm is nil)
// and its element strides in src; ok is false when perm is not a permutation of src's axes.
func permView(shape []int, perm []int) (lshape, lstride []int, ok bool) {
	r := len(shape)
	st := make([]int, r)
	acc := 1
	for i := r - 1; i >= 0; i-- {
		st[i] = acc
		acc *= shape[i]
	}
	if perm == nil {
		return shape, st, true
	}
	if len(perm) != r {
		return nil, nil, false
	}
	seen := make([]bool, r)
	lshape, lstride = make([]int, r), make([]int, r)
	for i, a := range perm {
		if a < 0 || a >= r || seen[a] {
			return nil, nil, false
		}
		seen[a] = true
		lshape[i], lstride[i] = shape[a], st[a]
	}
	return lshape, lstride, true
}

// batchStrided returns the strided matrices of an operand with logical strides lstride
// over the batch shape.
func batchStrided(batch, lstride []int) strided {
	r := len(lstride)
	nb := prod(batch)
	off := make([]int, nb)
	idx := make([]int, len(batch))
	o := 0
	for t := 0; t < nb; t++ {
		off[t] = o
		for d := len(batch) - 1; d >= 0; d-- {
			idx[d]++
			o += lstride[d]
			if idx[d] < batch[d] {
				break
			}
			o -= lstride[d] * batch[d]
			idx[d] = 0
		}
	}
	return strided{off: off, ld: lstride[r-2], cs: lstride[r-1]}
}

// attentionFast is the fused attention fast path: in holds Q (…, nq, dk), Kᵀ (…, dk, nk),
// V (…, nk, dv) with equal batch dimensions, each given as the source of a chain of
// Transposes with the composed permutation perms[j] (nil: none), then the operands of ops.
// When outPerm is set the result is Transpose(attention, outPerm), written in place. It
// returns ok false for anything else (the fused step then runs the original steps).
func attentionFast(e *exec, in []*tensor.Tensor, ops []scoreOp, perms [3][]int, outPerm []int) (*tensor.Tensor, bool, error) {
	q, kt, v := in[0], in[1], in[2]
	if q == nil || kt == nil || v == nil || q.DType != tensor.Float32 || kt.DType != tensor.Float32 || v.DType != tensor.Float32 {
		return nil, false, nil
	}
	qShape, qStride, ok1 := permView(q.Shape, perms[0])
	kShape, kStride, ok2 := permView(kt.Shape, perms[1])
	vShape, vStride, ok3 := permView(v.Shape, perms[2])
	if !ok1 || !ok2 || !ok3 {
		return nil, false, nil
	}
	r := len(qShape)
	if r < 2 || len(kShape) != r || len(vShape) != r {
		return nil, false, nil
	}
	batch := qShape[:r-2]
	if !tensor.SameShape(batch, kShape[:r-2]) || !tensor.SameShape(batch, vShape[:r-2]) {
		return nil, false, nil
	}
	nq, dk, nk, dv := qShape[r-2], qShape[r-1], kShape[r-1], vShape[r-1]
	if kShape[r-2] != dk || vShape[r-2] != nk || nq == 0 || dk == 0 || nk == 0 || dv == 0 {
		return nil, false, nil
	}
	// Q and V rows and output rows must be contiguous; Kᵀ may be either way round (a
	// transposed pack reads K's rows).
	if qStride[r-1] != 1 || vStride[r-1] != 1 || (kStride[r-1] != 1 && kStride[r-2] != 1) {
		return nil, false, nil
	}
	operands := make([]bcastOperand, len(in))
	for _, op := range ops {
		if op.kind != '+' && op.kind != 'w' && op.kind != 'W' {
			continue
		}
		t := in[op.input]
		want := tensor.Float32
		if op.kind != '+' {
			want = tensor.Bool
		}
		if t == nil || t.DType != want {
			return nil, false, nil
		}
		bo, ok := planOperand(t, batch, nq, nk)
		if !ok {
			return nil, false, nil
		}
		if op.kind != '+' {
			bo.planReplace(op.kind, nk)
		}
		operands[op.input] = bo
	}
	logical := append(append([]int{}, batch...), nq, dv)
	outShape := logical
	var oStride []int
	if outPerm != nil {
		if len(outPerm) != r {
			return nil, false, nil
		}
		outShape = make([]int, r)
		seen := make([]bool, r)
		for j, a := range outPerm {
			if a < 0 || a >= r || seen[a] {
				return nil, false, nil
			}
			seen[a] = true
			outShape[j] = logical[a]
		}
		// logical axis outPerm[j] is axis j of the output
		_, fs, _ := permView(outShape, nil)
		oStride = make([]int, r)
		for j, a := range outPerm {
			oStride[a] = fs[j]
		}
		if oStride[r-1] != 1 {
			return nil, false, nil
		}
	} else {
		_, oStride, _ = permView(logical, nil)
	}
	out, err := e.allocRaw(outShape)
	if err != nil {
		return nil, true, err
	}
	qs, ks, vs, ost := batchStrided(batch, qStride), batchStrided(batch, kStride), batchStrided(batch, vStride), batchStrided(batch, oStride)
	nb := prod(batch)
	nkb := (nk + attnKBlock - 1) / attnKBlock
	// packKV packs key block k0 of matrix b: Kᵀ's columns and V's rows k0….
	packKV := func(ktp, vp *gemm.PackedB, b, k0 int) {
		cols := min(attnKBlock, nk-k0)
		if ks.cs == 1 {
			ktp.Pack(false, dk, cols, kt.F32[ks.off[b]+k0:], ks.ld)
		} else {
			ktp.Pack(true, dk, cols, kt.F32[ks.off[b]+k0*ks.cs:], ks.cs)
		}
		vp.Pack(false, cols, dv, v.F32[vs.off[b]+k0*vs.ld:], vs.ld)
	}
	// A task is one (batch, head) matrix, or a contiguous share of its query rows when there
	// are too few matrices to make attnTasks tasks (shares of attnMinQ rows or more), or
	// attnSharedTasks tasks (whole attnQBlock blocks). With whole matrices, a task packs each
	// block of Kᵀ and V itself, just before it reads them. With shares, the blocks are packed
	// once beforehand (one parallel step) and every share of the matrix reads them: the
	// shares balance the threads without packing the same blocks again.
	chunks := 1
	if nb < attnTasks {
		chunks = min((attnTasks+nb-1)/nb, (nq+attnMinQ-1)/attnMinQ)
	}
	if nb < attnSharedTasks {
		chunks = max(chunks, min((attnSharedTasks+nb-1)/nb, nq/attnQBlock))
	}
	per := (nq + chunks - 1) / chunks
	chunks = (nq + per - 1) / per
	var packs *attnPacks
	if chunks > 1 {
		packs = attnPackSets.Get().(*attnPacks)
		defer attnPackSets.Put(packs)
		packs.grow(nb * nkb)
		workpool.Tasks(e.threads, nb*nkb, func(t int) {
			packKV(&packs.kt[t], &packs.v[t], t/nkb, t%nkb*attnKBlock)
		})
	}
	workpool.Tasks(e.threads, nb*chunks, func(t int) {
		b := t / chunks
		qLo := (t % chunks) * per
		qHi := min(qLo+per, nq)
		st := attnStates.Get().(*attnState)
		defer attnStates.Put(st)
		s := st.s
		if cap(st.m) < qHi-qLo {
			st.m, st.l = make([]float32, qHi-qLo), make([]float32, qHi-qLo)
		}
		m, l := st.m[:qHi-qLo], st.l[:qHi-qLo]
		for i := range m {
			m[i], l[i] = float32(math.Inf(-1)), 0
		}
		for k0 := 0; k0 < nk; k0 += attnKBlock {
			cols := min(attnKBlock, nk-k0)
			ktp, vp := &st.kt, &st.v
			if packs != nil {
				ktp, vp = &packs.kt[b*nkb+k0/attnKBlock], &packs.v[b*nkb+k0/attnKBlock]
			} else {
				packKV(ktp, vp, b, k0)
			}
			beta := float32(1)
			if k0 == 0 {
				beta = 0
			}
			for q0 := qLo; q0 < qHi; q0 += attnQBlock {
				rows := min(attnQBlock, qHi-q0)
				sc := s[:rows*cols]
				gemm.SgemmPacked(rows, cols, dk, 1, q.F32[qs.off[b]+q0*qs.ld:], qs.ld, ktp, 0, sc, cols)
				o := out.F32[ost.off[b]+q0*ost.ld:]
				mq, lq := m[q0-qLo:], l[q0-qLo:]
				for i := 0; i < rows; i++ {
					row := sc[i*cols : (i+1)*cols]
					applyScoreOps(row, ops, operands, b, q0+i, k0)
					mx := vec.Max(row)
					mnew := mx
					if mx == mx && mq[i] > mx {
						mnew = mq[i]
					}
					if math.IsInf(float64(mnew), -1) {
						clear(row) // every key so far is masked out
						continue
					}
					alpha := float32(math.Exp(float64(mq[i] - mnew)))
					sum := vec.ExpSum(row, row, mnew)
					if k0 > 0 && alpha != 1 {
						vec.Scale(o[i*ost.ld:i*ost.ld+dv], alpha)
					}
					lq[i] = lq[i]*alpha + sum
					mq[i] = mnew
				}
				gemm.SgemmPacked(rows, dv, cols, 1, sc, cols, vp, beta, o, ost.ld)
			}
		}
		for i := range m {
			// a row with every key masked has l = 0 and gives 0/0 = NaN, as the unfused
			// softmax does
			o := out.F32[ost.off[b]+(qLo+i)*ost.ld:]
			vec.DivScalar(o[:dv], l[i])
		}
	})
	return out, true, nil
}

// applyScoreOps applies the scale and mask ops, in graph order, to one block row of scores
// (batch b, query i, keys k0…).
func applyScoreOps(row []float32, ops []scoreOp, operands []bcastOperand, b, i, k0 int) {
	for _, op := range ops {
		switch op.kind {
		case '/':
			vec.DivScalar(row, op.c)
		case '*':
			vec.Scale(row, op.c)
		case '+':
			bo := &operands[op.input]
			off := bo.base[b] + i*bo.rs + k0*bo.cs
			if bo.cs == 1 {
				vec.Add(row, row, bo.t.F32[off:off+len(row)])
			} else {
				c := bo.t.F32[off]
				for j := range row {
					row[j] += c
				}
			}
		case 'w', 'W':
			bo := &operands[op.input]
			if bo.replace != nil {
				idx := bo.replace[b]
				lo, _ := slices.BinarySearch(idx, int32(k0))
				for _, j := range idx[lo:] {
					if int(j) >= k0+len(row) {
						break
					}
					row[int(j)-k0] = op.c
				}
				continue
			}
			off := bo.base[b] + i*bo.rs + k0*bo.cs
			keep := op.kind == 'w' // Where(cond, s, c) keeps s where cond holds
			for j := range row {
				if bo.t.Bool[off+j*bo.cs] != keep {
					row[j] = op.c
				}
			}
		}
	}
}

// Linear tiling: C (m×n) is cut along its larger dimension (see linearCuts), the last of
// several row tiles again by columns (linearTiles), into tiles that the threads claim as
// they go; each task reads its A rows in place and its columns of the
// pre-packed weights, and applies the epilogue to its tile while it is in cache. Tiles may
// start anywhere on these alignments because the packed SGEMM's result for an element does
// not depend on where tiles start (the k order is fixed by k alone; gemm.SgemmParallel
// relies on the same property), so results stay bitwise identical for any thread count.
const (
	// Tile heights are multiples of 4: every remainder of such a height modulo the AVX-512
	// kernel's 12 rows (0, 4 or 8) has a direct edge kernel, so no tile ends in a packed,
	// zero-padded panel, and m = 1024 splits 512 + 512 rather than 528 + 496 (a 3 % longer
	// critical path). Other levels handle any height; the height never changes results.
	linRowAlign   = 4
	linColAlign   = 64      // tile widths are multiples of every micro-kernel's NR
	linSplitFlops = 8 << 20 // products below this run on one thread (wake-up costs more)
	linSmallCols  = 64      // width of the tiles claimed after the first, big ones
	linSmallRows  = 48      // height of those tiles when the cut is by rows
	linColsRatio  = 4       // cut by columns only when n > linColsRatio·m
	// linTailTiles·threads column tiles share the last row tile. Interleaved A/B on the
	// vanilla base, 2 threads, against no tail split: 2 per thread ran b=1 n=128 4.2-4.4 %
	// faster (23/30 and 28/40 pairs) and b=8 n=128 1-5 %, n=512 unchanged; 4 per thread
	// gained 2.5 % more at b=1 n=128 but lost 1.4 % at b=8.
	linTailTiles = 2
)

// linearCuts splits an m×n×k product for threads threads and returns the axis and the tile
// boundaries along it: first one big tile per thread of half a fair share, then small tiles
// (linSmallRows rows or linSmallCols columns) that the threads claim as they finish. The
// cores of a shared VM do not run at the same speed (an SMT sibling's load can cost one of
// them a third), and with one fixed half per thread the fast one waits for the slow one;
// tiles cost nothing extra now that weights are pre-packed and A is read in place.
//
// The cut is by rows unless n > linColsRatio·m. Every column tile re-reads all of A
// through twelve strided row streams, and most of A was written by the other core; a row
// tile reads its own rows, often left in this core's L2 by the op before, and the packed
// weights as one prefetched stream that the two cores share through L3. Interleaved A/B on
// the vanilla encoder: rows for the square 512×512 products at n = 512 ran 1.05-1.09×
// faster, and for the 128×512 ones at n = 128 1.04-1.05×; the wide FFN input products
// (n = 4m) were no faster either way.
func linearCuts(m, n, k, threads int) (byCols bool, cuts []int) {
	if threads <= 1 || 2*m*n*max(k, 1) < linSplitFlops {
		if n > linColsRatio*m {
			return true, []int{0, n}
		}
		return false, []int{0, m}
	}
	l, align, small := m, linRowAlign, linSmallRows
	if n > linColsRatio*m {
		byCols, l, align, small = true, n, linColAlign, linSmallCols
	}
	big := l / threads / 2 / align * align
	cuts = []int{0}
	pos := 0
	if big > small {
		for t := 0; t < threads && pos+big < l; t++ {
			pos += big
			cuts = append(cuts, pos)
		}
	}
	for pos < l {
		pos = min(pos+small, l)
		cuts = append(cuts, pos)
	}
	return byCols, cuts
}

// linTile is a rectangle of a linear layer's output, rows [r0, r1) × columns [c0, c1); band
// numbers its row range among the tiles of one product (tiles of one band are adjacent).
type linTile struct {
	r0, r1, c0, c1 int
	band           int
}

// linearTiles returns the tiles of an m×n×k linear product for threads threads, in the
// order threads should claim them: linearCuts' tiles, with the last row tile, when there is
// more than one, cut again into linTailTiles·threads column tiles. Whoever finishes first
// otherwise waits for a whole row tile at the end: at m = 128 the rows cut 48 + 48 + 32, and
// two equal cores took 80 rows' time instead of 64. colsOK says whether column tiles may
// start at multiples of linColAlign (the packed weights' column granularity divides it);
// without it, no tile is cut by columns.
func linearTiles(m, n, k, threads int, colsOK bool) []linTile {
	byCols, cuts := linearCuts(m, n, k, threads)
	if byCols && !colsOK {
		cuts = []int{0, n}
	}
	var tiles []linTile
	if byCols {
		for i := 1; i < len(cuts); i++ {
			tiles = append(tiles, linTile{0, m, cuts[i-1], cuts[i], 0})
		}
		return tiles
	}
	for i := 1; i < len(cuts); i++ {
		tiles = append(tiles, linTile{cuts[i-1], cuts[i], 0, n, i - 1})
	}
	if len(tiles) > 1 && colsOK {
		last := tiles[len(tiles)-1]
		q := linTailTiles * threads
		w := ((n+q-1)/q + linColAlign - 1) / linColAlign * linColAlign
		if w < n {
			tiles = tiles[:len(tiles)-1]
			for c := 0; c < n; c += w {
				tiles = append(tiles, linTile{last.r0, last.r1, c, min(c+w, n), last.band})
			}
		}
	}
	return tiles
}

// linearSpec is a fused linear layer fixed at compile time: act(x·W + bias) [+ res], then
// LayerNorm over each row when ln is set, W (k×n) packed once as pw. bRank is the bias rank
// (the output must keep x's rank for the broadcast to be the plain row broadcast); bias may
// be nil, for a product with no bias and then no activation.
type linearSpec struct {
	pw    *gemm.PackedB
	bias  []float32
	bRank int
	act   activation
	ln    *lnEpilogue
	rank2 bool // x must be a matrix (the layer was a Gemm, which rejects other ranks)
}

// fits reports whether the fast path handles input x (and residual res, nil when the layer
// has none) at run time.
func (s *linearSpec) fits(x, res *tensor.Tensor) bool {
	if x == nil || x.DType != tensor.Float32 || len(x.Shape) < 2 || len(x.Shape) < s.bRank ||
		x.Shape[len(x.Shape)-1] != s.pw.K() || (s.rank2 && len(x.Shape) != 2) {
		return false
	}
	if res == nil {
		return true
	}
	shape := s.outShape(x)
	return res.DType == tensor.Float32 && tensor.SameShape(res.Shape, shape) && len(res.F32) == prod(shape)
}

// outShape is the shape of the layer's output for input x: x's with the last axis n wide.
func (s *linearSpec) outShape(x *tensor.Tensor) []int {
	return append(append([]int{}, x.Shape[:len(x.Shape)-1]...), s.pw.N())
}

// linearJob is one run of a linearSpec: its output buffer and the tiles threads claim. The
// output holds the product's columns [col0, col0+w), all of them (col0 0, w n) unless the
// job writes one column slice of the layer (see linearSplitFast).
type linearJob struct {
	spec    *linearSpec
	x, res  *tensor.Tensor
	out     *tensor.Tensor
	m       int
	col0, w int
	va      vec.Act
	tiles   []linTile // columns relative to col0
	// Per band of rows: tiles not yet finished, and whether one of them could not apply
	// the LayerNorm in its epilogue (its blocks lacked whole rows); the thread that
	// finishes a band's last tile then normalises the band, unless the band is deferred.
	left   []atomic.Int32
	lnLate []atomic.Bool
	// deferred marks the bands cut by columns that are taller than linInlineLNRows (all
	// rows of a column-cut product): normalised by every thread together in finish, as the
	// last tile's thread would otherwise do it alone while the others idle.
	deferred []bool
}

// linInlineLNRows is the height up to which a band cut by columns is normalised by the
// thread that finishes its last tile.
const linInlineLNRows = 64

// plan allocates the output of the layer on x (which must fit) and cuts it into tiles for
// e.threads threads.
func (s *linearSpec) plan(e *exec, x, res *tensor.Tensor) (*linearJob, error) {
	return s.planCols(e, x, res, 0, s.pw.N())
}

// planCols is plan for the product's columns [col0, col1) only, written as a matrix of
// their own; col0 must be a multiple of the packed weights' ColAlign, and a LayerNorm or a
// residual needs all columns.
func (s *linearSpec) planCols(e *exec, x, res *tensor.Tensor, col0, col1 int) (*linearJob, error) {
	shape := s.outShape(x)
	shape[len(shape)-1] = col1 - col0
	out, err := e.allocRaw(shape)
	if err != nil {
		return nil, err
	}
	k := s.pw.K()
	j := &linearJob{spec: s, x: x, res: res, out: out, m: prod(x.Shape[:len(x.Shape)-1]), col0: col0, w: col1 - col0}
	if j.m == 0 || j.w == 0 {
		return j, nil
	}
	switch s.act {
	case actRelu:
		j.va = vec.ActRelu
	case actGelu:
		j.va = vec.ActGelu
	}
	j.tiles = linearTiles(j.m, j.w, k, e.threads, linColAlign%s.pw.ColAlign() == 0)
	if s.ln != nil {
		bands := j.tiles[len(j.tiles)-1].band + 1
		j.left, j.lnLate, j.deferred = make([]atomic.Int32, bands), make([]atomic.Bool, bands), make([]bool, bands)
		for _, t := range j.tiles {
			if j.left[t.band].Add(1) > 1 && t.r1-t.r0 > linInlineLNRows {
				j.deferred[t.band] = true
			}
		}
	}
	return j, nil
}

// tile computes tile t of the product with its epilogue; tiles may run concurrently.
func (j *linearJob) tile(t int) {
	s, k, w := j.spec, j.spec.pw.K(), j.w
	tl := j.tiles[t]
	c := j.out.F32[tl.r0*w:]
	var epi gemm.Epilogue
	if s.bias != nil || j.res != nil || s.ln != nil {
		epi = func(i0, i1, j0, j1 int) {
			if !linearEpilogue(c, w, j.col0, tl.r0, i0, i1, j0, j1, s.bias, j.va, j.res, s.ln) {
				j.lnLate[tl.band].Store(true)
			}
		}
	}
	gemm.SgemmPackedEpilogueAt(tl.r1-tl.r0, j.col0+tl.c0, j.col0+tl.c1, 1, j.x.F32[tl.r0*k:], k, s.pw, 0, c[tl.c0:], w, epi)
	if s.ln != nil && j.left[tl.band].Add(-1) == 0 && j.lnLate[tl.band].Load() && !j.deferred[tl.band] {
		j.normalize(tl.r0, tl.r1)
	}
}

// normalize applies the LayerNorm to output rows [r0, r1).
func (j *linearJob) normalize(r0, r1 int) {
	n, ln := j.w, j.spec.ln
	for r := r0; r < r1; r++ {
		row := j.out.F32[r*n : (r+1)*n]
		vec.LayerNorm(row, row, ln.scale, ln.bias, ln.eps)
	}
}

// finish normalises the deferred bands that need it, on every thread, once all tiles are
// done, and returns the output.
func (j *linearJob) finish(e *exec) *tensor.Tensor {
	for i, t := range j.tiles {
		// once per deferred band that needs the pass, at its first tile
		if j.deferred == nil || !j.deferred[t.band] || !j.lnLate[t.band].Load() || (i > 0 && j.tiles[i-1].band == t.band) {
			continue
		}
		r0 := t.r0
		workpool.For(e.threads, t.r1-r0, max(1, elemGrain/(2*j.w)), func(lo, hi int) { j.normalize(r0+lo, r0+hi) })
	}
	return j.out
}

// linearFast runs the layer s on x (with residual res, or nil) with the epilogue fused into
// each GEMM tile. It returns ok false when the run-time shapes are outside the fast path.
func linearFast(e *exec, x *tensor.Tensor, s *linearSpec, res *tensor.Tensor) (*tensor.Tensor, bool, error) {
	if !s.fits(x, res) {
		return nil, false, nil
	}
	j, err := s.plan(e, x, res)
	if err != nil {
		return nil, true, err
	}
	return runLinearJobs(e, []*linearJob{j})[0], true, nil
}

// linearsFast runs several layers without residuals on the same input x (the Q, K and V
// projections of an attention block) as one parallel step whose tiles the threads claim
// across all the products. Separate steps would each end with one thread idle while the
// other finishes the last tile; one step has that tail once. It returns ok false when the
// run-time shapes are outside the fast path of any layer.
func linearsFast(e *exec, x *tensor.Tensor, specs []*linearSpec) ([]*tensor.Tensor, bool, error) {
	for _, s := range specs {
		if !s.fits(x, nil) {
			return nil, false, nil
		}
	}
	jobs := make([]*linearJob, len(specs))
	for i, s := range specs {
		j, err := s.plan(e, x, nil)
		if err != nil {
			return nil, true, err
		}
		jobs[i] = j
	}
	return runLinearJobs(e, jobs), true, nil
}

// runLinearJobs runs the jobs as one parallel step, the threads claiming tiles across all
// of them, and returns their outputs.
func runLinearJobs(e *exec, jobs []*linearJob) []*tensor.Tensor {
	first := make([]int, len(jobs)+1) // tile index where each job's tiles start
	for i, j := range jobs {
		first[i+1] = first[i] + len(j.tiles)
	}
	workpool.Tasks(e.threads, first[len(jobs)], func(t int) {
		i := 0
		for t >= first[i+1] {
			i++
		}
		jobs[i].tile(t - first[i])
	})
	outs := make([]*tensor.Tensor, len(jobs))
	for i, j := range jobs {
		outs[i] = j.finish(e)
	}
	return outs
}

// linearSplitFast runs the layer s (no residual, no LayerNorm) on x and returns the column
// ranges cols[i] = [lo, hi) of its output as separate tensors, as Slices of the output along
// its last axis would, without computing the output first: PyTorch's attention computes Q,
// K and V as one product and slices them apart. Every lo must be a multiple of the packed
// weights' ColAlign and the ranges must lie within the output; ok is false otherwise, or
// when x does not fit the layer.
func linearSplitFast(e *exec, x *tensor.Tensor, s *linearSpec, cols [][2]int) ([]*tensor.Tensor, bool, error) {
	if !s.fits(x, nil) || s.ln != nil {
		return nil, false, nil
	}
	al := s.pw.ColAlign()
	for _, c := range cols {
		if c[0] < 0 || c[1] < c[0] || c[1] > s.pw.N() || c[0]%al != 0 {
			return nil, false, nil
		}
	}
	jobs := make([]*linearJob, len(cols))
	for i, c := range cols {
		j, err := s.planCols(e, x, nil, c[0], c[1])
		if err != nil {
			return nil, true, err
		}
		jobs[i] = j
	}
	return runLinearJobs(e, jobs), true, nil
}

// linearEpilogue finishes rows [i0, i1) and product columns [j0, j1) of a linear tile whose
// first row is row r0 of the output (c addresses that row; the output has ldc columns, the
// product's columns from cOff): bias and activation, the residual, and LayerNorm when the
// block holds whole rows. It returns false when a LayerNorm is due but the block lacked
// whole rows, so the rows still need it.
func linearEpilogue(c []float32, ldc, cOff, r0, i0, i1, j0, j1 int, bias []float32, va vec.Act, res *tensor.Tensor, ln *lnEpilogue) bool {
	whole := j0 == cOff && j1-cOff == ldc
	for i := i0; i < i1; i++ {
		row := c[i*ldc+j0-cOff : i*ldc+j1-cOff]
		if bias != nil {
			vec.BiasAct(row, bias[j0:j1], va)
		}
		if res != nil {
			off := (r0+i)*ldc + j0 - cOff
			vec.Add(row, row, res.F32[off:off+len(row)])
		}
		// The row is final and whole: normalise it now (the same vec.LayerNorm, in place,
		// as the LayerNormalization kernel applies to the stored row).
		if ln != nil && whole {
			vec.LayerNorm(row, row, ln.scale, ln.bias, ln.eps)
		}
	}
	return ln == nil || whole
}

// permResidual is the fused step of matchPermutedResidual: out = Transpose(y, perm) + r,
// then the LayerNorm ln when set. perm keeps the last axis, so row q of out is a whole row
// of y; each row is added with vec.Add and normalised with vec.LayerNorm in place, the
// kernels the unfused Add and LayerNormalization use, so the result is bitwise theirs.
type permResidual struct {
	perm   []int
	tFirst bool // the transposed value is the Add's first operand
	ln     *lnEpilogue
}

// run is the fast path: ok is false when y and r are not float32, or r is not exactly the
// transposed shape (a broadcasting residual), or the LayerNorm's parameters do not match
// the row length; the original steps then run.
func (s *permResidual) run(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
	y, r := in[0], in[1]
	if y == nil || r == nil || y.DType != tensor.Float32 || r.DType != tensor.Float32 {
		return nil, false, nil
	}
	shape, ys, ok := permView(y.Shape, s.perm)
	if !ok {
		return nil, false, nil
	}
	rank, d := len(shape), shape[len(shape)-1]
	if !tensor.SameShape(shape, r.Shape) || len(r.F32) != len(y.F32) || (s.ln != nil && len(s.ln.scale) != d) {
		return nil, false, nil
	}
	out, err := e.allocRaw(shape)
	if err != nil || d == 0 || len(out.F32) == 0 {
		return out, err == nil, err
	}
	workpool.For(e.threads, len(out.F32)/d, max(1, elemGrain/(2*d)), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			off, rem := 0, q
			for i := rank - 2; i >= 0; i-- {
				off += rem % shape[i] * ys[i]
				rem /= shape[i]
			}
			dst, yr, rr := out.F32[q*d:(q+1)*d], y.F32[off:off+d], r.F32[q*d:(q+1)*d]
			if s.tFirst {
				vec.Add(dst, yr, rr)
			} else {
				vec.Add(dst, rr, yr)
			}
			if s.ln != nil {
				vec.LayerNorm(dst, dst, s.ln.scale, s.ln.bias, s.ln.eps)
			}
		}
	})
	return out, true, nil
}
