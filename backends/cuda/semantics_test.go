package cuda

import (
	"context"
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/backendtest"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// cudaShape runs case c through the CUDA backend's shape code: the views and broadcasts
// its kernels compute before they launch (views.go), which need no device.
func cudaShape(c backendtest.ShapeCase) ([]int, error) {
	operand := func(i int) ([]int64, bool) {
		if i < len(c.Ints) && c.Ints[i] != nil {
			return c.Ints[i], true
		}
		return nil, false
	}
	switch c.Op {
	case "Add":
		return graph.BroadcastShapes(c.Data...)
	case "Expand":
		return expandView(c.Data[0], c.Ints[0])
	case "Slice":
		axes, _ := operand(2)
		steps, _ := operand(3)
		shape, _, _, err := sliceView(c.Data[0], c.Ints[0], c.Ints[1], axes, steps)
		return shape, err
	case "Reshape":
		return reshapeView(&graph.Node{Op: c.Op, Attrs: c.Attrs}, c.Data[0], c.Ints[0])
	case "Squeeze":
		axes, given := operand(0)
		return squeezeView(c.Data[0], axes, given)
	case "Unsqueeze":
		axes, given := operand(0)
		return unsqueezeView(c.Data[0], axes, given)
	}
	return nil, fmt.Errorf("no CUDA shape code is mapped for %s: add it to cudaShape", c.Op)
}

// cpuShape runs case c on the CPU backend and returns the output's shape.
func cpuShape(c backendtest.ShapeCase) ([]int, error) {
	g, inputs, err := c.Graph()
	if err != nil {
		return nil, err
	}
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 1, NoFusion: true})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	out, err := p.Run(context.Background(), inputs)
	if err != nil {
		return nil, err
	}
	return out["y"].Shape, nil
}

// TestSharedShapeSemantics runs every shape rule of backendtest.ShapeCases through graph
// inference, the CPU backend and the CUDA backend's shape code, which must all give the
// shape ONNX defines (or all reject the case).
func TestSharedShapeSemantics(t *testing.T) {
	for _, c := range backendtest.ShapeCases() {
		t.Run(c.Name, func(t *testing.T) {
			got, err := cpuShape(c)
			if e := c.CheckShape("the CPU backend", got, err); e != nil {
				t.Error(e)
			}
			got, err = cudaShape(c)
			if e := c.CheckShape("the CUDA shape code", got, err); e != nil {
				t.Error(e)
			}
		})
	}
}
