package onnx

import (
	"fmt"
	"sort"

	onnxgo "github.com/owulveryck/onnx-go"
	gonum "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
	gtensor "gorgonia.org/tensor"
)

// walker is the onnx-go backend that receives the model's graph walk: onnx-go creates one
// value node per named value (Namer), adds a weighted edge from every output of an operator to
// each of its inputs (weight = input position) and then calls ApplyOperation with the
// operator's type and decoded attributes. walker records those operations in call order
// (which is the file's node order) with their inputs recovered from the edges.
//
// Duplicate edges are kept (Mul(X, X) has two edges X·X), unlike gonum's simple graphs.
type walker struct {
	nodes []*valueNode
	out   map[int64][]weightedEdge
	ops   []walkedOp
}

// walkedOp is one operator as onnx-go decoded it.
type walkedOp struct {
	opType  string
	inputs  []string
	outputs []string
	attrs   map[string]interface{}
}

type valueNode struct {
	id   int64
	name string
}

func (n *valueNode) ID() int64          { return n.id }
func (n *valueNode) SetName(s string)   { n.name = s }
func (n *valueNode) GetName() string    { return n.name }
func (n *valueNode) String() string     { return n.name }
func (e weightedEdge) From() gonum.Node { return e.f }
func (e weightedEdge) To() gonum.Node   { return e.t }
func (e weightedEdge) Weight() float64  { return e.w }
func (e weightedEdge) ReversedEdge() gonum.Edge {
	return weightedEdge{f: e.t, t: e.f, w: e.w}
}

type weightedEdge struct {
	f, t *valueNode
	w    float64
}

var (
	_ onnxgo.Backend = (*walker)(nil)
	_ onnxgo.Namer   = (*valueNode)(nil)
)

func newWalker() *walker { return &walker{out: map[int64][]weightedEdge{}} }

// Node returns the node with the given id, or nil.
func (w *walker) Node(id int64) gonum.Node {
	if id < 0 || id >= int64(len(w.nodes)) {
		return nil
	}
	return w.nodes[id]
}

// Nodes returns all value nodes in creation order.
func (w *walker) Nodes() gonum.Nodes {
	ns := make([]gonum.Node, len(w.nodes))
	for i, n := range w.nodes {
		ns[i] = n
	}
	return iterator.NewOrderedNodes(ns)
}

// From returns the nodes that id has edges to.
func (w *walker) From(id int64) gonum.Nodes {
	var ns []gonum.Node
	for _, e := range w.out[id] {
		ns = append(ns, e.t)
	}
	if len(ns) == 0 {
		return gonum.Empty
	}
	return iterator.NewOrderedNodes(ns)
}

// To returns the nodes that have edges to id.
func (w *walker) To(id int64) gonum.Nodes {
	var ns []gonum.Node
	for _, n := range w.nodes {
		for _, e := range w.out[n.id] {
			if e.t.id == id {
				ns = append(ns, n)
				break
			}
		}
	}
	if len(ns) == 0 {
		return gonum.Empty
	}
	return iterator.NewOrderedNodes(ns)
}

// HasEdgeBetween reports an edge in either direction.
func (w *walker) HasEdgeBetween(x, y int64) bool {
	return w.HasEdgeFromTo(x, y) || w.HasEdgeFromTo(y, x)
}

// HasEdgeFromTo reports an edge from u to v.
func (w *walker) HasEdgeFromTo(u, v int64) bool { return w.Edge(u, v) != nil }

// Edge returns the first edge from u to v, or nil.
func (w *walker) Edge(u, v int64) gonum.Edge {
	for _, e := range w.out[u] {
		if e.t.id == v {
			return e
		}
	}
	return nil
}

// NewNode returns a node with the next dense id.
func (w *walker) NewNode() gonum.Node { return &valueNode{id: int64(len(w.nodes))} }

// AddNode stores a node created by NewNode.
func (w *walker) AddNode(n gonum.Node) {
	vn, ok := n.(*valueNode)
	if !ok || vn.id != int64(len(w.nodes)) {
		// onnx-go only adds nodes it got from NewNode, in order; anything else is a bug that
		// the caller's recover turns into an error.
		panic(fmt.Sprintf("onnx walk: unexpected node %v", n))
	}
	w.nodes = append(w.nodes, vn)
}

// NewWeightedEdge returns an edge from f to t.
func (w *walker) NewWeightedEdge(f, t gonum.Node, weight float64) gonum.WeightedEdge {
	return weightedEdge{f: f.(*valueNode), t: t.(*valueNode), w: weight}
}

// SetWeightedEdge records e, keeping duplicates.
func (w *walker) SetWeightedEdge(e gonum.WeightedEdge) {
	we := e.(weightedEdge)
	w.out[we.f.id] = append(w.out[we.f.id], we)
}

// ApplyOperation records one operator: its outputs are outs, its inputs the targets of the
// edges leaving the first output, ordered by weight (the input position).
func (w *walker) ApplyOperation(o onnxgo.Operation, outs ...gonum.Node) error {
	op := walkedOp{opType: o.Name, attrs: o.Attributes}
	for _, n := range outs {
		op.outputs = append(op.outputs, n.(*valueNode).name)
	}
	if len(outs) > 0 {
		es := append([]weightedEdge(nil), w.out[outs[0].ID()]...)
		sort.SliceStable(es, func(i, j int) bool { return es[i].w < es[j].w })
		for _, e := range es {
			op.inputs = append(op.inputs, e.t.name)
		}
	}
	w.ops = append(w.ops, op)
	return nil
}

// walk runs onnx-go's decoder over a serialised model and returns the operators it reported.
// A panic inside onnx-go or gorgonia is returned as an error.
func walk(data []byte) (ops []walkedOp, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("onnx-go decoder panicked: %v", r)
		}
	}()
	w := newWalker()
	if err := onnxgo.NewModel(w).UnmarshalBinary(data); err != nil {
		return nil, fmt.Errorf("onnx-go decoder: %w", err)
	}
	return w.ops, nil
}

// fromGorgonia converts a tensor decoded by onnx-go to flat Go slices. Scalars come back as a
// one-element slice; the caller supplies the shape from the raw TensorProto.
func fromGorgonia(t gtensor.Tensor) (interface{}, error) {
	if t == nil {
		return nil, fmt.Errorf("no tensor")
	}
	switch d := t.Data().(type) {
	case []float32:
		return d, nil
	case float32:
		return []float32{d}, nil
	case []int64:
		return d, nil
	case int64:
		return []int64{d}, nil
	case []int32:
		return d, nil
	case int32:
		return []int32{d}, nil
	case []bool:
		return d, nil
	case bool:
		return []bool{d}, nil
	default:
		return nil, fmt.Errorf("onnx-go returned a tensor of Go type %T", d)
	}
}
