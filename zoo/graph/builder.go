package graph

import (
	"fmt"
	"math"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Builder assembles a Graph. Methods that add nodes return the name of the new value; the
// first error is kept and returned by Build, so building code reads straight through
// (the bufio.Writer pattern).
type Builder struct {
	g      *Graph
	err    error
	scope  []string
	counts map[string]int
	consts map[string]string
}

// NewBuilder starts an empty graph with the given name at DefaultOpset (an op from a newer
// opset raises the graph's Opset to its SinceVersion).
func NewBuilder(name string) *Builder {
	return &Builder{
		g:      &Graph{Name: name, Opset: DefaultOpset, Meta: map[string]string{}},
		counts: map[string]int{},
		consts: map[string]string{},
	}
}

// Err returns the first error recorded so far.
func (b *Builder) Err() error { return b.err }

// Fail records err (the first one wins) so that Build returns it.
func (b *Builder) Fail(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

// Failf records a formatted error.
func (b *Builder) Failf(format string, args ...any) { b.Fail(fmt.Errorf(format, args...)) }

// SetMeta records a metadata entry carried into the exported model.
func (b *Builder) SetMeta(key, value string) { b.g.Meta[key] = value }

// Scope pushes a name prefix (a PyTorch module path such as "layers.0.self_attn") for the nodes
// created until the returned function is called.
func (b *Builder) Scope(prefix string) (pop func()) {
	b.scope = append(b.scope, prefix)
	return func() { b.scope = b.scope[:len(b.scope)-1] }
}

// Prefix returns the current scope joined with dots.
func (b *Builder) Prefix() string { return strings.Join(b.scope, ".") }

func (b *Builder) unique(base string) string {
	if p := b.Prefix(); p != "" {
		base = p + "/" + base
	}
	b.counts[base]++
	if c := b.counts[base]; c > 1 {
		return fmt.Sprintf("%s_%d", base, c-1)
	}
	return base
}

// Input declares a graph input.
func (b *Builder) Input(name string, dt tensor.DType, dims ...Dim) string {
	b.g.Inputs = append(b.g.Inputs, ValueInfo{Name: name, DType: dt, Shape: Shape(dims)})
	return name
}

// Output declares value as a graph output called name, adding an Identity node when the names
// differ.
func (b *Builder) Output(name, value string, dt tensor.DType, dims ...Dim) {
	if value != name {
		b.g.Nodes = append(b.g.Nodes, &Node{Name: name + "/Identity", Op: "Identity", Inputs: []string{value}, Outputs: []string{name}})
	}
	b.g.Outputs = append(b.g.Outputs, ValueInfo{Name: name, DType: dt, Shape: Shape(dims)})
}

// Param adds a learned parameter under its exact (PyTorch state_dict) name.
func (b *Builder) Param(name string, t *tensor.Tensor) string {
	return b.addInit(name, t, false)
}

// Buffer adds non-learned model state (a PyTorch buffer) under its exact name.
func (b *Builder) Buffer(name string, t *tensor.Tensor) string {
	return b.addInit(name, t, true)
}

func (b *Builder) addInit(name string, t *tensor.Tensor, buffer bool) string {
	if err := t.Check(); err != nil {
		b.Failf("initializer %q: %w", name, err)
	}
	b.g.Initializers = append(b.g.Initializers, Initializer{Name: name, Tensor: t, Buffer: buffer})
	return name
}

// Const adds a small constant (shape vector, scale) as an initializer, sharing identical ones.
func (b *Builder) Const(t *tensor.Tensor) string {
	key := constKey(t)
	if name, ok := b.consts[key]; ok {
		return name
	}
	name := fmt.Sprintf("%s%d", constPrefix, len(b.consts))
	b.consts[key] = name
	b.g.Initializers = append(b.g.Initializers, Initializer{Name: name, Tensor: t})
	return name
}

func constKey(t *tensor.Tensor) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%v%v", t.DType, t.Shape)
	for _, v := range t.F32 {
		fmt.Fprintf(&sb, ",%x", math.Float32bits(v))
	}
	for _, v := range t.I64 {
		fmt.Fprintf(&sb, ",%d", v)
	}
	for _, v := range t.Bool {
		fmt.Fprintf(&sb, ",%t", v)
	}
	return sb.String()
}

// ConstInts adds a 1-D int64 constant.
func (b *Builder) ConstInts(v ...int64) string {
	t, _ := tensor.FromInt64(append([]int64{}, v...), len(v))
	return b.Const(t)
}

// ConstFloat adds a float32 scalar constant.
func (b *Builder) ConstFloat(v float32) string { return b.Const(tensor.ScalarF(v)) }

// Op adds a single-output node and returns the output's name.
func (b *Builder) Op(op string, inputs []string, attrs Attrs) string {
	return b.OpN(op, inputs, 1, attrs)[0]
}

// OpN adds a node with n outputs and returns their names.
func (b *Builder) OpN(op string, inputs []string, n int, attrs Attrs) []string {
	name := b.unique(op)
	outs := make([]string, n)
	for i := range outs {
		outs[i] = name
		if n > 1 {
			outs[i] = fmt.Sprintf("%s:%d", name, i)
		}
	}
	if d, ok := LookupOp(op); !ok {
		b.Failf("node %s: unknown op type %q", name, op)
	} else if d.SinceVersion > b.g.Opset {
		// An op newer than the graph's opset (Attention, RMSNormalization, ...) raises it;
		// the exporter writes such ops out as basic ones at older opsets.
		b.g.Opset = d.SinceVersion
	}
	domain, op := SplitOpKey(op) // a contrib op is named by its key, "com.microsoft.Gelu"
	b.g.Nodes = append(b.g.Nodes, &Node{Name: name, Op: op, Domain: domain, Inputs: append([]string{}, inputs...), Outputs: outs, Attrs: attrs})
	return outs
}

// DropUnread removes the nodes from index from on whose outputs no node reads and that
// are no graph output: what a gradient rule leaves behind when it reads through another
// rule's result (see gradTranspose). Nodes before from are kept whatever reads them.
func (b *Builder) DropUnread(from int) {
	read := map[string]bool{}
	for _, o := range b.g.Outputs {
		read[o.Name] = true
	}
	keep := make([]bool, len(b.g.Nodes))
	for i := len(b.g.Nodes) - 1; i >= 0; i-- {
		n := b.g.Nodes[i]
		keep[i] = i < from
		for _, o := range n.Outputs {
			keep[i] = keep[i] || (o != "" && read[o])
		}
		if keep[i] {
			for _, in := range n.Inputs {
				read[in] = true
			}
		}
	}
	nodes := b.g.Nodes[:0:0]
	for i, n := range b.g.Nodes {
		if keep[i] {
			nodes = append(nodes, n)
		}
	}
	b.g.Nodes = nodes
}

// Build validates and returns the graph, or the first error met while building or validating.
func (b *Builder) Build() (*Graph, error) {
	if b.err != nil {
		return nil, fmt.Errorf("build graph %s: %w", b.g.Name, b.err)
	}
	if err := b.g.Validate(); err != nil {
		return nil, fmt.Errorf("build graph %s: %w", b.g.Name, err)
	}
	return b.g, nil
}
