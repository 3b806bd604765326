package graph

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Gradient rules. Every op of the table has a Grad: a rule that adds the nodes computing the
// gradients of its inputs from the gradients of its outputs, or NoGrad for ops whose outputs
// are piecewise constant in their inputs or not floating point (Shape, comparisons, Range).
// The rules emit ordinary ops of this table, so the backward graph runs wherever the forward
// graph runs and exports to ONNX. Package autodiff walks a graph in reverse and calls them.

// GradCtx is what a gradient rule sees: the builder extending the graph, the node, the names of
// the gradients flowing into its outputs ("" where an output gets none) and the static types of
// the node's inputs and outputs from InferShapes (a nil Shape where the rank is unknown).
type GradCtx struct {
	*Builder
	Node     *Node
	OutGrads []string
	In, Out  []ValueInfo
	// Need says which inputs want a gradient (they depend on a parameter); nil means all.
	// A rule may skip the others.
	Need []bool
	// Producer returns the node of the forward graph that computes a value (nil for graph
	// inputs and initializers, or when the caller does not say), so that a rule can read
	// through a Transpose instead of transposing back.
	Producer func(value string) *Node
}

// NoGrad is the gradient rule of an op that is not differentiable: its inputs get no
// gradient from it. Declaring it (rather than leaving Grad nil) says so explicitly.
func NoGrad(c *GradCtx) ([]string, error) { return make([]string, len(c.Node.Inputs)), nil }

// NoGradYet is the gradient rule of a differentiable op whose backward zoo does not have yet
// (ops that imported models use and zoo's own variants do not): differentiating through it
// is an error naming the op. Declaring it (rather than leaving Grad nil) says so explicitly,
// as a backend's UnsupportedOps does for kernels.
func NoGradYet(c *GradCtx) ([]string, error) {
	return nil, fmt.Errorf("node %q (%s): zoo has no gradient rule for %s yet; train a graph without it", c.Node.Name, c.Node.Op, c.Node.Op)
}

// Extend returns a Builder that adds to a copy of g: nodes, initializers, inputs and outputs
// are copied (nodes and tensors are shared, not cloned), builder constants already in g are
// reused, and new nodes are named under scope. Build validates the extended graph.
func (g *Graph) Extend(scope string) *Builder {
	ng := &Graph{
		Name: g.Name, Opset: g.Opset,
		Inputs:       append([]ValueInfo{}, g.Inputs...),
		Outputs:      append([]ValueInfo{}, g.Outputs...),
		Initializers: append([]Initializer{}, g.Initializers...),
		Nodes:        append([]*Node{}, g.Nodes...),
		ValueInfo:    map[string]ValueInfo{},
		Meta:         map[string]string{},
	}
	for k, v := range g.ValueInfo {
		ng.ValueInfo[k] = v
	}
	for k, v := range g.Meta {
		ng.Meta[k] = v
	}
	b := &Builder{g: ng, counts: map[string]int{}, consts: map[string]string{}}
	next := 0 // Const names its constants const::<count>: count past every such name in g
	for _, in := range g.Initializers {
		var k int
		if _, err := fmt.Sscanf(in.Name, constPrefix+"%d", &k); err == nil && k >= next {
			next = k + 1
		}
		if !IsConstName(in.Name) {
			continue
		}
		key := constKey(in.Tensor)
		if _, dup := b.consts[key]; dup {
			key = "dup:" + in.Name
		}
		b.consts[key] = in.Name
	}
	for i := 0; len(b.consts) < next; i++ {
		b.consts[fmt.Sprintf("reserved:%d", i)] = ""
	}
	if scope != "" {
		b.scope = []string{scope}
	}
	return b
}

// ConstTensor returns the tensor of the initializer name (a parameter, buffer or builder
// constant) of the graph being built, or nil when name is not an initializer.
func (b *Builder) ConstTensor(name string) *tensor.Tensor { return b.g.Initializer(name) }

// ---- helpers the rules share ----

func (c *GradCtx) zero() string { return c.ConstFloat(0) }
func (c *GradCtx) one() string  { return c.ConstFloat(1) }

// op1 adds a one-output node.
func (c *GradCtx) op1(op string, attrs Attrs, in ...string) string { return c.Op(op, in, attrs) }

// constInts returns the values of integer input i when it is a constant: an initializer or
// the output of a Constant node (as PyTorch exports axes and steps).
func (c *GradCtx) constInts(i int) ([]int64, bool) {
	name := c.Node.Input(i)
	if name == "" {
		return nil, false
	}
	t := c.ConstTensor(name)
	if t == nil && c.Producer != nil {
		if p := c.Producer(name); p != nil && p.Op == "Constant" && len(p.Outputs) == 1 {
			if outs, err := EvalNode(p, nil); err == nil {
				t = outs[0]
			}
		}
	}
	if t == nil || !isInt(t.DType) {
		return nil, false
	}
	return t.I64, true
}

