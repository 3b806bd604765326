// Package cpu is zoo's reference CPU backend: a pure-Go implementation of every operator in
// the graph IR with ONNX opset-17 semantics, multi-threaded across cores, with matrix
// products delegated to the SGEMM kernels of package gemm. It registers itself as "cpu".
package cpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Name is the name the backend registers under.
const Name = "cpu"

// Priority is the CPU backend's automatic-selection priority (accelerators rank higher).
const Priority = 10

// ThreadsEnv is the environment variable that overrides the default worker count.
const ThreadsEnv = env.Threads

// ApplyEnv sets the SIMD kernel level of the backend from ZOO_CPU (internal/env); unset or
// empty selects the best level this CPU runs. The error names the variable and says why:
// an unknown level, or one this CPU lacks (ZOO_CPU=avx512 without AVX-512). No package
// reads ZOO_CPU at initialisation; a program calls this once at start-up.
func ApplyEnv() error { return simd.ApplyEnv() }

// Levels returns the SIMD kernel levels this CPU and build run, best first ("generic" last).
func Levels() []string {
	var names []string
	for _, l := range simd.Available() {
		names = append(names, l.String())
	}
	return names
}

func init() { backends.Register(Backend{}) }

// Backend is the CPU backend. The zero value is ready to use.
type Backend struct{}

// Name returns "cpu".
func (Backend) Name() string { return Name }

// Probe reports the CPU model, the core count, the SGEMM kernel level and the worker count.
// The CPU backend is always available.
func (Backend) Probe() backends.Probe {
	return backends.Probe{
		Available: true,
		Level:     simd.Current().String(),
		Device:    deviceName(),
		Threads:   DefaultThreads(),
		Priority:  Priority,
	}
}

// DefaultThreads returns the worker count programs use when Options.Threads is 0: the value
// of ZOO_THREADS when it is a positive integer, else runtime.GOMAXPROCS(0) (the CLI refuses
// other values at start-up).
func DefaultThreads() int {
	if n, _, err := env.Int(ThreadsEnv); err == nil && n > 0 {
		return min(n, workpool.MaxThreads)
	}
	return runtime.GOMAXPROCS(0)
}

var (
	deviceOnce sync.Once
	deviceStr  string
)

// deviceName returns "<cores> cores, <model name>" (see CPUModel).
func deviceName() string {
	deviceOnce.Do(func() {
		model := CPUModel()
		cores := runtime.NumCPU()
		unit := "cores"
		if cores == 1 {
			unit = "core"
		}
		deviceStr = fmt.Sprintf("%d %s, %s", cores, unit, model)
	})
	return deviceStr
}

// Compile validates g, checks that every op is supported, folds the nodes whose inputs are
// all constant (initializers, Constant nodes, Shape of statically shaped inputs), plans when
// each intermediate buffer can be released, and returns a Program. Options.Threads > 0 sets
// the worker count (default: Probe().Threads).
func (Backend) Compile(g *graph.Graph, opts backends.Options) (backends.Program, error) {
	return compile(g, opts)
}

// slotKind says where a value comes from.
type slotKind uint8

const (
	slotNode  slotKind = iota // produced by a node at run time
	slotInput                 // a graph input
	slotConst                 // an initializer or a folded constant
)

// step is one node that runs at run time.
type step struct {
	node *graph.Node
	k    kernel
	in   []int // slot per input; -1 for an omitted optional input
	out  []int // slot per output; -1 for an unnamed output
	free []int // slots whose last use is this step
}

// Program is a compiled graph for the CPU backend. Run may be called from one goroutine at
// a time; Close is optional (the worker pool is shared) but makes later Runs fail.
type Program struct {
	name    string
	threads int
	slots   []string // value name per slot
	kinds   []slotKind
	consts  []*tensor.Tensor // per slot, set for slotConst
	inputs  []graph.ValueInfo
	inSlot  []int
	steps   []step
	outputs []string // graph outputs then kept intermediates, without duplicates
	outSlot []int
	closed  bool
	pool    *bufPool       // recycles activation buffers across the steps of a Run
	fusions map[string]int // fused patterns found at compile time, by kind
}

