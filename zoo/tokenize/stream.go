package tokenize

import (
	"context"
	"fmt"
	"io"
	"unicode/utf8"
)

// StreamChunk is the input size Stream reads before it looks for a place to cut.
const StreamChunk = 1 << 16

// StreamMaxRun is the most input Stream holds without a safe cut point before it cuts anyway
// (see Stream): far more text than any model window holds.
const StreamMaxRun = 1 << 18

// StreamSafe is true: any cut of a byte stream encodes the same.
func (Bytes) StreamSafe() bool { return true }

func (Bytes) cuts() cutRule { return cutRule{any: true} }

// cutRule says where a tokenizer's input may be cut without changing its encoding: the
// encoding of the text is the concatenation of the encodings of the pieces.
type cutRule struct {
	// any: every byte boundary is safe (the byte tokenizer).
	any bool
	// at reports whether cutting b just before b[i] is safe; Stream asks it only where b[i] is
	// ASCII whitespace (space, \t, \n, \v, \f, \r), with i ≥ 1 and at least utf8.UTFMax bytes
	// after b[i]. nil: no cut is known to be safe.
	at func(b []byte, i int) bool
}

// cutter is implemented by the tokenizers that know their safe cut points.
type cutter interface{ cuts() cutRule }

// streamSafe is implemented by tokenizers that report whether they have safe cut points.
type streamSafe interface{ StreamSafe() bool }

func rulesOf(t Tokenizer) cutRule {
	if c, ok := t.(cutter); ok {
		return c.cuts()
	}
	return cutRule{}
}

// isASCIISpace is the ASCII whitespace every tokenizer treats as a word boundary.
func isASCIISpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// Stream encodes everything r yields as one sequence, as t.Encode would on the whole text,
// calling emit with consecutive runs of the result: the post-processor's prefix first, its
// suffix last. Text that is not UTF-8 is an error naming its byte offset (the byte tokenizer
// takes any bytes); a read error is returned wrapped; an emit error is returned as is.
//
// Memory and time. Stream holds about StreamChunk bytes of input at a time and encodes it
// piece by piece, cutting just before a space, tab, CR or LF where the tokenizer says a cut
// changes nothing (exact: the ids are those of the whole text), whatever the line
// endings (LF, CRLF) and line lengths:
//   - the byte tokenizer: anywhere;
//   - tokenizer.json and vocab.txt whose normalizers work one character at a time
//     (BertNormalizer, Lowercase, StripAccents, NFC/NFD/NFKC/NFKD, and sequences of these):
//     with a pre-tokenizer that splits at whitespace (BertPreTokenizer, Whitespace,
//     WhitespaceSplit, or a Sequence that starts with one of them), before any whitespace; with
//     byte-level BPE (GPT-2, RoBERTa: ByteLevel with its regex and no prefix space), before a
//     whitespace character that is followed by a non-space one; with Metaspace, before a
//     space followed by a non-space; never inside an added token, nor where an added token
//     that strips whitespace on one side would strip it differently;
//   - SentencePiece BPE models whose normalizer turns the whitespace into a word boundary: before
//     it.
//
// Cut candidates are found as the bytes arrive, each byte looked at once, so time is linear in
// the input. Where a tokenizer has no safe cut point (a SentencePiece Unigram model, whose path
// scores run over the whole text; a tokenizer.json with a Precompiled or Replace normalizer) or
// the text has none for StreamMaxRun bytes (256 KiB: one line of letters without a space for
// GPT-2, say), Stream cuts anyway, just before the last ASCII whitespace it holds, or failing
// that at a character boundary. Each piece is encoded exactly as the tokenizer encodes that
// piece alone, but the ids next to such a cut may differ from the whole text's (a word split
// in two), at most once in every StreamMaxRun bytes (about 50,000 tokens, far more than a model
// window holds, so at most the window that holds the cut sees it). A SentencePiece Unigram
// model keeps its path scores in float32 over the whole text, so after a cut it may also decide
// near ties between two segmentations of a word differently (74 of 19,000 ids in a test). Memory
// stays bounded by about 2×StreamMaxRun bytes of input in every case.
func Stream(ctx context.Context, t Tokenizer, r io.Reader, emit func(ids []int64, tokens []string) error) error {
	return stream(ctx, t, r, emit, true, StreamChunk, StreamMaxRun)
}

