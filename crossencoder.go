package zoo

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Option names of this file, as messages write them.
const (
	optEmbeddingOutput = "ServeOptions.EmbeddingOutput"
	optMaxTokens       = "ServeOptions.MaxTokens"
)

// EmbeddingOutputs are the names a model's own sentence embedding goes by (a
// sentence-transformers export's sentence_embedding), in order of preference.
func EmbeddingOutputs() []string { return []string{"sentence_embedding", "embeddings", "embedding"} }

// ScoreOutputs are the names a cross-encoder's score goes by, (batch, 1) or (batch, 2).
func ScoreOutputs() []string { return []string{"logits", "scores", "score"} }

// EmbeddingChoice is the output a model's sentence embeddings come from.
type EmbeddingChoice struct {
	// Output is the output's name ("" when the model has none to offer).
	Output string
	// PerToken says that Output is per token, (batch, seq, d), and is mean-pooled; else it is
	// (batch, d) and taken as it is.
	PerToken bool
	// Why says how it was chosen.
	Why string
}

// Describe is the choice's line in reports: "sentence_embedding (the model's own embedding
// output)", "mean of last_hidden_state".
func (c EmbeddingChoice) Describe() string {
	switch {
	case c.Output == "":
		return "none"
	case c.PerToken:
		return "mean of " + c.Output + " (" + c.Why + ")"
	}
	return c.Output + " (" + c.Why + ")"
}

// rank2 reports whether o is a float32 (batch, d) output.
func rank2(o graph.ValueInfo) bool { return o.DType == tensor.Float32 && len(o.Shape) == 2 }

// ChooseEmbedding returns the output of g that sentence embeddings come from: requested when
// given (a (batch, d) output as it is, a per-token (batch, seq, d) output mean-pooled), else
// the first output named as EmbeddingOutputs says that is (batch, d), else the per-token output
// pooling reads (PooledOutput). BERT's pooler_output is never chosen unless requested: it is
// a next-sentence head, not a sentence embedding. A requested name that is no float32 output
// of rank 2 or 3 is an *InputError naming ServeOptions.EmbeddingOutput.
func ChooseEmbedding(g *graph.Graph, requested string) (EmbeddingChoice, error) {
	if requested != "" {
		for _, o := range g.Outputs {
			if o.Name != requested {
				continue
			}
			switch {
			case rank2(o):
				return EmbeddingChoice{Output: o.Name, Why: "given by " + optEmbeddingOutput}, nil
			case o.DType == tensor.Float32 && len(o.Shape) == 3:
				return EmbeddingChoice{Output: o.Name, PerToken: true, Why: "given by " + optEmbeddingOutput}, nil
			}
			return EmbeddingChoice{}, inputErrf(optEmbeddingOutput, "%s %s: output %s %s %s is neither (batch, d) nor (batch, seq, d) float32", optEmbeddingOutput, requested, o.Name, o.DType, o.Shape)
		}
		return EmbeddingChoice{}, inputErrf(optEmbeddingOutput, "%s %s: model %s has no such output (outputs: %s)", optEmbeddingOutput, requested, g.Name, outputList(g))
	}
	if own := ownEmbedding(g); own != "" {
		return EmbeddingChoice{Output: own, Why: "the model's own embedding output"}, nil
	}
	if from := PooledOutput(g); from != "" {
		return EmbeddingChoice{Output: from, PerToken: true, Why: "the model has no embedding output of its own"}, nil
	}
	return EmbeddingChoice{}, nil
}

// ownEmbedding returns the first output of g named as EmbeddingOutputs says that is float32
// (batch, d), or "".
func ownEmbedding(g *graph.Graph) string {
	for _, name := range EmbeddingOutputs() {
		for _, o := range g.Outputs {
			if o.Name == name && rank2(o) {
				return o.Name
			}
		}
	}
	return ""
}

// ScoreOutput returns the output of g that holds a cross-encoder's score: the first named as
// ScoreOutputs says that is float32 (batch, 1) or (batch, 2); "" when g has none.
func ScoreOutput(g *graph.Graph) string {
	for _, name := range ScoreOutputs() {
		for _, o := range g.Outputs {
			if o.Name == name && rank2(o) && o.Shape[1].Known() && (o.Shape[1].Size == 1 || o.Shape[1].Size == 2) {
				return o.Name
			}
		}
	}
	return ""
}

// ServeMaxLen returns the most tokens a served sequence of the model called name may hold:
// requested when given, else the model's maximum length (its inputs' static length, else
// maxLen when > 0, else the rows of its position table), else 512. A requested length that
// is negative or longer than the model takes is an *InputError naming ServeOptions.MaxTokens.
func ServeMaxLen(name string, maxLen int, plan *FeedPlan, requested int) (int, error) {
	limit, from := plan.Limit(maxLen)
	switch {
	case requested < 0:
		return 0, inputErrf(optMaxTokens, "%s must not be negative, got %d", optMaxTokens, requested)
	case requested == 0 && limit > 0:
		return limit, nil
	case requested == 0:
		return 512, nil
	case limit > 0 && requested > limit:
		return 0, inputErrf(optMaxTokens, "%s %d is longer than %s's maximum length %d (%s)", optMaxTokens, requested, name, limit, from)
	}
	return requested, nil
}

