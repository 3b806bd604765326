package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// More elementwise operators, for imported files: rounding and sign, trigonometric and
// hyperbolic functions, NaN and infinity tests, the parameterised activations (LeakyRelu,
// ThresholdedRelu, Celu, Selu, HardSwish, Softplus, Softsign, Shrink, PRelu), Mod, Xor,
// BitShift, GreaterOrEqual and LessOrEqual, and the variadic Sum and Mean. Each element
// function is declared here once (UnaryFunc, BinaryFunc) and both the reference evaluation and
// the CPU kernels apply it.

// floatOnly and numericOnly are the dtype rules of the ops below.
func floatOnly(dt tensor.DType) bool   { return isFloatVal(dt) }
func numericOnly(dt tensor.DType) bool { return isNumeric(dt) }

// isFloatVal reports whether values of dtype dt are the floats ops compute with (float32, and
// float64 where an op takes it).
func isFloatVal(dt tensor.DType) bool { return dt == tensor.Float32 || dt == tensor.Float64 }

// unaryMath is one elementwise operator of one input and the same output type.
type unaryMath struct {
	name  string
	since int
	doc   string
	ok    func(tensor.DType) bool
	want  string
	attrs []AttrDef
	// f maps a float (computed in float64, rounded once); i an integer; nil: not accepted.
	f    func(n *Node) func(float64) float64
	i    func(n *Node) func(int64) int64
	grad GradFunc
}

func constF(f func(float64) float64) func(*Node) func(float64) float64 {
	return func(*Node) func(float64) float64 { return f }
}

