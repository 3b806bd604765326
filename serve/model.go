// Package serve is the machinery of `zoo serve`: the Open Inference Protocol (KServe v2) REST
// endpoints, OpenAI's /v1/embeddings and text-embeddings-inference's /embed (http.go), the
// request decoder (decode.go), dynamic batching by length buckets with a bounded queue
// (batch.go) and Prometheus metrics (metrics.go). The command in cmd/zoo/serve.go loads and
// compiles the models and hands each over as a Model; this package knows nothing of
// variants, backends or tokenizer files.
package serve

import (
	"context"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Names of the protocol's inputs, and of the pooled output.
const (
	InputTokens  = "tokens"
	InputPadding = "key_padding_mask"
	InputText    = "text"
	OutputPooled = "embedding"
)

// Output describes one output of a model: its name, its shape with -1 for a dynamic axis,
// and whether axis 1 is the sequence (then each sequence's rows are its first l positions).
type Output struct {
	Name  string
	Shape []int64
	Seq   bool
}

// Model is one compiled model as the server runs it.
type Model struct {
	// Name is the name clients use (/v2/models/NAME, "model").
	Name string
	// Outputs are the float32 outputs Run returns.
	Outputs []Output
	// Vocab bounds token ids (0 ≤ id < Vocab); MaxLen bounds a sequence's length (0: none).
	Vocab, MaxLen int
	// MaxBatch caps sequences per Run below the server's --max-batch (0: no cap of its own).
	MaxBatch int
	// Pad is the id written at padded positions.
	Pad int64
	// PoolFrom is the per-token output pooled into embeddings ("" when the model has none).
	PoolFrom string
	// Tokenize encodes a text with the tokenizer's special tokens.
	Tokenize func(text string) ([]int64, error)
	// Run runs one padded batch; every output has b.B rows.
	Run func(ctx context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error)
	// Fits, when set, returns an error saying why a batch of batch sequences of n tokens
	// would not fit in the memory available (nil when it would). A request whose longest
	// sequence does not fit alone is refused (413); a batch that does not fit is run in
	// halves, and a single sequence that no longer fits is answered 503.
	Fits func(batch, n int) error
	// Pool pools hidden, (1, l, d), into (1, d) by mode ("mean" or "cls"), L2-normalised
	// when normalize is set.
	Pool func(hidden *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error)
}

// check returns an error naming the first field a server cannot run without.
func (m *Model) check() error {
	switch {
	case m.Name == "":
		return fmt.Errorf("serve: a model without a name")
	case m.Run == nil || m.Tokenize == nil || m.Pool == nil:
		return fmt.Errorf("serve: model %s lacks Run, Tokenize or Pool", m.Name)
	case m.Vocab < 1:
		return fmt.Errorf("serve: model %s has no vocabulary size", m.Name)
	}
	return nil
}

// fitsAlone returns a 413 when the longest of seqs would not fit in memory even alone.
func (m *Model) fitsAlone(seqs [][]int64) error {
	if m.Fits == nil {
		return nil
	}
	n := 0
	for _, s := range seqs {
		n = max(n, len(s))
	}
	if err := m.Fits(1, n); err != nil {
		return &httpError{code: 413, msg: fmt.Sprintf("model %s cannot run a sequence of %d tokens in the memory available: %v", m.Name, n, err)}
	}
	return nil
}

// output returns the output named name, or false.
func (m *Model) output(name string) (Output, bool) {
	for _, o := range m.Outputs {
		if o.Name == name {
			return o, true
		}
	}
	return Output{}, false
}
