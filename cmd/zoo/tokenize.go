package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/tokenout"
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
	n, err := tokenout.Write(c.Context, tok, in, c.App.Writer, c.Bool(flagJSON.Name))
	var we *tokenout.WriteError
	switch {
	case errors.As(err, &we):
		return failed(fmt.Errorf("write output: %w", we.Err))
	case err != nil:
		return badInputf("input %s: %v", name, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "zoo: %s (%s, vocabulary %d)\n", format.Plural(n, "token"), tok.Kind(), tok.VocabSize())
	return nil
}