// rank returns the static rank of input i, or an error naming the node when it is unknown.
func (c *GradCtx) rank(i int) (int, error) {
	if i >= len(c.In) || c.In[i].Shape == nil {
		return 0, fmt.Errorf("gradient of %s %q: input %d has no static rank", c.Node.Op, c.Node.Name, i)
	}
	return len(c.In[i].Shape), nil
}

// float reports whether input i is floating point and wanted (and so takes a gradient).
func (c *GradCtx) float(i int) bool {
	return i < len(c.In) && c.Node.Input(i) != "" && c.In[i].DType == tensor.Float32 && (c.Need == nil || c.Need[i])
}

// ReduceTo sums grad, a gradient of shape out (broadcast from in), back to the shape of the
// value name whose static shape is in: over the leading axes out has in excess and over the
// axes where in has a fixed 1 and out does not. Symbolic dimensions are taken to agree.
func (b *Builder) ReduceTo(grad string, out, in Shape, name string) (string, error) {
	if out == nil || in == nil {
		return "", fmt.Errorf("cannot reduce a broadcast gradient to %q: static rank unknown", name)
	}
	lead := len(out) - len(in)
	if lead < 0 {
		return "", fmt.Errorf("cannot reduce a gradient of rank %d to %q of rank %d", len(out), name, len(in))
	}
	var axes []int64
	for k := 0; k < len(out); k++ {
		if k < lead {
			axes = append(axes, int64(k))
			continue
		}
		d, o := in[k-lead], out[k]
		if d.Known() && d.Size == 1 && !(o.Known() && o.Size == 1) {
			axes = append(axes, int64(k))
		}
	}
	if len(axes) == 0 {
		return grad, nil
	}
	r := b.Op("ReduceSum", []string{grad, b.ConstInts(axes...)}, Attrs{"keepdims": Int(1)})
	if lead == 0 {
		return r, nil
	}
	return b.reshapeLike(r, in, name), nil
}

// reshapeLike reshapes x to the shape of value name (static shape s): a constant shape when s
// is fully known, Shape(name) otherwise.
func (b *Builder) reshapeLike(x string, s Shape, name string) string {
	if fullyKnown(s) {
		return b.Op("Reshape", []string{x, b.ConstInts(sizes(s)...)}, nil)
	}
	return b.Op("Reshape", []string{x, b.Shape(name)}, nil)
}

// reduceIn reduces a gradient of the node's output 0 to input i.
func (c *GradCtx) reduceIn(grad string, i int) (string, error) {
	return c.ReduceTo(grad, c.Out[0].Shape, c.In[i].Shape, c.Node.Inputs[i])
}

// transposeLast swaps the last two axes of a value of rank r; when x is itself such a
// transpose of a forward value, it returns that value rather than transposing twice.
func (c *GradCtx) transposeLast(x string, r int) string {
	if c.Producer != nil {
		if p := c.Producer(x); p != nil && p.Op == "Transpose" {
			if perm, ok := p.IntList("perm"); ok && len(perm) == r && swapsLast(perm) {
				return p.Inputs[0]
			}
		}
	}
	perm := make([]int64, r)
	for i := range perm {
		perm[i] = int64(i)
	}
	perm[r-1], perm[r-2] = perm[r-2], perm[r-1]
	return c.Transpose(x, perm...)
}

// grads builds the result: one entry per input, filled by the listed (index, name) pairs of
// the inputs that take a gradient.
func (c *GradCtx) grads() []string { return make([]string, len(c.Node.Inputs)) }

// ---- the rules ----

// unaryGrad returns the rule of the unary map op.
func unaryGrad(op string) GradFunc {
	return func(c *GradCtx) ([]string, error) {
		x, y, dy := c.Node.Inputs[0], c.Node.Outputs[0], c.OutGrads[0]
		g := c.grads()
		if dy == "" || !c.float(0) {
			return g, nil
		}
		switch op {
		case "Abs":
			g[0] = c.Where(c.op1("Less", nil, x, c.zero()), c.op1("Neg", nil, dy), c.Where(c.op1("Greater", nil, x, c.zero()), dy, c.zero()))
		case "Neg":
			g[0] = c.op1("Neg", nil, dy)
		case "Relu":
			// y > 0 exactly where x > 0; reading the output instead of the input lets the
			// pre-activation die at the Relu (a backend can then fuse bias and Relu into the
			// product before them, as in inference).
			g[0] = c.Where(c.op1("Greater", nil, y, c.zero()), dy, c.zero())
		case "Exp":
			g[0] = c.Mul(dy, y)
		case "Log":
			g[0] = c.Div(dy, x)
		case "Sqrt":
			g[0] = c.Div(dy, c.Mul(y, c.ConstFloat(2)))
		case "Erf":
			e := c.op1("Exp", nil, c.op1("Neg", nil, c.Mul(x, x)))
			g[0] = c.Mul(dy, c.Mul(e, c.ConstFloat(float32(2/math.Sqrt(math.Pi)))))
		case "Tanh":
			g[0] = c.Mul(dy, c.Sub(c.one(), c.Mul(y, y)))
		case "Sigmoid":
			g[0] = c.Mul(dy, c.Mul(y, c.Sub(c.one(), y)))
		default:
			return nil, fmt.Errorf("gradient of %s: no rule", op)
		}
		return g, nil
	}
}

