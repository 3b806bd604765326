// Package compile is the compile step every backend shares. Compile lowers a graph.Graph to
// a Plan: one slot per value, the initializers as constants, the nodes whose inputs are all
// constant folded through the backend's evaluator (Shape of a statically shaped input
// included), the outputs without duplicates and the kept intermediates checked, the
// backend's fusions applied, and for every step the values whose last reader it is (so a
// backend releases each intermediate buffer right after it). Constants that no step or
// output reads any more are dropped.
//
// A backend supplies only what is its own (Config): a kernel for each node (Config.Kernel,
// which also says that an op is unsupported), an evaluator for folding (Config.Fold) and,
// optionally, fusion passes over the plan (Config.Fuse). It then runs Plan.Steps in order.
// A new backend starts here rather than from a copy of another backend's compile function:
// graph.EvalNode is an evaluator any backend can fold with (the CUDA backend does, see its
// planConfig), while the CPU backend folds with its own kernels (cpu's newProgram). Fusions
// stay in the backend that has the fused kernels; what changes here changes every backend.
package compile

import (
	"errors"
	"fmt"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// SlotKind says where a slot's value comes from.
type SlotKind uint8

const (
	SlotNode  SlotKind = iota // computed by a step at run time
	SlotInput                 // a graph input
	SlotConst                 // an initializer or a folded constant
)

// Step is one node that runs at run time, with the kernel the backend made for it.
type Step[K any] struct {
	Node   *graph.Node
	Kernel K
	In     []int // slot per input; -1 for an omitted optional input
	Out    []int // slot per output; -1 for an unnamed output
	Free   []int // slots whose last use is this step (never an output or a constant)
	// Covers lists, for a fused step, the graph nodes whose work it does, in the order it
	// replaced them (a profile charges their FLOPs to it); nil for a step that runs its own Node.
	Covers []*graph.Node
}

// Nodes returns the graph nodes whose work the step does: Covers for a fused step, else
// its own Node.
func (s *Step[K]) Nodes() []*graph.Node {
	if s.Covers != nil {
		return s.Covers
	}
	return []*graph.Node{s.Node}
}

// CoversOf returns the graph nodes that steps do between them, in order (each step's
// Nodes), for a fused step made of them.
func CoversOf[K any](steps []Step[K]) []*graph.Node {
	var out []*graph.Node
	for i := range steps {
		out = append(out, steps[i].Nodes()...)
	}
	return out
}

// Plan is a compiled graph: value slots and the steps that run, in order.
type Plan[K any] struct {
	Name    string
	Slots   []string         // value name per slot
	Kinds   []SlotKind       // per slot
	Consts  []*tensor.Tensor // per slot: the value of a SlotConst still needed, else nil
	Inputs  []graph.ValueInfo
	InSlot  []int // slot per graph input
	Steps   []Step[K]
	Outputs []string // graph outputs then kept intermediates, without duplicates
	OutSlot []int    // slot per output
}

// Config is what a backend supplies to Compile.
type Config[K any] struct {
	// Backend names the backend in errors ("cpu").
	Backend string
	// Kernel prepares node n's kernel; it is called once per node, in graph order, folded
	// nodes included. An *backends.UnsupportedOpError it returns is passed on with its
	// backend, op and node filled in; other errors are wrapped with the node's name.
	Kernel func(n *graph.Node) (K, error)
	// Fold evaluates a node whose inputs are all constant at compile time, given its
	// kernel, which the plan does not keep. in holds nil for an omitted input; for Shape of
	// a statically shaped graph input, in[0] has the declared shape and no data. Nil folds
	// nothing.
	Fold func(n *graph.Node, k K, in []*tensor.Tensor) ([]*tensor.Tensor, error)
	// Fuse, when set, rewrites the plan's steps after folding and before last uses are
	// planned. It must keep every output and kept intermediate computed.
	Fuse func(p *Plan[K])
	// KeepIntermediates lists values, beyond the graph outputs, that the plan must keep
	// and return (backends.Options.KeepIntermediates); a name that is no value of the
	// graph is an error.
	KeepIntermediates []string
	// FreeInputs also releases graph inputs after their last reader, for a backend that
	// holds its own copy of them (a device upload).
	FreeInputs bool
}

// Compile validates g and returns its plan, or an error naming the node at fault (an
// *backends.UnsupportedOpError for an op the backend lacks).
func Compile[K any](g *graph.Graph, c Config[K]) (*Plan[K], error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("%s: compile graph: %w", c.Backend, err)
	}
	if err := g.CheckWideTypes(); err != nil {
		return nil, fmt.Errorf("%s: compile graph: %w", c.Backend, err)
	}
	p := &Plan[K]{Name: g.Name, Inputs: g.Inputs}
	slotOf := map[string]int{}
	newSlot := func(name string, kind SlotKind, t *tensor.Tensor) int {
		s := len(p.Slots)
		slotOf[name] = s
		p.Slots = append(p.Slots, name)
		p.Kinds = append(p.Kinds, kind)
		p.Consts = append(p.Consts, t)
		return s
	}
	for _, in := range g.Inputs {
		p.InSlot = append(p.InSlot, newSlot(in.Name, SlotInput, nil))
	}
	for _, in := range g.Initializers {
		newSlot(in.Name, SlotConst, in.Tensor)
	}
	static := staticShapes(g.Inputs)
	for i, n := range g.Nodes {
		k, err := c.Kernel(n)
		if err != nil {
			var u *backends.UnsupportedOpError
			if errors.As(err, &u) {
				u.Backend, u.Op, u.Node = c.Backend, n.Op, n.Name
				return nil, u
			}
			return nil, fmt.Errorf("%s: compile node %d (%s %q): %w", c.Backend, i, n.Op, n.Name, err)
		}
		st := Step[K]{Node: n, Kernel: k}
		constIn := true
		var ins []*tensor.Tensor
		for _, name := range n.Inputs {
			if name == "" {
				st.In = append(st.In, -1)
				ins = append(ins, nil)
				continue
			}
			s := slotOf[name]
			st.In = append(st.In, s)
			if p.Kinds[s] != SlotConst {
				constIn = false
			}
			ins = append(ins, p.Consts[s])
		}
		// Shape of an input with a fully static shape is a constant too.
		if n.Op == "Shape" && !constIn {
			if t, ok := static[n.Inputs[0]]; ok {
				constIn = true
				ins = []*tensor.Tensor{t}
			}
		}
		if constIn && c.Fold != nil {
			outs, err := c.Fold(n, k, ins)
			if err != nil {
				return nil, fmt.Errorf("%s: compile node %d (%s %q): fold constant: %w", c.Backend, i, n.Op, n.Name, err)
			}
			for j, name := range n.Outputs {
				if name == "" {
					continue
				}
				var t *tensor.Tensor
				if j < len(outs) {
					t = outs[j]
				}
				newSlot(name, SlotConst, t)
			}
			continue
		}
		for _, name := range n.Outputs {
			if name == "" {
				st.Out = append(st.Out, -1)
				continue
			}
			st.Out = append(st.Out, newSlot(name, SlotNode, nil))
		}
		p.Steps = append(p.Steps, st)
	}
	seen := map[string]bool{}
	for _, o := range g.Outputs {
		if !seen[o.Name] {
			seen[o.Name] = true
			p.Outputs = append(p.Outputs, o.Name)
		}
	}
	for _, name := range c.KeepIntermediates {
		if _, ok := slotOf[name]; !ok {
			return nil, fmt.Errorf("%s: compile graph %s: kept intermediate %q is not a value of the graph", c.Backend, g.Name, name)
		}
		if !seen[name] {
			seen[name] = true
			p.Outputs = append(p.Outputs, name)
		}
	}
	for _, name := range p.Outputs {
		p.OutSlot = append(p.OutSlot, slotOf[name])
	}
	if c.Fuse != nil {
		c.Fuse(p)
	}
	p.planFrees(c.FreeInputs)
	p.dropUnusedConsts()
	return p, nil
}

