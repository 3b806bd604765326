package graph

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// More reductions, for imported files: ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum and ReduceLogSumExp (the axes attribute up to opset 17, the
// axes input from 18, as ReduceMean), ArgMax and ArgMin, LogSoftmax and Hardmax (Softmax's
// axis rule), and TopK. Floats reduce in float64 and round once; integers reduce exactly.

func init() {
	for _, r := range []struct {
		name, doc string
		floatOnly bool
	}{
		{"ReduceMin", "the minimum over axes (NaN wins; +Inf or the type's maximum over none)", false},
		{"ReduceProd", "the product over axes (1 over none)", false},
		{"ReduceL1", "the sum of absolute values over axes", false},
		{"ReduceL2", "the square root of the sum of squares over axes", true},
		{"ReduceSumSquare", "the sum of squares over axes", false},
		{"ReduceLogSum", "the natural log of the sum over axes", true},
		{"ReduceLogSumExp", "log Σ e^x over axes (computed from the maximum, without overflow)", true},
	} {
		floatOnly := r.floatOnly
		register(&OpDef{
			Name: r.name, SinceVersion: 11, ThroughVersion: LatestOpset,
			Doc:    r.doc + "; axes from the attribute (opset 11 to 17) or the input (18); all axes when none are given unless noop_with_empty_axes",
			Inputs: ps(req("data"), opt("axes")), Outputs: ps(req("reduced")),
			Attrs: []AttrDef{intsAttr("axes"), intAttr("keepdims", 1), intAttr("noop_with_empty_axes", 0)},
			infer: func(c *nodeCtx) ([]*absVal, error) {
				if x := c.arg(0); x != nil && floatOnly && !isFloatVal(x.dt) {
					return nil, fmt.Errorf("input %q has dtype %v, want a float type", c.name(0), x.dt)
				}
				outs, err := c.reduce()
				if err == nil && c.n.Op == "ReduceProd" {
					foldProd(c, outs[0])
				}
				return outs, err
			},
			Eval:    evalReduceMore,
			Cost:    perInput(2),
			Grad:    NoGradYet,
			Float64: true,
		})
	}
	for _, isMax := range []bool{true, false} {
		name, doc := "ArgMax", "the index of the largest element along axis (the first, or the last with select_last_index), as int64"
		if !isMax {
			name, doc = "ArgMin", "the index of the smallest element along axis (the first, or the last with select_last_index), as int64"
		}
		register(&OpDef{
			Name: name, SinceVersion: 11, ThroughVersion: LatestOpset, Doc: doc,
			Inputs: ps(req("data")), Outputs: ps(req("reduced")),
			Attrs: []AttrDef{intAttr("axis", 0), intAttr("keepdims", 1), intAttr("select_last_index", 0)},
			infer: (*nodeCtx).argReduce,
			Eval:  evalArgReduce,
			Cost:  perInput(1),
			Grad:  NoGrad,
		})
	}
	for _, op := range []string{"LogSoftmax", "Hardmax"} {
		doc := "x − max − log Σ exp(x − max) along axis"
		grad := gradLogSoftmax
		if op == "Hardmax" {
			doc, grad = "1 at the first largest element along axis, 0 elsewhere", NoGrad
		}
		register(&OpDef{
			Name: op, SinceVersion: 13, ThroughVersion: LatestOpset, Doc: doc,
			Inputs: ps(req("input")), Outputs: ps(req("output")),
			Attrs: []AttrDef{intAttr("axis", -1)},
			infer: func(c *nodeCtx) ([]*absVal, error) {
				x, err := c.req(0)
				if err != nil {
					return nil, err
				}
				if !isFloatVal(x.dt) {
					return nil, fmt.Errorf("input %q has dtype %v, want float32", c.name(0), x.dt)
				}
				if x.shape != nil {
					if _, err := NormAxis(attrInt(c.n, "axis"), len(x.shape)); err != nil {
						return nil, err
					}
				}
				return one(mk(x.dt, cloneShape(x.shape))), nil
			},
			Eval: evalAlongAxis,
			Cost: perOutput(5),
			Grad: grad,
		})
	}
	register(&OpDef{
		Name: "TopK", SinceVersion: 11, ThroughVersion: LatestOpset,
		Doc:    "the K largest (or, with largest 0, smallest) elements along axis and their int64 indices, sorted (ties: the lower index first)",
		Inputs: ps(req("X"), req("K")), Outputs: ps(req("Values"), req("Indices")),
		Attrs: []AttrDef{intAttr("axis", -1), intAttr("largest", 1), intAttr("sorted", 1)},
		infer: (*nodeCtx).topK,
		Eval:  evalTopK,
		Cost:  perInput(4),
		Grad:  NoGradYet,
	})
}

