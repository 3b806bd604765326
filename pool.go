package zoo

import (
	"fmt"
	"math"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Pool says how an Encoder turns a window's per-token outputs into one embedding.
type Pool string

// Pooling modes. The zero value is PoolNone.
const (
	PoolNone Pool = "none" // no embedding: per-token outputs only
	PoolMean Pool = "mean" // the mean over the window's real tokens (special tokens included)
	PoolCLS  Pool = "cls"  // the first token
)

// PoolOutput is the output that holds pooled embeddings, (windows, d).
const PoolOutput = "embedding"

// TokenOutputs are the per-token outputs pooled, in order of preference: zoo's and Hugging
// Face's names for the last layer's output.
func TokenOutputs() []string {
	return []string{variant.OutputHidden, "last_hidden_state", "token_embeddings"}
}

// pooler turns a per-token output into one embedding per window, as sentence-transformers'
// Pooling does: the mean over the window's real tokens (its special tokens included, as the
// attention mask marks them), or the first token; then optionally L2-normalised.
type pooler struct {
	mode      Pool
	normalize bool
	from      string // the output pooled
	own       string // the model's own embedding output, named in the description ("" when none)
}

// newPooler checks a pooling mode and normalisation and picks the output of g to pool:
// hidden, last_hidden_state or token_embeddings, else the only float32 output of rank 3. A
// mode other than PoolNone, PoolMean and PoolCLS, normalisation without pooling, a model with
// no output to pool or one that has an output named embedding already are *InputError.
func newPooler(g *graph.Graph, mode Pool, normalize bool) (*pooler, error) {
	switch mode {
	case "":
		mode = PoolNone
	case PoolNone, PoolMean, PoolCLS:
	default:
		return nil, inputErrf(optPool, "%s %q: want mean, cls or none", optPool, mode)
	}
	if normalize && mode == PoolNone {
		return nil, inputErrf(optNormalize, "%s applies to pooled embeddings: give %s mean or %s cls", optNormalize, optPool, optPool)
	}
	p := &pooler{mode: mode, normalize: normalize}
	if mode == PoolNone {
		return p, nil
	}
	p.own = ownEmbedding(g)
	var rank3 []string
	for _, o := range g.Outputs {
		if o.Name == PoolOutput {
			return nil, inputErrf(optPool, "%s: model %s already has an output named %s", optPool, g.Name, PoolOutput)
		}
		if o.DType == tensor.Float32 && len(o.Shape) == 3 {
			rank3 = append(rank3, o.Name)
		}
	}
	for _, name := range TokenOutputs() {
		for _, o := range g.Outputs {
			if o.Name == name {
				p.from = name
				return p, nil
			}
		}
	}
	if len(rank3) == 1 {
		p.from = rank3[0]
		return p, nil
	}
	return nil, inputErrf(optPool, "%s: model %s has no per-token output to pool (want one named %s, or a single float32 (batch, seq, d) output; it has %s)", optPool, g.Name, strings.Join(TokenOutputs(), ", "), outputList(g))
}

func outputList(g *graph.Graph) string {
	var parts []string
	for _, o := range g.Outputs {
		parts = append(parts, fmt.Sprintf("%s %s", o.Name, o.Shape))
	}
	return strings.Join(parts, ", ")
}

// PooledOutput returns the per-token output of g that pooling reads (hidden,
// last_hidden_state, token_embeddings, else the only float32 rank-3 output), or "" when g has
// none.
func PooledOutput(g *graph.Graph) string {
	p, err := newPooler(g, PoolMean, false)
	if err != nil {
		return ""
	}
	return p.from
}

// PoolTensor pools one window's per-token output, hidden (1, l, d) float32, over its l tokens
// into (1, d) by mode (PoolMean or PoolCLS), L2-normalised when normalize is set, as an
// Encoder pools.
func PoolTensor(hidden *tensor.Tensor, mode Pool, normalize bool) (*tensor.Tensor, error) {
	if len(hidden.Shape) != 3 {
		return nil, fmt.Errorf("pool: want a (1, l, d) output, got shape %v", hidden.Shape)
	}
	p := &pooler{mode: mode, normalize: normalize, from: "hidden"}
	l := hidden.Shape[1]
	outs := map[string]*tensor.Tensor{"hidden": hidden}
	if err := p.add(outs, &tokenize.Batch{B: 1, N: l, Lengths: []int{l}}); err != nil {
		return nil, err
	}
	return outs[PoolOutput], nil
}

// describe is the pooling's line in a report: "mean of hidden, L2-normalised → embedding", or
// "" without pooling.
func (p *pooler) describe() string {
	if p.mode == PoolNone {
		return ""
	}
	s := string(p.mode) + " of " + p.from
	if p.normalize {
		s += ", L2-normalised"
	}
	s += " → " + PoolOutput
	if p.own != "" {
		s += " (the model's own sentence embedding is its output " + p.own + ", which zoo serve answers)"
	}
	return s
}

// add pools outs[p.from] over each window of b (its real tokens, b.Lengths) into
// outs[PoolOutput], (b.B, d), accumulating in float64.
func (p *pooler) add(outs map[string]*tensor.Tensor, b *tokenize.Batch) error {
	if p.mode == PoolNone {
		return nil
	}
	h := outs[p.from]
	if h == nil || h.DType != tensor.Float32 || len(h.Shape) != 3 || h.Shape[0] != b.B || h.Shape[1] != b.N {
		return fmt.Errorf("pool: output %s is not (%d, %d, d) float32", p.from, b.B, b.N)
	}
	d := h.Shape[2]
	e := &tensor.Tensor{DType: tensor.Float32, Shape: []int{b.B, d}, F32: make([]float32, b.B*d)}
	acc := make([]float64, d)
	for i := 0; i < b.B; i++ {
		clear(acc)
		l := b.Lengths[i]
		if p.mode == PoolCLS {
			l = min(l, 1)
		}
		for j := 0; j < l; j++ {
			for k, v := range h.F32[(i*b.N+j)*d : (i*b.N+j+1)*d] {
				acc[k] += float64(v)
			}
		}
		count := math.Max(float64(l), 1e-9)
		var norm float64
		for k := range acc {
			acc[k] /= count
			norm += acc[k] * acc[k]
		}
		scale := 1.0
		if p.normalize {
			scale = 1 / math.Max(math.Sqrt(norm), 1e-12)
		}
		for k, v := range acc {
			e.F32[i*d+k] = float32(v * scale)
		}
	}
	outs[PoolOutput] = e
	return nil
}
