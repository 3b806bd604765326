package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// scoreOp is one elementwise step between the score product and the softmax.
type scoreOp struct {
	// kind is '/', '*' (by the scalar c), '+', '-', 'x' (multiply), 'd' (divide) by a tensor
	// operand broadcast to the scores, 'w' (Where(cond, s, c)) or 'W' (Where(cond, c, s)).
	kind  byte
	c     float32 // the scalar for '/', '*' and Where's constant
	input int     // index of the operand among the fused step's inputs (tensor kinds)
	// rb is the compact relative-position bias of kind 'r', whose input is the slot holding
	// the sequence length n the bias was built for (fuse_relbias.go).
	rb *relBias
	// cm is the causal mask of kinds 'c' (add c at the masked keys) and 'C' (replace them
	// by c), whose input is the slot holding n or the mask's shape (fuse_causal.go).
	cm *causalMask
}

// operandKinds are the score ops that read a tensor operand.
const operandKinds = "+-xdwWrcC"

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

// Attention is recognised by what it computes, not by how a graph writes it: the anchor is
// a Softmax over the last axis read only by a MatMul with V, and from the softmax's input
// the walk goes back through any chain of elementwise score ops to the score MatMul(Q, Kᵀ).
// Score ops are scalings (Mul or Div by a scalar constant, or by a tensor that broadcasts
// to the scores: a per-head temperature, a run-time √dk), additive biases and masks (Add or
// Sub of a broadcast tensor, however it was built: Where, Sub and Mul forms of a key-padding
// mask are computed before the chain and only their result is read), and Where(mask, s, c).
// Q and Kᵀ are then followed back through Transposes (head split layouts, Kᵀ itself) and
// scalings by a scalar constant, in any order (PyTorch scales Q, scaled_dot_product exports
// scale both Q and Kᵀ by √scale): a scaling commutes with a transpose, so it moves onto the
// scores, and the scaled copy of Q or K disappears. A factor that is not a power of two
// then rounds once on the score instead of once on each Q element, which changes the
// result in the last bits only. Node names play no part.