// foldProd evaluates ReduceProd of a small integer vector over its one axis (the product of
// a shape's leading dimensions, as a negative-axis Flatten computes it), so that the shapes
// after it stay known.
func foldProd(c *nodeCtx, out *absVal) {
	x := c.arg(0)
	if x == nil || x.vals == nil || len(x.shape) != 1 || out.shape == nil || len(out.shape) > 1 {
		return
	}
	p := int64(1)
	for _, v := range x.vals {
		if !v.known {
			return
		}
		p *= v.v
	}
	out.vals = []ival{kv(wrapInt(x.dt, p))}
}

// reducedAxes resolves a reduction's axes (input i or the attribute) for rank r: which axes
// are reduced, or noop when none are given and noop_with_empty_axes is set.
func reducedAxes(n *Node, in []*tensor.Tensor, i, r int) (red []bool, noop bool, err error) {
	axes, err := axesOf(n, in, i)
	if err != nil {
		return nil, false, err
	}
	red = make([]bool, r)
	if len(axes) == 0 {
		if attrInt(n, "noop_with_empty_axes") != 0 {
			return nil, true, nil
		}
		for k := range red {
			red[k] = true
		}
	}
	for _, a := range axes {
		k, err := NormAxis(a, r)
		if err != nil {
			return nil, false, err
		}
		red[k] = true
	}
	return red, false, nil
}

// reduceLayout gives the output shape of a reduction of shape over red (with reduced axes
// kept as 1 when keep) and, for every input element in row-major order, its output cell.
func reduceLayout(shape []int, red []bool, keep bool) (out []int, cells int, cellOf func(idx []int) int) {
	out = []int{}
	kept := make([]int, len(shape))
	for i, d := range shape {
		kept[i] = d
		if red[i] {
			kept[i] = 1
		}
		if !red[i] || keep {
			out = append(out, kept[i])
		}
	}
	kst := tensor.Strides(kept)
	return out, NumElements(kept), func(idx []int) int {
		off := 0
		for k, i := range idx {
			if !red[k] {
				off += i * kst[k]
			}
		}
		return off
	}
}

// evalReduceMore computes the reductions of this file.
func evalReduceMore(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	red, noop, err := reducedAxes(n, in, 1, len(x.Shape))
	if err != nil {
		return nil, err
	}
	if noop {
		return []*tensor.Tensor{x.Clone()}, nil
	}
	shape, cells, cellOf := reduceLayout(x.Shape, red, attrInt(n, "keepdims") != 0)
	out, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	if !isFloatVal(x.DType) {
		if !isInt(x.DType) {
			return nil, fmt.Errorf("dtype %v is not supported", x.DType)
		}
		acc := make([]int64, cells)
		for i := range acc {
			switch n.Op {
			case "ReduceMin":
				_, acc[i] = x.DType.IntRange()
			case "ReduceProd":
				acc[i] = 1
			}
		}
		_ = forIndex(x.Shape, func(flat int, idx []int) error {
			c, v := cellOf(idx), x.I64[flat]
			switch n.Op {
			case "ReduceMin":
				acc[c] = min(acc[c], v)
			case "ReduceProd":
				acc[c] *= v
			case "ReduceL1":
				acc[c] += max(v, -v)
			case "ReduceSumSquare":
				acc[c] += v * v
			}
			return nil
		})
		for i, v := range acc {
			out.I64[i] = wrapInt(x.DType, v)
		}
		return []*tensor.Tensor{out}, nil
	}
	acc := make([]float64, cells)
	var peak []float64 // ReduceLogSumExp: the maximum of each cell, subtracted before exp
	switch n.Op {
	case "ReduceMin":
		for i := range acc {
			acc[i] = math.Inf(1)
		}
	case "ReduceProd":
		for i := range acc {
			acc[i] = 1
		}
	case "ReduceLogSumExp":
		peak = make([]float64, cells)
		for i := range peak {
			peak[i] = math.Inf(-1)
		}
		_ = forIndex(x.Shape, func(flat int, idx []int) error {
			c := cellOf(idx)
			peak[c] = math.Max(peak[c], numAt(x, flat))
			return nil
		})
	}
	_ = forIndex(x.Shape, func(flat int, idx []int) error {
		c, v := cellOf(idx), numAt(x, flat)
		switch n.Op {
		case "ReduceMin":
			if math.IsNaN(v) || v < acc[c] {
				acc[c] = v
			}
		case "ReduceProd":
			acc[c] *= v
		case "ReduceL1":
			acc[c] += math.Abs(v)
		case "ReduceL2", "ReduceSumSquare":
			acc[c] += v * v
		case "ReduceLogSum":
			acc[c] += v
		case "ReduceLogSumExp":
			if !math.IsInf(peak[c], 0) {
				acc[c] += math.Exp(v - peak[c])
			}
		}
		return nil
	})
	for i, v := range acc {
		switch n.Op {
		case "ReduceL2":
			v = math.Sqrt(v)
		case "ReduceLogSum":
			v = math.Log(v)
		case "ReduceLogSumExp":
			if math.IsInf(peak[i], 0) {
				v = peak[i] // every element −Inf (or a +Inf): log Σ e^x is that
			} else {
				v = peak[i] + math.Log(v)
			}
		}
		setNum(out, i, v)
	}
	return []*tensor.Tensor{out}, nil
}

