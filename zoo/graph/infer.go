package graph

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// MaxEvalElements bounds the integer and bool tensors whose values shape inference evaluates
// (shape vectors, index lists, masks made of constants). Larger tensors keep only their shape.
const MaxEvalElements = 4096

// unknownDim is a dimension of unknown size and no name.
var unknownDim = Dim{Size: -1}

// ival is one element of an evaluated integer (or bool, as 0/1) tensor: a known value, or an
// unknown one that may be a named symbolic dimension (an element of Shape(x) for a symbolic x).
type ival struct {
	v     int64
	known bool
	sym   string
}

func kv(v int64) ival { return ival{v: v, known: true} }

// absVal is what inference knows about a value: its dtype, its shape, and for small integer
// tensors their elements (vals), for small float initializers and constants their data (floats).
type absVal struct {
	dt     tensor.DType
	shape  Shape
	vals   []ival
	floats []float32
}

// InferShapes runs static shape inference over the graph in node order and fills g.ValueInfo
// with the element type and shape of every node output (intermediate values and graph
// outputs; graph inputs and initializers already carry theirs). Dimensions stay symbolic where
// they are not fixed: a named dimension ("batch", "seq") keeps its name while it propagates
// unchanged, and a size that cannot be known statically becomes Dim{Size: -1}. Small int64
// computations on shapes (Shape, Slice, Gather, Concat, arithmetic, ...) are folded, with
// named dimensions as symbolic elements, so that Reshape with 0/-1 and slices up to a
// sequence length resolve. A slice that ends at a symbolic bound (x[0:seq] on a fixed axis) is
// taken to lie within the axis, as it must in a valid graph. Broadcasting follows numpy's
// multidirectional rules.
//
// It returns an error naming the node for an impossible graph: mismatched MatMul inner
// dimensions, non-broadcastable known dimensions, wrong element types (MatMul on int64, a
// non-bool Where condition, ...), out-of-range axes or indices, a Reshape that changes the
// element count, a graph output whose declared type or shape contradicts the inferred one, or
// a graph that fails Validate. On error g.ValueInfo is left unchanged.
func (g *Graph) InferShapes() error {
	if g == nil {
		return errors.New("infer shapes: graph is nil")
	}
	vals, err := g.propagate(false, nil)
	if err != nil {
		return fmt.Errorf("infer shapes of graph %s: %w", g.Name, err)
	}
	vi := make(map[string]ValueInfo, len(vals))
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o == "" {
				continue
			}
			v := vals[o]
			vi[o] = ValueInfo{Name: o, DType: v.dt, Shape: cloneShape(v.shape)}
		}
	}
	g.ValueInfo = vi
	return nil
}

// ConcreteShapes propagates concrete shapes through the graph for the given graph-input shapes
// (for example {"tokens": {1, 4096}, "key_padding_mask": {1, 4096}}) and returns the shape of
// every value: graph inputs, initializers and node outputs (a scalar has an empty shape).
// Integer subgraphs that compute shapes (Shape, Slice, Gather, Concat, Unsqueeze, Squeeze,
// Cast, Constant, ConstantOfShape, Range, Equal, Where, integer arithmetic, Expand, ...) are
// evaluated as values when they hold at most MaxEvalElements elements.
//
// It returns an error when an input shape is missing, negative, names no graph input, has the
// wrong rank, contradicts a fixed declared dimension, or gives one symbolic dimension two
// sizes; when a shape depends on a value that cannot be evaluated (naming the node and the
// input); and for every impossible shape InferShapes reports.
func (g *Graph) ConcreteShapes(inputs map[string][]int) (map[string][]int, error) {
	if g == nil {
		return nil, errors.New("concrete shapes: graph is nil")
	}
	vals, err := g.propagate(true, inputs)
	if err != nil {
		return nil, fmt.Errorf("concrete shapes of graph %s: %w", g.Name, err)
	}
	out := make(map[string][]int, len(vals))
	for name, v := range vals {
		s := make([]int, len(v.shape))
		for i, d := range v.shape {
			s[i] = int(d.Size)
		}
		out[name] = s
	}
	return out, nil
}

func cloneShape(s Shape) Shape {
	if s == nil {
		return nil
	}
	return append(Shape{}, s...)
}

// fullyKnown reports whether the rank and every dimension are known.
func fullyKnown(s Shape) bool {
	if s == nil {
		return false
	}
	for _, d := range s {
		if !d.Known() {
			return false
		}
	}
	return true
}

// numel returns the element count of a fully known shape.
func numel(s Shape) (int64, bool) {
	if !fullyKnown(s) {
		return 0, false
	}
	n := int64(1)
	for _, d := range s {
		if d.Size != 0 && n > math.MaxInt64/d.Size {
			return 0, false
		}
		n *= d.Size
	}
	return n, true
}

// ints converts sizes to int (shapes of values zoo can hold fit in int).
func ints(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// shapeOf turns a concrete shape into fixed dimensions.
func shapeOf(dims []int) Shape {
	s := make(Shape, len(dims))
	for i, d := range dims {
		s[i] = Fixed(int64(d))
	}
	return s
}

func sizes(s Shape) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = d.Size
	}
	return out
}

func isInt(dt tensor.DType) bool     { return dt == tensor.Int64 || dt == tensor.Int32 }
func isNumeric(dt tensor.DType) bool { return dt == tensor.Float32 || isInt(dt) }
func tracksVals(dt tensor.DType) bool {
	return isInt(dt) || dt == tensor.Bool
}

// trackable reports whether values of this dtype and shape are evaluated.
func trackable(dt tensor.DType, s Shape) bool {
	n, ok := numel(s)
	return ok && n <= MaxEvalElements && tracksVals(dt)
}

func fromTensor(t *tensor.Tensor) *absVal {
	v := &absVal{dt: t.DType, shape: make(Shape, len(t.Shape))}
	for i, d := range t.Shape {
		v.shape[i] = Fixed(int64(d))
	}
	if t.Len() > MaxEvalElements {
		return v
	}
	switch t.DType {
	case tensor.Int64, tensor.Int32:
		v.vals = make([]ival, len(t.I64))
		for i, x := range t.I64 {
			v.vals[i] = kv(x)
		}
	case tensor.Bool:
		v.vals = make([]ival, len(t.Bool))
		for i, x := range t.Bool {
			if x {
				v.vals[i] = kv(1)
			} else {
				v.vals[i] = kv(0)
			}
		}
	case tensor.Float32:
		v.floats = append([]float32{}, t.F32...)
	}
	return v
}

