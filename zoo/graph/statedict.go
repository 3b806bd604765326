package graph

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// StateDictError is LoadStateDict's refusal: the state_dict names that the graph lacks
// (Unexpected), the graph's parameters and buffers the state_dict lacks (Missing), and those
// whose dtype or shape differ (Misshaped, one description each), every list sorted.
type StateDictError struct {
	Missing, Unexpected, Misshaped []string
}

// Error is one line naming the first tensor at fault in each list and how many more there are,
// as PyTorch's load_state_dict(strict=True) reports missing and unexpected keys.
func (e *StateDictError) Error() string {
	var parts []string
	add := func(what string, list []string) {
		switch len(list) {
		case 0:
		case 1:
			parts = append(parts, what+" "+list[0])
		default:
			parts = append(parts, fmt.Sprintf("%s %s (and %d more)", what, list[0], len(list)-1))
		}
	}
	add("missing tensor", e.Missing)
	add("unexpected tensor", e.Unexpected)
	add("misshaped tensor", e.Misshaped)
	return strings.Join(parts, "; ")
}

// LoadStateDict replaces the graph's parameters and buffers (its initializers other than
// builder constants: what StateDict returns) by the tensors of the same names, strictly as
// PyTorch's load_state_dict(strict=True): every parameter and buffer must be present with
// the same dtype and shape, and every tensor must name one. On any mismatch it returns a
// *StateDictError and leaves g unchanged; on success g holds the given tensors themselves
// (not copies). A nil or invalid tensor is misshaped.
func LoadStateDict(g *Graph, tensors map[string]*tensor.Tensor) error {
	e := &StateDictError{}
	known := map[string]bool{}
	for _, in := range g.Initializers {
		if IsConstName(in.Name) {
			continue
		}
		known[in.Name] = true
		t, ok := tensors[in.Name]
		if !ok {
			e.Missing = append(e.Missing, in.Name)
			continue
		}
		if t == nil || t.Check() != nil {
			e.Misshaped = append(e.Misshaped, in.Name+" is not a valid tensor")
			continue
		}
		if t.DType != in.Tensor.DType || !slices.Equal(t.Shape, in.Tensor.Shape) {
			e.Misshaped = append(e.Misshaped, fmt.Sprintf("%s is %v %s, the model's is %v %s",
				in.Name, t.DType, tensor.ShapeString(t.Shape), in.Tensor.DType, tensor.ShapeString(in.Tensor.Shape)))
		}
	}
	for name := range tensors {
		if !known[name] {
			e.Unexpected = append(e.Unexpected, name)
		}
	}
	if len(e.Missing)+len(e.Unexpected)+len(e.Misshaped) > 0 {
		sort.Strings(e.Missing)
		sort.Strings(e.Unexpected)
		sort.Strings(e.Misshaped)
		return e
	}
	for i, in := range g.Initializers {
		if !IsConstName(in.Name) {
			g.Initializers[i].Tensor = tensors[in.Name]
		}
	}
	return nil
}