// pairEncoder returns the model's tokenizer as a pair encoder, or an *InputError naming the
// tokenizer option when it has no pair template.
func pairEncoder(name string, tk *Tokenizer) (tokenize.PairEncoder, error) {
	pe, ok := tk.Tokenizer.(tokenize.PairEncoder)
	if !ok {
		return nil, inputErrf(optTokenizer, "model %s's tokenizer (%s) encodes no pairs: give a tokenizer.json or vocab.txt with %s", name, tk.Describe(), optTokenizer)
	}
	return pe, nil
}

// Ranked is one text's place in a ranking.
type Ranked struct {
	// Index is the text's index among those passed.
	Index int
	// Logit is the model's score of the pair (one logit; of two, the second minus the first).
	Logit float64
	// Score is the sigmoid of Logit: a relevance in (0, 1).
	Score float64
}

// ScorePairs returns the logit of each pair of texts, encoded as one sequence as a
// cross-encoder reads a query and a passage (the tokenizer's pair template, with its token
// type ids fed to the model's types input): the model's score output (ScoreOutputs) holds
// one logit per pair, taken as it is, or two, whose difference is taken. A pair longer than
// the window is an *InputError unless EncoderOptions.Truncate (then the longer text is cut
// first, as Hugging Face's tokenizers cut pairs). A model without a score output, or a
// tokenizer without a pair template, is an *InputError.
func (e *Encoder) ScorePairs(ctx context.Context, pairs ...[2]string) ([]float64, error) {
	score := ScoreOutput(e.m.graph)
	if score == "" {
		return nil, inputErrf("", "model %s is not a cross-encoder: it has no output named %s of shape (batch, 1) or (batch, 2) (it has %s)", e.m.Name(), strings.Join(ScoreOutputs(), ", "), outputList(e.m.graph))
	}
	pe, err := pairEncoder(e.m.Name(), e.tok)
	if err != nil {
		return nil, err
	}
	cut := 0
	if e.opts.Truncate {
		cut = e.window
	}
	limit := e.plan.VocabRows
	if limit == 0 {
		limit = e.tok.VocabSize()
	}
	type pairWin struct{ ids, types []int64 }
	wins := make([]pairWin, len(pairs))
	for i, p := range pairs {
		ids, types, _, err := pe.EncodePair(p[0], p[1], cut)
		if err != nil {
			return nil, inputErrf("", "pair %d: %v", i, err)
		}
		if len(ids) > e.window {
			return nil, &InputError{Option: optTruncate, Err: &TooLongError{Index: i, Text: p[1], Window: e.window, Tokens: len(ids), Pair: true}}
		}
		for _, id := range ids {
			if id < 0 || id >= int64(limit) {
				return nil, inputErrf(optTokenizer, "pair %d: the tokenizer's id %d is outside model %s's vocabulary of %d", i, id, e.m.Name(), limit)
			}
		}
		wins[i] = pairWin{ids, types}
	}
	out := make([]float64, 0, len(pairs))
	pad := e.tok.PadID()
	for lo := 0; lo < len(wins); lo += e.batch {
		hi := min(lo+e.batch, len(wins))
		ws := make([]window, hi-lo)
		for k := range ws {
			ws[k] = window{ids: wins[lo+k].ids}
		}
		b := stack(ws, pad)
		b.Types = make([]int64, len(b.Tokens))
		for k := range ws {
			copy(b.Types[k*b.N:], wins[lo+k].types)
		}
		res, err := e.run(ctx, b)
		if err != nil {
			return nil, err
		}
		t := res.Outputs[score]
		if t == nil || len(t.Shape) != 2 || t.Shape[0] != b.B {
			return nil, fmt.Errorf("model %s's output %s is not (%d, 1|2)", e.m.Name(), score, b.B)
		}
		per := t.Shape[1]
		for r := 0; r < b.B; r++ {
			v := t.F32[r*per : (r+1)*per]
			if per == 2 {
				out = append(out, float64(v[1])-float64(v[0]))
			} else {
				out = append(out, float64(v[0]))
			}
		}
	}
	return out, nil
}

// Rerank scores each text against query with ScorePairs and returns the texts ranked by
// score, highest first (ties in the texts' order).
func (e *Encoder) Rerank(ctx context.Context, query string, texts ...string) ([]Ranked, error) {
	pairs := make([][2]string, len(texts))
	for i, t := range texts {
		pairs[i] = [2]string{query, t}
	}
	logits, err := e.ScorePairs(ctx, pairs...)
	if err != nil {
		return nil, err
	}
	out := make([]Ranked, len(logits))
	for i, l := range logits {
		out[i] = Ranked{Index: i, Logit: l, Score: 1 / (1 + math.Exp(-l))}
	}
	slices.SortStableFunc(out, func(a, b Ranked) int {
		switch {
		case a.Logit > b.Logit:
			return -1
		case a.Logit < b.Logit:
			return 1
		}
		return 0
	})
	return out, nil
}
