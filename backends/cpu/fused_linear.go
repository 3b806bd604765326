package cpu

import (
	"sync"
	"sync/atomic"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

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
	// inKernel: pw's int8 kernels add the bias and apply the activation themselves
	// (gemm's SetInt8Epilogue), so the block epilogue leaves both out.
	inKernel bool
}

// epilogueInKernel moves the bias, and a ReLU, of an int8 layer into its micro-kernels'
// store of each tile (gemm's SetInt8Epilogue), with the values of the pass over the
// finished block it replaces; other layers keep the pass.
func (s *linearSpec) epilogueInKernel() {
	if s.pw.Int8() && s.bias != nil && (s.act == actNone || s.act == actRelu) {
		s.inKernel = s.pw.SetInt8Epilogue(s.bias, s.act == actRelu) == nil
	}
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
	return res.DType == tensor.Float32 && tensor.SameShape(res.Shape, shape) && len(res.F32) == graph.NumElements(shape)
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
	// rows holds x quantized once for int8 weights when tiles would otherwise quantize the
	// same rows again (shareInt8Rows); nil: each tile quantizes its own rows.
	rows *gemm.Int8Rows
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
	j := &linearJob{spec: s, x: x, res: res, out: out, m: graph.NumElements(x.Shape[:len(x.Shape)-1]), col0: col0, w: col1 - col0}
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
	epi := j.epilogue(c, tl.r0, tl.band)
	if j.rows != nil {
		gemm.SgemmInt8RowsAt(j.rows, tl.r0, tl.r1-tl.r0, j.col0+tl.c0, j.col0+tl.c1, s.pw, 0, c[tl.c0:], w, epi)
	} else {
		gemm.SgemmPackedEpilogueAt(tl.r1-tl.r0, j.col0+tl.c0, j.col0+tl.c1, 1, j.x.F32[tl.r0*k:], k, s.pw, 0, c[tl.c0:], w, epi)
	}
	if s.ln != nil && j.left[tl.band].Add(-1) == 0 && j.lnLate[tl.band].Load() && !j.deferred[tl.band] {
		j.normalize(tl.r0, tl.r1)
	}
}

