package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Elementwise operators: unary maps, broadcasting binary arithmetic, comparison and logic,
// variadic Max and Min, and Where.

func init() {
	numeric := func(dt tensor.DType) bool { return isNumeric(dt) }
	float := func(dt tensor.DType) bool { return isFloatVal(dt) }
	boolean := func(dt tensor.DType) bool { return dt == tensor.Bool }
	unaries := []struct {
		name  string
		since int
		doc   string
		ok    func(tensor.DType) bool
		want  string
		f     func(x float64) float64
		i     func(x int64) int64
		b     func(x bool) bool
	}{
		{"Abs", 6, "absolute value", numeric, "a number type", math.Abs, func(x int64) int64 {
			if x < 0 {
				return -x
			}
			return x
		}, nil},
		{"Neg", 6, "negation", numeric, "a number type", func(x float64) float64 { return -x }, func(x int64) int64 { return -x }, nil},
		{"Relu", 6, "max(x, 0)", numeric, "a number type", func(x float64) float64 {
			if x > 0 || math.IsNaN(x) {
				return x
			}
			return 0
		}, func(x int64) int64 { return max(x, 0) }, nil},
		{"Exp", 6, "e to the x", float, "float32", math.Exp, nil, nil},
		{"Log", 6, "natural logarithm (NaN below 0, -Inf at 0)", float, "float32", math.Log, nil, nil},
		{"Sqrt", 6, "square root (NaN below 0)", float, "float32", math.Sqrt, nil, nil},
		{"Erf", 9, "the error function", float, "float32", math.Erf, nil, nil},
		{"Tanh", 6, "hyperbolic tangent", float, "float32", math.Tanh, nil, nil},
		{"Sigmoid", 6, "1 / (1 + e^-x)", float, "float32", func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, nil, nil},
		{"Not", 1, "logical not", boolean, "bool", nil, nil, func(x bool) bool { return !x }},
	}
	for _, u := range unaries {
		fold := unaryEval(u.name)
		ok, want := u.ok, u.want
		register(&OpDef{
			Name: u.name, SinceVersion: u.since, ThroughVersion: LatestOpset, Doc: u.doc,
			Inputs: ps(req("X")), Outputs: ps(req("Y")),
			infer:   func(c *nodeCtx) ([]*absVal, error) { return c.unary(ok, want, fold) },
			Eval:    evalUnary(u.f, u.i, u.b),
			Cost:    perOutput(1),
			Grad:    unaryGradOf(u.name),
			Float64: u.f != nil,
		})
	}
	register(&OpDef{
		Name: "Elu", SinceVersion: 6, ThroughVersion: LatestOpset, Doc: "x for x ≥ 0, alpha·(e^x − 1) below",
		Inputs: ps(req("X")), Outputs: ps(req("Y")),
		Attrs: []AttrDef{floatAttr("alpha", 1)},
		infer: func(c *nodeCtx) ([]*absVal, error) { return c.unary(float, "float32", nil) },
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			alpha := f64(attrFloat(n, "alpha"))
			return evalUnary(func(x float64) float64 {
				if x < 0 {
					return alpha * (math.Exp(x) - 1)
				}
				return x
			}, nil, nil)(n, in)
		},
		Cost: perOutput(1),
		Grad: gradElu,
	})

	binaries := []struct {
		name  string
		since int
		doc   string
		eval  EvalFunc
	}{
		{"Add", 7, "a + b", evalArith(func(a, b float64) float64 { return a + b }, func(a, b int64) (int64, error) { return a + b, nil })},
		{"Sub", 7, "a − b", evalArith(func(a, b float64) float64 { return a - b }, func(a, b int64) (int64, error) { return a - b, nil })},
		{"Mul", 7, "a · b", evalArith(func(a, b float64) float64 { return a * b }, func(a, b int64) (int64, error) { return a * b, nil })},
		{"Div", 7, "a / b (integers truncate toward zero)", evalArith(func(a, b float64) float64 { return a / b }, func(a, b int64) (int64, error) {
			if b == 0 {
				return 0, errors.New("integer division by zero")
			}
			return a / b, nil
		})},
		{"Pow", 12, "a to the power b (the result has a's dtype)", evalPow},
		{"Equal", 11, "a == b", evalCompare(func(a, b float64) bool { return a == b }, func(a, b int64) bool { return a == b }, func(a, b bool) bool { return a == b })},
		{"Greater", 9, "a > b", evalCompare(func(a, b float64) bool { return a > b }, func(a, b int64) bool { return a > b }, nil)},
		{"Less", 9, "a < b", evalCompare(func(a, b float64) bool { return a < b }, func(a, b int64) bool { return a < b }, nil)},
		{"And", 7, "logical and", evalCompare(nil, nil, func(a, b bool) bool { return a && b })},
		{"Or", 7, "logical or", evalCompare(nil, nil, func(a, b bool) bool { return a || b })},
	}
	for _, b := range binaries {
		register(&OpDef{
			Name: b.name, SinceVersion: b.since, ThroughVersion: LatestOpset, Doc: b.doc + ", broadcasting",
			Inputs: ps(req("A"), req("B")), Outputs: ps(req("C")),
			infer:   func(c *nodeCtx) ([]*absVal, error) { return c.elementwise(c.n.Op) },
			Eval:    b.eval,
			Cost:    perOutput(1),
			Grad:    binaryGradOf(b.name),
			Float64: b.name != "And" && b.name != "Or",
			Uint64:  b.name == "Pow",
		})
	}
	for _, isMax := range []bool{true, false} {
		name, doc := "Max", "elementwise maximum of its inputs, broadcasting (NaN wins)"
		if !isMax {
			name, doc = "Min", "elementwise minimum of its inputs, broadcasting (NaN wins)"
		}
		register(&OpDef{
			Name: name, SinceVersion: 12, ThroughVersion: LatestOpset, Doc: doc,
			Inputs: ps(variadic("data_0")), Outputs: ps(req("result")),
			infer:   func(c *nodeCtx) ([]*absVal, error) { return c.elementwise(c.n.Op) },
			Eval:    evalMinMax(isMax),
			Float64: true, Uint64: true,
			Cost: func(n *Node, in, out []TensorType) (OpCost, error) {
				return perOutput(int64(max(len(in)-1, 0)))(n, in, out)
			},
			Grad: gradMinMax,
		})
	}
	register(&OpDef{
		Name: "Where", SinceVersion: 9, ThroughVersion: LatestOpset, Doc: "X where condition holds, else Y, broadcasting",
		Inputs: ps(req("condition"), req("X"), req("Y")), Outputs: ps(req("output")),
		infer:   func(c *nodeCtx) ([]*absVal, error) { return c.elementwise("Where") },
		Eval:    evalWhere,
		Cost:    perOutput(1),
		Grad:    gradWhere,
		Float64: true, Uint64: true,
	})
}

