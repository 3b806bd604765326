package backendtest

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// ShapeCase is one ONNX shape rule on concrete shapes: Op applied to float32 data inputs of
// shapes Data, then int64 operands Ints (Slice's starts, ends, axes and steps, Reshape's and
// Expand's shape, Squeeze's and Unsqueeze's axes; a nil entry is an omitted input). Want is
// the output shape ONNX defines, or nil when the rule must reject the case. The
// shared-semantics test runs every case through graph inference and each backend's shape
// code, which must all agree with Want.
type ShapeCase struct {
	Name  string
	Op    string
	Attrs graph.Attrs
	Data  [][]int
	Ints  [][]int64
	Want  []int
}

// ShapeCases returns the shape-rule table: broadcasting, Slice bounds (negative steps,
// bounds far outside the axis), Reshape's 0 and -1, Squeeze's and Unsqueeze's axes.
func ShapeCases() []ShapeCase {
	sl := func(name string, in []int, starts, ends, axes, steps []int64, want []int) ShapeCase {
		ints := [][]int64{starts, ends}
		if axes != nil || steps != nil {
			ints = append(ints, axes)
		}
		if steps != nil {
			ints = append(ints, steps)
		}
		return ShapeCase{Name: name, Op: "Slice", Data: [][]int{in}, Ints: ints, Want: want}
	}
	ints := func(v ...int64) []int64 { return append([]int64{}, v...) }
	const maxI, minI = int64(1<<63 - 1), int64(-1 << 63)
	return []ShapeCase{
		{Name: "Add/broadcast", Op: "Add", Data: [][]int{{4, 1, 3}, {5, 1}}, Want: []int{4, 5, 3}},
		{Name: "Add/scalar", Op: "Add", Data: [][]int{{}, {2, 3}}, Want: []int{2, 3}},
		{Name: "Add/empty", Op: "Add", Data: [][]int{{0, 3}, {1, 3}}, Want: []int{0, 3}},
		{Name: "Add/mismatch", Op: "Add", Data: [][]int{{2, 3}, {4, 3}}},
		{Name: "Expand/grow", Op: "Expand", Data: [][]int{{3, 1}}, Ints: [][]int64{ints(2, 1, 4)}, Want: []int{2, 3, 4}},
		{Name: "Expand/keep", Op: "Expand", Data: [][]int{{2, 3}}, Ints: [][]int64{ints(1, 1)}, Want: []int{2, 3}},
		{Name: "Expand/mismatch", Op: "Expand", Data: [][]int{{2, 3}}, Ints: [][]int64{ints(4, 1)}},
		{Name: "Expand/negative", Op: "Expand", Data: [][]int{{2, 3}}, Ints: [][]int64{ints(-1, 3)}},

		sl("Slice/basic", []int{2, 4}, ints(0, 1), ints(1, 3), nil, nil, []int{1, 2}),
		sl("Slice/neg-step-start-below", []int{4}, ints(-10), ints(-20), nil, ints(-1), []int{1}),
		sl("Slice/neg-step-start-above", []int{4}, ints(100), ints(-100), nil, ints(-1), []int{4}),
		sl("Slice/neg-step2-far", []int{5}, ints(100), ints(-100), nil, ints(-2), []int{3}),
		sl("Slice/neg-step-end-above", []int{4}, ints(-1), ints(10), nil, ints(-1), []int{0}),
		sl("Slice/neg-step-min-int", []int{2, 3}, ints(maxI), ints(minI), ints(1), ints(-1), []int{2, 3}),
		sl("Slice/neg-step3", []int{7}, ints(-1), ints(-8), nil, ints(-3), []int{3}),
		sl("Slice/start-below", []int{4}, ints(-100), ints(100), nil, nil, []int{4}),
		sl("Slice/start-above", []int{4}, ints(10), ints(20), nil, nil, []int{0}),
		sl("Slice/end-below", []int{4}, ints(0), ints(-10), nil, nil, []int{0}),
		sl("Slice/huge-step", []int{4}, ints(1), ints(maxI), nil, ints(maxI), []int{1}),
		sl("Slice/neg-axis", []int{2, 5}, ints(1), ints(100), ints(-1), ints(2), []int{2, 2}),
		sl("Slice/zero-step", []int{4}, ints(0), ints(4), nil, ints(0), nil),
		sl("Slice/repeated-axis", []int{4, 4}, ints(0, 1), ints(2, 3), ints(0, -2), nil, nil),
		sl("Slice/axis-out-of-range", []int{4}, ints(0), ints(2), ints(1), nil, nil),
		sl("Slice/length-mismatch", []int{4}, ints(0, 1), ints(2), nil, nil, nil),

		{Name: "Reshape/infer", Op: "Reshape", Data: [][]int{{2, 3, 4}}, Ints: [][]int64{ints(0, -1)}, Want: []int{2, 12}},
		{Name: "Reshape/copy-zero", Op: "Reshape", Data: [][]int{{2, 3, 4}}, Ints: [][]int64{ints(4, 0, 2)}, Want: []int{4, 3, 2}},
		{Name: "Reshape/allowzero", Op: "Reshape", Attrs: graph.Attrs{"allowzero": graph.Int(1)}, Data: [][]int{{0, 3}}, Ints: [][]int64{ints(3, 0)}, Want: []int{3, 0}},
		{Name: "Reshape/two-infer", Op: "Reshape", Data: [][]int{{2, 3}}, Ints: [][]int64{ints(-1, -1)}},
		{Name: "Reshape/not-divisible", Op: "Reshape", Data: [][]int{{2, 3, 4}}, Ints: [][]int64{ints(5, -1)}},
		{Name: "Reshape/count", Op: "Reshape", Data: [][]int{{2, 3}}, Ints: [][]int64{ints(4, 2)}},
		{Name: "Reshape/copy-beyond-rank", Op: "Reshape", Data: [][]int{{6}}, Ints: [][]int64{ints(1, 0)}},

		{Name: "Squeeze/all", Op: "Squeeze", Data: [][]int{{1, 3, 1}}, Want: []int{3}},
		{Name: "Squeeze/axes", Op: "Squeeze", Data: [][]int{{1, 3, 1}}, Ints: [][]int64{ints(-1)}, Want: []int{1, 3}},
		{Name: "Squeeze/empty-axes", Op: "Squeeze", Data: [][]int{{1, 3, 1}}, Ints: [][]int64{ints()}, Want: []int{1, 3, 1}},
		{Name: "Squeeze/not-one", Op: "Squeeze", Data: [][]int{{1, 3}}, Ints: [][]int64{ints(1)}},
		{Name: "Squeeze/repeated", Op: "Squeeze", Data: [][]int{{1, 3, 1}}, Ints: [][]int64{ints(0, -3)}},
		{Name: "Unsqueeze/ends", Op: "Unsqueeze", Data: [][]int{{3}}, Ints: [][]int64{ints(0, -1)}, Want: []int{1, 3, 1}},
		{Name: "Unsqueeze/scalar", Op: "Unsqueeze", Data: [][]int{{}}, Ints: [][]int64{ints(0)}, Want: []int{1}},
		{Name: "Unsqueeze/middle", Op: "Unsqueeze", Data: [][]int{{2, 3}}, Ints: [][]int64{ints(1, 3)}, Want: []int{2, 1, 3, 1}},
		{Name: "Unsqueeze/out-of-range", Op: "Unsqueeze", Data: [][]int{{3}}, Ints: [][]int64{ints(2)}},
		{Name: "Unsqueeze/repeated", Op: "Unsqueeze", Data: [][]int{{3}}, Ints: [][]int64{ints(0, -3)}},
	}
}

