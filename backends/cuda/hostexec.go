package cuda

import (
	"context"
	"fmt"
	"strings"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// hostNode runs one node on the host through the CPU reference backend: shape arithmetic,
// index and mask computations, and constant folding at compile time. Programs are compiled
// per input-dtype signature and cached.
type hostNode struct {
	node  *graph.Node
	progs map[string]backends.Program
}

func newHostNode(n *graph.Node) *hostNode {
	return &hostNode{node: n, progs: map[string]backends.Program{}}
}

// run executes the node on ins (nil for omitted inputs) and returns one tensor per output
// (nil for unnamed outputs).
func (h *hostNode) run(ins []*tensor.Tensor) ([]*tensor.Tensor, error) {
	n := h.node
	var key strings.Builder
	for _, t := range ins {
		if t == nil {
			key.WriteString("-,")
		} else {
			fmt.Fprintf(&key, "%d,", t.DType)
		}
	}
	p, ok := h.progs[key.String()]
	if !ok {
		g := &graph.Graph{Name: "host:" + n.Name, Opset: graph.DefaultOpset}
		seen := map[string]bool{}
		for i, name := range n.Inputs {
			if name == "" || seen[name] {
				continue
			}
			seen[name] = true
			if ins[i] == nil {
				return nil, fmt.Errorf("input %q has no value", name)
			}
			g.Inputs = append(g.Inputs, graph.ValueInfo{Name: name, DType: ins[i].DType})
		}
		g.Nodes = []*graph.Node{n}
		for _, name := range n.Outputs {
			if name != "" {
				g.Outputs = append(g.Outputs, graph.ValueInfo{Name: name, DType: tensor.Float32})
			}
		}
		var err error
		if p, err = (cpu.Backend{}).Compile(g, backends.Options{Threads: 1}); err != nil {
			return nil, err
		}
		h.progs[key.String()] = p
	}
	feeds := map[string]*tensor.Tensor{}
	for i, name := range n.Inputs {
		if name != "" {
			feeds[name] = ins[i]
		}
	}
	res, err := p.Run(context.Background(), feeds)
	if err != nil {
		return nil, err
	}
	outs := make([]*tensor.Tensor, len(n.Outputs))
	for i, name := range n.Outputs {
		if name != "" {
			outs[i] = res[name]
		}
	}
	return outs, nil
}

func (h *hostNode) close() {
	for _, p := range h.progs {
		p.Close()
	}
}
