// Package tokenout prints the tokens of a text for `zoo tokenize`: one `ID<TAB>TOKEN` line
// per token as the text streams through the tokenizer (a token with blanks or invisible
// characters Go-quoted), or one JSON document {"ids": [...], "tokens": [...]} at the end.
package tokenout

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"unicode"

	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// WriteError is a failed write of the output (as opposed to an input the tokenizer refused).
type WriteError struct{ Err error }

// Error returns the wrapped error's message.
func (e *WriteError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *WriteError) Unwrap() error { return e.Err }

// Write tokenizes everything r holds as one sequence with tok and writes the tokens to w
// (as JSON when asJSON), returning how many there were. A failed write is a *WriteError;
// any other error is the input's.
func Write(ctx context.Context, tok tokenize.Tokenizer, r io.Reader, w io.Writer, asJSON bool) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	var ids []int64
	var toks []string
	n := 0
	err := tokenize.Stream(ctx, tok, bufio.NewReaderSize(r, 1<<16), func(i []int64, t []string) error {
		n += len(i)
		if asJSON {
			ids, toks = append(ids, i...), append(toks, t...)
			return nil
		}
		for k := range i {
			bw.WriteString(strconv.FormatInt(i[k], 10))
			bw.WriteByte('\t')
			bw.WriteString(ShowToken(t[k]))
			if err := bw.WriteByte('\n'); err != nil {
				return &WriteError{err}
			}
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	if asJSON {
		if ids == nil {
			ids, toks = []int64{}, []string{}
		}
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			IDs    []int64  `json:"ids"`
			Tokens []string `json:"tokens"`
		}{ids, toks}); err != nil {
			return n, &WriteError{err}
		}
	}
	if err := bw.Flush(); err != nil {
		return n, &WriteError{err}
	}
	return n, nil
}

// ShowToken prints a token as is when every character is visible, else Go-quoted.
func ShowToken(t string) string {
	for _, r := range t {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return strconv.Quote(t)
		}
	}
	if t == "" {
		return `""`
	}
	return t
}