// propagate infers every value in node order. In concrete mode the graph inputs get the given
// shapes and every node output must end with a fully known shape.
func (g *Graph) propagate(concrete bool, inputs map[string][]int) (map[string]*absVal, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	vals := map[string]*absVal{}
	if concrete {
		if err := g.concreteInputs(inputs, vals); err != nil {
			return nil, err
		}
	} else {
		for _, in := range g.Inputs {
			vals[in.Name] = &absVal{dt: in.DType, shape: cloneShape(in.Shape)}
		}
	}
	for _, ini := range g.Initializers {
		vals[ini.Name] = fromTensor(ini.Tensor)
	}
	for i, n := range g.Nodes {
		c := &nodeCtx{concrete: concrete, n: n, in: make([]*absVal, len(n.Inputs)), names: n.Inputs}
		for j, name := range n.Inputs {
			if name == "" {
				continue
			}
			v, ok := vals[name]
			if !ok {
				return nil, fmt.Errorf("node %d %q (%s): input %q is not defined", i, n.Name, n.Op, name)
			}
			c.in[j] = v
		}
		outs, err := c.infer()
		if err == nil && len(outs) < len(n.Outputs) {
			err = fmt.Errorf("inference gave %d outputs for %d", len(outs), len(n.Outputs))
		}
		if err != nil {
			return nil, fmt.Errorf("node %d %q (%s): %w", i, n.Name, n.Op, err)
		}
		for j, o := range n.Outputs {
			if o == "" {
				continue
			}
			out := outs[j]
			if concrete && !fullyKnown(out.shape) {
				why := "its size depends on values that are not known"
				if c.missing != "" {
					why = c.missing
				}
				return nil, fmt.Errorf("node %d %q (%s): cannot determine the shape %v of output %q: %s", i, n.Name, n.Op, out.shape, o, why)
			}
			vals[o] = out
		}
	}
	for _, out := range g.Outputs {
		v := vals[out.Name]
		if v == nil {
			return nil, fmt.Errorf("graph output %q is not produced", out.Name)
		}
		if out.DType != tensor.Invalid && out.DType != v.dt {
			return nil, fmt.Errorf("graph output %q is declared %v but computed as %v", out.Name, out.DType, v.dt)
		}
		if out.Shape == nil || v.shape == nil {
			continue
		}
		if len(out.Shape) != len(v.shape) {
			return nil, fmt.Errorf("graph output %q is declared with shape %v but computed with shape %v", out.Name, out.Shape, v.shape)
		}
		for i, d := range out.Shape {
			if d.Known() && v.shape[i].Known() && d.Size != v.shape[i].Size {
				return nil, fmt.Errorf("graph output %q is declared with shape %v but computed with shape %v", out.Name, out.Shape, v.shape)
			}
		}
	}
	return vals, nil
}

func (g *Graph) concreteInputs(inputs map[string][]int, vals map[string]*absVal) error {
	declared := map[string]bool{}
	symSize := map[string]int{}
	symFrom := map[string]string{}
	for _, in := range g.Inputs {
		declared[in.Name] = true
		dims, ok := inputs[in.Name]
		if !ok {
			return fmt.Errorf("no shape given for graph input %q %v", in.Name, in.Shape)
		}
		if in.Shape != nil && len(dims) != len(in.Shape) {
			return fmt.Errorf("graph input %q: shape %s has rank %d, declared %v has rank %d", in.Name, tensor.ShapeString(dims), len(dims), in.Shape, len(in.Shape))
		}
		shape := make(Shape, len(dims))
		for i, d := range dims {
			if d < 0 {
				return fmt.Errorf("graph input %q: negative dimension in shape %s", in.Name, tensor.ShapeString(dims))
			}
			if in.Shape != nil {
				decl := in.Shape[i]
				if decl.Known() && decl.Size != int64(d) {
					return fmt.Errorf("graph input %q: shape %s contradicts declared shape %v at axis %d", in.Name, tensor.ShapeString(dims), in.Shape, i)
				}
				if !decl.Known() && decl.Param != "" {
					if prev, ok := symSize[decl.Param]; ok && prev != d {
						return fmt.Errorf("graph input %q: dimension %s is %d, but graph input %q gave it %d", in.Name, decl.Param, d, symFrom[decl.Param], prev)
					}
					symSize[decl.Param] = d
					symFrom[decl.Param] = in.Name
				}
			}
			shape[i] = Fixed(int64(d))
		}
		vals[in.Name] = &absVal{dt: in.DType, shape: shape}
	}
	names := make([]string, 0, len(inputs))
	for name := range inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !declared[name] {
			return fmt.Errorf("%q is not a graph input", name)
		}
	}
	return nil
}

// nodeCtx is one node's inference step.
type nodeCtx struct {
	concrete bool
	n        *Node
	in       []*absVal
	names    []string
	// missing explains which needed input value could not be evaluated.
	missing string
}

// arg returns input i, or nil when it is absent or omitted.
func (c *nodeCtx) arg(i int) *absVal {
	if i < 0 || i >= len(c.in) {
		return nil
	}
	return c.in[i]
}

// req returns input i or an error when it is absent.
func (c *nodeCtx) req(i int) (*absVal, error) {
	if v := c.arg(i); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("required input %d is missing", i)
}

func (c *nodeCtx) name(i int) string {
	if i < len(c.names) {
		return c.names[i]
	}
	return ""
}

// elems returns input i's evaluated elements (which may include unknown ones), or nil after
// recording why it is needed but not evaluated.
func (c *nodeCtx) elems(i int, what string) []ival {
	v := c.arg(i)
	if v != nil && v.vals != nil {
		return v.vals
	}
	if c.missing == "" {
		c.missing = fmt.Sprintf("the value of input %q (%s) could not be evaluated", c.name(i), what)
	}
	return nil
}

// ints returns input i's elements when all are known.
func (c *nodeCtx) ints(i int, what string) ([]int64, bool) {
	e := c.elems(i, what)
	if e == nil {
		return nil, false
	}
	out := make([]int64, len(e))
	for j, x := range e {
		if !x.known {
			if c.missing == "" {
				c.missing = fmt.Sprintf("the value of input %q (%s) is not fully known", c.name(i), what)
			}
			return nil, false
		}
		out[j] = x.v
	}
	return out, true
}

// checkVec checks that input i is a 1-D (or, with scalarOK, rank-0) integer tensor.
func (c *nodeCtx) checkVec(i int, what string, scalarOK bool) error {
	v := c.arg(i)
	if v == nil {
		return nil
	}
	if !isInt(v.dt) {
		return fmt.Errorf("%s input %q has dtype %v, want int64", what, c.name(i), v.dt)
	}
	if v.shape != nil && len(v.shape) != 1 && !(scalarOK && len(v.shape) == 0) {
		return fmt.Errorf("%s input %q has shape %v, want 1-D", what, c.name(i), v.shape)
	}
	return nil
}

func mk(dt tensor.DType, s Shape) *absVal { return &absVal{dt: dt, shape: s} }

func one(v *absVal) []*absVal { return []*absVal{v} }

func (c *nodeCtx) infer() ([]*absVal, error) {
	switch op := c.n.Op; op {
	case "Identity":
		x, err := c.req(0)
		if err != nil {
			return nil, err
		}
		cp := *x
		cp.shape = cloneShape(x.shape)
		return one(&cp), nil
	case "Abs", "Neg", "Relu":
		return c.unary(isNumeric, "a number type", unaryEval(op))
	case "Exp", "Log", "Sqrt", "Erf", "Tanh", "Sigmoid", "Elu":
		return c.unary(func(dt tensor.DType) bool { return dt == tensor.Float32 }, "float32", nil)
	case "Not":
		return c.unary(func(dt tensor.DType) bool { return dt == tensor.Bool }, "bool", unaryEval(op))
	case "Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "And", "Or", "Equal", "Greater", "Less", "Where":
		return c.elementwise(op)
	case "Cast":
		return c.cast()
	case "Shape":
		return c.shapeOp()
	case "Constant":
		return c.constant()
	case "ConstantOfShape":
		return c.constantOfShape()
	case "Range":
		return c.rangeOp()
	case "Reshape":
		return c.reshape()
	case "Transpose":
		return c.transpose()
	case "Squeeze":
		return c.squeeze()
	case "Unsqueeze":
		return c.unsqueeze()
	case "Expand":
		return c.expand()
	case "Tile":
		return c.tile()
	case "Concat":
		return c.concat()
	case "Split":
		return c.split()
	case "Slice":
		return c.slice()
	case "Gather":
		return c.gather()
	case "MatMul":
		return c.matmul()
	case "Gemm":
		return c.gemm()
	case "Softmax":
		x, err := c.req(0)
		if err != nil {
			return nil, err
		}
		if x.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(0), x.dt)
		}
		if x.shape != nil {
			if _, err := NormAxis(c.n.Int("axis", -1), len(x.shape)); err != nil {
				return nil, err
			}
		}
		return one(mk(x.dt, cloneShape(x.shape))), nil
	case "LayerNormalization":
		return c.layerNorm()
	case "ReduceMax", "ReduceMean", "ReduceSum":
		return c.reduce()
	}
	return nil, fmt.Errorf("no shape inference rule for op %q", c.n.Op)
}

