package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Kernelized attention (performer, linear and any graph computing the same) is recognised
// by what it computes, whatever the node names, in three patterns (kernels in
// kernelized.go):
//
//   - random-features, anchored at an Exp: its argument is a chain of Sub and Add steps
//     from P = MatMul(x, W) (W a constant matrix; scalings by scalar constants before or
//     after the product join it), each subtracting or adding a term: a scalar constant, a
//     run-time per-row value (FAVOR+'s ‖x‖²/2, computed before the chain), ReduceMax(P)
//     over the last axis, or ReduceMax over the last two axes of P or of
//     Where(cond, −∞, P). After the Exp, any chain of Add, Sub, Mul, Div by scalar
//     constants, Mul by a per-row value and Where(cond, constant, ·) joins it.
//   - elu-feature, anchored at an Elu: Add(Elu(x), c) with c a scalar constant (φ = elu + 1
//     of linear attention), then the same post chain (a key-padding Mul).
//   - linear-attention, anchored at the MatMul A·C with C = MatMul(Transpose(B), V) (the
//     last two axes swapped): Mul(A·C, Div(1, D)) or Div(A·C, D) with D = MatMul(A,
//     Transpose(ReduceSum(B, axis −2, keepdims))) plus an optional scalar ε. A head split of
//     V (Transpose (0, 2, 1, 3)), a per-row scaling of V after it (a key-padding Mul) and a
//     head merge of the output join it.
//
// Every intermediate value must be read only inside the pattern (so a training graph,
// whose backward reads them, keeps its steps), and per-row operands are checked at run
// time: the fused step runs the original steps when they do not broadcast as (…, n, 1).

// fuseKernelized runs the three kernelized-attention passes, before the linear pass takes
// the feature projections as plain products.
func (f *fuser) fuseKernelized(replaced map[int]step) {
	p := f.p
	for i := range p.plan.Steps {
		if f.dead[i] {
			continue
		}
		var (
			pattern string
			g       []int
			st      step
			why     string
		)
		switch p.plan.Steps[i].Node.Op {
		case "Exp":
			pattern = "random-features"
			g, st, why = f.matchFeatureMap(i)
		case "Elu":
			pattern = "elu-feature"
			g, st, why = f.matchEluFeature(i)
		default:
			continue
		}
		if pattern == "random-features" && g == nil && why == "" {
			continue // not a candidate: the argument is not a shifted product
		}
		note := FusionNote{Pattern: pattern, Node: p.plan.Steps[i].Node.Name, Op: p.plan.Steps[i].Node.Op}
		if why == "" {
			f.commit(g, st, replaced)
			p.fusions[pattern]++
			note.Fused = pattern
		} else {
			note.Why = why
		}
		p.notes = append(p.notes, note)
	}
	for i := range p.plan.Steps {
		if f.dead[i] || p.plan.Steps[i].Node.Op != "MatMul" || !f.isKVProduct(i) {
			continue
		}
		note := FusionNote{Pattern: "linear-attention", Node: p.plan.Steps[i].Node.Name, Op: "MatMul"}
		if g, st, why := f.matchLinearAttention(i); why == "" {
			// A feature map the attention computes itself no longer runs as a step.
			for last := range replaced {
				if slices.Contains(g, last) && last != slices.Max(g) {
					delete(replaced, last)
					p.fusions["linear-attention+features"]++
				}
			}
			f.commit(g, st, replaced)
			p.fusions["linear-attention"]++
			note.Fused = "linear-attention"
		} else {
			note.Why = why
		}
		p.notes = append(p.notes, note)
	}
}

// closed reports why the group's intermediate values (the outputs of its steps other than
// final) are not read only inside the group, or "" when they are.
func (f *fuser) closed(group []int, final int) string {
	in := map[int]bool{}
	for _, g := range group {
		in[g] = true
	}
	for _, g := range group {
		for _, s := range f.p.plan.Steps[g].Out {
			if s < 0 || s == final {
				continue
			}
			n := 0
			for _, r := range f.consumer[s] {
				if in[r] {
					n++
				}
			}
			if n != f.uses[s] {
				return fmt.Sprintf("its intermediate %q is also read outside the pattern (or is an output)", f.p.plan.Slots[s])
			}
		}
	}
	return ""
}

