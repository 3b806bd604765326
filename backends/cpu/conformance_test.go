package cpu

import (
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/backendtest"
)

func TestConformance(t *testing.T) { backendtest.Run(t, Backend{}) }

// TestConformanceInt8 runs the conformance table in an int8 program: every op but the
// products by a constant matrix (MatMul, Gemm, which then run in int8) must give the fp32
// results; those are held to 1 % of max(1, |want|), int8's rounding on the table's values.
func TestConformanceInt8(t *testing.T) {
	backendtest.RunOptions(t, Backend{}, backends.Options{Precision: "int8"}, map[string]float64{"MatMul": 0.01, "Gemm": 0.01})
}