// ---- elementwise ----

func unaryEval(op string) func(ival) ival {
	switch op {
	case "Neg":
		return func(a ival) ival {
			if a.known {
				return kv(-a.v)
			}
			return ival{}
		}
	case "Abs":
		return func(a ival) ival {
			if a.known {
				if a.v < 0 {
					return kv(-a.v)
				}
				return a
			}
			if a.sym != "" {
				return a // a dimension is never negative
			}
			return ival{}
		}
	case "Relu":
		return func(a ival) ival {
			if a.known {
				return kv(max(a.v, 0))
			}
			if a.sym != "" {
				return a
			}
			return ival{}
		}
	case "Not":
		return func(a ival) ival {
			if a.known {
				return kv(1 - a.v)
			}
			return ival{}
		}
	}
	return nil
}

func (c *nodeCtx) unary(ok func(tensor.DType) bool, want string, f func(ival) ival) ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !ok(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want %s", c.name(0), x.dt, want)
	}
	out := mk(x.dt, cloneShape(x.shape))
	if f != nil && x.vals != nil {
		out.vals = make([]ival, len(x.vals))
		for i, a := range x.vals {
			out.vals[i] = f(a)
		}
	}
	return one(out), nil
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

func (c *nodeCtx) elementwise(op string) ([]*absVal, error) {
	ins := make([]*absVal, len(c.in))
	for i := range c.in {
		v, err := c.req(i)
		if err != nil {
			return nil, err
		}
		ins[i] = v
	}
	dtErr := func(i int, want string) error {
		return fmt.Errorf("input %q has dtype %v, want %s", c.name(i), ins[i].dt, want)
	}
	outDT := ins[0].dt
	switch op {
	case "Add", "Sub", "Mul", "Div", "Max", "Min", "Greater", "Less":
		for i := range ins {
			if !isNumeric(ins[i].dt) {
				return nil, dtErr(i, "a number type")
			}
			if ins[i].dt != ins[0].dt {
				return nil, dtErr(i, ins[0].dt.String()+" like input "+fmt.Sprintf("%q", c.name(0)))
			}
		}
	case "Pow":
		for i := range ins {
			if !isNumeric(ins[i].dt) {
				return nil, dtErr(i, "a number type")
			}
		}
	case "And", "Or":
		for i := range ins {
			if ins[i].dt != tensor.Bool {
				return nil, dtErr(i, "bool")
			}
		}
	case "Equal":
		if ins[1].dt != ins[0].dt {
			return nil, dtErr(1, ins[0].dt.String())
		}
	case "Where":
		if ins[0].dt != tensor.Bool {
			return nil, dtErr(0, "bool")
		}
		if ins[2].dt != ins[1].dt {
			return nil, dtErr(2, ins[1].dt.String())
		}
		outDT = ins[1].dt
	}
	if op == "Equal" || op == "Greater" || op == "Less" {
		outDT = tensor.Bool
	}
	shapes := make([]Shape, len(ins))
	for i, v := range ins {
		shapes[i] = v.shape
	}
	shape, err := Broadcast(shapes...)
	if err != nil {
		return nil, err
	}
	out := mk(outDT, shape)
	f := binaryEval(op)
	if f == nil || !trackable(outDT, shape) {
		return one(out), nil
	}
	if op != "Where" && !tracksVals(ins[0].dt) {
		return one(out), nil
	}
	for _, v := range ins {
		if v.vals == nil {
			return one(out), nil
		}
	}
	vals, err := evalBroadcast(sizes(shape), ins, f)
	if err != nil {
		return nil, err
	}
	out.vals = vals
	return one(out), nil
}

func binaryEval(op string) func([]ival) (ival, error) {
	switch op {
	case "Add":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			switch {
			case a.known && b.known:
				return kv(a.v + b.v), nil
			case a.known && a.v == 0:
				return b, nil
			case b.known && b.v == 0:
				return a, nil
			}
			return ival{}, nil
		}
	case "Sub":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			switch {
			case a.known && b.known:
				return kv(a.v - b.v), nil
			case b.known && b.v == 0:
				return a, nil
			case a.sym != "" && a.sym == b.sym:
				return kv(0), nil
			}
			return ival{}, nil
		}
	case "Mul":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			switch {
			case a.known && b.known:
				return kv(a.v * b.v), nil
			case (a.known && a.v == 0) || (b.known && b.v == 0):
				return kv(0), nil
			case a.known && a.v == 1:
				return b, nil
			case b.known && b.v == 1:
				return a, nil
			}
			return ival{}, nil
		}
	case "Div":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			switch {
			case b.known && b.v == 0:
				return ival{}, errors.New("integer division by zero")
			case a.known && b.known:
				return kv(a.v / b.v), nil
			case b.known && b.v == 1:
				return a, nil
			}
			return ival{}, nil
		}
	case "Pow":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			if !a.known || !b.known {
				return ival{}, nil
			}
			if b.v < 0 {
				switch a.v {
				case 1:
					return kv(1), nil
				case -1:
					if b.v%2 == 0 {
						return kv(1), nil
					}
					return kv(-1), nil
				case 0:
					return ival{}, errors.New("integer 0 raised to a negative power")
				}
				return kv(0), nil
			}
			r := int64(1)
			for i := int64(0); i < b.v && i < 64; i++ {
				r *= a.v
			}
			return kv(r), nil
		}
	case "Max", "Min":
		return func(x []ival) (ival, error) {
			r := x[0]
			for _, b := range x[1:] {
				if !r.known || !b.known {
					return ival{}, nil
				}
				if (op == "Max") == (b.v > r.v) {
					r = b
				}
			}
			return r, nil
		}
	case "And":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			switch {
			case (a.known && a.v == 0) || (b.known && b.v == 0):
				return kv(0), nil
			case a.known && b.known:
				return kv(1), nil
			}
			return ival{}, nil
		}
	case "Or":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			switch {
			case (a.known && a.v != 0) || (b.known && b.v != 0):
				return kv(1), nil
			case a.known && b.known:
				return kv(0), nil
			}
			return ival{}, nil
		}
	case "Equal", "Greater", "Less":
		return func(x []ival) (ival, error) {
			a, b := x[0], x[1]
			if a.known && b.known {
				t := (op == "Equal" && a.v == b.v) || (op == "Greater" && a.v > b.v) || (op == "Less" && a.v < b.v)
				if t {
					return kv(1), nil
				}
				return kv(0), nil
			}
			if a.sym != "" && a.sym == b.sym {
				if op == "Equal" {
					return kv(1), nil
				}
				return kv(0), nil
			}
			return ival{}, nil
		}
	case "Where":
		return func(x []ival) (ival, error) {
			cond, a, b := x[0], x[1], x[2]
			switch {
			case cond.known && cond.v != 0:
				return a, nil
			case cond.known:
				return b, nil
			case a == b && (a.known || a.sym != ""):
				return a, nil
			}
			return ival{}, nil
		}
	}
	return nil
}