// epilogue returns the block epilogue of the output rows from r0 (c addresses row r0), in
// row band band, or nil when the layer has none left to do outside its kernels.
func (j *linearJob) epilogue(c []float32, r0, band int) gemm.Epilogue {
	s := j.spec
	bias, va := s.bias, j.va
	if s.inKernel {
		bias, va = nil, vec.ActNone
	}
	if bias == nil && j.res == nil && s.ln == nil {
		return nil
	}
	return func(i0, i1, j0, j1 int) {
		if !linearEpilogue(c, j.w, j.col0, r0, i0, i1, j0, j1, bias, va, j.res, s.ln) {
			j.lnLate[band].Store(true)
		}
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
	if !runInt8Siblings(e, jobs) {
		if release := shareInt8Rows(e, jobs); release != nil {
			defer release()
		}
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
	}
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

// runInt8Siblings runs int8 jobs on one input (the Q, K and V projections, or the column
// ranges of PyTorch's single QKV product) by bands of rows, each band a task for all the
// jobs: it quantizes the band a block at a time (Int8RowBlock rows, into L2) and runs every
// job's product on the block before the next. Each row is quantized once, as with
// shareInt8Rows, but in cache and beside the products, where shareInt8Rows streams the
// whole input from memory in a pass of its own and the products read the quantized rows
// back from L3. The results are bitwise the same. It reports false, running nothing, when
// the jobs are not such siblings (another input, int8 form or k, a residual or a
// LayerNorm) or when their product is so wide for its rows that it is cut by columns
// (linearCuts), which shareInt8Rows serves.
func runInt8Siblings(e *exec, jobs []*linearJob) bool {
	j0 := jobs[0]
	if len(jobs) < 2 || !j0.spec.pw.Int8() || j0.m == 0 || j0.rows != nil {
		return false
	}
	k, n := j0.spec.pw.K(), 0
	for _, j := range jobs {
		if j.x != j0.x || !j.spec.pw.Int8SameForm(j0.spec.pw) || j.spec.pw.K() != k || j.spec.ln != nil || j.res != nil {
			return false
		}
		n += j.w
	}
	byCols, cuts := linearCuts(j0.m, n, k, e.threads)
	if byCols {
		return false
	}
	blk := j0.spec.pw.Int8RowBlock()
	workpool.Tasks(e.threads, len(cuts)-1, func(t int) {
		rows := int8RowSets.Get().(*gemm.Int8Rows)
		defer int8RowSets.Put(rows)
		rows.Prepare(j0.spec.pw, blk, 1)
		for r0 := cuts[t]; r0 < cuts[t+1]; r0 += blk {
			h := min(blk, cuts[t+1]-r0)
			rows.QuantizeRange(0, h, j0.x.F32[r0*k:], k)
			for _, j := range jobs {
				c := j.out.F32[r0*j.w:]
				gemm.SgemmInt8RowsAt(rows, 0, h, j.col0, j.col0+j.w, j.spec.pw, 0, c, j.w, j.epilogue(c, r0, 0))
			}
		}
	})
	return true
}

// int8RowSets recycles the quantized inputs of shareInt8Rows and runInt8Siblings.
var int8RowSets = sync.Pool{New: func() any { return new(gemm.Int8Rows) }}

// int8QuantRows is the number of rows one task of shareInt8Rows quantizes.
const int8QuantRows = 64

// shareInt8Rows quantizes the input of int8 jobs once, in parallel, when their tiles would
// quantize rows more than once: a product cut by columns (a few tokens by a wide layer),
// alone or with siblings on the same input (runInt8Siblings takes those cut by rows), where
// every column tile would quantize all the rows again; 128 rows of 512 cost as much as a
// 64-column tile's product.
// A product cut by rows quantizes each tile's rows as it goes, in cache, even when its last
// band is cut by columns (linearTiles' tail: at most linSmallRows rows quantized again per
// tile): the shared pass streams the whole input from memory while no product runs, and the
// products then read the quantized rows back from L3. m 4096 (b8 n512), int8 on 2 threads,
// shared pass against none, interleaved: k 512 n 512 with LayerNorm 1.06× faster without
// it on vnni512 and 1.19× on amx-int8, k 2048 n 512 1.13× and 1.28×, k 512 n 2048 with
// ReLU 1.03× and 1.07×. It returns the function that gives the buffers back, or nil when
// nothing is shared.
func shareInt8Rows(e *exec, jobs []*linearJob) (release func()) {
	j0 := jobs[0]
	if !j0.spec.pw.Int8() || j0.m == 0 || j0.rows != nil { // rows given: already quantized
		return nil
	}
	covered := 0
	for _, j := range jobs {
		if j.x != j0.x || !j.spec.pw.Int8SameForm(j0.spec.pw) || j.spec.pw.K() != j0.spec.pw.K() {
			return nil
		}
		for _, t := range j.tiles {
			covered += t.r1 - t.r0
		}
	}
	if covered <= j0.m || (len(jobs) == 1 && covered < 2*j0.m) {
		return nil
	}
	r := int8RowSets.Get().(*gemm.Int8Rows)
	r.Prepare(j0.spec.pw, j0.m, 1)
	k := j0.spec.pw.K()
	tasks := (j0.m + int8QuantRows - 1) / int8QuantRows
	workpool.Tasks(e.threads, tasks, func(t int) {
		r.QuantizeRange(t*int8QuantRows, min((t+1)*int8QuantRows, j0.m), j0.x.F32, k)
	})
	for _, j := range jobs {
		j.rows = r
	}
	return func() { int8RowSets.Put(r) }
}
