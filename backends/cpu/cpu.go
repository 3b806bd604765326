// Package cpu is zoo's reference CPU backend: a pure-Go implementation of every operator in
// the graph IR with ONNX opset-17 semantics, multi-threaded across cores, with matrix
// products delegated to the SGEMM kernels of package gemm. It registers itself as "cpu".
//
// Compile goes through the shared backends/compile step; the CPU's kernels also fold the
// constant nodes. The files:
//
//   - cpu.go: the Backend, the Program and Run; ops.go: opTable, the kernel maker for each
//     op name of graph's op table, and the helpers kernels share.
//   - A kernel per op family: elementwise.go (unary, binary, comparison, Where, Cast;
//     broadcast.go holds the strided loops), shape.go (shape and data-movement ops:
//     Constant, Shape, Reshape, Transpose, Concat, Slice, Gather, Expand, Range, ...),
//     nn.go (Softmax, LayerNormalization, Reduce*), linalg.go (MatMul, Gemm). A kernel for
//     a new op goes into its family's file and into opTable.
//   - Fusions, run at compile time as the plan's Fuse pass: fuse.go (the driver, the
//     fuser's use counts and the fallback to the unfused steps), fuse_linear.go,
//     fuse_attention.go, fuse_norm.go and fuse_shape.go (one pattern family each). Their
//     fused kernels: fused_linear.go, attention.go, fused_residual.go, with the in-place
//     operand views of operand.go. A new fusion is a matcher in the fuse_*.go file of its
//     family, called from fuse, and a kernel in a fused_*.go file when it needs one.
//   - memplan.go recycles activation buffers across the steps of a Run.
package cpu

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
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

// ApplyEnv sets the SIMD kernel level of the backend from ZOO_CPU and then its int8 path
// from ZOO_INT8 (internal/env); unset or empty selects the best this CPU runs. The error
// names the variable and says why: an unknown value, or one this CPU or level cannot run
// (ZOO_CPU=avx512 without AVX-512, ZOO_INT8=vnni512 at ZOO_CPU=avx2). No package reads
// them at initialisation; a program calls this once at start-up.
func ApplyEnv() error {
	if err := simd.ApplyEnv(); err != nil {
		return err
	}
	v, err := env.Get(env.Int8)
	if err != nil {
		return err
	}
	if err := gemm.SetInt8Path(v); err != nil {
		return fmt.Errorf("%s=%q: %w", env.Int8, v, err)
	}
	return nil
}

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
	bf16, why := gemm.BF16Path()
	i8, i8why := gemm.Int8Path()
	return backends.Probe{
		Available:      true,
		Level:          simd.Current().String(),
		Device:         deviceName(),
		Threads:        DefaultThreads(),
		Priority:       Priority,
		BF16:           bf16,
		BF16Reason:     why,
		Int8:           i8,
		Int8Reason:     i8why,
		Int8WeightBits: gemm.Int8WeightBits(i8),
	}
}

// precisionOf resolves Options.Precision: neither flag for "" and "fp32", bf16 for "bf16"
// where this CPU has a bf16 path, int8 for "int8" (every CPU has one: Int8Path's "generic"
// is pure Go), int8 and attn8 for "int8-attention", and a one-line error otherwise.
func precisionOf(p string) (bf16, int8, attn8 bool, err error) {
	switch strings.ToLower(strings.TrimSpace(p)) {
	case "", "fp32":
		return false, false, false, nil
	case "bf16":
		if path, why := gemm.BF16Path(); path == "" {
			return false, false, false, fmt.Errorf("cpu: precision bf16 is not available here: %s", why)
		}
		return true, false, false, nil
	case "int8":
		return false, true, false, nil
	case "int8-attention":
		return false, true, true, nil
	}
	return false, false, false, fmt.Errorf("cpu: unknown precision %q (want fp32, bf16, int8 or int8-attention)", p)
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
	p, err := newProgram(g, opts)
	if err != nil {
		return nil, err // not a typed nil *Program inside the interface
	}
	return p, nil
}

// The plan's slot kinds and step type, under the names the kernels and fusions use.
type (
	slotKind = compile.SlotKind
	step     = compile.Step[kernel]
)

const (
	slotNode  = compile.SlotNode  // produced by a node at run time
	slotInput = compile.SlotInput // a graph input
	slotConst = compile.SlotConst // an initializer or a folded constant
)

