package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// DefaultOpset is the ai.onnx opset whose semantics the IR follows.
const DefaultOpset = 17

// Dim is one dimension of a value's shape: a fixed size, or a symbolic one (Size < 0) that may
// carry a name such as "batch" or "seq".
type Dim struct {
	Size  int64
	Param string
}

// Fixed returns a dimension of known size.
func Fixed(n int64) Dim { return Dim{Size: n} }

// Sym returns a named symbolic dimension.
func Sym(name string) Dim { return Dim{Size: -1, Param: name} }

// Known reports whether the dimension has a fixed size.
func (d Dim) Known() bool { return d.Size >= 0 }

// String returns the size, or the symbol name, or "?".
func (d Dim) String() string {
	switch {
	case d.Known():
		return fmt.Sprint(d.Size)
	case d.Param != "":
		return d.Param
	}
	return "?"
}

// Shape is a value's static shape. A nil Shape means the rank is unknown.
type Shape []Dim

// String formats the shape as "(batch, seq, 512)".
func (s Shape) String() string {
	if s == nil {
		return "(unknown rank)"
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// ValueInfo names a value and gives its element type and static shape.
type ValueInfo struct {
	Name  string
	DType tensor.DType
	Shape Shape
}

// AttrKind says which field of an Attr holds its value.
type AttrKind int

// Attribute kinds (a subset of ONNX AttributeProto types).
const (
	AttrInt AttrKind = iota + 1
	AttrFloat
	AttrString
	AttrInts
	AttrFloats
	AttrTensor
)

// Attr is a node attribute.
type Attr struct {
	Kind   AttrKind
	I      int64
	F      float32
	S      string
	Ints   []int64
	Floats []float32
	T      *tensor.Tensor
}

// Int returns an integer attribute.
func Int(v int64) Attr { return Attr{Kind: AttrInt, I: v} }

// Float returns a float attribute.
func Float(v float32) Attr { return Attr{Kind: AttrFloat, F: v} }

// String returns a string attribute.
func String(v string) Attr { return Attr{Kind: AttrString, S: v} }

// Ints returns an integer-list attribute.
func Ints(v ...int64) Attr { return Attr{Kind: AttrInts, Ints: v} }

// Floats returns a float-list attribute.
func Floats(v ...float32) Attr { return Attr{Kind: AttrFloats, Floats: v} }

// TensorAttr returns a tensor attribute (ONNX Constant's "value").
func TensorAttr(t *tensor.Tensor) Attr { return Attr{Kind: AttrTensor, T: t} }

// Attrs maps attribute names to values.
type Attrs map[string]Attr

// Node is one operator application. Inputs and Outputs are value names; an empty input name
// marks an omitted optional input, as in ONNX.
type Node struct {
	Name    string
	Op      string
	Domain  string
	Inputs  []string
	Outputs []string
	Attrs   Attrs
}

// Int returns the integer attribute name, or def when absent.
func (n *Node) Int(name string, def int64) int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrInt {
		return a.I
	}
	return def
}

// Float returns the float attribute name, or def when absent.
func (n *Node) Float(name string, def float32) float32 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrFloat {
		return a.F
	}
	return def
}

// IntList returns the integer-list attribute name and whether it was present.
func (n *Node) IntList(name string) ([]int64, bool) {
	a, ok := n.Attrs[name]
	if !ok || a.Kind != AttrInts {
		return nil, false
	}
	return a.Ints, true
}

// Str returns the string attribute name, or def when absent.
func (n *Node) Str(name, def string) string {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrString {
		return a.S
	}
	return def
}

// Input returns the i-th input name, or "" when the node has fewer inputs.
func (n *Node) Input(i int) string {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return ""
}

// Initializer is a named constant tensor: a learned parameter, a buffer (a constant that
// belongs to the model's state, such as a positional-encoding table) or a builder constant.
type Initializer struct {
	Name   string
	Tensor *tensor.Tensor
	// Buffer marks state that is not a learned parameter (PyTorch's register_buffer).
	Buffer bool
}

// Graph is a whole model. Nodes are kept in topological order (Validate checks it);
// Initializers keep the order in which the variant declared its parameters.
type Graph struct {
	Name         string
	Opset        int
	Inputs       []ValueInfo
	Outputs      []ValueInfo
	Initializers []Initializer
	Nodes        []*Node
	// ValueInfo holds static types and shapes of intermediate values, filled by InferShapes.
	ValueInfo map[string]ValueInfo
	// Meta carries string metadata (variant, version, config) into ONNX metadata_props.
	Meta map[string]string
}

// Initializer returns the named initializer's tensor, or nil.
func (g *Graph) Initializer(name string) *tensor.Tensor {
	for _, in := range g.Initializers {
		if in.Name == name {
			return in.Tensor
		}
	}
	return nil
}

// InitializerMap returns the initializers by name.
func (g *Graph) InitializerMap() map[string]*tensor.Tensor {
	m := make(map[string]*tensor.Tensor, len(g.Initializers))
	for _, in := range g.Initializers {
		m[in.Name] = in.Tensor
	}
	return m
}

// ParamCount returns the number of learned parameters: the elements of the initializers
// IsParam holds to be parameters.
func (g *Graph) ParamCount() int64 {
	var n int64
	for _, in := range g.Initializers {
		if in.IsParam() {
			n += int64(in.Tensor.Len())
		}
	}
	return n
}

// IsParam reports whether the initializer holds learned parameters: float32 values, or int8
// and uint8 ones (a quantized file's weights and their zero points), that are neither a
// buffer nor a builder constant nor a scalar (the constants an exporter writes as
// initializers: a scale, an epsilon, a fill value).
func (in Initializer) IsParam() bool {
	switch {
	case in.Buffer || IsConstName(in.Name) || len(in.Tensor.Shape) == 0:
		return false
	}
	switch in.Tensor.DType {
	case tensor.Float32, tensor.Int8, tensor.Uint8:
		return true
	}
	return false
}

// OpTypes returns the sorted distinct op types the graph uses.
func (g *Graph) OpTypes() []string {
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		seen[n.Op] = true
	}
	ops := make([]string, 0, len(seen))
	for op := range seen {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// constPrefix marks initializers that hold builder constants rather than model parameters.
const constPrefix = "const::"

// IsConstName reports whether an initializer name belongs to a builder constant (shape
// vectors, scales) rather than a learned parameter or buffer.
func IsConstName(name string) bool { return strings.HasPrefix(name, constPrefix) }

// StateDict returns the model's parameters and buffers by name (every initializer except
// builder constants): what PyTorch's state_dict holds and what `zoo export --weights` writes.
func (g *Graph) StateDict() map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, in := range g.Initializers {
		if !IsConstName(in.Name) {
			out[in.Name] = in.Tensor
		}
	}
	return out
}
