package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ONNX shape semantics on concrete shapes. These are the one statement of broadcasting, axis
// normalisation, Reshape's 0 and -1, Squeeze/Unsqueeze and Slice bounds that shape inference,
// the reference evaluator and every backend call, so that they cannot drift apart. They
// never panic; bad input gives an error that quotes the shapes involved.

// NumElements returns the product of shape (1 for a scalar). It returns -1 when a dimension
// is negative or the product overflows int.
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt/d {
			return -1
		}
		n *= d
	}
	return n
}

// BroadcastShapes returns the numpy multidirectional broadcast of shapes (ONNX Add, Where,
// Max, Expand, ...): shapes are aligned at their last axis, a missing leading axis counts
// as 1, and at each position all sizes must agree except those that are 1. No shapes, or only
// scalars, give a scalar (an empty, non-nil shape). It returns an error naming the shapes and
// the axis (counted from the end, -1 is the last) when two sizes differ and neither is 1, or
// when a size is negative.
func BroadcastShapes(shapes ...[]int) ([]int, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			o := out[off+i]
			switch {
			case d < 0:
				return nil, fmt.Errorf("shape %s has a negative dimension", tensor.ShapeString(s))
			case d == o || d == 1:
			case o == 1:
				out[off+i] = d
			default:
				return nil, fmt.Errorf("shapes %s cannot be broadcast together (axis %d: %d vs %d)", shapeList(shapes), off+i-rank, o, d)
			}
		}
	}
	return out, nil
}

func shapeList(shapes [][]int) string {
	s := ""
	for i, sh := range shapes {
		if i > 0 {
			s += " and "
		}
		s += tensor.ShapeString(sh)
	}
	return s
}

// NormAxis maps an ONNX axis, which may count from the end (-1 is the last), into [0, rank).
// It returns an error when axis is outside [-rank, rank); a scalar (rank 0) has no axes.
func NormAxis(axis int64, rank int) (int, error) {
	r := int64(rank)
	if axis < -r || axis >= r {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += r
	}
	return int(axis), nil
}

// NormAxes normalises each of axes with NormAxis and returns them in the order given. It
// returns an error for an out-of-range axis or when two entries name the same axis (-1 and
// rank-1 are the same).
func NormAxes(axes []int64, rank int) ([]int, error) {
	out := make([]int, len(axes))
	seen := make([]bool, max(rank, 0))
	for i, a := range axes {
		k, err := NormAxis(a, rank)
		if err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, fmt.Errorf("axes %v repeat axis %d", axes, a)
		}
		seen[k] = true
		out[i] = k
	}
	return out, nil
}

// ReshapeDims resolves an ONNX Reshape target for an input of shape in: a 0 entry copies the
// input dimension at the same position (unless allowZero, when it means size 0), and at most
// one -1 entry is inferred so that the element count is kept. It returns an error for a
// second -1, an entry below -1, a 0 copying a dimension the input does not have, -1 together
// with allowZero's 0 (ONNX forbids it), a -1 that cannot be inferred (the other sizes'
// product is 0 or does not divide the count), or a target whose element count differs from
// the input's.
func ReshapeDims(in []int, target []int64, allowZero bool) ([]int, error) {
	total := NumElements(in)
	if total < 0 {
		return nil, fmt.Errorf("cannot reshape %s: invalid input shape", tensor.ShapeString(in))
	}
	out := make([]int, len(target))
	infer := -1
	known := 1
	hasZero := false
	for i, t := range target {
		switch {
		case t == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("reshape target %v has more than one -1", target)
			}
			infer = i
			continue
		case t == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("reshape target %v copies dimension %d (0) but the input %s has rank %d", target, i, tensor.ShapeString(in), len(in))
			}
			out[i] = in[i]
		case t < 0:
			return nil, fmt.Errorf("reshape target %v has entry %d (only -1 and sizes ≥ 0 are valid)", target, t)
		case t > math.MaxInt32:
			return nil, fmt.Errorf("reshape target %v has entry %d, which is too large", target, t)
		default:
			out[i] = int(t)
			hasZero = hasZero || t == 0
		}
		if out[i] != 0 && known > math.MaxInt/out[i] {
			return nil, fmt.Errorf("reshape target %v has too many elements", target)
		}
		known *= out[i]
	}
	if infer >= 0 {
		if allowZero && hasZero {
			return nil, fmt.Errorf("reshape target %v has both -1 and 0 with allowzero=1", target)
		}
		if known == 0 {
			return nil, fmt.Errorf("cannot reshape %s to %v: -1 cannot be inferred when the other sizes multiply to 0", tensor.ShapeString(in), target)
		}
		if total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v: %d is not a multiple of %d", tensor.ShapeString(in), total, target, total, known)
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v (%d elements)", tensor.ShapeString(in), total, target, known)
	}
	return out, nil
}

