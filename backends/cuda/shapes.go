package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// maxDims is the most dimensions a Desc holds (ZMAXD in kernels.cu).
const maxDims = 8

// desc mirrors struct Desc in kernels.cu: an iteration shape and, for up to three operands,
// the element stride of each dimension.
type desc struct {
	shape []int64
	st    [3][]int64
}

// descBytes is sizeof(struct Desc): nd, shape[8], st[3][8], all 64-bit.
const descBytes = 8 * (1 + maxDims + 3*maxDims)

// pack encodes d in the C layout (little-endian, as on every CUDA host).
func (d desc) pack() ([]byte, error) {
	if len(d.shape) > maxDims {
		return nil, fmt.Errorf("%d dimensions after merging, the kernels handle at most %d", len(d.shape), maxDims)
	}
	b := make([]byte, descBytes)
	put := func(i int, v int64) { binary.LittleEndian.PutUint64(b[8*i:], uint64(v)) }
	put(0, int64(len(d.shape)))
	for i, n := range d.shape {
		put(1+i, n)
		for k := 0; k < 3; k++ {
			if k < len(d.st) && i < len(d.st[k]) {
				put(1+maxDims+k*maxDims+i, d.st[k][i])
			}
		}
	}
	return b, nil
}

// contiguous returns the row-major element strides of shape.
func contiguous(shape []int) []int64 {
	st := make([]int64, len(shape))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= int64(shape[i])
	}
	return st
}

// broadcastShape returns the numpy broadcast of shapes, or an error naming them.
func broadcastShape(shapes ...[]int) ([]int, error) {
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
		for i, n := range s {
			switch {
			case out[off+i] == n || n == 1:
			case out[off+i] == 1:
				out[off+i] = n
			default:
				return nil, fmt.Errorf("shapes %s cannot be broadcast together", shapeList(shapes))
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

// broadcastStrides returns the strides with which a contiguous tensor of shape src is read
// when broadcast to out (0 along broadcast dimensions).
func broadcastStrides(src, out []int) []int64 {
	st := make([]int64, len(out))
	cs := contiguous(src)
	off := len(out) - len(src)
	for i := range src {
		if src[i] != 1 || out[off+i] == 1 {
			st[off+i] = cs[i]
		}
	}
	return st
}

// coalesce merges adjacent dimensions that every operand walks contiguously (and drops
// dimensions of size 1), so most broadcasts reach the kernels with one or two dimensions.
func coalesce(shape []int, strides ...[]int64) desc {
	var d desc
	for i, n := range shape {
		if n == 1 {
			continue
		}
		if k := len(d.shape) - 1; k >= 0 {
			ok := true
			for j, st := range strides {
				if d.st[j][k] != st[i]*int64(n) {
					ok = false
					break
				}
			}
			if ok {
				d.shape[k] *= int64(n)
				for j, st := range strides {
					d.st[j][k] = st[i]
				}
				continue
			}
		}
		d.shape = append(d.shape, int64(n))
		for j, st := range strides {
			d.st[j] = append(d.st[j], st[i])
		}
	}
	return d
}

// numel returns the number of elements of shape.
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// normAxis maps a possibly negative axis into [0, rank).
func normAxis(axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// reshapeTo resolves an ONNX Reshape target (0 copies a dimension unless allowZero, -1 is
// inferred) for a tensor of shape in.
func reshapeTo(in []int, target []int64, allowZero bool) ([]int, error) {
	out := make([]int, len(target))
	infer := -1
	known := 1
	for i, t := range target {
		switch {
		case t == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", target)
			}
			infer = i
			continue
		case t == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("shape %v copies dimension %d of a rank-%d input", target, i, len(in))
			}
			out[i] = in[i]
		case t < 0:
			return nil, fmt.Errorf("shape %v has a negative dimension", target)
		default:
			out[i] = int(t)
		}
		known *= out[i]
	}
	total := numel(in)
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %s to %v", tensor.ShapeString(in), target)
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v (%d elements)", tensor.ShapeString(in), total, target, known)
	}
	return out, nil
}

// squeezeShape removes the listed axes (all size-1 axes when axes is empty).
func squeezeShape(in []int, axes []int64) ([]int, error) {
	drop := make([]bool, len(in))
	if len(axes) == 0 {
		for i, n := range in {
			drop[i] = n == 1
		}
	}
	for _, a := range axes {
		ax, err := normAxis(a, len(in))
		if err != nil {
			return nil, err
		}
		if in[ax] != 1 {
			return nil, fmt.Errorf("cannot squeeze axis %d of shape %s: its size is %d, not 1", a, tensor.ShapeString(in), in[ax])
		}
		drop[ax] = true
	}
	out := []int{}
	for i, n := range in {
		if !drop[i] {
			out = append(out, n)
		}
	}
	return out, nil
}

// unsqueezeShape inserts size-1 axes at the listed positions of the output.
func unsqueezeShape(in []int, axes []int64) ([]int, error) {
	rank := len(in) + len(axes)
	ins := make([]bool, rank)
	for _, a := range axes {
		ax, err := normAxis(a, rank)
		if err != nil {
			return nil, err
		}
		if ins[ax] {
			return nil, fmt.Errorf("axis %d is repeated", a)
		}
		ins[ax] = true
	}
	out := make([]int, 0, rank)
	j := 0
	for i := 0; i < rank; i++ {
		if ins[i] {
			out = append(out, 1)
		} else {
			out = append(out, in[j])
			j++
		}
	}
	return out, nil
}

// sliceAxis resolves one axis of an ONNX Slice: the first index, the step and the count.
func sliceAxis(dim int, start, end, step int64) (first int64, count int, err error) {
	if step == 0 {
		return 0, 0, fmt.Errorf("slice step is 0")
	}
	d := int64(dim)
	clamp := func(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
	if start < 0 {
		start += d
	}
	if end < 0 && end != math.MinInt64 {
		end += d
	}
	if step > 0 {
		start = clamp(start, 0, d)
		end = clamp(end, 0, d)
		if end > start {
			count = int((end - start + step - 1) / step)
		}
	} else {
		start = clamp(start, -1, d-1)
		end = clamp(end, -1, d-1)
		if start > end {
			count = int((start - end - step - 1) / -step)
		}
	}
	return start, count, nil
}

// int64Bytes returns v's bytes in host order.
func int64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// ptrOf returns the address of b's first byte, or nil.
func ptrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}
