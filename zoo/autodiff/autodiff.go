// Package autodiff is zoo's reverse-mode automatic differentiation, a graph-to-graph
// transform over the IR: Gradients takes a graph that computes a scalar loss and returns a
// graph that also computes the loss's gradient with respect to the parameters, built from
// each op's gradient rule in zoo/graph's op table (graph.OpDef.Grad). The backward graph is
// ordinary IR, so every backend that runs the forward graph runs it, and it exports to ONNX
// like any other graph.
//
// # Training graphs
//
// A trainer builds its step graph in two calls:
//
//	lossGraph, err := autodiff.WithCrossEntropy(model, autodiff.LossOptions{LabelSmoothing: 0.1})
//	train, grads, err := autodiff.Gradients(ctx, lossGraph, autodiff.OutputLoss, nil)
//
// WithCrossEntropy adds the int64 input "targets" (the logits' shape without the class axis)
// and the scalar output "loss": the mean over counted positions (targets not equal to
// LossOptions.IgnoreIndex) of PyTorch's label-smoothed cross-entropy. Gradients adds one
// output per parameter, named GradName(param) ("<param>.grad"), and returns the map from
// parameter to that output. Running the result on a backend with the model's inputs and the
// targets gives the loss, the model's outputs and every gradient in one call. LiftParams turns
// the parameters into graph inputs, so that one compiled program takes new weights each step.
//
// # What takes a gradient
//
// Only parameters: float32 initializers that are neither buffers (graph.Initializer.Buffer:
// the sinusoidal table, Performer's random features) nor builder constants. Integer and bool
// values never carry a gradient, values used several times sum their gradients, and a
// broadcast operand's gradient is summed back to its shape. StopGradient marks a value whose
// gradient is cut (PyTorch's detach). A parameter the loss does not depend on gets zeros (where
// PyTorch leaves .grad as None).
//
// # Memory
//
// The backward graph reads the forward activations it needs directly, so a backend keeps them
// alive until their last backward use (the CPU backend's memory planner frees each value after
// its last reader). Recomputing activations instead of keeping them
// (--checkpoint-activations) is not implemented yet.
package autodiff

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// GradName returns the name of the graph output that holds param's gradient.
func GradName(param string) string { return param + ".grad" }

// stopAttr marks an Identity node whose output takes no gradient. Gradients turns such nodes
// into plain Identity nodes in the graph it returns (an ONNX runtime rejects undeclared
// attributes); Strip does the same for a forward-only graph.
const stopAttr = "zoo_stop_gradient"

// StopGradient returns a value equal to x through which no gradient flows back (PyTorch's
// x.detach()), built as a marked Identity node.
func StopGradient(b *graph.Builder, x string) string {
	return b.Op("Identity", []string{x}, graph.Attrs{stopAttr: graph.Int(1)})
}

// isStop reports whether n is a StopGradient node.
func isStop(n *graph.Node) bool {
	if n.Op != "Identity" {
		return false
	}
	a, ok := n.Attrs[stopAttr]
	return ok && a.Kind == graph.AttrInt && a.I != 0
}

// Strip returns g with every StopGradient mark removed (the nodes stay plain Identity nodes),
// ready for export; g itself is not modified. Graphs that Gradients returns are already
// stripped.
func Strip(g *graph.Graph) *graph.Graph {
	out := *g
	out.Nodes = make([]*graph.Node, len(g.Nodes))
	for i, n := range g.Nodes {
		if isStop(n) {
			c := *n
			c.Attrs = graph.Attrs{}
			for k, v := range n.Attrs {
				if k != stopAttr {
					c.Attrs[k] = v
				}
			}
			n = &c
		}
		out.Nodes[i] = n
	}
	return &out
}

