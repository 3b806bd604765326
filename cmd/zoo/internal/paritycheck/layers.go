package paritycheck

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/parity"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// LayerValue is one intermediate value compared by `zoo parity --layers`.
type LayerValue struct {
	Label string // "layers.3" or the producing node's name
	Value string // the value's name in the graph
}

// LayerValues returns the layer outputs a variant recorded in the graph's metadata, in
// layer order; for graphs without them (files from PyTorch), every LayerNormalization output.
func LayerValues(g *graph.Graph) []LayerValue {
	var out []LayerValue
	for key, value := range g.Meta {
		if i, ok := strings.CutPrefix(key, nn.LayerOutputMeta); ok {
			out = append(out, LayerValue{Label: "layers." + i, Value: value})
		}
	}
	if len(out) > 0 {
		sort.Slice(out, func(a, b int) bool {
			ia, _ := strconv.Atoi(strings.TrimPrefix(out[a].Label, "layers."))
			ib, _ := strconv.Atoi(strings.TrimPrefix(out[b].Label, "layers."))
			return ia < ib
		})
		return out
	}
	for _, n := range g.Nodes {
		if n.Op == "LayerNormalization" {
			out = append(out, LayerValue{Label: n.Name, Value: n.Outputs[0]})
		}
	}
	return out
}

// ExportWithOutputs exports g with the layer values added as graph outputs, so that ONNX
// Runtime returns them (producer: the exporting program's version); the graph zoo compiles
// is g itself, with the values kept.
func ExportWithOutputs(g *graph.Graph, layers []LayerValue, producer string) ([]byte, error) {
	g2 := *g
	g2.Outputs = append([]graph.ValueInfo{}, g.Outputs...)
	declared := map[string]bool{}
	for _, o := range g.Outputs {
		declared[o.Name] = true
	}
	for _, l := range layers {
		if !declared[l.Value] {
			g2.Outputs = append(g2.Outputs, graph.ValueInfo{Name: l.Value, DType: tensor.Float32})
			declared[l.Value] = true
		}
	}
	return onnx.Export(&g2, onnx.ExportOptions{Opset: g.Opset, ProducerVersion: producer})
}

// ValidFor returns the (batch, seq) validity mask when t is laid out (batch, seq, ...), and
// nil (compare everything) otherwise.
func ValidFor(t *tensor.Tensor, valid []bool) []bool {
	if t == nil || len(t.Shape) < 2 || valid == nil || len(valid) != t.Shape[0]*t.Shape[1] {
		return nil
	}
	return valid
}

// RenderLayers prints a per-layer table (max error, minimum tolerance, verdict) before the
// usual per-output report, and names the first layer that diverges (JSON: {"layers": [...]}
// and the report's fields).
func RenderLayers(w io.Writer, layers, outputs []parity.Result, opts parity.RenderOptions) error {
	if opts.JSON {
		return format.WriteJSON(w, struct {
			Layers []parity.Result `json:"layers"`
			parity.Report
		}{layers, parity.NewReport(outputs, opts)})
	}
	fmt.Fprintf(w, "Per-layer comparison (%s)\n", format.Plural(len(layers), "value"))
	first := ""
	for _, r := range layers {
		verdict := "PASSED"
		if !r.Pass {
			verdict = "FAILED"
			if first == "" {
				first = r.Name
			}
		}
		fmt.Fprintf(w, "  %-40s max abs %.3g at %v, mean abs %.3g, min atol %.3g  %s\n", r.Name, r.MaxAbs, r.MaxAbsAt, r.MeanAbs, r.MinAtol, verdict)
	}
	if first != "" {
		fmt.Fprintf(w, "  first divergent layer: %s\n", first)
	} else {
		fmt.Fprintln(w, "  every layer matches")
	}
	fmt.Fprintln(w)
	return parity.Render(w, outputs, opts)
}
