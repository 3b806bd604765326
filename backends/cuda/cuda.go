// Package cuda is zoo's NVIDIA GPU backend. It registers itself as "cuda" with a priority
// above the CPU backend's, so it is chosen automatically wherever it is available.
//
// It needs no CUDA toolkit at build time: the few driver, cuBLAS and NVRTC declarations it
// uses are written in a cgo preamble, and libcuda.so.1, libcublas and libnvrtc are loaded
// with dlopen when first probed. zoo's own kernels (kernels.cu, embedded in the binary) are
// compiled with NVRTC for the device at first use and cached on disk. Built without cgo, or
// on a machine without a driver, a device or recent enough libraries, the backend reports
// itself unavailable with the exact reason, and zoo runs on the CPU.
//
// Execution model: float32 values live on the device (weights uploaded once at Compile,
// activations in a per-program pool of device buffers reused across runs and released at
// their last use); int64 and bool values (token ids, shapes, masks) live on the host, where
// the small shape computations run through graph.EvalNode, the reference evaluator that
// also folds constants at compile time. Matrix products go
// to cuBLAS; everything else runs in zoo's kernels on one stream per program, with pinned
// staging buffers for inputs and outputs.
//
// Compile goes through the shared backends/compile step (program.go, planConfig). The
// files mirror the CPU backend's: ops.go holds gpuOps, the device kernel for each op name
// of graph's op table, and the dispatch between device and host; the kernels are in
// elementwise.go, shape.go, nn.go and linalg.go (their device code in kernels.cu), the
// shape views they compute before launching in views.go, the kernel descriptors and strides
// in desc.go. A kernel for a new op goes into its family's file and into gpuOps (plus a
// function in kernels.cu when none of the generic ones fits); an op that only makes or
// inspects shapes, indices or masks goes into hostOps instead and runs on the host. Fusions
// are compile.Config.Fuse passes, as on the CPU: attention.go fuses scaled-dot-product
// attention (with the head transposes around it) into one tiled online-softmax kernel;
// backends.Options.NoFusion turns it off. The kernels also run on the CPU under g++ through
// testdata/cuda_emul.h (emul_test.go), so machines without a GPU check their logic.
package cuda

import (
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// Name is the name the backend registers under.
const Name = "cuda"

// Priority ranks the backend above the CPU backend (10) for automatic selection.
const Priority = 100

// PrecisionEnv sets the default matrix-product precision ("fp32", "tf32" or "bf16") when
// backends.Options.Precision is empty.
const PrecisionEnv = "ZOO_CUDA_PRECISION"

// DeviceEnv selects the device ordinal (default 0); CUDA_VISIBLE_DEVICES also applies.
const DeviceEnv = "ZOO_CUDA_DEVICE"

// Required versions.
const (
	minDriver = 12000 // CUDA 12.0, as cuDriverGetVersion reports it
	minCUBLAS = 12
)

func init() { backends.Register(Backend{}) }

// Backend is the CUDA backend. The zero value is ready to use.
type Backend struct{}

// Name returns "cuda".
func (Backend) Name() string { return Name }

var (
	probeOnce sync.Once
	probed    backends.Probe
)

// Probe loads the driver and libraries (once per process) and reports the device: its
// name, memory, compute capability, and the driver, cuBLAS and NVRTC versions. It never
// fails: without a usable GPU it reports Available=false and the reason.
func (Backend) Probe() backends.Probe {
	probeOnce.Do(func() {
		probed = probe()
		probed.Priority = Priority
	})
	return probed
}

// Compile uploads g's weights to the device, checks that every op can run, and returns a
// Program. Ops the backend lacks are *backends.UnsupportedOpError.
func (b Backend) Compile(g *graph.Graph, opts backends.Options) (backends.Program, error) {
	return newProgram(b.Probe(), g, opts)
}

// precision resolves the requested matrix-product precision.
func precision(opts backends.Options) (string, error) {
	p := strings.ToLower(strings.TrimSpace(opts.Precision))
	if p == "" {
		p = strings.ToLower(strings.TrimSpace(os.Getenv(PrecisionEnv)))
	}
	switch p {
	case "", "fp32":
		return "fp32", nil
	case "tf32", "bf16":
		return p, nil
	}
	return "", &precisionError{p}
}

type precisionError struct{ p string }

func (e *precisionError) Error() string {
	if backends.Int8Precision(e.p) {
		return "cuda: precision " + e.p + " runs on the CPU backend only (--backend cpu)"
	}
	return "cuda: unknown precision " + `"` + e.p + `"` + " (want fp32, tf32 or bf16; set by Options.Precision or " + PrecisionEnv + ")"
}

// hostOps run on the host whatever their inputs: they make or inspect shapes, indices and
// masks (int64 and bool values), which are tiny. The ops with device kernels are the keys
// of gpuOps (ops.go); with only int64 or bool inputs they run on the host too.
var hostOps = map[string]bool{
	"Shape": true, "Cast": true, "Constant": true, "ConstantOfShape": true, "Range": true,
	"Equal": true, "Greater": true, "Less": true, "And": true, "Or": true, "Not": true,
	"ScatterND": true, // autodiff's embedding gradient; no device kernel yet
	"CumSum":    true, // causal linear attention's prefix sums; no device kernel yet
	// The opset-20/23 ops run through the reference until device kernels exist.
	"Gelu": true, "RMSNormalization": true, "RotaryEmbedding": true, "Attention": true,
}

// HostOps returns the ops the CUDA backend always runs on the host (through graph.EvalNode),
// sorted; the op-table coverage test counts them as supported.
func HostOps() []string { return slices.Sorted(maps.Keys(hostOps)) }

// UnsupportedOps returns the ops of graph's op table that the CUDA backend lacks, with
// neither a device kernel nor a host rule, each with the reason (none today). The op-table
// coverage test (backends/optable_test.go) accepts only these gaps.
func UnsupportedOps() map[string]string { return map[string]string{} }
