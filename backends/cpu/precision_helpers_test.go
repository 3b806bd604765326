package cpu_test

import (
	"context"
	"sort"
	"testing"

	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// smallBuiltins returns the built-in variants' names, sorted, for the reduced-precision
// program tests, with their common inputs: batch 2, n 40, the second sequence 35 long.
func smallBuiltins() ([]string, map[string]*tensor.Tensor) {
	names := make([]string, 0, len(variants.Builtin()))
	for name := range variants.Builtin() {
		names = append(names, name)
	}
	sort.Strings(names)
	in := encoderInputs(2, 40)
	mask := in[variant.InputKeyPadding].Bool
	for i := 35; i < 40; i++ {
		mask[40+i] = true
	}
	return names, in
}

// smallBuiltin builds the named variant at 2 layers of width 64 (4 heads, d_ff 128), seed 3.
func smallBuiltin(t *testing.T, name string) *graph.Graph {
	t.Helper()
	v := variants.Builtin()[name]
	cfg, err := variant.Resolve(v.Describe(), map[string]any{"layers": int64(2), "d_model": int64(64), "heads": int64(4), "d_ff": int64(128)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
