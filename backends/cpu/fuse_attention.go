package cpu

import (
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// scoreOp is one elementwise step between the score product and the softmax.
type scoreOp struct {
	kind  byte    // '/', '*', '+' (add operand), 'w' (Where(cond, s, c)), 'W' (Where(cond, c, s))
	c     float32 // the scalar for '/', '*' and Where's constant
	input int     // index of the operand among the fused step's inputs ('+', 'w', 'W')
}

// divOp is the score op for a division by c: a multiplication by 1/c when that is a power of
// two whose reciprocal is a normal float32 (√64 = 8 for the usual head size), since x·2⁻ᵏ
// and x/2ᵏ are the same real number and so round to the same float32, subnormals included;
// a vector multiply costs a fraction of a divide. The division was 7 % of the fused block's
// profile; interleaved A/B, 8 heads of 64, 2 threads: n = 128 and 512 ran 2.2-2.4 % faster,
// n = 2048 6 %.
func divOp(c float32) scoreOp {
	if frac, exp := math.Frexp(float64(c)); frac == 0.5 && exp-1 > -126 && exp-1 < 126 {
		return scoreOp{kind: '*', c: 1 / c}
	}
	return scoreOp{kind: '/', c: c}
}

// matchAttention matches MatMul(Q, Kᵀ) → scalar/mask chain → Softmax(-1) → MatMul(·, V)
// around the Softmax step sm.
func (f *fuser) matchAttention(sm int) (group []int, st step, ok bool) {
	p := f.p
	if p.plan.Steps[sm].Node.Int("axis", -1) != -1 || len(p.plan.Steps[sm].In) != 1 {
		return nil, step{}, false
	}
	pv, ok := f.single(f.outOf(sm))
	if !ok || p.plan.Steps[pv].Node.Op != "MatMul" || p.plan.Steps[pv].In[0] != f.outOf(sm) {
		return nil, step{}, false
	}
	ops, operands, steps, q, kt, ok := f.walkScores(p.plan.Steps[sm].In[0], sm, 0)
	if !ok {
		return nil, step{}, false
	}
	group = append([]int{sm, pv}, steps...)
	if x, c, si, ok := f.qScale(q); ok {
		ops = append([]scoreOp{{kind: '*', c: c}}, ops...)
		group = append(group, si)
		q = x
	}
	// Head splits and merges around the products (Transpose steps) are absorbed: the fast
	// path reads Q, K and V and writes the output through strides instead of copies.
	var perms [3][]int
	srcs := []int{q, kt, p.plan.Steps[pv].In[1]}
	for j, s := range srcs {
		src, perm, tsteps := f.walkTransposes(s)
		srcs[j], perms[j] = src, perm
		group = append(group, tsteps...)
	}
	out := f.outOf(pv)
	var outPerm []int
	if c, ok := f.single(out); ok && p.plan.Steps[c].Node.Op == "Transpose" && len(p.plan.Steps[c].Out) == 1 && transposePerm(p.plan.Steps[c].Node) != nil {
		outPerm = transposePerm(p.plan.Steps[c].Node)
		group = append(group, c)
		out = f.outOf(c)
	}
	ext := append(srcs, operands...)
	for j := range ops {
		ops[j].input += 3
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		return attentionFast(e, in, ops, perms, outPerm)
	}
	return group, f.newFused("FusedAttention", group, ext, out, fast, nil), true
}

// qScale recognises Q = x / c or x · c with c a power of two (PyTorch scales Q by 1/√dk
// before the product, and √64 = 8), Q read only by the product, and returns x, the factor
// and the scaling step. Scaling Q by a power of two scales every product and partial sum of
// Q·Kᵀ exactly, so the factor can as well be applied to the scores, and the scaled copy of
// Q (and the head split copied into it) disappears. The two orders differ only when a
// scaled value falls into the subnormal range. Other factors stay the separate step.
func (f *fuser) qScale(q int) (x int, c float32, step int, ok bool) {
	p := f.p
	pi := f.producer[q]
	if pi < 0 || f.dead[pi] || len(p.plan.Steps[pi].In) != 2 {
		return -1, 0, -1, false
	}
	if _, ok := f.single(q); !ok {
		return -1, 0, -1, false
	}
	in := p.plan.Steps[pi].In
	switch p.plan.Steps[pi].Node.Op {
	case "Div":
		if v, ok := f.scalarConst(in[1]); ok && in[0] >= 0 {
			if op := divOp(v); op.kind == '*' {
				return in[0], op.c, pi, true
			}
		}
	case "Mul":
		for j := 0; j < 2; j++ {
			if v, ok := f.scalarConst(in[j]); ok && in[1-j] >= 0 && p.plan.Kinds[in[1-j]] != slotConst {
				if op := divOp(1 / v); op.kind == '*' && op.c == v {
					return in[1-j], v, pi, true
				}
			}
		}
	}
	return -1, 0, -1, false
}

// walkTransposes follows slot s back through Transpose steps whose output only the next
// step of the chain reads, returning the first slot that is not such an output, the
// composed permutation (axis i of s is axis perm[i] of src; nil when no step was walked)
// and the steps walked.
func (f *fuser) walkTransposes(s int) (src int, perm []int, steps []int) {
	p := f.p
	for depth := 0; depth < 4; depth++ {
		pi := f.producer[s]
		if pi < 0 || f.dead[pi] || p.plan.Steps[pi].Node.Op != "Transpose" || len(p.plan.Steps[pi].In) != 1 || p.plan.Steps[pi].In[0] < 0 {
			break
		}
		if _, ok := f.single(s); !ok {
			break
		}
		tp := transposePerm(p.plan.Steps[pi].Node)
		if tp == nil || (perm != nil && len(tp) != len(perm)) {
			break
		}
		if perm == nil {
			perm = make([]int, len(tp))
			for i := range perm {
				perm[i] = i
			}
		}
		for i := range perm {
			perm[i] = tp[perm[i]]
		}
		steps = append(steps, pi)
		s = p.plan.Steps[pi].In[0]
	}
	return s, perm, steps
}

// transposePerm returns the perm attribute of a Transpose node, or nil when it is absent
// (the reversal, whose rank is only known at run time).
func transposePerm(n *graph.Node) []int {
	perm, ok := n.IntList("perm")
	if !ok {
		return nil
	}
	out := make([]int, len(perm))
	for i, v := range perm {
		out[i] = int(v)
	}
	return out
}

// walkScores follows the score value cur (read only by step next) back to the score
// MatMul, returning the elementwise ops in graph order, their tensor operands (op.input
// indexes operands), the steps walked, and the MatMul's Q and Kᵀ slots. An Add of two
// run-time values is tried both ways, since either may be the scores (PyTorch scales the
// mask too, so both sides can be single-use Muls).
func (f *fuser) walkScores(cur, next, depth int) (ops []scoreOp, operands, steps []int, q, kt int, ok bool) {
	p := f.p
	if depth > 8 {
		return nil, nil, nil, 0, 0, false
	}
	if c, ok := f.single(cur); !ok || c != next {
		return nil, nil, nil, 0, 0, false
	}
	pi := f.producer[cur]
	if pi < 0 || f.dead[pi] || len(p.plan.Steps[pi].Out) != 1 {
		return nil, nil, nil, 0, 0, false
	}
	ps := p.plan.Steps[pi]
	// try continues the walk at chain value ch with op applied after it.
	try := func(ch int, op scoreOp, operand int) ([]scoreOp, []int, []int, int, int, bool) {
		o, ops2, st2, q, kt, ok := f.walkScores(ch, pi, depth+1)
		if !ok {
			return nil, nil, nil, 0, 0, false
		}
		if operand >= 0 {
			op.input = len(ops2)
			ops2 = append(ops2, operand)
		}
		return append(o, op), ops2, append(st2, pi), q, kt, true
	}
	switch ps.Node.Op {
	case "MatMul":
		if len(ps.In) != 2 || ps.In[0] < 0 || ps.In[1] < 0 {
			break
		}
		return nil, nil, []int{pi}, ps.In[0], ps.In[1], true
	case "Div":
		if v, ok := f.scalarConst(ps.In[1]); ok {
			return try(ps.In[0], divOp(v), -1)
		}
	case "Mul":
		if v, ok := f.scalarConst(ps.In[1]); ok {
			return try(ps.In[0], scoreOp{kind: '*', c: v}, -1)
		}
		if v, ok := f.scalarConst(ps.In[0]); ok {
			return try(ps.In[1], scoreOp{kind: '*', c: v}, -1)
		}
	case "Add":
		for j := 0; j < 2; j++ {
			if o, ops2, st2, q, kt, ok := try(ps.In[j], scoreOp{kind: '+'}, ps.In[1-j]); ok {
				return o, ops2, st2, q, kt, true
			}
		}
	case "Where":
		if len(ps.In) != 3 {
			break
		}
		if v, ok := f.scalarConst(ps.In[2]); ok {
			return try(ps.In[1], scoreOp{kind: 'w', c: v}, ps.In[0])
		}
		if v, ok := f.scalarConst(ps.In[1]); ok {
			return try(ps.In[2], scoreOp{kind: 'W', c: v}, ps.In[0])
		}
	}
	return nil, nil, nil, 0, 0, false
}
