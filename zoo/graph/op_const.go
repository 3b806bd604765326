package graph

import (
	"errors"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Type conversion and value-producing operators: Cast, Identity, Constant, ConstantOfShape,
// Shape and Range.

func init() {
	register(&OpDef{
		Name: "Cast", SinceVersion: 6, ThroughVersion: LatestOpset,
		Doc:    "converts to dtype to (floats truncate toward zero, int32 wraps, nonzero is true)",
		Inputs: ps(req("input")), Outputs: ps(req("output")),
		Attrs:   []AttrDef{reqIntAttr("to"), intAttr("saturate", 1)},
		infer:   (*nodeCtx).cast,
		Eval:    evalCast,
		Cost:    moveCost,
		Grad:    gradCast,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Identity", SinceVersion: 1, ThroughVersion: LatestOpset, Doc: "a copy of its input",
		Inputs: ps(req("input")), Outputs: ps(req("output")),
		infer: func(c *nodeCtx) ([]*absVal, error) {
			x, err := c.req(0)
			if err != nil {
				return nil, err
			}
			cp := *x
			cp.shape = cloneShape(x.shape)
			return one(&cp), nil
		},
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{in[0].Clone()}, nil
		},
		Cost:    viewCost,
		Grad:    gradIdentity,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Constant", SinceVersion: 12, ThroughVersion: LatestOpset,
		Doc:     "the tensor given by exactly one of its value attributes",
		Outputs: ps(req("output")),
		Attrs:   []AttrDef{tensorAttr("value"), optIntAttr("value_int"), intsAttr("value_ints"), optFloatAttr("value_float"), floatsAttr("value_floats")},
		infer:   (*nodeCtx).constant,
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			t, err := constantTensor(n)
			if err != nil {
				return nil, err
			}
			return []*tensor.Tensor{t.Clone()}, nil
		},
		Cost:    writeCost,
		Grad:    NoGrad,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "ConstantOfShape", SinceVersion: 9, ThroughVersion: LatestOpset,
		Doc:    "a tensor of the given shape filled with value (float32 0 by default)",
		Inputs: ps(req("input")), Outputs: ps(req("output")),
		Attrs:   []AttrDef{tensorAttr("value")},
		infer:   (*nodeCtx).constantOfShape,
		Eval:    evalConstantOfShape,
		Cost:    writeCost,
		Grad:    NoGrad,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Shape", SinceVersion: 1, ThroughVersion: LatestOpset,
		Doc:    "the input's shape as a 1-D int64 tensor, dimensions start to end (opset 15)",
		Inputs: ps(req("data")), Outputs: ps(req("shape")),
		Attrs: []AttrDef{intAttr("start", 0), optIntAttr("end")},
		infer: (*nodeCtx).shapeOp,
		Eval: func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			x := in[0]
			start, end := shapeBounds(n, len(x.Shape))
			v := make([]int64, 0, end-start)
			for _, d := range x.Shape[start:end] {
				v = append(v, int64(d))
			}
			t, err := tensor.FromInt64(v, len(v))
			return []*tensor.Tensor{t}, err
		},
		Cost:    writeCost,
		Grad:    NoGrad,
		Float64: true, Uint64: true,
	})
	register(&OpDef{
		Name: "Range", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "start, start+delta, ... up to but excluding limit (scalars of one numeric dtype)",
		Inputs: ps(req("start"), req("limit"), req("delta")), Outputs: ps(req("output")),
		infer: (*nodeCtx).rangeOp,
		Eval:  evalRange,
		Cost:  writeCost,
		Grad:  NoGrad,
	})
}

