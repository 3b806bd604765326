package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// flagFeed overrides the guessed role of a model input.
var flagFeed = &cli.StringSliceFlag{Name: "feed", Usage: "feed input NAME the role ROLE, `NAME=ROLE` (repeatable; roles: " + roleList + ")"}

// Pooling modes of --pool.
const (
	poolNone = "none"
	poolMean = "mean"
	poolCLS  = "cls"
)

// poolOutputName is the output that holds pooled sentence embeddings, (windows, d).
const poolOutputName = "embedding"

// tokenOutputs are the per-token outputs pooled, in order of preference: zoo's and Hugging
// Face's names for the last layer's output.
var tokenOutputs = []string{variant.OutputHidden, "last_hidden_state", "token_embeddings"}

// pooler turns a per-token output into one embedding per window, as sentence-transformers'
// Pooling does: the mean over the window's real tokens (its special tokens included, as the
// attention mask marks them), or the first token; then optionally L2-normalised.
type pooler struct {
	mode      string
	normalize bool
	from      string // the output pooled
}

// parsePool checks --pool and --normalize.
func parsePool(mode string, normalize bool) (*pooler, error) {
	switch mode {
	case poolNone, poolMean, poolCLS:
	default:
		return nil, fmt.Errorf("--pool %q: want mean, cls or none", mode)
	}
	if normalize && mode == poolNone {
		return nil, fmt.Errorf("--normalize applies to pooled embeddings: give --pool mean or --pool cls")
	}
	return &pooler{mode: mode, normalize: normalize}, nil
}

// resolve picks the output to pool from g's outputs: hidden, last_hidden_state or
// token_embeddings, else the only float32 output of rank 3. It is an error when none fits or
// when g already has an output named embedding.
func (p *pooler) resolve(g *graph.Graph) error {
	if p.mode == poolNone {
		return nil
	}
	var rank3 []string
	for _, o := range g.Outputs {
		if o.Name == poolOutputName {
			return fmt.Errorf("--pool: model %s already has an output named %s", g.Name, poolOutputName)
		}
		if o.DType == tensor.Float32 && len(o.Shape) == 3 {
			rank3 = append(rank3, o.Name)
		}
	}
	for _, name := range tokenOutputs {
		for _, o := range g.Outputs {
			if o.Name == name {
				p.from = name
				return nil
			}
		}
	}
	if len(rank3) == 1 {
		p.from = rank3[0]
		return nil
	}
	return fmt.Errorf("--pool: model %s has no per-token output to pool (want one named %s, or a single float32 (batch, seq, d) output; it has %s)", g.Name, strings.Join(tokenOutputs, ", "), outputList(g))
}

func outputList(g *graph.Graph) string {
	var parts []string
	for _, o := range g.Outputs {
		parts = append(parts, fmt.Sprintf("%s %s", o.Name, o.Shape))
	}
	return strings.Join(parts, ", ")
}

// describe is the pooling's line in a report ("" without pooling).
func (p *pooler) describe() string {
	if p.mode == poolNone {
		return ""
	}
	s := p.mode + " of " + p.from
	if p.normalize {
		s += ", L2-normalised"
	}
	return s + " → " + poolOutputName
}

// add computes the pooled embeddings of a batch's windows into outs[embedding].
func (p *pooler) add(outs map[string]*tensor.Tensor, b *tokenize.Batch) error {
	if p.mode == poolNone {
		return nil
	}
	h := outs[p.from]
	if h == nil || h.DType != tensor.Float32 || len(h.Shape) != 3 || h.Shape[0] != b.B || h.Shape[1] != b.N {
		return fmt.Errorf("--pool: output %s is not (%d, %d, d) float32", p.from, b.B, b.N)
	}
	d := h.Shape[2]
	e := &tensor.Tensor{DType: tensor.Float32, Shape: []int{b.B, d}, F32: make([]float32, b.B*d)}
	acc := make([]float64, d)
	for i := 0; i < b.B; i++ {
		clear(acc)
		l := b.Lengths[i]
		if p.mode == poolCLS {
			l = min(l, 1)
		}
		for j := 0; j < l; j++ {
			for k, v := range h.F32[(i*b.N+j)*d : (i*b.N+j+1)*d] {
				acc[k] += float64(v)
			}
		}
		// sentence-transformers divides by max(count, 1e-9): an empty window pools to zeros.
		count := math.Max(float64(l), 1e-9)
		var norm float64
		for k := range acc {
			acc[k] /= count
			norm += acc[k] * acc[k]
		}
		// F.normalize: x / max(‖x‖, 1e-12).
		scale := 1.0
		if p.normalize {
			scale = 1 / math.Max(math.Sqrt(norm), 1e-12)
		}
		for k, v := range acc {
			e.F32[i*d+k] = float32(v * scale)
		}
	}
	outs[poolOutputName] = e
	return nil
}

// selectOutput returns the output a .npy file holds: --select when given (an output of g, or
// embedding with --pool), else hidden, else embedding with --pool, else g's only output.
func selectOutput(g *graph.Graph, selected string, p *pooler) (string, error) {
	var names []string
	for _, o := range g.Outputs {
		names = append(names, o.Name)
	}
	if p.mode != poolNone {
		names = append(names, poolOutputName)
	}
	switch {
	case selected != "" && slices.Contains(names, selected):
		return selected, nil
	case selected != "":
		return "", fmt.Errorf("--select %q: model %s has no such output (outputs: %s)", selected, g.Name, strings.Join(names, ", "))
	case slices.Contains(names, variant.OutputHidden):
		return variant.OutputHidden, nil
	case p.mode != poolNone:
		return poolOutputName, nil
	case len(names) == 1:
		return names[0], nil
	}
	return "", fmt.Errorf("a .npy file holds one output and model %s has %d (%s): choose one with --select NAME", g.Name, len(names), strings.Join(names, ", "))
}
