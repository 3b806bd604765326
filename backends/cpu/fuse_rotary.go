package cpu

import (
	"slices"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Rotary position embedding in the rotate-half layout (GPT-NeoX, Hugging Face's
// rotate_half, zoo's rope variant), whatever the node names and operand orders:
//
//	x1 = Slice(x, 0:h), x2 = Slice(x, h:2h)        on the last axis, 2h = its width
//	y  = x·cos + Concat(−x2, x1)·sin
//
// Unfused it is six passes over the (B, h, n, d) queries or keys and three temporaries of
// their size; fused it is one pass: y[i] = x[i]·cos[i] − x[i+h]·sin[i] for i < h and
// x[i]·cos[i] + x[i−h]·sin[i] after, each product and the sum rounded to float32 as the
// unfused steps round them, so the result is bitwise the same. cos and sin are (n, 2h)
// (or with leading axes of 1), n the second-to-last axis of x; any other shape, dtype or
// slice at run time runs the original steps.

// matchRotary matches the pattern at the Add step i.
func (f *fuser) matchRotary(i int) (group []int, st step, ok bool) {
	p := f.p
	add := p.plan.Steps[i]
	if len(add.In) != 2 || len(add.Out) != 1 {
		return nil, step{}, false
	}
	// Each operand of the Add is a Mul read only by it; one of them multiplies the
	// Concat, whose halves name x.
	muls := [2]int{}
	for j, s := range add.In {
		m := f.producer[s]
		if c, ok := f.single(s); !ok || c != i || m < 0 || f.dead[m] || p.plan.Steps[m].Node.Op != "Mul" || len(p.plan.Steps[m].In) != 2 {
			return nil, step{}, false
		}
		muls[j] = m
	}
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		direct, rot := muls[order[0]], muls[order[1]]
		for _, ro := range [][2]int{{0, 1}, {1, 0}} {
			cat, sin := p.plan.Steps[rot].In[ro[0]], p.plan.Steps[rot].In[ro[1]]
			x, steps, slices, ok := f.rotateHalf(cat, rot)
			if !ok {
				continue
			}
			var cos int
			switch x {
			case p.plan.Steps[direct].In[0]:
				cos = p.plan.Steps[direct].In[1]
			case p.plan.Steps[direct].In[1]:
				cos = p.plan.Steps[direct].In[0]
			default:
				continue
			}
			group = append(steps, direct, rot, i)
			// A head split's Transpose that only the rotation reads is read in place.
			src, perm := x, []int(nil)
			if tp := f.producer[x]; tp >= 0 && !f.dead[tp] && p.plan.Steps[tp].Node.Op == "Transpose" && len(p.plan.Steps[tp].In) == 1 &&
				p.plan.Steps[tp].In[0] >= 0 && transposePerm(p.plan.Steps[tp].Node) != nil && f.readOnlyBy(x, group) {
				src, perm = p.plan.Steps[tp].In[0], transposePerm(p.plan.Steps[tp].Node)
				group = append(group, tp)
			}
			// Inputs: x (or the Transpose's input), cos, sin, then the slices' starts, ends,
			// axes (and steps, where given) to check at run time, when the rank and width of
			// x are known.
			ext := []int{src, cos, sin}
			var args [2][4]int // per slice: the input index of each parameter, -1 for none
			for q := range args {
				for a := range args[q] {
					args[q][a] = -1
					if sl := slices[4*q+a]; sl >= 0 {
						args[q][a] = len(ext)
						ext = append(ext, sl)
					}
				}
			}
			axis := p.plan.Steps[f.producer[cat]].Node.Attrs["axis"].I
			return group, f.newFused("FusedRotary", group, ext, f.outOf(i), rotaryFast(args, axis, perm), nil), true
		}
	}
	return nil, step{}, false
}

// rotateHalf matches cat = Concat(Neg(Slice(x, h:2h)), Slice(x, 0:h)) read only by step
// reader, returning x, the matched steps and the two Slices' parameter slots (the second
// half's first, each as starts, ends, axes, steps with -1 for a missing steps input).
func (f *fuser) rotateHalf(cat, reader int) (x int, steps, params []int, ok bool) {
	p := f.p
	ci := f.producer[cat]
	if c, ok := f.single(cat); !ok || c != reader || ci < 0 || f.dead[ci] || p.plan.Steps[ci].Node.Op != "Concat" || len(p.plan.Steps[ci].In) != 2 {
		return -1, nil, nil, false
	}
	if _, ok := p.plan.Steps[ci].Node.Attrs["axis"]; !ok {
		return -1, nil, nil, false // the axis is checked to be the last one at run time
	}
	neg := f.producer[p.plan.Steps[ci].In[0]]
	if c, ok := f.single(p.plan.Steps[ci].In[0]); !ok || c != ci || neg < 0 || f.dead[neg] || p.plan.Steps[neg].Node.Op != "Neg" {
		return -1, nil, nil, false
	}
	x = -1
	for _, s := range []int{p.plan.Steps[neg].In[0], p.plan.Steps[ci].In[1]} {
		sl := f.producer[s]
		if c, ok := f.single(s); !ok || (c != neg && c != ci) || sl < 0 || f.dead[sl] || p.plan.Steps[sl].Node.Op != "Slice" {
			return -1, nil, nil, false
		}
		in := p.plan.Steps[sl].In
		if len(in) < 4 || len(in) > 5 || (x >= 0 && in[0] != x) {
			return -1, nil, nil, false
		}
		for _, a := range in[1:] {
			if a >= 0 && p.plan.Kinds[a] != slotConst {
				return -1, nil, nil, false
			}
		}
		x = in[0]
		steps = append(steps, sl)
		params = append(params, in[1], in[2], in[3])
		if len(in) == 5 {
			params = append(params, in[4])
		} else {
			params = append(params, -1)
		}
	}
	return x, append(steps, neg, ci), params, true
}

// rotaryFast is the fused kernel; it declines unless the slices take the two halves of the
// last axis and x, cos and sin are float32 of the shapes described above.
func rotaryFast(args [2][4]int, axis int64, perm []int) fastKernel {
	return func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		x, cos, sin := in[0], in[1], in[2]
		if x == nil || cos == nil || sin == nil || x.DType != tensor.Float32 || cos.DType != tensor.Float32 || sin.DType != tensor.Float32 {
			return nil, false, nil
		}
		shape, st, ok := permView(x.Shape, perm)
		r := len(shape)
		if !ok || r < 2 || st[r-1] != 1 || len(cos.Shape) > r || !tensor.SameShape(cos.Shape, sin.Shape) || (axis != -1 && axis != int64(r-1)) {
			return nil, false, nil
		}
		d, n := shape[r-1], shape[r-2]
		if d == 0 || d%2 != 0 {
			return nil, false, nil
		}
		h := d / 2
		sliceArgs := func(q int) []*tensor.Tensor {
			t := make([]*tensor.Tensor, 4)
			for a, j := range args[q] {
				if j >= 0 {
					t[a] = in[j]
				}
			}
			return t
		}
		hiLo, hiHi, ok1 := lastAxisSlice(sliceArgs(0), r, d)
		loLo, loHi, ok2 := lastAxisSlice(sliceArgs(1), r, d)
		if !ok1 || !ok2 || hiLo != h || hiHi != d || loLo != 0 || loHi != h {
			return nil, false, nil
		}
		// cos and sin: (…1, n, d) or (…1, d) with the leading axes all 1.
		cs := cos.Shape
		lead := len(cs) - 2
		perPos := true
		switch {
		case len(cs) >= 2 && cs[len(cs)-1] == d && cs[len(cs)-2] == n:
		case len(cs) >= 1 && cs[len(cs)-1] == d && (len(cs) == 1 || cs[len(cs)-2] == 1):
			perPos, lead = false, len(cs)-1
		default:
			return nil, false, nil
		}
		for _, v := range cs[:max(lead, 0)] {
			if v != 1 {
				return nil, false, nil
			}
		}
		out, err := e.allocRaw(shape)
		if err != nil {
			return nil, false, err
		}
		rows := len(x.F32) / d
		workpool.For(e.threads, rows, max(1, elemGrain/d), func(lo, hi int) {
			idx := make([]int, r-1) // row lo's index over shape[:r-1]
			for a, rem := r-2, lo; a >= 0; a-- {
				idx[a], rem = rem%shape[a], rem/shape[a]
			}
			for row := lo; row < hi; row++ {
				so := 0
				for a, v := range idx {
					so += v * st[a]
				}
				c, s := cos.F32[:d], sin.F32[:d]
				if perPos {
					t := idx[r-2]
					c, s = cos.F32[t*d:(t+1)*d], sin.F32[t*d:(t+1)*d]
				}
				vec.RotateHalf(out.F32[row*d:(row+1)*d], x.F32[so:so+d], c, s)
				for a := r - 2; a >= 0; a-- {
					if idx[a]++; idx[a] < shape[a] {
						break
					}
					idx[a] = 0
				}
			}
		})
		return out, true, nil
	}
}

// readOnlyBy reports whether every reader of the run-time slot s is one of the steps in
// group (and s is not an output).
func (f *fuser) readOnlyBy(s int, group []int) bool {
	if s < 0 || f.p.plan.Kinds[s] != slotNode || f.uses[s] != len(f.consumer[s]) {
		return false
	}
	for _, c := range f.consumer[s] {
		if !slices.Contains(group, c) {
			return false
		}
	}
	return true
}
