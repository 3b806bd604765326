package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// PyTorch exports torch.einsum as ONNX Einsum and 1/x as Reciprocal (performer's and
// linear attention's references write both). zoo's graph has neither op: the importer
// writes them as the ops it runs, so that the CPU backend's fusions see plain products.
//
// An Einsum becomes, operand by operand from the left, ReduceSum of the labels no later
// operand or the output names, Transpose to (shared, own, contracted) order, then either
// MatMul (one contracted label and at most one own label per side) or Mul (no contracted
// label, the own labels unsqueezed), and a final Transpose to the output's order. A
// leading ellipsis ("...id,...jd->...ij", as performer-pytorch writes) is one shared label:
// each operand with one is reshaped to (-1, its named axes) and the output back to the
// first such operand's ellipsis dimensions, so every operand's ellipsis must have the same
// dimensions (PyTorch's broadcasting of them is not supported; the products fail where the
// sizes differ). An ellipsis that is not leading, a repeated label within one operand, or
// more than one own or contracted label in one product is refused with an error naming it.

// einsumTerm is an operand or intermediate value and its labels, one per axis.
type einsumTerm struct {
	name   string
	labels []byte
}

// einsum returns the nodes that compute np, an Einsum.
func (u *upgrader) einsum(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	a := findAttr(np, "equation")
	if a == nil {
		return nil, fmt.Errorf("Einsum needs the equation attribute")
	}
	eq := strings.ReplaceAll(string(a.GetS()), " ", "")
	lhs, out, explicit := strings.Cut(strings.ReplaceAll(eq, "...", string(ellipsis)), "->")
	if strings.Contains(lhs+out, ".") {
		return nil, fmt.Errorf("Einsum %q: a stray '.'", eq)
	}
	terms := strings.Split(lhs, ",")
	if len(terms) != len(np.GetInput()) || len(np.GetOutput()) != 1 {
		return nil, fmt.Errorf("Einsum %q has %d inputs and %d outputs", eq, len(np.GetInput()), len(np.GetOutput()))
	}
	count := map[byte]int{}
	var ops []einsumTerm
	for i, t := range terms {
		for j := 0; j < len(t); j++ {
			c := t[j]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == ellipsis) || strings.IndexByte(t[j+1:], c) >= 0 {
				return nil, fmt.Errorf("Einsum %q: operand %d must be distinct letters", eq, i)
			}
			if c == ellipsis && j > 0 {
				return nil, fmt.Errorf("Einsum %q: operand %d's ellipsis is not leading", eq, i)
			}
			if c != ellipsis {
				count[c]++
			}
		}
		ops = append(ops, einsumTerm{np.GetInput()[i], []byte(t)})
	}
	if !explicit { // implicit output: the ellipsis, then the labels that appear once, in alphabetical order
		var ls []byte
		for c, n := range count {
			if n == 1 {
				ls = append(ls, c)
			}
		}
		slices.Sort(ls)
		if strings.IndexByte(lhs, ellipsis) >= 0 {
			ls = append([]byte{ellipsis}, ls...)
		}
		out = string(ls)
	}
	if strings.IndexByte(out, ellipsis) > 0 {
		return nil, fmt.Errorf("Einsum %q: the output's ellipsis is not leading", eq)
	}
	for j := 0; j < len(out); j++ {
		if out[j] == ellipsis && strings.IndexByte(lhs, ellipsis) >= 0 {
			continue
		}
		if count[out[j]] == 0 || strings.IndexByte(out[j+1:], out[j]) >= 0 {
			return nil, fmt.Errorf("Einsum %q: output label %q is not one input label", eq, out[j])
		}
	}
	for i, t := range ops {
		if len(t.labels) > 0 && t.labels[0] == ellipsis {
			if c, ok := u.expandedConst(t.name, len(t.labels)-1); ok {
				ops[i] = einsumTerm{c, t.labels[1:]}
			}
		}
	}
	// First as broadcast leading dimensions of unknown rank (no reshapes, as MatMul and Mul
	// broadcast them); where that needs the rank (a Transpose or sum of an operand with an
	// ellipsis), with the ellipsis flattened.
	e, cur, err := u.lowerEinsum(np, ops, out, true, true)
	if err == nil && !e.needRank {
		e, cur, err = u.lowerEinsum(np, ops, out, true, false)
	} else {
		e, cur, err = u.lowerEinsum(np, ops, out, false, false)
	}
	if err != nil {
		return nil, fmt.Errorf("Einsum %q: %w", eq, err)
	}
	if len(e.nodes) == 0 || e.nodes[len(e.nodes)-1].Output[0] != cur.name {
		e.nodes = append(e.nodes, &onnxpb.NodeProto{Name: np.GetName(), OpType: "Identity", Input: []string{cur.name},
			Output: []string{np.GetOutput()[0]}})
	} else {
		e.nodes[len(e.nodes)-1].Output[0] = np.GetOutput()[0]
	}
	return e.nodes, nil
}

