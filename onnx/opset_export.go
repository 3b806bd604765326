package onnx

import (
	"encoding/json"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Version adapters for export: the graph, in the op table's form, is written in the form each
// node takes at the requested opset (MinOpset to MaxOpset):
//
//   - LayerNormalization below 17, Gelu below 20 and RMSNormalization below 23 are written
//     out as basic ops (ReduceMean, Sub, Mul, Add, Sqrt, Div, Erf or Tanh), computing what
//     the op defines.
//   - ReduceMean, ReduceMax and the other reductions but ReduceSum take their axes as an input
//     from 18 on; Squeeze and ReduceSum always do at 13 and later (the table also reads the
//     attribute form).
//   - Split without sizes gets num_outputs from 18 on (which it then requires); Split with
//     num_outputs below 18 gets explicit sizes where the split axis has a static size.
//   - Shape's start and end below 15 become Shape followed by Slice.
//   - Cast's saturate below 19 and Reshape's allowzero 0 below 14 are dropped (their default
//     meaning); BatchNormalization in training mode is refused below 14; allowzero 1 below 14 is refused unless the target shape is a constant without
//     zeros.
//   - From 23 on, zoo's scaled dot-product attention blocks are written as Attention where
//     their math is exactly Attention's (opset_fuse.go); below, they are listed as decomposed.
//   - From 23 on, the rope variant's rotate-half rotation is written as RotaryEmbedding
//     (opset_rotary.go); below, it is listed as decomposed.
//   - RotaryEmbedding and Attention nodes have no lowering: below 23 Export refuses them by
//     name.
//
// The model's metadata says how the composite ops came out: MetaStandard lists the nodes
// written as the standard ONNX op, MetaDecomposed maps each node written out as basic ops to
// its op.

// Metadata keys Export writes (JSON) and Import leaves out of Graph.Meta.
const (
	MetaStandard   = "zoo.onnx.standard"
	MetaDecomposed = "zoo.onnx.decomposed"
)

// compositeOps are the ops whose nodes the metadata accounts for, with the opset from which
// each is written as itself (below it, as basic ops; 0 = never decomposed, refused below its
// SinceVersion).
var compositeOps = map[string]int{
	"LayerNormalization": 17, "Gelu": 20, "RMSNormalization": 23, "RotaryEmbedding": 0, "Attention": 0,
}

// DecomposedBelow reports whether Export writes op out as basic ops at opsets below some
// version, and which: LayerNormalization below 17, Gelu below 20, RMSNormalization below 23.
func DecomposedBelow(op string) (int, bool) {
	v := compositeOps[op]
	return v, v > 0
}

// lowering carries one export's rewrite.
type lowering struct {
	g        *graph.Graph
	opset    int
	nodes    []*graph.Node
	n        int
	std      []string
	dec      map[string]string
	names    map[string]bool
	orig     []*graph.Node
	inferred map[string]graph.ValueInfo
}

// lowerForOpset returns g written for opset: a copy whose nodes take the opset's forms, with
// the metadata keys set. g is not modified.
func lowerForOpset(g *graph.Graph, opset int) (*graph.Graph, error) {
	out := *g
	out.Nodes = nil
	out.Initializers = append([]graph.Initializer(nil), g.Initializers...)
	out.Meta = map[string]string{}
	for k, v := range g.Meta {
		if k != MetaStandard && k != MetaDecomposed {
			out.Meta[k] = v
		}
	}
	l := &lowering{g: &out, opset: opset, dec: map[string]string{}, names: map[string]bool{}, orig: g.Nodes}
	for _, in := range g.Initializers {
		l.names[in.Name] = true
	}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			l.names[o] = true
		}
	}
	for _, n := range l.fuseAttention(l.fuseRotary(g.Nodes)) {
		if err := l.lower(n); err != nil {
			return nil, fmt.Errorf("node %q (%s) at opset %d: %w", n.Name, n.Op, opset, err)
		}
	}
	out.Nodes = l.nodes
	if len(l.std) > 0 {
		js, _ := json.Marshal(l.std)
		out.Meta[MetaStandard] = string(js)
	}
	if len(l.dec) > 0 {
		js, _ := json.Marshal(l.dec)
		out.Meta[MetaDecomposed] = string(js)
	}
	return &out, nil
}