var unaryMathOps = []unaryMath{
	{name: "Ceil", since: 6, doc: "the least integer ≥ x", ok: floatOnly, want: "float32", f: constF(math.Ceil), grad: NoGrad},
	{name: "Floor", since: 6, doc: "the greatest integer ≤ x", ok: floatOnly, want: "float32", f: constF(math.Floor), grad: NoGrad},
	{name: "Round", since: 11, doc: "x rounded to the nearest integer, halves to even", ok: floatOnly, want: "float32", f: constF(math.RoundToEven), grad: NoGrad},
	{name: "Sign", since: 9, doc: "−1, 0 or 1 by the sign of x (NaN stays NaN)", ok: numericOnly, want: "a number type",
		f: constF(func(x float64) float64 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return x // 0, −0 and NaN
		}),
		i: func(*Node) func(int64) int64 {
			return func(x int64) int64 {
				switch {
				case x > 0:
					return 1
				case x < 0:
					return -1
				}
				return 0
			}
		}, grad: NoGrad},
	{name: "Sin", since: 7, doc: "sine", ok: floatOnly, want: "float32", f: constF(math.Sin), grad: mathGrad("Sin")},
	{name: "Cos", since: 7, doc: "cosine", ok: floatOnly, want: "float32", f: constF(math.Cos), grad: mathGrad("Cos")},
	{name: "Tan", since: 7, doc: "tangent", ok: floatOnly, want: "float32", f: constF(math.Tan), grad: NoGradYet},
	{name: "Asin", since: 7, doc: "arcsine (NaN outside [−1, 1])", ok: floatOnly, want: "float32", f: constF(math.Asin), grad: NoGradYet},
	{name: "Acos", since: 7, doc: "arccosine (NaN outside [−1, 1])", ok: floatOnly, want: "float32", f: constF(math.Acos), grad: NoGradYet},
	{name: "Atan", since: 7, doc: "arctangent", ok: floatOnly, want: "float32", f: constF(math.Atan), grad: NoGradYet},
	{name: "Sinh", since: 9, doc: "hyperbolic sine", ok: floatOnly, want: "float32", f: constF(math.Sinh), grad: NoGradYet},
	{name: "Cosh", since: 9, doc: "hyperbolic cosine", ok: floatOnly, want: "float32", f: constF(math.Cosh), grad: NoGradYet},
	{name: "Asinh", since: 9, doc: "inverse hyperbolic sine", ok: floatOnly, want: "float32", f: constF(math.Asinh), grad: NoGradYet},
	{name: "Acosh", since: 9, doc: "inverse hyperbolic cosine (NaN below 1)", ok: floatOnly, want: "float32", f: constF(math.Acosh), grad: NoGradYet},
	{name: "Atanh", since: 9, doc: "inverse hyperbolic tangent (NaN outside [−1, 1])", ok: floatOnly, want: "float32", f: constF(math.Atanh), grad: NoGradYet},
	{name: "Softplus", since: 1, doc: "log(1 + e^x)", ok: floatOnly, want: "float32",
		f: constF(func(x float64) float64 {
			if x > 0 {
				return x + math.Log1p(math.Exp(-x))
			}
			return math.Log1p(math.Exp(x))
		}), grad: mathGrad("Softplus")},
	{name: "Softsign", since: 1, doc: "x / (1 + |x|)", ok: floatOnly, want: "float32",
		f: constF(func(x float64) float64 { return x / (1 + math.Abs(x)) }), grad: mathGrad("Softsign")},
	{name: "LeakyRelu", since: 6, doc: "x for x ≥ 0, alpha·x below", ok: floatOnly, want: "float32",
		attrs: []AttrDef{floatAttr("alpha", 0.01)},
		f: func(n *Node) func(float64) float64 {
			alpha := f64(attrFloat(n, "alpha"))
			return func(x float64) float64 {
				if x < 0 {
					return alpha * x
				}
				return x
			}
		}, grad: mathGrad("LeakyRelu")},
	{name: "ThresholdedRelu", since: 10, doc: "x where x > alpha, else 0", ok: floatOnly, want: "float32",
		attrs: []AttrDef{floatAttr("alpha", 1)},
		f: func(n *Node) func(float64) float64 {
			alpha := f64(attrFloat(n, "alpha"))
			return func(x float64) float64 {
				if x > alpha || math.IsNaN(x) {
					return x
				}
				return 0
			}
		}, grad: NoGradYet},
	{name: "Celu", since: 12, doc: "max(0, x) + min(0, alpha·(e^(x/alpha) − 1))", ok: floatOnly, want: "float32",
		attrs: []AttrDef{floatAttr("alpha", 1)},
		f: func(n *Node) func(float64) float64 {
			alpha := f64(attrFloat(n, "alpha"))
			return func(x float64) float64 {
				if x > 0 || math.IsNaN(x) {
					return x
				}
				return alpha * math.Expm1(x/alpha)
			}
		}, grad: NoGradYet},
	{name: "Selu", since: 6, doc: "gamma·x for x > 0, gamma·alpha·(e^x − 1) below", ok: floatOnly, want: "float32",
		attrs: []AttrDef{floatAttr("alpha", 1.67326319217681884765625), floatAttr("gamma", 1.05070102214813232421875)},
		f: func(n *Node) func(float64) float64 {
			alpha, gamma := f64(attrFloat(n, "alpha")), f64(attrFloat(n, "gamma"))
			return func(x float64) float64 {
				if x > 0 || math.IsNaN(x) {
					return gamma * x
				}
				return gamma * alpha * math.Expm1(x)
			}
		}, grad: NoGradYet},
	{name: "HardSwish", since: 14, doc: "x · max(0, min(1, x/6 + 1/2))", ok: floatOnly, want: "float32",
		f: constF(func(x float64) float64 { return x * math.Max(0, math.Min(1, x/6+0.5)) }), grad: NoGradYet},
	{name: "Shrink", since: 9, doc: "x + bias below −lambd, x − bias above lambd, 0 between", ok: numericOnly, want: "a number type",
		attrs: []AttrDef{floatAttr("lambd", 0.5), floatAttr("bias", 0)},
		f: func(n *Node) func(float64) float64 {
			lambd, bias := f64(attrFloat(n, "lambd")), f64(attrFloat(n, "bias"))
			return func(x float64) float64 {
				switch {
				case x < -lambd:
					return x + bias
				case x > lambd:
					return x - bias
				}
				return 0
			}
		},
		i: func(n *Node) func(int64) int64 {
			lambd, bias := f64(attrFloat(n, "lambd")), f64(attrFloat(n, "bias"))
			return func(x int64) int64 {
				switch v := float64(x); {
				case v < -lambd:
					return int64(v + bias)
				case v > lambd:
					return int64(v - bias)
				}
				return 0
			}
		}, grad: NoGradYet},
}

