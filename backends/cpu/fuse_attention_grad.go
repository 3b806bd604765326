package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Attention in a training step, forward and backward, as zoo/autodiff writes it, whatever the
// node names. The forward part is fuse_attention.go's pattern (MatMul(Q, Kᵀ) with Kᵀ a
// Transpose of K, a chain of scalings by a scalar and additive biases or masks, Softmax over
// the last axis, MatMul with V); what sets it apart is that the probabilities P have exactly
// the four readers of the backward pass (graph's MatMul and Softmax gradient rules):
//
//	dV  = MatMul(Transpose(P), dO)                    (transposeLast of P)
//	dP  = MatMul(dO, Transpose(V))
//	dS  = Mul(P, Sub(dP, ReduceSum(Mul(dP, P), axis)))  (gradSoftmax, either order)
//	dS0 = dS through the scalings' rules (Mul or Div by the same scalars; biases pass it on)
//	dQ  = MatMul(dS0, K)                               (Kᵀ's transpose read through)
//	dK  = Transpose(MatMul(Transpose(Q), dS0))
//
// Unfused, the step keeps P (h·n² floats per layer) from the forward pass to the backward
// and makes a dozen passes over n×n tensors. Fused, the forward step is attention.go's tiled
// kernel, which also writes the row log-sum-exps (a new value, h·n floats), and the backward
// step is attention_grad.go's FlashAttention-2 backward, which recomputes P tile by tile.
// The head splits of Q, K, V and dO and the head merges of O, dQ, dK and dV (Transposes
// that keep the last axis) are read and written in place when only the fused steps use them.
//
// Both steps fall back to the steps they replaced, together: when the forward kernel
// declines the run-time shapes, it passes P in the log-sum-exp's place, and the backward
// step, seeing P's rank there, runs the original backward steps on it.

// attnTrain is one matched training attention: the slots and steps of both passes.
type attnTrain struct {
	ops      []scoreOp // forward score ops; tensor operands index operands
	operands []int
	axis     int
	g        float32 // the gradient's scale through the score ops
	// Sources of Q, K, V and dO and the Transpose perms that make them from those sources
	// (nil: none, the source is the value itself).
	src   [4]int
	perm  [4][]int
	p     int // the probabilities
	o     int // the stored output (after an absorbed head merge)
	oPerm []int
	// The gradient outputs dQ, dK, dV as stored (after absorbed head merges) and their perms.
	grad     [3]int
	gradPerm [3][]int
	fwd, bwd []int // the steps of each pass, absorbed Transposes included
	inTrans  []int // the absorbed input Transposes (of the forward pass)
	fwdAt    int   // where the fused steps run
	bwdAt    int
	rank     int // the rank of the attention's tensors (of Kᵀ's Transpose)
}

// fuseAttentionTraining fuses every training attention of the plan.
func (f *fuser) fuseAttentionTraining(replaced map[int]step) {
	p := f.p
	for i := range p.plan.Steps {
		if f.dead[i] || p.plan.Steps[i].Node.Op != "Softmax" || len(p.plan.Steps[i].Out) != 1 || f.outOf(i) < 0 || f.uses[f.outOf(i)] < 2 {
			continue // not a training graph's softmax: the inference pattern's business
		}
		note := FusionNote{Pattern: "attention-train", Node: p.plan.Steps[i].Node.Name, Op: "Softmax"}
		m, why := f.matchAttentionTraining(i)
		if why == "" {
			fs, bs := f.attnTrainSteps(m)
			f.commitAt(m.fwd, m.fwdAt, fs, replaced)
			f.commitAt(m.bwd, m.bwdAt, bs, replaced)
			p.fusions["attention-train"]++
			note.Fused = "attention-train"
		} else {
			note.Why = why
		}
		p.notes = append(p.notes, note)
	}
}

// commitAt marks group's steps dead and schedules st at step index at, one of them.
func (f *fuser) commitAt(group []int, at int, st step, replaced map[int]step) {
	for _, i := range group {
		f.dead[i] = true
	}
	replaced[at] = st
}

