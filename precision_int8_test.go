package zoo_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// noInt8 is a backend whose probe names no int8 path (as the cuda backend's does).
type noInt8 struct{}

func (noInt8) Name() string { return "gpu" }
func (noInt8) Probe() backends.Probe {
	return backends.Probe{Available: true, Int8Reason: "the backend names no int8 path"}
}
func (noInt8) Compile(*graph.Graph, backends.Options) (backends.Program, error) {
	return nil, errors.New("not compiled in this test")
}

func TestCheckPrecisionInt8(t *testing.T) {
	cpu, err := backends.Select("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := zoo.CheckPrecision(cpu, "int8"); err != nil {
		t.Errorf("cpu (int8 path %q): %v", cpu.Probe.Int8, err)
	}
	err = zoo.CheckPrecision(backends.Choice{Backend: noInt8{}, Probe: noInt8{}.Probe()}, "int8")
	var ie *zoo.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "backend gpu has no int8 path") ||
		!strings.Contains(err.Error(), "its int8 path here: "+cpu.Probe.Int8) || !strings.Contains(err.Error(), "set LoadOptions.Backend cpu") || strings.Contains(err.Error(), "\n") {
		t.Errorf("got %v; want one line naming the backend, the cpu's int8 path %q and LoadOptions.Backend", err, cpu.Probe.Int8)
	}
}