// lowerEinsum writes the products of ops with output labels out. block: an ellipsis is a
// leading block of dimensions of unknown rank (e.needRank reports where that does not
// work); otherwise each operand's ellipsis is flattened to one axis and the output's
// restored. dry: only e.needRank is computed; no node or constant is made.
func (u *upgrader) lowerEinsum(np *onnxpb.NodeProto, ops []einsumTerm, out string, block, dry bool) (*einsumLowering, einsumTerm, error) {
	e := &einsumLowering{u: u, np: np, block: block, dry: dry}
	prefix := ""
	ops = slices.Clone(ops)
	for i, t := range ops {
		if !block && len(t.labels) > 0 && t.labels[0] == ellipsis {
			var p string
			ops[i].name, p = e.flatten(t.name, len(t.labels)-1)
			if prefix == "" {
				prefix = p
			}
		}
	}
	cur := e.sumOut(ops[0], needed(out, ops[1:]))
	for k := 1; k < len(ops); k++ {
		keep := needed(out, ops[k+1:])
		next := e.sumOut(ops[k], keep+string(cur.labels))
		cur = e.sumOut(cur, keep+string(next.labels))
		var err error
		if cur, err = e.product(cur, next, keep); err != nil {
			return nil, einsumTerm{}, err
		}
	}
	cur = e.transpose(cur, []byte(out))
	if prefix != "" && len(out) > 0 && out[0] == ellipsis {
		cur.name = e.unflatten(cur.name, prefix)
	}
	return e, cur, nil
}

// expandedConst returns c where name is Expand(c, shape) with c a constant of rank named
// whose every dimension exceeds 1: the Expand then only adds leading dimensions, which an
// einsum's ellipsis broadcasts anyway (performer-pytorch expands Ω to (b, h, m, d)).
func (u *upgrader) expandedConst(name string, named int) (string, bool) {
	for _, n := range u.g.GetNode() {
		if len(n.GetOutput()) != 1 || n.GetOutput()[0] != name {
			continue
		}
		if n.GetOpType() != "Expand" || !isONNXDomain(n.GetDomain()) || len(n.GetInput()) != 2 {
			return "", false
		}
		c := n.GetInput()[0]
		var dims []int64
		if tp, ok := u.inits[c]; ok && !slices.ContainsFunc(u.g.GetInput(), func(vi *onnxpb.ValueInfoProto) bool { return vi.GetName() == c }) {
			dims = tp.GetDims()
		} else if cn, ok := u.consts[c]; ok {
			if a := findAttr(cn, "value"); a != nil && a.GetT() != nil {
				dims = a.GetT().GetDims()
			} else {
				return "", false
			}
		} else {
			return "", false
		}
		if len(dims) != named || slices.ContainsFunc(dims, func(d int64) bool { return d <= 1 }) {
			return "", false
		}
		return c, true
	}
	return "", false
}

// ellipsis stands for "..." among an equation's labels.
const ellipsis = '*'

// flatten reshapes x, whose last named axes follow its ellipsis, to (-1, those axes) and
// returns the result and x's ellipsis dimensions (a 1-D shape value).
func (e *einsumLowering) flatten(x string, named int) (flat, prefix string) {
	shape := e.add("Shape", x)
	if named == 0 {
		return e.add("Reshape", x, e.ints("flat", []int64{-1})), shape
	}
	tail := e.add("Slice", shape, e.ints("starts", []int64{int64(-named)}),
		e.ints("ends", []int64{math.MaxInt64}))
	prefix = e.add("Slice", shape, e.ints("starts", []int64{0}), e.ints("ends", []int64{int64(-named)}))
	to := e.concat(e.ints("flat", []int64{-1}), tail)
	return e.add("Reshape", x, to), prefix
}

