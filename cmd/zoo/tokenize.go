package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func tokenizeCommand() *cli.Command {
	return &cli.Command{
		Name:  "tokenize",
		Usage: "print the token ids and tokens of a text file",
		Description: "Encodes the whole input as one sequence, with the special tokens the tokenizer adds\n" +
			"(e.g. [CLS] … [SEP]); a tokenizer.json's padding and truncation are not applied.\n" +
			"--tokenizer takes a Hugging Face tokenizer.json, a SentencePiece .model or a BERT vocab.txt;\n" +
			"without it, zoo's byte tokenizer. Output: one `ID<TAB>TOKEN` line per token (a token with\n" +
			"spaces or invisible characters is printed Go-quoted), or with --json {\"ids\": [...], \"tokens\": [...]}." +
			examples("zoo tokenize --tokenizer tokenizer.json --input text.txt", "zoo tokenize -t spm.model -i text.txt --json", "zoo tokenize --input notes.txt"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tokenizer", Aliases: []string{"t"}, Usage: "tokenizer `FILE` (tokenizer.json, .model or vocab.txt); default: bytes"},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` to tokenize (- for stdin)", Required: true},
			flagJSON,
		},
		Action: tokenizeAction,
	}
}

func tokenizeAction(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return badInputf("tokenize takes no arguments (got %q); use --input FILE", c.Args().First())
	}
	var tok tokenize.Tokenizer = tokenize.Bytes{}
	if path := c.String("tokenizer"); path != "" {
		t, err := tokenize.Load(path)
		if err != nil {
			return badInput(err)
		}
		tok = t
	}
	var in io.Reader = os.Stdin
	name := c.String("input")
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return badInputf("input: %v", err)
		}
		defer f.Close()
		in = f
	}
	w := bufio.NewWriterSize(c.App.Writer, 1<<16)
	asJSON := c.Bool(flagJSON.Name)
	var ids []int64
	var toks []string
	n := 0
	err := tokenize.Stream(c.Context, tok, bufio.NewReaderSize(in, 1<<16), func(i []int64, t []string) error {
		n += len(i)
		if asJSON {
			ids, toks = append(ids, i...), append(toks, t...)
			return nil
		}
		for k := range i {
			w.WriteString(strconv.FormatInt(i[k], 10))
			w.WriteByte('\t')
			w.WriteString(showToken(t[k]))
			if err := w.WriteByte('\n'); err != nil {
				return writeErr{err}
			}
		}
		return nil
	})
	var we writeErr
	switch {
	case errors.As(err, &we):
		return failed(fmt.Errorf("write output: %w", we.err))
	case err != nil:
		return badInputf("input %s: %v", name, err)
	}
	if asJSON {
		if ids == nil {
			ids, toks = []int64{}, []string{}
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			IDs    []int64  `json:"ids"`
			Tokens []string `json:"tokens"`
		}{ids, toks}); err != nil {
			return failed(fmt.Errorf("write output: %w", err))
		}
	}
	if err := w.Flush(); err != nil {
		return failed(fmt.Errorf("write output: %w", err))
	}
	fmt.Fprintf(c.App.ErrWriter, "zoo: %s (%s, vocabulary %d)\n", format.Plural(n, "token"), tok.Kind(), tok.VocabSize())
	return nil
}

type writeErr struct{ err error }

func (e writeErr) Error() string { return e.err.Error() }

// showToken prints a token as is when every character is visible, else Go-quoted.
func showToken(t string) string {
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