func gradElu(c *GradCtx) ([]string, error) {
	x, y, dy := c.Node.Inputs[0], c.Node.Outputs[0], c.OutGrads[0]
	g := c.grads()
	if dy == "" || !c.float(0) {
		return g, nil
	}
	alpha := c.ConstFloat(attrFloat(c.Node, "alpha"))
	g[0] = c.Where(c.op1("Greater", nil, x, c.zero()), dy, c.Mul(dy, c.Add(y, alpha)))
	return g, nil
}

// binaryGrad returns the rule of a broadcasting arithmetic op.
func binaryGrad(op string) GradFunc {
	return func(c *GradCtx) ([]string, error) {
		a, b, y, dy := c.Node.Inputs[0], c.Node.Inputs[1], c.Node.Outputs[0], c.OutGrads[0]
		g := c.grads()
		if dy == "" {
			return g, nil
		}
		var ga, gb string
		switch op {
		case "Add":
			ga, gb = dy, dy
		case "Sub":
			ga, gb = dy, c.op1("Neg", nil, dy)
		case "Mul":
			if c.float(0) {
				ga = c.Mul(dy, b)
			}
			if c.float(1) {
				gb = c.Mul(dy, a)
			}
		case "Div":
			if c.float(0) {
				ga = c.Div(dy, b)
			}
			if c.float(1) {
				gb = c.op1("Neg", nil, c.Div(c.Mul(dy, y), b))
			}
		case "Pow":
			if c.float(0) {
				e := b
				if c.In[1].DType != tensor.Float32 {
					e = c.op1("Cast", Attrs{"to": Int(1)}, b)
				}
				ga = c.Mul(dy, c.Mul(e, c.op1("Pow", nil, a, c.Sub(e, c.one()))))
			}
			if c.float(1) {
				gb = c.Mul(dy, c.Mul(y, c.op1("Log", nil, a)))
			}
		default:
			return nil, fmt.Errorf("gradient of %s: no rule", op)
		}
		var err error
		if ga != "" && c.float(0) {
			if g[0], err = c.reduceIn(ga, 0); err != nil {
				return nil, err
			}
		}
		if gb != "" && c.float(1) {
			if g[1], err = c.reduceIn(gb, 1); err != nil {
				return nil, err
			}
		}
		return g, nil
	}
}

