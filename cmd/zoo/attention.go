package main

import (
	"fmt"
	"io"
	"path/filepath"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/attention"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/attnmap"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func attentionCommand() *cli.Command {
	return &cli.Command{
		Name:      "attention",
		Usage:     "draw a variant's attention weights on a text as heat maps (tokens on the axes), or print them as JSON",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Encodes the first --tokens bytes of --input (one window, byte tokenizer) and reads every layer's attention\n" +
			"softmax from the backend's run (the values are kept as outputs, so the backend computes them as they are).\n" +
			"Each row is one query's weights over the keys. -o writes a PNG: one heat map per layer (rows) and head\n" +
			"(columns), queries top to bottom, keys left to right; --layer and --head pick one. --json prints\n" +
			"{\"tokens\", \"keys\", \"layers\": [{\"layer\", \"heads\": [{\"head\", \"weights\"}]}]} on stdout instead (\"keys\" labels\n" +
			"the columns: the tokens, or linformer's k projected slots). Sparse variants show their block pattern (the\n" +
			"entries outside it are 0); linformer its n×k map; gqa each query head; linear the weights its kernel\n" +
			"implies, φ(q_i)·φ(k_j) / (Σ_j φ(q_i)·φ(k_j) + eps) from its φ(Q) and φ(K) (exactly: out_i = Σ_j w_ij v_j).\n" +
			"performer (random features) and nystrom (three landmark softmaxes, no n×n one) are refused." +
			examples("zoo attention vanilla.tiny --input text.txt -o map.png", "zoo attention sparse --input text.txt --layer 0 --head 1 -o map.png",
				"zoo attention linformer.tiny --weights w.safetensors --input text.txt --json"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` whose first tokens are drawn", Required: true},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the heat maps to `FILE.png`"},
			&cli.IntFlag{Name: "tokens", Value: 32, Usage: "tokens (bytes) of the input to encode, at most the model's maximum length"},
			&cli.IntFlag{Name: "layer", Value: -1, Usage: "draw layer `L` only (from 0; -1: every layer)"},
			&cli.IntFlag{Name: "head", Value: -1, Usage: "draw head `H` only (from 0; -1: every head)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagBackend, flagJSON,
		),
		Action: attentionAction,
	}
}

func attentionAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("attention: want one variant name (see `zoo list`), got %d arguments", c.NArg())
	}
	ref, outPath, asJSON := c.Args().First(), c.String("output"), c.Bool(flagJSON.Name)
	if zooroot.IsONNXPath(ref) {
		return badInputf("attention: %s is an .onnx file; zoo attention draws zoo's variants, whose graphs name each layer's attention softmax", ref)
	}
	if outPath == "" && !asJSON {
		return badInputf("attention: give -o FILE.png for the picture, or --json for the weights")
	}
	if outPath != "" {
		if err := checkOutputFile("-o", outPath, ".png"); err != nil {
			return badInput(err)
		}
	}
	ntok, threads, layer, head := c.Int("tokens"), c.Int("threads"), c.Int("layer"), c.Int("head")
	if ntok < 1 || threads < 0 {
		return badInputf("--tokens must be at least 1 and --threads not negative (got %d, %d)", ntok, threads)
	}
	text, err := format.ReadHead(c.String("input"), ntok)
	if err != nil {
		return badInput(err)
	}
	m, err := loadModel(c.Context, c, ref)
	if err != nil {
		return err
	}
	if text, err = fitMaxLen(text, m, ntok, c.IsSet("tokens")); err != nil {
		return err
	}
	if why, ok := attnmap.NoMatrix(m.Variant()); ok {
		return badInputf("attention: %s has no attention matrix to draw: %s", m.Name(), why)
	}
	ids := tokenize.Encode(text)
	plan, err := attnmap.NewPlan(m.Graph(), m.Variant(), m.Config(), len(ids))
	if err != nil {
		return badInputf("attention: %s: %w", m.Name(), err)
	}
	if layer >= len(plan.Sites) || layer < -1 {
		return badInputf("--layer %d: %s has layers 0 to %d", layer, m.Name(), len(plan.Sites)-1)
	}
	if heads := plan.Layout.Heads; head >= heads || head < -1 {
		return badInputf("--head %d: %s has heads 0 to %d", head, m.Name(), heads-1)
	}
	plan.Only(layer)
	feeds, err := planFeeds(m.Graph(), nil)
	if err != nil {
		return badInput(err)
	}
	inputs, err := feeds.Tensors(&tokenize.Batch{B: 1, N: len(ids), Tokens: ids, Lengths: []int{len(ids)}}, tokenize.PadID)
	if err != nil {
		return failed(fmt.Errorf("feed %s: %w", m.Name(), err))
	}
	choice, prog, err := compileModel(m, backends.Options{Threads: threads, KeepIntermediates: plan.Keep()})
	if err != nil {
		return err
	}
	defer prog.Close()
	outs, err := prog.Run(c.Context, inputs)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	doc, err := plan.Read(m.Name(), outs, ids, head)
	if err != nil {
		return failed(fmt.Errorf("attention of %s, %w", m.Name(), err))
	}
	if outPath != "" {
		title := fmt.Sprintf("%s on %s of %s", doc.Model, format.Plural(len(ids), "token"), filepath.Base(c.String("input")))
		if err := tensorio.AtomicWriteFile(outPath, func(w io.Writer) error { return attention.Draw(w, *doc, title) }); err != nil {
			return failed(fmt.Errorf("-o %s: %w", outPath, err))
		}
	}
	if asJSON {
		return format.WriteJSON(c.App.Writer, doc)
	}
	fmt.Fprintf(c.App.Writer, "attention of %s (layers: %d, heads each: %d, tokens: %d): %s\n", doc.Model, len(doc.Layers), len(doc.Layers[0].Heads), len(ids), outPath)
	return nil
}

// fitMaxLen cuts text to m's maximum length when it has one, or refuses as bad input when
// the user asked for that many tokens with --tokens (tokensSet: --tokens tokens).
func fitMaxLen(text []byte, m *zooroot.Model, tokens int, tokensSet bool) ([]byte, error) {
	p := m.Description().Caps.MaxLenParam
	if p == "" || len(text) <= m.Config().Int(p) {
		return text, nil
	}
	if tokensSet {
		return nil, badInputf("--tokens %d is longer than %s's maximum length %d (max_len)", tokens, m.Name(), m.Config().Int(p))
	}
	return text[:m.Config().Int(p)], nil
}