// forEach calls f with every index of shape in row-major order; idx is reused between calls.
func forEach(shape []int64, f func(idx []int64) error) error {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	if n == 0 {
		return nil
	}
	idx := make([]int64, len(shape))
	for {
		if err := f(idx); err != nil {
			return err
		}
		k := len(shape) - 1
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return nil
		}
	}
}

func strides(shape []int64) []int64 {
	s := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// bcastOffset is the flat offset in a tensor of shape in for an index of the broadcast shape.
func bcastOffset(idx, in, st []int64) int64 {
	off := int64(0)
	lead := len(idx) - len(in)
	for j := range in {
		if in[j] != 1 {
			off += idx[lead+j] * st[j]
		}
	}
	return off
}

func evalBroadcast(out []int64, ins []*absVal, f func([]ival) (ival, error)) ([]ival, error) {
	inShapes := make([][]int64, len(ins))
	inStrides := make([][]int64, len(ins))
	for i, v := range ins {
		if !fullyKnown(v.shape) {
			return nil, nil
		}
		inShapes[i] = sizes(v.shape)
		inStrides[i] = strides(inShapes[i])
	}
	var res []ival
	args := make([]ival, len(ins))
	err := forEach(out, func(idx []int64) error {
		for i, v := range ins {
			off := bcastOffset(idx, inShapes[i], inStrides[i])
			if off < 0 || off >= int64(len(v.vals)) {
				return errors.New("internal: broadcast index out of range")
			}
			args[i] = v.vals[off]
		}
		r, err := f(args)
		if err != nil {
			return err
		}
		res = append(res, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = []ival{}
	}
	return res, nil
}

// remap builds out's values by reading src (of shape srcShape) at the index that at(outIdx,
// srcIdx) fills in.
func remap(out []int64, src []ival, srcShape []int64, at func(o, s []int64)) ([]ival, error) {
	st := strides(srcShape)
	sIdx := make([]int64, len(srcShape))
	res := []ival{}
	err := forEach(out, func(idx []int64) error {
		at(idx, sIdx)
		off := int64(0)
		for j := range sIdx {
			if sIdx[j] < 0 || sIdx[j] >= srcShape[j] {
				return fmt.Errorf("internal: index %v out of range for shape %v", sIdx, srcShape)
			}
			off += sIdx[j] * st[j]
		}
		if off >= int64(len(src)) {
			return fmt.Errorf("internal: offset %d out of range", off)
		}
		res = append(res, src[off])
		return nil
	})
	return res, err
}

// ---- type and constant ops ----

func (c *nodeCtx) cast() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	a, ok := c.n.Attrs["to"]
	if !ok || a.Kind != AttrInt {
		return nil, errors.New(`Cast needs the integer attribute "to"`)
	}
	to := tensor.DType(a.I)
	if to.Size() == 0 {
		return nil, fmt.Errorf("Cast to unsupported dtype %v", to)
	}
	out := mk(to, cloneShape(x.shape))
	conv := func(v int64) int64 {
		switch to {
		case tensor.Bool:
			if v != 0 {
				return 1
			}
			return 0
		case tensor.Int32:
			return int64(int32(v))
		}
		return v
	}
	switch {
	case x.vals != nil && tracksVals(to):
		out.vals = make([]ival, len(x.vals))
		for i, v := range x.vals {
			if v.known {
				out.vals[i] = kv(conv(v.v))
			} else if to == tensor.Int64 || (to == tensor.Int32 && isInt(x.dt)) {
				out.vals[i] = v
			}
		}
	case x.vals != nil && to == tensor.Float32:
		fs := make([]float32, len(x.vals))
		for i, v := range x.vals {
			if !v.known {
				return one(out), nil
			}
			fs[i] = float32(v.v)
		}
		out.floats = fs
	case x.floats != nil && tracksVals(to):
		vs := make([]ival, len(x.floats))
		for i, f := range x.floats {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || math.Abs(float64(f)) > 1<<62 {
				return one(out), nil
			}
			if to == tensor.Bool {
				vs[i] = kv(conv(map[bool]int64{true: 1, false: 0}[f != 0]))
			} else {
				vs[i] = kv(conv(int64(f)))
			}
		}
		out.vals = vs
	case x.floats != nil && to == tensor.Float32:
		out.floats = x.floats
	}
	return one(out), nil
}

func (c *nodeCtx) shapeOp() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if x.shape == nil {
		return one(mk(tensor.Int64, Shape{unknownDim})), nil
	}
	r := int64(len(x.shape))
	clamp := func(v int64) int64 {
		if v < 0 {
			v += r
		}
		return min(max(v, 0), r)
	}
	start := clamp(c.n.Int("start", 0))
	end := clamp(c.n.Int("end", r))
	if end < start {
		end = start
	}
	out := mk(tensor.Int64, Shape{Fixed(end - start)})
	out.vals = make([]ival, 0, end-start)
	for _, d := range x.shape[start:end] {
		if d.Known() {
			out.vals = append(out.vals, kv(d.Size))
		} else {
			out.vals = append(out.vals, ival{sym: d.Param})
		}
	}
	return one(out), nil
}

func (c *nodeCtx) constant() ([]*absVal, error) {
	for name, a := range c.n.Attrs {
		switch {
		case name == "value" && a.Kind == AttrTensor:
			if err := a.T.Check(); err != nil {
				return nil, fmt.Errorf("attribute value: %w", err)
			}
			return one(fromTensor(a.T)), nil
		case name == "value_int" && a.Kind == AttrInt:
			return one(fromTensor(tensor.Scalar64(a.I))), nil
		case name == "value_ints" && a.Kind == AttrInts:
			t, _ := tensor.FromInt64(append([]int64{}, a.Ints...), len(a.Ints))
			return one(fromTensor(t)), nil
		case name == "value_float" && a.Kind == AttrFloat:
			return one(fromTensor(tensor.ScalarF(a.F))), nil
		case name == "value_floats" && a.Kind == AttrFloats:
			t, _ := tensor.FromFloat32(append([]float32{}, a.Floats...), len(a.Floats))
			return one(fromTensor(t)), nil
		}
	}
	return nil, errors.New("Constant needs one of the attributes value (tensor), value_int, value_ints, value_float, value_floats")
}

// shapeFromVec reads a 1-D shape vector input as dimensions: from its values when evaluated,
// else as unknown dimensions of the vector's length, else nil.
func (c *nodeCtx) shapeFromVec(i int, what string) (Shape, error) {
	if e := c.elems(i, what); e != nil {
		s := make(Shape, len(e))
		for j, x := range e {
			switch {
			case x.known && x.v < 0:
				return nil, fmt.Errorf("%s input %q has negative entry %d", what, c.name(i), x.v)
			case x.known:
				s[j] = Fixed(x.v)
			default:
				s[j] = Dim{Size: -1, Param: x.sym}
			}
		}
		return s, nil
	}
	v := c.arg(i)
	if v != nil && v.shape != nil && len(v.shape) == 1 && v.shape[0].Known() {
		s := make(Shape, v.shape[0].Size)
		for j := range s {
			s[j] = unknownDim
		}
		return s, nil
	}
	return nil, nil
}

func (c *nodeCtx) constantOfShape() ([]*absVal, error) {
	if err := c.checkVec(0, "shape", false); err != nil {
		return nil, err
	}
	dt := tensor.Float32
	fill := ival{}
	var ffill float32
	if a, ok := c.n.Attrs["value"]; ok {
		if a.Kind != AttrTensor || a.T.Check() != nil || a.T.Len() != 1 {
			return nil, errors.New("attribute value must be a one-element tensor")
		}
		dt = a.T.DType
		switch {
		case a.T.I64 != nil:
			fill = kv(a.T.I64[0])
		case a.T.Bool != nil:
			fill = kv(map[bool]int64{true: 1, false: 0}[a.T.Bool[0]])
		case a.T.F32 != nil:
			ffill = a.T.F32[0]
		}
	}
	s, err := c.shapeFromVec(0, "shape")
	if err != nil {
		return nil, err
	}
	out := mk(dt, s)
	if n, ok := numel(s); ok && n <= MaxEvalElements {
		if tracksVals(dt) {
			out.vals = make([]ival, n)
			for i := range out.vals {
				out.vals[i] = fill
			}
		} else if dt == tensor.Float32 {
			out.floats = make([]float32, n)
			for i := range out.floats {
				out.floats[i] = ffill
			}
		}
	}
	return one(out), nil
}

func (c *nodeCtx) rangeOp() ([]*absVal, error) {
	var dt tensor.DType
	for i := 0; i < 3; i++ {
		v, err := c.req(i)
		if err != nil {
			return nil, err
		}
		if !isNumeric(v.dt) {
			return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(i), v.dt)
		}
		if i == 0 {
			dt = v.dt
		} else if v.dt != dt {
			return nil, fmt.Errorf("input %q has dtype %v, want %v like the start", c.name(i), v.dt, dt)
		}
		if v.shape != nil && len(v.shape) != 0 && !(len(v.shape) == 1 && v.shape[0].Known() && v.shape[0].Size == 1) {
			return nil, fmt.Errorf("input %q has shape %v, want a scalar", c.name(i), v.shape)
		}
	}
	out := mk(dt, Shape{unknownDim})
	if isInt(dt) {
		a, ok1 := c.ints(0, "start")
		b, ok2 := c.ints(1, "limit")
		d, ok3 := c.ints(2, "delta")
		if !ok1 || !ok2 || !ok3 || len(a) != 1 || len(b) != 1 || len(d) != 1 {
			return one(out), nil
		}
		if d[0] == 0 {
			return nil, errors.New("delta is zero")
		}
		num := b[0] - a[0]
		n := num / d[0]
		if num%d[0] != 0 && (num < 0) == (d[0] < 0) {
			n++
		}
		n = max(n, 0)
		out.shape = Shape{Fixed(n)}
		if n <= MaxEvalElements {
			out.vals = make([]ival, n)
			for i := range out.vals {
				out.vals[i] = kv(a[0] + int64(i)*d[0])
			}
		}
		return one(out), nil
	}
	var f [3]float64
	for i := 0; i < 3; i++ {
		v := c.arg(i)
		if len(v.floats) != 1 {
			if c.missing == "" {
				c.missing = fmt.Sprintf("the value of float input %q is not a known constant", c.name(i))
			}
			return one(out), nil
		}
		f[i] = float64(v.floats[0])
	}
	if f[2] == 0 {
		return nil, errors.New("delta is zero")
	}
	n := math.Ceil((f[1] - f[0]) / f[2])
	if math.IsNaN(n) || n > 1<<40 {
		return nil, fmt.Errorf("range (%v, %v, %v) has no finite length", f[0], f[1], f[2])
	}
	out.shape = Shape{Fixed(int64(max(n, 0)))}
	return one(out), nil
}

