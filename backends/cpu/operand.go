package cpu

import (
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// bcastOperand is a mask (or Where condition) broadcast to the score shape: element
// (b, i, j) is at base[b] + i·rs + j·cs.
type bcastOperand struct {
	t      *tensor.Tensor
	base   []int
	rs, cs int
	// replace, for a Where condition that does not vary along the query axis (rs == 0, the
	// key-padding mask), lists per batch matrix the runs of keys whose score the Where
	// replaces, as [start, end) pairs in increasing order; nil otherwise. Rows then fill
	// those runs, usually none or one (a padded tail), instead of testing every condition
	// element of every row.
	replace [][]int32
	// fill holds the Where's constant as many times as the longest run, copied into the
	// runs (a vector copy, where storing the constant key by key cost as much as the exp).
	fill []float32
	// rel, for a relative-position bias (score op 'r'), is per matrix the bias at every
	// distance j − i, at index j − i + rs (fuse_relbias.go).
	rel [][]float32
	// zero, for an added bias that does not vary along the query axis (rs == 0, the additive
	// key-padding mask), says per batch matrix whether the bias of every key is zero; nil
	// otherwise.
	zero []bool
}

// planZero fills bo.zero for an added bias (score op '+'). A batch with no padding then skips
// the add, which read and wrote every score of every head (4.5 % of an int8-attention run of
// vanilla base): x + 0 is x for every score but −0, and the softmax does not tell −0 from +0.
func (bo *bcastOperand) planZero(nk int) {
	if bo.rs != 0 {
		return
	}
	bo.zero = make([]bool, len(bo.base))
	for b, base := range bo.base {
		if b > 0 && base == bo.base[b-1] {
			bo.zero[b] = bo.zero[b-1] // broadcast over heads: same bias row
			continue
		}
		z := true
		for j := 0; j < nk && z; j++ {
			z = bo.t.F32[base+j*bo.cs] == 0
		}
		bo.zero[b] = z
	}
}

// planReplace fills bo.replace and bo.fill for a Where op of kind 'w' (keep where the
// condition holds) or 'W' (keep where it does not) with constant c, when the condition is
// the same for every query row.
func (bo *bcastOperand) planReplace(kind byte, c float32, nk int) {
	if bo.rs != 0 {
		return
	}
	keep := kind == 'w'
	longest := 0
	bo.replace = make([][]int32, len(bo.base))
	for b, base := range bo.base {
		if b > 0 && base == bo.base[b-1] {
			bo.replace[b] = bo.replace[b-1] // broadcast over heads: same condition row
			continue
		}
		var runs []int32
		for j := 0; j < nk; j++ {
			if bo.t.Bool[base+j*bo.cs] == keep {
				continue
			}
			if l := len(runs); l > 0 && runs[l-1] == int32(j) {
				runs[l-1]++ // the run goes on
			} else {
				runs = append(runs, int32(j), int32(j+1))
			}
		}
		bo.replace[b] = runs
		for r := 0; r < len(runs); r += 2 {
			longest = max(longest, int(runs[r+1]-runs[r]))
		}
	}
	bo.fill = slices.Repeat([]float32{c}, longest)
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
	nb := graph.NumElements(batch)
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
// is 1). Rows that are two merged axes (attention_rows.go) come in segments of seg rows,
// outer apart; seg 0 means one segment.
type strided struct {
	off        []int
	ld, cs     int
	seg, outer int
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
	nb := graph.NumElements(batch)
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