// ---- ArgMax, ArgMin ----

func (c *nodeCtx) argReduce() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !isNumeric(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(0), x.dt)
	}
	if x.shape == nil {
		return one(mk(tensor.Int64, nil)), nil
	}
	axis, err := NormAxis(attrInt(c.n, "axis"), len(x.shape))
	if err != nil {
		return nil, err
	}
	out := Shape{}
	for i, d := range x.shape {
		switch {
		case i != axis:
			out = append(out, d)
		case attrInt(c.n, "keepdims") != 0:
			out = append(out, Fixed(1))
		}
	}
	if d := x.shape[axis]; d.Known() && d.Size == 0 {
		return nil, fmt.Errorf("%s over axis %d of size 0", c.n.Op, axis)
	}
	return one(mk(tensor.Int64, out)), nil
}

func evalArgReduce(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	red := make([]bool, len(x.Shape))
	red[axis] = true
	shape, cells, cellOf := reduceLayout(x.Shape, red, attrInt(n, "keepdims") != 0)
	out, err := newTensor(tensor.Int64, shape)
	if err != nil {
		return nil, err
	}
	isMax, last := n.Op == "ArgMax", attrInt(n, "select_last_index") != 0
	best := make([]float64, cells)
	bestI := make([]int64, cells)
	seen := make([]bool, cells)
	_ = forIndex(x.Shape, func(flat int, idx []int) error {
		c := cellOf(idx)
		v := numAt(x, flat)
		if isInt(x.DType) {
			v = float64(x.I64[flat]) // exact for the values int types hold up to 2^53
		}
		better := !seen[c]
		if seen[c] && !math.IsNaN(best[c]) {
			switch {
			case math.IsNaN(v): // NaN is the extreme, as numpy's argmax and argmin say
				better = true
			case v == best[c]:
				better = last
			case isMax:
				better = v > best[c]
			default:
				better = v < best[c]
			}
		} else if seen[c] && math.IsNaN(best[c]) {
			better = last && math.IsNaN(v)
		}
		if better {
			best[c], bestI[c], seen[c] = v, int64(idx[axis]), true
		}
		return nil
	})
	copy(out.I64, bestI)
	return []*tensor.Tensor{out}, nil
}

// ---- LogSoftmax, Hardmax ----

