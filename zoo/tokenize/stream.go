package tokenize

import (
	"context"
	"fmt"
	"io"
	"unicode/utf8"
)

// StreamChunk is the input size Stream reads before it looks for a place to cut.
const StreamChunk = 1 << 16

// StreamSafe is true: any cut of a byte stream encodes the same.
func (Bytes) StreamSafe() bool { return true }

// streamSafe is implemented by tokenizers whose encoding of a text equals the concatenation
// of the encodings of its pieces when the text is cut just after a '\n' that has a printable
// ASCII, non-space character on each side.
type streamSafe interface{ StreamSafe() bool }

// Stream encodes everything r yields as one sequence, as t.Encode would on the whole text,
// calling emit with consecutive runs of the result: the post-processor's prefix first, its
// suffix last. When t is stream-safe it holds about StreamChunk bytes of input at a time (more
// only while no cut point has been seen); otherwise it reads the whole input first. Text that
// is not UTF-8 is an error naming its byte offset (the byte tokenizer takes any bytes); a read
// error is returned wrapped; an emit error is returned as is.
func Stream(ctx context.Context, t Tokenizer, r io.Reader, emit func(ids []int64, tokens []string) error) error {
	prefix, suffix := t.Affixes()
	if len(prefix.IDs) > 0 {
		if err := emit(prefix.IDs, prefix.Tokens); err != nil {
			return err
		}
	}
	_, isBytes := t.(Bytes)
	safe := false
	if s, ok := t.(streamSafe); ok {
		safe = s.StreamSafe()
	}
	var buf []byte
	var base int64 // input offset of buf[0]
	chunk := make([]byte, StreamChunk)
	encode := func(text []byte) error {
		if !isBytes {
			if err := checkUTF8(text, base); err != nil {
				return err
			}
		}
		ids, toks, err := t.EncodeRaw(string(text))
		if err != nil {
			return err
		}
		base += int64(len(text))
		if len(ids) == 0 {
			return nil
		}
		return emit(ids, toks)
	}
	eof := false
	for !eof {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, chunk)
		buf = append(buf, chunk[:n]...)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
		case err != nil:
			return fmt.Errorf("read input: %w", err)
		}
		if !safe || eof {
			continue
		}
		cut := lastCut(buf)
		if cut <= 0 {
			continue
		}
		if err := encode(buf[:cut]); err != nil {
			return err
		}
		buf = append(buf[:0], buf[cut:]...)
	}
	if len(buf) > 0 {
		if err := encode(buf); err != nil {
			return err
		}
	}
	if len(suffix.IDs) > 0 {
		return emit(suffix.IDs, suffix.Tokens)
	}
	return nil
}

// lastCut returns the index just after the last '\n' in b with a printable, non-space ASCII
// byte on each side, or -1.
func lastCut(b []byte) int {
	for i := len(b) - 2; i >= 1; i-- {
		if b[i] == '\n' && b[i-1] > ' ' && b[i-1] < 0x7f && b[i+1] > ' ' && b[i+1] < 0x7f {
			return i + 1
		}
	}
	return -1
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
