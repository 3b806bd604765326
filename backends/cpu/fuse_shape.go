package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// shapesThroughTransposes rewrites Shape(Transpose(x)) as a Shape of x that permutes the
// dimensions, and drops the Transpose when nothing else reads it. PyTorch's attention
// export transposes K's head split only to read its shape (the product reads another
// transpose of the same value), so that copy computed nothing anyone used. The rewritten
// step runs the Transpose after all when the permutation does not fit x's rank, so errors
// stay the same. Each rewrite counts as "shape" in Fusions.
func (p *Program) shapesThroughTransposes() {
	readers, _, output := p.stepGraph()
	drop := make([]bool, len(p.plan.Steps))
	for ti, tr := range p.plan.Steps {
		rawPerm, hasPerm := tr.Node.IntList("perm")
		if tr.Node.Op != "Transpose" || !hasPerm || len(tr.In) != 1 || tr.In[0] < 0 || len(tr.Out) != 1 || tr.Out[0] < 0 || output[tr.Out[0]] {
			continue
		}
		rs := readers[tr.Out[0]]
		if len(rs) == 0 {
			continue
		}
		onlyShapes := true
		for _, r := range rs {
			if p.plan.Steps[r].Node.Op != "Shape" || len(p.plan.Steps[r].In) != 1 {
				onlyShapes = false
			}
		}
		if !onlyShapes {
			continue
		}
		for _, r := range rs {
			sh, tk, tn := p.plan.Steps[r], tr.Kernel, tr.Node
			p.plan.Steps[r].In = []int{tr.In[0]}
			p.plan.Steps[r].Kernel = func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				x := in[0]
				var axes []int
				var err error
				if x != nil {
					axes, err = transposeAxes(rawPerm, true, len(x.Shape))
				}
				if x == nil || err != nil {
					t, err := e.call(tk, tn, in)
					if err != nil {
						return nil, fmt.Errorf("node %q (%s): %w", tn.Name, tn.Op, err)
					}
					return sh.Kernel(e, t)
				}
				shape := make([]int, len(axes))
				for i, ax := range axes {
					shape[i] = x.Shape[ax]
				}
				return sh.Kernel(e, []*tensor.Tensor{{DType: x.DType, Shape: shape}})
			}
			p.fusions["shape"]++
		}
		drop[ti] = true
	}
	p.rebuild(nil, drop)
}
