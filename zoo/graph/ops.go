package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The op table. Every ai.onnx operator the IR accepts is declared once, by one OpDef in an
// op_*.go file of this package: its schema (inputs, outputs, attributes and their defaults,
// the opsets whose semantics it follows), its type and shape inference, its pure-Go
// reference evaluation (the oracle every backend is tested against) and its cost. Validate,
// InferShapes, ConcreteShapes, Cost and EvalNode all dispatch through it.

// LatestOpset is the newest ai.onnx opset against whose operator changes the table has been
// checked; an OpDef's ThroughVersion is at most this.
const LatestOpset = 23

// OpSpec gives the arity of an ONNX operator as zoo understands it. MaxIn or MaxOut < 0
// means variadic. It is derived from an OpDef's Inputs and Outputs.
type OpSpec struct {
	MinIn, MaxIn   int
	MinOut, MaxOut int
}

// ParamDef declares one formal input or output of an operator.
type ParamDef struct {
	Name string
	// Optional marks an input that may be omitted (an empty name in Node.Inputs, or absent at
	// the end) or an output that may be left unused.
	Optional bool
	// Variadic marks the last formal parameter as repeatable: it takes Min or more values.
	Variadic bool
	// Min is the least number of values a variadic parameter takes (at least 1 when 0).
	Min int
}

// AttrDef declares one attribute of an operator.
type AttrDef struct {
	Name string
	Kind AttrKind
	// Required attributes must be present; the others fall back to Default (or, when Default
	// has no Kind, mean "absent", which the op's rules interpret).
	Required bool
	Default  Attr
}

// TensorType is a value's element type and concrete shape, what a CostFunc sees.
type TensorType struct {
	DType tensor.DType
	Shape []int
}

// Bytes returns the value's size in bytes (0 for an omitted value).
func (t TensorType) Bytes() int64 {
	n := NumElements(t.Shape)
	if n < 0 || t.DType.Size() == 0 {
		return 0
	}
	return int64(n) * int64(t.DType.Size())
}

// OpCost is the cost of one node run at concrete shapes.
type OpCost struct {
	// FLOPs counts floating-point (and integer arithmetic) operations; a multiply-add is 2.
	FLOPs int64
	// Bytes is the memory a plain kernel reads and writes: each input element it reads once
	// and each output element once. Ops a backend runs as views (Reshape, Squeeze, Unsqueeze,
	// Identity) move 0.
	Bytes int64
}

// EvalFunc computes a node's outputs from its input tensors (nil for an omitted optional
// input), one tensor per node output. It must not modify its inputs.
type EvalFunc func(n *Node, in []*tensor.Tensor) ([]*tensor.Tensor, error)

// CostFunc returns a node's cost from the types of its inputs (zero TensorType for an
// omitted one) and outputs.
type CostFunc func(n *Node, in, out []TensorType) (OpCost, error)

// GradFunc is an op's gradient rule (see grad.go): given the node, the gradients flowing into
// its outputs and the static types around it (GradCtx), it adds nodes that compute the
// gradients of its inputs and returns their names, one per input ("" for an input that takes
// no gradient, such as a shape vector or an integer). It returns an error naming the node for
// a case it has no rule for.
type GradFunc func(c *GradCtx) (inGrads []string, err error)

// inferFunc is an op's type and shape inference rule (see InferShapes).
type inferFunc func(c *nodeCtx) ([]*absVal, error)

// OpDef declares one operator: everything zoo knows about it lives here.
type OpDef struct {
	Name string
	// Domain is the operator set: "" is ai.onnx; "com.microsoft" holds the ONNX Runtime
	// contrib ops zoo imports. Such an op's key in the table is "com.microsoft.NAME" (OpKey).
	Domain string
	// SinceVersion and ThroughVersion bound the ai.onnx opsets whose definition of the op
	// the table follows (both ends included): from the oldest version with these semantics
	// to the newest one checked.
	SinceVersion, ThroughVersion int
	// Doc is a one-line description.
	Doc     string
	Inputs  []ParamDef
	Outputs []ParamDef
	Attrs   []AttrDef
	// OpSpec is the arity, filled from Inputs and Outputs when the op is registered.
	OpSpec
	// Eval is the reference evaluation (see EvalNode).
	Eval EvalFunc
	// Cost gives FLOPs and bytes moved (see Graph.Cost).
	Cost CostFunc
	// Grad is the gradient rule; NoGrad declares an op not differentiable.
	Grad GradFunc
	// Float64 and Uint64 say that the op takes and gives values of those types (its Eval
	// computes float64 in float64, and uint64 as unsigned); any other op refuses them, in
	// inference, with an error naming the op and the type. Backends run such nodes through
	// the reference evaluation.
	Float64, Uint64 bool

	infer inferFunc
}