// SqueezeDims returns the shape of ONNX Squeeze applied to in. With axes nil (the input
// omitted) every size-1 dimension is removed; otherwise exactly the listed axes are, so an
// empty non-nil list removes none (the ONNX reference's reading). It returns an error for an
// out-of-range or repeated axis, or a listed axis whose size is not 1.
func SqueezeDims(in []int, axes []int64) ([]int, error) {
	drop := make([]bool, len(in))
	if axes == nil {
		for i, d := range in {
			drop[i] = d == 1
		}
	} else {
		ks, err := NormAxes(axes, len(in))
		if err != nil {
			return nil, err
		}
		for j, k := range ks {
			if in[k] != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d in shape %s (its size must be 1)", axes[j], in[k], tensor.ShapeString(in))
			}
			drop[k] = true
		}
	}
	out := []int{}
	for i, d := range in {
		if !drop[i] {
			out = append(out, d)
		}
	}
	return out, nil
}

// UnsqueezeDims returns the shape of ONNX Unsqueeze applied to in: a size-1 dimension is
// inserted at each of axes, which index the output (of rank len(in)+len(axes)) and may count
// from its end. It returns an error for an out-of-range or repeated axis.
func UnsqueezeDims(in []int, axes []int64) ([]int, error) {
	rank := len(in) + len(axes)
	ks, err := NormAxes(axes, rank)
	if err != nil {
		return nil, err
	}
	ins := make([]bool, rank)
	for _, k := range ks {
		ins[k] = true
	}
	out := make([]int, rank)
	j := 0
	for i := range out {
		if ins[i] {
			out[i] = 1
			continue
		}
		out[i] = in[j]
		j++
	}
	return out, nil
}

// SliceBound applies ONNX Slice's rules to one axis of size dim and returns the first index
// taken and how many elements are taken: negative bounds count from the end, then start and
// end are clamped to [0, dim] for a positive step and to [0, dim−1] and [−1, dim−1] for a
// negative one. step must not be 0 (it gives a count of 0); an empty range gives a count of
// 0, and then first may lie outside the axis. No argument overflows, so INT64_MAX and
// INT64_MIN work as "to the end" bounds.
func SliceBound(start, end, step, dim int64) (first, count int64) {
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	var n int64
	switch {
	case step > 0:
		start = min(max(start, 0), dim)
		end = min(max(end, 0), dim)
		if end > start {
			n = (end-start-1)/step + 1
		}
	case step < 0:
		start = min(max(start, 0), dim-1)
		end = min(max(end, -1), dim-1)
		if start > end {
			// -step overflows only for MinInt64, which takes one element.
			if step == math.MinInt64 {
				n = 1
			} else {
				n = (start-end-1)/(-step) + 1
			}
		}
	}
	return start, n
}

