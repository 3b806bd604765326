// Package serve serves encoders over HTTP and gRPC: the Open Inference Protocol (KServe v2)
// REST endpoints (http.go), OpenAI's /v1/embeddings and /v1/models as the official SDKs call
// them (openai.go), text-embeddings-inference's /embed, /rerank, /tokenize, /info and /health
// (tei.go), the protocol's gRPC service (grpc.go), the request decoder (decode.go), dynamic
// batching by length buckets with a bounded queue (batch.go) and Prometheus metrics
// (metrics.go). Every request is bounded before it runs: tokens per sequence (Info.MaxLen),
// sequences and tokens per request, values per answer (Config).
//
// The package depends on an Encoder, a small interface: it knows nothing of variants,
// backends, ONNX or tokenizer files. A program builds its encoders (zoo serve loads and
// compiles zoo's models and hands each over as a Funcs), passes them to New, and mounts
// Server.Handler in its own HTTP server and Server.RegisterGRPC in its own gRPC server (or
// uses Server.GRPC, or Server.Serve for both with a bounded drain). An Encoder may also be a
// PairTokenizer (for /rerank), a Truncator and a TokenLister. The package never prints,
// exits or reads flags or the environment; lifecycle lines go to Config.Logger and request
// lines to Config.AccessLog when they are set.
//
// deploy.go writes the serving configurations of an exported model (Triton's config.pbtxt,
// KServe's resources and the image that carries the model).
package serve

