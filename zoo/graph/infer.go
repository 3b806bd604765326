package graph

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

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

func isInt(dt tensor.DType) bool { return dt.IsInt() }
func isNumeric(dt tensor.DType) bool {
	return dt == tensor.Float32 || isInt(dt) || IsWide(dt) // IsWide: only ops that take them (checkWide)
}
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
	def      *OpDef
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

// infer runs the node's inference rule from the op table.
func (c *nodeCtx) infer() ([]*absVal, error) {
	if c.def == nil {
		d, ok := LookupNodeOp(c.n)
		if !ok {
			return nil, fmt.Errorf("unknown op type %q", c.n.Op)
		}
		c.def = d
	}
	if c.def.infer == nil {
		return nil, fmt.Errorf("no shape inference rule for op %q", c.n.Op)
	}
	outs, err := c.def.infer(c)
	if err != nil {
		return nil, err
	}
	return outs, c.checkWide(outs)
}

// checkWide refuses float64 and uint64 inputs and outputs of an op that does not take them.
func (c *nodeCtx) checkWide(outs []*absVal) error {
	for i, v := range c.in {
		if v != nil && !c.def.Takes(v.dt) {
			return fmt.Errorf("input %q is %v, which zoo's %s does not take (it computes %v in %s)", c.name(i), v.dt, c.n.Op, v.dt, wideOps(v.dt))
		}
	}
	for i, v := range outs {
		if v != nil && i < len(c.n.Outputs) && !c.def.Takes(v.dt) {
			return fmt.Errorf("output %q would be %v, which zoo's %s does not give (it computes %v in %s)", c.n.Outputs[i], v.dt, c.n.Op, v.dt, wideOps(v.dt))
		}
	}
	return nil
}

// wideOps lists the ops that take dt (float64 or uint64), for error messages.
func wideOps(dt tensor.DType) string {
	var names []string
	for _, d := range Ops() {
		if d.Domain == "" && d.Takes(dt) {
			names = append(names, d.Name)
		}
	}
	if len(names) == 0 {
		return "no op yet"
	}
	return strings.Join(names, ", ")
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