// matchAttention matches MatMul(Q, Kᵀ) → score ops → Softmax(last axis) → MatMul(·, V)
// around the Softmax step sm. When it does not match, why says what stopped it.
func (f *fuser) matchAttention(sm int) (group []int, st step, why string) {
	p := f.p
	// A positive axis (PyTorch writes 3 for rank 4) is checked against the rank at run time.
	axis := int(p.plan.Steps[sm].Node.Int("axis", -1))
	if len(p.plan.Steps[sm].In) != 1 || p.plan.Steps[sm].In[0] < 0 {
		return nil, step{}, "the softmax has no single input"
	}
	if axis < -1 {
		return nil, step{}, fmt.Sprintf("the softmax runs over axis %d, not the last (keys) axis", axis)
	}
	pv, ok := f.single(f.outOf(sm))
	if !ok {
		return nil, step{}, "the probabilities have more than one reader, or are an output or kept value"
	}
	if p.plan.Steps[pv].Node.Op != "MatMul" || p.plan.Steps[pv].In[0] != f.outOf(sm) {
		return nil, step{}, fmt.Sprintf("the probabilities are read by %s %q, not as the left operand of a MatMul with V", p.plan.Steps[pv].Node.Op, p.plan.Steps[pv].Node.Name)
	}
	ops, operands, steps, q, kt, why := f.walkScores(p.plan.Steps[sm].In[0], sm, 0)
	if why != "" {
		return nil, step{}, why
	}
	group = append([]int{sm, pv}, steps...)
	// A relative-position bias built from the positions is computed in the kernel from its
	// compact form; its steps stay in the program for other readers (dropped when none is
	// left) and join the fallback, which rebuilds it.
	// A bias that is the sum of such a bias and another (T5's shared bias holds the padding
	// mask too) becomes two score ops, the relative one first: s + (r + m) is (s + r) + m up
	// to rounding, and exactly so for a mask of zeros and −∞.
	var biasSteps []int
	split := ops[:0:0]
	for _, op := range ops {
		if op.kind != '+' {
			split = append(split, op)
			continue
		}
		x := operands[op.input]
		if rb, n, bs, ok := f.matchRelBias(x); ok {
			operands[op.input] = n
			split = append(split, scoreOp{kind: 'r', input: op.input, rb: rb})
			biasSteps = append(biasSteps, bs...)
			continue
		}
		if add, ai, ok := f.prod(x); ok && add.Node.Op == "Add" && len(add.In) == 2 && add.In[0] >= 0 && add.In[1] >= 0 {
			matched := false
			for j := 0; j < 2 && !matched; j++ {
				if rb, n, bs, ok := f.matchRelBias(add.In[j]); ok {
					operands[op.input] = n
					split = append(split, scoreOp{kind: 'r', input: op.input, rb: rb}, scoreOp{kind: '+', input: len(operands)})
					operands = append(operands, add.In[1-j])
					biasSteps = append(append(biasSteps, ai), bs...)
					matched = true
				}
			}
			if matched {
				continue
			}
		}
		split = append(split, op)
	}
	ops = split
	ops, operands, causalSteps := f.splitCausal(ops, operands)
	// Head splits and merges around the products (Transpose steps) are absorbed: the fast
	// path reads Q, K and V and writes the output through strides instead of copies.
	var perms [3][]int
	var wins [3]*window // sliding windows of key blocks read in place (fuse_sparse.go)
	srcs := []int{q, kt, p.plan.Steps[pv].In[1]}
	var pre []scoreOp
	// Grouped-query attention's row merges and splits (attention_rows.go) are absorbed
	// too, unless a score op needs each row's query position (causal, relative).
	var grouped attnSplit
	rowsFree := true
	for _, op := range ops {
		rowsFree = rowsFree && op.kind != 'c' && op.kind != 'C' && op.kind != 'r'
	}
	for j, s := range srcs {
		scalings := j < 2 // V's scaling would scale the output, not the scores
		if j == 0 && rowsFree {
			if rr, x, st, ok := f.rowReshapeOf(s, true); ok {
				grouped.q = rr
				group = append(group, st)
				s = x
			}
		}
		src, perm, scale, tsteps := f.walkSource(s, scalings)
		srcs[j], perms[j] = src, perm
		pre = append(pre, scale...)
		group = append(group, tsteps...)
		if j == 0 {
			continue
		}
		if x, win, l, wsteps, ok := f.matchWindows(src); ok {
			srcs[j], wins[j] = x, win
			win.input = 3 + len(operands)
			operands = append(operands, l)
			group = append(group, wsteps...)
		}
	}
	ops = append(pre, ops...)
	out := f.outOf(pv)
	var outPerm []int
	if rr, _, st, ok := f.rowReshapeOf(out, false); ok && rowsFree {
		if c, ok := f.single(f.outOf(st)); ok && p.plan.Steps[c].Node.Op == "Transpose" && len(p.plan.Steps[c].Out) == 1 && len(transposePerm(p.plan.Steps[c].Node)) == len(rr.target) {
			grouped.out, outPerm = rr, transposePerm(p.plan.Steps[c].Node)
			group = append(group, st, c)
			out = f.outOf(c)
		}
	}
	if c, ok := f.single(out); ok && grouped.out == nil && p.plan.Steps[c].Node.Op == "Transpose" && len(p.plan.Steps[c].Out) == 1 && transposePerm(p.plan.Steps[c].Node) != nil {
		outPerm = transposePerm(p.plan.Steps[c].Node)
		group = append(group, c)
		out = f.outOf(c)
	}
	ext := append(srcs, operands...)
	for j := range ops {
		if isOperandKind(ops[j].kind) {
			ops[j].input += 3
		}
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		return attentionFast(e, in, ops, perms, wins, outPerm, grouped, axis)
	}
	sub := slices.Compact(slices.Sorted(slices.Values(append(append(append([]int(nil), group...), biasSteps...), causalSteps...))))
	if len(biasSteps) > 0 {
		f.relBiases++
	}
	if len(causalSteps) > 0 {
		f.causals++
	}
	return group, f.newFused("FusedAttention", sub, ext, out, fast, nil), ""
}