// evalAlongAxis computes LogSoftmax or Hardmax along the axis, in float64.
func evalAlongAxis(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	out, err := newTensor(x.DType, x.Shape)
	if err != nil {
		return nil, err
	}
	outer, dim := NumElements(x.Shape[:axis]), x.Shape[axis]
	inner := NumElements(x.Shape[axis+1:])
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			at := func(j int) int { return (o*dim+j)*inner + i }
			mx, arg := math.Inf(-1), -1
			for j := 0; j < dim; j++ {
				if v := numAt(x, at(j)); arg < 0 || v > mx || (math.IsNaN(v) && !math.IsNaN(mx)) {
					mx, arg = v, j
				}
			}
			if n.Op == "Hardmax" {
				if arg >= 0 {
					setNum(out, at(arg), 1)
				}
				continue
			}
			var sum float64
			for j := 0; j < dim; j++ {
				sum += math.Exp(numAt(x, at(j)) - mx)
			}
			lse := math.Log(sum)
			for j := 0; j < dim; j++ {
				setNum(out, at(j), numAt(x, at(j))-mx-lse)
			}
		}
	}
	return []*tensor.Tensor{out}, nil
}

// gradLogSoftmax: dx = dy − softmax(x) · Σ dy along the axis.
func gradLogSoftmax(c *GradCtx) ([]string, error) {
	y, dy := c.Node.Outputs[0], c.OutGrads[0]
	g := c.grads()
	if dy == "" || !c.float(0) {
		return g, nil
	}
	axis := attrInt(c.Node, "axis")
	sum := c.op1("ReduceSum", Attrs{"keepdims": Int(1)}, dy, c.ConstInts(axis))
	g[0] = c.Sub(dy, c.Mul(c.op1("Exp", nil, y), sum))
	return g, nil
}

// ---- TopK ----

func (c *nodeCtx) topK() ([]*absVal, error) {
	x, err := c.req(0)
	if err != nil {
		return nil, err
	}
	if !isNumeric(x.dt) {
		return nil, fmt.Errorf("input %q has dtype %v, want a number type", c.name(0), x.dt)
	}
	if err := c.checkVec(1, "K", true); err != nil {
		return nil, err
	}
	if x.shape == nil {
		return []*absVal{mk(x.dt, nil), mk(tensor.Int64, nil)}, nil
	}
	axis, err := NormAxis(attrInt(c.n, "axis"), len(x.shape))
	if err != nil {
		return nil, err
	}
	out := cloneShape(x.shape)
	out[axis] = unknownDim
	if k, ok := c.ints(1, "K"); ok && len(k) == 1 {
		if k[0] < 0 || (x.shape[axis].Known() && k[0] > x.shape[axis].Size) {
			return nil, fmt.Errorf("K %d is outside [0, %v], the size of axis %d", k[0], x.shape[axis], axis)
		}
		out[axis] = Fixed(k[0])
	}
	return []*absVal{mk(x.dt, out), mk(tensor.Int64, cloneShape(out))}, nil
}

func evalTopK(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	ks, err := intsOf(in[1], "K")
	if err != nil {
		return nil, err
	}
	if len(ks) != 1 {
		return nil, errors.New("K must hold one value")
	}
	axis, err := NormAxis(attrInt(n, "axis"), len(x.Shape))
	if err != nil {
		return nil, err
	}
	dim := x.Shape[axis]
	k := int(ks[0])
	if k < 0 || k > dim {
		return nil, fmt.Errorf("K %d is outside [0, %d], the size of axis %d", k, dim, axis)
	}
	shape := append([]int{}, x.Shape...)
	shape[axis] = k
	vals, err := newTensor(x.DType, shape)
	if err != nil {
		return nil, err
	}
	idxs, err := newTensor(tensor.Int64, shape)
	if err != nil {
		return nil, err
	}
	largest := attrInt(n, "largest") != 0
	outer, inner := NumElements(x.Shape[:axis]), NumElements(x.Shape[axis+1:])
	order := make([]int, dim)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			at := func(j int) int { return (o*dim+j)*inner + i }
			key := func(j int) float64 {
				if isInt(x.DType) {
					return float64(x.I64[at(j)])
				}
				return numAt(x, at(j))
			}
			for j := range order {
				order[j] = j
			}
			sort.SliceStable(order, func(a, b int) bool {
				va, vb := key(order[a]), key(order[b])
				if an, bn := math.IsNaN(va), math.IsNaN(vb); an || bn { // NaN sorts as the largest value
					return an != bn && an == largest
				}
				if largest {
					return va > vb
				}
				return va < vb
			})
			for j := 0; j < k; j++ {
				dst := (o*k+j)*inner + i
				copyElem(vals, dst, x, at(order[j]))
				idxs.I64[dst] = int64(order[j])
			}
		}
	}
	return []*tensor.Tensor{vals, idxs}, nil
}
