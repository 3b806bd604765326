//go:build cgo && linux

package cuda

import (
	"context"
	"fmt"
	"maps"
	"time"
	"unsafe"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// dbuf is one device allocation. refs counts the values holding it; a weight (const) is
// never returned to the pool.
type dbuf struct {
	ptr    uint64
	bytes  int
	refs   int
	const_ bool
}

// dtensor is a contiguous float32 tensor on the device.
type dtensor struct {
	buf   *dbuf
	shape []int
}

func (t *dtensor) n() int { return graph.NumElements(t.shape) }

// value is a run-time value: a host tensor (int64, bool, small float) or a device tensor.
type value struct {
	host *tensor.Tensor
	dev  *dtensor
}

func (v value) shape() []int {
	if v.dev != nil {
		return v.dev.shape
	}
	if v.host != nil {
		return v.host.Shape
	}
	return nil
}

// isFloat reports whether v holds float32 data (on either side).
func (v value) isFloat() bool {
	return v.dev != nil || (v.host != nil && v.host.DType == tensor.Float32)
}

// pool keeps freed device buffers for reuse by later allocations of the same or a smaller
// size, within a run and across runs of one program.
type pool struct {
	free []*dbuf
	all  []*dbuf
}

const allocAlign = 512

// get returns a buffer of at least n bytes: the smallest free one that is no more than
// twice as large, else a new allocation (after releasing the free list on out-of-memory).
func (p *pool) get(n int) (*dbuf, error) {
	if n == 0 {
		return &dbuf{refs: 1}, nil
	}
	n = (n + allocAlign - 1) / allocAlign * allocAlign
	best := -1
	for i, b := range p.free {
		if b.bytes >= n && b.bytes <= 2*n && (best < 0 || b.bytes < p.free[best].bytes) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free = append(p.free[:best], p.free[best+1:]...)
		b.refs = 1
		return b, nil
	}
	ptr, err := cuMalloc(n)
	if err != nil && isOOM(err) && len(p.free) > 0 {
		p.trim()
		ptr, err = cuMalloc(n)
	}
	if err != nil {
		return nil, err
	}
	b := &dbuf{ptr: ptr, bytes: n, refs: 1}
	p.all = append(p.all, b)
	return b, nil
}

// put returns b to the free list. Work already queued on the program's stream may still
// read b; later work on the same stream is ordered after it, so reuse is safe.
func (p *pool) put(b *dbuf) {
	if b.bytes > 0 {
		p.free = append(p.free, b)
	}
}

// trim frees every buffer on the free list.
func (p *pool) trim() {
	drop := map[*dbuf]bool{}
	for _, b := range p.free {
		cuFree(b.ptr)
		drop[b] = true
	}
	p.free = nil
	keep := p.all[:0]
	for _, b := range p.all {
		if !drop[b] {
			keep = append(keep, b)
		}
	}
	p.all = keep
}

func (p *pool) close() {
	for _, b := range p.all {
		cuFree(b.ptr)
	}
	p.all, p.free = nil, nil
}

// staging is a pinned host arena for asynchronous copies, reset after each run. When it is
// too small, a larger block replaces it; the old one is freed after the next sync.
type staging struct {
	ptr     unsafe.Pointer
	size    int
	used    int
	retired []unsafe.Pointer
}

func (s *staging) alloc(n int) (unsafe.Pointer, error) {
	n = (n + 255) / 256 * 256
	if s.used+n > s.size {
		size := max(2*s.size, s.used+n, 1<<20)
		p, err := cuHostAlloc(size)
		if err != nil {
			return nil, err
		}
		if s.ptr != nil {
			s.retired = append(s.retired, s.ptr)
		}
		s.ptr, s.size, s.used = p, size, 0
	}
	p := unsafe.Add(s.ptr, s.used)
	s.used += n
	return p, nil
}

// reset makes the whole arena available again; call only after a stream sync.
func (s *staging) reset() {
	for _, p := range s.retired {
		cuFreeHost(p)
	}
	s.retired = nil
	s.used = 0
}

func (s *staging) close() {
	s.reset()
	if s.ptr != nil {
		cuFreeHost(s.ptr)
		s.ptr, s.size = nil, 0
	}
}

// step is one node of the plan that runs at run time; its kernel is the node's device
// kernel, nil for a host op.
type step = compile.Step[gpuOp]

// Program is a graph compiled for the GPU. Run may be called from one goroutine at a time.
type Program struct {
	d         *device
	stream    cuStream
	blas      blasHandle
	blasReady bool
	precision string
	// bf16Weights holds the bf16 copy of each weight a bf16 matrix product has read (made
	// at its first use, freed at Close); activations are rounded per product.
	bf16Weights map[*dbuf]uint64

	plan   *compile.Plan[gpuOp]
	consts []value // per slot: the plan's constants, float ones also on the device

	weights []*dbuf
	pool    pool
	stage   staging
	closed  bool

	// noDownload, set by benchmarks, ends a Run after the last step and a stream sync,
	// without copying the outputs to the host (Run returns no outputs): device time only.
	noDownload bool

	// stepTimes, when set (by benchmarks), sums per op the time of each step, measured
	// with a stream sync after it: a profile that serialises host and device.
	stepTimes map[string]time.Duration

	// attnKernels counts, per kernel, the fused attention steps run so far ("unfused" for
	// those that fell back to their original steps).
	attnKernels map[string]int
}

// Fusions reports the fused steps of the plan by kind ("attention", "binary+relu",
// "bias+residual"); empty with
// backends.Options.NoFusion or when nothing matched.
func (p *Program) Fusions() map[string]int {
	out := map[string]int{}
	for _, st := range p.plan.Steps {
		switch st.Node.Op {
		case fusedAttentionOp:
			out["attention"]++
		case fusedBinaryReluOp:
			out["binary+relu"]++
		case fusedBiasResidualOp:
			out["bias+residual"]++
		}
	}
	return out
}

// AttentionKernels reports how often each kernel ran the fused attention steps in this
// program's runs so far ("zoo_attention_t64", ...; "unfused" for a fallback to the
// original steps).
func (p *Program) AttentionKernels() map[string]int { return maps.Clone(p.attnKernels) }

func newProgram(pr backends.Probe, g *graph.Graph, opts backends.Options) (backends.Program, error) {
	if !pr.Available {
		return nil, fmt.Errorf("cuda: not available on this machine: %s", pr.Reason)
	}
	prec, err := precision(opts)
	if err != nil {
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: compile graph: %w", err)
	}
	d, err := getDevice()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	p := &Program{d: d, precision: prec, attnKernels: map[string]int{}}
	if err := d.with(func() error { return p.build(g, opts) }); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// planConfig is the CUDA backend's part of the shared compile step: every op needs a device
// kernel or must be a host op, and constants fold on the host through graph.EvalNode, the
// reference evaluator that runs host steps too.
func planConfig(opts backends.Options) compile.Config[gpuOp] {
	var fusePass func(*compile.Plan[gpuOp])
	if !opts.NoFusion {
		fusePass = fuse
	}
	return compile.Config[gpuOp]{
		Backend: Name,
		Kernel: func(n *graph.Node) (gpuOp, error) {
			key := graph.OpKey(n.Domain, n.Op)
			fn, ok := gpuOps[key]
			if !ok && !hostOps[key] {
				return nil, &backends.UnsupportedOpError{Detail: "no CUDA kernel"}
			}
			return fn, nil
		},
		Fold: func(n *graph.Node, _ gpuOp, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if n.Op == "Shape" { // in[0] may carry only a static shape
				v, err := opShape(n, []value{{host: in[0]}})
				if err != nil {
					return nil, err
				}
				return []*tensor.Tensor{v[0].host}, nil
			}
			return graph.EvalNode(n, in)
		},
		KeepIntermediates: opts.KeepIntermediates,
		FreeInputs:        true, // inputs are uploaded copies
		Fuse:              fusePass,
	}
}

// build plans g through the shared compile step, then uploads the float constants that
// run-time steps read, once, and creates the program's stream.
func (p *Program) build(g *graph.Graph, opts backends.Options) error {
	pl, err := compile.Compile(g, planConfig(opts))
	if err != nil {
		return err
	}
	p.plan = pl
	read := make([]bool, len(pl.Slots))
	for _, st := range pl.Steps {
		for _, s := range st.In {
			if s >= 0 {
				read[s] = true
			}
		}
	}
	p.consts = make([]value, len(pl.Slots))
	for s, t := range pl.Consts {
		if t == nil {
			continue
		}
		p.consts[s] = value{host: t}
		if t.DType != tensor.Float32 || !read[s] { // a constant output is returned from the host
			continue
		}
		b := &dbuf{bytes: 4 * len(t.F32), refs: 1, const_: true}
		if len(t.F32) > 0 {
			ptr, err := cuMalloc(b.bytes)
			if err != nil {
				return fmt.Errorf("cuda: upload weight %q (%s): %w", pl.Slots[s], tensor.ShapeString(t.Shape), err)
			}
			b.ptr = ptr
			p.weights = append(p.weights, b)
			if err := cuCopyHtoD(ptr, unsafe.Pointer(&t.F32[0]), b.bytes); err != nil {
				return fmt.Errorf("cuda: upload weight %q: %w", pl.Slots[s], err)
			}
		}
		p.consts[s].dev = &dtensor{buf: b, shape: t.Shape}
	}
	if p.stream, err = cuNewStream(); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}

// ensureBLAS creates the program's cuBLAS handle at its first matrix product (many small
// programs, such as the conformance cases, never need one).
func (p *Program) ensureBLAS() error {
	if p.blasReady {
		return nil
	}
	h, err := cublasCreate()
	if err != nil {
		return err
	}
	p.blas = h
	if err := cublasSetStream(h, p.stream); err != nil {
		return err
	}
	mode := cublasDefaultMath
	switch p.precision {
	case "tf32":
		mode = cublasTF32Math
	}
	if err := cublasSetMathMode(h, mode); err != nil {
		return err
	}
	p.blasReady = true
	return nil
}

// Close releases the program's device memory, stream and cuBLAS handle; later Runs fail.
func (p *Program) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	return p.d.with(func() error {
		if p.stream != nil {
			cuSync(p.stream)
		}
		p.pool.close()
		p.stage.close()
		for _, b := range p.weights {
			cuFree(b.ptr)
		}
		p.weights = nil
		for _, ptr := range p.bf16Weights {
			cuFree(ptr)
		}
		p.bf16Weights = nil
		if p.blasReady {
			cublasDestroy(p.blas)
		}
		if p.stream != nil {
			cuDestroyStream(p.stream)
		}
		return nil
	})
}

// Run uploads the float inputs, executes the steps on the program's stream (host steps in
// between), downloads the outputs and returns them by name.
func (p *Program) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (out map[string]*tensor.Tensor, err error) {
	if p.closed {
		return nil, fmt.Errorf("cuda: run graph %s: program is closed", p.plan.Name)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := backends.CheckInputs("cuda", p.plan.Name, p.plan.Inputs, inputs); err != nil {
		return nil, err
	}
	err = p.d.with(func() error {
		var rerr error
		out, rerr = p.run(ctx, inputs)
		return rerr
	})
	return out, err
}

func (p *Program) run(ctx context.Context, inputs map[string]*tensor.Tensor) (out map[string]*tensor.Tensor, err error) {
	r := &run{p: p}
	vals := make([]value, len(p.plan.Slots))
	copy(vals, p.consts)
	defer func() {
		if rec := recover(); rec != nil {
			out, err = nil, fmt.Errorf("cuda: run graph %s: internal error: %v", p.plan.Name, rec)
		}
		// Whatever happened, wait for queued work, then return every buffer to the pool.
		if serr := cuSync(p.stream); serr != nil && err == nil {
			out, err = nil, fmt.Errorf("cuda: run graph %s: %w", p.plan.Name, serr)
		}
		for s := range vals {
			if p.plan.Kinds[s] != compile.SlotConst {
				r.release(vals[s])
				vals[s] = value{}
			}
		}
		r.releaseTemps()
		r.releaseBF16()
		p.stage.reset()
	}()
	for i, in := range p.plan.Inputs {
		t := inputs[in.Name]
		if t.DType == tensor.Float32 {
			dt, err := r.upload(t)
			if err != nil {
				return nil, fmt.Errorf("cuda: run graph %s: upload input %q: %w", p.plan.Name, in.Name, err)
			}
			vals[p.plan.InSlot[i]] = value{dev: dt}
		} else {
			vals[p.plan.InSlot[i]] = value{host: t}
		}
	}
	ins := make([]value, 0, 8)
	for i := range p.plan.Steps {
		st := &p.plan.Steps[i]
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cuda: run graph %s: stopped before node %q: %w", p.plan.Name, st.Node.Name, err)
		}
		ins = ins[:0]
		for _, s := range st.In {
			if s < 0 {
				ins = append(ins, value{})
			} else {
				ins = append(ins, vals[s])
			}
		}
		var t0 time.Time
		if p.stepTimes != nil {
			t0 = time.Now()
		}
		res, err := r.step(st, ins)
		r.releaseTemps()
		if p.stepTimes != nil && err == nil {
			err = cuSync(p.stream)
			p.stepTimes[st.Node.Op] += time.Since(t0)
		}
		if err != nil {
			return nil, fmt.Errorf("cuda: run node %q (%s): %w", st.Node.Name, st.Node.Op, err)
		}
		for j, s := range st.Out {
			if s < 0 {
				r.release(res[j])
				continue
			}
			if j >= len(res) || (res[j].host == nil && res[j].dev == nil) {
				return nil, fmt.Errorf("cuda: run node %q (%s): output %d was not produced", st.Node.Name, st.Node.Op, j)
			}
			vals[s] = res[j]
		}
		for _, s := range st.Free {
			r.release(vals[s])
			vals[s] = value{}
		}
	}
	if p.noDownload {
		if err := cuSync(p.stream); err != nil {
			return nil, fmt.Errorf("cuda: run graph %s: %w", p.plan.Name, err)
		}
		return map[string]*tensor.Tensor{}, nil
	}
	// Download device outputs through the pinned arena, then copy out after one sync.
	type pending struct {
		name string
		src  unsafe.Pointer
		t    *tensor.Tensor
	}
	var pend []pending
	out = make(map[string]*tensor.Tensor, len(p.plan.Outputs))
	for i, name := range p.plan.Outputs {
		v := vals[p.plan.OutSlot[i]]
		switch {
		case v.dev != nil:
			t, err := tensor.New(tensor.Float32, v.dev.shape...)
			if err != nil {
				return nil, err
			}
			if n := 4 * v.dev.n(); n > 0 {
				dst, err := p.stage.alloc(n)
				if err != nil {
					return nil, fmt.Errorf("cuda: run graph %s: %w", p.plan.Name, err)
				}
				if err := cuCopyDtoHAsync(dst, v.dev.buf.ptr, n, p.stream); err != nil {
					return nil, fmt.Errorf("cuda: run graph %s: download %q: %w", p.plan.Name, name, err)
				}
				pend = append(pend, pending{name, dst, t})
			}
			out[name] = t
		case v.host != nil:
			out[name] = v.host.Clone()
		default:
			return nil, fmt.Errorf("cuda: run graph %s: output %q was not computed", p.plan.Name, name)
		}
	}
	if err := cuSync(p.stream); err != nil {
		return nil, fmt.Errorf("cuda: run graph %s: %w", p.plan.Name, err)
	}
	for _, pd := range pend {
		copy(pd.t.F32, unsafe.Slice((*float32)(pd.src), len(pd.t.F32)))
	}
	return out, nil
}
