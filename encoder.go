package zoo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// EncoderOptions say how an Encoder cuts, feeds and pools text. The zero value feeds windows
// of min(512, the model's maximum length) tokens, 8 at a time, without pooling.
type EncoderOptions struct {
	// Window is the tokens per window, special tokens included (0: the inputs' static length,
	// else min(512, the model's maximum length)).
	Window int
	// Batch is the windows per run (0: 8, or the inputs' static batch).
	Batch int
	// Pool turns each window's per-token output into one embedding (output "embedding").
	Pool Pool
	// Normalize L2-normalises the pooled embeddings.
	Normalize bool
	// Truncate keeps the first window of a text longer than the window, where Embed and Encode
	// would refuse it.
	Truncate bool
	// Feeds name the role of inputs whose role zoo would guess wrong, "NAME=ROLE" (roles: ids,
	// mask, padding, types, positions).
	Feeds []string
	// MaxWindows stops Stream after this many windows (0: the whole input).
	MaxWindows int
}

// defaultBatch is the windows per run when EncoderOptions.Batch is 0.
const defaultBatch = 8

// Encoder encodes text with a model: it tokenizes, cuts windows with the tokenizer's special
// tokens in each, feeds every input by its role, runs the model and pools. An Encoder is safe
// for concurrent use; runs take turns on the model's program.
type Encoder struct {
	m      *Model
	tok    *Tokenizer
	plan   *FeedPlan
	pool   *pooler
	window int
	batch  int
	opts   EncoderOptions
}

// NewEncoder checks opts against the model and returns an encoder. The model's tokenizer that
// cannot be loaded, inputs whose roles cannot be told, a window longer than the model's maximum
// length, a batch that its static inputs do not allow, or pooling the model has no output for
// are *InputError naming the option.
func (m *Model) NewEncoder(opts EncoderOptions) (*Encoder, error) {
	tok, err := m.Tokenizer()
	if err != nil {
		return nil, err
	}
	plan, err := PlanFeeds(m.graph, opts.Feeds)
	if err != nil {
		return nil, inputErr(optFeeds, err)
	}
	switch {
	case opts.Batch < 0:
		return nil, inputErrf(optBatch, "%s must be at least 1, got %d", optBatch, opts.Batch)
	case opts.MaxWindows < 0:
		return nil, inputErrf(optMaxWin, "%s must not be negative, got %d", optMaxWin, opts.MaxWindows)
	case plan.Batch > 0 && opts.Batch > 0 && opts.Batch != plan.Batch:
		return nil, inputErrf(optBatch, "%s %d: %s's inputs are fixed at batch %d (omit %s)", optBatch, opts.Batch, m.Name(), plan.Batch, optBatch)
	}
	batch := opts.Batch
	switch {
	case plan.Batch > 0:
		batch = plan.Batch
	case batch == 0:
		batch = defaultBatch
	}
	window, err := m.chooseWindow(plan, opts.Window)
	if err != nil {
		return nil, err
	}
	pool, err := newPooler(m.graph, opts.Pool, opts.Normalize)
	if err != nil {
		return nil, err
	}
	return &Encoder{m: m, tok: tok, plan: plan, pool: pool, window: window, batch: batch, opts: opts}, nil
}

// chooseWindow is ChooseWindow for the model.
func (m *Model) chooseWindow(plan *FeedPlan, requested int) (int, error) {
	return ChooseWindow(m.Name(), m.MaxLen(), plan, requested)
}

// ChooseWindow returns the window length of the model called name, fed as plan says:
// requested when given, else the inputs' static length, else min(512, the maximum length:
// maxLen when > 0 (a variant's or zoo file's max_len), else the rows of the graph's position
// table). A window that is negative or longer than the model takes is an *InputError.
func ChooseWindow(name string, maxLen int, plan *FeedPlan, requested int) (int, error) {
	from := "max_len"
	if maxLen == 0 && plan.MaxLen > 0 {
		maxLen, from = plan.MaxLen, plan.MaxLenWhy()
	}
	if requested < 0 {
		return 0, inputErrf(optWindow, "%s must be positive, got %d", optWindow, requested)
	}
	if plan.Seq > 0 {
		if requested > plan.Seq {
			return 0, inputErrf(optWindow, "%s %d is longer than the %d tokens %s's inputs are fixed at", optWindow, requested, plan.Seq, name)
		}
		if requested == 0 {
			return plan.Seq, nil
		}
		return requested, nil
	}
	if requested == 0 {
		requested = 512
		if maxLen > 0 && maxLen < requested {
			requested = maxLen
		}
		return requested, nil
	}
	if maxLen > 0 && requested > maxLen {
		return 0, inputErrf(optWindow, "%s %d is longer than %s's maximum length %d (%s)", optWindow, requested, name, maxLen, from)
	}
	return requested, nil
}