// unflatten reshapes y, whose first axis is a flattened ellipsis, to (prefix, y's other axes).
func (e *einsumLowering) unflatten(y, prefix string) string {
	rest := e.add("Slice", e.add("Shape", y), e.ints("starts", []int64{1}),
		e.ints("ends", []int64{math.MaxInt64}))
	return e.add("Reshape", y, e.concat(prefix, rest))
}

// concat joins 1-D values along axis 0.
func (e *einsumLowering) concat(in ...string) string {
	name := e.add("Concat", in...)
	e.nodes[len(e.nodes)-1].Attribute = []*onnxpb.AttributeProto{{Name: "axis", Type: onnxpb.AttributeProto_INT, I: 0}}
	return name
}

// needed returns the labels of out and of the terms rest, which a product must keep.
func needed(out string, rest []einsumTerm) string {
	for _, t := range rest {
		out += string(t.labels)
	}
	return out
}

// einsumLowering collects the nodes of one Einsum's lowering (see lowerEinsum for block
// and dry).
type einsumLowering struct {
	u          *upgrader
	np         *onnxpb.NodeProto
	nodes      []*onnxpb.NodeProto
	block, dry bool
	needRank   bool
}

// ints returns a new 1-D int64 constant holding v.
func (e *einsumLowering) ints(what string, v []int64) string {
	if e.dry {
		return "dry"
	}
	return e.u.constInts(e.np, what, v)
}

// axis returns axis p of a value of rank r (in labels) whose labels are labels: p, or p−r
// where a leading ellipsis is a block of unknown rank.
func (e *einsumLowering) axis(p, r int, labels []byte) int64 {
	if e.block && len(labels) > 0 && labels[0] == ellipsis {
		return int64(p - r)
	}
	return int64(p)
}

// add appends a node of type op reading in and returns its output's name.
func (e *einsumLowering) add(op string, in ...string) string {
	if e.dry {
		e.nodes = append(e.nodes, &onnxpb.NodeProto{OpType: op, Output: []string{"dry"}})
		return "dry"
	}
	o := e.u.fresh(e.np, strings.ToLower(op))
	e.nodes = append(e.nodes, &onnxpb.NodeProto{Name: o, OpType: op, Input: in, Output: []string{o}})
	return o
}

// sumOut sums t over the labels that keep does not name.
func (e *einsumLowering) sumOut(t einsumTerm, keep string) einsumTerm {
	var axes []int64
	var rest []byte
	for i, c := range t.labels {
		if strings.IndexByte(keep, c) < 0 {
			if c == ellipsis && e.block {
				e.needRank = true
			}
			axes = append(axes, e.axis(i, len(t.labels), t.labels))
		} else {
			rest = append(rest, c)
		}
	}
	if len(axes) == 0 {
		return t
	}
	name := e.add("ReduceSum", t.name, e.ints("axes", axes))
	e.nodes[len(e.nodes)-1].Attribute = []*onnxpb.AttributeProto{{Name: "keepdims", Type: onnxpb.AttributeProto_INT, I: 0}}
	return einsumTerm{name, rest}
}

// transpose returns t with its axes in the order of labels (a permutation of t's).
func (e *einsumLowering) transpose(t einsumTerm, labels []byte) einsumTerm {
	perm := make([]int64, len(labels))
	identity := true
	for i, c := range labels {
		perm[i] = int64(slices.Index(t.labels, c))
		identity = identity && perm[i] == int64(i)
	}
	if identity {
		return einsumTerm{t.name, labels}
	}
	if e.block && len(labels) > 0 && labels[0] == ellipsis {
		e.needRank = true
	}
	name := e.add("Transpose", t.name)
	e.nodes[len(e.nodes)-1].Attribute = []*onnxpb.AttributeProto{{Name: "perm", Type: onnxpb.AttributeProto_INTS, Ints: perm}}
	return einsumTerm{name, labels}
}

// unsqueeze inserts size-1 axes at axes (of the result) into name.
func (e *einsumLowering) unsqueeze(name string, axes ...int64) string {
	if len(axes) == 0 {
		return name
	}
	return e.add("Unsqueeze", name, e.ints("axes", axes))
}

