package optim

import (
	"fmt"
	"slices"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Layout places named tensors in one flat buffer, in the order given.
type Layout struct {
	Names  []string
	Shapes [][]int
	// Offsets has one entry per tensor plus the total size: tensor i is [Offsets[i], Offsets[i+1]).
	Offsets []int
	index   map[string]int
}

// NewLayout lays out the tensors in order. It returns an error for a duplicate or empty
// name, a negative dimension, or mismatched lengths.
func NewLayout(names []string, shapes [][]int) (*Layout, error) {
	if len(names) != len(shapes) {
		return nil, fmt.Errorf("optim: %d names but %d shapes", len(names), len(shapes))
	}
	l := &Layout{Names: append([]string(nil), names...), Offsets: make([]int, 1, len(names)+1), index: map[string]int{}}
	for i, name := range names {
		if name == "" {
			return nil, fmt.Errorf("optim: tensor %d has no name", i)
		}
		if _, dup := l.index[name]; dup {
			return nil, fmt.Errorf("optim: tensor %q appears twice", name)
		}
		n := tensor.NumElements(shapes[i])
		if n < 0 {
			return nil, fmt.Errorf("optim: tensor %q has a negative dimension in %v", name, shapes[i])
		}
		l.index[name] = i
		l.Shapes = append(l.Shapes, append([]int(nil), shapes[i]...))
		l.Offsets = append(l.Offsets, l.Offsets[i]+n)
	}
	return l, nil
}

// Size is the number of elements of every tensor together.
func (l *Layout) Size() int { return l.Offsets[len(l.Offsets)-1] }

// Len is the number of tensors.
func (l *Layout) Len() int { return len(l.Names) }

// Index returns the position of the named tensor, or -1.
func (l *Layout) Index(name string) int {
	if i, ok := l.index[name]; ok {
		return i
	}
	return -1
}

// Slice returns tensor i's range of buf (which must be Size long).
func (l *Layout) Slice(buf []float32, i int) []float32 {
	return buf[l.Offsets[i]:l.Offsets[i+1]:l.Offsets[i+1]]
}

// Tensors returns one float32 tensor per entry whose data aliases buf: writing to buf
// changes them, and the other way round.
func (l *Layout) Tensors(buf []float32) []*tensor.Tensor {
	out := make([]*tensor.Tensor, l.Len())
	for i := range out {
		out[i] = &tensor.Tensor{DType: tensor.Float32, Shape: append([]int(nil), l.Shapes[i]...), F32: l.Slice(buf, i)}
	}
	return out
}

// Gather copies the named tensors into a new flat buffer. It returns an error naming a
// missing, non-float32 or misshaped tensor.
func (l *Layout) Gather(get func(name string) *tensor.Tensor) ([]float32, error) {
	return l.gather("", get)
}

// gather is Gather for tensors stored as prefix+name.
func (l *Layout) gather(prefix string, get func(name string) *tensor.Tensor) ([]float32, error) {
	buf := make([]float32, l.Size())
	for i, name := range l.Names {
		if err := l.copyIn(buf, i, prefix, get(prefix+name)); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// copyIn copies t (named prefix+name in errors) into tensor i's range of buf after checking its type and shape.
func (l *Layout) copyIn(buf []float32, i int, prefix string, t *tensor.Tensor) error {
	name := prefix + l.Names[i]
	switch {
	case t == nil:
		return fmt.Errorf("tensor %s is missing", name)
	case t.DType != tensor.Float32:
		return fmt.Errorf("tensor %s is %s, want float32", name, t.DType)
	case !slices.Equal(t.Shape, l.Shapes[i]):
		return fmt.Errorf("tensor %s has shape %v, want %v", name, t.Shape, l.Shapes[i])
	case len(t.F32) != l.Offsets[i+1]-l.Offsets[i]:
		return fmt.Errorf("tensor %s holds %d values, want %d", name, len(t.F32), l.Offsets[i+1]-l.Offsets[i])
	}
	copy(l.Slice(buf, i), t.F32)
	return nil
}

// Scatter copies tensor values from ts (in layout order) into buf: how gradients that a
// program returns as separate tensors reach the flat buffer.
func (l *Layout) Scatter(buf []float32, ts []*tensor.Tensor) error {
	if len(ts) != l.Len() {
		return fmt.Errorf("optim: %d tensors for a layout of %d", len(ts), l.Len())
	}
	for i, t := range ts {
		if err := l.copyIn(buf, i, "", t); err != nil {
			return err
		}
	}
	return nil
}