// fedFromOutside reports why one of the fused step's inputs ext is computed by a step of
// the group itself (a term or operand that is the product or a feature again), or "".
func (f *fuser) fedFromOutside(group, ext []int) string {
	for _, s := range ext {
		if pi := f.producer[s]; s >= 0 && pi >= 0 && slices.Contains(group, pi) {
			return fmt.Sprintf("its operand %q is computed inside the pattern", f.p.plan.Slots[s])
		}
	}
	return ""
}

// reduceAxes returns the axes of a ReduceMax or ReduceSum step with keepdims set (from
// its constant second input, or the axes attribute), ok false otherwise.
func (f *fuser) reduceAxes(i int) ([]int, bool) {
	st := f.p.plan.Steps[i]
	if st.Node.Int("keepdims", 1) != 1 || len(st.Out) != 1 {
		return nil, false
	}
	var ax []int64
	switch {
	case len(st.In) >= 2 && st.In[1] >= 0:
		t := f.constAny(st.In[1])
		if t == nil || t.DType != tensor.Int64 {
			return nil, false
		}
		ax = t.I64
	default:
		v, ok := st.Node.IntList("axes")
		if !ok {
			return nil, false
		}
		ax = v
	}
	out := make([]int, len(ax))
	for j, a := range ax {
		out[j] = int(a)
	}
	return out, len(out) > 0
}

// stepOf returns the live step producing slot s, or -1.
func (f *fuser) stepOf(s int) int {
	if s < 0 || f.p.plan.Kinds[s] != slotNode {
		return -1
	}
	pi := f.producer[s]
	if pi < 0 || f.dead[pi] || len(f.p.plan.Steps[pi].Out) != 1 {
		return -1
	}
	return pi
}

// walkPost follows slot cur forward through the post chain of a feature map (see the
// package comment), returning the ops, their operand slots (op.input indexes operands), the
// steps and the last value.
func (f *fuser) walkPost(cur int) (ops []rowOp, operands, steps []int, out int) {
	p := f.p
	for len(ops) < 8 {
		c, ok := f.single(cur)
		if !ok {
			break
		}
		st := p.plan.Steps[c]
		if len(st.Out) != 1 {
			break
		}
		op, operand, ok := rowOp{}, -1, false
		switch st.Node.Op {
		case "Add", "Mul", "Sub", "Div":
			other, first, isIn := p.otherInput(c, cur)
			if !isIn || other == cur {
				break
			}
			if v, isC := f.scalarConst(other); isC {
				switch {
				case st.Node.Op == "Add":
					op, ok = rowOp{kind: '+', c: v}, true
				case st.Node.Op == "Mul":
					op, ok = rowOp{kind: '*', c: v}, true
				case st.Node.Op == "Sub" && first:
					op, ok = rowOp{kind: '-', c: v}, true
				case st.Node.Op == "Sub":
					op, ok = rowOp{kind: 'r', c: v}, true
				case st.Node.Op == "Div" && first:
					op, ok = rowOp{kind: '/', c: v}, true
				}
			} else if st.Node.Op == "Mul" && f.runtime(other) {
				op, operand, ok = rowOp{kind: 'x'}, other, true
			}
		case "Where":
			if len(st.In) != 3 || !f.runtime(st.In[0]) || st.In[0] == cur {
				break
			}
			if v, isC := f.scalarConst(st.In[1]); isC && st.In[2] == cur {
				op, operand, ok = rowOp{kind: 'W', c: v}, st.In[0], true
			} else if v, isC := f.scalarConst(st.In[2]); isC && st.In[1] == cur {
				op, operand, ok = rowOp{kind: 'w', c: v}, st.In[0], true
			}
		}
		if !ok {
			break
		}
		if operand >= 0 {
			op.input = len(operands)
			operands = append(operands, operand)
		}
		ops = append(ops, op)
		steps = append(steps, c)
		cur = st.Out[0]
	}
	return ops, operands, steps, cur
}

