package cuda_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/backendtest"
	"github.com/zoo-dev/zoo/backends/cuda"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestProbe checks that probing never fails and always explains itself.
func TestProbe(t *testing.T) {
	p := cuda.Backend{}.Probe()
	if p.Priority <= 10 {
		t.Errorf("priority %d does not rank above the CPU backend (10)", p.Priority)
	}
	if p.Available {
		t.Logf("CUDA available: %s (%s)", p.Device, p.Level)
		if !strings.Contains(p.Device, "compute ") || !strings.Contains(p.Device, "driver ") || !strings.Contains(p.Device, "cuBLAS ") || !strings.Contains(p.Device, "NVRTC ") {
			t.Errorf("Device %q lacks compute capability, driver or library versions", p.Device)
		}
		return
	}
	if p.Reason == "" {
		t.Fatal("unavailable without a reason")
	}
	t.Logf("CUDA unavailable: %s", p.Reason)
	if _, err := os.Stat("/dev/nvidiactl"); err != nil && !hasLib("libcuda.so.1") {
		// No driver on this machine: the reason must say exactly that (or that cgo is off).
		if !strings.Contains(p.Reason, "libcuda.so.1 not found: no NVIDIA driver installed") && !strings.Contains(p.Reason, "built without cgo") &&
			!strings.Contains(p.Reason, "supports Linux only") {
			t.Errorf("reason %q does not say that the driver is missing", p.Reason)
		}
	}
}

func hasLib(name string) bool {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

// TestCompileUnavailable checks that compiling without a GPU is a clear error.
func TestCompileUnavailable(t *testing.T) {
	p := cuda.Backend{}.Probe()
	if p.Available {
		t.Skip("a CUDA device is present")
	}
	b := graph.NewBuilder("relu")
	x := b.Input("x", tensor.Float32, graph.Fixed(2))
	b.Output("y", b.Relu(x), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = cuda.Backend{}.Compile(g, backends.Options{})
	if err == nil || !strings.Contains(err.Error(), p.Reason) {
		t.Fatalf("Compile: err = %v, want it to carry %q", err, p.Reason)
	}
}

// TestRegistered checks that importing the package makes "cuda" selectable by name.
func TestRegistered(t *testing.T) {
	b, ok := backends.Lookup(cuda.Name)
	if !ok {
		t.Fatal("cuda is not registered")
	}
	t.Setenv("ZOO_BACKEND", "")
	t.Setenv(backends.ConfigEnv, filepath.Join(t.TempDir(), "none.yaml"))
	c, err := backends.Select("cuda")
	if b.Probe().Available {
		if err != nil || c.Backend.Name() != cuda.Name {
			t.Fatalf("Select(cuda) = %v, %v", c.Backend, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "backend cuda (--backend) is not available on this machine: ") {
		t.Fatalf("Select(cuda) without a GPU: err = %v", err)
	}
}

// TestConformance runs the shared backend suite on the GPU, or says why it cannot.
func TestConformance(t *testing.T) {
	p := cuda.Backend{}.Probe()
	if !p.Available {
		if os.Getenv(GPUTestsEnv) == "1" {
			t.Fatalf("%s=1 but no usable CUDA device: %s", GPUTestsEnv, p.Reason)
		}
		t.Skipf("no usable CUDA device: %s", p.Reason)
	}
	t.Logf("running on %s", p.Device)
	backendtest.Run(t, cuda.Backend{})
}

// TestKernelsParse parses kernels.cu as C++ with g++ and a few stand-in declarations: a
// syntax and type check of the CUDA C for machines without nvcc or NVRTC.
func TestKernelsParse(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not found")
	}
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	out, err := exec.Command(gxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-Wno-unknown-pragmas",
		"-x", "c++", "-include", "testdata/cuda_prelude.h", "kernels.cu").CombinedOutput()
	if err != nil {
		t.Fatalf("kernels.cu does not parse: %v\n%s", err, out)
	}
}
