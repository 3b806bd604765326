package lmdata

import (
	"fmt"
	"strconv"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/initrand"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// DropoutFeeds returns the values of a training graph's dropout inputs (variant.DropoutInput)
// for step k (1-based) of a batch of B rows of N tokens: each element is 0 with probability p,
// the graph's variant.MetaDropout, and 1/(1 − p) otherwise (inverted dropout, as nn.Dropout),
// drawn from the stream initrand.New(seed, "dropout/k/INPUT"), so a step's masks depend on
// the seed, the step and the site alone. A graph without dropout inputs gives an empty map;
// a rate that is missing or outside [0, 1), or an input whose last dimension is not fixed, is
// an error naming it.
func DropoutFeeds(g *graph.Graph, seed uint64, step, B, N int) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	var p float64
	for _, in := range g.Inputs {
		if !variant.IsDropoutInput(in.Name) {
			continue
		}
		if len(out) == 0 {
			var err error
			p, err = strconv.ParseFloat(g.Meta[variant.MetaDropout], 64)
			if err != nil || !(p >= 0 && p < 1) {
				return nil, fmt.Errorf("lmdata: training graph has dropout inputs but its %q metadata %q is not a rate in [0, 1)", variant.MetaDropout, g.Meta[variant.MetaDropout])
			}
		}
		if len(in.Shape) != 3 || !in.Shape[2].Known() {
			return nil, fmt.Errorf("lmdata: dropout input %s has shape %v, want (batch, seq, d) with d fixed", in.Name, in.Shape)
		}
		d := int(in.Shape[2].Size)
		t, err := tensor.New(tensor.Float32, B, N, d)
		if err != nil {
			return nil, fmt.Errorf("lmdata: dropout input %s: %w", in.Name, err)
		}
		r := initrand.New(seed, fmt.Sprintf("dropout/%d/%s", step, in.Name))
		scale := float32(1 / (1 - p))
		for j := range t.F32 {
			if r.Float64() >= p {
				t.F32[j] = scale
			}
		}
		out[in.Name] = t
	}
	return out, nil
}
