package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
)

func rerankCommand() *cli.Command {
	return &cli.Command{
		Name:      "rerank",
		Usage:     "rank the lines of a text file by relevance to a query with a cross-encoder",
		ArgsUsage: "FILE.onnx|NAME[.PRESET]",
		Description: "Each line (empty lines skipped) is a passage, encoded with the query as one pair ([CLS] query [SEP] passage\n" +
			"[SEP] and its token type ids, as the tokenizer's pair template says) and scored by the model's logits output,\n" +
			"(batch, 1) or (batch, 2) (then the second minus the first): a BERT-for-sequence-classification export such as\n" +
			"a sentence-transformers CrossEncoder. Passages are printed best first with the sigmoid of the logit; a pair over\n" +
			"the window is an error naming it, unless --truncate (then the longer text is cut first, as Hugging Face does).\n" +
			"zoo serve answers the same on POST /rerank." +
			examples("zoo rerank cross.onnx --query 'what is attention?' -i passages.txt",
				"zoo rerank cross.onnx --tokenizer tokenizer.json --query q -i passages.txt --top 3 --json"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "query", Aliases: []string{"q"}, Usage: "the query `TEXT`", Required: true},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "passages `FILE`, one per line (- for standard input)", Required: true},
			&cli.IntFlag{Name: "top", Usage: "print the best `N` passages only (0: all)"},
			flagTokenizer, flagFeed,
			&cli.BoolFlag{Name: "truncate", Usage: "cut a pair longer than the window, the longer text first, instead of refusing it"},
			&cli.IntFlag{Name: "window", Usage: "tokens per pair at most, special tokens included (0: min(512, the model's maximum length))"},
			&cli.IntFlag{Name: "batch", Value: 32, Usage: "pairs per batch"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagPrecision(), flagBackend, flagJSON,
		),
		Action: rerankAction,
	}
}

// rankedLine is one passage of zoo rerank's answer.
type rankedLine struct {
	Line  int     `json:"line"`
	Score float64 `json:"score"`
	Logit float64 `json:"logit"`
	Text  string  `json:"text"`
}

func rerankAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("rerank: want one model (a cross-encoder .onnx file or a model name), got %d arguments", c.NArg())
	}
	if c.Int("top") < 0 {
		return badInputf("--top must not be negative, got %d", c.Int("top"))
	}
	inPath, lines, numbers, err := readInputLines(c.String("input"), c.App.Reader, c.App.ErrWriter)
	if err != nil {
		return err
	}
	m, err := loadRunModel(c.Context, c, c.Args().First())
	if err != nil {
		return err
	}
	defer m.Close()
	enc, err := m.NewEncoder(zooroot.EncoderOptions{Window: c.Int("window"), Batch: c.Int("batch"), Truncate: c.Bool("truncate"), Feeds: c.StringSlice(flagFeed.Name)})
	if err != nil {
		return err
	}
	ranked, err := enc.Rerank(c.Context, c.String("query"), lines...)
	if err != nil {
		return tooLongLine(err, inPath, numbers, m)
	}
	if top := c.Int("top"); top > 0 && top < len(ranked) {
		ranked = ranked[:top]
	}
	out := make([]rankedLine, len(ranked))
	for i, r := range ranked {
		out[i] = rankedLine{Line: numbers[r.Index], Score: r.Score, Logit: r.Logit, Text: lines[r.Index]}
	}
	if c.Bool(flagJSON.Name) {
		return json.NewEncoder(c.App.Writer).Encode(map[string]any{"model": m.Name(), "query": c.String("query"), "ranked": out})
	}
	for i, r := range out {
		fmt.Fprintf(c.App.Writer, "%2d  %.4f  line %d  %s\n", i+1, r.Score, r.Line, clip(r.Text, 70))
	}
	return nil
}

// clip cuts s to n characters, marking the cut.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