// Program is a compiled graph for the CPU backend. Run may be called from one goroutine at
// a time; Close is optional (the worker pool is shared) but makes later Runs fail.
type Program struct {
	plan    *compile.Plan[kernel] // slots, constants and steps (the fused ones included)
	threads int
	// bf16 rounds the inputs of every matrix product to bf16 (Options.Precision "bf16"):
	// fused linear layers hold their weights as bf16 pairs, other products convert per call.
	bf16 bool
	// int8 holds the constant weights of linear layers (MatMul and Gemm by a constant
	// matrix, fused or not) as int8 (Options.Precision "int8"): their products quantize
	// their input rows and run in int8 (gemm.PackBInt8); every other product stays fp32.
	int8 bool
	// attn8 also runs the two products of fused attention in int8 (Options.Precision
	// "int8-attention"; attention_int8.go).
	attn8  bool
	packed []*gemm.PackedB // the weight matrices packed at compile time (WeightBytes)
	tables []*int8Table    // an int8 program's row tables (int8_tables.go)
	// dequantized and qpacked serve the fusion of imported quantized layers while it runs
	// (fuse_quantized.go): folded DequantizeLinears of integer weights, and the packed ones.
	dequantized map[string]foldedDQ
	qpacked     map[qKey]*qWeights
	closed      bool
	pool        *bufPool       // recycles activation buffers across the steps of a Run
	fusions     map[string]int // fused patterns found at compile time, by kind
	notes       []FusionNote   // the fusion candidates and what became of them (Report)
}

// newProgram plans g through the shared compile step with the CPU's kernels, which also
// fold the constant nodes, and the CPU's fusions (unless opts.NoFusion).
func newProgram(g *graph.Graph, opts backends.Options) (*Program, error) {
	threads := opts.Threads
	if threads <= 0 {
		threads = DefaultThreads()
	}
	if threads > workpool.MaxThreads {
		threads = workpool.MaxThreads
	}
	bf16, int8, attn8, err := precisionOf(opts.Precision)
	if err != nil {
		return nil, err
	}
	p := &Program{threads: threads, bf16: bf16, int8: int8, attn8: attn8, pool: newBufPool(), fusions: map[string]int{}}
	fold := &exec{threads: threads}
	cfg := compile.Config[kernel]{
		Backend: Name,
		Kernel: func(n *graph.Node) (kernel, error) {
			mk, ok := opTable[graph.OpKey(n.Domain, n.Op)]
			if !ok {
				return nil, &backends.UnsupportedOpError{Detail: "no CPU kernel"}
			}
			return wideKernel(n, mk)
		},
		Fold: func(n *graph.Node, k kernel, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if !opts.NoFusion {
				p.noteFolded(n, in) // for fuseQuantized, which forgets them when it is done
			}
			return fold.call(k, n, in)
		},
		KeepIntermediates: opts.KeepIntermediates,
	}
	switch {
	case !opts.NoFusion:
		cfg.Fuse = func(pl *compile.Plan[kernel]) {
			p.plan = pl
			p.fuseOrNot()
		}
	case int8:
		// Unfused, an int8 program still runs each product by a constant matrix on its
		// int8 weights, and nothing else with it (fuse.go's int8Products).
		cfg.Fuse = func(pl *compile.Plan[kernel]) {
			p.plan = pl
			p.int8ProductsOrNot()
		}
	}
	pl, err := compile.Compile(g, cfg)
	if err != nil {
		return nil, err
	}
	p.plan = pl
	if int8 {
		p.int8Tables()
	}
	return p, nil
}

// fuseOrNot runs the fusion passes and, should one of them panic on a graph its matchers
// did not foresee (a bug), keeps the program unfused instead: fusion only ever speeds a
// graph up, and the unfused steps accept whatever the graph's kernels accept. The passes
// replace steps and their fields, never the elements of a step's slices, so the saved
// step list is the program as it was.
func (p *Program) fuseOrNot() {
	saved := append([]step(nil), p.plan.Steps...)
	defer func() {
		if r := recover(); r != nil {
			p.plan.Steps, p.fusions, p.notes, p.packed = saved, map[string]int{}, nil, nil
		}
	}()
	p.fuse()
}

// Threads returns the number of worker threads the program uses.
func (p *Program) Threads() int { return p.threads }

