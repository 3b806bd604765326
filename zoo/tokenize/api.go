package tokenize

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Tokenizer turns text into model ids. Implementations are safe for concurrent use once loaded.
//
// Encode gives the ids of one sequence with the special tokens the tokenizer's post-processor
// adds (e.g. [CLS] … [SEP]); EncodeRaw the same without them; Affixes the special tokens Encode
// puts before and after, so that a caller cutting a long input into windows can put them in
// every window. tokens[i] is the vocabulary string of ids[i].
type Tokenizer interface {
	Encode(text string) (ids []int64, tokens []string, err error)
	EncodeRaw(text string) (ids []int64, tokens []string, err error)
	Affixes() (prefix, suffix Encoding)
	// VocabSize is one more than the largest id the tokenizer can produce.
	VocabSize() int
	// Special returns the ids of the special tokens the vocabulary has (-1 where absent).
	Special() Special
	// Kind names the format and model, e.g. "tokenizer.json WordPiece" or "bytes".
	Kind() string
}

// Encoding is a run of ids with their token strings.
type Encoding struct {
	IDs    []int64
	Tokens []string
}

// Special holds the ids of well-known special tokens; -1 means the vocabulary has none.
type Special struct {
	Pad, CLS, SEP, Mask, UNK, BOS, EOS int64
}

func noSpecial() Special { return Special{-1, -1, -1, -1, -1, -1, -1} }

// ErrFormat is wrapped by every error about a tokenizer file that cannot be used (unknown
// format or component, truncated or corrupted content).
var ErrFormat = errors.New("bad tokenizer file")

func formatErr(path, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrFormat, path, fmt.Sprintf(format, args...))
}

// Load reads the tokenizer at path, detecting its format: a Hugging Face tokenizer.json (any
// name ending in .json), a SentencePiece model (.model), or a BERT vocab.txt (any other text
// file with one token per line). A file that cannot be used gives an error wrapping ErrFormat
// that names the file and the reason; a missing file the os error.
func Load(path string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer: %w", err)
	}
	return LoadBytes(path, data)
}

// LoadBytes is Load from memory; name is used for detection (its extension) and in errors.
func LoadBytes(name string, data []byte) (Tokenizer, error) {
	ext := strings.ToLower(filepath.Ext(name))
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	switch {
	case ext == ".json" || (len(trimmed) > 0 && trimmed[0] == '{'):
		return loadHF(name, data)
	case ext == ".model":
		return loadSentencePiece(name, data)
	case ext == ".txt" || utf8.Valid(data):
		return loadVocabTxt(name, data)
	}
	return nil, formatErr(name, "unknown tokenizer format (want tokenizer.json, a SentencePiece .model or vocab.txt)")
}

// Bytes is zoo's byte-level tokenizer (see the package comment) as a Tokenizer.
type Bytes struct{}

// Encode returns the ids of text's bytes (byte b → id b+1); it never fails.
func (Bytes) Encode(text string) ([]int64, []string, error) { return Bytes{}.EncodeRaw(text) }

// EncodeRaw is Encode: the byte tokenizer adds no special tokens.
func (Bytes) EncodeRaw(text string) ([]int64, []string, error) {
	ids := Encode([]byte(text))
	toks := make([]string, len(ids))
	for i := range ids {
		toks[i] = byteToken(byte(ids[i] - 1))
	}
	return ids, toks, nil
}

func byteToken(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// Affixes is empty: the byte tokenizer adds no special tokens.
func (Bytes) Affixes() (prefix, suffix Encoding) { return Encoding{}, Encoding{} }

// VocabSize is 257 (padding and the 256 bytes).
func (Bytes) VocabSize() int { return VocabSize }

// Special has only Pad (0).
func (Bytes) Special() Special { s := noSpecial(); s.Pad = PadID; return s }

// Kind is "bytes".
func (Bytes) Kind() string { return "bytes" }

// wrap adds affixes around a raw encoding.
func wrap(t Tokenizer, ids []int64, toks []string, err error) ([]int64, []string, error) {
	if err != nil {
		return nil, nil, err
	}
	p, s := t.Affixes()
	if len(p.IDs) == 0 && len(s.IDs) == 0 {
		return ids, toks, nil
	}
	outI := make([]int64, 0, len(p.IDs)+len(ids)+len(s.IDs))
	outT := make([]string, 0, cap(outI))
	outI = append(append(append(outI, p.IDs...), ids...), s.IDs...)
	outT = append(append(append(outT, p.Tokens...), toks...), s.Tokens...)
	return outI, outT, nil
}

// invalidUTF8 is the error for text that is not UTF-8 (every text tokenizer but Bytes needs it).
func invalidUTF8(text string) error {
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("input is not valid UTF-8 (byte 0x%02x at offset %d)", text[i], i)
		}
		i += n
	}
	return nil
}
