package cpu

import (
	"fmt"

	"slices"
	"sort"

	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Graph fusion, run once at compile time after constant folding.
//
// Three patterns are rewritten into single steps, and then linear steps that share their
// only input (an attention block's Q, K and V projections) are merged into one:
//
//   - linear: MatMul(x, W) with a constant 2-D W (a folded Transpose of the initializer, so
//     no per-run copy), then Add of a constant bias over the last axis, optionally followed
//     by Relu or by the exact GELU as zoo builds it (Mul(Mul(h, 0.5), Add(Erf(Div(h, √2)), 1)))
//     or as PyTorch exports it (Mul(Mul(h, Add(Erf(Div(h, √2)), 1)), 0.5)); or Gemm(x, W, b)
//     with a constant W (either orientation) and a constant bias row, as PyTorch exports the
//     attention output projection. The fused step runs the GEMM and applies bias and
//     activation to each output tile while it is in cache.
//   - attention: MatMul(Q, Kᵀ), then any chain of scalings (Mul or Div by a scalar or a
//     broadcast tensor), additive biases and masks (Add, Sub, Where(mask, s, const)), then
//     Softmax over the last axis, then MatMul with V, whatever the node names; scalings of
//     Q or Kᵀ before the product, and the Transposes of head splits and merges, join it
//     (fuse_attention.go). The fused step is the tiled online-softmax kernel of
//     attention.go, which never materialises the n×n score matrix. A relative-position bias
//     built from Range positions (ALiBi's slope·|j − i|, T5's bucketed table) is computed
//     in the kernel from its compact form and its n×n steps dropped (fuse_relbias.go).
//   - permuted residual: Add of a run-time value and a Transpose that keeps the last axis,
//     optionally followed by LayerNormalization, as PyTorch's batch-first attention block
//     ends; one pass over rows reads the transposed rows in place.
//
// A pattern fuses only when every intermediate value has exactly one consumer and is not a
// graph output or kept intermediate, so fusion never changes what Run returns. Each fused
// step keeps the original steps it replaced and runs them instead whenever the run-time
// shapes fall outside what its fast path handles, so fusion never rejects a graph the
// unfused program accepts.

// Fusions reports the patterns fused at compile time and how often each was found:
// "linear", "linear+relu", "linear+gelu" (each also with "+residual" when an Add of
// another run-time value follows, and then "+layernorm" when a LayerNormalization of the
// sum follows), "matmul" (a product by a constant matrix with no bias, with the same
// "+residual" and "+layernorm" suffixes) and "attention"
// ("attention+relbias" counts those among them that compute a relative bias themselves,
// "attention+causal" those that apply a causal mask themselves);
// "transpose+residual" (and "transpose+residual+layernorm") counts residual Adds of a
// transposed value, with the LayerNorm after them, run as one pass over rows;
// "shared-input" counts the groups of such linear steps (without a residual) that read the
// same value and run as one step, each layer still counted under its own kind; "layernorm"
// counts LayerNorms written out in elementary ops and recomposed into one step, "shape"
// Shape steps that read a Transpose's input instead of running it, and "split" linear steps
// whose output slices are written directly instead of copied out, and "softmax-backward"
// autodiff's softmax gradient run as one pass per row (fuse_softmax_grad.go);
// "attention-train" a training step's attention, forward and backward, run as two tiled
// steps that keep row log-sum-exps instead of the probabilities (fuse_attention_grad.go);
// "random-features" (FAVOR+'s feature maps), "elu-feature" (elu + 1 feature maps) and
// "linear-attention" (A·(Bᵀ·V) normalised by A·Σ_j B_j) are kernelized attention
// (fuse_kernelized.go), "linear-attention+features" counting the feature maps of A a linear
// attention computes itself; "elementwise" chains of Add, Sub, Mul and Div run as one pass
// (fuse_elementwise.go); "runtime-linear" (with "+bias" and "+bias+relu") counts linear
// layers whose weight is a run-time value, as in a training step, run as one packed product
// with its epilogue (fuse_runtime_linear.go), and "runtime-gemm" Gemms of two run-time
// matrices (a training step's input gradients) run the same way; "layernorm-backward"
// autodiff's LayerNorm gradient (dx, dγ, dβ) run as one pass per row (fuse_norm_grad.go);
// "relu-backward" Where(Greater(y, 0), dy, 0) as one pass (fuse_relu_grad.go); "int8-dynamic",
// "int8-qdq", "int8-qlinear" and "int8-matmulinteger" count the layers of imported quantized
// graphs run on the int8 kernels (fuse_quantized.go); an int8 program counts its constant
// tables held as int8 rows under "int8-table" (int8_tables.go), and an int8-attention program
// the products by a Slice of one, linformer's E[:, :n]·K, run in int8 under
// "int8-projection" (int8_projection.go) and the random-feature maps whose projection it
// holds as int8 under "int8-feature-map" (Program.packProjection). It is empty when
// backends.Options.NoFusion was set (an int8 program then counts only its products by
// constant matrices, "matmul" and "linear": int8Products) or nothing matched.
func (p *Program) Fusions() map[string]int {
	out := make(map[string]int, len(p.fusions))
	for k, v := range p.fusions {
		out[k] = v
	}
	return out
}

// fuser holds the use counts of one fusion pass.
type fuser struct {
	p        *Program
	uses     []int // consumers per slot; outputs count as an extra (unfusable) use
	producer []int // step index that produces each slot, -1 otherwise
	consumer [][]int
	dead     []bool
	linears  []fusedLinear // fused linear steps whose only run-time input is x, in order
	// relBiases counts the attention steps that compute a relative-position bias themselves,
	// causals those that apply a causal mask themselves (fuse_causal.go).
	relBiases, causals int
	// productOnly limits matchLinear to the product itself (a Gemm with its own C): no
	// bias Add, activation, residual or LayerNorm joins it (int8Products).
	productOnly bool
	// features holds the matched random-feature maps by output slot (fuse_kernelized.go).
	features map[int]*featureFusion
}

// fusedLinear is a fused linear step with no input besides x, scheduled at step index at.
type fusedLinear struct {
	at   int
	x    int
	spec *linearSpec
	st   step
}

// fuseAt offers every live step of op to match in order and commits each group it returns,
// counting it under the kind match names, or under kind when match names none.
func (f *fuser) fuseAt(op, kind string, replaced map[int]step, match func(i int) ([]int, step, string, bool)) {
	for i := range f.p.plan.Steps {
		if f.dead[i] || f.p.plan.Steps[i].Node.Op != op {
			continue
		}
		if g, st, k, ok := match(i); ok {
			f.commit(g, st, replaced)
			if k == "" {
				k = kind
			}
			f.p.fusions[k]++
		}
	}
}

// kindless adapts a matcher of one fusion kind to fuseAt.
func kindless(match func(i int) ([]int, step, bool)) func(i int) ([]int, step, string, bool) {
	return func(i int) ([]int, step, string, bool) {
		g, st, ok := match(i)
		return g, st, "", ok
	}
}

// int8ProductsOrNot runs int8Products as fuseOrNot runs fuse: should it panic, the program
// stays as it was.
func (p *Program) int8ProductsOrNot() {
	saved := append([]step(nil), p.plan.Steps...)
	defer func() {
		if r := recover(); r != nil {
			p.plan.Steps, p.fusions, p.notes, p.packed = saved, map[string]int{}, nil, nil
		}
	}()
	p.int8Products()
}

// int8Products is what an int8 program compiled with NoFusion keeps of the fusions: every
// MatMul or Gemm by a constant matrix runs on its int8 weights (matchLinear with
// productOnly), a Gemm with its own bias; each counts as "matmul" or "linear" in Fusions.
// Everything around the products runs as its own step, as NoFusion asks.
func (p *Program) int8Products() {
	readers, producer, output := p.stepGraph()
	f := &fuser{p: p, uses: make([]int, len(p.plan.Slots)), producer: producer, consumer: readers, dead: make([]bool, len(p.plan.Steps)), productOnly: true}
	for s, rs := range readers {
		f.uses[s] = len(rs)
		if output[s] {
			f.uses[s] += 1 << 20
		}
	}
	replaced := map[int]step{}
	for i := range p.plan.Steps {
		if op := p.plan.Steps[i].Node.Op; f.dead[i] || (op != "MatMul" && op != "Gemm") {
			continue
		}
		if g, st, kind, ok := f.matchLinear(i); ok {
			f.commit(g, st, replaced)
			p.fusions[kind]++
		}
	}
	p.rebuild(replaced, f.dead)
}

func (p *Program) fuse() {
	p.shapesThroughTransposes()
	p.recomposeLayerNorms()
	readers, producer, output := p.stepGraph()
	f := &fuser{p: p, uses: make([]int, len(p.plan.Slots)), producer: producer, consumer: readers, dead: make([]bool, len(p.plan.Steps))}
	for s, rs := range readers {
		f.uses[s] = len(rs)
		if output[s] {
			f.uses[s] += 1 << 20
		}
	}
	replaced := map[int]step{} // index of a group's last step → the fused step
	f.fuseAttentionTraining(replaced)
	for i := range p.plan.Steps {
		if f.dead[i] || p.plan.Steps[i].Node.Op != "Softmax" {
			continue
		}
		note := FusionNote{Pattern: "attention", Node: p.plan.Steps[i].Node.Name, Op: "Softmax"}
		rel, causal := f.relBiases, f.causals
		if g, st, why := f.matchAttention(i); why == "" {
			f.commit(g, st, replaced)
			p.fusions["attention"]++
			note.Fused = "attention"
			if st.Node.Op == "FusedAttention" && f.relBiases > rel {
				p.fusions["attention+relbias"]++
				note.Fused = "attention+relbias"
			}
			if st.Node.Op == "FusedAttention" && f.causals > causal {
				p.fusions["attention+causal"]++
			}
		} else {
			note.Why = why
		}
		p.notes = append(p.notes, note)
	}
	f.fuseAt("ReduceSum", "softmax-backward", replaced, kindless(f.matchSoftmaxGrad))
	f.fuseKernelized(replaced) // before the linears take its feature projections (fuse_kernelized.go)
	f.fuseAt("Where", "relu-backward", replaced, kindless(f.matchReluGrad))
	f.fuseAt("ReduceMean", "layernorm-backward", replaced, kindless(f.matchLayerNormGrad))
	f.fuseQuantized(replaced) // imported int8 layers, before the fp32 linears take QDQ MatMuls
	f.fuseAt("MatMul", "", replaced, f.matchRuntimeLinear)
	f.fuseAt("Gemm", "runtime-gemm", replaced, kindless(f.matchRuntimeGemm))
	for i := range p.plan.Steps {
		if op := p.plan.Steps[i].Node.Op; f.dead[i] || (op != "MatMul" && op != "Gemm") {
			continue
		}
		note := FusionNote{Pattern: "linear", Node: p.plan.Steps[i].Node.Name, Op: p.plan.Steps[i].Node.Op}
		if g, st, kind, ok := f.matchLinear(i); ok {
			f.commit(g, st, replaced)
			p.fusions[kind]++
			note.Fused = kind
		} else {
			note.Why = f.linearWhyNot(i)
		}
		p.notes = append(p.notes, note)
	}
	// After the linears, so that a residual Add a linear step can absorb stays with it.
	for i := range p.plan.Steps {
		if f.dead[i] || p.plan.Steps[i].Node.Op != "Add" {
			continue
		}
		if g, st, kind, ok := f.matchPermutedResidual(i); ok {
			f.commit(g, st, replaced)
			p.fusions[kind]++
		}
	}
	f.fuseAt("Add", "rotary", replaced, kindless(f.matchRotary)) // before the chains take its Mul+Add
	f.fuseElementwise(replaced)
	f.splitSlices(replaced)
	f.mergeSiblings(replaced)
	p.rebuild(replaced, f.dead)
	if f.relBiases > 0 || f.causals > 0 {
		p.dropUnread()
	}
}

// linearWhyNot says why the MatMul or Gemm step i did not fuse as a linear layer.
func (f *fuser) linearWhyNot(i int) string {
	in := f.p.plan.Steps[i].In
	switch {
	case len(in) < 2 || !f.runtime(in[0]):
		return "its left operand is not a run-time value"
	case f.constF32(in[1]) == nil:
		return "its right operand is a run-time value, not a constant weight matrix"
	case len(f.constF32(in[1]).Shape) != 2:
		return fmt.Sprintf("its weight has rank %d, not 2", len(f.constF32(in[1]).Shape))
	}
	return "its attributes or bias (Gemm's transA, alpha, beta, C) are outside the fused linear's"
}

// stepGraph returns, per slot, the steps that read it (once per input position), the step
// that produces it (-1 for none) and whether it is a graph output or a kept value.
func (p *Program) stepGraph() (readers [][]int, producer []int, output []bool) {
	readers, producer, output = make([][]int, len(p.plan.Slots)), make([]int, len(p.plan.Slots)), make([]bool, len(p.plan.Slots))
	for i := range producer {
		producer[i] = -1
	}
	for i, st := range p.plan.Steps {
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
	for _, s := range p.plan.OutSlot {
		output[s] = true
	}
	return readers, producer, output
}

// rebuild sets p.steps to the steps in order with replace[i] in place of step i where it
// is set, and without step i where drop[i] holds (and no replacement is set).
func (p *Program) rebuild(replace map[int]step, drop []bool) {
	if len(replace) == 0 && !slices.Contains(drop, true) {
		return
	}
	steps := make([]step, 0, len(p.plan.Steps))
	for i, st := range p.plan.Steps {
		if r, ok := replace[i]; ok {
			steps = append(steps, r)
		} else if !drop[i] {
			steps = append(steps, st)
		}
	}
	p.plan.Steps = steps
}

// commit marks the group's steps dead and schedules the fused step at the group's last
// position (where every external input is already computed).
func (f *fuser) commit(group []int, st step, replaced map[int]step) {
	last := 0
	for _, i := range group {
		f.dead[i] = true
		last = max(last, i)
	}
	replaced[last] = st
}

// single reports whether slot s is a run-time value read by exactly one step (and is not an
// output), returning that step.
func (f *fuser) single(s int) (int, bool) {
	if s < 0 || f.p.plan.Kinds[s] != slotNode || f.uses[s] != 1 {
		return -1, false
	}
	c := f.consumer[s][0]
	return c, !f.dead[c]
}

// constF32 returns the constant float32 tensor in slot s, or nil.
func (f *fuser) constF32(s int) *tensor.Tensor {
	if s < 0 || f.p.plan.Kinds[s] != slotConst {
		return nil
	}
	t := f.p.plan.Consts[s]
	if t == nil || t.DType != tensor.Float32 {
		return nil
	}
	return t
}

// scalarConst returns the value of a one-element constant float32 slot.
func (f *fuser) scalarConst(s int) (float32, bool) {
	t := f.constF32(s)
	if t == nil || len(t.F32) != 1 {
		return 0, false
	}
	return t.F32[0], true
}

// otherInput returns the input of binary step i (one output) that is not slot s, whether s
// is input 0, and whether s is an input at all.
func (p *Program) otherInput(i, s int) (int, bool, bool) {
	in := p.plan.Steps[i].In
	if len(in) != 2 || len(p.plan.Steps[i].Out) != 1 {
		return -1, false, false
	}
	switch s {
	case in[0]:
		return in[1], true, true
	case in[1]:
		return in[0], false, true
	}
	return -1, false, false
}

// outOf returns the single output slot of step i.
func (f *fuser) outOf(i int) int {
	if len(f.p.plan.Steps[i].Out) != 1 {
		return -1
	}
	return f.p.plan.Steps[i].Out[0]
}

// newFused builds the fused step for group: its external inputs are ext (in order), its
// output is out, and it falls back to the group's own steps.
func (f *fuser) newFused(op string, group []int, ext []int, out int, fast fastKernel, override map[int]func() *tensor.Tensor) step {
	sort.Ints(group)
	sub := make([]step, len(group))
	for j, i := range group {
		sub[j] = f.p.plan.Steps[i]
	}
	last := f.p.plan.Steps[group[len(group)-1]].Node
	node := &graph.Node{Op: op, Name: last.Name, Inputs: make([]string, len(ext)), Outputs: []string{f.p.plan.Slots[out]}}
	for j, s := range ext {
		node.Inputs[j] = f.p.plan.Slots[s]
	}
	fb := &fallback{ext: ext, out: out, sub: sub, consts: f.p.constInputs(sub, override)}
	k := func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if t, ok, err := fast(e, in); ok || err != nil {
			return []*tensor.Tensor{t}, err
		}
		return fb.run(e, in)
	}
	return step{Node: node, Kernel: k, In: append([]int(nil), ext...), Out: []int{out}, Covers: compile.CoversOf(sub)}
}

// fastKernel is a fused fast path: it returns ok false (and no error) when the run-time
// shapes are outside what it handles, and the fused step then runs the original steps.
type fastKernel func(e *exec, in []*tensor.Tensor) (out *tensor.Tensor, ok bool, err error)

// fallback re-runs the steps a fused step replaced. consts supplies the constant inputs of
// those steps: the compiled program drops every constant no step of its own reads, and a
// large one (a layer's weights) is better rebuilt from its packed copy on the rare run that
// needs it than kept twice.
type fallback struct {
	ext    []int
	out    int
	more   []int // further results, for a step with several (newFusedMulti)
	sub    []step
	consts map[int]func() *tensor.Tensor
}

// constInputs returns a supplier for every constant slot the steps read: the tensor itself,
// or override's supplier where it has one.
func (p *Program) constInputs(sub []step, override map[int]func() *tensor.Tensor) map[int]func() *tensor.Tensor {
	out := map[int]func() *tensor.Tensor{}
	for _, st := range sub {
		for _, s := range st.In {
			if s < 0 || p.plan.Kinds[s] != slotConst || out[s] != nil {
				continue
			}
			if o := override[s]; o != nil {
				out[s] = o
			} else {
				t := p.plan.Consts[s]
				out[s] = func() *tensor.Tensor { return t }
			}
		}
	}
	return out
}

func (fb *fallback) run(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	vals, err := fb.values(e, in)
	if err != nil {
		return nil, err
	}
	res := []*tensor.Tensor{vals[fb.out]}
	for _, s := range fb.more {
		res = append(res, vals[s])
	}
	return res, nil
}

// values runs the steps on the external inputs in and returns every value they read or
// compute by slot (a fused step with several outputs picks its own).
func (fb *fallback) values(e *exec, in []*tensor.Tensor) (map[int]*tensor.Tensor, error) {
	vals := make(map[int]*tensor.Tensor, len(fb.ext)+len(fb.sub))
	for j, s := range fb.ext {
		vals[s] = in[j]
	}
	for _, st := range fb.sub {
		ins := make([]*tensor.Tensor, len(st.In))
		for j, s := range st.In {
			if s < 0 {
				continue
			}
			if _, ok := vals[s]; !ok && fb.consts[s] != nil {
				vals[s] = fb.consts[s]()
			}
			ins[j] = vals[s]
		}
		res, err := e.call(st.Kernel, st.Node, ins)
		if err != nil {
			return nil, fmt.Errorf("node %q (%s): %w", st.Node.Name, st.Node.Op, err)
		}
		for j, s := range st.Out {
			if s >= 0 && j < len(res) {
				vals[s] = res[j]
			}
		}
	}
	return vals, nil
}