// gradMinMax sends the gradient to the inputs equal to the result, split evenly between ties
// (as PyTorch's maximum and minimum do for two inputs).
func gradMinMax(c *GradCtx) ([]string, error) {
	y, dy := c.Node.Outputs[0], c.OutGrads[0]
	g := c.grads()
	if dy == "" || c.Out[0].DType != tensor.Float32 {
		return g, nil
	}
	masks := make([]string, len(c.Node.Inputs))
	count := ""
	for i, x := range c.Node.Inputs {
		masks[i] = c.op1("Cast", Attrs{"to": Int(1)}, c.op1("Equal", nil, x, y))
		if count == "" {
			count = masks[i]
		} else {
			count = c.Add(count, masks[i])
		}
	}
	share := c.Div(dy, count)
	for i := range c.Node.Inputs {
		var err error
		if g[i], err = c.reduceIn(c.Mul(share, masks[i]), i); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func gradWhere(c *GradCtx) ([]string, error) {
	cond, dy := c.Node.Inputs[0], c.OutGrads[0]
	g := c.grads()
	if dy == "" || c.Out[0].DType != tensor.Float32 {
		return g, nil
	}
	var err error
	if g[1], err = c.reduceIn(c.Where(cond, dy, c.zero()), 1); err != nil {
		return nil, err
	}
	if g[2], err = c.reduceIn(c.Where(cond, c.zero(), dy), 2); err != nil {
		return nil, err
	}
	return g, nil
}

// gradCast passes the gradient through a float32-to-float32 cast; other casts cut it.
func gradCast(c *GradCtx) ([]string, error) {
	g := c.grads()
	if c.OutGrads[0] != "" && c.float(0) && c.Out[0].DType == tensor.Float32 {
		g[0] = c.OutGrads[0]
	}
	return g, nil
}

func gradIdentity(c *GradCtx) ([]string, error) {
	g := c.grads()
	g[0] = c.OutGrads[0]
	return g, nil
}

// gradReshapeLike is the rule of Reshape, Squeeze and Unsqueeze: the gradient takes the
// input's shape back; the shape or axes input takes none.
func gradReshapeLike(c *GradCtx) ([]string, error) {
	g := c.grads()
	if c.OutGrads[0] != "" && c.float(0) {
		g[0] = c.reshapeLike(c.OutGrads[0], c.In[0].Shape, c.Node.Inputs[0])
	}
	return g, nil
}

func gradTranspose(c *GradCtx) ([]string, error) {
	g := c.grads()
	if c.OutGrads[0] == "" || !c.float(0) {
		return g, nil
	}
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	perm, ok := c.Node.IntList("perm")
	if !ok {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	inv := make([]int64, len(perm))
	for i, p := range perm {
		inv[p] = int64(i)
	}
	if r == 2 && perm[0] == 1 {
		// A matrix transposed: when its gradient is a product (a linear layer's weight
		// gradient, Xᵀ·dY for the transposed weight), the transposed product is one Gemm with
		// the operands swapped, (op(A)·op(B))ᵀ = op(B)ᵀ·op(A)ᵀ, instead of a copy of every
		// weight gradient each step. The unswapped Gemm is left unread (Gradients drops it).
		if p := c.built(c.OutGrads[0]); p != nil && p.Op == "Gemm" && len(p.Inputs) == 2 {
			ta, tb := attrInt(p, "transA"), attrInt(p, "transB")
			g[0] = c.Op("Gemm", []string{p.Inputs[1], p.Inputs[0]}, Attrs{"alpha": Float(attrFloat(p, "alpha")), "transA": Int(1 - tb), "transB": Int(1 - ta)})
			return g, nil
		}
	}
	g[0] = c.Transpose(c.OutGrads[0], inv...)
	return g, nil
}

// built returns the node of the graph being built that computes v (a value a rule added,
// such as a gradient), or nil.
func (c *GradCtx) built(v string) *Node {
	for i := len(c.g.Nodes) - 1; i >= 0; i-- {
		for _, o := range c.g.Nodes[i].Outputs {
			if o == v {
				return c.g.Nodes[i]
			}
		}
	}
	return nil
}

func gradExpand(c *GradCtx) ([]string, error) {
	g := c.grads()
	if c.OutGrads[0] == "" || !c.float(0) {
		return g, nil
	}
	var err error
	g[0], err = c.reduceIn(c.OutGrads[0], 0)
	return g, err
}

// gradTile views the gradient as (r0, d0, r1, d1, ...) and sums over the repeats; the
// repeats must be a constant.
func gradTile(c *GradCtx) ([]string, error) {
	g := c.grads()
	if c.OutGrads[0] == "" || !c.float(0) {
		return g, nil
	}
	reps, ok := c.constInts(1)
	if !ok {
		return nil, fmt.Errorf("gradient of Tile %q: repeats must be a constant", c.Node.Name)
	}
	sh := c.Shape(c.Node.Inputs[0])
	parts := make([]string, 0, 2*len(reps))
	axes := make([]int64, len(reps))
	for i, r := range reps {
		parts = append(parts, c.ConstInts(r), c.Slice(sh, c.ConstInts(int64(i)), c.ConstInts(int64(i+1)), c.ConstInts(0)))
		axes[i] = int64(2 * i)
	}
	v := c.Op("Reshape", []string{c.OutGrads[0], c.Op("Concat", parts, Attrs{"axis": Int(0)})}, nil)
	g[0] = c.Op("ReduceSum", []string{v, c.ConstInts(axes...)}, Attrs{"keepdims": Int(0)})
	return g, nil
}

// dimOf returns the size of axis a of value x as an int64 vector of one element.
func (c *GradCtx) dimOf(x string, a int) string {
	return c.Slice(c.Shape(x), c.ConstInts(int64(a)), c.ConstInts(int64(a+1)), c.ConstInts(0))
}

func gradConcat(c *GradCtx) ([]string, error) {
	g := c.grads()
	dy := c.OutGrads[0]
	if dy == "" {
		return g, nil
	}
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	axis, err := NormAxis(attrInt(c.Node, "axis"), r)
	if err != nil {
		return nil, err
	}
	sizes := make([]string, len(c.Node.Inputs))
	for i, x := range c.Node.Inputs {
		sizes[i] = c.dimOf(x, axis)
	}
	parts := c.OpN("Split", []string{dy, c.Op("Concat", sizes, Attrs{"axis": Int(0)})}, len(sizes), Attrs{"axis": Int(int64(axis))})
	for i := range parts {
		if c.float(i) {
			g[i] = parts[i]
		}
	}
	return g, nil
}

func gradSplit(c *GradCtx) ([]string, error) {
	g := c.grads()
	if !c.float(0) {
		return g, nil
	}
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	axis, err := NormAxis(attrInt(c.Node, "axis"), r)
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(c.Node.Outputs))
	some := false
	for i, y := range c.Node.Outputs {
		parts[i] = c.OutGrads[i]
		if parts[i] != "" {
			some = true
			continue
		}
		parts[i] = c.Op("ConstantOfShape", []string{c.Shape(y)}, Attrs{"value": TensorAttr(zeroVec())})
	}
	if some {
		g[0] = c.Op("Concat", parts, Attrs{"axis": Int(int64(axis))})
	}
	return g, nil
}

// zeroVec is ConstantOfShape's value for float zeros.
func zeroVec() *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float32, Shape: []int{1}, F32: []float32{0}}
}