// staticShapes returns, for each graph input whose dims are all known, a tensor of that
// shape without data (what folding Shape needs).
func staticShapes(inputs []graph.ValueInfo) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, in := range inputs {
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
			out[in.Name] = &tensor.Tensor{DType: in.DType, Shape: shape}
		}
	}
	return out
}

// PeakBytes returns the most bytes of run-time values a run of the plan holds at once:
// walking the steps in order, the graph inputs plus every step output from the step that
// makes it until its planned release (outputs and kept values to the end), each sized by
// size[name] (0 when absent). Constants are not counted, nor a fused step's internal
// buffers, which are not values of the plan. Values that share storage are counted apart,
// so the figure errs high.
func (p *Plan[K]) PeakBytes(size map[string]int64) int64 {
	var live, peak int64
	for _, s := range p.InSlot {
		live += size[p.Slots[s]]
	}
	peak = live
	for _, st := range p.Steps {
		for _, s := range st.Out {
			if s >= 0 && p.Kinds[s] == SlotNode {
				live += size[p.Slots[s]]
			}
		}
		peak = max(peak, live)
		for _, s := range st.Free {
			live -= size[p.Slots[s]]
		}
	}
	return peak
}

// planFrees records, for each step, the run-time values whose last reader it is. Outputs,
// kept values and constants are never released, graph inputs only when freeInputs is set;
// a value nothing reads is released right after the step that makes it.
func (p *Plan[K]) planFrees(freeInputs bool) {
	for i := range p.Steps {
		p.Steps[i].Free = nil
	}
	last := LastUses(len(p.Slots), len(p.Steps), func(i int) ([]int, []int) { return p.Steps[i].In, p.Steps[i].Out })
	keep := make([]bool, len(p.Slots))
	for _, s := range p.OutSlot {
		keep[s] = true
	}
	for s, l := range last {
		kind := p.Kinds[s]
		if l >= 0 && !keep[s] && (kind == SlotNode || (freeInputs && kind == SlotInput)) {
			p.Steps[l].Free = append(p.Steps[l].Free, s)
		}
	}
}

// dropUnusedConsts forgets the constants that no step or output reads (the inputs of
// folded nodes), so the plan does not hold them for its lifetime.
func (p *Plan[K]) dropUnusedConsts() {
	needed := make([]bool, len(p.Slots))
	for _, st := range p.Steps {
		for _, s := range st.In {
			if s >= 0 {
				needed[s] = true
			}
		}
	}
	for _, s := range p.OutSlot {
		needed[s] = true
	}
	for s := range p.Consts {
		if !needed[s] {
			p.Consts[s] = nil
		}
	}
}

// LastUses returns, for each of nslots value slots, the index of the last of nsteps steps
// that reads or writes it, or -1 when no step does; io(i) gives step i's input and output
// slots (negative entries: an omitted value). A slot out of range panics (a compiler bug).
func LastUses(nslots, nsteps int, io func(step int) (in, out []int)) []int {
	last := make([]int, nslots)
	for i := range last {
		last[i] = -1
	}
	for i := 0; i < nsteps; i++ {
		in, out := io(i)
		for _, s := range out {
			if s >= 0 {
				last[s] = i
			}
		}
		for _, s := range in {
			if s >= 0 {
				last[s] = i
			}
		}
	}
	return last
}
