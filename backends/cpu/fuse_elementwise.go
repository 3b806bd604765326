package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Chains of elementwise arithmetic run as one pass. Nyström's Q̃ and K̃ are
// Div(Mul(Transpose(x), keep), d_k^¼): three passes over a (B, h, n, d_k) tensor, each as
// slow as the memory, where one is enough. A chain is a run of Add, Sub, Mul and Div steps,
// each reading the previous one's value (read by nothing else) and one other operand that
// broadcasts to it (a scalar, a row, a mask (B, 1, n, 1), a tensor of the same shape),
// optionally starting at a Transpose that keeps the last axis (read in place). The fused step
// copies each row of the source once and applies the ops to it while it is in cache: every
// element goes through the same float32 operations in the same order as in the unfused
// graph, so the result is bitwise the same. Node names play no part. At run time a shape
// the pass does not handle (an operand that widens the chain, a dtype other than float32,
// a Transpose that moves the last axis) runs the original steps.
//
// A lone op (no fusion, its step keeps its node) runs the same row kernel: the generic broadcasting kernel costs about
// 3 ns an element on a small broadcast operand, where the rows here are vector loops.
// Nyström's pseudo-inverse (Sub of a 64×64 identity from (B, h, 64, 64), Mul by ¼, 168 ops
// at n = 512), profiled on the loaded machine: Sub 84-89 ms → 18-36 ms, Mul 35-37 → 6-15 ms.

// ewOp is one op of an elementwise chain, v ← v ∘ operand: kind '+', '-', '*', '/', or
// 'm' (operand − v) and 'q' (operand / v) when the chain value is the right operand; input
// is the operand's index among the fused step's inputs.
type ewOp struct {
	kind  byte
	input int
}

// arithKind returns the chain op of step st when the chain value is its input j.
func arithKind(op string, j int) (byte, bool) {
	switch op {
	case "Add":
		return '+', true
	case "Mul":
		return '*', true
	case "Sub":
		if j == 0 {
			return '-', true
		}
		return 'm', true
	case "Div":
		if j == 0 {
			return '/', true
		}
		return 'q', true
	}
	return 0, false
}

// isArith reports whether step i is a live two-input, one-output Add, Sub, Mul or Div.
func (f *fuser) isArith(i int) bool {
	st := f.p.plan.Steps[i]
	_, ok := arithKind(st.Node.Op, 0)
	return ok && !f.dead[i] && len(st.In) == 2 && st.In[0] >= 0 && st.In[1] >= 0 && len(st.Out) == 1
}

// chainable reports whether slot s can continue a chain backwards: read only by one step
// and produced by a live arithmetic step or Transpose.
func (f *fuser) chainable(s int) bool {
	if _, ok := f.single(s); !ok {
		return false
	}
	st, pi, ok := f.prod(s)
	return ok && (f.isArith(pi) || (st.Node.Op == "Transpose" && len(st.In) == 1 && st.In[0] >= 0 && transposePerm(st.Node) != nil))
}

// matchElementwise matches the chain ending at arithmetic step i (whose value does not go on
// into another arithmetic step), returning its steps and the fused step; ok is false when
// step i is no such end, or its source is a constant or its operands integer constants.
func (f *fuser) matchElementwise(i int) (group []int, st step, ok bool) {
	p := f.p
	if !f.isArith(i) {
		return nil, step{}, false
	}
	if c, single := f.single(f.outOf(i)); single && f.isArith(c) {
		return nil, step{}, false // not the end of the chain
	}
	var ops []ewOp
	var operands []int
	cur, src := i, -1
	var perm []int
	for depth := 0; depth < 16; depth++ {
		in := p.plan.Steps[cur].In
		j := 0
		switch {
		case f.chainable(in[0]):
		case f.chainable(in[1]) && f.runtime(in[1]):
			j = 1
		case !f.runtime(in[0]):
			j = 1
		}
		kind, _ := arithKind(p.plan.Steps[cur].Node.Op, j)
		ops = append(ops, ewOp{kind: kind, input: len(operands)})
		operands = append(operands, in[1-j])
		group = append(group, cur)
		src = in[j]
		if !f.chainable(src) {
			break
		}
		ps, pi, _ := f.prod(src)
		if ps.Node.Op == "Transpose" {
			perm = transposePerm(ps.Node)
			group = append(group, pi)
			src = ps.In[0]
			break
		}
		cur = pi
	}
	if len(group) == 0 || !f.runtime(src) {
		return nil, step{}, false
	}
	for _, o := range operands {
		if t := f.constAny(o); t != nil && t.DType != tensor.Float32 {
			return nil, step{}, false // integer shape arithmetic
		}
	}
	// ops were collected from the end: apply them from the source on
	for a, b := 0, len(ops)-1; a < b; a, b = a+1, b-1 {
		ops[a], ops[b] = ops[b], ops[a]
	}
	for k := range ops {
		ops[k].input += 1
	}
	fast := func(e *exec, in []*tensor.Tensor) (*tensor.Tensor, bool, error) {
		return elementwiseFast(e, in, ops, perm)
	}
	if len(group) == 1 {
		// One op is no fusion: the step keeps its node and gets the row kernel, its own
		// kernel running what the row kernel does not handle.
		st := p.plan.Steps[i]
		own, swap := st.Kernel, src != st.In[0]
		st.Kernel = func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			args := in
			if swap {
				args = []*tensor.Tensor{in[1], in[0]}
			}
			if t, ok, err := fast(e, args); ok || err != nil {
				return []*tensor.Tensor{t}, err
			}
			return own(e, in)
		}
		return group, st, true
	}
	ext := append([]int{src}, operands...)
	return group, f.newFused("FusedElementwise", group, ext, f.outOf(i), fast, nil), true
}