// swapsLastInts reports whether perm swaps the last two axes and keeps the others.
func swapsLastInts(perm []int) bool {
	r := len(perm)
	if r < 2 || perm[r-1] != r-2 || perm[r-2] != r-1 {
		return false
	}
	for i := 0; i < r-2; i++ {
		if perm[i] != i {
			return false
		}
	}
	return true
}

// keepsLast reports whether perm keeps the last axis last (rows stay contiguous).
func keepsLast(perm []int) bool { return len(perm) > 0 && perm[len(perm)-1] == len(perm)-1 }

// swapTranspose returns x when step i is Transpose(x) swapping the last two axes and its
// output has exactly one reader (and is no output).
func (f *fuser) swapTranspose(i int) (int, bool) {
	if i < 0 || f.dead[i] {
		return -1, false
	}
	st := f.p.plan.Steps[i]
	if st.Node.Op != "Transpose" || len(st.In) != 1 || st.In[0] < 0 || len(st.Out) != 1 || !swapsLastInts(transposePerm(st.Node)) {
		return -1, false
	}
	if _, ok := f.single(st.Out[0]); !ok {
		return -1, false
	}
	return st.In[0], true
}

// readersIn reports whether slot s is a run-time value (no output) whose readers are all in
// set.
func (f *fuser) readersIn(s int, set map[int]bool) bool {
	if s < 0 || f.p.plan.Kinds[s] != slotNode || f.uses[s] != len(f.consumer[s]) {
		return false
	}
	for _, r := range f.consumer[s] {
		if !set[r] {
			return false
		}
	}
	return true
}

// mergeTranspose returns the step and perm of the Transpose that is the only reader of slot
// s when it keeps the last axis (a head merge), or -1.
func (f *fuser) mergeTranspose(s int) (int, []int) {
	c, ok := f.single(s)
	if !ok {
		return -1, nil
	}
	st := f.p.plan.Steps[c]
	if perm := transposePerm(st.Node); st.Node.Op == "Transpose" && len(st.Out) == 1 && keepsLast(perm) {
		return c, perm
	}
	return -1, nil
}