// evalCast converts element by element, as a C cast does: float to integer truncates toward
// zero (NaN, infinities and values out of range are undefined in ONNX and refused here),
// integers wrap into narrower integer types (two's complement, as uint64 from a negative
// int64), nonzero (and NaN) is true, true is 1, and floats round to nearest even into a
// narrower float type (float64 to float16 in one rounding).
func evalCast(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	to := tensor.DType(attrInt(n, "to"))
	out, err := newTensor(to, x.Shape)
	if err != nil {
		return nil, err
	}
	xFloat := x.DType.IsFloat() || x.DType == tensor.Float64
	for k := 0; k < x.Len(); k++ {
		switch {
		case to.IsFloat() || to == tensor.Float64:
			var v float64
			switch {
			case xFloat:
				v = numAt(x, k)
			case x.DType == tensor.Bool:
				if x.Bool[k] {
					v = 1
				}
			case x.DType == tensor.Uint64:
				v = float64(uint64(x.I64[k]))
			default:
				v = float64(x.I64[k])
			}
			if to == tensor.Float64 {
				out.F64[k] = v
			} else if x.DType == tensor.Float64 || (!xFloat && x.DType != tensor.Bool) {
				out.F32[k] = tensor.RoundFrom64(to, v) // one rounding from float64 or an integer
			} else {
				out.F32[k] = tensor.RoundTo(to, float32(v))
			}
		case to == tensor.Bool:
			switch {
			case xFloat:
				out.Bool[k] = numAt(x, k) != 0
			case x.DType == tensor.Bool:
				out.Bool[k] = x.Bool[k]
			default:
				out.Bool[k] = x.I64[k] != 0
			}
		default: // the integer types
			switch {
			case xFloat:
				v, err := floatToInt(numAt(x, k), to)
				if err != nil {
					return nil, err
				}
				out.I64[k] = v
			case x.DType == tensor.Bool:
				if x.Bool[k] {
					out.I64[k] = 1
				}
			default:
				out.I64[k] = wrapInt(to, x.I64[k])
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// evalConstantOfShape fills a tensor of the shape input's values with the value attribute.
func evalConstantOfShape(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	dims, err := intsOf(in[0], "shape")
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 || d > math.MaxInt32 {
			return nil, fmt.Errorf("shape %v has an invalid dimension %d", dims, d)
		}
		shape[i] = int(d)
	}
	value := tensor.ScalarF(0)
	if a, ok := n.Attrs["value"]; ok {
		value = a.T
	}
	out, err := newTensor(value.DType, shape)
	if err != nil {
		return nil, err
	}
	for k := 0; k < out.Len(); k++ {
		copyElem(out, k, value, 0)
	}
	return []*tensor.Tensor{out}, nil
}

// evalRange computes Range. The length is max(ceil((limit−start)/delta), 0), with the same
// integer and float64 arithmetic inference uses; float elements are start + i·delta in
// float64, rounded once.
func evalRange(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	dt := in[0].DType
	if isInt(dt) {
		a, b, d := in[0].I64[0], in[1].I64[0], in[2].I64[0]
		if d == 0 {
			return nil, errors.New("delta is zero")
		}
		num := b - a
		cnt := num / d
		if num%d != 0 && (num < 0) == (d < 0) {
			cnt++
		}
		cnt = max(cnt, 0)
		if cnt > 1<<31 {
			return nil, fmt.Errorf("range has %d elements", cnt)
		}
		v := make([]int64, cnt)
		for i := range v {
			v[i] = wrapInt(dt, a+int64(i)*d)
		}
		t, err := tensor.FromInt64(v, len(v))
		if err == nil {
			t.DType = dt
		}
		return []*tensor.Tensor{t}, err
	}
	a, b, d := f64(in[0].F32[0]), f64(in[1].F32[0]), f64(in[2].F32[0])
	if d == 0 {
		return nil, errors.New("delta is zero")
	}
	cnt := math.Ceil((b - a) / d)
	if math.IsNaN(cnt) || cnt > 1<<31 {
		return nil, fmt.Errorf("range (%v, %v, %v) has no finite length", a, b, d)
	}
	v := make([]float32, int(max(cnt, 0)))
	for i := range v {
		v[i] = float32(a + float64(i)*d)
	}
	t, err := tensor.FromFloat32(v, len(v))
	return []*tensor.Tensor{t}, err
}

// ---- inference ----

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
	// A Cast to a 16-bit float gives a value on that type's grid; graphs compute in float32
	// and import follows such a Cast by one back to float32 (onnx/dtype.go).
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
	case x.floats != nil && to.IsFloat():
		out.floats = make([]float32, len(x.floats))
		for i, f := range x.floats {
			out.floats[i] = tensor.RoundTo(to, f)
		}
	}
	return one(out), nil
}

// shapeBounds resolves Shape's start and end attributes (opset 15) for a rank-r input:
// negative values count from the end, both clamp to [0, r], and end below start gives an
// empty range.
func shapeBounds(n *Node, r int) (start, end int64) {
	rr := int64(r)
	clamp := func(v int64) int64 {
		if v < 0 {
			v += rr
		}
		return min(max(v, 0), rr)
	}
	start = clamp(attrInt(n, "start"))
	end = clamp(n.Int("end", rr))
	return start, max(end, start)
}

func (c *nodeCtx) shapeOp() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if x.shape == nil {
		return one(mk(tensor.Int64, Shape{unknownDim})), nil
	}
	start, end := shapeBounds(c.n, len(x.shape))
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
	t, err := constantTensor(c.n)
	if err != nil {
		return nil, err
	}
	return one(fromTensor(t)), nil
}

// constantTensor returns the value a Constant node holds (shared with the attribute for
// "value": callers clone before handing it out). Exactly one value attribute must be set.
func constantTensor(n *Node) (*tensor.Tensor, error) {
	var t *tensor.Tensor
	count := 0
	for _, name := range []string{"value", "value_int", "value_ints", "value_float", "value_floats"} {
		a, ok := n.Attrs[name]
		if !ok {
			continue
		}
		count++
		switch name {
		case "value":
			if a.T == nil {
				return nil, errors.New("attribute value holds no tensor")
			}
			if err := a.T.Check(); err != nil {
				return nil, fmt.Errorf("attribute value: %w", err)
			}
			t = a.T
		case "value_int":
			t = tensor.Scalar64(a.I)
		case "value_ints":
			t, _ = tensor.FromInt64(append([]int64{}, a.Ints...), len(a.Ints))
		case "value_float":
			t = tensor.ScalarF(a.F)
		case "value_floats":
			t, _ = tensor.FromFloat32(append([]float32{}, a.Floats...), len(a.Floats))
		}
	}
	if count != 1 {
		return nil, fmt.Errorf("Constant needs exactly one of the attributes value (tensor), value_int, value_ints, value_float, value_floats; it has %d", count)
	}
	return t, nil
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