func compile(g *graph.Graph, opts backends.Options) (*Program, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: compile graph: %w", err)
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = DefaultThreads()
	}
	if threads > workpool.MaxThreads {
		threads = workpool.MaxThreads
	}
	p := &Program{name: g.Name, threads: threads, inputs: g.Inputs, pool: newBufPool(), fusions: map[string]int{}}
	slotOf := map[string]int{}
	newSlot := func(name string, kind slotKind) int {
		s := len(p.slots)
		slotOf[name] = s
		p.slots = append(p.slots, name)
		p.kinds = append(p.kinds, kind)
		p.consts = append(p.consts, nil)
		return s
	}
	for _, in := range g.Inputs {
		p.inSlot = append(p.inSlot, newSlot(in.Name, slotInput))
	}
	for _, in := range g.Initializers {
		s := newSlot(in.Name, slotConst)
		p.consts[s] = in.Tensor
	}
	// staticShape holds the compile-time shapes of graph inputs whose dims are all known.
	staticShape := map[string][]int{}
	for _, in := range g.Inputs {
		if in.Shape == nil {
			continue
		}
		shape := make([]int, len(in.Shape))
		ok := true
		for i, d := range in.Shape {
			if !d.Known() {
				ok = false
				break
			}
			shape[i] = int(d.Size)
		}
		if ok {
			staticShape[in.Name] = shape
		}
	}
	fold := &exec{threads: threads}
	for i, n := range g.Nodes {
		mk, ok := opTable[n.Op]
		if !ok {
			return nil, &backends.UnsupportedOpError{Backend: Name, Op: n.Op, Node: n.Name, Detail: "no CPU kernel"}
		}
		k, err := mk(n)
		if err != nil {
			if u, ok := err.(*backends.UnsupportedOpError); ok {
				u.Backend, u.Op, u.Node = Name, n.Op, n.Name
				return nil, u
			}
			return nil, fmt.Errorf("cpu: compile node %d (%s %q): %w", i, n.Op, n.Name, err)
		}
		st := step{node: n, k: k}
		constIn := true
		var ins []*tensor.Tensor
		for _, name := range n.Inputs {
			if name == "" {
				st.in = append(st.in, -1)
				ins = append(ins, nil)
				continue
			}
			s := slotOf[name]
			st.in = append(st.in, s)
			if p.kinds[s] != slotConst {
				constIn = false
			}
			ins = append(ins, p.consts[s])
		}
		// Shape of an input with a fully static shape is a constant too.
		if n.Op == "Shape" && !constIn {
			if shape, ok := staticShape[n.Inputs[0]]; ok {
				constIn = true
				ins = []*tensor.Tensor{{DType: tensor.Float32, Shape: shape}}
			}
		}
		if constIn {
			outs, err := fold.call(k, n, ins)
			if err != nil {
				return nil, fmt.Errorf("cpu: compile node %d (%s %q): fold constant: %w", i, n.Op, n.Name, err)
			}
			for j, name := range n.Outputs {
				if name == "" {
					continue
				}
				s := newSlot(name, slotConst)
				if j < len(outs) {
					p.consts[s] = outs[j]
				}
			}
			continue
		}
		for _, name := range n.Outputs {
			if name == "" {
				st.out = append(st.out, -1)
				continue
			}
			st.out = append(st.out, newSlot(name, slotNode))
		}
		p.steps = append(p.steps, st)
	}
	seen := map[string]bool{}
	for _, o := range g.Outputs {
		if !seen[o.Name] {
			seen[o.Name] = true
			p.outputs = append(p.outputs, o.Name)
		}
	}
	for _, name := range opts.KeepIntermediates {
		if _, ok := slotOf[name]; !ok {
			return nil, fmt.Errorf("cpu: compile graph %s: kept intermediate %q is not a value of the graph", g.Name, name)
		}
		if !seen[name] {
			seen[name] = true
			p.outputs = append(p.outputs, name)
		}
	}
	for _, name := range p.outputs {
		p.outSlot = append(p.outSlot, slotOf[name])
	}
	if !opts.NoFusion {
		p.fuseOrNot()
	}
	p.planFrees()
	// Drop constants that no run-time step or output needs (inputs of folded nodes).
	needed := make([]bool, len(p.slots))
	for _, st := range p.steps {
		for _, s := range st.in {
			if s >= 0 {
				needed[s] = true
			}
		}
	}
	for _, s := range p.outSlot {
		needed[s] = true
	}
	for s := range p.consts {
		if !needed[s] {
			p.consts[s] = nil
		}
	}
	return p, nil
}

// fuseOrNot runs the fusion passes and, should one of them panic on a graph its matchers
// did not foresee (a bug), keeps the program unfused instead: fusion only ever speeds a
// graph up, and the unfused steps accept whatever the graph's kernels accept. The passes
// replace steps and their fields, never the elements of a step's slices, so the saved
// step list is the program as it was.
func (p *Program) fuseOrNot() {
	saved := append([]step(nil), p.steps...)
	defer func() {
		if r := recover(); r != nil {
			p.steps, p.fusions = saved, map[string]int{}
		}
	}()
	p.fuse()
}