// gradSlice pads the gradient with zeros back to the input's extent, one sliced axis at a
// time, clamping the bounds at run time as Slice does. Steps other than 1 have no rule yet.
func gradSlice(c *GradCtx) ([]string, error) {
	g := c.grads()
	if c.OutGrads[0] == "" || !c.float(0) {
		return g, nil
	}
	x := c.Node.Inputs[0]
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	if steps, ok := c.constInts(4); c.Node.Input(4) != "" {
		for _, s := range steps {
			if !ok || s != 1 {
				return nil, fmt.Errorf("gradient of Slice %q: only constant steps of 1 have a rule", c.Node.Name)
			}
		}
	}
	var axes []int64
	if c.Node.Input(3) != "" {
		v, ok := c.constInts(3)
		if !ok {
			return nil, fmt.Errorf("gradient of Slice %q: axes must be a constant", c.Node.Name)
		}
		axes = v
	} else {
		n := len(c.In[1].Shape)
		if c.In[1].Shape == nil || n != 1 || !c.In[1].Shape[0].Known() {
			return nil, fmt.Errorf("gradient of Slice %q: the number of starts is not static", c.Node.Name)
		}
		for i := int64(0); i < c.In[1].Shape[0].Size; i++ {
			axes = append(axes, i)
		}
	}
	ks, err := NormAxes(axes, r)
	if err != nil {
		return nil, err
	}
	zero, clamp := c.ConstInts(0), func(v, dim string) string {
		v = c.Where(c.op1("Less", nil, v, c.ConstInts(0)), c.Add(v, dim), v)
		return c.op1("Min", nil, c.op1("Max", nil, v, c.ConstInts(0)), dim)
	}
	cur := c.OutGrads[0]
	for j, a := range ks {
		dim := c.dimOf(x, a)
		at := func(vec string) string {
			return c.Slice(c.Node.Inputs[vec2idx(vec)], c.ConstInts(int64(j)), c.ConstInts(int64(j+1)), zero)
		}
		s := clamp(at("starts"), dim)
		e := c.op1("Max", nil, clamp(at("ends"), dim), s)
		after := c.Sub(dim, e)
		sc := c.Shape(cur)
		shapeWith := func(d string) string {
			return c.Op("Concat", []string{
				c.Slice(sc, c.ConstInts(0), c.ConstInts(int64(a)), zero), d,
				c.Slice(sc, c.ConstInts(int64(a+1)), c.ConstInts(int64(r)), zero),
			}, Attrs{"axis": Int(0)})
		}
		zeros := func(d string) string {
			return c.Op("ConstantOfShape", []string{shapeWith(d)}, Attrs{"value": TensorAttr(zeroVec())})
		}
		cur = c.Op("Concat", []string{zeros(s), cur, zeros(after)}, Attrs{"axis": Int(int64(a))})
	}
	g[0] = cur
	return g, nil
}

func vec2idx(name string) int {
	if name == "starts" {
		return 1
	}
	return 2
}

// gradGather scatters (adding) the gradient rows back into zeros of the data's shape with
// ScatterND; for an axis other than 0 the axis is moved to the front and back.
func gradGather(c *GradCtx) ([]string, error) {
	g := c.grads()
	dy := c.OutGrads[0]
	if dy == "" || !c.float(0) {
		return g, nil
	}
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	q, err := c.rank(1)
	if err != nil {
		return nil, err
	}
	axis, err := NormAxis(attrInt(c.Node, "axis"), r)
	if err != nil {
		return nil, err
	}
	data, idx := c.Node.Inputs[0], c.Node.Inputs[1]
	if c.In[1].DType != tensor.Int64 {
		idx = c.op1("Cast", Attrs{"to": Int(7)}, idx)
	}
	idx = c.Unsqueeze(idx, -1)
	var zerosShape string
	if axis == 0 {
		zerosShape = c.Shape(data)
	} else {
		// dy is data[:axis] + idx + data[axis+1:]: move the idx axes to the front.
		perm := make([]int64, 0, r-1+q)
		for k := axis; k < axis+q; k++ {
			perm = append(perm, int64(k))
		}
		for k := 0; k < axis; k++ {
			perm = append(perm, int64(k))
		}
		for k := axis + q; k < r-1+q; k++ {
			perm = append(perm, int64(k))
		}
		dy = c.Transpose(dy, perm...)
		zerosShape = c.Shape(c.Transpose(data, moveToFront(r, axis)...))
	}
	zeros := c.Op("ConstantOfShape", []string{zerosShape}, Attrs{"value": TensorAttr(zeroVec())})
	s := c.Op("ScatterND", []string{zeros, idx, dy}, Attrs{"reduction": String("add")})
	if axis != 0 {
		fwd := moveToFront(r, axis)
		inv := make([]int64, r)
		for i, p := range fwd {
			inv[p] = int64(i)
		}
		s = c.Transpose(s, inv...)
	}
	g[0] = s
	return g, nil
}

// moveToFront is the permutation that brings axis to position 0 keeping the others in order.
func moveToFront(r, axis int) []int64 {
	perm := []int64{int64(axis)}
	for k := 0; k < r; k++ {
		if k != axis {
			perm = append(perm, int64(k))
		}
	}
	return perm
}

