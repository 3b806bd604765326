package main

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
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// layerValue is one intermediate value compared by `zoo parity --layers`.
type layerValue struct {
	Label string // "layers.3" or the producing node's name
	Value string // the value's name in the graph
}

// layerValues returns the layer outputs a variant recorded in the graph's metadata, in layer
// order; for graphs without them (files from PyTorch), every LayerNormalization output.
func layerValues(g *graph.Graph) []layerValue {
	var out []layerValue
	for key, value := range g.Meta {
		if i, ok := strings.CutPrefix(key, nn.LayerOutputMeta); ok {
			out = append(out, layerValue{Label: "layers." + i, Value: value})
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
			out = append(out, layerValue{Label: n.Name, Value: n.Outputs[0]})
		}
	}
	return out
}

// exportWithOutputs exports g with the layer values added as graph outputs, so that ONNX
// Runtime returns them; the graph zoo compiles is g itself, with the values kept.
func exportWithOutputs(g *graph.Graph, layers []layerValue) ([]byte, error) {
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
	return onnx.Export(&g2, onnx.ExportOptions{Opset: g.Opset, ProducerVersion: version})
}

// validFor returns the (batch, seq) validity mask when t is laid out (batch, seq, ...), and
// nil (compare everything) otherwise.
func validFor(t *tensor.Tensor, valid []bool) []bool {
	if t == nil || len(t.Shape) < 2 || valid == nil || len(valid) != t.Shape[0]*t.Shape[1] {
		return nil
	}
	return valid
}

// sampleBatch cuts consecutive pieces of the given lengths from text into one padded batch.
func sampleBatch(text []byte, lengths ...int) *tokenize.Batch {
	n := 0
	for _, l := range lengths {
		n = max(n, l)
	}
	b := &tokenize.Batch{B: len(lengths), N: n, Tokens: make([]int64, len(lengths)*n), Mask: make([]bool, len(lengths)*n)}
	off := 0
	for row, l := range lengths {
		ids := tokenize.Encode(text[off%len(text) : min(off%len(text)+l, len(text))])
		copy(b.Tokens[row*n:], ids)
		for i := len(ids); i < n; i++ {
			b.Mask[row*n+i] = true
		}
		b.Lengths = append(b.Lengths, len(ids))
		b.Offsets = append(b.Offsets, int64(off))
		off += l
	}
	return b
}

// renderLayers prints a per-layer table (max error, minimum tolerance, verdict) before the
// usual per-output report, and names the first layer that diverges.
func renderLayers(w io.Writer, layers, outputs []parity.Result, opts parity.RenderOptions) error {
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