// ---- layout ops ----

func (c *nodeCtx) reshape() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "shape", false); err != nil {
		return nil, err
	}
	allowZero := c.n.Int("allowzero", 0) != 0
	e := c.elems(1, "shape")
	if e == nil {
		s, _ := c.shapeFromVec(1, "shape")
		return one(mk(x.dt, s)), nil
	}
	if fullyKnown(x.shape) {
		if target, ok := c.ints(1, "shape"); ok {
			dims, err := ReshapeDims(ints(sizes(x.shape)), target, allowZero)
			if err != nil {
				return nil, err
			}
			res := mk(x.dt, shapeOf(dims))
			res.vals = x.vals
			return one(res), nil
		}
		c.missing = ""
	}
	out := make(Shape, len(e))
	infer := -1
	for i, v := range e {
		switch {
		case !v.known:
			out[i] = Dim{Size: -1, Param: v.sym}
		case v.v == 0 && !allowZero:
			switch {
			case x.shape == nil:
				out[i] = unknownDim
			case i < len(x.shape):
				out[i] = x.shape[i]
			default:
				return nil, fmt.Errorf("shape entry %d is 0 (copy) but the input %v has rank %d", i, x.shape, len(x.shape))
			}
		case v.v == -1:
			if infer >= 0 {
				return nil, errors.New("shape has more than one -1")
			}
			infer = i
			out[i] = unknownDim
		case v.v < 0:
			return nil, fmt.Errorf("shape entry %d is %d (only -1 and sizes ≥ 0 are valid)", i, v.v)
		default:
			out[i] = Fixed(v.v)
		}
	}
	if x.shape != nil {
		if infer >= 0 {
			d, err := inferReshapeDim(x.shape, out, infer)
			if err != nil {
				return nil, err
			}
			out[infer] = d
		}
		if a, ok := numel(x.shape); ok {
			if b, ok := numel(out); ok && a != b {
				return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v (%d elements)", x.shape, a, out, b)
			}
		}
	}
	res := mk(x.dt, out)
	if x.vals != nil && fullyKnown(out) {
		res.vals = x.vals
	}
	res.floats = nil
	return one(res), nil
}

// inferReshapeDim resolves Reshape's -1 at position at: the input's element count divided by
// the other output dimensions, cancelling matching symbolic dimensions.
func inferReshapeDim(in, out Shape, at int) (Dim, error) {
	pin, pout := int64(1), int64(1)
	syms := map[string]int{}
	for _, d := range in {
		switch {
		case d.Known():
			pin *= d.Size
		case d.Param != "":
			syms[d.Param]++
		default:
			return unknownDim, nil
		}
	}
	for i, d := range out {
		if i == at {
			continue
		}
		switch {
		case d.Known():
			pout *= d.Size
		case d.Param != "" && syms[d.Param] > 0:
			syms[d.Param]--
		default:
			return unknownDim, nil
		}
	}
	var left []string
	for s, k := range syms {
		for ; k > 0; k-- {
			left = append(left, s)
		}
	}
	switch {
	case len(left) == 0:
		if pout == 0 {
			if pin == 0 {
				return unknownDim, errors.New("cannot infer -1 with a zero-size dimension")
			}
			return Dim{}, fmt.Errorf("cannot reshape %v to %v", in, out)
		}
		if pin%pout != 0 {
			return Dim{}, fmt.Errorf("cannot reshape %v (%d elements) to %v: %d is not a multiple of %d", in, pin, out, pin, pout)
		}
		return Fixed(pin / pout), nil
	case len(left) == 1 && pin == pout:
		return Sym(left[0]), nil
	}
	return unknownDim, nil
}