// featureBase recognises slot s as α·MatMul(α′·x, W) with W a constant matrix and scalar
// scalings, returning x, W, the combined scale and the steps (the MatMul last); mm is the
// MatMul step when one was reached (-1 otherwise), so a candidate with a run-time W is told
// apart from a value that is no product at all.
func (f *fuser) featureBase(s int) (x int, w *tensor.Tensor, alpha float32, steps []int, mm int) {
	alpha, mm = 1, -1
	scaled := func(i int) (int, float32, bool) {
		if x, op, ok := f.scalarScaling(i); ok {
			if op.kind == '/' {
				return x, 1 / op.c, true
			}
			return x, op.c, true
		}
		return -1, 0, false
	}
	for depth := 0; depth < 4; depth++ {
		pi := f.stepOf(s)
		if pi < 0 {
			return -1, nil, 0, nil, -1
		}
		if xs, c, ok := scaled(pi); ok {
			if depth > 0 {
				if _, single := f.single(s); !single {
					return -1, nil, 0, nil, -1
				}
			}
			alpha *= c
			steps = append(steps, pi)
			s = xs
			continue
		}
		st := f.p.plan.Steps[pi]
		if st.Node.Op != "MatMul" || len(st.In) != 2 {
			return -1, nil, 0, nil, -1
		}
		mm = pi
		if depth > 0 {
			if _, single := f.single(s); !single {
				return -1, nil, 0, nil, mm
			}
		}
		w = f.constF32(st.In[1])
		if w == nil || len(w.Shape) != 2 {
			return -1, nil, 0, nil, mm
		}
		x = st.In[0]
		for j := 0; j < 4; j++ {
			xi := f.stepOf(x)
			if xi < 0 {
				break
			}
			if _, single := f.single(x); !single {
				break
			}
			xs, c, ok := scaled(xi)
			if !ok {
				break
			}
			alpha *= c
			steps = append(steps, xi)
			x = xs
		}
		if !f.runtime(x) {
			return -1, nil, 0, nil, mm
		}
		return x, w, alpha, append(steps, pi), mm
	}
	return -1, nil, 0, nil, -1
}