// UnaryFunc returns the element functions of a one-input elementwise op of this file for
// node n (its attributes applied): f for float values (in float64, rounded once by the
// caller), i for integers (nil where the op takes none), and false for any other op.
func UnaryFunc(n *Node) (f func(float64) float64, i func(int64) int64, ok bool) {
	for _, u := range unaryMathOps {
		if u.name == n.Op && (n.Domain == "" || n.Domain == "ai.onnx") {
			f = u.f(n)
			if u.i != nil {
				i = u.i(n)
			}
			return f, i, true
		}
	}
	return nil, nil, false
}

// BinaryFunc returns the element functions of a two-input broadcasting op of this file for
// node n: f for floats, i for integers (an error for a value ONNX leaves undefined), b for
// bools giving the output element; fb and ib for the comparisons giving bool. Unused ones are nil.
type BinaryFuncs struct {
	F func(a, b float64) float64
	I func(a, b int64) (int64, error)
	U func(a, b uint64) (uint64, error) // uint64, unsigned

	B  func(a, b bool) bool
	FB func(a, b float64) bool
	IB func(a, b int64) bool
}

// BinaryFunc returns the element functions of n's op (Mod, Xor, BitShift, GreaterOrEqual,
// LessOrEqual, PRelu) and whether it is one of them.
func BinaryFunc(n *Node) (BinaryFuncs, bool) {
	switch n.Op {
	case "Mod":
		umod := func(a, b uint64) (uint64, error) {
			if b == 0 {
				return 0, errors.New("integer modulo by zero")
			}
			return a % b, nil // no sign to follow
		}
		if attrInt(n, "fmod") != 0 {
			return BinaryFuncs{F: math.Mod, I: func(a, b int64) (int64, error) {
				if b == 0 {
					return 0, errors.New("integer modulo by zero")
				}
				return a % b, nil
			}, U: umod}, true
		}
		return BinaryFuncs{F: func(a, b float64) float64 {
			// Python's %, numpy's mod: the sign of the divisor.
			r := math.Mod(a, b)
			if r != 0 && (r < 0) != (b < 0) {
				r += b
			}
			return r
		}, I: func(a, b int64) (int64, error) {
			if b == 0 {
				return 0, errors.New("integer modulo by zero")
			}
			r := a % b
			if r != 0 && (r < 0) != (b < 0) {
				r += b
			}
			return r, nil
		}, U: umod}, true
	case "Xor":
		return BinaryFuncs{B: func(a, b bool) bool { return a != b }}, true
	case "BitShift":
		left := attrString(n, "direction") == "LEFT"
		shift := func(a, b uint64) (uint64, error) {
			switch {
			case b >= 64:
				return 0, nil
			case left:
				return a << b, nil
			}
			return a >> b, nil
		}
		return BinaryFuncs{I: func(a, b int64) (int64, error) {
			r, err := shift(uint64(a), uint64(b)) // the types BitShift takes are unsigned
			return int64(r), err
		}, U: shift}, true
	case "GreaterOrEqual":
		return BinaryFuncs{FB: func(a, b float64) bool { return a >= b }, IB: func(a, b int64) bool { return a >= b }}, true
	case "LessOrEqual":
		return BinaryFuncs{FB: func(a, b float64) bool { return a <= b }, IB: func(a, b int64) bool { return a <= b }}, true
	case "PRelu":
		return BinaryFuncs{F: func(x, slope float64) float64 {
			if x < 0 {
				return slope * x
			}
			return x
		}, I: func(x, slope int64) (int64, error) {
			if x < 0 {
				return slope * x, nil
			}
			return x, nil
		}}, true
	}
	return BinaryFuncs{}, false
}

// attrString returns node n's string attribute name, or its declared default.
func attrString(n *Node, name string) string {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrString {
		return a.S
	}
	if d, ok := LookupNodeOp(n); ok {
		if ad := d.Attr(name); ad != nil {
			return ad.Default.S
		}
	}
	return ""
}