// evalUnary maps f over float32 inputs (in float64, rounded once), i over integers (wrapped
// to the dtype) and b over bools; a nil function means the dtype is not accepted.
func evalUnary(f func(float64) float64, i func(int64) int64, b func(bool) bool) EvalFunc {
	return func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x := in[0]
		out, err := newTensor(x.DType, x.Shape)
		if err != nil {
			return nil, err
		}
		switch {
		case x.DType == tensor.Float32 && f != nil:
			for k, v := range x.F32 {
				out.F32[k] = float32(f(f64(v)))
			}
		case x.DType == tensor.Float64 && f != nil:
			for k, v := range x.F64 {
				out.F64[k] = f(v)
			}
		case isInt(x.DType) && i != nil:
			for k, v := range x.I64 {
				out.I64[k] = wrapInt(x.DType, i(v))
			}
		case x.DType == tensor.Bool && b != nil:
			for k, v := range x.Bool {
				out.Bool[k] = b(v)
			}
		default:
			return nil, fmt.Errorf("dtype %v is not supported", x.DType)
		}
		return []*tensor.Tensor{out}, nil
	}
}

// evalArith applies a broadcasting binary operation with the inputs' common dtype.
func evalArith(f func(a, b float64) float64, i func(a, b int64) (int64, error)) EvalFunc {
	return func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		a, b := in[0], in[1]
		shape, err := BroadcastShapes(a.Shape, b.Shape)
		if err != nil {
			return nil, err
		}
		out, err := newTensor(a.DType, shape)
		if err != nil {
			return nil, err
		}
		err = broadcastEach(shape, in[:2], func(o int, off []int) error {
			switch {
			case a.DType == tensor.Float32 && b.DType == tensor.Float32:
				out.F32[o] = float32(f(f64(a.F32[off[0]]), f64(b.F32[off[1]])))
			case a.DType == tensor.Float64 && b.DType == tensor.Float64:
				out.F64[o] = f(a.F64[off[0]], b.F64[off[1]])
			case isInt(a.DType) && a.DType == b.DType:
				v, err := i(a.I64[off[0]], b.I64[off[1]])
				if err != nil {
					return err
				}
				out.I64[o] = wrapInt(a.DType, v)
			default:
				return fmt.Errorf("dtypes %v and %v are not supported", a.DType, b.DType)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{out}, nil
	}
}

// numAt returns element k of a numeric tensor as float64 (a uint64 as unsigned).
func numAt(t *tensor.Tensor, k int) float64 {
	switch {
	case t.DType.IsFloat():
		return f64(t.F32[k])
	case t.DType == tensor.Float64:
		return t.F64[k]
	case t.DType == tensor.Uint64:
		return float64(uint64(t.I64[k]))
	}
	return float64(t.I64[k])
}

// evalPow computes Pow, whose exponent may have another numeric dtype than the base. Float
// bases use math.Pow; integer bases raise exactly for non-negative integer exponents and
// otherwise truncate the float result toward zero, as ONNX Runtime's cast of std::pow does.
func evalPow(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, b := in[0], in[1]
	shape, err := BroadcastShapes(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	out, err := newTensor(a.DType, shape)
	if err != nil {
		return nil, err
	}
	err = broadcastEach(shape, in[:2], func(o int, off []int) error {
		switch {
		case isFloatVal(a.DType):
			setNum(out, o, math.Pow(numAt(a, off[0]), numAt(b, off[1])))
		case isInt(a.DType) && isInt(b.DType) && b.I64[off[1]] >= 0:
			base, e := a.I64[off[0]], b.I64[off[1]]
			r := int64(1)
			for ; e > 0; e >>= 1 {
				if e&1 == 1 {
					r *= base
				}
				base *= base
			}
			out.I64[o] = wrapInt(a.DType, r)
		case isInt(a.DType):
			p := math.Pow(float64(a.I64[off[0]]), numAt(b, off[1]))
			v, err := floatToInt(p, tensor.Int64)
			if err != nil {
				return fmt.Errorf("%d to the power %v: %w", a.I64[off[0]], numAt(b, off[1]), err)
			}
			out.I64[o] = wrapInt(a.DType, v)
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

// evalCompare applies a broadcasting comparison or logical operation giving bool.
func evalCompare(f func(a, b float64) bool, i func(a, b int64) bool, bl func(a, b bool) bool) EvalFunc {
	return func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		a, b := in[0], in[1]
		shape, err := BroadcastShapes(a.Shape, b.Shape)
		if err != nil {
			return nil, err
		}
		out, err := newTensor(tensor.Bool, shape)
		if err != nil {
			return nil, err
		}
		if a.DType != b.DType {
			return nil, fmt.Errorf("dtypes %v and %v differ", a.DType, b.DType)
		}
		err = broadcastEach(shape, in[:2], func(o int, off []int) error {
			switch {
			case isFloatVal(a.DType) && f != nil:
				out.Bool[o] = f(numAt(a, off[0]), numAt(b, off[1]))
			case isInt(a.DType) && i != nil:
				out.Bool[o] = i(a.I64[off[0]], b.I64[off[1]])
			case a.DType == tensor.Bool && bl != nil:
				out.Bool[o] = bl(a.Bool[off[0]], b.Bool[off[1]])
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
}

// evalMinMax folds Max or Min over every input, broadcasting; a NaN anywhere gives NaN, as
// numpy's maximum and minimum (the ONNX reference) do.
func evalMinMax(isMax bool) EvalFunc {
	return func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		shapes := make([][]int, len(in))
		for k, t := range in {
			shapes[k] = t.Shape
		}
		shape, err := BroadcastShapes(shapes...)
		if err != nil {
			return nil, err
		}
		dt := in[0].DType
		out, err := newTensor(dt, shape)
		if err != nil {
			return nil, err
		}
		better := func(a, b float64) bool { return (isMax && b > a) || (!isMax && b < a) }
		err = broadcastEach(shape, in, func(o int, off []int) error {
			switch {
			case dt == tensor.Float32 || dt == tensor.Float64:
				r := numAt(in[0], off[0])
				for k := 1; k < len(in); k++ {
					v := numAt(in[k], off[k])
					if math.IsNaN(v) || (!math.IsNaN(r) && better(r, v)) {
						r = v
					}
				}
				setNum(out, o, r)
			case dt == tensor.Uint64:
				r := uint64(in[0].I64[off[0]])
				for k := 1; k < len(in); k++ {
					if v := uint64(in[k].I64[off[k]]); (isMax && v > r) || (!isMax && v < r) {
						r = v
					}
				}
				out.I64[o] = int64(r)
			case isInt(dt):
				r := in[0].I64[off[0]]
				for k := 1; k < len(in); k++ {
					if v := in[k].I64[off[k]]; (isMax && v > r) || (!isMax && v < r) {
						r = v
					}
				}
				out.I64[o] = r
			default:
				return fmt.Errorf("dtype %v is not supported", dt)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{out}, nil
	}
}

// evalWhere picks X where condition is true and Y elsewhere, broadcasting all three.
func evalWhere(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	cond, x, y := in[0], in[1], in[2]
	shape, err := BroadcastShapes(cond.Shape, x.Shape, y.Shape)
	if err != nil {
		return nil, err
	}
	out, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	if cond.DType != tensor.Bool || x.DType != y.DType {
		return nil, fmt.Errorf("dtypes %v, %v, %v are not bool, T, T", cond.DType, x.DType, y.DType)
	}
	err = broadcastEach(shape, in[:3], func(o int, off []int) error {
		if cond.Bool[off[0]] {
			copyElem(out, o, x, off[1])
		} else {
			copyElem(out, o, y, off[2])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{out}, nil
}

// ---- inference ----

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