// matchAttentionTraining matches the pattern around Softmax step sm; why says what stopped it.
func (f *fuser) matchAttentionTraining(sm int) (*attnTrain, string) {
	p := f.p
	steps := p.plan.Steps
	fail := func(format string, a ...any) (*attnTrain, string) { return nil, fmt.Sprintf(format, a...) }
	st := steps[sm]
	m := &attnTrain{axis: int(st.Node.Int("axis", -1)), p: st.Out[0]}
	if len(st.In) != 1 || st.In[0] < 0 || m.axis < -1 {
		return fail("the softmax has no single input or runs over axis %d", m.axis)
	}
	if f.uses[m.p] != 4 || len(f.consumer[m.p]) != 4 {
		return fail("the probabilities have %d readers, not the 4 of the backward pass autodiff writes", f.uses[m.p])
	}
	pv, tp := -1, -1
	var muls []int
	for _, r := range f.consumer[m.p] {
		rs := steps[r]
		switch {
		case f.dead[r]:
			return fail("a reader of the probabilities is already fused")
		case rs.Node.Op == "MatMul" && len(rs.In) == 2 && rs.In[0] == m.p && rs.In[1] != m.p && pv < 0:
			pv = r
		case rs.Node.Op == "Transpose" && tp < 0:
			tp = r
		case rs.Node.Op == "Mul" && len(rs.In) == 2:
			muls = append(muls, r)
		default:
			return fail("the probabilities are read by %s %q, which is not the attention's backward", rs.Node.Op, rs.Node.Name)
		}
	}
	if pv < 0 || tp < 0 || len(muls) != 2 {
		return fail("the probabilities' readers are not MatMul with V, its transpose and the softmax backward")
	}
	// Forward: the score chain, Q and K.
	ops, operands, scoreSteps, q, kt, why := f.walkScores(st.In[0], sm, 0)
	if why != "" {
		return fail("%s", why)
	}
	scale := float32(1)
	for _, op := range ops {
		switch op.kind {
		case '*':
			scale *= op.c
		case '/':
			scale /= op.c
		case '+', '-':
		default:
			return fail("the scores pass through a %q score op, which has no fused backward", op.kind)
		}
	}
	m.ops, m.operands = ops, operands
	ktStep := f.producer[kt]
	k, ok := f.swapTranspose(ktStep)
	if !ok {
		return fail("Kᵀ is not a Transpose of K read only by the score product")
	}
	m.rank = len(transposePerm(steps[ktStep].Node))
	v := steps[pv].In[1]
	// Backward: dV and dO.
	dvMM, ok := f.single(steps[tp].Out[0])
	if x, ok2 := f.swapTranspose(tp); !ok || !ok2 || x != m.p || steps[dvMM].Node.Op != "MatMul" || steps[dvMM].In[0] != steps[tp].Out[0] {
		return fail("the probabilities' transpose is not read by dV's MatMul")
	}
	dO := steps[dvMM].In[1]
	// The softmax backward: mul1 = dP·P → ReduceSum → Sub(dP, ·) → mul2 = P·(…).
	mul1, mul2 := muls[0], muls[1]
	if c, ok := f.single(f.outOf(mul1)); !ok || steps[c].Node.Op != "ReduceSum" {
		mul1, mul2 = mul2, mul1
	}
	dP, _, ok := p.otherInput(mul1, m.p)
	if !ok || dP == m.p {
		return fail("the softmax backward's product does not read the probabilities once")
	}
	rs, ok := f.single(f.outOf(mul1))
	if !ok || steps[rs].Node.Op != "ReduceSum" || len(steps[rs].In) != 2 || steps[rs].Node.Int("keepdims", 1) != 1 || steps[rs].Node.Int("noop_with_empty_axes", 0) != 0 {
		return fail("the softmax backward's product is not summed over the keys")
	}
	if ax := steps[rs].In[1]; ax < 0 || p.plan.Kinds[ax] != slotConst || p.plan.Consts[ax] == nil || p.plan.Consts[ax].DType != tensor.Int64 ||
		len(p.plan.Consts[ax].I64) != 1 || p.plan.Consts[ax].I64[0] != int64(m.axis) {
		return fail("the softmax backward sums over another axis than the softmax's")
	}
	sub, ok := f.single(f.outOf(rs))
	if !ok || steps[sub].Node.Op != "Sub" || len(steps[sub].In) != 2 || steps[sub].In[0] != dP || steps[sub].In[1] != f.outOf(rs) {
		return fail("the softmax backward does not subtract the sum from dP")
	}
	if c, ok := f.single(f.outOf(sub)); !ok || c != mul2 {
		return fail("the softmax backward's difference is not multiplied by the probabilities")
	}
	if other, _, ok := p.otherInput(mul2, f.outOf(sub)); !ok || other != m.p {
		return fail("the softmax backward's difference is not multiplied by the probabilities")
	}
	dpMM := f.producer[dP]
	if dpMM < 0 || f.dead[dpMM] || f.uses[dP] != 2 || steps[dpMM].Node.Op != "MatMul" || len(steps[dpMM].In) != 2 || steps[dpMM].In[0] != dO {
		return fail("dP is not MatMul(dO, Vᵀ) read only by the softmax backward")
	}
	tv := f.producer[steps[dpMM].In[1]]
	if x, ok := f.swapTranspose(tv); !ok || x != v {
		return fail("dP's right operand is not a transpose of V")
	}
	// The scalings' gradients, last op first.
	g := f.outOf(mul2)
	var chain []int
	m.g = 1
	for j := len(ops) - 1; j >= 0; j-- {
		if ops[j].kind != '*' && ops[j].kind != '/' {
			continue
		}
		c, ok := f.single(g)
		if !ok {
			return fail("the score gradient has another reader before the scalings' rules")
		}
		x, op, ok := f.scalarScaling(c)
		if !ok || x != g {
			return fail("the score gradient passes through %s %q, not a scaling's rule", steps[c].Node.Op, steps[c].Node.Name)
		}
		if op.kind == '*' {
			m.g *= op.c
		} else {
			m.g /= op.c
		}
		chain = append(chain, c)
		g = f.outOf(c)
	}
	if math.Abs(float64(m.g-scale)) > 1e-6*math.Abs(float64(scale)) {
		return fail("the score gradient is scaled by %g, the scores by %g", m.g, scale)
	}
	// dQ = dS0·K and dKᵀ = Qᵀ·dS0.
	if f.uses[g] != 2 || len(f.consumer[g]) != 2 {
		return fail("the score gradient has %d readers, not dQ's and dK's products", f.uses[g])
	}
	dqMM, dktMM := f.consumer[g][0], f.consumer[g][1]
	if steps[dqMM].In[0] != g {
		dqMM, dktMM = dktMM, dqMM
	}
	for _, c := range []int{dqMM, dktMM} {
		if f.dead[c] || steps[c].Node.Op != "MatMul" || len(steps[c].In) != 2 || len(steps[c].Out) != 1 {
			return fail("the score gradient is read by %s %q, not dQ's and dK's products", steps[c].Node.Op, steps[c].Node.Name)
		}
	}
	if steps[dqMM].In[0] != g || steps[dqMM].In[1] != k || steps[dktMM].In[1] != g {
		return fail("the score gradient's products are not dS·K and Qᵀ·dS")
	}
	tq := f.producer[steps[dktMM].In[0]]
	if x, ok := f.swapTranspose(tq); !ok || x != q {
		return fail("dKᵀ's left operand is not a transpose of Q")
	}
	dkT, ok := f.single(f.outOf(dktMM))
	if _, ok2 := f.swapTranspose(dkT); !ok || !ok2 {
		return fail("dKᵀ is not transposed back to dK")
	}
	// The groups, then what joins them in place.
	m.fwd = append([]int{ktStep, sm, pv}, scoreSteps...)
	m.bwd = append([]int{tp, dvMM, tv, dpMM, mul1, rs, sub, mul2, tq, dqMM, dktMM, dkT}, chain...)
	m.fwdAt, m.bwdAt = pv, slices.Max(m.bwd)
	set := map[int]bool{}
	for _, s := range append(append([]int(nil), m.fwd...), m.bwd...) {
		set[s] = true
	}
	for j, s := range []int{q, k, v, dO} {
		m.src[j] = s
		pi := f.producer[s]
		if pi < 0 || f.dead[pi] || steps[pi].Node.Op != "Transpose" || len(steps[pi].In) != 1 || steps[pi].In[0] < 0 || !keepsLast(transposePerm(steps[pi].Node)) || !f.readersIn(s, set) {
			continue
		}
		m.src[j], m.perm[j] = steps[pi].In[0], transposePerm(steps[pi].Node)
		if j < 3 {
			m.fwd = append(m.fwd, pi)
			m.inTrans = append(m.inTrans, pi)
		} else {
			m.bwd = append(m.bwd, pi)
		}
	}
	m.o = steps[pv].Out[0]
	if c, perm := f.mergeTranspose(m.o); c >= 0 {
		m.fwd, m.o, m.oPerm = append(m.fwd, c), steps[c].Out[0], perm
	}
	for j, s := range []int{steps[dqMM].Out[0], steps[dkT].Out[0], steps[dvMM].Out[0]} {
		m.grad[j] = s
		if c, perm := f.mergeTranspose(s); c > m.bwdAt && f.readAfter(steps[c].Out[0], m.bwdAt) {
			m.bwd, m.grad[j], m.gradPerm[j] = append(m.bwd, c), steps[c].Out[0], perm
		}
	}
	// The fused steps run at fwdAt and bwdAt: every value they make must be read later only.
	later := func(s, at int) bool {
		for _, r := range f.consumer[s] {
			if r <= at && !slices.Contains(m.fwd, r) && !slices.Contains(m.bwd, r) {
				return false
			}
		}
		return true
	}
	if !later(m.o, m.fwdAt) || !later(m.grad[0], m.bwdAt) || !later(m.grad[1], m.bwdAt) || !later(m.grad[2], m.bwdAt) {
		return fail("a value of the attention is read between its steps")
	}
	return m, ""
}