// Graph returns the single-node graph of c: the data are graph inputs with fixed shapes,
// the int64 operands initializers. It also returns zero-filled run inputs.
func (c ShapeCase) Graph() (*graph.Graph, map[string]*tensor.Tensor, error) {
	b := graph.NewBuilder(c.Name)
	inputs := map[string]*tensor.Tensor{}
	var names []string
	for i, shape := range c.Data {
		dims := make([]graph.Dim, len(shape))
		for d, n := range shape {
			dims[d] = graph.Fixed(int64(n))
		}
		name := b.Input(fmt.Sprintf("x%d", i), tensor.Float32, dims...)
		t, err := tensor.New(tensor.Float32, shape...)
		if err != nil {
			return nil, nil, err
		}
		inputs[name] = t
		names = append(names, name)
	}
	for i, v := range c.Ints {
		if v == nil {
			names = append(names, "")
			continue
		}
		t, err := tensor.FromInt64(append([]int64{}, v...), len(v))
		if err != nil {
			return nil, nil, err
		}
		names = append(names, b.Param(fmt.Sprintf("i%d", i), t))
	}
	b.Output("y", b.Op(c.Op, names, c.Attrs), tensor.Float32)
	g, err := b.Build()
	return g, inputs, err
}

// Infer returns the output shape graph inference gives for c (ConcreteShapes on c's data
// shapes), or its error.
func (c ShapeCase) Infer() ([]int, error) {
	g, inputs, err := c.Graph()
	if err != nil {
		return nil, err
	}
	shapes := map[string][]int{}
	for name, t := range inputs {
		shapes[name] = t.Shape
	}
	all, err := g.ConcreteShapes(shapes)
	if err != nil {
		return nil, err
	}
	return all["y"], nil
}

// CheckShape compares one implementation's answer for c (its output shape, or its error)
// with c.Want and with graph inference, and returns what disagrees, or nil.
func (c ShapeCase) CheckShape(who string, got []int, err error) error {
	inferred, ierr := c.Infer()
	switch {
	case c.Want == nil && ierr == nil:
		return fmt.Errorf("%s: graph inference accepts it (shape %v), want an error", c.Name, inferred)
	case c.Want != nil && (ierr != nil || !tensor.SameShape(inferred, c.Want)):
		return fmt.Errorf("%s: graph inference gives %v (%v), want %v", c.Name, inferred, ierr, c.Want)
	case c.Want == nil && err == nil:
		return fmt.Errorf("%s: %s accepts it (shape %v), graph inference rejects it: %v", c.Name, who, got, ierr)
	case c.Want != nil && err != nil:
		return fmt.Errorf("%s: %s fails (%v), graph inference gives %v", c.Name, who, err, inferred)
	case c.Want != nil && !tensor.SameShape(got, c.Want):
		return fmt.Errorf("%s: %s gives %v, graph inference and ONNX %v", c.Name, who, got, c.Want)
	}
	return nil
}
