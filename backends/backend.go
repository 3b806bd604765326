package backends

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Probe says whether a backend can run on this machine and with what.
type Probe struct {
	// Available is false when the backend cannot run here; Reason then says why.
	Available bool
	Reason    string
	// Level is the kernel level that will run (for the CPU: "avx512", "avx2" or "generic").
	Level string
	// Device describes the hardware ("2 cores, Intel Xeon", "NVIDIA H200 141 GiB").
	Device string
	// Threads is the number of worker threads the backend uses.
	Threads int
	// Priority orders automatic selection: the highest available wins.
	Priority int
	// BF16 names the bf16 matrix-product path Options.Precision "bf16" runs on here (for the
	// CPU: "amx-bf16" or "avx512-bf16"), or is "" when the backend has none on this machine;
	// BF16Reason then says why in one line.
	BF16       string
	BF16Reason string
	// Int8 names the int8 matrix-product path Options.Precision "int8" runs on here (for the
	// CPU: "amx-int8", "vnni512", "avx-vnni", "avx2" or "generic", pure Go), or is "" when the backend
	// has no int8 path; Int8Reason then says why, or, beside a path, what keeps a better
	// one off (the CPU, ZOO_CPU), in one line.
	Int8       string
	Int8Reason string
	// Int8WeightBits is the bits the linear layers' weights are quantized to on that path:
	// 8, or 7 on the CPU's avx2 path (whose inputs are then quantized to 0…127 too, so that
	// AVX2's int16 pair sums cannot saturate); 0 when Int8 is "".
	Int8WeightBits int
}

// Options tune compilation. The zero value asks for the backend's defaults.
type Options struct {
	// Threads caps worker threads; 0 means every core the backend may use.
	Threads int
	// KeepIntermediates lists values (beyond the graph outputs) that Run must also return,
	// for per-layer parity checks.
	KeepIntermediates []string
	// Precision selects the matrix-product math: "" or "fp32" (the default: strict IEEE
	// fp32), "tf32" (CUDA's TF32 tensor cores, about 1e-3 relative error) or "bf16" (inputs
	// of every matrix product rounded to bf16, products accumulated in fp32, everything
	// else fp32) or "int8" (the CPU backend: the constant weights of linear layers quantized
	// once to int8 per output column, each row of their inputs quantized to u8 as it runs,
	// exact int32 sums dequantized in the fused epilogue; attention's own products, products
	// of two run-time values and everything else stay fp32). A backend refuses with an error
	// a precision it has no path for on this machine (Probe().BF16 is "" for bf16,
	// Probe().Int8 "" for int8). "int8-attention" is "int8" with fused attention's two
	// products (Q·Kᵀ and the probabilities times V) in int8 as well: keys and values
	// quantized per key and per channel as they run, queries and probabilities per row.
	Precision string
	// NoFusion turns off a backend's graph fusions (e.g. the CPU backend's fused linear and
	// attention kernels), so every node runs as its own kernel: for A/B tests and for
	// bisecting a numerical difference. Results differ only in rounding.
	NoFusion bool
}

// Backend compiles graphs for one kind of hardware.
type Backend interface {
	// Name is the stable name users pass to --backend ("cpu", "cuda").
	Name() string
	// Probe inspects the machine; it never fails, it reports.
	Probe() Probe
	// Compile prepares g for repeated runs. It returns an *UnsupportedOpError for an op the
	// backend lacks, and other errors for malformed graphs.
	Compile(g *graph.Graph, opts Options) (Program, error)
}

// Program is a compiled graph.
type Program interface {
	// Run executes the graph on inputs keyed by graph input name and returns every graph
	// output (and requested intermediates) by name. It is safe to call Run from one goroutine
	// at a time.
	Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
	// Close releases the program's resources.
	Close() error
}

// Profiler is implemented by a Program that can time each of its steps. It is optional: a
// caller asserts it (p.(backends.Profiler)) and says profiling is unsupported where a
// backend's programs lack it. Run itself pays nothing for it.
type Profiler interface {
	// RunProfiled is Run that also returns the run's timeline: one StepTime per step that
	// ran, in order, and the time of the whole run measured around them. Errors are Run's.
	RunProfiled(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, *Profile, error)
}

// ActivationEstimator is implemented by a Program that can say how much memory its runs
// hold in run-time values: the peak, over its steps in order, of the bytes of the graph
// inputs and step outputs alive at once, given each value's size by name (graph.ValueBytes
// at the run's shapes). It sees the program as compiled, so what a fused step keeps to
// itself (the tiles of a fused attention, never its n×n scores) is not counted. It is
// optional: memory guards assert it and fall back to the graph's own estimate.
type ActivationEstimator interface {
	PeakActivationBytes(valueBytes map[string]int64) int64
}

// Profile is the timeline of one profiled run.
type Profile struct {
	// Steps holds every step that ran, in order.
	Steps []StepTime
	// Total is the wall time of the whole run (input checks and the hand-off of the outputs
	// included), read from the same clock as the steps, so Total minus the sum of the steps'
	// Durations is the time spent between them.
	Total time.Duration
}

// StepTime is one step of a profiled run: a graph node, or a fused kernel that does the
// work of several.
type StepTime struct {
	// Op is what ran: the node's op, or a fused kernel's name ("FusedAttention").
	Op string
	// Name is the step's node name (a fused step takes the name of a node it replaced).
	Name string
	// Nodes are the graph's own nodes (the *graph.Node values compiled) whose work the step
	// did: the node itself, or every node a fused step replaced.
	Nodes []*graph.Node
	// Fused is true for a step that runs a kernel of the backend's own in place of Nodes.
	Fused bool
	// Start is when the step began, measured from the start of the run; Duration is how
	// long it took.
	Start, Duration time.Duration
	// IOBytes is the size of the tensors the step read and wrote, as they ran.
	IOBytes int64
}

// CompileReporter is implemented by a Program that can say what its compiler made of the
// graph: the steps it runs, which fusions applied and why the others did not. CompileReport
// returns that as human-readable lines, each ending in a newline (empty when there is
// nothing to say). `zoo run --verbose` prints it; a profiler may too.
type CompileReporter interface {
	CompileReport() string
}

// UnsupportedOpError names an op (and the node using it) that a backend cannot run.
type UnsupportedOpError struct {
	Backend string
	Op      string
	Node    string
	Detail  string
}

func (e *UnsupportedOpError) Error() string {
	msg := fmt.Sprintf("backend %s cannot run op %s (node %q)", e.Backend, e.Op, e.Node)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

var registry = map[string]Backend{}

// Register adds a backend; it is meant to be called from init functions and panics on a
// duplicate name, which is a programming error caught by any test.
func Register(b Backend) {
	if _, dup := registry[b.Name()]; dup {
		panic("backends: duplicate registration of " + b.Name())
	}
	registry[b.Name()] = b
}

// All returns every registered backend sorted by name.
func All() []Backend {
	out := make([]Backend, 0, len(registry))
	for _, b := range registry {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Lookup returns the backend registered under name.
func Lookup(name string) (Backend, bool) {
	b, ok := registry[name]
	return b, ok
}

// Int8Precision reports whether Options.Precision p is one of the int8 precisions, "int8"
// or "int8-attention" (case and surrounding space ignored).
func Int8Precision(p string) bool {
	switch strings.ToLower(strings.TrimSpace(p)) {
	case "int8", "int8-attention":
		return true
	}
	return false
}