// fuseElementwise fuses every chain of elementwise arithmetic that is left, and gives a
// lone arithmetic step the chain's row kernel.
func (f *fuser) fuseElementwise(replaced map[int]step) {
	for i := len(f.p.plan.Steps) - 1; i >= 0; i-- {
		g, st, ok := f.matchElementwise(i)
		if !ok {
			continue
		}
		if len(g) == 1 {
			f.p.plan.Steps[i] = st
			continue
		}
		f.commit(g, st, replaced)
		f.p.fusions["elementwise"]++
	}
}

// ewOperand is an operand of a chain broadcast to the chain's shape: element strides per
// axis, 0 along broadcast axes.
type ewOperand struct {
	t  *tensor.Tensor
	st []int
}

// elementwiseFast is the fused chain: in[0] is the source (read through Transpose(perm)
// when perm is set), the rest the operands of ops. ok is false when an input is not float32,
// the Transpose moves the last axis or an operand does not broadcast to the source's shape.
func elementwiseFast(e *exec, in []*tensor.Tensor, ops []ewOp, perm []int) (*tensor.Tensor, bool, error) {
	x := in[0]
	if x == nil || x.DType != tensor.Float32 {
		return nil, false, nil
	}
	// The compiler cannot tell which input of the first op is the wide one when neither is
	// computed for the chain alone; the other way round the op reads the same.
	if o := in[ops[0].input]; perm == nil && o != nil && o.Len() > x.Len() {
		in = append([]*tensor.Tensor{o}, in[1:]...)
		in[ops[0].input] = x
		x = o
		ops = append([]ewOp{{kind: swapped[ops[0].kind], input: ops[0].input}}, ops[1:]...)
	}
	shape, st, ok := permView(x.Shape, perm)
	r := len(shape)
	if !ok || r == 0 || st[r-1] != 1 {
		return nil, false, nil
	}
	opnds := make([]ewOperand, len(ops))
	for k, op := range ops {
		t := in[op.input]
		if t == nil || t.DType != tensor.Float32 || len(t.Shape) > r {
			return nil, false, nil
		}
		os := make([]int, r)
		acc := 1
		for a := len(t.Shape) - 1; a >= 0; a-- {
			d, full := t.Shape[a], shape[r-len(t.Shape)+a]
			if d != full && d != 1 {
				return nil, false, nil
			}
			if d != 1 {
				os[r-len(t.Shape)+a] = acc
			}
			acc *= d
		}
		opnds[k] = ewOperand{t: t, st: os}
	}
	out, err := e.allocRaw(shape)
	if err != nil {
		return nil, true, err
	}
	if out.Len() == 0 {
		return out, true, nil
	}
	dims, st := collapseEw(shape, st, opnds)
	r = len(dims)
	inner := dims[r-1]
	rows := graph.NumElements(dims[:r-1])
	workpool.For(e.threads, rows, max(1, elemGrain/inner), func(lo, hi int) {
		idx := make([]int, r-1)
		rem := lo
		for a := r - 2; a >= 0; a-- {
			idx[a] = rem % dims[a]
			rem /= dims[a]
		}
		for row := lo; row < hi; row++ {
			so := 0
			for a, v := range idx {
				so += v * st[a]
			}
			dst := out.F32[row*inner : (row+1)*inner]
			for k, op := range ops {
				o := &opnds[k]
				oo := 0
				for a, v := range idx {
					oo += v * o.st[a]
				}
				if k == 0 {
					firstEw(dst, x.F32[so:so+inner], op.kind, o.t.F32[oo:], o.st[r-1])
				} else {
					applyEw(dst, op.kind, o.t.F32[oo:], o.st[r-1])
				}
			}
			for a := r - 2; a >= 0; a-- {
				idx[a]++
				if idx[a] < dims[a] {
					break
				}
				idx[a] = 0
			}
		}
	})
	return out, true, nil
}