func init() {
	for _, u := range unaryMathOps {
		u := u
		register(&OpDef{
			Name: u.name, SinceVersion: u.since, ThroughVersion: LatestOpset, Doc: u.doc,
			Inputs: ps(req("X")), Outputs: ps(req("Y")), Attrs: u.attrs,
			infer: func(c *nodeCtx) ([]*absVal, error) { return c.unary(u.ok, u.want, nil) },
			Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				f, i, _ := UnaryFunc(n)
				return evalUnary(f, i, nil)(n, in)
			},
			Cost: perOutput(1),
			Grad: u.grad,
		})
	}
	for _, isInf := range []bool{false, true} {
		name, since, doc := "IsNaN", 9, "whether x is NaN"
		var attrs []AttrDef
		if isInf {
			name, since, doc = "IsInf", 10, "whether x is +Inf (detect_positive) or −Inf (detect_negative)"
			attrs = []AttrDef{intAttr("detect_negative", 1), intAttr("detect_positive", 1)}
		}
		register(&OpDef{
			Name: name, SinceVersion: since, ThroughVersion: LatestOpset, Doc: doc,
			Inputs: ps(req("X")), Outputs: ps(req("Y")), Attrs: attrs,
			infer: func(c *nodeCtx) ([]*absVal, error) {
				x, err := c.req(0)
				if err != nil {
					return nil, err
				}
				if !isFloatVal(x.dt) {
					return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(0), x.dt)
				}
				return one(mk(tensor.Bool, cloneShape(x.shape))), nil
			},
			Eval: evalFloatTest,
			Cost: perOutput(1),
			Grad: NoGrad,
		})
	}
	binaries := []struct {
		name  string
		since int
		doc   string
		attrs []AttrDef
		grad  GradFunc
		wide  bool // takes float64 and uint64
	}{
		{"Mod", 10, "the remainder of a / b: with the sign of b (integers only), or of a with fmod 1 (floats must set it)",
			[]AttrDef{intAttr("fmod", 0)}, NoGradYet, true},
		{"Xor", 7, "logical exclusive or", nil, NoGrad, false},
		{"BitShift", 11, "a shifted left or right (direction LEFT or RIGHT) by b bits, unsigned",
			[]AttrDef{{Name: "direction", Kind: AttrString, Required: true}}, NoGrad, true},
		{"GreaterOrEqual", 12, "a ≥ b", nil, NoGrad, false},
		{"LessOrEqual", 12, "a ≤ b", nil, NoGrad, false},
		{"PRelu", 9, "x for x ≥ 0, slope·x below (slope broadcast to x)", nil, NoGradYet, false},
	}
	for _, b := range binaries {
		register(&OpDef{
			Name: b.name, SinceVersion: b.since, ThroughVersion: LatestOpset, Doc: b.doc + ", broadcasting",
			Inputs: ps(req("A"), req("B")), Outputs: ps(req("C")), Attrs: b.attrs,
			infer:   (*nodeCtx).binaryMath,
			Eval:    evalBinaryMath,
			Cost:    perOutput(1),
			Grad:    b.grad,
			Float64: b.wide, Uint64: b.wide,
		})
	}
	for _, mean := range []bool{false, true} {
		name, doc := "Sum", "the elementwise sum of its inputs, broadcasting"
		if mean {
			name, doc = "Mean", "the elementwise mean of its inputs, broadcasting"
		}
		register(&OpDef{
			Name: name, SinceVersion: 8, ThroughVersion: LatestOpset, Doc: doc,
			Inputs: ps(variadic("data_0")), Outputs: ps(req(map[bool]string{false: "sum", true: "mean"}[mean])),
			infer: func(c *nodeCtx) ([]*absVal, error) {
				shapes := make([]Shape, len(c.in))
				for i := range c.in {
					v, err := c.req(i)
					if err != nil {
						return nil, err
					}
					if !isFloatVal(v.dt) || v.dt != c.in[0].dt {
						return nil, fmt.Errorf("input %q has dtype %v, want float32 like the first", c.name(i), v.dt)
					}
					shapes[i] = v.shape
				}
				shape, err := Broadcast(shapes...)
				if err != nil {
					return nil, err
				}
				return one(mk(c.in[0].dt, shape)), nil
			},
			Eval: evalSumMean(mean),
			Cost: func(n *Node, in, out []TensorType) (OpCost, error) {
				return perOutput(int64(max(len(in)-1, 0)+map[bool]int{true: 1}[mean]))(n, in, out)
			},
			Grad: gradSumMean(mean),
		})
	}
}