// matchFeatureMap matches a random-feature map at Exp step ex. g nil and why "" means the
// Exp is not a candidate (its argument does not come from a matrix product).
func (f *fuser) matchFeatureMap(ex int) (g []int, st step, why string) {
	p := f.p
	es := p.plan.Steps[ex]
	if len(es.In) != 1 || len(es.Out) != 1 {
		return nil, step{}, ""
	}
	type rawTerm struct {
		slot int
		sign float32
	}
	// chain walks back from the argument through Sub and Add steps to the product P (pSlot),
	// trying either side of an Add.
	var (
		terms []rawTerm
		chain []int
		pSlot = -1
		mmAt  = -1
	)
	var walk func(s, depth int) bool
	walk = func(s, depth int) bool {
		if _, _, _, _, mm := f.featureBase(s); mm >= 0 {
			pSlot = s
			mmAt = mm
			return true
		}
		if depth > 6 {
			return false
		}
		pi := f.stepOf(s)
		if pi < 0 {
			return false
		}
		if _, single := f.single(s); !single && depth > 0 {
			return false
		}
		st := p.plan.Steps[pi]
		if len(st.In) != 2 || st.In[0] < 0 || st.In[1] < 0 {
			return false
		}
		try := func(ch, t int, sign float32) bool {
			n, c := len(terms), len(chain)
			terms = append(terms, rawTerm{t, sign})
			chain = append(chain, pi)
			if walk(ch, depth+1) {
				return true
			}
			terms, chain = terms[:n], chain[:c]
			return false
		}
		switch st.Node.Op {
		case "Sub":
			return try(st.In[0], st.In[1], 1)
		case "Add":
			return try(st.In[0], st.In[1], -1) || try(st.In[1], st.In[0], -1)
		}
		return false
	}
	if !walk(es.In[0], 0) || len(chain) == 0 {
		if mmAt >= 0 {
			return nil, step{}, "the exponent is not a product shifted by Sub or Add steps"
		}
		return nil, step{}, ""
	}
	x, w, alpha, baseSteps, _ := f.featureBase(pSlot)
	if w == nil {
		return nil, step{}, "the feature projection's right operand is not a constant matrix"
	}
	if _, single := f.single(es.In[0]); !single {
		return nil, step{}, "the exponent is also read outside the pattern"
	}
	// Terms were collected from the argument inwards; the shift applies them from P out.
	slices.Reverse(terms)
	ext := []int{x}
	group := append(append([]int{ex}, chain...), baseSteps...)
	var ts []rowTerm
	for _, t := range terms {
		rt := rowTerm{sign: t.sign, input: -1}
		if v, ok := f.scalarConst(t.slot); ok {
			rt.kind, rt.c = 'c', v
			ts = append(ts, rt)
			continue
		}
		if !f.runtime(t.slot) {
			return nil, step{}, fmt.Sprintf("the shift %q is a constant that is not a scalar", p.plan.Slots[t.slot])
		}
		rt.kind = 'R'
		if ri := f.stepOf(t.slot); ri >= 0 && p.plan.Steps[ri].Node.Op == "ReduceMax" && len(p.plan.Steps[ri].In) >= 1 {
			axes, ok := f.reduceAxes(ri)
			src := p.plan.Steps[ri].In[0]
			if !ok {
				return nil, step{}, "its stabiliser ReduceMax does not keep its axes or has none"
			}
			var whereStep = -1
			cond, invalidWhen := -1, false
			if src != pSlot {
				wi := f.stepOf(src)
				ws := step{}
				if wi >= 0 {
					ws = p.plan.Steps[wi]
				}
				if wi < 0 || ws.Node.Op != "Where" || len(ws.In) != 3 || !f.runtime(ws.In[0]) {
					return nil, step{}, "its stabiliser ReduceMax reads neither the product nor Where(mask, −∞, product)"
				}
				switch {
				case ws.In[2] == pSlot && f.isConstVal(ws.In[1], float32(math.Inf(-1))):
					invalidWhen = true
				case ws.In[1] == pSlot && f.isConstVal(ws.In[2], float32(math.Inf(-1))):
					invalidWhen = false
				default:
					return nil, step{}, "its stabiliser's Where does not replace the product by −∞"
				}
				cond, whereStep = ws.In[0], wi
			}
			kind, okAx := stabKind(axes)
			if !okAx || (kind == 'M' && cond >= 0) {
				return nil, step{}, fmt.Sprintf("its stabiliser reduces axes %v, not the last or the last two", axes)
			}
			rt.kind, rt.axes = kind, axes
			if cond >= 0 {
				rt.input, rt.invalidWhen = len(ext), invalidWhen
				ext = append(ext, cond)
				group = append(group, whereStep)
			}
			group = append(group, ri)
			ts = append(ts, rt)
			continue
		}
		if scale, steps, ok := f.matchSumSquares(t.slot, x); ok {
			rt.kind, rt.scale = 'Q', scale
			group = append(group, steps...)
			ts = append(ts, rt)
			continue
		}
		rt.input = len(ext)
		ext = append(ext, t.slot)
		ts = append(ts, rt)
	}
	// A head split of x is read through strides when every reader of x is in the group.
	xPerm := false
	if ti := f.stepOf(x); ti >= 0 && p.plan.Steps[ti].Node.Op == "Transpose" && len(p.plan.Steps[ti].In) == 1 && isHeadPerm(transposePerm(p.plan.Steps[ti].Node)) && f.runtime(p.plan.Steps[ti].In[0]) {
		in := map[int]bool{}
		for _, g := range group {
			in[g] = true
		}
		all := f.uses[x] == len(f.consumer[x])
		for _, c := range f.consumer[x] {
			all = all && in[c]
		}
		if all {
			xPerm = true
			group = append(group, ti)
			ext[0] = p.plan.Steps[ti].In[0]
		}
	}
	post, operands, postSteps, out := f.walkPost(es.Out[0])
	for j := range post {
		if post[j].kind == 'x' || post[j].kind == 'W' || post[j].kind == 'w' {
			post[j].input += len(ext)
		}
	}
	ext = append(ext, operands...)
	group = append(group, postSteps...)
	if why := f.closed(group, out); why != "" {
		return nil, step{}, why
	}
	if why := f.fedFromOutside(group, ext); why != "" {
		return nil, step{}, why
	}
	// The scale is folded into the packed W, so the GEMM reads x in place (a scaled product
	// packs A to scale it): α·W rounds once per weight where the graph rounds α·x once per
	// input, the same accuracy.
	ws := w.F32
	if alpha != 1 {
		ws = make([]float32, len(w.F32))
		for j, v := range w.F32 {
			ws[j] = alpha * v
		}
	}
	sp := &featureSpec{w: f.p.packProjection(false, w.Shape[0], w.Shape[1], ws, w.Shape[1]), xPerm: xPerm, terms: ts, post: post}
	if sp.w.Int8() {
		f.p.fusions["int8-feature-map"]++
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) { return featureMap(e, in, sp) }
	if f.features == nil {
		f.features = map[int]*featureFusion{}
	}
	f.features[out] = &featureFusion{sp: sp, ext: ext, group: group}
	return group, f.newFused("FusedFeatureMap", group, ext, out, fast, nil), ""
}