// planFrees records, for each step, the run-time values whose last consumer it is, so Run
// can release intermediate buffers as early as possible. Outputs and kept values are never
// released; a value nothing reads is released right after the step that makes it.
func (p *Program) planFrees() {
	last := backends.LastUses(len(p.slots), len(p.steps), func(i int) ([]int, []int) { return p.steps[i].in, p.steps[i].out })
	keep := make([]bool, len(p.slots))
	for _, s := range p.outSlot {
		keep[s] = true
	}
	for s, l := range last {
		if l >= 0 && p.kinds[s] == slotNode && !keep[s] {
			p.steps[l].free = append(p.steps[l].free, s)
		}
	}
}

// Threads returns the number of worker threads the program uses.
func (p *Program) Threads() int { return p.threads }

// Close releases the program; later calls to Run fail.
func (p *Program) Close() error {
	p.closed = true
	return nil
}

// Run checks inputs against the graph's declared inputs, executes the nodes in order
// (stopping between nodes when ctx is cancelled) and returns the graph outputs and the kept
// intermediates by name. Returned tensors never share memory with inputs or initializers.
func (p *Program) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (out map[string]*tensor.Tensor, err error) {
	if p.closed {
		return nil, fmt.Errorf("cpu: run graph %s: program is closed", p.name)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := backends.CheckInputs("cpu", p.name, p.inputs, inputs); err != nil {
		return nil, err
	}
	vals := make([]*tensor.Tensor, len(p.slots))
	copy(vals, p.consts)
	for i, in := range p.inputs {
		vals[p.inSlot[i]] = inputs[in.Name]
	}
	cur := -1
	defer func() {
		if r := recover(); r != nil {
			where := "graph " + p.name
			if cur >= 0 {
				n := p.steps[cur].node
				where = fmt.Sprintf("node %q (%s)", n.Name, n.Op)
			}
			out, err = nil, fmt.Errorf("cpu: %s: internal error: %v", where, r)
		}
	}()
	e := &exec{threads: p.threads, pool: p.pool}
	defer p.pool.endRun()
	ins := make([]*tensor.Tensor, 0, 8)
	for i := range p.steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: run graph %s: stopped before node %q: %w", p.name, p.steps[i].node.Name, err)
		}
		cur = i
		st := &p.steps[i]
		ins = ins[:0]
		for _, s := range st.in {
			if s < 0 {
				ins = append(ins, nil)
			} else {
				ins = append(ins, vals[s])
			}
		}
		res, err := e.call(st.k, st.node, ins)
		if err != nil {
			return nil, fmt.Errorf("cpu: run node %q (%s): %w", st.node.Name, st.node.Op, err)
		}
		for j, s := range st.out {
			if s >= 0 {
				if j >= len(res) || res[j] == nil {
					return nil, fmt.Errorf("cpu: run node %q (%s): output %d was not produced", st.node.Name, st.node.Op, j)
				}
				vals[s] = res[j]
				p.pool.retain(res[j])
			}
		}
		for _, s := range st.free {
			p.pool.release(vals[s])
			vals[s] = nil
		}
	}
	cur = -1
	out = make(map[string]*tensor.Tensor, len(p.outputs))
	owned := map[any]bool{}
	for i, name := range p.outputs {
		s := p.outSlot[i]
		t := vals[s]
		if t == nil {
			return nil, fmt.Errorf("cpu: run graph %s: output %q was not computed", p.name, name)
		}
		p.pool.disown(t)
		// Hand out private memory: clone values that live in inputs or initializers, and
		// values that share storage with an output already returned.
		key := dataKey(t)
		if p.kinds[s] != slotNode || (key != nil && owned[key]) || aliasesInput(t, inputs) {
			t = t.Clone()
		} else if key != nil {
			owned[key] = true
		}
		out[name] = t
	}
	return out, nil
}

// dataKey identifies a tensor's storage by the address of its first element (nil when
// empty). Views made by the CPU kernels always start at their source's first element.
func dataKey(t *tensor.Tensor) any {
	switch {
	case len(t.F32) > 0:
		return &t.F32[0]
	case len(t.I64) > 0:
		return &t.I64[0]
	case len(t.Bool) > 0:
		return &t.Bool[0]
	}
	return nil
}

// aliasesInput reports whether t shares storage with a caller-provided input.
func aliasesInput(t *tensor.Tensor, inputs map[string]*tensor.Tensor) bool {
	k := dataKey(t)
	if k == nil {
		return false
	}
	for _, in := range inputs {
		if in != nil && dataKey(in) == k {
			return true
		}
	}
	return false
}

// exec carries per-run state into gemm.
type exec struct {
	threads int
	pool    *bufPool // nil at compile time (constant folding): plain allocation
}

// call runs kernel k for node n with inputs ins, turning a kernel panic (a bug, or an input
// the kernel failed to check) into an error.
func (e *exec) call(k kernel, n *graph.Node, ins []*tensor.Tensor) (outs []*tensor.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	return k(e, ins)
}