// rowReshapeOf recognises a Reshape with a constant target that merges the two axes before
// the last into one (merge: slot s is its output, whose input a Transpose computes, as
// grouped-query attention's Q) or splits the axis before the last in two (slot s is its input,
// attention's output): the inferred (−1) entry of the target must be the rows, every other
// entry a size or a copied axis (0). It returns the target, the Reshape's input and its step;
// attentionRows checks the run-time shapes.
func (f *fuser) rowReshapeOf(s int, merge bool) (rr *rowReshape, x, st int, ok bool) {
	st = f.stepOf(s)
	if !merge {
		st, ok = f.single(s)
		if !ok || len(f.p.plan.Steps[st].Out) != 1 {
			return nil, -1, -1, false
		}
	} else if _, ok := f.single(s); !ok {
		return nil, -1, -1, false
	}
	if st < 0 {
		return nil, -1, -1, false
	}
	rs := f.p.plan.Steps[st]
	if rs.Node.Op != "Reshape" || len(rs.In) != 2 || rs.In[0] < 0 {
		return nil, -1, -1, false
	}
	t := f.constAny(rs.In[1])
	if t == nil || t.DType != tensor.Int64 || len(t.Shape) != 1 {
		return nil, -1, -1, false
	}
	target := t.I64
	rows := len(target) - 2 // the merged axis (merge) or the second of the split ones
	if rows < 1 {
		return nil, -1, -1, false
	}
	for i, v := range target {
		if (i == rows) != (v == -1) || v < -1 || (v == 0 && i >= rows) {
			return nil, -1, -1, false
		}
	}
	if merge {
		if pi := f.stepOf(rs.In[0]); pi < 0 || f.p.plan.Steps[pi].Node.Op != "Transpose" {
			return nil, -1, -1, false
		}
	}
	return &rowReshape{target: append([]int64(nil), target...), allowZero: rs.Node.Int("allowzero", 0) != 0}, rs.In[0], st, true
}

// isOperandKind reports whether a score op of kind k reads a tensor operand.
func isOperandKind(k byte) bool {
	for i := 0; i < len(operandKinds); i++ {
		if operandKinds[i] == k {
			return true
		}
	}
	return false
}

