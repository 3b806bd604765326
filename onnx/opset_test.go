package onnx_test

import (
	"context"
	"encoding/json"
	"github.com/zoo-dev/zoo/internal/goldenjson"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// opsetCase is one entry of testdata/opsets/cases.json (written by gen_opsets.py).
type opsetCase struct {
	Name    string                       `json:"name"`
	Opset   int                          `json:"opset"`
	Op      string                       `json:"op"`
	Version int                          `json:"version"`
	Files   []string                     `json:"files"`
	Inputs  map[string]goldenjson.Tensor `json:"inputs"`
	Outputs map[string]goldenjson.Tensor `json:"outputs"`
}

// decodeGolden returns j's tensor or fails t.
func decodeGolden(t *testing.T, j goldenjson.Tensor) *tensor.Tensor {
	t.Helper()
	x, err := j.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func loadOpsetCases(t *testing.T) []opsetCase {
	t.Helper()
	data, err := os.ReadFile("testdata/opsets/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cs []opsetCase
	if err := json.Unmarshal(data, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// oldForm reports a node still in a form from before the opset the table follows.
func oldForm(n *graph.Node, g *graph.Graph) string {
	switch n.Op {
	case "Slice":
		if _, ok := n.Attrs["starts"]; ok {
			return "Slice keeps its starts attribute"
		}
	case "Squeeze", "Unsqueeze", "ReduceSum":
		if _, ok := n.Attrs["axes"]; ok {
			return n.Op + " keeps an axes attribute"
		}
	case "Split":
		if _, ok := n.Attrs["split"]; ok {
			return "Split keeps its split attribute"
		}
	case "ReduceMean", "ReduceMax":
		if len(n.Inputs) > 1 && n.Inputs[1] != "" && g.Initializer(n.Inputs[1]) != nil {
			return n.Op + " keeps a constant axes input"
		}
	case "Dropout":
		return "Dropout is left in the graph"
	}
	return ""
}

// TestImportOpsetForms imports every op in the form it takes at each opset from 7 to 23 (and,
// up to 16, ONNX's own up-conversion of it to 17), checks that the adapters leave only the
// form the op table holds, and runs it on the CPU backend against numpy's result.
func TestImportOpsetForms(t *testing.T) {
	be, ok := backends.Lookup("cpu")
	if !ok {
		t.Fatal("cpu backend not registered")
	}
	cases := loadOpsetCases(t)
	seen := map[int]bool{}
	for _, c := range cases {
		for _, file := range c.Files {
			t.Run(strings.TrimSuffix(file, ".onnx"), func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("testdata/opsets", file))
				if err != nil {
					t.Fatal(err)
				}
				g, err := onnx.Import(data)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(file, ".to17") {
					seen[c.Opset] = true
					if want := max(c.Opset, onnx.MinOpset); g.Opset != want {
						t.Errorf("opset %d, want %d", g.Opset, want)
					}
				}
				for _, n := range g.Nodes {
					if why := oldForm(n, g); why != "" {
						t.Errorf("node %q: %s", n.Name, why)
					}
				}
				prog, err := be.Compile(g, backends.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer prog.Close()
				in := map[string]*tensor.Tensor{}
				for name, jt := range c.Inputs {
					in[name] = decodeGolden(t, jt)
				}
				outs, err := prog.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				for name, jt := range c.Outputs {
					if d := closeTo(outs[name], decodeGolden(t, jt), 1e-6); d != "" {
						t.Errorf("output %s: %s", name, d)
					}
				}
			})
		}
	}
	var none []int
	for v := onnx.MinImportOpset; v <= onnx.MaxOpset; v++ {
		if !seen[v] {
			none = append(none, v)
		}
	}
	t.Logf("opsets without a case of their own (covered by the cases around them): %v", none)
}

// closeTo compares dtype, shape and values (floats to a relative tol).
func closeTo(got, want *tensor.Tensor, tol float64) string {
	if got == nil {
		return "missing"
	}
	if got.DType != want.DType || !tensor.SameShape(got.Shape, want.Shape) {
		return "got " + got.DType.String() + tensor.ShapeString(got.Shape) + ", want " + want.DType.String() + tensor.ShapeString(want.Shape)
	}
	for i := range want.F32 {
		if math.Abs(float64(got.F32[i]-want.F32[i])) > tol*math.Max(1, math.Abs(float64(want.F32[i]))) {
			return "float values differ"
		}
	}
	for i := range want.I64 {
		if got.I64[i] != want.I64[i] {
			return "int values differ"
		}
	}
	for i := range want.Bool {
		if got.Bool[i] != want.Bool[i] {
			return "bool values differ"
		}
	}
	return ""
}
