package cpu

import (
	"github.com/zoo-dev/zoo/zoo/graph"
)

// Grouped-query attention (the gqa variant) folds the r query heads that share a key/value
// head into the rows of one matrix: Q (B, n, kv·r·d) is reshaped to (B, n, kv, r, d),
// transposed to (B, kv, r, n, d) and reshaped to (B, kv, r·n, d), and the output goes back
// the same way. Each of those Transposes was a copy of the whole tensor (two a layer, 5 %
// of an int8-attention run at batch 8, n 512). The fused kernel instead reads Q and writes
// its output in place through the merged pair of axes: row i of a matrix lies at
// (i / seg)·outer + (i mod seg)·ld, seg being the inner axis's length, and no block of rows
// straddles two segments, so each block is an ordinary strided one.

// rowReshape is a Reshape around attention that merges the two axes before Q's last into
// its rows, or splits the output's rows into two axes: its constant target shape.
type rowReshape struct {
	target    []int64
	allowZero bool
}

// attnSplit holds the row reshapes of one fused attention step; nil ones are absent.
type attnSplit struct{ q, out *rowReshape }

// row returns the offset of row i of matrix b.
func (s strided) row(b, i int) int {
	if s.seg == 0 {
		return s.off[b] + i*s.ld
	}
	return s.off[b] + (i/s.seg)*s.outer + (i%s.seg)*s.ld
}

// segRows returns how many of the rows from i on lie in i's segment (all when there are no
// segments).
func (s strided) segRows(i, rows int) int {
	if s.seg == 0 {
		return rows
	}
	return min(rows, s.seg-i%s.seg)
}

// mergeRows resolves Q's merging Reshape rr against the view shape and stride (rank r+1,
// (batch…, a, seg, d)): it returns the merged view (batch…, a·seg, d), its stride with the
// inner axis's as the rows' stride, and the outer axis's stride and seg; ok is false unless
// rr merges exactly those two axes.
func mergeRows(rr *rowReshape, shape, stride []int) (mshape, mstride []int, outer, seg int, ok bool) {
	r := len(shape) - 1
	if r < 2 {
		return nil, nil, 0, 0, false
	}
	dims, err := graph.ReshapeDims(shape, rr.target, rr.allowZero)
	if err != nil || len(dims) != r {
		return nil, nil, 0, 0, false
	}
	mshape = append(append([]int(nil), shape[:r-2]...), shape[r-2]*shape[r-1], shape[r])
	for i := range dims {
		if dims[i] != mshape[i] {
			return nil, nil, 0, 0, false
		}
	}
	mstride = append(append([]int(nil), stride[:r-2]...), stride[r-1], stride[r])
	return mshape, mstride, stride[r-2], shape[r-1], true
}

// splitRows resolves the output's splitting Reshape rr against the logical output shape
// (batch…, nq, dv): it returns the split shape (batch…, a, seg, dv); ok is false unless rr
// splits exactly the rows.
func splitRows(rr *rowReshape, logical []int) (split []int, ok bool) {
	r := len(logical)
	dims, err := graph.ReshapeDims(logical, rr.target, rr.allowZero)
	if err != nil || len(dims) != r+1 || dims[r] != logical[r-1] || dims[r-2]*dims[r-1] != logical[r-2] || dims[r-1] == 0 {
		return nil, false
	}
	for i := 0; i < r-2; i++ {
		if dims[i] != logical[i] {
			return nil, false
		}
	}
	return dims, true
}