// Model is the encoder's model.
func (e *Encoder) Model() *Model { return e.m }

// Tokenizer is the tokenizer the encoder cuts text with.
func (e *Encoder) Tokenizer() *Tokenizer { return e.tok }

// Plan is how the encoder feeds the model's inputs.
func (e *Encoder) Plan() *FeedPlan { return e.plan }

// Window is the tokens per window; Batch the windows per run.
func (e *Encoder) Window() int { return e.window }

// Batch is the windows per run.
func (e *Encoder) Batch() int { return e.batch }

// Pooling describes the pooling for reports ("mean of hidden, L2-normalised → embedding"), or
// is "" without pooling.
func (e *Encoder) Pooling() string { return e.pool.describe() }

// SeqOutputs tells, for each output a Batch carries, whether its axis 1 is the sequence axis
// (one value per token); an output absent from the map is decided from its first batch.
func (e *Encoder) SeqOutputs() map[string]bool {
	s := SeqAligned(e.m.graph, e.plan.Seq)
	if e.pool.mode != PoolNone {
		s[PoolOutput] = false
	}
	return s
}

// CheckMemory refuses, with an *InputError that says how much memory it would take and which
// option lowers it, a run of batch windows of n tokens that does not fit in the memory
// available (see GuardMemory).
func (e *Encoder) CheckMemory(batch, n int) error {
	return GuardMemory(e.m.Name(), e.m.graph, MemoryRun{Batch: batch, N: n, Shapes: e.plan.Shapes, BatchOption: optBatch, NOption: optWindow})
}

// ReadError is an error reading or tokenizing the text a Stream reads.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Batch is one run of the model over a batch of windows.
type Batch struct {
	// Windows holds the windows' ids, lengths (real tokens) and offsets (the text's tokens
	// before each window), padded to the inputs' static length where they have one.
	Windows *tokenize.Batch
	// Outputs are the model's outputs for the real windows (Windows.B rows), with the pooled
	// "embedding" (B, d) when pooling.
	Outputs map[string]*tensor.Tensor
}

// Stream encodes the text r yields, window by window, EncoderOptions.Batch windows at a time,
// and calls fn with each batch in order; memory stays bounded by one batch whatever r's size.
// fn's error stops the stream and is returned as it is; so is ctx's. A tokenizer id beyond
// the model's vocabulary is an *InputError; an error reading or tokenizing r is a *ReadError;
// a failed run names the model and backend.
func (e *Encoder) Stream(ctx context.Context, r io.Reader, fn func(Batch) error) error {
	src, stop, err := NewWindows(ctx, e.tok, r, e.window, e.batch, e.plan.VocabRows, e.plan.VocabFrom)
	if err != nil {
		return err
	}
	defer stop()
	for done := 0; e.opts.MaxWindows == 0 || done < e.opts.MaxWindows; {
		b, err := src.Next()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, tokenize.ErrEmpty) {
			return inputErr("", err)
		}
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) || errors.Is(err, context.Canceled) {
				return err
			}
			return &ReadError{Err: err}
		}
		if keep := e.opts.MaxWindows - done; e.opts.MaxWindows > 0 && b.B > keep {
			b = truncateBatch(b, keep)
		}
		out, err := e.run(ctx, b)
		if err != nil {
			return err
		}
		done += b.B
		if err := fn(out); err != nil {
			return err
		}
	}
	return nil
}

// run feeds one batch of windows by role, runs the model and pools.
func (e *Encoder) run(ctx context.Context, b *tokenize.Batch) (Batch, error) {
	pad := e.tok.PadID()
	if e.plan.Seq > 0 {
		b = PadBatch(b, e.plan.Seq, pad)
	}
	inputs, err := e.plan.Tensors(b, pad)
	if err != nil {
		return Batch{}, fmt.Errorf("feed %s: %w", e.m.Name(), err)
	}
	outs, err := e.m.run(ctx, inputs)
	if err != nil {
		return Batch{}, err
	}
	outs = CropRows(outs, b.B)
	if err := e.pool.add(outs, b); err != nil {
		return Batch{}, err
	}
	return Batch{Windows: b, Outputs: outs}, nil
}

