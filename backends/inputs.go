package backends

import (
	"fmt"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// CheckInputs verifies run inputs against a graph's declared inputs: every declared input is
// present with its dtype, its rank and its fixed dimensions, its data fills its shape, and
// no unknown name is passed (the first unknown one in sorted order is reported). Errors read
// "BACKEND: run graph NAME: ..." and name the input. Every backend's Program.Run uses it, so
// all backends refuse the same inputs with the same words.
func CheckInputs(backend, graphName string, declared []graph.ValueInfo, inputs map[string]*tensor.Tensor) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: run graph %s: %s", backend, graphName, fmt.Sprintf(format, args...))
	}
	known := map[string]bool{}
	for _, in := range declared {
		known[in.Name] = true
		t, ok := inputs[in.Name]
		if !ok || t == nil {
			return fail("input %q is missing (want %v %s)", in.Name, in.DType, in.Shape)
		}
		if t.DType != in.DType {
			return fail("input %q has dtype %v, want %v", in.Name, t.DType, in.DType)
		}
		if err := t.Check(); err != nil {
			return fmt.Errorf("%s: run graph %s: input %q: %w", backend, graphName, in.Name, err)
		}
		if in.Shape == nil {
			continue
		}
		if len(t.Shape) != len(in.Shape) {
			return fail("input %q has rank %d (shape %s), want rank %d %s",
				in.Name, len(t.Shape), tensor.ShapeString(t.Shape), len(in.Shape), in.Shape)
		}
		for i, d := range in.Shape {
			if d.Known() && int64(t.Shape[i]) != d.Size {
				return fail("input %q has shape %s, want %s (dimension %d must be %d)",
					in.Name, tensor.ShapeString(t.Shape), in.Shape, i, d.Size)
			}
		}
	}
	var unknown []string
	for name := range inputs {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, len(declared))
		for i, in := range declared {
			names[i] = in.Name
		}
		return fail("unknown input %q (inputs are %s)", unknown[0], strings.Join(names, ", "))
	}
	return nil
}