// gradScatterND: the data's gradient is the output gradient, with the scattered positions
// zeroed when they were overwritten (no reduction); the updates' gradient gathers the output
// gradient at the indices, which has a rule for row indices (a last index axis of 1, the
// embedding case). Multiplicative reductions have no rule.
func gradScatterND(c *GradCtx) ([]string, error) {
	g := c.grads()
	dy := c.OutGrads[0]
	if dy == "" || c.Out[0].DType != tensor.Float32 {
		return g, nil
	}
	red := c.Node.Str("reduction", "none")
	if red != "none" && red != "add" {
		return nil, fmt.Errorf("gradient of ScatterND %q: reduction %q has no rule", c.Node.Name, red)
	}
	idx, upd := c.Node.Inputs[1], c.Node.Inputs[2]
	if c.float(0) {
		g[0] = dy
		if red == "none" {
			g[0] = c.Op("ScatterND", []string{dy, idx, c.zeroLike(upd)}, nil)
		}
	}
	if c.float(2) {
		s := c.In[1].Shape
		if s == nil || len(s) == 0 || !s[len(s)-1].Known() || s[len(s)-1].Size != 1 {
			return nil, fmt.Errorf("gradient of ScatterND %q: the updates take a gradient only for row indices (last index axis 1)", c.Node.Name)
		}
		g[2] = c.Gather(dy, c.Op("Squeeze", []string{idx, c.ConstInts(-1)}, nil), 0)
	}
	return g, nil
}

// zeroLike returns zeros of x's shape.
func (c *GradCtx) zeroLike(x string) string {
	return c.Op("ConstantOfShape", []string{c.Shape(x)}, Attrs{"value": TensorAttr(zeroVec())})
}

// gradMatMul: dA = dY·Bᵀ and dB = Aᵀ·dY, reduced over broadcast batch axes. A batched A with
// a 2-D B (a linear layer) folds the batch into rows: dB is one Gemm with transA, dA one Gemm
// with transB. 1-D
// operands are promoted to matrices as numpy does (A to a row, B to a column) and their
// gradients reshaped back.
func gradMatMul(c *GradCtx) ([]string, error) {
	g := c.grads()
	dy := c.OutGrads[0]
	if dy == "" {
		return g, nil
	}
	a, b := c.Node.Inputs[0], c.Node.Inputs[1]
	ra, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	rb, err := c.rank(1)
	if err != nil {
		return nil, err
	}
	sa, sb, so := c.In[0].Shape, c.In[1].Shape, c.Out[0].Shape
	if so == nil {
		return nil, fmt.Errorf("gradient of MatMul %q: output has no static rank", c.Node.Name)
	}
	vecA, vecB := ra == 1, rb == 1
	switch {
	case vecA && vecB:
		dy, so = c.Unsqueeze(dy, 0, 1), Shape{Fixed(1), Fixed(1)}
	case vecA:
		last := len(so) - 1
		dy, so = c.Unsqueeze(dy, -2), append(append(append(Shape{}, so[:last]...), Fixed(1)), so[last])
	case vecB:
		dy, so = c.Unsqueeze(dy, -1), so.withLast(Fixed(1))
	}
	if vecA {
		a, sa, ra = c.Unsqueeze(a, 0), append(Shape{Fixed(1)}, sa...), 2
	}
	if vecB {
		b, sb, rb = c.Unsqueeze(b, -1), sb.withLast(Fixed(1)), 2
	}
	if c.float(0) && rb == 2 && ra >= 2 && !vecA && !vecB && sa[ra-1].Known() && so[len(so)-1].Known() {
		// A linear layer: dA = dY·Wᵀ as one Gemm with transB, which reads W in place where
		// MatMul would need it transposed first (a copy of every weight, every step). When W
		// is itself a transpose of a matrix (PyTorch's (out, in) weight, x·Wᵀ), dY·W reads
		// that matrix directly, and the forward Transpose is left with one reader (the
		// forward product, which a backend can then run as a transposed Gemm).
		flat := c.Reshape(dy, -1, so[len(so)-1].Size)
		ga := c.Op("Gemm", []string{flat, b}, Attrs{"transB": Int(1)})
		if w, ok := c.transposedMatrix(c.Node.Inputs[1]); ok {
			ga = c.Op("Gemm", []string{flat, w}, nil)
		}
		g[0] = ga
		if ra > 2 {
			g[0] = c.reshapeLike(ga, c.In[0].Shape, c.Node.Inputs[0])
		}
	} else if c.float(0) {
		ga := c.MatMul(dy, c.transposeLast(b, rb))
		if ga, err = c.ReduceTo(ga, so[:len(so)-1].withLast(sa[ra-1]), sa, a); err != nil {
			return nil, err
		}
		g[0] = ga
		if vecA {
			g[0] = c.reshapeLike(ga, c.In[0].Shape, c.Node.Inputs[0])
		}
	}
	if c.float(1) {
		if rb == 2 && ra > 2 && sa[ra-1].Known() && so[len(so)-1].Known() {
			k, n := sa[ra-1].Size, so[len(so)-1].Size
			// Gemm's transA reads the rows in place, where MatMul would need them transposed.
			g[1] = c.Op("Gemm", []string{c.Reshape(a, -1, k), c.Reshape(dy, -1, n)}, Attrs{"transA": Int(1)})
		} else {
			gb := c.MatMul(c.transposeLast(a, ra), dy)
			full := append(append(Shape{}, so[:len(so)-2]...), sb[rb-2], sb[rb-1])
			if g[1], err = c.ReduceTo(gb, full, sb, b); err != nil {
				return nil, err
			}
		}
		if vecB {
			g[1] = c.reshapeLike(g[1], c.In[1].Shape, c.Node.Inputs[1])
		}
	}
	return g, nil
}