// readAfter reports whether every reader of slot s comes after step index at.
func (f *fuser) readAfter(s, at int) bool {
	for _, r := range f.consumer[s] {
		if r <= at {
			return false
		}
	}
	return true
}

// newSlot adds a run-time value slot to the plan (and to the fuser's tables).
func (f *fuser) newSlot(name string) int {
	p := f.p.plan
	p.Slots = append(p.Slots, name)
	p.Kinds = append(p.Kinds, slotNode)
	p.Consts = append(p.Consts, nil)
	f.uses = append(f.uses, 0)
	f.producer = append(f.producer, -1)
	f.consumer = append(f.consumer, nil)
	return len(p.Slots) - 1
}

// attnTrainSteps builds the fused forward and backward steps of m.
func (f *fuser) attnTrainSteps(m *attnTrain) (fwd, bwd step) {
	p := f.p
	steps := p.plan.Steps
	lse := f.newSlot(p.plan.Slots[m.p] + "::lse")
	sorted := func(g []int) []step {
		g = slices.Sorted(slices.Values(g))
		out := make([]step, len(g))
		for j, i := range g {
			out[j] = steps[i]
		}
		return out
	}
	names := func(slots []int) []string {
		out := make([]string, len(slots))
		for j, s := range slots {
			out[j] = p.plan.Slots[s]
		}
		return out
	}
	// Forward: in = Q, K, V sources, then the operands; out = O, lse.
	fext := append([]int{m.src[0], m.src[1], m.src[2]}, m.operands...)
	fsub := sorted(m.fwd)
	ffb := &fallback{ext: fext, sub: fsub, consts: p.constInputs(fsub, nil)}
	ops := slices.Clone(m.ops)
	for j := range ops {
		if isOperandKind(ops[j].kind) {
			ops[j].input += 3
		}
	}
	var perms [3][]int
	perms[0], perms[2] = m.perm[0], m.perm[2]
	// Kᵀ is Transpose(K, swap) of K = Transpose(source, perm[1]): axis i of Kᵀ is axis
	// perm[1][swap[i]] of the source.
	if m.perm[1] == nil || len(m.perm[1]) == m.rank {
		perms[1] = ktPerm(m.perm[1], m.rank)
	}
	oPerm, axis, pSlot, oSlot := m.oPerm, m.axis, m.p, m.o
	fk := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if perms[1] != nil && len(in[1].Shape) == len(perms[1]) {
			out, l, ok, err := attentionRun(e, in, ops, perms, [3]*window{}, oPerm, axis, true)
			if ok || err != nil {
				return []*tensor.Tensor{out, l}, err
			}
		}
		vals, err := ffb.values(e, in)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{vals[oSlot], vals[pSlot]}, nil // P in lse's place: the backward falls back too
	}
	fnode := &graph.Node{Op: "FusedAttentionForward", Name: steps[m.fwdAt].Node.Name, Inputs: names(fext), Outputs: names([]int{m.o, lse})}
	fwd = step{Node: fnode, Kernel: fk, In: fext, Out: []int{m.o, lse}, Covers: compile.CoversOf(fsub)}

	// Backward: in = Q, K, V sources, the operands, O, dO's source, lse; out = dQ, dK, dV.
	nop := len(m.operands)
	bext := append(append([]int{m.src[0], m.src[1], m.src[2]}, m.operands...), m.o, m.src[3], lse)
	fbExt := slices.Clone(bext)
	fbExt[len(fbExt)-1] = m.p
	bsub := sorted(append(slices.Clone(m.inTrans), m.bwd...))
	bfb := &fallback{ext: fbExt, sub: bsub, consts: p.constInputs(bsub, nil)}
	grads, gradPerm, g, srcPerm, fops := m.grad, m.gradPerm, m.g, m.perm, m.ops
	bk := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		q, lseT := in[0], in[len(in)-1]
		if lseT == nil || q == nil || len(lseT.Shape) != len(q.Shape)-1 {
			vals, err := bfb.values(e, in)
			if err != nil {
				return nil, err
			}
			return []*tensor.Tensor{vals[grads[0]], vals[grads[1]], vals[grads[2]]}, nil
		}
		outs, err := attentionGradStep(e, in, nop, fops, srcPerm, oPerm, gradPerm, g)
		if err != nil {
			return nil, fmt.Errorf("fused attention backward: %w", err)
		}
		return outs, nil
	}
	bnode := &graph.Node{Op: "FusedAttentionBackward", Name: steps[m.bwdAt].Node.Name, Inputs: names(bext), Outputs: names(grads[:])}
	bwd = step{Node: bnode, Kernel: bk, In: bext, Out: grads[:], Covers: compile.CoversOf(sorted(m.bwd))}
	return fwd, bwd
}