// Takes reports whether the op takes values of dtype dt (see Float64 and Uint64).
func (d *OpDef) Takes(dt tensor.DType) bool {
	switch dt {
	case tensor.Float64:
		return d.Float64
	case tensor.Uint64:
		return d.Uint64
	}
	return true
}

// IsWide reports whether dt is one of the types only some ops take (float64, uint64).
func IsWide(dt tensor.DType) bool { return dt == tensor.Float64 || dt == tensor.Uint64 }

// Attr returns the declaration of the named attribute, or nil.
func (d *OpDef) Attr(name string) *AttrDef {
	for i := range d.Attrs {
		if d.Attrs[i].Name == name {
			return &d.Attrs[i]
		}
	}
	return nil
}

// opTable holds every OpDef by name; it is filled by register at init and read-only after.
var opTable = map[string]*OpDef{}

// register adds d to the table, deriving its arity. A malformed definition is a programming
// error in this package, caught by the table test; register keeps the first definition of a
// name so that a duplicate shows up there too.
func register(d *OpDef) {
	d.MinIn, d.MaxIn = arityOf(d.Inputs)
	d.MinOut, d.MaxOut = arityOf(d.Outputs)
	if _, dup := opTable[d.Key()]; dup {
		duplicateOps = append(duplicateOps, d.Key())
		return
	}
	opTable[d.Key()] = d
}

// duplicateOps records names registered twice (the table test fails on any).
var duplicateOps []string

func arityOf(ps []ParamDef) (lo, hi int) {
	for i, p := range ps {
		switch {
		case p.Variadic:
			return i + max(p.Min, 1), -1
		case !p.Optional:
			lo = i + 1
		}
	}
	return lo, len(ps)
}

