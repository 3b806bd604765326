// Package tokenize turns text into model ids: zoo's own byte-level tokenizer, and the
// tokenizers pretrained models bring (Hugging Face tokenizer.json, SentencePiece .model, BERT
// vocab.txt), all behind the Tokenizer interface; Load detects the format.
//
// Byte mapping (zoo's default, type Bytes and the functions Encode, Decode): id 0 is padding
// (PadID, the seed's ignore_index=0); the byte b becomes the id b+1, so ids run from 1 to 256 and
// VocabSize is 257. Text is tokenized as its raw bytes (UTF-8 for text files), without
// normalization.
//
// Pretrained tokenizers give the ids Hugging Face's tokenizers and SentencePiece give (checked id
// for id against both on testdata/corpus.txt): tokenizer.json with WordPiece, BPE (byte-level as
// GPT-2/RoBERTa, byte fallback), Unigram or WordLevel models, the common normalizers (BertNormalizer,
// NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, Precompiled, Sequence),
// pre-tokenizers (BertPreTokenizer, ByteLevel, Whitespace, WhitespaceSplit, Metaspace,
// Punctuation, Digits, Split with RE2-compatible patterns, Sequence) and post-processors
// (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence); any other
// component is refused by name. A file's padding and truncation are not applied. SentencePiece
// models (Unigram, BPE) are normalised with their precompiled charsmap and encoded as
// SentencePieceProcessor.encode does, without BOS/EOS.
//
// Long inputs are cut into windows of at most a model's maximum length by a Windower, which
// streams from an io.Reader with memory bounded by batch×window, never by the input size.
// Windows are cut at byte granularity: a multi-byte UTF-8 character may straddle two windows
// (its first bytes end one window, its last bytes start the next). That is correct for a
// byte-level model, and concatenating the decoded windows in order reproduces the input exactly.
// Stream encodes a whole input as one sequence with any Tokenizer in bounded memory and linear
// time, cutting it where the tokenizer's ids do not change (see Stream for where, and for the
// rare cut of a long stretch that has no such point).
package tokenize