import (
	"context"
	"fmt"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Names of the protocol's inputs, and of the pooled output.
const (
	// InputTokens is the token ids input, INT64 (B, n).
	InputTokens = "tokens"
	// InputPadding is the optional padding mask of InputTokens, BOOL (B, n), true at padding.
	InputPadding = "key_padding_mask"
	// InputText is the texts input, BYTES (B), tokenized by Encoder.Tokenize.
	InputText = "text"
	// OutputPooled is the pooled embedding output, FP32 (B, d).
	OutputPooled = "embedding"
)

// The pooling modes Encoder.Pool is asked for.
const (
	// PoolMean averages the rows of a sequence's positions.
	PoolMean = "mean"
	// PoolCLS takes the row of a sequence's first position.
	PoolCLS = "cls"
)

// Output describes one output of a model: its name, its shape with -1 for a dynamic axis,
// and whether axis 1 is the sequence (then each sequence's rows are its first l positions).
type Output struct {
	// Name is the output's name in requests and answers.
	Name string
	// Shape is the output's shape, batch axis first, -1 for a dynamic axis.
	Shape []int64
	// Seq says that axis 1 is the sequence: the output is per token.
	Seq bool
}

// Info describes an encoder to the server. New reads it once, through Encoder.Info.
type Info struct {
	// Name is the name clients use (/v2/models/NAME, "model" of the embeddings endpoints);
	// it must not be empty, and two encoders of one server must not share it.
	Name string
	// Outputs are the float32 outputs Run returns (their shapes reported in /v2/models/NAME).
	Outputs []Output
	// Vocab bounds token ids, 0 ≤ id < Vocab; it must be at least 1. A request with an id
	// outside is answered 400.
	Vocab int
	// MaxLen bounds a sequence's length in tokens (0: no bound). A longer sequence is
	// answered 400, unless a /embed request asks to truncate.
	MaxLen int
	// MaxBatch caps the sequences of one Run below Config.MaxBatch (0: no cap of its own).
	MaxBatch int
	// Pad is the token id written at the padded positions of a Run's batch.
	Pad int64
	// PoolFrom names the per-token output (an Output with Seq set) that embeddings pool;
	// "" when the model has none, and then the embeddings endpoints (unless Embedding is set)
	// and the pooled output answer 400.
	PoolFrom string
	// Embedding names an output (B, d), not per token, that is the model's own sentence
	// embedding (a sentence-transformers export's sentence_embedding): the embeddings
	// endpoints answer it, L2-normalised when the request asks, instead of pooling PoolFrom.
	// "" pools PoolFrom by the mean.
	Embedding string
	// Score names the output (B, 1) or (B, 2) of a cross-encoder: one relevance logit per
	// pair, or two class logits whose difference is the logit. /rerank needs it, and an
	// Encoder that is a PairTokenizer.
	Score string
	// DType is the type the model computes in, for /info ("": float32).
	DType string
}

// PairTokenizer is an Encoder that encodes a pair of texts as one sequence, as a
// cross-encoder reads a query and a passage: the tokenizer's pair template ([CLS] a [SEP] b
// [SEP] for BERT) with its token type ids. /rerank needs it.
type PairTokenizer interface {
	// TokenizePair encodes a and b into ids in [0, Vocab) and their token type ids. When
	// truncate is above 0, the longer text loses tokens first until the pair, special tokens
	// included, holds at most truncate tokens (Hugging Face's longest_first). An error is the
	// texts' fault: the request is answered 400 with it.
	TokenizePair(a, b string, truncate int) (ids, types []int64, err error)
}

// Encoder is one compiled model as the server runs it: the contract between this package and
// whatever computes the numbers. The server calls Tokenize, Fits and Pool from request
// goroutines, concurrently; Run only from the model's batcher, one batch at a time.
type Encoder interface {
	// Info describes the encoder; New calls it once.
	Info() Info
	// Tokenize encodes a text with the tokenizer's special tokens into ids in [0, Vocab).
	// An error is the text's fault: the request is answered 400 with it.
	Tokenize(text string) ([]int64, error)
	// Run runs one batch padded to its longest sequence: b.B rows of b.N tokens, b.Tokens
	// row-major with b.Lengths real tokens per row, then Info.Pad where b.Mask is true (the
	// server reads b after Run returns: Run must not change it). It returns every one of
	// Info.Outputs as a float32 tensor with b.B rows (and, for a per-token output, at least
	// b.N positions). An error, or a missing or misshapen output, fails the batch's requests
	// with 500. Run should return when ctx ends.
	Run(ctx context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error)
	// Fits returns nil when a batch of batch sequences of n tokens fits in the memory
	// available, else an error saying why. A request whose longest sequence does not fit
	// alone is answered 413; a batch that does not fit is run in halves, and a single
	// sequence that no longer fits is answered 503. An encoder without a memory bound
	// returns nil.
	Fits(batch, n int) error
	// Pool pools hidden, (1, l, d): one sequence's rows of Info.PoolFrom, into (1, d) by mode
	// (PoolMean or PoolCLS), L2-normalised when normalize is set. An error fails the request
	// with 500.
	Pool(hidden *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error)
}

// Truncator is an Encoder whose tokenizer puts special tokens around a text: Truncate cuts
// the ids Tokenize returned to n tokens, keeping them ([CLS] and [SEP] stay, the text's
// tokens before [SEP] go). An Encoder without it is cut to its first n ids.
type Truncator interface {
	Truncate(ids []int64, n int) []int64
}

// Funcs is an Encoder made of Info's fields and functions, for a program that has its model
// as closures (zoo serve does). New refuses a Funcs without TokenizeFunc, RunFunc or
// PoolFunc; a nil FitsFunc means that every batch fits.
type Funcs struct {
	// Name, Outputs, Vocab, MaxLen, MaxBatch, Pad and PoolFrom are Info's.
	Name          string
	Outputs       []Output
	Vocab, MaxLen int
	MaxBatch      int
	Pad           int64
	PoolFrom      string
	Embedding     string
	Score         string
	DType         string

	// TokenizeFunc, RunFunc, FitsFunc and PoolFunc are the Encoder's methods of those names;
	// TokenizePairFunc is PairTokenizer's (nil: the model encodes no pairs).
	TokenizeFunc     func(text string) ([]int64, error)
	TokenizePairFunc func(a, b string, truncate int) (ids, types []int64, err error)
	// TruncateFunc is Truncator's Truncate (nil: the first n ids).
	TruncateFunc func(ids []int64, n int) []int64
	// TokensFunc is TokenLister's Tokens (nil: the ids of TokenizeFunc, without texts).
	TokensFunc func(text string, special bool) ([]Token, error)
	RunFunc    func(ctx context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error)
	FitsFunc   func(batch, n int) error
	PoolFunc   func(hidden *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error)
}

// Info returns f's fields as an Info.
func (f *Funcs) Info() Info {
	return Info{Name: f.Name, Outputs: f.Outputs, Vocab: f.Vocab, MaxLen: f.MaxLen, MaxBatch: f.MaxBatch, Pad: f.Pad, PoolFrom: f.PoolFrom,
		Embedding: f.Embedding, Score: f.Score, DType: f.DType}
}

// Tokens calls TokensFunc; without one it returns TokenizeFunc's ids without their texts.
func (f *Funcs) Tokens(text string, special bool) ([]Token, error) {
	if f.TokensFunc != nil {
		return f.TokensFunc(text, special)
	}
	ids, err := f.Tokenize(text)
	toks := make([]Token, len(ids))
	for i, id := range ids {
		toks[i] = Token{ID: id}
	}
	return toks, err
}

// Truncate calls TruncateFunc; without one it keeps the first n ids.
func (f *Funcs) Truncate(ids []int64, n int) []int64 {
	if f.TruncateFunc == nil {
		return ids[:n:n]
	}
	return f.TruncateFunc(ids, n)
}

// TokenizePair calls TokenizePairFunc; without one it returns an error.
func (f *Funcs) TokenizePair(a, b string, truncate int) ([]int64, []int64, error) {
	if f.TokenizePairFunc == nil {
		return nil, nil, f.missing("TokenizePairFunc")
	}
	return f.TokenizePairFunc(a, b, truncate)
}

// Tokenize calls TokenizeFunc; without one it returns an error.
func (f *Funcs) Tokenize(text string) ([]int64, error) {
	if f.TokenizeFunc == nil {
		return nil, f.missing("TokenizeFunc")
	}
	return f.TokenizeFunc(text)
}

// Run calls RunFunc; without one it returns an error.
func (f *Funcs) Run(ctx context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error) {
	if f.RunFunc == nil {
		return nil, f.missing("RunFunc")
	}
	return f.RunFunc(ctx, b)
}

// Fits calls FitsFunc; without one every batch fits (nil).
func (f *Funcs) Fits(batch, n int) error {
	if f.FitsFunc == nil {
		return nil
	}
	return f.FitsFunc(batch, n)
}

// Pool calls PoolFunc; without one it returns an error.
func (f *Funcs) Pool(hidden *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error) {
	if f.PoolFunc == nil {
		return nil, f.missing("PoolFunc")
	}
	return f.PoolFunc(hidden, mode, normalize)
}

func (f *Funcs) missing(field string) error {
	return fmt.Errorf("serve: model %s has no %s", f.Name, field)
}

// check returns an error naming the first function a server cannot run without.
func (f *Funcs) check() error {
	if f.TokenizeFunc == nil || f.RunFunc == nil || f.PoolFunc == nil {
		return fmt.Errorf("serve: model %s lacks TokenizeFunc, RunFunc or PoolFunc", f.Name)
	}
	return nil
}

// DuplicateNameError is New's error when two encoders share Name.
type DuplicateNameError struct {
	Name string
}

// Error says which name two encoders share.
func (e *DuplicateNameError) Error() string { return fmt.Sprintf("serve: two models named %s", e.Name) }

// model is an encoder as the server holds it: its Info, read once, the encoder, its pair
// tokenizer (nil when it encodes no pairs) and the server's limits per request.
type model struct {
	Info
	enc  Encoder
	pair PairTokenizer
	lim  limits
}

// limits bound one request before any work: its sequences, its tokens and its answer's
// values.
type limits struct {
	seqs, tokens int
	answer       int64 // float32 values
}

// newModel reads enc's Info and returns an error naming the first thing a server cannot run
// without.
func newModel(enc Encoder) (*model, error) {
	if enc == nil {
		return nil, fmt.Errorf("serve: a nil Encoder")
	}
	if f, ok := enc.(*Funcs); ok {
		if f == nil {
			return nil, fmt.Errorf("serve: a nil *Funcs")
		}
		if err := f.check(); err != nil {
			return nil, err
		}
	}
	m := &model{Info: enc.Info(), enc: enc}
	m.Outputs = append([]Output(nil), m.Outputs...)
	if p, ok := enc.(PairTokenizer); ok {
		if f, isFuncs := enc.(*Funcs); !isFuncs || f.TokenizePairFunc != nil {
			m.pair = p
		}
	}
	switch {
	case m.Name == "":
		return nil, fmt.Errorf("serve: a model without a name")
	case m.Vocab < 1:
		return nil, fmt.Errorf("serve: model %s has no vocabulary size", m.Name)
	case m.MaxLen < 0 || m.MaxBatch < 0:
		return nil, fmt.Errorf("serve: model %s has a negative MaxLen or MaxBatch", m.Name)
	}
	for _, c := range []struct {
		field, name string
		perToken    bool
	}{{"PoolFrom", m.PoolFrom, true}, {"Embedding", m.Embedding, false}, {"Score", m.Score, false}} {
		if c.name == "" {
			continue
		}
		o, ok := m.output(c.name)
		switch {
		case !ok:
			return nil, fmt.Errorf("serve: model %s's %s %q is none of its outputs", m.Name, c.field, c.name)
		case o.Seq != c.perToken:
			return nil, fmt.Errorf("serve: model %s's %s %q is %s", m.Name, c.field, c.name, map[bool]string{true: "per token", false: "not per token"}[o.Seq])
		}
	}
	return m, nil
}

// fitsAlone returns a 413 when the longest of seqs would not fit in memory even alone.
func (m *model) fitsAlone(seqs [][]int64) error {
	n := 0
	for _, s := range seqs {
		n = max(n, len(s))
	}
	if err := m.enc.Fits(1, n); err != nil {
		return &httpError{code: 413, msg: fmt.Sprintf("model %s cannot run a sequence of %d tokens in the memory available: %v", m.Name, n, err)}
	}
	return nil
}

// output returns the output named name, or false.
func (m *model) output(name string) (Output, bool) {
	for _, o := range m.Outputs {
		if o.Name == name {
			return o, true
		}
	}
	return Output{}, false
}

// checkCount refuses, with a 413 naming the limit, a request of more sequences than one
// request may hold; it runs before anything is tokenized or allocated per sequence.
func (m *model) checkCount(n int) error {
	if m.lim.seqs > 0 && n > m.lim.seqs {
		return &httpError{code: 413, msg: fmt.Sprintf("%d sequences in one request, over the server's limit of %d per request", n, m.lim.seqs)}
	}
	return nil
}

// checkTokens refuses, with a 413 naming the limit, a request of more tokens in all than one
// request may hold.
func (m *model) checkTokens(total int) error {
	if m.lim.tokens > 0 && total > m.lim.tokens {
		return &httpError{code: 413, msg: fmt.Sprintf("%d tokens in one request, over the server's limit of %d per request", total, m.lim.tokens)}
	}
	return nil
}

// checkAnswer refuses, with a 413 naming the limit, a request whose answer would hold more
// float32 values than the limit.
func (m *model) checkAnswer(values int64) error {
	if m.lim.answer > 0 && values > m.lim.answer {
		return &httpError{code: 413, msg: fmt.Sprintf("the answer would hold %d values, over the server's limit of %d per answer; ask for fewer outputs or fewer sequences", values, m.lim.answer)}
	}
	return nil
}

// perRow is the number of values an output holds per row (per position of a per-token
// output), from its static axes; -1 when an axis is dynamic.
func perRow(o Output) int64 {
	from := 1
	if o.Seq {
		from = 2
	}
	n := int64(1)
	for _, d := range o.Shape[min(from, len(o.Shape)):] {
		if d < 1 {
			return -1
		}
		n *= d
	}
	return n
}

// tooLong is the answer to a sequence over the model's maximum length.
func (m *model) tooLong(what string, n int) error {
	return &httpError{code: 413, msg: fmt.Sprintf("%s is %d tokens, over model %s's limit of %d tokens per sequence; ask to truncate (\"truncate\": true) or send less", what, n, m.Name, m.MaxLen)}
}

// truncate cuts ids to n tokens, with the encoder's Truncator when it has one.
func (m *model) truncate(ids []int64, n int) []int64 {
	if t, ok := m.enc.(Truncator); ok {
		if out := t.Truncate(ids, n); len(out) <= n {
			return out
		}
	}
	return ids[:n:n]
}