// walkSource follows a product operand s back through Transpose steps and (when scalings
// is set) Mul or Div steps by a scalar constant, each read only by the next step of the
// chain, in any order. It returns the first slot that is neither, the composed permutation
// (axis i of s is axis perm[i] of src; nil when no Transpose was walked), the scalings as
// score ops in the order they apply, and the steps walked.
func (f *fuser) walkSource(s int, scalings bool) (src int, perm []int, scale []scoreOp, steps []int) {
	p := f.p
	for depth := 0; depth < 6; depth++ {
		pi := f.producer[s]
		if pi < 0 || f.dead[pi] || len(p.plan.Steps[pi].Out) != 1 {
			break
		}
		if _, ok := f.single(s); !ok {
			break
		}
		ps := p.plan.Steps[pi]
		if ps.Node.Op == "Transpose" {
			tp := transposePerm(ps.Node)
			if len(ps.In) != 1 || ps.In[0] < 0 || tp == nil || (perm != nil && len(tp) != len(perm)) {
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
			s = ps.In[0]
			continue
		}
		x, op, ok := f.scalarScaling(pi)
		if !scalings || !ok {
			break
		}
		scale = append([]scoreOp{op}, scale...)
		steps = append(steps, pi)
		s = x
	}
	return s, perm, scale, steps
}

// scalarScaling recognises step i as x·c, c·x or x/c with c a scalar constant and x a
// run-time value, returning x and the op.
func (f *fuser) scalarScaling(i int) (x int, op scoreOp, ok bool) {
	in := f.p.plan.Steps[i].In
	if len(in) != 2 {
		return -1, scoreOp{}, false
	}
	switch f.p.plan.Steps[i].Node.Op {
	case "Div":
		if v, ok := f.scalarConst(in[1]); ok && f.runtime(in[0]) {
			return in[0], divOp(v), true
		}
	case "Mul":
		for j := 0; j < 2; j++ {
			if v, ok := f.scalarConst(in[j]); ok && f.runtime(in[1-j]) {
				return in[1-j], scoreOp{kind: '*', c: v}, true
			}
		}
	}
	return -1, scoreOp{}, false
}

// runtime reports whether slot s is a value computed or fed at run time.
func (f *fuser) runtime(s int) bool {
	return s >= 0 && f.p.plan.Kinds[s] != slotConst
}

// walkTransposes follows slot s back through Transpose steps whose output only the next
// step of the chain reads, returning the first slot that is not such an output, the
// composed permutation (axis i of s is axis perm[i] of src; nil when no step was walked)
// and the steps walked.
func (f *fuser) walkTransposes(s int) (src int, perm []int, steps []int) {
	src, perm, _, steps = f.walkSource(s, false)
	return src, perm, steps
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
// indexes operands), the steps walked, and the MatMul's Q and Kᵀ slots; why is set instead
// when the walk cannot reach the product. A binary op of two run-time values is tried both
// ways, since either may be the scores (PyTorch scales the mask too, so both sides can be
// single-use Muls).
func (f *fuser) walkScores(cur, next, depth int) (ops []scoreOp, operands, steps []int, q, kt int, why string) {
	p := f.p
	fail := func(format string, a ...any) ([]scoreOp, []int, []int, int, int, string) {
		return nil, nil, nil, 0, 0, fmt.Sprintf(format, a...)
	}
	if depth > 8 {
		return fail("more than 8 elementwise steps between the score product and the softmax")
	}
	if c, ok := f.single(cur); !ok || c != next {
		return fail("score value %q has another reader, or is an output or kept value", p.plan.Slots[cur])
	}
	pi := f.producer[cur]
	if pi < 0 || f.dead[pi] || len(p.plan.Steps[pi].Out) != 1 {
		return fail("score value %q is not computed by a step the fusion can take", p.plan.Slots[cur])
	}
	ps := p.plan.Steps[pi]
	// try continues the walk at chain value ch with op applied after it.
	try := func(ch int, op scoreOp, operand int) ([]scoreOp, []int, []int, int, int, string) {
		if !f.runtime(ch) {
			return fail("the chain operand of %s %q is a constant", ps.Node.Op, ps.Node.Name)
		}
		o, ops2, st2, q, kt, why := f.walkScores(ch, pi, depth+1)
		if why != "" {
			return nil, nil, nil, 0, 0, why
		}
		if operand >= 0 {
			op.input = len(ops2)
			ops2 = append(ops2, operand)
		}
		return append(o, op), ops2, append(st2, pi), q, kt, ""
	}
	// either tries the walk through input 0 and then input 1 of a commutative op.
	either := func(kind byte) ([]scoreOp, []int, []int, int, int, string) {
		o, ops2, st2, q, kt, why := try(ps.In[0], scoreOp{kind: kind}, ps.In[1])
		if why == "" {
			return o, ops2, st2, q, kt, ""
		}
		o, ops2, st2, q, kt, why2 := try(ps.In[1], scoreOp{kind: kind}, ps.In[0])
		if why2 == "" {
			return o, ops2, st2, q, kt, ""
		}
		return nil, nil, nil, 0, 0, why
	}
	binary := len(ps.In) == 2 && ps.In[0] >= 0 && ps.In[1] >= 0
	switch ps.Node.Op {
	case "MatMul":
		if !binary {
			break
		}
		return nil, nil, []int{pi}, ps.In[0], ps.In[1], ""
	case "Concat":
		// A Concat of one input (a block-sparse pattern with a single key set) is the input.
		if len(ps.In) > 1 {
			return fail("the scores are Concat %q of %d score sets (several key sets under one softmax, as block-sparse patterns with strided or global keys build), which the fused attention kernel does not compute", ps.Node.Name, len(ps.In))
		}
		if len(ps.In) != 1 || ps.In[0] < 0 {
			break
		}
		o, ops2, st2, q, kt, why := f.walkScores(ps.In[0], pi, depth+1)
		if why != "" {
			return nil, nil, nil, 0, 0, why
		}
		return o, ops2, append(st2, pi), q, kt, ""
	case "Div":
		if !binary {
			break
		}
		if v, ok := f.scalarConst(ps.In[1]); ok {
			return try(ps.In[0], divOp(v), -1)
		}
		return try(ps.In[0], scoreOp{kind: 'd'}, ps.In[1])
	case "Mul":
		if !binary {
			break
		}
		if x, op, ok := f.scalarScaling(pi); ok {
			return try(x, op, -1)
		}
		return either('x')
	case "Add":
		if !binary {
			break
		}
		return either('+')
	case "Sub":
		if !binary {
			break
		}
		return try(ps.In[0], scoreOp{kind: '-'}, ps.In[1])
	case "Where":
		if len(ps.In) != 3 || ps.In[0] < 0 {
			break
		}
		if v, ok := f.scalarConst(ps.In[2]); ok {
			return try(ps.In[1], scoreOp{kind: 'w', c: v}, ps.In[0])
		}
		if v, ok := f.scalarConst(ps.In[1]); ok {
			return try(ps.In[2], scoreOp{kind: 'W', c: v}, ps.In[0])
		}
		return fail("Where %q replaces scores by a tensor, not a scalar constant", ps.Node.Name)
	}
	return fail("the scores pass through %s %q, which the fused attention kernel does not apply", ps.Node.Op, ps.Node.Name)
}
