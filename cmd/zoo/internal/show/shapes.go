package show

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// ShapeUsage is the help of show's --shape flag, which Shapes reads.
const ShapeUsage = "the shape `NAME=DIMS` of input NAME at each length (dims joined by x, n for the length, e.g. src=1xnx128; repeatable). " +
	"By default a text input takes (1, n) and any other input its declared shape with its first dynamic axis 1 (the batch) and every other one n"

// Shapes returns the input shapes of g at each length n: text's (a FeedPlan's shapes at batch
// 1; nil when g takes no text), else each input's declared shape with its first dynamic axis
// 1 (the batch) and every other one n, with the inputs specs name (NAME=DIMS, DIMS joined by
// x, each a count or n) over either. An error names the spec at fault: not NAME=DIMS, no
// such input, a dimension that is neither a positive count nor n, or a rank or fixed size
// other than the input's declared one.
func Shapes(g *graph.Graph, text func(n int) map[string][]int, specs []string) (func(n int) map[string][]int, error) {
	given := map[string][]int{} // -1 stands for n
	for _, s := range specs {
		name, dims, ok := strings.Cut(s, "=")
		if !ok || name == "" || dims == "" {
			return nil, fmt.Errorf("--shape %q: want NAME=DIMS, dims joined by x (e.g. src=1xnx128)", s)
		}
		i := slices.IndexFunc(g.Inputs, func(in graph.ValueInfo) bool { return in.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--shape %q: model %s has no input %q (inputs: %s)", s, g.Name, name, inputNames(g))
		}
		declared := g.Inputs[i].Shape
		var out []int
		for _, d := range strings.Split(dims, "x") {
			size, err := strconv.Atoi(d)
			if d == "n" {
				size, err = -1, nil
			} else if err != nil || size < 1 {
				return nil, fmt.Errorf("--shape %q: dimension %q is neither a positive count nor n", s, d)
			}
			out = append(out, size)
		}
		if declared != nil && len(out) != len(declared) {
			return nil, fmt.Errorf("--shape %q: input %s is %s, of %d dimensions, not %d", s, name, declared, len(declared), len(out))
		}
		for ax, d := range declared {
			if d.Known() && int64(out[ax]) != d.Size {
				return nil, fmt.Errorf("--shape %q: input %s is %s: axis %d is fixed at %d", s, name, declared, ax, d.Size)
			}
		}
		given[name] = out
	}
	return func(n int) map[string][]int {
		shapes := map[string][]int{}
		if text != nil {
			maps.Copy(shapes, text(n))
		} else {
			for _, in := range g.Inputs {
				shapes[in.Name] = declaredShape(in.Shape, n)
			}
		}
		for name, dims := range given {
			at := slices.Clone(dims)
			for i, d := range at {
				if d < 0 {
					at[i] = n
				}
			}
			shapes[name] = at
		}
		return shapes
	}, nil
}

// declaredShape is s at length n: its fixed sizes, its first dynamic axis 1 (the batch) and
// every other dynamic axis n.
func declaredShape(s graph.Shape, n int) []int {
	dims := make([]int, len(s))
	batch := true
	for i, d := range s {
		switch {
		case d.Known():
			dims[i] = int(d.Size)
		case batch:
			dims[i], batch = 1, false
		default:
			dims[i] = n
		}
	}
	return dims
}

// inputNames lists g's inputs with their shapes, for errors.
func inputNames(g *graph.Graph) string {
	var names []string
	for _, in := range g.Inputs {
		names = append(names, in.Name+" "+in.Shape.String())
	}
	return strings.Join(names, ", ")
}