// SliceDims resolves an ONNX Slice on an input of shape in. axes nil means 0, 1, ...,
// len(starts)-1 and steps nil means all 1. For every axis of in it returns the output size,
// the first input index read and the step (axes not sliced keep their size, first 0, step
// 1), so output element i along axis k reads input index first[k] + i·step[k]. It returns an
// error when starts, ends, axes and steps differ in length, for an out-of-range or repeated
// axis, and for a zero step.
func SliceDims(in []int, starts, ends, axes, steps []int64) (out, first, step []int, err error) {
	if len(starts) != len(ends) {
		return nil, nil, nil, fmt.Errorf("starts has %d entries and ends has %d", len(starts), len(ends))
	}
	if axes == nil {
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if len(axes) != len(starts) {
		return nil, nil, nil, fmt.Errorf("axes has %d entries and starts has %d", len(axes), len(starts))
	}
	if steps != nil && len(steps) != len(starts) {
		return nil, nil, nil, fmt.Errorf("steps has %d entries and starts has %d", len(steps), len(starts))
	}
	ks, err := NormAxes(axes, len(in))
	if err != nil {
		return nil, nil, nil, err
	}
	out = append([]int{}, in...)
	first = make([]int, len(in))
	step = make([]int, len(in))
	for i := range step {
		step[i] = 1
	}
	for i, k := range ks {
		st := int64(1)
		if steps != nil {
			st = steps[i]
		}
		if st == 0 {
			return nil, nil, nil, errors.New("slice step for axis " + fmt.Sprint(axes[i]) + " is 0")
		}
		if st > math.MaxInt32 || st < math.MinInt32 {
			// Any step beyond the largest dimension takes one element; clamp so that
			// first + i·step stays in int.
			st = max(min(st, math.MaxInt32), math.MinInt32)
		}
		f, n := SliceBound(starts[i], ends[i], st, int64(in[k]))
		out[k] = int(n)
		first[k] = int(f)
		step[k] = int(st)
	}
	return out, first, step, nil
}

// bcastDim merges the dimensions at one broadcast position (numpy rules, as ONNX infers them).
func bcastDim(ds []Dim) (Dim, bool) {
	val := int64(1)
	var syms []Dim
	for _, d := range ds {
		if d.Known() {
			if d.Size != 1 {
				if val != 1 && val != d.Size {
					return Dim{}, false
				}
				val = d.Size
			}
			continue
		}
		syms = append(syms, d)
	}
	if val != 1 || len(syms) == 0 {
		return Fixed(val), true
	}
	first := syms[0]
	for _, s := range syms[1:] {
		if s.Param == "" || s.Param != first.Param {
			return unknownDim, true
		}
	}
	return first, true
}

// Broadcast returns the numpy multidirectional broadcast of shapes, or an error when two known
// dimensions differ and neither is 1. A nil (unknown-rank) shape gives a nil result.
func Broadcast(shapes ...Shape) (Shape, error) {
	rank := 0
	known := true
	for _, s := range shapes {
		if s == nil {
			return nil, nil
		}
		rank = max(rank, len(s))
		known = known && fullyKnown(s)
	}
	if known {
		cs := make([][]int, len(shapes))
		for i, s := range shapes {
			cs[i] = ints(sizes(s))
		}
		out, err := BroadcastShapes(cs...)
		if err != nil {
			return nil, err
		}
		return shapeOf(out), nil
	}
	out := make(Shape, rank)
	ds := make([]Dim, 0, len(shapes))
	for i := 0; i < rank; i++ {
		ds = ds[:0]
		for _, s := range shapes {
			if j := i - (rank - len(s)); j >= 0 {
				ds = append(ds, s[j])
			}
		}
		d, ok := bcastDim(ds)
		if !ok {
			parts := make([]string, len(shapes))
			for k, s := range shapes {
				parts[k] = s.String()
			}
			return nil, fmt.Errorf("shapes %v cannot be broadcast together (axis %d)", parts, i-rank)
		}
		out[i] = d
	}
	return out, nil
}