// ktPerm returns the permutation that views K's source as Kᵀ of rank r, where K is
// Transpose(source, perm) (the source itself for a nil perm); nil when r < 2.
func ktPerm(perm []int, r int) []int {
	if r < 2 {
		return nil
	}
	swap := make([]int, r)
	for i := range swap {
		swap[i] = i
	}
	swap[r-1], swap[r-2] = r-2, r-1
	if perm == nil {
		return swap
	}
	out := make([]int, r)
	for i := range out {
		out[i] = perm[swap[i]]
	}
	return out
}

// attentionGradStep runs the fused backward on its inputs: Q, K, V sources (viewed through
// perm[0..2]), nop score operands, the stored O (Transpose(O, oPerm)), dO's source (through
// perm[3]) and the log-sum-exps, and returns dQ, dK and dV stored as Transpose(·, gradPerm[j]).
func attentionGradStep(e *exec, in []*tensor.Tensor, nop int, ops []scoreOp, perm [4][]int, oPerm []int, gradPerm [3][]int, g float32) ([]*tensor.Tensor, error) {
	if in[0] == nil || in[0].DType != tensor.Float32 {
		return nil, fmt.Errorf("Q is not float32")
	}
	qShape, _, ok := permView(in[0].Shape, perm[0])
	if !ok || len(qShape) < 2 {
		return nil, fmt.Errorf("Q of shape %v cannot take perm %v", in[0].Shape, perm[0])
	}
	batch := qShape[:len(qShape)-2]
	var a attnGradIn
	var oks [5]bool
	a.q, oks[0] = viewOf(in[0], perm[0], batch)
	a.k, oks[1] = viewOf(in[1], perm[1], batch)
	a.v, oks[2] = viewOf(in[2], perm[2], batch)
	a.o, oks[3] = viewOf(in[3+nop], inverse(oPerm), batch)
	a.do, oks[4] = viewOf(in[4+nop], perm[3], batch)
	lse := in[5+nop]
	nb := graph.NumElements(batch)
	if oks != [5]bool{true, true, true, true, true} || lse.DType != tensor.Float32 || len(lse.F32) != nb*a.q.rows ||
		a.k.cols != a.q.cols || a.v.rows != a.k.rows || a.o.rows != a.q.rows || a.o.cols != a.v.cols || a.do.rows != a.o.rows || a.do.cols != a.o.cols {
		return nil, fmt.Errorf("inputs of shapes Q %v, K %v, V %v, O %v, dO %v, lse %v do not make one attention", in[0].Shape, in[1].Shape, in[2].Shape, in[3+nop].Shape, in[4+nop].Shape, lse.Shape)
	}
	a.lse, a.g = lse.F32, g
	// ops index the operands from 0, the operand tensors sit after Q, K and V.
	var operands []bcastOperand
	if nop > 0 {
		operands, ok = planScoreOperands(ops, in[3:3+nop], batch, a.q.rows, a.k.rows)
		if !ok {
			return nil, fmt.Errorf("a score operand does not broadcast to the scores %v × (%d, %d)", batch, a.q.rows, a.k.rows)
		}
	}
	a.ops, a.operands = ops, operands
	dims := [3][2]int{{a.q.rows, a.q.cols}, {a.k.rows, a.k.cols}, {a.v.rows, a.v.cols}}
	outs := make([]*tensor.Tensor, 3)
	var views [3]matView
	for j := range outs {
		t, v, ok, err := allocView(e, batch, dims[j][0], dims[j][1], gradPerm[j])
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("gradient layout %v does not keep the last axis", gradPerm[j])
		}
		outs[j], views[j] = t, v
	}
	if nb > 0 && a.q.rows > 0 && a.k.rows > 0 {
		attentionBackward(e, &a, views[0], views[1], views[2])
	} else {
		for _, t := range outs {
			clear(t.F32)
		}
	}
	return outs, nil
}

// inverse returns the inverse permutation of perm (nil for nil).
func inverse(perm []int) []int {
	if perm == nil {
		return nil
	}
	inv := make([]int, len(perm))
	for j, a := range perm {
		inv[a] = j
	}
	return inv
}