import (
	"errors"
	"fmt"
	"io"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// VocabSize is the number of token ids: padding plus the 256 byte values.
const VocabSize = 257

// PadID is the padding id. It never stands for a byte.
const PadID = 0

// ErrEmpty is returned (by Windower.Next, on the first call) when the input holds no bytes.
// The CLI reports it as bad input naming the file.
var ErrEmpty = errors.New("input is empty (0 bytes): nothing to tokenize")

// Encode returns the ids of data's bytes (byte b → id b+1). It never fails; an empty input
// gives an empty, non-nil slice.
func Encode(data []byte) []int64 {
	ids := make([]int64, len(data))
	for i, b := range data {
		ids[i] = int64(b) + 1
	}
	return ids
}

// Decode returns the bytes for ids, skipping padding (id 0). An id outside [0, VocabSize) is an
// error naming its position; the bytes decoded before it are not returned.
func Decode(ids []int64) ([]byte, error) {
	out := make([]byte, 0, len(ids))
	for i, id := range ids {
		switch {
		case id == PadID:
		case id > 0 && id < VocabSize:
			out = append(out, byte(id-1))
		default:
			return nil, fmt.Errorf("decode: token %d has id %d, outside the vocabulary [0, %d)", i, id, VocabSize)
		}
	}
	return out, nil
}

// Batch is a group of windows ready for a model: B rows of N tokens, row-major.
//
// N is the length of the longest window in the batch; shorter rows are right-padded with
// PadID. Mask has the same B×N layout and is a key-padding mask with PyTorch polarity: true
// marks padding (positions a model must ignore), false a real token. Offsets[i] is the byte
// offset in the input of row i's first byte, and Lengths[i] its number of real tokens.
// Types, when not nil, holds the token type (segment) ids in Tokens' layout, as a pair of
// texts encoded as one sequence has them; nil means zeros.
type Batch struct {
	B, N    int
	Tokens  []int64
	Mask    []bool
	Lengths []int
	Offsets []int64
	Types   []int64
}

// Row returns the real (unpadded) tokens of row i, sharing storage with b.Tokens. It returns
// nil when i is out of range.
func (b *Batch) Row(i int) []int64 {
	if i < 0 || i >= b.B {
		return nil
	}
	return b.Tokens[i*b.N : i*b.N+b.Lengths[i]]
}

// Tensors returns the tokens as an int64 tensor and the mask as a bool tensor, both of shape
// (B, N), sharing storage with b.
func (b *Batch) Tensors() (tokens, mask *tensor.Tensor) {
	return &tensor.Tensor{DType: tensor.Int64, Shape: []int{b.B, b.N}, I64: b.Tokens},
		&tensor.Tensor{DType: tensor.Bool, Shape: []int{b.B, b.N}, Bool: b.Mask}
}

// Clone returns a deep copy of b, for callers that keep a batch filled by NextInto.
func (b *Batch) Clone() *Batch {
	return &Batch{
		B: b.B, N: b.N,
		Tokens:  append([]int64(nil), b.Tokens...),
		Mask:    append([]bool(nil), b.Mask...),
		Lengths: append([]int(nil), b.Lengths...),
		Offsets: append([]int64(nil), b.Offsets...),
		Types:   append([]int64(nil), b.Types...),
	}
}

// Windower cuts a byte stream into windows of at most Window tokens and groups them into
// batches of at most Batch windows. Every window but the last holds exactly Window tokens.
// It holds one batch worth of input bytes (batch×window) and nothing else, so any input size
// streams. It is not safe for concurrent use.
type Windower struct {
	r      io.Reader
	window int
	batch  int
	buf    []byte
	offset int64 // bytes consumed so far
	done   bool
	err    error // sticky error
}

// NewWindower returns a Windower over r. It returns an error when window or batch is below 1,
// or when window×batch exceeds 1<<31 tokens.
func NewWindower(r io.Reader, window, batch int) (*Windower, error) {
	if window < 1 {
		return nil, fmt.Errorf("tokenize: window must be at least 1, got %d", window)
	}
	if batch < 1 {
		return nil, fmt.Errorf("tokenize: batch must be at least 1, got %d", batch)
	}
	if int64(window)*int64(batch) > 1<<31 {
		return nil, fmt.Errorf("tokenize: window %d × batch %d is more than 2^31 tokens", window, batch)
	}
	if r == nil {
		return nil, fmt.Errorf("tokenize: nil reader")
	}
	return &Windower{r: r, window: window, batch: batch}, nil
}

// Offset returns the number of input bytes consumed so far (the offset of the next window).
func (w *Windower) Offset() int64 { return w.offset }

// Next returns the next batch in a newly allocated Batch. At the end of the input it returns
// io.EOF; on an empty input the first call returns ErrEmpty; a read error is returned wrapped
// ("read input: ...") and repeated on later calls.
func (w *Windower) Next() (*Batch, error) {
	b := &Batch{}
	if err := w.NextInto(b); err != nil {
		return nil, err
	}
	return b, nil
}

// NextInto is Next that fills dst, reusing its slices' storage when large enough, so a loop
// over a whole input allocates nothing after the first batch. dst's previous contents are
// overwritten; on error dst is left unspecified.
func (w *Windower) NextInto(dst *Batch) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return io.EOF
	}
	if w.buf == nil {
		w.buf = make([]byte, w.window*w.batch)
	}
	n, err := io.ReadFull(w.r, w.buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		w.done = true
	case err != nil:
		w.err = fmt.Errorf("read input: %w", err)
		return w.err
	}
	if n == 0 {
		if w.offset == 0 {
			w.err = ErrEmpty
			return w.err
		}
		return io.EOF
	}
	rows := (n + w.window - 1) / w.window
	cols := min(n, w.window)
	dst.B, dst.N = rows, cols
	dst.Tokens = grow(dst.Tokens, rows*cols)
	dst.Mask = grow(dst.Mask, rows*cols)
	dst.Lengths = grow(dst.Lengths, rows)
	dst.Offsets = grow(dst.Offsets, rows)
	for i := 0; i < rows; i++ {
		lo := i * w.window
		hi := min(lo+w.window, n)
		row := dst.Tokens[i*cols : (i+1)*cols]
		mask := dst.Mask[i*cols : (i+1)*cols]
		for j, c := range w.buf[lo:hi] {
			row[j] = int64(c) + 1
			mask[j] = false
		}
		for j := hi - lo; j < cols; j++ {
			row[j] = PadID
			mask[j] = true
		}
		dst.Lengths[i] = hi - lo
		dst.Offsets[i] = w.offset + int64(lo)
	}
	w.offset += int64(n)
	return nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