// evalFloatTest computes IsNaN or IsInf.
func evalFloatTest(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	out, err := newTensor(tensor.Bool, x.Shape)
	if err != nil {
		return nil, err
	}
	neg, pos := attrInt(n, "detect_negative") != 0, attrInt(n, "detect_positive") != 0
	for k := range out.Bool {
		v := numAt(x, k)
		if n.Op == "IsNaN" {
			out.Bool[k] = math.IsNaN(v)
		} else {
			out.Bool[k] = (pos && math.IsInf(v, 1)) || (neg && math.IsInf(v, -1))
		}
	}
	return []*tensor.Tensor{out}, nil
}

// binaryMath is the inference rule of the binary ops of this file.
func (c *nodeCtx) binaryMath() ([]*absVal, error) {
	a, err := c.req(0)
	if err != nil {
		return nil, err
	}
	b, err := c.req(1)
	if err != nil {
		return nil, err
	}
	outDT := a.dt
	want := ""
	switch c.n.Op {
	case "Xor":
		if a.dt != tensor.Bool {
			want = "bool"
		}
	case "BitShift":
		if a.dt != tensor.Uint8 && a.dt != tensor.Uint16 && a.dt != tensor.Uint32 && a.dt != tensor.Uint64 {
			want = "an unsigned integer type"
		}
		if d := attrString(c.n, "direction"); d != "LEFT" && d != "RIGHT" {
			return nil, fmt.Errorf("direction %q must be LEFT or RIGHT", d)
		}
	case "Mod":
		if !isNumeric(a.dt) {
			want = "a number type"
		}
		if isFloatVal(a.dt) && attrInt(c.n, "fmod") == 0 {
			return nil, errors.New("Mod of floats needs fmod 1 (ONNX)")
		}
	case "GreaterOrEqual", "LessOrEqual":
		if !isNumeric(a.dt) {
			want = "a number type"
		}
		outDT = tensor.Bool
	case "PRelu":
		if !isNumeric(a.dt) {
			want = "a number type"
		}
	}
	if want != "" {
		return nil, fmt.Errorf("input %q has dtype %v, want %s", c.name(0), a.dt, want)
	}
	if b.dt != a.dt {
		return nil, fmt.Errorf("input %q has dtype %v, want %v like input %q", c.name(1), b.dt, a.dt, c.name(0))
	}
	shape, err := Broadcast(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	if c.n.Op == "PRelu" && a.shape != nil && shape != nil && len(shape) != len(a.shape) {
		return nil, fmt.Errorf("slope %q has shape %v, which does not broadcast to X's %v", c.name(1), b.shape, a.shape)
	}
	return one(mk(outDT, shape)), nil
}

// evalBinaryMath applies BinaryFunc's element functions, broadcasting.
func evalBinaryMath(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	fs, ok := BinaryFunc(n)
	if !ok {
		return nil, fmt.Errorf("no element function for %s", n.Op)
	}
	a, b := in[0], in[1]
	shape, err := BroadcastShapes(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	outDT := a.DType
	if fs.FB != nil {
		outDT = tensor.Bool
	}
	if n.Op == "PRelu" && !tensor.SameShape(shape, a.Shape) {
		return nil, fmt.Errorf("slope shape %s does not broadcast to %s", tensor.ShapeString(b.Shape), tensor.ShapeString(a.Shape))
	}
	out, err := newTensor(outDT, shape)
	if err != nil {
		return nil, err
	}
	err = broadcastEach(shape, in[:2], func(o int, off []int) error {
		switch {
		case isFloatVal(a.DType) && fs.FB != nil:
			out.Bool[o] = fs.FB(numAt(a, off[0]), numAt(b, off[1]))
		case isInt(a.DType) && fs.IB != nil:
			out.Bool[o] = fs.IB(a.I64[off[0]], b.I64[off[1]])
		case isFloatVal(a.DType) && fs.F != nil:
			setNum(out, o, fs.F(numAt(a, off[0]), numAt(b, off[1])))
		case isInt(a.DType) && fs.I != nil:
			v, err := fs.I(a.I64[off[0]], b.I64[off[1]])
			if err != nil {
				return err
			}
			out.I64[o] = wrapInt(a.DType, v)
		case a.DType == tensor.Uint64 && fs.U != nil:
			v, err := fs.U(uint64(a.I64[off[0]]), uint64(b.I64[off[1]]))
			if err != nil {
				return err
			}
			out.I64[o] = int64(v)
		case a.DType == tensor.Bool && fs.B != nil:
			out.Bool[o] = fs.B(a.Bool[off[0]], b.Bool[off[1]])
		default:
			return fmt.Errorf("dtype %v is not supported", a.DType)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

// setNum stores v, computed in float64, as element k of a float tensor (rounded once to its
// type).
func setNum(t *tensor.Tensor, k int, v float64) {
	if t.DType == tensor.Float64 {
		t.F64[k] = v
		return
	}
	t.F32[k] = tensor.RoundFrom64(t.DType, v)
}

// evalSumMean adds its inputs elementwise in float64 (and divides by their count for Mean).
func evalSumMean(mean bool) EvalFunc {
	return func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		shapes := make([][]int, len(in))
		for k, t := range in {
			shapes[k] = t.Shape
		}
		shape, err := BroadcastShapes(shapes...)
		if err != nil {
			return nil, err
		}
		out, err := newTensor(in[0].DType, shape)
		if err != nil {
			return nil, err
		}
		err = broadcastEach(shape, in, func(o int, off []int) error {
			var s float64
			for k, t := range in {
				s += numAt(t, off[k])
			}
			if mean {
				s /= float64(len(in))
			}
			setNum(out, o, s)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{out}, nil
	}
}

// mathGrad is the gradient rule of the differentiable unary ops of this file that have one.
func mathGrad(op string) GradFunc {
	return func(c *GradCtx) ([]string, error) {
		x, dy := c.Node.Inputs[0], c.OutGrads[0]
		g := c.grads()
		if dy == "" || !c.float(0) {
			return g, nil
		}
		switch op {
		case "Sin":
			g[0] = c.Mul(dy, c.op1("Cos", nil, x))
		case "Cos":
			g[0] = c.op1("Neg", nil, c.Mul(dy, c.op1("Sin", nil, x)))
		case "Softplus":
			g[0] = c.Mul(dy, c.op1("Sigmoid", nil, x))
		case "Softsign":
			d := c.Add(c.one(), c.op1("Abs", nil, x))
			g[0] = c.Div(dy, c.Mul(d, d))
		case "LeakyRelu":
			alpha := c.ConstFloat(attrFloat(c.Node, "alpha"))
			g[0] = c.Where(c.op1("Less", nil, x, c.zero()), c.Mul(dy, alpha), dy)
		default:
			return nil, fmt.Errorf("gradient of %s: no rule", op)
		}
		return g, nil
	}
}

// gradSumMean gives every float input the output's gradient (divided by the count for Mean),
// summed back over the axes it was broadcast along.
func gradSumMean(mean bool) GradFunc {
	return func(c *GradCtx) ([]string, error) {
		dy := c.OutGrads[0]
		g := c.grads()
		if dy == "" || c.Out[0].DType != tensor.Float32 {
			return g, nil
		}
		if mean {
			dy = c.Div(dy, c.ConstFloat(float32(len(c.Node.Inputs))))
		}
		for i := range c.Node.Inputs {
			if !c.float(i) {
				continue
			}
			r, err := c.ReduceTo(dy, c.Out[0].Shape, c.In[i].Shape, c.Node.Inputs[i])
			if err != nil {
				return nil, err
			}
			g[i] = r
		}
		return g, nil
	}
}