func (c *nodeCtx) transpose() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	perm, hasPerm := c.n.IntList("perm")
	if x.shape == nil {
		if !hasPerm {
			return one(mk(x.dt, nil)), nil
		}
		s := make(Shape, len(perm))
		for i := range s {
			s[i] = unknownDim
		}
		return one(mk(x.dt, s)), nil
	}
	r := len(x.shape)
	if !hasPerm {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v has %d entries for input of rank %d %v", perm, len(perm), r, x.shape)
	}
	seen := make([]bool, r)
	out := make(Shape, r)
	for i, p := range perm {
		if p < 0 || p >= int64(r) || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, r-1)
		}
		seen[p] = true
		out[i] = x.shape[p]
	}
	res := mk(x.dt, out)
	if x.vals != nil {
		vals, err := remap(sizes(out), x.vals, sizes(x.shape), func(o, s []int64) {
			for i, p := range perm {
				s[p] = o[i]
			}
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

// axesList reads axes from input i when present (value needed) or from the attribute.
func (c *nodeCtx) axesList(i int) (axes []int64, present, ok bool) {
	if c.arg(i) != nil {
		a, ok := c.ints(i, "axes")
		return a, true, ok
	}
	if a, has := c.n.IntList("axes"); has {
		return a, true, true
	}
	return nil, false, true
}

func (c *nodeCtx) squeeze() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "axes", false); err != nil {
		return nil, err
	}
	axes, present, ok := c.axesList(1)
	if !ok || x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	if fullyKnown(x.shape) {
		if present && axes == nil {
			axes = []int64{}
		}
		dims, err := SqueezeDims(ints(sizes(x.shape)), axes)
		if err != nil {
			return nil, err
		}
		res := mk(x.dt, shapeOf(dims))
		res.vals = x.vals
		return one(res), nil
	}
	drop := make([]bool, len(x.shape))
	if present {
		for _, a := range axes {
			k, err := NormAxis(a, len(x.shape))
			if err != nil {
				return nil, err
			}
			if d := x.shape[k]; d.Known() && d.Size != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d in %v", a, d.Size, x.shape)
			}
			drop[k] = true
		}
	} else {
		for k, d := range x.shape {
			if !d.Known() {
				return one(mk(x.dt, nil)), nil
			}
			drop[k] = d.Size == 1
		}
	}
	out := Shape{}
	for k, d := range x.shape {
		if !drop[k] {
			out = append(out, d)
		}
	}
	res := mk(x.dt, out)
	res.vals = x.vals
	return one(res), nil
}

func (c *nodeCtx) unsqueeze() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "axes", true); err != nil {
		return nil, err
	}
	axes, _, ok := c.axesList(1)
	if !ok || x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	if fullyKnown(x.shape) {
		dims, err := UnsqueezeDims(ints(sizes(x.shape)), axes)
		if err != nil {
			return nil, err
		}
		res := mk(x.dt, shapeOf(dims))
		res.vals = x.vals
		return one(res), nil
	}
	r := len(x.shape) + len(axes)
	ins := make([]bool, r)
	for _, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if ins[k] {
			return nil, fmt.Errorf("axes %v repeat axis %d", axes, a)
		}
		ins[k] = true
	}
	out := make(Shape, r)
	j := 0
	for k := range out {
		if ins[k] {
			out[k] = Fixed(1)
			continue
		}
		out[k] = x.shape[j]
		j++
	}
	res := mk(x.dt, out)
	res.vals = x.vals
	return one(res), nil
}

