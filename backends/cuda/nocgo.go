//go:build !cgo || !linux

package cuda

import (
	"fmt"
	"runtime"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
)

func probe() backends.Probe {
	if runtime.GOOS != "linux" {
		return backends.Probe{Reason: "the CUDA backend supports Linux only (this is " + runtime.GOOS + ")"}
	}
	return backends.Probe{Reason: "built without cgo (CGO_ENABLED=0): rebuild zoo with cgo to use CUDA"}
}

func newProgram(p backends.Probe, _ *graph.Graph, _ backends.Options) (backends.Program, error) {
	return nil, fmt.Errorf("cuda: not available on this machine: %s", p.Reason)
}

// SupportedOps returns nil: a build without cgo (or off Linux) runs no op on the GPU.
func SupportedOps() []string { return nil }
