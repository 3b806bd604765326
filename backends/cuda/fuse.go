//go:build cgo && linux

package cuda

import (
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// fusedBinaryReluOp is the Op of a fused Add (Sub, Mul, Div) + Relu step's node.
const fusedBinaryReluOp = "FusedBinaryRelu"

// fuse is the CUDA plan's Fuse pass: attention first (attention.go), then an elementwise
// binary op whose only reader is a Relu (a linear layer's bias and activation) runs as one
// pass (zoo_binary_rows with its ReLU flag).
func fuse(p *compile.Plan[gpuOp]) {
	fuseAttention(p)
	fuseBinaryRelu(p)
}

func fuseBinaryRelu(p *compile.Plan[gpuOp]) {
	readers := make([]int, len(p.Slots))
	reader := make([]int, len(p.Slots))
	for i, st := range p.Steps {
		for _, s := range st.In {
			if s >= 0 {
				readers[s]++
				reader[s] = i
			}
		}
	}
	isOut := make([]bool, len(p.Slots))
	for _, s := range p.OutSlot {
		isOut[s] = true
	}
	replace := map[int]step{}
	drop := make([]bool, len(p.Steps))
	for i, st := range p.Steps {
		op, ok := binaryOps[st.Node.Op]
		if !ok || st.Node.Op == "Pow" || st.Node.Op == "Max" || st.Node.Op == "Min" || st.Node.Domain != "" || len(st.In) != 2 || len(st.Out) != 1 {
			continue
		}
		s := st.Out[0]
		if s < 0 || isOut[s] || readers[s] != 1 || drop[i] {
			continue
		}
		j := reader[s]
		relu := p.Steps[j]
		if relu.Node.Op != "Relu" || relu.Node.Domain != "" || len(relu.In) != 1 || len(relu.Out) != 1 || relu.Out[0] < 0 {
			continue
		}
		node := &graph.Node{Name: relu.Node.Name + "/fused", Op: fusedBinaryReluOp, Inputs: st.Node.Inputs, Outputs: relu.Node.Outputs,
			Attrs: graph.Attrs{"op": graph.Int(int64(op))}}
		code := op
		kernel := func(r *run, n *graph.Node, in []value) ([]value, error) {
			a, err := r.dev(in[0], 0, false)
			if err != nil {
				return nil, err
			}
			b, err := r.dev(in[1], 1, false)
			if err != nil {
				return nil, err
			}
			y, err := r.binaryRelu(code, a, b, true)
			if err != nil {
				return nil, err
			}
			return one(y), nil
		}
		drop[i] = true
		replace[j] = step{Node: node, Kernel: kernel, In: st.In, Out: relu.Out, Covers: compile.CoversOf([]step{st, relu})}
	}
	if len(replace) == 0 {
		return
	}
	steps := p.Steps[:0:0]
	for i, st := range p.Steps {
		if r, ok := replace[i]; ok {
			steps = append(steps, r)
		} else if !drop[i] {
			steps = append(steps, st)
		}
	}
	p.Steps = steps
}