// fresh returns a new value name derived from base.
func (l *lowering) fresh(base string) string {
	for {
		l.n++
		name := fmt.Sprintf("%s/opset%d.%d", base, l.opset, l.n)
		if !l.names[name] {
			l.names[name] = true
			return name
		}
	}
}

// constInts adds a 1-D int64 builder constant and returns its name.
func (l *lowering) constInts(base string, v ...int64) string {
	name := constPrefixAdapter + l.fresh(base)
	t, _ := tensor.FromInt64(append([]int64{}, v...), len(v))
	l.g.Initializers = append(l.g.Initializers, graph.Initializer{Name: name, Tensor: t})
	return name
}

// constFloat adds a float32 scalar builder constant and returns its name.
func (l *lowering) constFloat(base string, v float32) string {
	name := constPrefixAdapter + l.fresh(base)
	l.g.Initializers = append(l.g.Initializers, graph.Initializer{Name: name, Tensor: tensor.ScalarF(v)})
	return name
}

// op appends a node and returns its output (named out, or fresh when out is "").
func (l *lowering) op(base, op, out string, inputs []string, attrs graph.Attrs) string {
	if out == "" {
		out = l.fresh(base)
	}
	l.nodes = append(l.nodes, &graph.Node{Name: l.fresh(base), Op: op, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
	return out
}

// cloneNode copies n with its own input list and attribute map.
func cloneNode(n *graph.Node) *graph.Node {
	c := *n
	c.Inputs = append([]string(nil), n.Inputs...)
	c.Outputs = append([]string(nil), n.Outputs...)
	c.Attrs = graph.Attrs{}
	for k, v := range n.Attrs {
		c.Attrs[k] = v
	}
	return &c
}

// axesToInput moves n's axes attribute to its second input.
func (l *lowering) axesToInput(n *graph.Node) {
	a, ok := n.Attrs["axes"]
	if !ok || a.Kind != graph.AttrInts {
		return
	}
	delete(n.Attrs, "axes")
	if len(n.Inputs) < 2 {
		n.Inputs = append(n.Inputs, l.constInts(n.Name+"/axes", a.Ints...))
	}
}

// shape returns the static shape of value name (a graph input, an initializer or an inferred
// value), or nil.
func (l *lowering) shape(name string) graph.Shape {
	for _, v := range l.g.Inputs {
		if v.Name == name {
			return v.Shape
		}
	}
	if t := l.g.Initializer(name); t != nil {
		s := make(graph.Shape, len(t.Shape))
		for i, d := range t.Shape {
			s[i] = graph.Fixed(int64(d))
		}
		return s
	}
	if l.inferred == nil {
		probe := *l.g
		probe.Nodes = l.orig
		probe.Initializers = l.g.Initializers
		l.inferred = map[string]graph.ValueInfo{}
		if err := probe.InferShapes(); err == nil {
			l.inferred = probe.ValueInfo
		}
	}
	return l.inferred[name].Shape
}

// rank returns the static rank of value name, or -1.
func (l *lowering) rank(name string) int {
	if s := l.shape(name); s != nil {
		return len(s)
	}
	return -1
}

// dim returns the static size of axis of value name, or -1.
func (l *lowering) dim(name string, axis int64) int64 {
	s := l.shape(name)
	if s == nil {
		return -1
	}
	a, err := graph.NormAxis(axis, len(s))
	if err != nil || !s[a].Known() {
		return -1
	}
	return s[a].Size
}

func (l *lowering) lower(orig *graph.Node) error {
	n := cloneNode(orig)
	if !isONNXDomain(n.Domain) {
		l.nodes = append(l.nodes, n) // other domains' ops have no opset forms here
		return nil
	}
	if v, ok := compositeOps[n.Op]; ok {
		if v > 0 && l.opset < v {
			l.dec[n.Name] = n.Op
			switch n.Op {
			case "LayerNormalization":
				return l.layerNorm(n)
			case "Gelu":
				return l.gelu(n)
			case "RMSNormalization":
				return l.rmsNorm(n)
			}
		}
		l.std = append(l.std, n.Name)
	}
	switch n.Op {
	case "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp":
		if l.opset >= 18 {
			l.axesToInput(n)
		}
	case "Squeeze", "ReduceSum":
		l.axesToInput(n)
	case "Split":
		_, hasNum := n.Attrs["num_outputs"]
		hasSplit := len(n.Inputs) > 1 && n.Inputs[1] != ""
		switch {
		case l.opset >= 18 && !hasNum && !hasSplit:
			n.Attrs["num_outputs"] = graph.Int(int64(len(n.Outputs)))
		case l.opset < 18 && hasNum:
			k := n.Attrs["num_outputs"].I
			delete(n.Attrs, "num_outputs")
			size := l.dim(n.Inputs[0], n.Int("axis", 0))
			if size < 0 {
				return fmt.Errorf("Split with num_outputs needs a static size on its axis below opset 18")
			}
			chunk := (size + k - 1) / k
			var sizes []int64
			for left := size; left > 0; left -= chunk {
				sizes = append(sizes, min(chunk, left))
			}
			n.Inputs = append(n.Inputs[:1], l.constInts(n.Name+"/split", sizes...))
		}
	case "Shape":
		_, s := n.Attrs["start"]
		_, e := n.Attrs["end"]
		if l.opset < 15 && (s || e) {
			start := n.Int("start", 0)
			end := n.Int("end", math.MaxInt64)
			delete(n.Attrs, "start")
			delete(n.Attrs, "end")
			full := l.fresh(n.Name + "/full")
			y := n.Outputs[0]
			n.Outputs = []string{full}
			l.nodes = append(l.nodes, n)
			l.op(n.Name+"/slice", "Slice", y, []string{full, l.constInts(n.Name+"/start", start), l.constInts(n.Name+"/end", end), l.constInts(n.Name+"/axes", 0)}, nil)
			return nil
		}
	case "Cast":
		if l.opset < 19 {
			delete(n.Attrs, "saturate")
		}
	case "BatchNormalization":
		if n.Int("training_mode", 0) != 0 && l.opset < 14 {
			return fmt.Errorf("BatchNormalization in training mode needs opset 14 (training_mode)")
		}
	case "Reshape":
		if a, ok := n.Attrs["allowzero"]; ok && l.opset < 14 {
			if a.I != 0 {
				t := l.g.Initializer(n.Inputs[1])
				if t == nil {
					return fmt.Errorf("Reshape with allowzero 1 needs opset 14 unless its shape is a constant without zeros")
				}
				for _, v := range t.I64 {
					if v == 0 {
						return fmt.Errorf("Reshape with allowzero 1 and a zero in its shape needs opset 14")
					}
				}
			}
			delete(n.Attrs, "allowzero")
		}
	}
	l.nodes = append(l.nodes, n)
	return nil
}

// normAxes returns the axes from axis to the last, as negative numbers when the rank is
// unknown and axis is negative (both mean the same trailing axes).
func (l *lowering) normAxes(x string, axis int64) ([]int64, error) {
	if axis < 0 {
		var axes []int64
		for a := axis; a < 0; a++ {
			axes = append(axes, a)
		}
		return axes, nil
	}
	r := l.rank(x)
	if r < 0 {
		return nil, fmt.Errorf("axis %d over an input of unknown rank cannot be written out (use a negative axis)", axis)
	}
	var axes []int64
	for a := axis; a < int64(r); a++ {
		axes = append(axes, a)
	}
	return axes, nil
}

// mean returns ReduceMean(x) over axes, keeping them, in the opset's form.
func (l *lowering) mean(base, x string, axes []int64) string {
	if l.opset >= 18 {
		return l.op(base, "ReduceMean", "", []string{x, l.constInts(base+"/axes", axes...)}, nil)
	}
	return l.op(base, "ReduceMean", "", []string{x}, graph.Attrs{"axes": graph.Ints(axes...)})
}

// layerNorm writes LayerNormalization as (x − mean) / sqrt(var + eps) · scale + B, with the
// Mean and InvStdDev outputs where they are used.
func (l *lowering) layerNorm(n *graph.Node) error {
	x := n.Inputs[0]
	axes, err := l.normAxes(x, n.Int("axis", -1))
	if err != nil {
		return err
	}
	base := n.Name
	mu := l.mean(base+"/mean", x, axes)
	d := l.op(base+"/center", "Sub", "", []string{x, mu}, nil)
	v := l.mean(base+"/var", l.op(base+"/square", "Mul", "", []string{d, d}, nil), axes)
	std := l.op(base+"/std", "Sqrt", "", []string{l.op(base+"/eps", "Add", "", []string{v, l.constFloat(base+"/epsilon", n.Float("epsilon", 1e-5))}, nil)}, nil)
	y := l.op(base+"/norm", "Div", "", []string{d, std}, nil)
	hasBias := len(n.Inputs) > 2 && n.Inputs[2] != ""
	out := n.Outputs[0]
	if hasBias {
		out = ""
	}
	y = l.op(base+"/scale", "Mul", out, []string{y, n.Inputs[1]}, nil)
	if hasBias {
		l.op(base+"/bias", "Add", n.Outputs[0], []string{y, n.Inputs[2]}, nil)
	}
	if len(n.Outputs) > 1 && n.Outputs[1] != "" {
		l.op(base+"/mean_out", "Identity", n.Outputs[1], []string{mu}, nil)
	}
	if len(n.Outputs) > 2 && n.Outputs[2] != "" {
		l.op(base+"/invstd", "Div", n.Outputs[2], []string{l.constFloat(base+"/one", 1), std}, nil)
	}
	return nil
}

// gelu writes Gelu as 0.5·x·(1 + erf(x/√2)) or its tanh form.
func (l *lowering) gelu(n *graph.Node) error {
	x, base := n.Inputs[0], n.Name
	var inner string
	switch n.Str("approximate", "none") {
	case "none":
		inner = l.op(base+"/erf", "Erf", "", []string{l.op(base+"/div", "Div", "", []string{x, l.constFloat(base+"/sqrt2", float32(math.Sqrt2))}, nil)}, nil)
	case "tanh":
		cube := l.op(base+"/cube", "Mul", "", []string{l.op(base+"/sq", "Mul", "", []string{x, x}, nil), x}, nil)
		u := l.op(base+"/poly", "Add", "", []string{x, l.op(base+"/c", "Mul", "", []string{cube, l.constFloat(base+"/k", 0.044715)}, nil)}, nil)
		inner = l.op(base+"/tanh", "Tanh", "", []string{l.op(base+"/s", "Mul", "", []string{u, l.constFloat(base+"/sqrt2pi", float32(math.Sqrt(2/math.Pi)))}, nil)}, nil)
	default:
		return fmt.Errorf("Gelu's approximate %q", n.Str("approximate", ""))
	}
	half := l.op(base+"/half", "Mul", "", []string{x, l.constFloat(base+"/0.5", 0.5)}, nil)
	l.op(base+"/out", "Mul", n.Outputs[0], []string{half, l.op(base+"/1p", "Add", "", []string{inner, l.constFloat(base+"/1", 1)}, nil)}, nil)
	return nil
}

// rmsNorm writes RMSNormalization as x / sqrt(mean(x²) + eps) · scale.
func (l *lowering) rmsNorm(n *graph.Node) error {
	x, base := n.Inputs[0], n.Name
	axes, err := l.normAxes(x, n.Int("axis", -1))
	if err != nil {
		return err
	}
	ms := l.mean(base+"/ms", l.op(base+"/square", "Mul", "", []string{x, x}, nil), axes)
	rms := l.op(base+"/rms", "Sqrt", "", []string{l.op(base+"/eps", "Add", "", []string{ms, l.constFloat(base+"/epsilon", n.Float("epsilon", 1e-5))}, nil)}, nil)
	y := l.op(base+"/norm", "Div", "", []string{x, rms}, nil)
	l.op(base+"/scale", "Mul", n.Outputs[0], []string{y, n.Inputs[1]}, nil)
	return nil
}

// NodeCount returns the number of nodes in the main graph of a serialised model (what Export
// wrote, which can differ from the graph's own node count at an opset that writes ops out as
// basic ones). It scans the protobuf fields without decoding tensors; malformed data gives
// an error.
func NodeCount(data []byte) (int, error) {
	graphBytes, err := field(data, 7) // ModelProto.graph
	if err != nil {
		return 0, err
	}
	n := 0
	for b := graphBytes; len(b) > 0; {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		if num == 1 && typ == protowire.BytesType { // GraphProto.node
			n++
		}
		b = b[m:]
	}
	return n, nil
}

// field returns the bytes of the last length-delimited field num of a message.
func field(msg []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for b := msg; len(b) > 0; {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			out = v
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(n, typ, b)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return out, nil
}
