package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// bcast describes an N-ary strided loop: the (collapsed) output shape and, for each input,
// its starting element and its element strides along the collapsed output dimensions (0 on
// broadcast dimensions). The last collapsed dimension is the inner loop.
type bcast struct {
	dims    []int
	base    []int
	strides [][]int
	total   int
}

// newBcast plans a broadcast of the given input shapes to out (which must be their broadcast
// or a shape every input broadcasts to unidirectionally).
func newBcast(out []int, ins ...[]int) *bcast {
	rank := len(out)
	strides := make([][]int, len(ins))
	for k, s := range ins {
		st := make([]int, rank)
		off := rank - len(s)
		acc := 1
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] != 1 || out[off+i] == 1 {
				st[off+i] = acc
			}
			acc *= s[i]
		}
		strides[k] = st
	}
	return newStrided(out, nil, strides)
}

// newStrided plans a loop over shape out where input k starts at element base[k] (0 when base
// is nil) and moves by strides[k][d] along output dimension d (strides may be 0 or negative).
func newStrided(out []int, base []int, strides [][]int) *bcast {
	rank := len(out)
	n := len(strides)
	if base == nil {
		base = make([]int, n)
	}
	// Collapse adjacent dimensions that every input walks as one (contiguously, or not at all).
	dims := []int{}
	cs := make([][]int, n)
	for i := 0; i < rank; i++ {
		if out[i] == 1 {
			continue // size-1 dimensions contribute nothing
		}
		if len(dims) > 0 {
			last := len(dims) - 1
			ok := true
			for k := 0; k < n; k++ {
				if cs[k][last] != strides[k][i]*out[i] {
					ok = false
					break
				}
			}
			if ok {
				dims[last] *= out[i]
				for k := 0; k < n; k++ {
					cs[k][last] = strides[k][i]
				}
				continue
			}
		}
		dims = append(dims, out[i])
		for k := 0; k < n; k++ {
			cs[k] = append(cs[k], strides[k][i])
		}
	}
	if len(dims) == 0 {
		dims = []int{1}
		for k := 0; k < n; k++ {
			cs[k] = []int{0}
		}
	}
	return &bcast{dims: dims, base: base, strides: cs, total: tensor.NumElements(out)}
}

// inner returns the length of the inner loop.
func (b *bcast) inner() int { return b.dims[len(b.dims)-1] }

// rows returns the number of inner-loop rows.
func (b *bcast) rows() int {
	if b.inner() == 0 {
		return 0
	}
	return b.total / b.inner()
}

// innerStride returns input k's stride along the inner loop.
func (b *bcast) innerStride(k int) int { return b.strides[k][len(b.dims)-1] }

// forRows calls fn for rows [lo, hi) with the output offset of each row and the offsets of
// every input at that row (the offs slice is reused between calls).
func (b *bcast) forRows(lo, hi int, fn func(outOff int, offs []int)) {
	nd := len(b.dims) - 1
	idx := make([]int, nd)
	offs := make([]int, len(b.strides))
	// decompose lo into a multi-index over the outer dimensions
	r := lo
	for d := nd - 1; d >= 0; d-- {
		idx[d] = r % b.dims[d]
		r /= b.dims[d]
	}
	for k := range offs {
		o := b.base[k]
		for d := 0; d < nd; d++ {
			o += idx[d] * b.strides[k][d]
		}
		offs[k] = o
	}
	in := b.inner()
	for row := lo; row < hi; row++ {
		fn(row*in, offs)
		for d := nd - 1; d >= 0; d-- {
			idx[d]++
			for k := range offs {
				offs[k] += b.strides[k][d]
			}
			if idx[d] < b.dims[d] {
				break
			}
			for k := range offs {
				offs[k] -= b.strides[k][d] * b.dims[d]
			}
			idx[d] = 0
		}
	}
}

