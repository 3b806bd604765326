package cpu

import (
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Sliding windows of key blocks read in place. Block-sparse attention (variants/sparse, and
// any graph that gathers each query block's neighbouring key blocks the same way) builds the
// keys of query block q as the blocks q … q + W − 1 of a padded copy X (…, N, b, dk) of K:
// Concat along axis a + 1 of W Slices X[t : t + L] along axis a, t = 0 … W − 1, all of the
// same length L = N − W + 1. Element (…, q, t·b + r, …) of that Concat is X[…, q + t, r, …],
// and because X is contiguous that is X's element at offset q·stride_a + (t·b + r)·stride_a+1
// with stride_a = b·stride_a+1: the Concat is an (overlapping) strided view of X with shape
// (…, L, W·b, …) and X's own strides. The fused attention step reads Kᵀ and V through that
// view, so the W-fold copies of K and V (three at the default window) are never made, and
// the score product, the bias, the softmax and the product with V run as one step per
// block (the scores pass through a one-input Concat when the pattern has no other key set,
// which walkScores steps over).

// window is a sliding-window view of a fused attention source: Concat (axis+1) of the
// Slices X[t : t+L] along axis, t = 0 … w−1; input is the fused step's input holding L.
type window struct {
	axis, w, input int
}

// matchWindows recognises slot s, read once, as the Concat of a sliding window over X
// (see window), returning X, the window (input not yet set), the slot holding L and the
// Concat's and Slices' steps. Slices' ends must be Add(t, L) (either order) of one L slot,
// or L itself for t = 0; their steps must be absent or 1.
func (f *fuser) matchWindows(s int) (x int, win *window, lslot int, steps []int, ok bool) {
	if _, single := f.single(s); !single {
		return -1, nil, -1, nil, false
	}
	cat, ci, ok := f.prod(s)
	if !ok || cat.Node.Op != "Concat" || len(cat.In) < 1 {
		return -1, nil, -1, nil, false
	}
	caxis := int(cat.Node.Int("axis", 0))
	saxis := caxis - 1
	if caxis == 0 {
		return -1, nil, -1, nil, false
	}
	steps = []int{ci}
	x, lslot = -1, -1
	for t, in := range cat.In {
		if _, single := f.single(in); !single {
			return -1, nil, -1, nil, false
		}
		sl, si, ok := f.prod(in)
		if !ok || sl.Node.Op != "Slice" || len(sl.In) < 4 || len(sl.In) > 5 {
			return -1, nil, -1, nil, false
		}
		if x == -1 {
			x = sl.In[0]
		}
		if sl.In[0] != x || !f.runtime(x) || !f.intConst(sl.In[1], int64(t)) || !f.intConst(sl.In[3], int64(saxis)) {
			return -1, nil, -1, nil, false
		}
		if len(sl.In) == 5 && sl.In[4] >= 0 && !f.intConst(sl.In[4], 1) {
			return -1, nil, -1, nil, false
		}
		l, as := f.windowLength(sl.In[2], int64(t))
		if l < 0 || (lslot >= 0 && l != lslot) {
			return -1, nil, -1, nil, false
		}
		lslot = l
		steps = append(append(steps, si), as...)
	}
	return x, &window{axis: saxis, w: len(cat.In)}, lslot, steps, true
}

// windowLength returns the slot L of a Slice end that is Add(t, L) or Add(L, t) with t the
// int64 constant start (or L itself when t is 0), and the Add's step when it has no other
// reader; -1 when the end is neither.
func (f *fuser) windowLength(end int, t int64) (int, []int) {
	if add, ai, ok := f.prod(end); ok && add.Node.Op == "Add" && len(add.In) == 2 {
		for j := 0; j < 2; j++ {
			if f.intConst(add.In[j], t) && f.runtime(add.In[1-j]) {
				if _, single := f.single(end); single {
					return add.In[1-j], []int{ai}
				}
				return add.In[1-j], nil
			}
		}
	}
	if t == 0 && f.runtime(end) {
		return end, nil
	}
	return -1, nil
}

// srcView returns the logical shape and element strides of a fused attention source t read
// through its sliding window (win, nil for none) and then Transpose(perm) (nil for none);
// ok is false when the window does not fit t (its L, in in[win.input], longer than the axis
// allows) or perm is not a permutation.
func srcView(t *tensor.Tensor, perm []int, win *window, in []*tensor.Tensor) (shape, stride []int, ok bool) {
	shape, stride, _ = permView(t.Shape, nil)
	if win != nil {
		r := len(shape)
		a := win.axis
		if a < 0 {
			a += r
		}
		lt := in[win.input]
		if a < 0 || a+1 >= r || lt == nil || lt.DType != tensor.Int64 || len(lt.I64) != 1 {
			return nil, nil, false
		}
		l := lt.I64[0]
		if l < 1 || l+int64(win.w)-1 > int64(shape[a]) {
			return nil, nil, false
		}
		ws := append(append(append([]int{}, shape[:a]...), int(l), win.w*shape[a+1]), shape[a+2:]...)
		wst := append(append(append([]int{}, stride[:a]...), stride[a], stride[a+1]), stride[a+2:]...)
		shape, stride = ws, wst
	}
	if perm == nil {
		return shape, stride, true
	}
	r := len(shape)
	if len(perm) != r {
		return nil, nil, false
	}
	seen := make([]bool, r)
	ls, lst := make([]int, r), make([]int, r)
	for i, a := range perm {
		if a < 0 || a >= r || seen[a] {
			return nil, nil, false
		}
		seen[a] = true
		ls[i], lst[i] = shape[a], stride[a]
	}
	return ls, lst, true
}