// Embed returns one embedding per text, pooled as EncoderOptions.Pool says (which must not be
// PoolNone), from one window per text: a text longer than the window is an *InputError naming
// it and the limit, unless EncoderOptions.Truncate (then its first window counts). Texts run
// EncoderOptions.Batch at a time, each batch padded to its longest text.
func (e *Encoder) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	if e.pool.mode == PoolNone {
		return nil, inputErrf(optPool, "Embed pools each text into one vector: give %s mean or cls", optPool)
	}
	out := make([][]float32, 0, len(texts))
	err := e.each(ctx, texts, func(_ int, w window, outs map[string]*tensor.Tensor, row int) error {
		emb := outs[PoolOutput]
		d := emb.Shape[1]
		out = append(out, append([]float32(nil), emb.F32[row*d:(row+1)*d]...))
		return nil
	})
	return out, err
}

// Encoding is a text's per-token outputs, from one window (see Embed for long texts).
type Encoding struct {
	// IDs are the window's token ids, the tokenizer's special tokens included.
	IDs []int64
	// Offset is the number of the text's tokens before the window (0 for a text's first).
	Offset int64
	// Outputs are the model's outputs for the window: per-token outputs cut to len(IDs) rows,
	// (len(IDs), d); the pooled "embedding", (d), when pooling.
	Outputs map[string]*tensor.Tensor
}

// Encode returns each text's per-token outputs (one window per text; a longer text is an
// *InputError unless EncoderOptions.Truncate). Texts run EncoderOptions.Batch at a time.
func (e *Encoder) Encode(ctx context.Context, texts ...string) ([]Encoding, error) {
	out := make([]Encoding, 0, len(texts))
	seq := e.SeqOutputs()
	err := e.each(ctx, texts, func(_ int, w window, outs map[string]*tensor.Tensor, row int) error {
		enc := Encoding{IDs: w.ids, Offset: w.offset, Outputs: map[string]*tensor.Tensor{}}
		for name, t := range outs {
			rows := t.Shape[0]
			if rows == 0 {
				continue
			}
			per := t.Len() / rows
			shape := t.Shape[1:]
			lo, hi := row*per, (row+1)*per
			if seq[name] && len(t.Shape) >= 2 {
				per2 := per / t.Shape[1]
				shape = append([]int{len(w.ids)}, t.Shape[2:]...)
				hi = lo + len(w.ids)*per2
			}
			enc.Outputs[name] = sliceRows(t, lo, hi, shape)
		}
		out = append(out, enc)
		return nil
	})
	return out, err
}

// window is one text's window: its ids (special tokens included) and offset.
type window struct {
	ids    []int64
	offset int64
}

// each cuts every text into its one window, runs them e.batch at a time, and calls fn with
// the text's index, its window, the batch's outputs and the window's row in them.
func (e *Encoder) each(ctx context.Context, texts []string, fn func(i int, w window, outs map[string]*tensor.Tensor, row int) error) error {
	wins := make([]window, len(texts))
	for i, text := range texts {
		w, err := e.windowOf(ctx, i, text)
		if err != nil {
			return err
		}
		wins[i] = w
	}
	for lo := 0; lo < len(wins); lo += e.batch {
		hi := min(lo+e.batch, len(wins))
		b := stack(wins[lo:hi], e.tok.PadID())
		res, err := e.run(ctx, b)
		if err != nil {
			return err
		}
		for k := lo; k < hi; k++ {
			if err := fn(k, wins[k], res.Outputs, k-lo); err != nil {
				return err
			}
		}
	}
	return nil
}

// windowOf cuts text i into windows as Stream does and keeps its first: a second window is an
// *InputError unless EncoderOptions.Truncate.
func (e *Encoder) windowOf(ctx context.Context, i int, text string) (window, error) {
	src, stop, err := NewWindows(ctx, e.tok, strings.NewReader(text), e.window, 1, e.plan.VocabRows, e.plan.VocabFrom)
	if err != nil {
		return window{}, err
	}
	defer stop()
	b, err := src.Next()
	if err == io.EOF || errors.Is(err, tokenize.ErrEmpty) {
		return window{}, inputErrf("", "text %d is empty: nothing to encode", i)
	}
	if err != nil {
		return window{}, err
	}
	if !e.opts.Truncate {
		if _, err := src.Next(); !errors.Is(err, io.EOF) {
			if err != nil {
				return window{}, err
			}
			return window{}, &InputError{Option: optTruncate, Err: &TooLongError{Index: i, Text: text, Window: e.window}}
		}
	}
	return window{ids: append([]int64(nil), b.Tokens[:b.Lengths[0]]...), offset: b.Offsets[0]}, nil
}

