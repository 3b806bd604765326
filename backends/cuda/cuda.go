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
// the small shape computations run through the CPU reference backend. Matrix products go
// to cuBLAS; everything else runs in zoo's kernels on one stream per program, with pinned
// staging buffers for inputs and outputs.
package cuda

import (
	"strings"
	"sync"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// Name is the name the backend registers under.
const Name = "cuda"

// Priority ranks the backend above the CPU backend (10) for automatic selection.
const Priority = 100

// PrecisionEnv sets the default matrix-product precision ("fp32", "tf32" or "bf16") when
// backends.Options.Precision is empty.
const PrecisionEnv = env.CUDAPrecision

// DeviceEnv selects the device ordinal (default 0); CUDA_VISIBLE_DEVICES also applies.
const DeviceEnv = env.CUDADevice

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
	return compile(b.Probe(), g, opts)
}

// precision resolves the requested matrix-product precision.
func precision(opts backends.Options) (string, error) {
	p := strings.ToLower(strings.TrimSpace(opts.Precision))
	if p == "" {
		v, _ := env.Get(PrecisionEnv)
		p = strings.ToLower(v)
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
	return "cuda: unknown precision " + `"` + e.p + `"` + " (want fp32, tf32 or bf16; set by Options.Precision or " + PrecisionEnv + ")"
}

// hostOps run on the host whatever their inputs: they make or inspect shapes, indices and
// masks (int64 and bool values), which are tiny.
var hostOps = map[string]bool{
	"Shape": true, "Cast": true, "Constant": true, "ConstantOfShape": true, "Range": true,
	"Equal": true, "Greater": true, "Less": true, "And": true, "Or": true, "Not": true,
}

// gpuOpNames lists the ops with device kernels; with only int64 or bool inputs they run on
// the host too.
var gpuOpNames = []string{
	"Abs", "Neg", "Exp", "Log", "Sqrt", "Erf", "Tanh", "Sigmoid", "Relu", "Elu",
	"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where",
	"MatMul", "Gemm", "Softmax", "LayerNormalization",
	"Gather", "Transpose", "Slice", "Concat", "Split", "Expand", "Tile",
	"Reshape", "Squeeze", "Unsqueeze", "Identity",
	"ReduceSum", "ReduceMean", "ReduceMax",
}

// SupportedOps returns the op types the CUDA backend accepts (device kernels and host ops).
func SupportedOps() []string {
	out := append([]string(nil), gpuOpNames...)
	for op := range hostOps {
		out = append(out, op)
	}
	return out
}

func isGPUOp(op string) bool {
	for _, o := range gpuOpNames {
		if o == op {
			return true
		}
	}
	return false
}