// PeakActivationBytes implements backends.ActivationEstimator over the compiled steps and
// their planned releases (compile.Plan.PeakBytes).
func (p *Program) PeakActivationBytes(valueBytes map[string]int64) int64 {
	return p.plan.PeakBytes(valueBytes)
}

var _ backends.ActivationEstimator = (*Program)(nil)

// Close releases the program; later calls to Run fail.
func (p *Program) Close() error {
	p.closed = true
	return nil
}

// Run checks inputs against the graph's declared inputs, executes the nodes in order
// (stopping between nodes when ctx is cancelled) and returns the graph outputs and the kept
// intermediates by name. Returned tensors never share memory with inputs or initializers.
func (p *Program) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	return p.run(ctx, inputs, nil)
}

// RunProfiled is Run that also times every step (backends.Profiler): the clock is read
// before and after each step, and once around the whole run.
func (p *Program) RunProfiled(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, *backends.Profile, error) {
	prof := &backends.Profile{Steps: make([]backends.StepTime, 0, len(p.plan.Steps))}
	t0 := time.Now()
	out, err := p.run(ctx, inputs, &profiler{t0: t0, prof: prof})
	prof.Total = time.Since(t0)
	if err != nil {
		return nil, nil, err
	}
	return out, prof, nil
}

// profiler records the steps of one profiled run.
type profiler struct {
	t0   time.Time
	prof *backends.Profile
}

// step records step st, which started at start and ran on ins to make res.
func (pr *profiler) step(st *step, start, end time.Time, ins, res []*tensor.Tensor) {
	var b int64
	for _, t := range ins {
		if t != nil {
			b += int64(t.Bytes())
		}
	}
	for _, t := range res {
		if t != nil {
			b += int64(t.Bytes())
		}
	}
	pr.prof.Steps = append(pr.prof.Steps, backends.StepTime{Op: st.Node.Op, Name: st.Node.Name, Nodes: st.Nodes(), Fused: st.Covers != nil,
		Start: start.Sub(pr.t0), Duration: end.Sub(start), IOBytes: b})
}