// featureFusion is a matched random-feature map: its spec, inputs and steps, which a linear
// attention reading its output may take into its own step (matchLinearAttention).
type featureFusion struct {
	sp    *featureSpec
	ext   []int
	group []int
}

// fits reports whether every stabiliser term of the map fits x's rank (stabFits).
func (sp *featureSpec) fits(x *tensor.Tensor) bool {
	for _, t := range sp.terms {
		if !stabFits(t, len(x.Shape)) {
			return false
		}
	}
	return true
}

// matchSumSquares recognises slot t as scalings by scalar constants of
// ReduceSum(Mul(x, x), last axis, keepdims), each value read only by the next, returning
// the scalings in the order they apply and the steps.
func (f *fuser) matchSumSquares(t, x int) (scale []rowOp, steps []int, ok bool) {
	p := f.p
	for depth := 0; depth < 4; depth++ {
		pi := f.stepOf(t)
		if pi < 0 {
			return nil, nil, false
		}
		if _, single := f.single(t); !single {
			return nil, nil, false
		}
		st := p.plan.Steps[pi]
		if st.Node.Op == "ReduceSum" {
			axes, ok := f.reduceAxes(pi)
			if !ok || len(axes) != 1 || axes[0] != -1 {
				return nil, nil, false
			}
			sq := f.stepOf(st.In[0])
			if sq < 0 || p.plan.Steps[sq].Node.Op != "Mul" || p.plan.Steps[sq].In[0] != x || p.plan.Steps[sq].In[1] != x {
				return nil, nil, false
			}
			if _, single := f.single(st.In[0]); !single {
				return nil, nil, false
			}
			slices.Reverse(scale)
			return scale, append(steps, pi, sq), true
		}
		xs, op, ok := f.scalarScaling(pi)
		if !ok {
			return nil, nil, false
		}
		if op.kind != '/' {
			op.kind = '*'
		}
		scale = append(scale, rowOp{kind: op.kind, c: op.c})
		steps = append(steps, pi)
		t = xs
	}
	return nil, nil, false
}

// stabKind classifies ReduceMax axes as one axis ('M', which must be the last) or two
// ('S', the last two); which axes they are is checked against the rank at run time by
// stabFits.
func stabKind(axes []int) (byte, bool) {
	switch len(axes) {
	case 1:
		return 'M', true
	case 2:
		return 'S', axes[0] != axes[1]
	}
	return 0, false
}

// stabFits reports whether a stabiliser's axes, normalised for rank r, are the last axis
// ('M') or the last two ('S').
func stabFits(t rowTerm, r int) bool {
	norm := make([]int, len(t.axes))
	for j, a := range t.axes {
		if a < 0 {
			a += r
		}
		norm[j] = a
	}
	slices.Sort(norm)
	switch t.kind {
	case 'M':
		return r >= 1 && slices.Equal(norm, []int{r - 1})
	case 'S':
		return r >= 2 && slices.Equal(norm, []int{r - 2, r - 1})
	}
	return true
}

