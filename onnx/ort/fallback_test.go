//go:build cgo

package ort

import (
	"errors"
	"slices"
	"strings"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestOptimizerFallback: when ONNX Runtime fails to load a graph at its default optimization
// level (as its extended level does on some valid graphs), the session is made at level
// basic, and Note says so with ONNX Runtime's error.
func TestOptimizerFallback(t *testing.T) {
	rt, err := Open()
	if errors.Is(err, ErrNotFound) {
		t.Skipf("ONNX Runtime not found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2))
	b.Output("y", b.Op("Relu", []string{x}, nil), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := onnx.Export(g, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	real := createSession
	t.Cleanup(func() { createSession = real })
	var levels []ortgo.GraphOptimizationLevel
	createSession = func(model []byte, in, out []string, opts SessionOptions, level ortgo.GraphOptimizationLevel) (*ortgo.DynamicAdvancedSession, error) {
		levels = append(levels, level)
		if level < 0 {
			return nil, errors.New("Slice node. Name:'x' Status Message: Starts must be a 1-D array\nmore")
		}
		return real(model, in, out, opts, level)
	}
	s, err := rt.NewSession(data, SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(levels) != 2 || levels[1] != ortgo.GraphOptimizationLevelEnableBasic {
		t.Errorf("levels tried %v, want the default then basic", levels)
	}
	if n := s.Note(); !strings.Contains(n, "level basic") || !strings.Contains(n, "Starts must be a 1-D array") || strings.Contains(n, "\n") {
		t.Errorf("note %q, want one line naming level basic and the default level's error", n)
	}
	in, _ := tensor.FromFloat32([]float32{-1, 2}, 2)
	out, err := s.Run(map[string]*tensor.Tensor{"x": in}, nil)
	if err != nil || out["y"].F32[0] != 0 || out["y"].F32[1] != 2 {
		t.Errorf("run at level basic: %v, %v", out["y"], err)
	}
}

// TestOptimizerFallbackAtRun: ONNX Runtime 1.30 loads Gather(table, Range(0, n)) with
// Range's bounds given as one-element vectors, but its extended optimizer has fused the two
// into a Slice whose starts it unsqueezed to (1, 1), and the run fails ("Starts must be a 1-D
// array"). The session runs the graph again at level basic, keeps that level, and Note says so;
// a run that fails at every level (the input's fault) is reported as it was.
func TestOptimizerFallbackAtRun(t *testing.T) {
	rt, err := Open()
	if errors.Is(err, ErrNotFound) {
		t.Skipf("ONNX Runtime not found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b := graph.NewBuilder("g")
	n := b.Input("n", tensor.Int64, graph.Fixed(1))
	table, _ := tensor.FromFloat32([]float32{0, 1, 2, 3, 4, 5, 6, 7}, 4, 2)
	start, _ := tensor.FromInt64([]int64{0}, 1)
	delta, _ := tensor.FromInt64([]int64{1}, 1)
	rows := b.Op("Range", []string{b.Param("start", start), n, b.Param("delta", delta)}, nil)
	b.Output("y", b.Op("Gather", []string{b.Param("table", table), rows}, nil), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := onnx.Export(g, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.NewSession(data, SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Note() != "" {
		t.Fatalf("note %q before any run", s.Note())
	}
	for run := range 2 {
		three, _ := tensor.FromInt64([]int64{3}, 1)
		out, err := s.Run(map[string]*tensor.Tensor{"n": three}, nil)
		if err != nil || !slices.Equal(out["y"].Shape, []int{3, 2}) || out["y"].F32[5] != 5 {
			t.Fatalf("run %d: %v, %v", run, out["y"], err)
		}
		if n := s.Note(); !strings.Contains(n, "level basic") || !strings.Contains(n, "Starts must be a 1-D array") || strings.Contains(n, "\n") {
			t.Errorf("run %d: note %q, want one line naming level basic and the default level's error", run, n)
		}
	}
	five, _ := tensor.FromInt64([]int64{5}, 1) // beyond the table's 4 rows at every level
	if _, err := s.Run(map[string]*tensor.Tensor{"n": five}, nil); err == nil {
		t.Error("a run past the table's rows succeeded")
	}
}