// run executes fn over all rows, in parallel when the work is large.
func (b *bcast) run(threads int, fn func(outOff int, offs []int)) {
	rows := b.rows()
	grain := 1
	if in := b.inner(); in > 0 && in < elemGrain { // an empty inner extent has nothing to split
		grain = (elemGrain + in - 1) / in
	}
	workpool.For(threads, rows, grain, func(lo, hi int) { b.forRows(lo, hi, fn) })
}

// elemGrain is the least number of elements worth handing to another thread.
const elemGrain = 1 << 14

// binaryMap applies f elementwise over broadcast inputs a and b into out.
func binaryMap[A, B, O any](threads int, out []O, outShape []int, a []A, aShape []int, b []B, bShape []int, f func(A, B) O) {
	binaryMapRows(threads, out, outShape, a, aShape, b, bShape, f, nil)
}

// binaryMapRows is binaryMap whose rows go to row first, when it is not nil: with the row's
// output, a and b from the row's first elements and their inner strides (0 or 1 when it is
// asked). A row it reports done is not computed again.
func binaryMapRows[A, B, O any](threads int, out []O, outShape []int, a []A, aShape []int, b []B, bShape []int, f func(A, B) O, row func(dst []O, a []A, sa int, b []B, sb int) bool) {
	bc := newBcast(outShape, aShape, bShape)
	in := bc.inner()
	sa, sb := bc.innerStride(0), bc.innerStride(1)
	if sa > 1 || sb > 1 || sa < 0 || sb < 0 {
		row = nil
	}
	bc.run(threads, func(o int, offs []int) {
		dst := out[o : o+in]
		ia, ib := offs[0], offs[1]
		if row != nil && row(dst, a[ia:], sa, b[ib:], sb) {
			return
		}
		switch {
		case sa == 1 && sb == 1:
			av, bv := a[ia:ia+in], b[ib:ib+in]
			for i := range dst {
				dst[i] = f(av[i], bv[i])
			}
		case sa == 1 && sb == 0:
			av, bv := a[ia:ia+in], b[ib]
			for i := range dst {
				dst[i] = f(av[i], bv)
			}
		case sa == 0 && sb == 1:
			av, bv := a[ia], b[ib:ib+in]
			for i := range dst {
				dst[i] = f(av, bv[i])
			}
		default:
			for i := range dst {
				dst[i] = f(a[ia+i*sa], b[ib+i*sb])
			}
		}
	})
}

// unaryMap applies f elementwise from in to out (same length).
func unaryMap[A, O any](threads int, out []O, in []A, f func(A) O) {
	workpool.For(threads, len(in), elemGrain, func(lo, hi int) {
		src, dst := in[lo:hi], out[lo:hi]
		for i, v := range src {
			dst[i] = f(v)
		}
	})
}

// expandInto copies src (shape srcShape) broadcast to outShape into out.
func expandInto[T any](threads int, out []T, outShape []int, src []T, srcShape []int) {
	bc := newBcast(outShape, srcShape)
	in := bc.inner()
	s := bc.innerStride(0)
	bc.run(threads, func(o int, offs []int) {
		dst := out[o : o+in]
		if s == 1 {
			copy(dst, src[offs[0]:offs[0]+in])
			return
		}
		v := src[offs[0]]
		for i := range dst {
			dst[i] = v
		}
	})
}

// stridedCopy fills out (shape outShape, row-major) from src, where the output element at
// multi-index i comes from src[base + Σ i[d]·strides[d]].
func stridedCopy[T any](threads int, out []T, outShape []int, src []T, base int, strides []int) {
	bc := newStrided(outShape, []int{base}, [][]int{strides})
	in := bc.inner()
	s := bc.innerStride(0)
	bc.run(threads, func(o int, offs []int) {
		dst := out[o : o+in]
		j := offs[0]
		if s == 1 {
			copy(dst, src[j:j+in])
			return
		}
		for i := range dst {
			dst[i] = src[j]
			j += s
		}
	})
}