// isConstVal reports whether slot s is a one-element float32 constant equal to v.
func (f *fuser) isConstVal(s int, v float32) bool {
	c, ok := f.scalarConst(s)
	return ok && (c == v || (c != c && v != v))
}

// matchEluFeature matches Add(Elu(x, alpha), c) and its post chain at Elu step el.
func (f *fuser) matchEluFeature(el int) (g []int, st step, why string) {
	p := f.p
	es := p.plan.Steps[el]
	if len(es.In) != 1 || len(es.Out) != 1 || !f.runtime(es.In[0]) {
		return nil, step{}, "the Elu has no single run-time input"
	}
	add, ok := f.single(es.Out[0])
	if !ok || p.plan.Steps[add].Node.Op != "Add" {
		return nil, step{}, "its output is not read only by an Add"
	}
	other, _, _ := p.otherInput(add, es.Out[0])
	c, ok := f.scalarConst(other)
	if !ok {
		return nil, step{}, "the Add after it is not by a scalar constant"
	}
	post, operands, postSteps, out := f.walkPost(f.outOf(add))
	for j := range post {
		if post[j].kind == 'x' || post[j].kind == 'W' || post[j].kind == 'w' {
			post[j].input++
		}
	}
	group := append([]int{el, add}, postSteps...)
	if why := f.fedFromOutside(group, operands); why != "" {
		return nil, step{}, why
	}
	sp := &eluSpec{alpha: es.Node.Float("alpha", 1), c: c, post: post}
	x := es.In[0]
	if ti := f.stepOf(x); ti >= 0 && p.plan.Steps[ti].Node.Op == "Transpose" && len(p.plan.Steps[ti].In) == 1 && isHeadPerm(transposePerm(p.plan.Steps[ti].Node)) && f.runtime(p.plan.Steps[ti].In[0]) {
		if c, ok := f.single(x); ok && c == el {
			sp.xPerm = true
			group = append(group, ti)
			x = p.plan.Steps[ti].In[0]
		}
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) { return eluFeature(e, in, sp) }
	return group, f.newFused("FusedEluFeature", group, append([]int{x}, operands...), out, fast, nil), ""
}

// swapsLastTwo reports whether Transpose step i swaps its input's last two axes and keeps
// the others.
func (f *fuser) swapsLastTwo(i int) bool {
	st := f.p.plan.Steps[i]
	perm := transposePerm(st.Node)
	if st.Node.Op != "Transpose" || len(st.In) != 1 || len(perm) < 2 {
		return false
	}
	r := len(perm)
	for j := 0; j < r-2; j++ {
		if perm[j] != j {
			return false
		}
	}
	return perm[r-2] == r-1 && perm[r-1] == r-2
}

// isKVProduct reports whether MatMul step i is A·C with C = MatMul(Transpose(B), V): the
// anchor of a linear-attention candidate.
func (f *fuser) isKVProduct(i int) bool {
	in := f.p.plan.Steps[i].In
	if len(in) != 2 {
		return false
	}
	ci := f.stepOf(in[1])
	if ci < 0 || f.p.plan.Steps[ci].Node.Op != "MatMul" || len(f.p.plan.Steps[ci].In) != 2 {
		return false
	}
	ti := f.stepOf(f.p.plan.Steps[ci].In[0])
	return ti >= 0 && f.swapsLastTwo(ti)
}

// isHeadPerm reports whether perm is (0, 2, 1, 3), a head split or merge.
func isHeadPerm(perm []int) bool { return slices.Equal(perm, []int{0, 2, 1, 3}) }