func (c *nodeCtx) expand() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "shape", false); err != nil {
		return nil, err
	}
	target, err := c.shapeFromVec(1, "shape")
	if err != nil {
		return nil, err
	}
	out, err := Broadcast(x.shape, target)
	if err != nil {
		return nil, err
	}
	res := mk(x.dt, out)
	if x.vals != nil && trackable(x.dt, out) {
		vals, err := evalBroadcast(sizes(out), []*absVal{x}, func(v []ival) (ival, error) { return v[0], nil })
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

func (c *nodeCtx) tile() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if _, err := c.req(1); err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "repeats", false); err != nil {
		return nil, err
	}
	reps, ok := c.ints(1, "repeats")
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	out := make(Shape, len(x.shape))
	if !ok {
		for i := range out {
			out[i] = unknownDim
		}
		return one(mk(x.dt, out)), nil
	}
	if len(reps) != len(x.shape) {
		return nil, fmt.Errorf("repeats has %d entries for input of rank %d", len(reps), len(x.shape))
	}
	for i, d := range x.shape {
		switch r := reps[i]; {
		case r < 0:
			return nil, fmt.Errorf("negative repeat %d", r)
		case d.Known():
			out[i] = Fixed(d.Size * r)
		case r == 1:
			out[i] = d
		case r == 0:
			out[i] = Fixed(0)
		default:
			out[i] = unknownDim
		}
	}
	res := mk(x.dt, out)
	if x.vals != nil && trackable(x.dt, out) {
		in := sizes(x.shape)
		vals, err := remap(sizes(out), x.vals, in, func(o, s []int64) {
			for i := range s {
				s[i] = o[i] % in[i]
			}
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

// mergeDim merges two dimensions that must be equal; ok is false when both are known and differ.
func mergeDim(a, b Dim) (Dim, bool) {
	switch {
	case a.Known() && b.Known():
		return a, a.Size == b.Size
	case a.Known():
		return a, true
	case b.Known():
		return b, true
	case a.Param != "" && a.Param == b.Param:
		return a, true
	}
	return unknownDim, true
}

func (c *nodeCtx) concat() ([]*absVal, error) {
	a, ok := c.n.Attrs["axis"]
	if !ok || a.Kind != AttrInt {
		return nil, errors.New(`Concat needs the integer attribute "axis"`)
	}
	var first *absVal
	var shape Shape
	for i := range c.in {
		v, err := c.req(i)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = v
		} else if v.dt != first.dt {
			return nil, fmt.Errorf("input %q has dtype %v, want %v like input %q", c.name(i), v.dt, first.dt, c.name(0))
		}
		if v.shape == nil {
			continue
		}
		if shape != nil && len(v.shape) != len(shape) {
			return nil, fmt.Errorf("input %q has rank %d (%v), others rank %d", c.name(i), len(v.shape), v.shape, len(shape))
		}
		if shape == nil {
			shape = v.shape
		}
	}
	if shape == nil {
		return one(mk(first.dt, nil)), nil
	}
	axis, err := NormAxis(a.I, len(shape))
	if err != nil {
		return nil, err
	}
	out := cloneShape(shape)
	sum := int64(0)
	sumKnown := true
	for i, v := range c.in {
		if v.shape == nil {
			sumKnown = false
			continue
		}
		for k, d := range v.shape {
			if k == axis {
				if d.Known() {
					sum += d.Size
				} else {
					sumKnown = false
				}
				continue
			}
			m, ok := mergeDim(out[k], d)
			if !ok {
				return nil, fmt.Errorf("input %q has shape %v, which differs from %v off the concat axis %d", c.name(i), v.shape, shape, axis)
			}
			out[k] = m
		}
	}
	out[axis] = unknownDim
	if sumKnown {
		out[axis] = Fixed(sum)
	} else if len(c.in) == 1 {
		out[axis] = shape[axis]
	}
	res := mk(first.dt, out)
	if !trackable(first.dt, out) {
		return one(res), nil
	}
	total, _ := numel(out)
	full := make([]ival, total)
	ost := strides(sizes(out))
	off := int64(0)
	for _, v := range c.in {
		if v.vals == nil {
			return one(res), nil
		}
		in := sizes(v.shape)
		ist := strides(in)
		err := forEach(in, func(idx []int64) error {
			src, dst := int64(0), int64(0)
			for k := range idx {
				src += idx[k] * ist[k]
				j := idx[k]
				if k == axis {
					j += off
				}
				dst += j * ost[k]
			}
			if src >= int64(len(v.vals)) || dst >= int64(len(full)) {
				return errors.New("internal: concat index out of range")
			}
			full[dst] = v.vals[src]
			return nil
		})
		if err != nil {
			return nil, err
		}
		off += in[axis]
	}
	res.vals = full
	return one(res), nil
}

func (c *nodeCtx) split() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if err := c.checkVec(1, "split", false); err != nil {
		return nil, err
	}
	k := len(c.n.Outputs)
	outs := make([]*absVal, k)
	if x.shape == nil {
		for i := range outs {
			outs[i] = mk(x.dt, nil)
		}
		return outs, nil
	}
	axis, err := NormAxis(c.n.Int("axis", 0), len(x.shape))
	if err != nil {
		return nil, err
	}
	dim := x.shape[axis]
	parts := make([]Dim, k)
	switch {
	case c.arg(1) != nil:
		sp, ok := c.ints(1, "split")
		if !ok {
			for i := range parts {
				parts[i] = unknownDim
			}
			break
		}
		if len(sp) != k {
			return nil, fmt.Errorf("split has %d entries for %d outputs", len(sp), k)
		}
		sum := int64(0)
		for i, s := range sp {
			if s < 0 {
				return nil, fmt.Errorf("split entry %d is negative (%d)", i, s)
			}
			sum += s
			parts[i] = Fixed(s)
		}
		if dim.Known() && sum != dim.Size {
			return nil, fmt.Errorf("split sizes %v sum to %d, but axis %d has size %d", sp, sum, axis, dim.Size)
		}
	case dim.Known():
		n := dim.Size
		if num := c.n.Int("num_outputs", 0); num != 0 {
			if num != int64(k) {
				return nil, fmt.Errorf("num_outputs is %d but the node has %d outputs", num, k)
			}
			chunk := (n + num - 1) / num
			for i := range parts {
				s := min(chunk, max(n-int64(i)*chunk, 0))
				parts[i] = Fixed(s)
			}
			break
		}
		if n%int64(k) != 0 {
			return nil, fmt.Errorf("axis %d of size %d does not split evenly into %d outputs", axis, n, k)
		}
		for i := range parts {
			parts[i] = Fixed(n / int64(k))
		}
	default:
		for i := range parts {
			parts[i] = unknownDim
		}
		if k == 1 {
			parts[0] = dim
		}
	}
	start := int64(0)
	for i := range outs {
		s := cloneShape(x.shape)
		s[axis] = parts[i]
		outs[i] = mk(x.dt, s)
		if x.vals != nil && fullyKnown(s) {
			off := start
			vals, err := remap(sizes(s), x.vals, sizes(x.shape), func(o, src []int64) {
				copy(src, o)
				src[axis] += off
			})
			if err != nil {
				return nil, err
			}
			outs[i].vals = vals
		}
		if parts[i].Known() {
			start += parts[i].Size
		}
	}
	return outs, nil
}

func (c *nodeCtx) slice() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	for i, what := range []string{"starts", "ends", "axes", "steps"} {
		if i < 2 {
			if _, err := c.req(i + 1); err != nil {
				return nil, err
			}
		}
		if err := c.checkVec(i+1, what, false); err != nil {
			return nil, err
		}
	}
	if x.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	r := len(x.shape)
	starts := c.elems(1, "starts")
	ends := c.elems(2, "ends")
	var axes, steps []int64
	ok := true
	if c.arg(3) != nil {
		axes, ok = c.ints(3, "axes")
	}
	if ok && c.arg(4) != nil {
		steps, ok = c.ints(4, "steps")
	}
	if starts == nil || ends == nil || !ok {
		out := make(Shape, r)
		for i := range out {
			out[i] = unknownDim
		}
		// Axes that are not sliced keep their size when it is known which axes are sliced.
		var sliced []int64
		known := true
		switch {
		case c.arg(3) != nil:
			sliced, known = axes, axes != nil
		default:
			st := c.arg(1)
			if known = st.shape != nil && len(st.shape) == 1 && st.shape[0].Known(); known {
				for k := int64(0); k < st.shape[0].Size; k++ {
					sliced = append(sliced, k)
				}
			}
		}
		if known {
			copy(out, x.shape)
			for _, a := range sliced {
				if k, err := NormAxis(a, r); err == nil {
					out[k] = unknownDim
				}
			}
		}
		return one(mk(x.dt, out)), nil
	}
	if len(starts) != len(ends) {
		return nil, fmt.Errorf("starts has %d entries, ends %d", len(starts), len(ends))
	}
	if axes == nil {
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("starts, ends, axes and steps have %d, %d, %d and %d entries", len(starts), len(ends), len(axes), len(steps))
	}
	out := cloneShape(x.shape)
	first := make([]int64, r)
	step := make([]int64, r)
	for i := range step {
		step[i] = 1
	}
	seen := make([]bool, r)
	for i, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, fmt.Errorf("axes %v repeat axis %d", axes, a)
		}
		seen[k] = true
		if steps[i] == 0 {
			return nil, fmt.Errorf("step for axis %d is 0", a)
		}
		step[k] = steps[i]
		d, s, e := x.shape[k], starts[i], ends[i]
		switch {
		case d.Known() && s.known && e.known:
			f, n := SliceBound(s.v, e.v, steps[i], d.Size)
			first[k] = f
			out[k] = Fixed(n)
		case s.known && s.v == 0 && steps[i] == 1 && e.known && e.v >= math.MaxInt32:
			// x[0:] keeps the whole axis.
		case s.known && s.v == 0 && steps[i] == 1 && !e.known && e.sym != "":
			// x[0:seq]: a valid graph's symbolic bound lies within the axis.
			out[k] = Sym(e.sym)
		default:
			out[k] = unknownDim
		}
	}
	res := mk(x.dt, out)
	if x.vals != nil && fullyKnown(out) {
		vals, err := remap(sizes(out), x.vals, sizes(x.shape), func(o, s []int64) {
			for k := range s {
				s[k] = first[k] + o[k]*step[k]
			}
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

func (c *nodeCtx) gather() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	idx, err := c.req(1)
	if err != nil {
		return nil, err
	}
	if !isInt(idx.dt) {
		return nil, fmt.Errorf("indices input %q has dtype %v, want int64 or int32", c.name(1), idx.dt)
	}
	if x.shape == nil || idx.shape == nil {
		return one(mk(x.dt, nil)), nil
	}
	if len(x.shape) == 0 {
		return nil, errors.New("data must have rank ≥ 1, got a scalar")
	}
	axis, err := NormAxis(c.n.Int("axis", 0), len(x.shape))
	if err != nil {
		return nil, err
	}
	out := Shape{}
	out = append(out, x.shape[:axis]...)
	out = append(out, idx.shape...)
	out = append(out, x.shape[axis+1:]...)
	res := mk(x.dt, out)
	dim := x.shape[axis]
	var ind []int64
	if idx.vals != nil {
		ind = make([]int64, len(idx.vals))
		for i, v := range idx.vals {
			if !v.known {
				ind = nil
				break
			}
			ind[i] = v.v
		}
	}
	if ind != nil && dim.Known() {
		for i, v := range ind {
			if v < -dim.Size || v >= dim.Size {
				return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", v, axis, dim.Size)
			}
			if v < 0 {
				ind[i] = v + dim.Size
			}
		}
	}
	if x.vals != nil && ind != nil && fullyKnown(out) && fullyKnown(x.shape) {
		q := len(idx.shape)
		ist := strides(sizes(idx.shape))
		vals, err := remap(sizes(out), x.vals, sizes(x.shape), func(o, s []int64) {
			copy(s[:axis], o[:axis])
			f := int64(0)
			for j := 0; j < q; j++ {
				f += o[axis+j] * ist[j]
			}
			if f < int64(len(ind)) {
				s[axis] = ind[f]
			}
			copy(s[axis+1:], o[axis+q:])
		})
		if err != nil {
			return nil, err
		}
		res.vals = vals
	}
	return one(res), nil
}

// ---- compute ops ----

func (c *nodeCtx) matmul() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i, v := range []*absVal{a, b} {
		if v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	out, err := matmulShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	return one(mk(tensor.Float32, out)), nil
}

// matmulShape is numpy matmul's output shape.
func matmulShape(a, b Shape) (Shape, error) {
	if a == nil || b == nil {
		return nil, nil
	}
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("MatMul operands must have rank ≥ 1, got %v and %v", a, b)
	}
	aa, bb := a, b
	if len(aa) == 1 {
		aa = Shape{Fixed(1), aa[0]}
	}
	if len(bb) == 1 {
		bb = Shape{bb[0], Fixed(1)}
	}
	ka, kb := aa[len(aa)-1], bb[len(bb)-2]
	if ka.Known() && kb.Known() && ka.Size != kb.Size {
		return nil, fmt.Errorf("inner dimensions differ: %v × %v (%d vs %d)", a, b, ka.Size, kb.Size)
	}
	batch, err := Broadcast(aa[:len(aa)-2], bb[:len(bb)-2])
	if err != nil {
		return nil, fmt.Errorf("batch dimensions of %v and %v: %w", a, b, err)
	}
	out := append(Shape{}, batch...)
	if len(a) > 1 {
		out = append(out, aa[len(aa)-2])
	}
	if len(b) > 1 {
		out = append(out, bb[len(bb)-1])
	}
	return out, nil
}

func (c *nodeCtx) gemm() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i := range c.in {
		if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	if a.shape == nil || b.shape == nil {
		return one(mk(tensor.Float32, Shape{unknownDim, unknownDim})), nil
	}
	if len(a.shape) != 2 || len(b.shape) != 2 {
		return nil, fmt.Errorf("Gemm operands must be 2-D, got %v and %v", a.shape, b.shape)
	}
	m, ka := a.shape[0], a.shape[1]
	if c.n.Int("transA", 0) != 0 {
		m, ka = ka, m
	}
	kb, n := b.shape[0], b.shape[1]
	if c.n.Int("transB", 0) != 0 {
		kb, n = n, kb
	}
	if ka.Known() && kb.Known() && ka.Size != kb.Size {
		return nil, fmt.Errorf("inner dimensions differ: %v × %v (%d vs %d, after transA/transB)", a.shape, b.shape, ka.Size, kb.Size)
	}
	out := Shape{m, n}
	if cv := c.arg(2); cv != nil && cv.shape != nil {
		bs, err := Broadcast(out, cv.shape)
		if err != nil {
			return nil, fmt.Errorf("C: %w", err)
		}
		if len(cv.shape) > 2 {
			return nil, fmt.Errorf("C has shape %v, which does not broadcast to (M, N) = %v", cv.shape, out)
		}
		for i := range out {
			if bs[i].Known() && out[i].Known() && bs[i].Size != out[i].Size {
				return nil, fmt.Errorf("C has shape %v, which does not broadcast to (M, N) = %v", cv.shape, out)
			}
		}
	}
	return one(mk(tensor.Float32, out)), nil
}

func (c *nodeCtx) layerNorm() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	scale, err := c.req(1)
	if err != nil {
		return nil, err
	}
	for i := range c.in {
		if v := c.arg(i); v != nil && v.dt != tensor.Float32 {
			return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(i), v.dt)
		}
	}
	outs := []*absVal{mk(x.dt, cloneShape(x.shape))}
	if x.shape == nil {
		outs = append(outs, mk(tensor.Float32, nil), mk(tensor.Float32, nil))
		return outs, nil
	}
	axis, err := NormAxis(c.n.Int("axis", -1), len(x.shape))
	if err != nil {
		return nil, err
	}
	norm := x.shape[axis:]
	for i, v := range []*absVal{scale, c.arg(2)} {
		if v == nil || v.shape == nil {
			continue
		}
		what := []string{"scale", "bias"}[i]
		bad := len(v.shape) > len(norm)
		if !bad {
			bs, err := Broadcast(norm, v.shape)
			bad = err != nil
			for j := range bs {
				if !bad && bs[j].Known() && norm[j].Known() && bs[j].Size != norm[j].Size {
					bad = true
				}
			}
		}
		if bad {
			return nil, fmt.Errorf("%s %q has shape %v, which does not broadcast to the normalized shape %v", what, c.name(i+1), v.shape, norm)
		}
	}
	stat := append(Shape{}, x.shape[:axis]...)
	for range norm {
		stat = append(stat, Fixed(1))
	}
	outs = append(outs, mk(tensor.Float32, stat), mk(tensor.Float32, cloneShape(stat)))
	return outs, nil
}

func (c *nodeCtx) reduce() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !isNumeric(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(0), x.dt)
	}
	if err := c.checkVec(1, "axes", false); err != nil {
		return nil, err
	}
	keep := c.n.Int("keepdims", 1) != 0
	axes, present, ok := c.axesList(1)
	if x.shape == nil || !ok {
		if !keep || x.shape == nil {
			return one(mk(x.dt, nil)), nil
		}
		out := make(Shape, len(x.shape))
		for i := range out {
			out[i] = unknownDim
		}
		return one(mk(x.dt, out)), nil
	}
	r := len(x.shape)
	red := make([]bool, r)
	if !present || len(axes) == 0 {
		if c.n.Int("noop_with_empty_axes", 0) != 0 {
			return one(mk(x.dt, cloneShape(x.shape))), nil
		}
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		red[k] = true
	}
	out := Shape{}
	for i, d := range x.shape {
		switch {
		case !red[i]:
			out = append(out, d)
		case keep:
			out = append(out, Fixed(1))
		}
	}
	return one(mk(x.dt, out)), nil
}