// collapseEw merges adjacent axes of a chain's shape that x (strides st) and every
// operand walk as one (contiguously, or an operand not at all), dropping axes of size 1, and
// returns the merged shape and x's strides, the operands' strides rewritten in place. Rows
// are then as long as the layouts allow: a (B, h, 64, 64) chain with a (64, 64) operand runs
// 64 rows of 4096 rather than 4096 rows of 64, whose per-row offsets cost more than their
// values (zoo profile nystrom, b8 n512: its 108 Subs of the pseudo-inverse 21–22 → 13–14 ms
// a run).
func collapseEw(shape, st []int, opnds []ewOperand) (dims, xst []int) {
	ost := make([][]int, len(opnds))
	for a, d := range shape {
		if d == 1 && a < len(shape)-1 {
			continue
		}
		if l := len(dims) - 1; l >= 0 && xst[l] == st[a]*d {
			merge := true
			for k := range opnds {
				if ost[k][l] != opnds[k].st[a]*d {
					merge = false
					break
				}
			}
			if merge {
				dims[l] *= d
				xst[l] = st[a]
				for k := range opnds {
					ost[k][l] = opnds[k].st[a]
				}
				continue
			}
		}
		dims, xst = append(dims, d), append(xst, st[a])
		for k := range opnds {
			ost[k] = append(ost[k], opnds[k].st[a])
		}
	}
	for k := range opnds {
		opnds[k].st = ost[k]
	}
	return dims, xst
}

// swapped is the chain op with the chain value and the operand exchanged.
var swapped = map[byte]byte{'+': '+', '*': '*', '-': 'm', 'm': '-', '/': 'q', 'q': '/'}

// firstEw sets dst to the first chain op applied to row x (len(x) = len(dst)): in one pass
// where the op and a whole row of its operand allow it, else as a copy and applyEw.
func firstEw(dst, x []float32, kind byte, src []float32, cs int) {
	if cs == 1 {
		o := src[:len(dst)]
		x = x[:len(dst)]
		switch kind {
		case '+':
			vec.Add(dst, x, o)
			return
		case '-':
			vec.Sub(dst, x, o)
			return
		case 'm':
			vec.Sub(dst, o, x)
			return
		}
	}
	copy(dst, x)
	applyEw(dst, kind, src, cs)
}

// applyEw applies one chain op to row v with the operand's elements at src[j·cs] (cs 0: one
// value for the whole row).
func applyEw(v []float32, kind byte, src []float32, cs int) {
	if cs == 0 {
		c := src[0]
		switch kind {
		case '+':
			for j := range v {
				v[j] += c
			}
		case '-':
			for j := range v {
				v[j] -= c
			}
		case '*':
			if c != 1 { // x·1 is x: a mask of an unpadded batch
				vec.Scale(v, c)
			}
		case '/':
			if c != 1 {
				vec.DivScalar(v, c)
			}
		case 'm':
			for j := range v {
				v[j] = c - v[j]
			}
		case 'q':
			for j := range v {
				v[j] = c / v[j]
			}
		}
		return
	}
	o := src[:len(v)]
	switch kind {
	case '+':
		vec.Add(v, v, o)
	case '-':
		vec.Sub(v, v, o)
	case '*':
		for j := range v {
			v[j] *= o[j]
		}
	case '/':
		for j := range v {
			v[j] /= o[j]
		}
	case 'm':
		vec.Sub(v, o, v)
	case 'q':
		for j := range v {
			v[j] = o[j] / v[j]
		}
	}
}