// Params returns the names of g's parameters in declaration order: float32 initializers that
// are neither buffers nor builder constants.
func Params(g *graph.Graph) []string {
	var out []string
	for _, in := range g.Initializers {
		if !in.Buffer && !graph.IsConstName(in.Name) && in.Tensor.DType == tensor.Float32 {
			out = append(out, in.Name)
		}
	}
	return out
}

// Gradients returns a copy of g extended with the gradient of the scalar float32 value loss
// with respect to each parameter in wrt (every parameter of g, in declaration order, when wrt
// is nil), and the map from each of those parameters to the name of the graph output holding
// its gradient (GradName(param)). The returned graph keeps g's inputs and outputs, adds loss
// as an output when g does not already have it, and is validated; g is not modified.
//
// It returns an error when loss is not a scalar float32 value of g, when a name in wrt is not
// a float32 initializer or is a buffer or builder constant, when g fails shape inference, when
// an op on the path from a parameter to the loss has a gradient rule that refuses the node
// (the error names the node), and when ctx is done.
func Gradients(ctx context.Context, g *graph.Graph, loss string, wrt []string) (*graph.Graph, map[string]string, error) {
	if g == nil {
		return nil, nil, errors.New("autodiff: graph is nil")
	}
	fail := func(err error) (*graph.Graph, map[string]string, error) {
		return nil, nil, fmt.Errorf("autodiff of graph %s: %w", g.Name, err)
	}
	if err := g.Validate(); err != nil {
		return fail(err)
	}
	inferred := *g
	if err := inferred.InferShapes(); err != nil {
		return fail(err)
	}
	types := map[string]graph.ValueInfo{}
	for k, v := range inferred.ValueInfo {
		types[k] = v
	}
	for _, in := range g.Inputs {
		types[in.Name] = in
	}
	inits := map[string]graph.Initializer{}
	for _, in := range g.Initializers {
		inits[in.Name] = in
		types[in.Name] = graph.ValueInfo{Name: in.Name, DType: in.Tensor.DType, Shape: fixedShape(in.Tensor.Shape)}
	}
	lt, ok := types[loss]
	switch {
	case !ok:
		return fail(fmt.Errorf("loss %q is not a value of the graph", loss))
	case lt.DType != tensor.Float32 || lt.Shape == nil || len(lt.Shape) != 0:
		return fail(fmt.Errorf("loss %q is %v %v, want a float32 scalar", loss, lt.DType, lt.Shape))
	}
	if wrt == nil {
		wrt = Params(g)
	}
	dep := map[string]bool{}
	for _, p := range wrt {
		in, ok := inits[p]
		switch {
		case !ok:
			return fail(fmt.Errorf("%q is not an initializer: only parameters take gradients", p))
		case in.Buffer:
			return fail(fmt.Errorf("%q is a buffer, not a parameter: buffers take no gradient", p))
		case graph.IsConstName(p):
			return fail(fmt.Errorf("%q is a builder constant, not a parameter", p))
		case in.Tensor.DType != tensor.Float32:
			return fail(fmt.Errorf("parameter %q is %v: only float32 parameters take gradients", p, in.Tensor.DType))
		}
		dep[p] = true
	}
	// Forward: the float values that depend on a parameter.
	for _, n := range g.Nodes {
		if isStop(n) {
			continue
		}
		hit := false
		for _, in := range n.Inputs {
			hit = hit || (in != "" && dep[in])
		}
		if !hit {
			continue
		}
		for _, o := range n.Outputs {
			if o != "" && types[o].DType == tensor.Float32 {
				dep[o] = true
			}
		}
	}
	// Backward: the nodes on a path from a parameter to the loss.
	needed := map[string]bool{loss: true}
	var active []*graph.Node
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		use := false
		for _, o := range n.Outputs {
			use = use || (o != "" && needed[o] && dep[o])
		}
		if !use {
			continue
		}
		active = append(active, n)
		for _, in := range n.Inputs {
			if in != "" && dep[in] {
				needed[in] = true
			}
		}
	}
	producer := map[string]*graph.Node{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			producer[o] = n
		}
	}
	b := g.Extend(freeScope(g))
	contrib := map[string][]string{loss: {b.ConstFloat(1)}}
	sum := func(v string) string {
		cs := contrib[v]
		if len(cs) == 0 {
			return ""
		}
		s := cs[0]
		for _, c := range cs[1:] {
			s = b.Add(s, c)
		}
		contrib[v] = []string{s}
		return s
	}
	for _, n := range active {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		d, ok := graph.LookupOp(n.Op)
		if !ok || d.Grad == nil {
			return fail(fmt.Errorf("node %q: op %s has no gradient rule", n.Name, n.Op))
		}
		c := &graph.GradCtx{Builder: b, Node: n,
			OutGrads: make([]string, len(n.Outputs)), In: make([]graph.ValueInfo, len(n.Inputs)), Out: make([]graph.ValueInfo, len(n.Outputs)),
			Need: make([]bool, len(n.Inputs)), Producer: func(v string) *graph.Node { return producer[v] }}
		some := false
		for i, o := range n.Outputs {
			c.Out[i] = types[o]
			if o != "" && dep[o] {
				c.OutGrads[i] = sum(o)
				some = some || c.OutGrads[i] != ""
			}
		}
		if !some {
			continue
		}
		for i, in := range n.Inputs {
			if in != "" {
				c.In[i] = types[in]
				c.Need[i] = dep[in] && needed[in]
			}
		}
		gs, err := d.Grad(c)
		if err == nil && len(gs) != len(n.Inputs) {
			err = fmt.Errorf("the gradient rule of %s gave %d gradients for %d inputs", n.Op, len(gs), len(n.Inputs))
		}
		if err == nil {
			err = b.Err()
		}
		if err != nil {
			return fail(fmt.Errorf("node %q (%s): %w", n.Name, n.Op, err))
		}
		for i, gi := range gs {
			if gi != "" && c.Need[i] {
				contrib[n.Inputs[i]] = append(contrib[n.Inputs[i]], gi)
			}
		}
	}
	names := make(map[string]string, len(wrt))
	hasOut := map[string]bool{}
	for _, o := range g.Outputs {
		hasOut[o.Name] = true
	}
	if !hasOut[loss] {
		b.Output(loss, loss, tensor.Float32)
	}
	for _, p := range wrt {
		t := inits[p].Tensor
		gv := sum(p)
		if gv == "" {
			gv = b.Op("ConstantOfShape", []string{b.ConstInts(int64s(t.Shape)...)}, graph.Attrs{"value": graph.TensorAttr(&tensor.Tensor{DType: tensor.Float32, Shape: []int{1}, F32: []float32{0}})})
		}
		name := GradName(p)
		if hasOut[name] || types[name].Name != "" {
			return fail(fmt.Errorf("the gradient output name %q is already taken", name))
		}
		b.Output(name, gv, tensor.Float32, fixedShape(t.Shape)...)
		names[p] = name
	}
	b.DropUnread(len(g.Nodes))
	out, err := b.Build()
	if err != nil {
		return fail(err)
	}
	return Strip(out), names, nil
}

// freeScope returns a node-name scope for the backward nodes that no forward name uses.
func freeScope(g *graph.Graph) string {
	used := func(prefix string) bool {
		for _, n := range g.Nodes {
			if strings.HasPrefix(n.Name, prefix) {
				return true
			}
			for _, o := range n.Outputs {
				if strings.HasPrefix(o, prefix) {
					return true
				}
			}
		}
		return false
	}
	scope := "grad"
	for i := 1; used(scope + "/"); i++ {
		scope = fmt.Sprintf("grad%d", i)
	}
	return scope
}

func fixedShape(s []int) graph.Shape {
	out := make(graph.Shape, len(s))
	for i, d := range s {
		out[i] = graph.Fixed(int64(d))
	}
	return out
}

func int64s(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}