// product multiplies a and b, summing the labels both have that keep does not name. The
// result's labels are (shared, a's own, b's own); a kept ellipsis block is shared even
// where one side lacks it (MatMul and Mul broadcast leading dimensions).
func (e *einsumLowering) product(a, b einsumTerm, keep string) (einsumTerm, error) {
	// keep starts with the output's labels: the side whose own labels come first there goes
	// first, so that the result needs no Transpose where the output follows it.
	if first(b, a, keep) < first(a, b, keep) {
		a, b = b, a
	}
	var batch, contr, left, right []byte
	kept := func(c byte) bool { return strings.IndexByte(keep, c) >= 0 }
	block := func(c byte) bool { return c == ellipsis && e.block && kept(c) }
	for _, c := range a.labels {
		switch {
		case block(c) || slices.Contains(b.labels, c) && kept(c):
			batch = append(batch, c)
		case slices.Contains(b.labels, c):
			contr = append(contr, c)
		default:
			left = append(left, c)
		}
	}
	for _, c := range b.labels {
		switch {
		case slices.Contains(a.labels, c):
		case block(c):
			batch = append([]byte{c}, batch...)
		default:
			right = append(right, c)
		}
	}
	own := func(t einsumTerm) []byte {
		var bt []byte
		for _, c := range batch {
			if slices.Contains(t.labels, c) {
				bt = append(bt, c)
			}
		}
		return bt
	}
	ba, bb := own(a), own(b)
	labels := slices.Concat(batch, left, right)
	if len(contr) == 0 {
		x := e.transpose(a, slices.Concat(ba, left))
		xl := slices.Concat(ba, left, right)
		var ra []int64
		for i := range right {
			ra = append(ra, e.axis(len(ba)+len(left)+i, len(xl), xl))
		}
		y := e.transpose(b, slices.Concat(bb, right))
		yl := slices.Concat(bb, left, right)
		var la []int64
		for i := range left {
			la = append(la, e.axis(len(bb)+i, len(yl), yl))
		}
		return einsumTerm{e.add("Mul", e.unsqueeze(x.name, ra...), e.unsqueeze(y.name, la...)), labels}, nil
	}
	if len(contr) > 1 || len(left) > 1 || len(right) > 1 {
		return einsumTerm{}, fmt.Errorf("a product of %q and %q sums %d labels with %d and %d own: at most 1 each is supported",
			a.labels, b.labels, len(contr), len(left), len(right))
	}
	x := e.transpose(a, slices.Concat(ba, left, contr)).name
	y := e.transpose(b, slices.Concat(bb, contr, right)).name
	nb := len(batch)
	var squeeze []int64
	if len(left) == 0 {
		x = e.unsqueeze(x, e.axis(len(ba), len(ba)+2, ba))
		squeeze = append(squeeze, e.axis(nb, nb+2, batch))
	}
	if len(right) == 0 {
		y = e.unsqueeze(y, e.axis(len(bb)+1, len(bb)+2, bb))
		squeeze = append(squeeze, e.axis(nb+1, nb+2, batch))
	}
	name := e.add("MatMul", x, y)
	if len(squeeze) > 0 {
		name = e.add("Squeeze", name, e.ints("axes", squeeze))
	}
	return einsumTerm{name, labels}, nil
}

// first returns the position in keep of t's first label that other lacks, or len(keep).
func first(t, other einsumTerm, keep string) int {
	for _, c := range t.labels {
		if !slices.Contains(other.labels, c) {
			if i := strings.IndexByte(keep, c); i >= 0 {
				return i
			}
		}
	}
	return len(keep)
}

// reciprocal returns Div(1, x) for np, a Reciprocal (float32, the only float zoo runs).
func (u *upgrader) reciprocal(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	if len(np.GetInput()) != 1 || len(np.GetOutput()) != 1 {
		return nil, fmt.Errorf("Reciprocal needs one input and one output")
	}
	one := u.fresh(np, "one")
	tp := &onnxpb.TensorProto{Name: one, DataType: int32(tensor.Float32),
		RawData: binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))}
	u.g.Initializer = append(u.g.Initializer, tp)
	u.inits[one] = tp
	u.uses[one]++
	return []*onnxpb.NodeProto{{Name: np.GetName(), OpType: "Div", Input: []string{one, np.GetInput()[0]},
		Output: np.GetOutput()}}, nil
}
