package graph_test

import (
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Validate checks nodes against the op table.
func TestValidateAgainstOpTable(t *testing.T) {
	x := graph.ValueInfo{Name: "x", DType: tensor.Float32, Shape: graph.Shape{graph.Fixed(2)}}
	cases := []struct {
		name  string
		opset int
		node  *graph.Node
		want  string // "" for a valid graph
	}{
		{"valid", 17, &graph.Node{Name: "n", Op: "Softmax", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: graph.Attrs{"axis": graph.Int(0)}}, ""},
		{"undeclared attribute kept", 17, &graph.Node{Name: "n", Op: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: graph.Attrs{"note": graph.String("x")}}, ""},
		{"attribute kind", 17, &graph.Node{Name: "n", Op: "Softmax", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: graph.Attrs{"axis": graph.Float(0)}}, `attribute "axis" of Softmax must be int, got float`},
		{"required attribute", 17, &graph.Node{Name: "n", Op: "Cast", Inputs: []string{"x"}, Outputs: []string{"y"}}, `needs the int attribute "to"`},
		{"empty required input", 17, &graph.Node{Name: "n", Op: "Add", Inputs: []string{"x", ""}, Outputs: []string{"y"}}, "required input 1 (B)"},
		{"arity", 17, &graph.Node{Name: "n", Op: "Add", Inputs: []string{"x"}, Outputs: []string{"y"}}, "has 1 inputs, Add takes 2"},
		{"opset too old", 13, &graph.Node{Name: "n", Op: "LayerNormalization", Inputs: []string{"x", "x"}, Outputs: []string{"y"}}, "opsets 17 to"},
		{"opset 0 is not checked", 0, &graph.Node{Name: "n", Op: "LayerNormalization", Inputs: []string{"x", "x"}, Outputs: []string{"y"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &graph.Graph{Name: "t", Opset: tc.opset, Inputs: []graph.ValueInfo{x}, Nodes: []*graph.Node{tc.node}, Outputs: []graph.ValueInfo{{Name: "y"}}}
			err := g.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"n"`)):
				t.Fatalf("got %v, want an error naming node \"n\" and mentioning %q", err, tc.want)
			}
		})
	}
}
