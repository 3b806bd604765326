package cuda

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// The output views of the shape ops: what Slice, Reshape, Squeeze and Unsqueeze compute
// from their operands, by graph's opsem functions, before a kernel (or a plain view) runs.
// They need no device, so the shared-semantics test runs them next to the CPU backend and
// graph inference.

// sliceView lays out Slice(x) for a contiguous x of shape in (graph.SliceDims gives the
// ONNX semantics): the output shape, the offset of its first element in x and its element
// stride in x along each axis. It returns SliceDims's errors.
func sliceView(in []int, starts, ends, axes, steps []int64) (shape []int, base int64, strides []int64, err error) {
	shape, first, step, err := graph.SliceDims(in, starts, ends, axes, steps)
	if err != nil {
		return nil, 0, nil, err
	}
	cs := contiguous(in)
	strides = make([]int64, len(in))
	for k := range in {
		if shape[k] > 0 {
			base += int64(first[k]) * cs[k]
		}
		strides[k] = cs[k] * int64(step[k])
	}
	return shape, base, strides, nil
}

// reshapeView is Reshape's output shape for an input of shape in and the target shape
// (graph.ReshapeDims under the node's allowzero).
func reshapeView(n *graph.Node, in []int, target []int64) ([]int, error) {
	return graph.ReshapeDims(in, target, n.Int("allowzero", 0) != 0)
}

// squeezeView is Squeeze's output shape; without axes given every size-1 axis goes.
func squeezeView(in []int, axes []int64, given bool) ([]int, error) {
	if !given {
		axes = nil
	}
	return graph.SqueezeDims(in, axes)
}

// unsqueezeView is Unsqueeze's output shape; the axes are required.
func unsqueezeView(in []int, axes []int64, given bool) ([]int, error) {
	if !given {
		return nil, errors.New("axes are missing")
	}
	return graph.UnsqueezeDims(in, axes)
}

// expandView is Expand's output shape: in broadcast with the target shape.
func expandView(in []int, target []int64) ([]int, error) {
	t := make([]int, len(target))
	for i, d := range target {
		if d < 0 || d > math.MaxInt32 {
			return nil, fmt.Errorf("expand shape %v has an invalid dimension %d", target, d)
		}
		t[i] = int(d)
	}
	return graph.BroadcastShapes(in, t)
}

// rowsForm says how zoo_binary_rows computes a op b when b is a or a trailing block of it:
// a is read in full and b repeats down the rows; brows is b's number of rows of cols.
func rowsForm(a, b []int) (rows, cols, brows int, ok bool) {
	if len(b) > len(a) || len(a) == 0 {
		return 0, 0, 0, false
	}
	off := len(a) - len(b)
	lead := 0 // b's leading ones (dropped: a [B, n, d] + b [1, 1, d])
	for lead < len(b) && b[lead] == 1 {
		lead++
	}
	for i := lead; i < len(b); i++ {
		if b[i] != a[off+i] {
			return 0, 0, 0, false
		}
	}
	cols = a[len(a)-1]
	if cols == 0 {
		return 0, 0, 0, false
	}
	nb := graph.NumElements(b)
	if nb < cols || nb%cols != 0 {
		return 0, 0, 0, false
	}
	return graph.NumElements(a) / cols, cols, nb / cols, true
}
