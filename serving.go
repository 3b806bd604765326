package zoo

import (
	"context"
	"fmt"

	"github.com/zoo-dev/zoo/serve"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// ServeOptions say how ServeEncoderWith serves a model. The zero value serves the model's own
// embedding output when it has one and its whole maximum length.
type ServeOptions struct {
	// EmbeddingOutput names the output sentence embeddings come from ("": as ChooseEmbedding
	// chooses: the model's own sentence_embedding, embeddings or embedding, else the mean of
	// its per-token output; never pooler_output).
	EmbeddingOutput string
	// MaxTokens bounds a served sequence, special tokens included (0: the model's maximum
	// length, as ServeMaxLen says).
	MaxTokens int
}

// ServeEncoder is ServeEncoderWith with the zero ServeOptions.
func (m *Model) ServeEncoder(ctx context.Context, name string) (serve.Encoder, error) {
	return m.ServeEncoderWith(ctx, name, ServeOptions{})
}

// ServeEncoderWith returns the model as the encoder package serve runs, under name: requests
// are tokenized with the model's tokenizer and its special tokens (pairs with its pair
// template, for /rerank, when the model has a score output), fed by role, padded to static
// shapes, run on the model's program (compiled here, so that a server starts ready) and
// answered with the embedding output opts choose; a batch that would not fit in memory is
// refused before it runs. The model must not be closed while the server uses it. A model that
// does not take text, whose weights alone do not fit in memory, or options that do not fit
// the model are an *InputError.
func (m *Model) ServeEncoderWith(ctx context.Context, name string, opts ServeOptions) (serve.Encoder, error) {
	tk, err := m.Tokenizer()
	if err != nil {
		return nil, err
	}
	plan, err := PlanFeeds(m.graph, nil)
	if err != nil {
		return nil, inputErr("", err)
	}
	maxLen, err := ServeMaxLen(m.Name(), m.MaxLen(), plan, opts.MaxTokens)
	if err != nil {
		return nil, err
	}
	emb, err := ChooseEmbedding(m.graph, opts.EmbeddingOutput)
	if err != nil {
		return nil, err
	}
	limit := tk.VocabSize()
	if plan.VocabRows > 0 {
		limit = plan.VocabRows
	} else if v := m.config.Int(vocabParam); v > 0 {
		limit = v
	}
	pad := tk.PadID()
	seq := SeqAligned(m.graph, plan.Seq)
	var outputs []serve.Output
	for _, o := range m.graph.Outputs {
		if o.DType != tensor.Float32 {
			continue
		}
		shape := []int64{-1, -1}
		if o.Shape != nil {
			shape = make([]int64, len(o.Shape))
			for i, d := range o.Shape {
				shape[i] = -1
				if d.Known() {
					shape[i] = d.Size
				}
			}
		}
		outputs = append(outputs, serve.Output{Name: o.Name, Shape: shape, Seq: seq[o.Name]})
	}
	// The memory guard of an Encoder, at start for the weights (one token), then per request
	// and per batch (Fits).
	if err := GuardMemory(m.Name(), m.graph, MemoryRun{Batch: 1, N: 1, Shapes: plan.Shapes}); err != nil {
		return nil, err
	}
	if _, err := m.Compile(ctx); err != nil {
		return nil, err
	}
	checkIDs := func(ids []int64) error {
		for _, id := range ids {
			if id < 0 || id >= int64(limit) {
				return fmt.Errorf("the tokenizer's id %d is outside model %s's vocabulary of %d", id, name, limit)
			}
		}
		return nil
	}
	prefix, suffix := tk.Affixes()
	f := &serve.Funcs{Name: name, Outputs: outputs, Vocab: limit, MaxLen: maxLen, MaxBatch: plan.Batch, Pad: pad, PoolFrom: PooledOutput(m.graph),
		Score: ScoreOutput(m.graph), DType: servedDType(m.opts.Precision),
		FitsFunc: func(batch, n int) error {
			short, err := MemoryShortfall(m.graph, MemoryRun{Batch: batch, N: n, Shapes: plan.Shapes})
			if err != nil || short == "" {
				return err
			}
			return fmt.Errorf("a batch of %d × %d tokens needs %s", batch, n, short)
		},
		TokenizeFunc: func(text string) ([]int64, error) {
			ids, _, err := tk.Encode(text)
			if err != nil {
				return nil, err
			}
			return ids, checkIDs(ids)
		},
		TruncateFunc: func(ids []int64, n int) []int64 {
			p, s := len(prefix.IDs), len(suffix.IDs)
			if n <= p+s || len(ids) < p+s {
				return ids[:n:n]
			}
			return append(ids[:n-s:n-s], ids[len(ids)-s:]...)
		},
		TokensFunc: func(text string, special bool) ([]serve.Token, error) {
			encode := tk.EncodeRaw
			if special {
				encode = tk.Encode
			}
			ids, toks, err := encode(text)
			if err != nil {
				return nil, err
			}
			out := make([]serve.Token, len(ids))
			for i, id := range ids {
				out[i] = serve.Token{ID: id, Text: toks[i], Special: special && (i < len(prefix.IDs) || i >= len(ids)-len(suffix.IDs))}
			}
			return out, nil
		},
		RunFunc: func(ctx context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error) {
			if plan.Seq > 0 {
				b = PadBatch(b, plan.Seq, pad)
			}
			inputs, err := plan.Tensors(b, pad)
			if err != nil {
				return nil, err
			}
			outs, err := m.run(ctx, inputs)
			if err != nil {
				return nil, err
			}
			return CropRows(outs, b.B), nil
		},
		PoolFunc: func(hidden *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error) {
			return PoolTensor(hidden, Pool(mode), normalize)
		},
	}
	if emb.PerToken {
		f.PoolFrom = emb.Output
	} else {
		f.Embedding = emb.Output
	}
	if pe, ok := tk.Tokenizer.(tokenize.PairEncoder); ok && f.Score != "" {
		f.TokenizePairFunc = func(a, b string, truncate int) ([]int64, []int64, error) {
			ids, types, _, err := pe.EncodePair(a, b, truncate)
			if err != nil {
				return nil, nil, err
			}
			return ids, types, checkIDs(ids)
		}
	}
	return f, nil
}

// servedDType is the type /info reports for a precision.
func servedDType(precision string) string {
	if precision == "bf16" {
		return "bfloat16"
	}
	return "float32"
}