// transposedMatrix returns w when x is Transpose(w) of a matrix w (perm [1, 0]) in the
// forward graph.
func (c *GradCtx) transposedMatrix(x string) (string, bool) {
	if c.Producer == nil {
		return "", false
	}
	p := c.Producer(x)
	if p == nil || p.Op != "Transpose" || len(p.Inputs) != 1 {
		return "", false
	}
	perm, ok := p.IntList("perm")
	if !ok || len(perm) != 2 || perm[0] != 1 || perm[1] != 0 {
		return "", false
	}
	return p.Inputs[0], true
}

// swapsLast reports whether perm swaps the last two axes and keeps the others.
func swapsLast(perm []int64) bool {
	r := len(perm)
	if r < 2 || perm[r-1] != int64(r-2) || perm[r-2] != int64(r-1) {
		return false
	}
	for i := 0; i < r-2; i++ {
		if perm[i] != int64(i) {
			return false
		}
	}
	return true
}

// withLast returns s with d appended.
func (s Shape) withLast(d Dim) Shape { return append(append(Shape{}, s...), d) }

// gradGemm differentiates alpha·A'·B' + beta·C with Gemm itself.
func gradGemm(c *GradCtx) ([]string, error) {
	g := c.grads()
	dy := c.OutGrads[0]
	if dy == "" {
		return g, nil
	}
	a, b := c.Node.Inputs[0], c.Node.Inputs[1]
	alpha, beta := attrFloat(c.Node, "alpha"), attrFloat(c.Node, "beta")
	ta, tb := attrInt(c.Node, "transA"), attrInt(c.Node, "transB")
	gemm := func(x, y string, tx, ty int64) string {
		return c.Op("Gemm", []string{x, y}, Attrs{"alpha": Float(alpha), "transA": Int(tx), "transB": Int(ty)})
	}
	if c.float(0) {
		if ta == 0 {
			g[0] = gemm(dy, b, 0, 1-tb)
		} else {
			g[0] = gemm(b, dy, tb, 1)
		}
	}
	if c.float(1) {
		if tb == 0 {
			g[1] = gemm(a, dy, 1-ta, 0)
		} else {
			g[1] = gemm(dy, a, 1, ta)
		}
	}
	if c.float(2) {
		gc := dy
		if beta != 1 {
			gc = c.Mul(dy, c.ConstFloat(beta))
		}
		var err error
		if g[2], err = c.reduceIn(gc, 2); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// gradSoftmax: dx = y·(dy − Σ dy·y) along the axis.
func gradSoftmax(c *GradCtx) ([]string, error) {
	g := c.grads()
	dy, y := c.OutGrads[0], c.Node.Outputs[0]
	if dy == "" {
		return g, nil
	}
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	axis := attrInt(c.Node, "axis")
	if _, err := NormAxis(axis, r); err != nil {
		return nil, err
	}
	// The reduction names the axis as the Softmax does, so that a backend can recognise the
	// pattern (the CPU backend runs it as one pass, fuse_softmax_grad.go).
	s := c.Op("ReduceSum", []string{c.Mul(dy, y), c.ConstInts(axis)}, Attrs{"keepdims": Int(1)})
	g[0] = c.Mul(y, c.Sub(dy, s))
	return g, nil
}

// gradLayerNorm recomputes the normalised input from X (mean and 1/σ over the axes from axis
// on) and applies dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))/σ with dx̂ = dy·scale; the scale and
// bias gradients sum over the leading axes.
func gradLayerNorm(c *GradCtx) ([]string, error) {
	g := c.grads()
	for _, o := range c.OutGrads[1:] {
		if o != "" {
			return nil, fmt.Errorf("gradient of LayerNormalization %q: its Mean and InvStdDev outputs take no gradient", c.Node.Name)
		}
	}
	dy := c.OutGrads[0]
	if dy == "" {
		return g, nil
	}
	r, err := c.rank(0)
	if err != nil {
		return nil, err
	}
	axis, err := NormAxis(attrInt(c.Node, "axis"), r)
	if err != nil {
		return nil, err
	}
	var norm, lead []int64
	for k := 0; k < r; k++ {
		if k < axis {
			lead = append(lead, int64(k))
		} else {
			norm = append(norm, int64(k))
		}
	}
	x, scale := c.Node.Inputs[0], c.Node.Inputs[1]
	mean := func(v string) string {
		return c.Op("ReduceMean", []string{v}, Attrs{"axes": Ints(norm...), "keepdims": Int(1)})
	}
	xc := c.Sub(x, mean(x))
	rstd := c.Div(c.one(), c.op1("Sqrt", nil, c.Add(mean(c.Mul(xc, xc)), c.ConstFloat(attrFloat(c.Node, "epsilon")))))
	xhat := c.Mul(xc, rstd)
	if c.float(0) {
		dxh := c.Mul(dy, scale)
		inner := c.Sub(c.Sub(dxh, mean(dxh)), c.Mul(xhat, mean(c.Mul(dxh, xhat))))
		g[0] = c.Mul(inner, rstd)
	}
	sumLead := func(v string) string {
		if len(lead) == 0 {
			return v
		}
		return c.Op("ReduceSum", []string{v, c.ConstInts(lead...)}, Attrs{"keepdims": Int(0)})
	}
	if c.float(1) {
		g[1] = sumLead(c.Mul(dy, xhat))
	}
	if c.float(2) {
		g[2] = sumLead(dy)
	}
	return g, nil
}

// reduceAxes returns the normalised axes a Reduce node reduces over (every axis when it lists
// none, unless noop_with_empty_axes), and whether it reduces at all.
func (c *GradCtx) reduceAxes(r int) ([]int, bool, error) {
	var axes []int64
	if c.Node.Input(1) != "" {
		v, ok := c.constInts(1)
		if !ok {
			return nil, false, fmt.Errorf("gradient of %s %q: axes must be a constant", c.Node.Op, c.Node.Name)
		}
		axes = v
	} else if v, ok := c.Node.IntList("axes"); ok {
		axes = v
	}
	if len(axes) == 0 {
		if attrInt(c.Node, "noop_with_empty_axes") != 0 {
			return nil, false, nil
		}
		out := make([]int, r)
		for i := range out {
			out[i] = i
		}
		return out, true, nil
	}
	ks, err := NormAxes(axes, r)
	return ks, true, err
}

// keptGrad returns the output gradient with the reduced axes kept (size 1) and the axes.
func (c *GradCtx) keptGrad() (string, []int, bool, error) {
	r, err := c.rank(0)
	if err != nil {
		return "", nil, false, err
	}
	axes, reduces, err := c.reduceAxes(r)
	if err != nil || !reduces {
		return c.OutGrads[0], nil, reduces, err
	}
	dy := c.OutGrads[0]
	if attrInt(c.Node, "keepdims") == 0 {
		a64 := make([]int64, len(axes))
		for i, a := range axes {
			a64[i] = int64(a)
		}
		dy = c.Unsqueeze(dy, a64...)
	}
	return dy, axes, true, nil
}

func reduceGrad(op string) GradFunc {
	return func(c *GradCtx) ([]string, error) {
		g := c.grads()
		if c.OutGrads[0] == "" || !c.float(0) {
			return g, nil
		}
		x := c.Node.Inputs[0]
		dy, axes, reduces, err := c.keptGrad()
		if err != nil {
			return nil, err
		}
		if !reduces {
			g[0] = dy
			return g, nil
		}
		switch op {
		case "ReduceSum":
			g[0] = c.Op("Expand", []string{dy, c.Shape(x)}, nil)
		case "ReduceMean":
			count := ""
			for _, a := range axes {
				d := c.op1("Cast", Attrs{"to": Int(1)}, c.dimOf(x, a))
				if count == "" {
					count = d
				} else {
					count = c.Mul(count, d)
				}
			}
			g[0] = c.Op("Expand", []string{c.Div(dy, count), c.Shape(x)}, nil)
		case "ReduceMax":
			// Ties share the gradient evenly, as PyTorch's amax does.
			y := c.Node.Outputs[0]
			if attrInt(c.Node, "keepdims") == 0 {
				a64 := make([]int64, len(axes))
				for i, a := range axes {
					a64[i] = int64(a)
				}
				y = c.Unsqueeze(y, a64...)
			}
			a64 := make([]int64, len(axes))
			for i, a := range axes {
				a64[i] = int64(a)
			}
			mask := c.op1("Cast", Attrs{"to": Int(1)}, c.op1("Equal", nil, x, y))
			cnt := c.Op("ReduceSum", []string{mask, c.ConstInts(a64...)}, Attrs{"keepdims": Int(1)})
			g[0] = c.Mul(mask, c.Div(dy, cnt))
		default:
			return nil, fmt.Errorf("gradient of %s: no rule", op)
		}
		return g, nil
	}
}

// unaryGradOf returns the rule of a unary op of the elementwise table (Not is not
// differentiable).
func unaryGradOf(op string) GradFunc {
	if op == "Not" {
		return NoGrad
	}
	return unaryGrad(op)
}

// binaryGradOf returns the rule of a binary op of the elementwise table: comparisons and logic
// are not differentiable.
func binaryGradOf(op string) GradFunc {
	switch op {
	case "Add", "Sub", "Mul", "Div", "Pow":
		return binaryGrad(op)
	}
	return NoGrad
}