// run is Run, timing every step into pr when it is not nil.
func (p *Program) run(ctx context.Context, inputs map[string]*tensor.Tensor, pr *profiler) (out map[string]*tensor.Tensor, err error) {
	if p.closed {
		return nil, fmt.Errorf("cpu: run graph %s: program is closed", p.plan.Name)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := backends.CheckInputs("cpu", p.plan.Name, p.plan.Inputs, inputs); err != nil {
		return nil, err
	}
	vals := make([]*tensor.Tensor, len(p.plan.Slots))
	copy(vals, p.plan.Consts)
	for i, in := range p.plan.Inputs {
		vals[p.plan.InSlot[i]] = inputs[in.Name]
	}
	cur := -1
	defer func() {
		if r := recover(); r != nil {
			where := "graph " + p.plan.Name
			if cur >= 0 {
				n := p.plan.Steps[cur].Node
				where = fmt.Sprintf("node %q (%s)", n.Name, n.Op)
			}
			out, err = nil, fmt.Errorf("cpu: %s: internal error: %v", where, r)
		}
	}()
	e := &exec{threads: p.threads, bf16: p.bf16, attn8: p.attn8, pool: p.pool}
	defer p.pool.endRun()
	ins := make([]*tensor.Tensor, 0, 8)
	for i := range p.plan.Steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: run graph %s: stopped before node %q: %w", p.plan.Name, p.plan.Steps[i].Node.Name, err)
		}
		cur = i
		st := &p.plan.Steps[i]
		ins = ins[:0]
		for _, s := range st.In {
			if s < 0 {
				ins = append(ins, nil)
			} else {
				ins = append(ins, vals[s])
			}
		}
		var start time.Time
		if pr != nil {
			start = time.Now()
		}
		res, err := e.call(st.Kernel, st.Node, ins)
		if pr != nil {
			pr.step(st, start, time.Now(), ins, res)
		}
		if err != nil {
			return nil, fmt.Errorf("cpu: run node %q (%s): %w", st.Node.Name, st.Node.Op, err)
		}
		for j, s := range st.Out {
			if s >= 0 {
				if j >= len(res) || res[j] == nil {
					return nil, fmt.Errorf("cpu: run node %q (%s): output %d was not produced", st.Node.Name, st.Node.Op, j)
				}
				vals[s] = res[j]
				p.pool.retain(res[j])
			}
		}
		for _, s := range st.Free {
			p.pool.release(vals[s])
			vals[s] = nil
		}
	}
	cur = -1
	out = make(map[string]*tensor.Tensor, len(p.plan.Outputs))
	owned := map[any]bool{}
	for i, name := range p.plan.Outputs {
		s := p.plan.OutSlot[i]
		t := vals[s]
		if t == nil {
			return nil, fmt.Errorf("cpu: run graph %s: output %q was not computed", p.plan.Name, name)
		}
		p.pool.disown(t)
		// Hand out private memory: clone values that live in inputs or initializers, and
		// values that share storage with an output already returned.
		key := dataKey(t)
		if p.plan.Kinds[s] != slotNode || (key != nil && owned[key]) || aliasesInput(t, inputs) {
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
	bf16    bool     // matrix products round their inputs to bf16 (Program.bf16)
	attn8   bool     // fused attention's products run in int8 (Program.attn8)
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

var _ backends.Profiler = (*Program)(nil)

// The matrix products of a run go through these, so that a bf16 program (Program.bf16)
// rounds the inputs of every one of them and an fp32 program is untouched.

// sgemm is gemm.Sgemm, or gemm.Sbgemm in a bf16 run.
func (e *exec) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if e.bf16 {
		gemm.Sbgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemm.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmParallel is gemm.SgemmParallel, or gemm.SbgemmParallel in a bf16 run.
func (e *exec) sgemmParallel(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if e.bf16 {
		gemm.SbgemmParallel(threads, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemm.SgemmParallel(threads, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// packB is pb.Pack, or pb.PackBF16 in a bf16 run (products with pb then round A too).
func (e *exec) packB(pb *gemm.PackedB, transB bool, k, n int, b []float32, ldb int) {
	if e.bf16 {
		pb.PackBF16(transB, k, n, b, ldb)
		return
	}
	pb.Pack(transB, k, n, b, ldb)
}

// packWeights packs a constant operand once at compile time: gemm.PackB, or
// gemm.PackBBF16 for a bf16 program (weights are converted once, here).
func (p *Program) packWeights(transB bool, k, n int, b []float32, ldb int) *gemm.PackedB {
	var pb *gemm.PackedB
	if p.bf16 {
		pb = gemm.PackBBF16(transB, k, n, b, ldb)
	} else {
		pb = gemm.PackB(transB, k, n, b, ldb)
	}
	p.packed = append(p.packed, pb)
	return pb
}

// packLinear packs the constant weights of a linear layer once at compile time: as
// packWeights does, or quantized to int8 (gemm.PackBInt8) in an int8 program, where k
// allows (gemm.MaxInt8K). The projections inside attention take packProjection.
func (p *Program) packLinear(transB bool, k, n int, b []float32, ldb int) *gemm.PackedB {
	return p.packInt8If(p.int8, transB, k, n, b, ldb)
}

// packProjection packs a constant projection inside attention (a kernelized feature map's
// random features) once at compile time: quantized to int8 only in an int8-attention
// program, which runs attention's products in int8 (an int8 program keeps attention fp32).
func (p *Program) packProjection(transB bool, k, n int, b []float32, ldb int) *gemm.PackedB {
	return p.packInt8If(p.attn8, transB, k, n, b, ldb)
}

// packInt8If is gemm.PackBInt8 when quantize is set and k allows (gemm.MaxInt8K), and
// packWeights otherwise.
func (p *Program) packInt8If(quantize, transB bool, k, n int, b []float32, ldb int) *gemm.PackedB {
	if quantize && k <= gemm.MaxInt8K {
		pb := gemm.PackBInt8(transB, k, n, b, ldb)
		p.packed = append(p.packed, pb)
		return pb
	}
	return p.packWeights(transB, k, n, b, ldb)
}

// WeightBytes returns the memory the program holds for its constants: the packed weight
// matrices of its fused products (int8 ones in an int8 program) and the constant tensors
// its steps read (biases, normalisation parameters, weights of unfused products).
func (p *Program) WeightBytes() int64 {
	var n int64
	for _, pb := range p.packed {
		n += int64(pb.Bytes())
	}
	for _, tb := range p.tables {
		n += tb.bytes()
	}
	for _, t := range p.plan.Consts {
		if t != nil {
			n += int64(t.Bytes())
		}
	}
	return n
}