// Ops returns every operator the IR accepts, sorted by name. The definitions are shared:
// callers must not modify them.
func Ops() []*OpDef {
	out := make([]*OpDef, 0, len(opTable))
	for _, d := range opTable {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// LookupOp returns the definition of the operator with the table key op (an ai.onnx op's
// name, or "com.microsoft.NAME": see OpKey) and whether the IR knows it.
func LookupOp(op string) (*OpDef, bool) {
	d, ok := opTable[op]
	return d, ok
}

// LookupNodeOp returns the definition of node n's operator (its Op in its Domain).
func LookupNodeOp(n *Node) (*OpDef, bool) { return LookupOp(OpKey(n.Domain, n.Op)) }

// OpKey returns the op table's key for op in domain: the name itself in ai.onnx ("" or
// "ai.onnx"), "domain.op" in any other domain, so that com.microsoft's Attention and
// LayerNormalization do not collide with ai.onnx's.
func OpKey(domain, op string) string {
	if domain == "" || domain == "ai.onnx" {
		return op
	}
	return domain + "." + op
}

// SplitOpKey is OpKey's inverse: "com.microsoft.Gelu" gives ("com.microsoft", "Gelu"), a
// name without a dot gives ("", name).
func SplitOpKey(key string) (domain, op string) {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// Key returns the definition's key in the op table (see OpKey).
func (d *OpDef) Key() string { return OpKey(d.Domain, d.Name) }

// KnownOps returns the number of operators the IR accepts.
func KnownOps() int { return len(opTable) }

// checkNode checks a node against its definition: arity, no empty required input, the kinds
// of the declared attributes, and required attributes. The error does not name the node; callers add where it is.
func (d *OpDef) checkNode(n *Node) error {
	if len(n.Inputs) < d.MinIn || (d.MaxIn >= 0 && len(n.Inputs) > d.MaxIn) {
		return fmt.Errorf("has %d inputs, %s takes %s", len(n.Inputs), d.Name, arity(d.MinIn, d.MaxIn))
	}
	if len(n.Outputs) < d.MinOut || (d.MaxOut >= 0 && len(n.Outputs) > d.MaxOut) {
		return fmt.Errorf("has %d outputs, %s gives %s", len(n.Outputs), d.Name, arity(d.MinOut, d.MaxOut))
	}
	for i, in := range n.Inputs {
		if in == "" && !d.inputOptional(i) {
			return fmt.Errorf("required input %d (%s) of %s is empty", i, d.inputName(i), d.Name)
		}
	}
	names := make([]string, 0, len(n.Attrs))
	for name := range n.Attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := n.Attrs[name]
		ad := d.Attr(name)
		if ad == nil {
			// Undeclared attributes are kept and ignored, so that models carrying extra
			// annotations round-trip through import and export.
			continue
		}
		if a.Kind != ad.Kind {
			return fmt.Errorf("attribute %q of %s must be %s, got %s", name, d.Name, ad.Kind, a.Kind)
		}
		if a.Kind == AttrTensor && a.T == nil {
			return fmt.Errorf("attribute %q of %s holds no tensor", name, d.Name)
		}
	}
	for _, ad := range d.Attrs {
		if _, ok := n.Attrs[ad.Name]; ad.Required && !ok {
			return fmt.Errorf("%s needs the %s attribute %q", d.Name, ad.Kind, ad.Name)
		}
	}
	return nil
}

func (d *OpDef) param(i int) *ParamDef {
	if len(d.Inputs) == 0 {
		return nil
	}
	if i < len(d.Inputs) {
		return &d.Inputs[i]
	}
	if last := &d.Inputs[len(d.Inputs)-1]; last.Variadic {
		return last
	}
	return nil
}

func (d *OpDef) inputOptional(i int) bool {
	p := d.param(i)
	return p != nil && p.Optional
}

func (d *OpDef) inputName(i int) string {
	if p := d.param(i); p != nil {
		return p.Name
	}
	return fmt.Sprint(i)
}

// String returns the kind's ONNX-style name ("int", "floats", "tensor", ...).
func (k AttrKind) String() string {
	switch k {
	case AttrInt:
		return "int"
	case AttrFloat:
		return "float"
	case AttrString:
		return "string"
	case AttrInts:
		return "ints"
	case AttrFloats:
		return "floats"
	case AttrTensor:
		return "tensor"
	}
	return fmt.Sprintf("attr-kind(%d)", int(k))
}

// attrInt returns node n's integer attribute name, or the default its op's definition
// declares (0 when it declares none, which the op's rules read as "absent").
func attrInt(n *Node, name string) int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrInt {
		return a.I
	}
	if d, ok := LookupNodeOp(n); ok {
		if ad := d.Attr(name); ad != nil {
			return ad.Default.I
		}
	}
	return 0
}

// attrFloat returns node n's float attribute name, or the default its op's definition
// declares.
func attrFloat(n *Node, name string) float32 {
	if a, ok := n.Attrs[name]; ok && a.Kind == AttrFloat {
		return a.F
	}
	if d, ok := LookupNodeOp(n); ok {
		if ad := d.Attr(name); ad != nil {
			return ad.Default.F
		}
	}
	return 0
}

// Schema helpers keep the definitions short.

func req(name string) ParamDef      { return ParamDef{Name: name} }
func opt(name string) ParamDef      { return ParamDef{Name: name, Optional: true} }
func variadic(name string) ParamDef { return ParamDef{Name: name, Variadic: true, Min: 1} }
func ps(p ...ParamDef) []ParamDef   { return p }

func intAttr(name string, def int64) AttrDef {
	return AttrDef{Name: name, Kind: AttrInt, Default: Int(def)}
}
func floatAttr(name string, def float32) AttrDef {
	return AttrDef{Name: name, Kind: AttrFloat, Default: Float(def)}
}
func reqIntAttr(name string) AttrDef   { return AttrDef{Name: name, Kind: AttrInt, Required: true} }
func intsAttr(name string) AttrDef     { return AttrDef{Name: name, Kind: AttrInts} }
func floatsAttr(name string) AttrDef   { return AttrDef{Name: name, Kind: AttrFloats} }
func tensorAttr(name string) AttrDef   { return AttrDef{Name: name, Kind: AttrTensor} }
func optIntAttr(name string) AttrDef   { return AttrDef{Name: name, Kind: AttrInt} }
func optFloatAttr(name string) AttrDef { return AttrDef{Name: name, Kind: AttrFloat} }
