//go:build cgo && linux

package cuda

import (
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// fusedBinaryReluOp is the Op of a fused Add (Sub, Mul, Div) + Relu step's node.
const fusedBinaryReluOp = "FusedBinaryRelu"

// fusedBiasResidualOp is the Op of a fused Add + Add step's node: a linear layer's bias
// and its residual, (x + bias) + residual.
const fusedBiasResidualOp = "FusedBiasResidual"

// fuse is the CUDA plan's Fuse pass: attention first (attention.go), then two elementwise
// pairs that each run as one pass of zoo_binary_rows: a binary op whose only reader is a
// Relu (a linear layer's bias and activation), and an Add whose only reader is another
// Add (a linear layer's bias, then the residual). Each pair reads and writes the
// activation once instead of twice; on the GPU these passes are bound by memory.
func fuse(p *compile.Plan[gpuOp]) {
	fuseAttention(p)
	fusePairs(p, binaryRelu)
	fusePairs(p, biasResidual)
}

// binaryRelu matches a binary op (not Pow, Max or Min) followed by a Relu.
func binaryRelu(first, second step, s int) (step, bool) {
	op, ok := binaryOps[first.Node.Op]
	if !ok || first.Node.Op == "Pow" || first.Node.Op == "Max" || first.Node.Op == "Min" || len(first.In) != 2 {
		return step{}, false
	}
	if second.Node.Op != "Relu" || second.Node.Domain != "" || len(second.In) != 1 {
		return step{}, false
	}
	node := &graph.Node{Name: second.Node.Name + "/fused", Op: fusedBinaryReluOp, Inputs: first.Node.Inputs, Outputs: second.Node.Outputs,
		Attrs: graph.Attrs{"op": graph.Int(int64(op))}}
	kernel := func(r *run, n *graph.Node, in []value) ([]value, error) {
		return fusedRows(r, op, in, false, true)
	}
	return step{Node: node, Kernel: kernel, In: first.In, Out: second.Out, Covers: compile.CoversOf([]step{first, second})}, true
}

// biasResidual matches Add(x, bias) whose result is one operand of another Add.
func biasResidual(first, second step, s int) (step, bool) {
	if first.Node.Op != "Add" || len(first.In) != 2 || second.Node.Op != "Add" || second.Node.Domain != "" || len(second.In) != 2 {
		return step{}, false
	}
	other, name := second.In[1], second.Node.Inputs[1]
	if second.In[1] == s {
		other, name = second.In[0], second.Node.Inputs[0]
	}
	if other < 0 || other == s {
		return step{}, false
	}
	node := &graph.Node{Name: second.Node.Name + "/fused", Op: fusedBiasResidualOp,
		Inputs: append(append([]string(nil), first.Node.Inputs...), name), Outputs: second.Node.Outputs}
	kernel := func(r *run, n *graph.Node, in []value) ([]value, error) {
		return fusedRows(r, binaryOps["Add"], in, true, false)
	}
	in := append(append([]int(nil), first.In...), other)
	return step{Node: node, Kernel: kernel, In: in, Out: second.Out, Covers: compile.CoversOf([]step{first, second})}, true
}

// fusedRows runs a fused pair: in[0] op in[1], plus in[2] when residual, then the ReLU.
func fusedRows(r *run, op int, in []value, residual, relu bool) ([]value, error) {
	a, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	b, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	var res *dtensor
	if residual {
		if res, err = r.dev(in[2], 2, false); err != nil {
			return nil, err
		}
	}
	y, err := r.binaryRows(op, a, b, res, relu)
	if err != nil {
		return nil, err
	}
	return one(y), nil
}

// fusePairs replaces each step whose single output has exactly one reader, and that
// reader, by the step match builds from the two (s is the slot between them); match
// reports false to leave a pair alone. Steps of another domain, or whose intermediate is
// a graph output, are never fused.
func fusePairs(p *compile.Plan[gpuOp], match func(first, second step, s int) (step, bool)) {
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
	isOut := outputSlots(p)
	replace := map[int]step{}
	drop := make([]bool, len(p.Steps))
	for i, st := range p.Steps {
		if st.Node.Domain != "" || len(st.Out) != 1 || drop[i] {
			continue
		}
		s := st.Out[0]
		if s < 0 || isOut[s] || readers[s] != 1 {
			continue
		}
		j := reader[s]
		if _, taken := replace[i]; taken || drop[j] {
			continue
		}
		second := p.Steps[j]
		if len(second.Out) != 1 || second.Out[0] < 0 {
			continue
		}
		if _, taken := replace[j]; taken {
			continue
		}
		fused, ok := match(st, second, s)
		if !ok {
			continue
		}
		drop[i] = true
		replace[j] = fused
	}
	replaceSteps(p, replace, drop)
}

// outputSlots marks the plan's graph outputs, which a fusion must keep as values.
func outputSlots(p *compile.Plan[gpuOp]) []bool {
	isOut := make([]bool, len(p.Slots))
	for _, s := range p.OutSlot {
		isOut[s] = true
	}
	return isOut
}

// replaceSteps rebuilds p's steps after a fusion pass: the step at each index of replace
// becomes its fused step, and the steps marked in drop (absorbed into a fused one) go.
func replaceSteps(p *compile.Plan[gpuOp], replace map[int]step, drop []bool) {
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