// StreamRaw is Stream without the post-processor's prefix and suffix (EncodeRaw's ids): for a
// caller that puts them around every window itself.
func StreamRaw(ctx context.Context, t Tokenizer, r io.Reader, emit func(ids []int64, tokens []string) error) error {
	return stream(ctx, t, r, emit, false, StreamChunk, StreamMaxRun)
}

// stream is Stream with its sizes: it reads chunk bytes at a time and holds at most maxRun
// without a safe cut; affixes says whether to emit the post-processor's prefix and suffix.
func stream(ctx context.Context, t Tokenizer, r io.Reader, emit func(ids []int64, tokens []string) error, affixes bool, chunk, maxRun int) error {
	var prefix, suffix Encoding
	if affixes {
		prefix, suffix = t.Affixes()
	}
	if len(prefix.IDs) > 0 {
		if err := emit(prefix.IDs, prefix.Tokens); err != nil {
			return err
		}
	}
	_, isBytes := t.(Bytes)
	rule := rulesOf(t)
	var buf []byte
	var base int64 // input offset of buf[0]
	encode := func(n int) error {
		text := buf[:n]
		if !isBytes {
			if err := checkUTF8(text, base); err != nil {
				return err
			}
		}
		ids, toks, err := t.EncodeRaw(string(text))
		if err != nil {
			return err
		}
		base += int64(n)
		// Drop what was encoded; append reallocates when the tail reaches the capacity,
		// copying only what is held.
		buf = buf[n:]
		if len(ids) == 0 {
			return nil
		}
		return emit(ids, toks)
	}
	// Positions below scanned have been looked at; safe is the last safe cut found (0: none),
	// weak the last ASCII whitespace (a cut of last resort).
	scanned, safe, weak := 1, 0, 0
	shift := func(n int) {
		scanned = max(scanned-n, 1)
		safe, weak = max(safe-n, 0), max(weak-n, 0)
	}
	rd := make([]byte, chunk)
	for eof := false; !eof; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, rd)
		buf = append(buf, rd[:n]...)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
		case err != nil:
			return fmt.Errorf("read input: %w", err)
		}
		if eof {
			break
		}
		end := len(buf) - 1 - utf8.UTFMax // the last position with its look-ahead in buf
		if rule.any {
			safe = max(end, 0)
		} else {
			for i := scanned; i <= end; i++ {
				if !isASCIISpace(buf[i]) {
					continue
				}
				weak = i
				if rule.at != nil && rule.at(buf, i) {
					safe = i
				}
			}
		}
		scanned = max(scanned, end+1)
		switch {
		case safe > 0 && len(buf) >= chunk:
			at := safe
			if err := encode(at); err != nil {
				return err
			}
			shift(at)
		case len(buf) >= maxRun:
			at := weak
			if at == 0 {
				at = runeStart(buf, max(end, 1))
			}
			if err := encode(at); err != nil {
				return err
			}
			shift(at)
		}
	}
	if len(buf) > 0 {
		if err := encode(len(buf)); err != nil {
			return err
		}
	}
	if len(suffix.IDs) > 0 {
		return emit(suffix.IDs, suffix.Tokens)
	}
	return nil
}

// runeStart returns i, moved back to the start of the UTF-8 character that holds b[i] (at
// most three bytes back; not below 1).
func runeStart(b []byte, i int) int {
	for k := 0; k < utf8.UTFMax-1 && i > 1 && !utf8.RuneStart(b[i]); k++ {
		i--
	}
	return i
}

func checkUTF8(b []byte, base int64) error {
	if utf8.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("input is not valid UTF-8 (byte 0x%02x at offset %d)", b[i], base+int64(i))
		}
		i += n
	}
	return nil
}
