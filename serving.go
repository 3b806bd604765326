package zoo

import (
	"context"
	"fmt"

	"github.com/zoo-dev/zoo/serve"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// ServeEncoder returns the model as the encoder package serve runs, under name: requests are
// tokenized with the model's tokenizer and its special tokens, fed by role, padded to static
// shapes, run on the model's program (compiled here, so that a server starts ready) and
// pooled as an Encoder pools; a batch that would not fit in memory is refused before it runs.
// The model must not be closed while the server uses it. A model that does not take text, or
// whose weights alone do not fit in memory, is an *InputError.
func (m *Model) ServeEncoder(ctx context.Context, name string) (serve.Encoder, error) {
	tk, err := m.Tokenizer()
	if err != nil {
		return nil, err
	}
	plan, err := PlanFeeds(m.graph, nil)
	if err != nil {
		return nil, inputErr("", err)
	}
	maxLen, err := ChooseWindow(m.Name(), m.MaxLen(), plan, 0)
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
	return &serve.Funcs{Name: name, Outputs: outputs, Vocab: limit, MaxLen: maxLen, MaxBatch: plan.Batch, Pad: pad, PoolFrom: PooledOutput(m.graph),
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
			for _, id := range ids {
				if id < 0 || id >= int64(limit) {
					return nil, fmt.Errorf("the tokenizer's id %d is outside model %s's vocabulary of %d", id, name, limit)
				}
			}
			return ids, nil
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
	}, nil
}
