package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/approx"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/attnmap"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func approxCommand() *cli.Command {
	return &cli.Command{
		Name:      "approx",
		Usage:     "measure how far a variant's attention approximation is from exact softmax attention on a text, sweeping its knob",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Runs vanilla[.PRESET] with --weights on the first --tokens bytes of --input, takes every layer's per-head Q,\n" +
			"K and V from that run, and computes on them exact softmax attention and NAME's approximation (float64), over\n" +
			"a sweep of its knob: linformer's k (E, F drawn N(0, 1/k), the paper's random projection, not trained ones),\n" +
			"performer's random features (FAVOR+), nystrom's landmarks (segment means, exact pseudo-inverse), sparse's\n" +
			"window in blocks (coverage = the fraction of pairs attended), linear's elu+1 kernel (no knob). vanilla\n" +
			"compares the backend's own attention output with the exact one (0 up to rounding). The error is\n" +
			"‖O − O_exact‖_F / ‖O_exact‖_F per layer and head; the table prints the mean over heads per layer, and the mean\n" +
			"and worst over all. --values sets the sweep; --seed seeds the random draws. -o plots error against the knob." +
			examples("zoo approx linformer --weights vanilla.safetensors --input text.txt",
				"zoo approx performer.tiny --weights w.safetensors --input text.txt --values 16,64,256 --json",
				"zoo approx nystrom --weights vanilla.safetensors --input text.txt -o nystrom.png"),
		Flags: []cli.Flag{flagPreset, flagSeed, flagRegistry,
			&cli.StringFlag{Name: "weights", Usage: "the vanilla model's state_dict `FILE`.safetensors (zoo train, zoo export --weights, or PyTorch)", Required: true},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "text `FILE` whose first tokens are encoded", Required: true},
			&cli.IntFlag{Name: "tokens", Value: 256, Usage: "tokens (bytes) of the input, at most vanilla's maximum length"},
			&cli.StringFlag{Name: "values", Usage: "knob values to sweep, `V,V,...` (default: powers of two up to the length)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "plot the error against the knob to `FILE.png`"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagBackend, flagJSON,
		},
		Action: approxAction,
	}
}

func approxAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("approx: want one variant name (see `zoo list`), got %d arguments", c.NArg())
	}
	ref, outPath, ntok, threads := c.Args().First(), c.String("output"), c.Int("tokens"), c.Int("threads")
	if err := checkOutputFile("-o", outPath, ".png"); outPath != "" && err != nil {
		return badInput(err)
	}
	if ntok < 2 || threads < 0 {
		return badInputf("--tokens must be at least 2 and --threads not negative (got %d, %d)", ntok, threads)
	}
	spec, err := resolveVariant(c.Context, c, ref)
	if err != nil {
		return err
	}
	entry, preset, cfg := spec.Entry, spec.Preset, spec.Config
	if _, ok := approx.Knob(entry.Name); !ok {
		return badInputf("approx: no approximation of %s is known (variants: linformer, performer, nystrom, sparse, linear, vanilla); its attention is exact softmax attention or not an approximation of it", entry.Name)
	}
	text, err := format.ReadHead(c.String("input"), ntok)
	if err != nil {
		return badInput(err)
	}
	if len(text) < 2 {
		return badInputf("input %s: %d byte: want at least 2 tokens", c.String("input"), len(text))
	}
	m, err := loadModel(c.Context, c, joinPreset("vanilla", preset))
	if err != nil {
		return err
	}
	if text, err = fitMaxLen(text, m, ntok, c.IsSet("tokens")); err != nil {
		return err
	}
	block := approx.SparseBlock(entry.Name, cfg.Int("block"), len(text))
	values, err := approx.Values(c.String("values"), entry.Name, len(text), block)
	if err != nil {
		return badInput(err)
	}
	sites, err := attnmap.Sites(m.Graph())
	if err != nil {
		return badInputf("approx: %s: %w", m.Name(), err)
	}
	keep, err := approx.Probes(m.Graph(), sites, m.Name())
	if err != nil {
		return failed(err)
	}
	feeds, err := planFeeds(m.Graph(), nil)
	if err != nil {
		return badInput(err)
	}
	ids := tokenize.Encode(text)
	inputs, err := feeds.Tensors(&tokenize.Batch{B: 1, N: len(ids), Tokens: ids, Lengths: []int{len(ids)}}, tokenize.PadID)
	if err != nil {
		return failed(err)
	}
	choice, prog, err := compileModel(m, backends.Options{Threads: threads, KeepIntermediates: keep})
	if err != nil {
		return err
	}
	defer prog.Close()
	outs, err := prog.Run(c.Context, inputs)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	doc, err := approx.Sweep(approx.Setup{Variant: entry.Name, Vanilla: m.Name(), N: len(ids), Values: values, Block: block, Seed: c.Uint64(flagSeed.Name)}, outs, keep)
	if err != nil {
		return failed(err)
	}
	if outPath != "" {
		if err := tensorio.AtomicWriteFile(outPath, func(w io.Writer) error { return approx.Plot(w, *doc) }); err != nil {
			return failed(fmt.Errorf("-o %s: %w", outPath, err))
		}
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, doc)
	}
	approx.Print(c.App.Writer, *doc, outPath)
	return nil
}

// joinPreset is "name.preset", or name when preset is "".
func joinPreset(name, preset string) string {
	if preset != "" {
		return name + "." + preset
	}
	return name
}