// TooLongError is a text, or a (query, text) pair, longer than an Encoder's window (wrapped
// in an *InputError): what Embed, Rerank and ScorePairs refuse without Truncate.
type TooLongError struct {
	Index  int    // the text's (or pair's) index among those passed
	Text   string // the text (of a pair, its second text)
	Window int    // the window, in tokens
	// Tokens is what a pair takes with its special tokens; 0 for a text, whose encoding
	// stops once it is past the window.
	Tokens int
	Pair   bool // the pair of Text with its query (ScorePairs, Rerank) is too long
}

func (e *TooLongError) Error() string {
	if e.Pair {
		return fmt.Sprintf("pair %d (%s, with its query) is %d tokens, longer than the window of %d tokens (%s); cut it with %s",
			e.Index, quoteStart(e.Text), e.Tokens, e.Window, optWindow, optTruncate)
	}
	return fmt.Sprintf("text %d (%s) is longer than the window of %d tokens (%s, at most the model's maximum length); cut it with %s",
		e.Index, quoteStart(e.Text), e.Window, optWindow, optTruncate)
}

// quoteStart quotes the first 40 characters of a text, for errors.
func quoteStart(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return fmt.Sprintf("%q", s)
	}
	r := []rune(s)
	return fmt.Sprintf("%q…", string(r[:40]))
}

// stack lays windows out as one batch padded to the longest.
func stack(ws []window, pad int64) *tokenize.Batch {
	n := 0
	for _, w := range ws {
		n = max(n, len(w.ids))
	}
	b := &tokenize.Batch{B: len(ws), N: n, Tokens: make([]int64, len(ws)*n), Mask: make([]bool, len(ws)*n),
		Lengths: make([]int, len(ws)), Offsets: make([]int64, len(ws))}
	for i, w := range ws {
		copy(b.Tokens[i*n:], w.ids)
		for j := len(w.ids); j < n; j++ {
			b.Tokens[i*n+j], b.Mask[i*n+j] = pad, true
		}
		b.Lengths[i], b.Offsets[i] = len(w.ids), w.offset
	}
	return b
}

// sliceRows copies t's elements lo..hi into a tensor of shape.
func sliceRows(t *tensor.Tensor, lo, hi int, shape []int) *tensor.Tensor {
	c := &tensor.Tensor{DType: t.DType, Shape: append([]int(nil), shape...)}
	switch {
	case t.F32 != nil:
		c.F32 = append([]float32(nil), t.F32[lo:hi]...)
	case t.I64 != nil:
		c.I64 = append([]int64(nil), t.I64[lo:hi]...)
	case t.Bool != nil:
		c.Bool = append([]bool(nil), t.Bool[lo:hi]...)
	}
	return c
}

// PadBatch returns b with every row padded to n tokens (a model with a static length).
func PadBatch(b *tokenize.Batch, n int, pad int64) *tokenize.Batch {
	if b.N >= n {
		return b
	}
	p := &tokenize.Batch{B: b.B, N: n, Tokens: make([]int64, b.B*n), Mask: make([]bool, b.B*n), Lengths: b.Lengths, Offsets: b.Offsets}
	if b.Types != nil {
		p.Types = make([]int64, b.B*n)
	}
	for i := 0; i < b.B; i++ {
		copy(p.Tokens[i*n:], b.Tokens[i*b.N:(i+1)*b.N])
		if b.Types != nil {
			copy(p.Types[i*n:], b.Types[i*b.N:(i+1)*b.N])
		}
		copy(p.Mask[i*n:], b.Mask[i*b.N:(i+1)*b.N])
		for j := b.N; j < n; j++ {
			p.Tokens[i*n+j], p.Mask[i*n+j] = pad, true
		}
	}
	return p
}

// truncateBatch keeps the first keep rows of b.
func truncateBatch(b *tokenize.Batch, keep int) *tokenize.Batch {
	return &tokenize.Batch{B: keep, N: b.N, Tokens: b.Tokens[:keep*b.N], Mask: b.Mask[:keep*b.N],
		Lengths: b.Lengths[:keep], Offsets: b.Offsets[:keep]}
}
