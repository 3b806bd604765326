//go:build cgo && linux

package cuda

import (
	"fmt"
	"slices"

	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Fused attention: the compile step's Fuse pass (fuseAttention) finds
//
//	MatMul(Q, Kᵀ) → Mul or Div by scalar constants → Add of up to two biases → Softmax over
//	the last axis → MatMul with V
//
// whatever the nodes' names, where every value in between has that one reader and is no
// output, and replaces it with one step that runs the tiled online-softmax kernel of
// kernels.cu (zoo_attention_t32 / _t64 for 32 or 64 features per head, zoo_attention for up
// to 256; with Options.Precision "bf16", zoo_attention_bf16_d32 / _d64 on the tensor cores):
// the n×n scores are never stored. The Transposes that split heads before the
// products (and Kᵀ itself) and the one that merges them after are absorbed the same way,
// when they have no other reader: the kernel reads and writes those layouts through strides.
// A bias is anything that broadcasts to the scores (a key-padding mask, ALiBi's or T5's
// bias). The fused step keeps the steps it replaced and runs them instead when the run-time
// shapes fall outside what the kernels take (rank above 4, a softmax over another axis,
// more than 256 features, key and value widths that differ), so fusion never rejects a
// graph the unfused program runs. backends.Options.NoFusion turns the pass off.

// fusedAttentionOp is the Op of a fused step's node (it is no op of the graph's table).
const fusedAttentionOp = "FusedAttention"

// operandView says how a kernel operand is read: the tensor the kernel sees is
// Transpose(perm) of the step input in (perm nil: the input as it is); swapLast, for K
// when no Transpose was absorbed, swaps its last two axes on top of that.
type operandView struct {
	in       int
	perm     []int
	swapLast bool
}

// attention is one fused attention step.
type attention struct {
	q, k, v operandView
	bias    []int   // step inputs added to the scores, in the graph's order
	scale   float32 // the product of the scalings
	axis    int64   // the softmax's axis attribute
	outPerm []int   // nil, or the absorbed Transpose of the output
	sub     []step  // the replaced steps, in plan order: the fallback
	in      []int   // the fused step's input slots
	out     int     // its output slot
}

// fuseAttention is the CUDA plan's Fuse pass.
func fuseAttention(p *compile.Plan[gpuOp]) {
	readers := make([][]int, len(p.Slots)) // step per reading input position
	producer := make([]int, len(p.Slots))
	for i := range producer {
		producer[i] = -1
	}
	for i, st := range p.Steps {
		for _, s := range st.In {
			if s >= 0 {
				readers[s] = append(readers[s], i)
			}
		}
		for _, s := range st.Out {
			if s >= 0 {
				producer[s] = i
			}
		}
	}
	isOut := outputSlots(p)
	used := make([]bool, len(p.Steps))
	// only returns the producer of s when s is a run-time value read once, by step reader.
	only := func(s, reader int) (int, bool) {
		if s < 0 || p.Kinds[s] != compile.SlotNode || isOut[s] || len(readers[s]) != 1 || readers[s][0] != reader {
			return -1, false
		}
		pr := producer[s]
		if pr < 0 || used[pr] || len(p.Steps[pr].Out) != 1 {
			return -1, false
		}
		return pr, true
	}
	scalar := func(s int) (float32, bool) {
		if s < 0 || p.Kinds[s] != compile.SlotConst || p.Consts[s] == nil {
			return 0, false
		}
		t := p.Consts[s]
		if t.DType != tensor.Float32 || len(t.F32) != 1 || len(t.Shape) > 2 {
			return 0, false
		}
		return t.F32[0], true
	}
	replace := map[int]step{}
	drop := make([]bool, len(p.Steps))
	for sm := range p.Steps {
		if p.Steps[sm].Node.Op != "Softmax" || p.Steps[sm].Node.Domain != "" || used[sm] || len(p.Steps[sm].In) != 1 {
			continue
		}
		a, group, ok := matchAttention(p, sm, only, scalar)
		if !ok {
			continue
		}
		slices.Sort(group)
		last := group[len(group)-1]
		inGroup := map[int]bool{}
		made := map[int]bool{}
		for _, g := range group {
			inGroup[g] = true
			a.sub = append(a.sub, p.Steps[g])
			for _, s := range p.Steps[g].Out {
				if s >= 0 {
					made[s] = true
				}
			}
		}
		slotIn := map[int]int{}
		for _, g := range group {
			for _, s := range p.Steps[g].In {
				if s >= 0 && !made[s] {
					if _, seen := slotIn[s]; !seen {
						slotIn[s] = len(a.in)
						a.in = append(a.in, s)
					}
				}
			}
		}
		// Operands were recorded as slots; make them step-input indices.
		a.q.in, a.k.in, a.v.in = slotIn[a.q.in], slotIn[a.k.in], slotIn[a.v.in]
		for i, s := range a.bias {
			a.bias[i] = slotIn[s]
		}
		node := &graph.Node{Name: p.Steps[sm].Node.Name + "/fused_attention", Op: fusedAttentionOp, Outputs: []string{p.Slots[a.out]}, Attrs: a.attrs()}
		for _, s := range a.in {
			node.Inputs = append(node.Inputs, p.Slots[s])
		}
		fused := step{Node: node, Kernel: a.run, In: a.in, Out: []int{a.out}, Covers: compile.CoversOf(a.sub)}
		for _, g := range group {
			used[g] = true
			drop[g] = g != last
		}
		replace[last] = fused
	}
	replaceSteps(p, replace, drop)
}

// attrs describes the fusion on its node (for reports and tests): the absorbed
// permutations of q, k, v and the output (empty: none; k_swap 1: Kᵀ read as it is), the
// scale and the number of biases.
func (a *attention) attrs() graph.Attrs {
	ints := func(p []int) graph.Attr {
		v := make([]int64, len(p))
		for i, x := range p {
			v[i] = int64(x)
		}
		return graph.Ints(v...)
	}
	swap := int64(0)
	if a.k.swapLast {
		swap = 1
	}
	return graph.Attrs{"q_perm": ints(a.q.perm), "k_perm": ints(a.k.perm), "v_perm": ints(a.v.perm), "out_perm": ints(a.outPerm),
		"k_swap": graph.Int(swap), "scale": graph.Float(a.scale), "biases": graph.Int(int64(len(a.bias))), "replaced": graph.Int(int64(len(a.sub)))}
}

// matchAttention matches the pattern around the Softmax step sm. Operands come back as
// slots (fuseAttention turns them into input indices) and group lists the steps replaced.
func matchAttention(p *compile.Plan[gpuOp], sm int, only func(s, reader int) (int, bool), scalar func(int) (float32, bool)) (*attention, []int, bool) {
	st := p.Steps
	a := &attention{scale: 1, axis: st[sm].Node.Int("axis", -1)}
	if a.axis < -1 {
		return nil, nil, false
	}
	probs := st[sm].Out[0]
	if probs < 0 {
		return nil, nil, false
	}
	var pv int = -1
	for i := range st {
		if slices.Contains(st[i].In, probs) {
			if pv >= 0 {
				return nil, nil, false
			}
			pv = i
		}
	}
	if pv < 0 || st[pv].Node.Op != "MatMul" || len(st[pv].In) != 2 || st[pv].In[0] != probs || st[pv].In[1] == probs {
		return nil, nil, false
	}
	if pr, ok := only(probs, pv); !ok || pr != sm {
		return nil, nil, false
	}
	group := []int{sm, pv}
	// Walk back from the softmax's input through biases and scalings to the score product.
	cur, reader := st[sm].In[0], sm
	var biases []int // outermost first
	mm := -1
	for mm < 0 {
		pr, ok := only(cur, reader)
		if !ok || st[pr].Node.Domain != "" {
			return nil, nil, false
		}
		n := st[pr]
		switch n.Node.Op {
		case "MatMul":
			if len(n.In) != 2 || n.In[0] < 0 || n.In[1] < 0 {
				return nil, nil, false
			}
			mm = pr
		case "Add":
			if len(n.In) != 2 || len(biases) == 2 || a.scale != 1 {
				// A scaling after a bias would scale the bias too: not this kernel's form.
				return nil, nil, false
			}
			// The scores are the operand made by the chain; try the first, then the second.
			x, b := n.In[0], n.In[1]
			if _, ok := only(x, pr); !ok {
				x, b = b, x
			}
			if b < 0 || x < 0 {
				return nil, nil, false
			}
			biases = append(biases, b)
			cur = x
		case "Mul", "Div":
			if len(n.In) != 2 {
				return nil, nil, false
			}
			x, c := n.In[0], n.In[1]
			f, ok := scalar(c)
			if !ok && n.Node.Op == "Mul" {
				x, c = c, x
				f, ok = scalar(c)
			}
			if !ok || f == 0 {
				return nil, nil, false
			}
			if n.Node.Op == "Div" {
				f = float32(1 / float64(f))
			}
			a.scale *= f
			cur = x
		default:
			return nil, nil, false
		}
		group = append(group, pr)
		reader = pr
	}
	for i := len(biases) - 1; i >= 0; i-- {
		a.bias = append(a.bias, biases[i])
	}
	// Q, K and V, through the Transposes that only feed this attention.
	absorb := func(v *operandView, slot, reader int) {
		v.in = slot
		for {
			pr, ok := only(v.in, reader)
			if !ok || st[pr].Node.Op != "Transpose" || st[pr].Node.Domain != "" {
				return
			}
			pp, ok := st[pr].Node.IntList("perm")
			if !ok || len(pp) < 2 || len(st[pr].In) != 1 {
				return
			}
			r := len(pp)
			if v.perm != nil && len(v.perm) != r {
				return
			}
			cur := v.perm
			if cur == nil {
				cur = make([]int, r)
				for i := range cur {
					cur[i] = i
				}
				if v.swapLast {
					cur[r-2], cur[r-1] = r-1, r-2
				}
			}
			next := make([]int, r)
			for i := range next {
				if cur[i] < 0 || cur[i] >= r {
					return
				}
				next[i] = int(pp[cur[i]])
			}
			if next[r-1] != r-1 {
				return // the kernels read rows with contiguous features
			}
			v.perm, v.swapLast = next, false
			v.in = st[pr].In[0]
			group = append(group, pr)
			reader = pr
		}
	}
	absorb(&a.q, st[mm].In[0], mm)
	a.k.swapLast = true
	absorb(&a.k, st[mm].In[1], mm)
	absorb(&a.v, st[pv].In[1], pv)
	a.out = st[pv].Out[0]
	if a.out < 0 {
		return nil, nil, false
	}
	// The Transpose that merges heads after the product, when it is the only reader.
	for i := range st {
		if !slices.Contains(st[i].In, a.out) {
			continue
		}
		if pr, ok := only(a.out, i); ok && pr == pv && st[i].Node.Op == "Transpose" && st[i].Node.Domain == "" && len(st[i].Out) == 1 && st[i].Out[0] >= 0 {
			if pp, ok := st[i].Node.IntList("perm"); ok && len(pp) >= 2 && int(pp[len(pp)-1]) == len(pp)-1 {
				a.outPerm = make([]int, len(pp))
				for j, x := range pp {
					a.outPerm[j] = int(x)
				}
				a.out = st[i].Out[0]
				group = append(group, i)
			}
		}
		break
	}
	return a, group, true
}

// view returns the tensor the kernel reads for operand v of x: its shape and element
// strides, from the absorbed permutation.
func (v operandView) view(x *dtensor) (shape []int, st []int64, ok bool) {
	r := len(x.shape)
	if v.perm != nil && len(v.perm) != r {
		return nil, nil, false
	}
	cs := contiguous(x.shape)
	shape, st = make([]int, r), make([]int64, r)
	for i := range shape {
		j := i
		if v.perm != nil {
			j = v.perm[i]
		}
		shape[i], st[i] = x.shape[j], cs[j]
	}
	if v.swapLast {
		if r < 2 {
			return nil, nil, false
		}
		shape[r-2], shape[r-1] = shape[r-1], shape[r-2]
		st[r-2], st[r-1] = st[r-1], st[r-2]
	}
	return shape, st, true
}

// run is the fused step's kernel.
func (a *attention) run(r *run, n *graph.Node, in []value) ([]value, error) {
	res, ok, err := a.fused(r, in)
	if err != nil || ok {
		return res, err
	}
	return a.fallback(r, in)
}

// fused launches the kernel; ok is false (and nothing was done) when the shapes need the
// unfused steps.
func (a *attention) fused(r *run, in []value) ([]value, bool, error) {
	var x [3]*dtensor
	var shape [3][]int
	var st [3][]int64
	for i, v := range []operandView{a.q, a.k, a.v} {
		if !in[v.in].isFloat() {
			return nil, false, nil
		}
		t, err := r.dev(in[v.in], v.in, false)
		if err != nil {
			return nil, false, err
		}
		s, strides, ok := v.view(t)
		if !ok {
			return nil, false, nil
		}
		if strides[len(strides)-1] != 1 && len(s) > 0 {
			// Features not contiguous (Kᵀ with no Transpose absorbed): copy to rows.
			c, err := r.gather(t, 0, s, strides)
			if err != nil {
				return nil, false, err
			}
			r.temp(c.buf)
			t, strides = c, contiguous(s)
		}
		x[i], shape[i], st[i] = t, s, strides
	}
	rank := len(shape[0])
	if rank < 2 || rank > 4 || len(shape[1]) != rank || len(shape[2]) != rank {
		return nil, false, nil
	}
	if ax := a.axis; ax != -1 && int(ax) != rank-1 {
		return nil, false, nil
	}
	nq, dk := shape[0][rank-2], shape[0][rank-1]
	nk, dk2, nk2, dv := shape[1][rank-2], shape[1][rank-1], shape[2][rank-2], shape[2][rank-1]
	if dk != dk2 || nk != nk2 || dv != dk || dk < 1 || dk > 256 || nq == 0 || nk == 0 {
		return nil, false, nil
	}
	batch, err := graph.BroadcastShapes(shape[0][:rank-2], shape[1][:rank-2], shape[2][:rank-2])
	if err != nil || !slices.Equal(batch, shape[0][:rank-2]) {
		return nil, false, nil
	}
	scores := append(append([]int(nil), batch...), nq, nk)
	var bias [2]*dtensor
	var bst [2][]int64
	for i, bi := range a.bias {
		if !in[bi].isFloat() {
			return nil, false, nil
		}
		b, err := r.dev(in[bi], bi, false)
		if err != nil {
			return nil, false, err
		}
		full, err := graph.BroadcastShapes(b.shape, scores)
		if err != nil || !slices.Equal(full, scores) {
			return nil, false, nil
		}
		bias[i], bst[i] = b, broadcastStrides(b.shape, scores)
	}
	// The output, and where the kernel writes its rows.
	oshape := append(append([]int(nil), batch...), nq, dv)
	var y *dtensor
	var yst []int64
	if a.outPerm != nil {
		if len(a.outPerm) != rank {
			return nil, false, nil
		}
		fshape := make([]int, rank)
		for k, p := range a.outPerm {
			fshape[k] = oshape[p]
		}
		if y, err = r.alloc(fshape); err != nil {
			return nil, false, err
		}
		cs := contiguous(fshape)
		yst = make([]int64, rank)
		for k, p := range a.outPerm {
			yst[p] = cs[k]
		}
	} else {
		if y, err = r.alloc(oshape); err != nil {
			return nil, false, err
		}
		yst = contiguous(oshape)
	}
	// Batch axes: (batch, head) = (0, 1) at rank 4, (0, -) at rank 3, none at rank 2. A
	// broadcast batch axis of K or V reads with stride 0.
	pick := func(s []int64, sh []int) [4]int64 {
		var o [4]int64
		o[2], o[3] = s[rank-2], s[rank-1]
		for ax := 0; ax < rank-2; ax++ {
			if sh != nil && sh[ax] == 1 && batch[ax] != 1 {
				continue
			}
			o[ax] = s[ax]
		}
		return o
	}
	d := attDesc{nq: int64(nq), nk: int64(nk), dh: int64(dk), scale: a.scale, heads: 1, bh: int64(graph.NumElements(batch))}
	if rank == 4 {
		d.heads = int64(batch[1])
	}
	d.st[0] = pick(st[0], shape[0])
	d.st[1] = pick(st[1], shape[1])
	d.st[2] = pick(st[2], shape[2])
	d.st[3] = pick(yst, nil)
	bp := [2]uint64{}
	for i := range a.bias {
		d.st[4+i] = pick(bst[i], nil)
		bp[i] = bias[i].buf.ptr
		d.nbias++
	}
	kernel, grid, block := "zoo_attention", 0, 128
	tiled := dk == 32 || dk == 64
	for k := 0; k < 4 && tiled; k++ {
		for j := 0; j < 3; j++ {
			tiled = tiled && d.st[k][j]%4 == 0
		}
	}
	switch {
	case tiled && r.p.precision == "bf16":
		// bf16 products on the tensor cores, as the precision asks of every matrix product.
		kernel, block = fmt.Sprintf("zoo_attention_bf16_d%d", dk), 256
		grid = int(min(d.bh*((d.nq+127)/128), 1<<20))
	case tiled:
		kernel = fmt.Sprintf("zoo_attention_t%d", dk)
		grid = int(min(d.bh*((d.nq+63)/64), 1<<20))
	default:
		grid = int(min((d.bh*d.nq+3)/4, 1<<20))
	}
	args := (&kargs{}).ptr(y.buf.ptr).ptr(x[0].buf.ptr).ptr(x[1].buf.ptr).ptr(x[2].buf.ptr).ptr(bp[0]).ptr(bp[1]).put(8, d.pack())
	if err := r.launch(kernel, grid, block, args); err != nil {
		r.releaseBuf(y.buf)
		return nil, false, err
	}
	r.p.attnKernels[kernel]++
	return one(y), true, nil
}

// fallback runs the steps the fused step replaced.
func (a *attention) fallback(r *run, in []value) ([]value, error) {
	local := make(map[int]value, len(a.in)+len(a.sub))
	for i, s := range a.in {
		local[s] = in[i]
	}
	var made []int
	releaseMade := func() {
		for _, s := range made {
			r.release(local[s])
		}
	}
	for i := range a.sub {
		st := &a.sub[i]
		ins := make([]value, len(st.In))
		for j, s := range st.In {
			if s >= 0 {
				ins[j] = local[s]
			}
		}
		res, err := r.step(st, ins)
		if err != nil {
			releaseMade()
			return nil, fmt.Errorf("node %q (%s): %w", st.Node.Name, st.Node.Op, err)
		}
		for j, s := range st.Out {
			if j >= len(res) {
				break
			}
			if s < 0 {
				r.release(res[j])
				continue
			}
			local[s] = res[j]
			made = append(made, s)
		}
	}
	out, ok := local[a.out]
	if !ok {
		releaseMade()
		return nil, fmt.Errorf("the unfused attention did not produce %s", r.p.plan.Slots[a.out])
	}
	made = slices.DeleteFunc(made, func(s int) bool { return s == a.out })
	releaseMade()
	r.p.attnKernels["unfused"]++
	return []value{out}, nil
}
