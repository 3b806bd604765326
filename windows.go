package zoo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Tokenizer is the tokenizer a model's text goes through, with where it came from.
type Tokenizer struct {
	tokenize.Tokenizer
	// Path is the tokenizer file ("" for zoo's byte tokenizer).
	Path string
	// Why says how it was chosen ("LoadOptions.Tokenizer", "found next to the model", ...).
	Why string
}

// ByteTokenizerDoc documents the byte tokenizer's id mapping in output files.
const ByteTokenizerDoc = "byte-level: id 0 = padding, byte b = id b+1 (vocab 257)"

// tokenizerNames are the files looked for next to a model, in this order (then a single
// *.model file).
var tokenizerNames = []string{"tokenizer.json", "vocab.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model"}

// ChooseTokenizer returns the tokenizer at path; without one, for an ONNX file (fromFile) the
// tokenizer next to modelPath (tokenizer.json, vocab.txt or a SentencePiece .model in its
// folder), else the byte tokenizer. A tokenizer file that cannot be used, or several .model
// files with no telling which, is an *InputError naming the file.
func ChooseTokenizer(path, modelPath string, fromFile bool) (*Tokenizer, error) {
	load := func(path, why string) (*Tokenizer, error) {
		t, err := tokenize.Load(path)
		if err != nil {
			return nil, inputErr(optTokenizer, err)
		}
		return &Tokenizer{Tokenizer: t, Path: path, Why: why}, nil
	}
	if path != "" {
		return load(path, optTokenizer)
	}
	if !fromFile {
		return &Tokenizer{Tokenizer: tokenize.Bytes{}, Why: "zoo's byte tokenizer, the default for zoo's variants"}, nil
	}
	dir := filepath.Dir(modelPath)
	for _, name := range tokenizerNames {
		if p := filepath.Join(dir, name); isFile(p) {
			return load(p, "found next to the model")
		}
	}
	models, _ := filepath.Glob(filepath.Join(dir, "*.model"))
	switch len(models) {
	case 0:
	case 1:
		return load(models[0], "found next to the model")
	default:
		sort.Strings(models)
		return nil, inputErrf(optTokenizer, "several SentencePiece models next to %s (%s); choose one with %s", modelPath, strings.Join(models, ", "), optTokenizer)
	}
	return &Tokenizer{Tokenizer: tokenize.Bytes{}, Why: "no tokenizer.json, vocab.txt or .model next to the model: zoo's byte tokenizer (give the model's own with " + optTokenizer + ")"}, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// IsBytes reports whether t is zoo's byte tokenizer.
func (t *Tokenizer) IsBytes() bool {
	_, ok := t.Tokenizer.(tokenize.Bytes)
	return ok
}

// PadID is the id written at padded positions: the tokenizer's [PAD] where it has one, else 0.
func (t *Tokenizer) PadID() int64 {
	if p := t.Special().Pad; p >= 0 {
		return p
	}
	return tokenize.PadID
}

// Describe is the tokenizer's line in a report.
func (t *Tokenizer) Describe() string {
	if t.Path == "" {
		return t.Why
	}
	return fmt.Sprintf("%s, %s (%s, vocabulary %d)", t.Path, t.Why, t.Kind(), t.VocabSize())
}

// Doc is the tokenizer's entry in JSON and safetensors outputs.
func (t *Tokenizer) Doc() map[string]any {
	if t.IsBytes() {
		return map[string]any{"kind": "bytes", "pad_id": tokenize.PadID, "vocab": tokenize.VocabSize, "mapping": ByteTokenizerDoc}
	}
	p, s := t.Affixes()
	return map[string]any{"kind": t.Kind(), "file": t.Path, "pad_id": t.PadID(), "vocab": t.VocabSize(),
		"prefix": append([]int64{}, p.IDs...), "suffix": append([]int64{}, s.IDs...),
		"mapping": "ids of the tokenizer file; every window holds the tokenizer's prefix, the text's tokens, its suffix; offsets count the text's tokens (without prefix and suffix) before each window"}
}

// Windows yields batches of windows; io.EOF ends it.
type Windows interface {
	Next() (*tokenize.Batch, error)
}

// NewWindows cuts r into windows of at most window ids, batch windows at a time. The byte
// tokenizer cuts at byte offsets; any other tokenizer encodes the text as one sequence (without
// its special tokens), cuts that into runs of window − len(prefix) − len(suffix) ids and puts
// the prefix and suffix around each run, so every window is what the tokenizer would give for
// its piece of text. vocabRows > 0 bounds the ids (the model's embedding rows, table names it):
// a larger id is an *InputError. stop ends the tokenizing goroutine; call it when done.
func NewWindows(ctx context.Context, t *Tokenizer, r io.Reader, window, batch, vocabRows int, table string) (src Windows, stop func(), err error) {
	if t.IsBytes() {
		if vocabRows > 0 && vocabRows < tokenize.VocabSize {
			return nil, nil, inputErrf(optTokenizer, "the byte tokenizer's ids run to %d, but the model's embedding table %s has %d rows: give the model's tokenizer with %s", tokenize.VocabSize-1, table, vocabRows, optTokenizer)
		}
		wd, err := tokenize.NewWindower(r, window, batch)
		return wd, func() {}, err
	}
	prefix, suffix := t.Affixes()
	span := window - len(prefix.IDs) - len(suffix.IDs)
	if span < 1 {
		return nil, nil, inputErrf(optWindow, "a window of %d tokens leaves no room for text between the tokenizer's %d special tokens", window, len(prefix.IDs)+len(suffix.IDs))
	}
	ctx, cancel := context.WithCancel(ctx)
	ch, errc := make(chan []int64, 4), make(chan error, 1)
	w := &tokenWindower{ch: ch, errc: errc, prefix: prefix.IDs, suffix: suffix.IDs,
		span: span, batch: batch, pad: t.PadID(), rows: vocabRows, table: table, tok: t}
	go func() {
		errc <- tokenize.StreamRaw(ctx, t.Tokenizer, r, func(ids []int64, _ []string) error {
			select {
			case ch <- append([]int64(nil), ids...):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		close(ch)
	}()
	return w, cancel, nil
}

// tokenWindower cuts a pretrained tokenizer's id stream into windows with the special tokens
// in each.
type tokenWindower struct {
	ch             <-chan []int64
	errc           <-chan error
	tok            *Tokenizer
	prefix, suffix []int64
	span, batch    int
	pad            int64
	rows           int
	table          string
	pending        []int64
	offset         int64 // text ids before pending[0]
	eof, emitted   bool
	err            error
}

func (w *tokenWindower) Next() (*tokenize.Batch, error) {
	if w.err != nil {
		return nil, w.err
	}
	for !w.eof && len(w.pending) < w.span*w.batch {
		ids, ok := <-w.ch
		if !ok {
			w.eof = true
			if err := <-w.errc; err != nil {
				if errors.Is(err, context.Canceled) {
					w.err = err
				} else {
					w.err = inputErr("", err)
				}
				return nil, w.err
			}
			break
		}
		if w.rows > 0 {
			for _, id := range ids {
				if id >= int64(w.rows) || id < 0 {
					w.err = inputErrf(optTokenizer, "the tokenizer %s gives id %d, but the model's embedding table %s has %d rows: the tokenizer's vocabulary (%d) does not fit the model; give the model's own tokenizer with %s", w.tok.Path, id, w.table, w.rows, w.tok.VocabSize(), optTokenizer)
					return nil, w.err
				}
			}
		}
		w.pending = append(w.pending, ids...)
	}
	if len(w.pending) == 0 && (w.emitted || !w.eof) {
		return nil, io.EOF
	}
	rows := max(1, (len(w.pending)+w.span-1)/w.span)
	rows = min(rows, w.batch)
	lens := make([]int, rows)
	n := 0
	for i := range lens {
		lens[i] = len(w.prefix) + min(w.span, max(0, len(w.pending)-i*w.span)) + len(w.suffix)
		n = max(n, lens[i])
	}
	b := &tokenize.Batch{B: rows, N: n, Tokens: make([]int64, rows*n), Mask: make([]bool, rows*n), Lengths: lens, Offsets: make([]int64, rows)}
	for i := 0; i < rows; i++ {
		take := min(w.span, len(w.pending))
		row := append(append(append(b.Tokens[i*n:i*n], w.prefix...), w.pending[:take]...), w.suffix...)
		for j := len(row); j < n; j++ {
			b.Tokens[i*n+j], b.Mask[i*n+j] = w.pad, true
		}
		b.Offsets[i] = w.offset
		w.offset += int64(take)
		w.pending = w.pending[take:]
	}
	w.emitted = true
	return b, nil
}