// matchLinearAttention matches the linear attention around num = MatMul(A, C) at step nm.
func (f *fuser) matchLinearAttention(nm int) (g []int, st step, why string) {
	p := f.p
	ns := p.plan.Steps[nm]
	a, cSlot := ns.In[0], ns.In[1]
	ci := f.stepOf(cSlot)
	cs := p.plan.Steps[ci]
	ti := f.stepOf(cs.In[0])
	b, v := p.plan.Steps[ti].In[0], cs.In[1]
	if !f.runtime(a) || !f.runtime(b) || !f.runtime(v) {
		return nil, step{}, "its queries, keys or values are constants"
	}
	numOut := f.outOf(nm)
	fin, ok := f.single(numOut)
	if !ok {
		return nil, step{}, "the numerator A·(Bᵀ·V) is read more than once, or is an output"
	}
	fs := p.plan.Steps[fin]
	other, first, isIn := p.otherInput(fin, numOut)
	if !isIn || other == numOut || len(fs.Out) != 1 {
		return nil, step{}, fmt.Sprintf("the numerator is read by %s %q, not by a normalising Mul or Div", fs.Node.Op, fs.Node.Name)
	}
	sp := &linAttnSpec{}
	group := []int{nm, ci, ti, fin}
	den := other
	switch {
	case fs.Node.Op == "Div" && first:
		sp.div = true
	case fs.Node.Op == "Mul":
		zi := f.stepOf(other)
		if zi < 0 || p.plan.Steps[zi].Node.Op != "Div" || len(p.plan.Steps[zi].In) != 2 || !f.isConstVal(p.plan.Steps[zi].In[0], 1) {
			return nil, step{}, "the numerator is multiplied by something other than Div(1, normaliser)"
		}
		group = append(group, zi)
		den = p.plan.Steps[zi].In[1]
	default:
		return nil, step{}, fmt.Sprintf("the numerator is read by %s %q, not by a normalising Mul or Div", fs.Node.Op, fs.Node.Name)
	}
	if di := f.stepOf(den); di >= 0 && p.plan.Steps[di].Node.Op == "Add" {
		d0, d1 := p.plan.Steps[di].In[0], p.plan.Steps[di].In[1]
		if v, ok := f.scalarConst(d1); ok {
			sp.eps, sp.hasEps, den = v, true, d0
			group = append(group, di)
		} else if v, ok := f.scalarConst(d0); ok {
			sp.eps, sp.hasEps, den = v, true, d1
			group = append(group, di)
		}
	}
	di := f.stepOf(den)
	if di < 0 || p.plan.Steps[di].Node.Op != "MatMul" || len(p.plan.Steps[di].In) != 2 || p.plan.Steps[di].In[0] != a {
		return nil, step{}, "the normaliser is not A·(Σ_j B_j)ᵀ"
	}
	tsi := f.stepOf(p.plan.Steps[di].In[1])
	if tsi < 0 || p.plan.Steps[tsi].Node.Op != "Transpose" || len(p.plan.Steps[tsi].In) != 1 {
		return nil, step{}, "the normaliser's key sum is not transposed by a Transpose"
	}
	perm := transposePerm(p.plan.Steps[tsi].Node)
	if !f.swapsLastTwo(tsi) && !(len(perm) == 4 && slices.Equal(perm, []int{0, 1, 3, 2})) {
		return nil, step{}, "the normaliser's key sum is not transposed over its last two axes"
	}
	rsi := f.stepOf(p.plan.Steps[tsi].In[0])
	if rsi < 0 || p.plan.Steps[rsi].Node.Op != "ReduceSum" || p.plan.Steps[rsi].In[0] != b {
		return nil, step{}, "the normaliser's key sum is not ReduceSum of the keys' features"
	}
	axes, ok := f.reduceAxes(rsi)
	if !ok || len(axes) != 1 {
		return nil, step{}, "the key sum does not reduce one axis with keepdims"
	}
	sp.keyAxis = axes[0]
	if len(perm) > 0 && sp.keyAxis >= 0 && sp.keyAxis != len(perm)-2 {
		return nil, step{}, fmt.Sprintf("the key sum reduces axis %d, not the sequence axis", sp.keyAxis)
	}
	group = append(group, di, tsi, rsi)
	// A per-row scaling of V (linear attention's key-padding Mul) is applied as V is read.
	ext := []int{a, b, v}
	if mi := f.stepOf(v); mi >= 0 && p.plan.Steps[mi].Node.Op == "Mul" && len(p.plan.Steps[mi].In) == 2 {
		if c, ok := f.single(v); ok && c == ci {
			for j := 0; j < 2; j++ {
				src, sc := p.plan.Steps[mi].In[j], p.plan.Steps[mi].In[1-j]
				if ti := f.stepOf(src); ti >= 0 && f.runtime(sc) && src != sc && p.plan.Steps[ti].Node.Op == "Transpose" {
					sp.vScale = true
					group = append(group, mi)
					ci, v = mi, src
					ext = append(ext, sc)
					break
				}
			}
		}
	}
	if vi := f.stepOf(v); vi >= 0 && p.plan.Steps[vi].Node.Op == "Transpose" && len(p.plan.Steps[vi].In) == 1 && isHeadPerm(transposePerm(p.plan.Steps[vi].Node)) {
		if c, ok := f.single(v); ok && c == ci {
			sp.vPerm = []int{0, 2, 1, 3}
			group = append(group, vi)
			v = p.plan.Steps[vi].In[0]
		}
	}
	ext[2] = v
	// Features that a feature map computes for this step alone are computed here instead:
	// the queries' a block of rows at a time, where the second product reads them, the keys'
	// a slab at a time, where the first product and the key sums read them (a map with a
	// whole-slab maximum computes its products once more for it). φ(Q) and φ(K), 35 MB each
	// a layer for the performer's base at b8 n512, are then never written and read back.
	readBy := func(x int, steps ...int) bool {
		if f.uses[x] != len(steps) {
			return false
		}
		for _, st := range steps {
			if !slices.Contains(f.consumer[x], st) {
				return false
			}
		}
		return true
	}
	var fa, fb *featureFusion
	if ff := f.features[a]; ff != nil && ff.sp.slabTerm() < 0 && readBy(a, nm, di) {
		fa = ff
		group = append(group, ff.group...)
	}
	if ff := f.features[b]; ff != nil && readBy(b, ti, rsi) {
		fb = ff
		group = append(group, ff.group...)
	}
	out := f.outOf(fin)
	if c, ok := f.single(out); ok && p.plan.Steps[c].Node.Op == "Transpose" && len(p.plan.Steps[c].Out) == 1 && isHeadPerm(transposePerm(p.plan.Steps[c].Node)) {
		sp.outPerm = []int{0, 2, 1, 3}
		group = append(group, c)
		out = f.outOf(c)
	}
	if why := f.closed(group, out); why != "" {
		return nil, step{}, why
	}
	if fa != nil || fb != nil {
		// The inputs: those of A, B, V and V's scaling not computed here, then each map's
		// (its terms and post chain index them from its own first input).
		pos := make([]int, len(ext)) // the step's input for each of linearAttention's, or -1
		var own []int
		for i, sl := range ext {
			pos[i] = len(own)
			if (i == 0 && fa != nil) || (i == 1 && fb != nil) {
				pos[i] = -1
				continue
			}
			own = append(own, sl)
		}
		ext = own
		maps := [2]*featureFusion{fa, fb}
		var at [2]int
		for j, ff := range maps {
			if ff != nil {
				at[j] = len(ext)
				ext = append(ext, ff.ext...)
			}
		}
		fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
			la := make([]*tensor.Tensor, len(pos))
			for i, p := range pos {
				if p >= 0 {
					la[i] = in[p]
				}
			}
			var frs [2]*featureRun
			for j, ff := range maps {
				if ff == nil {
					continue
				}
				fr, ok := prepareFeatures(in[at[j]:at[j]+len(ff.ext)], ff.sp)
				if !ok {
					return nil, false, nil
				}
				frs[j] = fr
			}
			return linearAttentionOf(e, la, frs[0], frs[1], sp)
		}
		if why := f.fedFromOutside(group, ext); why != "" {
			return nil, step{}, why
		}
		return group, f.newFused("FusedLinearAttention", group, ext, out, fast, nil), ""
	}
	if why := f.fedFromOutside(group, ext); why != "" {
		return nil, step{}, why
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) { return linearAttention(e, in, sp) }
	return group, f.newFused("FusedLinearAttention", group, ext, out, fast, nil), ""
}
