package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/train"
)

// Flags that eval shares with train: the objective and its loss.
var (
	flagObjective      = &cli.StringFlag{Name: "objective", Value: train.MLM, Usage: "mlm (masked tokens, BERT's 15 %) or clm (next token; turns the variant's causal on)"}
	flagLabelSmoothing = &cli.Float64Flag{Name: "label-smoothing", Usage: "label smoothing ε of the cross-entropy, in [0, 1] (PyTorch's formula)"}
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "score a model on held-out text: loss, bits per byte, token accuracy, perplexity",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Cuts the input into windows as `zoo run` does and scores every window once. mlm masks 15 % of each\n" +
			"window's tokens BERT's way (80 % the mask id, 10 % a random byte, 10 % unchanged), drawn from --seed, and\n" +
			"counts those; clm builds the variant with causal=true and counts every position but a window's last, whose\n" +
			"target is the next token. loss is the mean cross-entropy over counted tokens (with --label-smoothing as\n" +
			"F.cross_entropy); bits per byte and perplexity are the plain cross-entropy: total nats / ln 2 / bytes of the\n" +
			"counted targets, and exp(mean nats). Without --weights the model has the seed's random weights. Weights\n" +
			"that zoo train wrote are scored as the run scored its held-out text: --window, --objective and --seed\n" +
			"(mlm's masks) default to the run's, recorded in the checkpoint; give them to score otherwise." +
			examples("zoo eval vanilla.tiny --weights model.safetensors --input heldout.txt", "zoo eval vanilla.tiny -i heldout.txt --objective clm --json"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "held-out text `FILE`", Required: true},
			flagObjective, flagLabelSmoothing,
			&cli.IntFlag{Name: "window", Usage: "tokens per window (0: min(512, the model's maximum length))"},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "windows per batch"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagPrecision(), flagBackend, flagJSON,
		),
		Action: evalAction,
	}
}

// evalReport is what `zoo eval` prints; --json prints it as JSON.
type evalReport struct {
	Model          string                `json:"model"`
	Weights        zooroot.WeightsSource `json:"weights"`
	Objective      string                `json:"objective"`
	Input          string                `json:"input"`
	Windows        int                   `json:"windows"`
	Window         int                   `json:"window"`
	Tokens         int                   `json:"tokens"`
	Loss           float64               `json:"loss"`
	BitsPerByte    float64               `json:"bits_per_byte"`
	Accuracy       float64               `json:"accuracy"`
	Perplexity     float64               `json:"perplexity"`
	LabelSmoothing float64               `json:"label_smoothing"`
	Backend        string                `json:"backend"`
	Precision      string                `json:"precision"`
	RunMS          float64               `json:"run_ms"`
	// FromCheckpoint lists the flags whose values came from the training checkpoint given as
	// --weights ("--window"), not from the command line or the defaults.
	FromCheckpoint []string `json:"from_checkpoint,omitempty"`
	Seed           uint64   `json:"seed"`
}

func evalAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("eval: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	cfg, err := evalConfig(c)
	if err != nil {
		return err
	}
	inPath := c.String("input")
	if st, err := os.Stat(inPath); err != nil {
		return badInputf("input %s: %w", inPath, errors.Unwrap(err))
	} else if st.IsDir() {
		return badInputf("input %s is a directory; give a text file", inPath)
	}
	opts, err := loadOptions(c.Context, c)
	if err != nil {
		return err
	}
	var taken []string
	if w := c.String(flagWeights.Name); w != "" && !zooroot.IsONNXPath(c.Args().First()) {
		ck, err := train.TrainedWith(w)
		if err != nil {
			return err
		}
		if cfg, taken, err = cfg.FromCheckpoint(ck, func(option string) bool { return c.IsSet(flagOf(option)) }); err != nil {
			return err
		}
	}
	opts.Configure = train.EvalHook(cfg.Objective, opts.Set)
	m, err := loadWith(c.Context, c, c.Args().First(), opts)
	if err != nil {
		return err
	}
	defer m.Close()
	// The session cancels c.Context on SIGINT and SIGTERM (session.go).
	res, err := train.Evaluate(c.Context, m, train.TextSource{Name: "input", Path: inPath}, cfg)
	if err != nil {
		return err
	}
	rep := evalReport{Model: m.Name(), Weights: m.Weights(), Objective: cfg.Objective, Input: inPath, Windows: res.Windows,
		Window: res.Window, Tokens: res.Tokens, Loss: res.Loss, BitsPerByte: res.BitsPerByte, Accuracy: res.Accuracy,
		Perplexity: res.Perplexity, LabelSmoothing: cfg.LabelSmoothing, Backend: res.Backend.Backend.Name(),
		Precision: reportedPrecision(res.Backend.Backend.Name(), cfg.Precision), RunMS: format.MS(res.Duration), Seed: cfg.Seed}
	for _, o := range taken {
		rep.FromCheckpoint = append(rep.FromCheckpoint, "--"+flagOf(o))
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rep)
	}
	printEvalReport(c.App.Writer, rep)
	return nil
}

// evalConfig reads zoo eval's flags into a train.EvalConfig.
func evalConfig(c flags) (train.EvalConfig, error) {
	cfg := train.EvalConfig{Objective: c.String(flagObjective.Name), LabelSmoothing: c.Float64(flagLabelSmoothing.Name),
		Window: c.Int("window"), Batch: c.Int("batch"), Seed: c.Uint64(flagSeed.Name), Threads: c.Int("threads")}
	// The objective and the label smoothing as the library checks them; --batch and
	// --threads in one message.
	probe := cfg
	probe.Batch, probe.Threads = 1, 0
	if err := probe.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Batch < 1 || cfg.Threads < 0 {
		return cfg, badInputf("--batch must be at least 1 and --threads not negative")
	}
	prec, err := precisionOf(c)
	if err != nil {
		return cfg, err
	}
	cfg.Precision = prec
	return cfg, nil
}

func printEvalReport(w io.Writer, r evalReport) {
	fmt.Fprintf(w, "model          %s\n", r.Model)
	fmt.Fprintf(w, "weights        %s\n", r.Weights)
	fmt.Fprintf(w, "input          %s: %s of ≤%d, %s, %s scored\n", r.Input, format.Plural(r.Windows, "window"), r.Window, r.Objective, format.Plural(r.Tokens, "token"))
	if len(r.FromCheckpoint) > 0 {
		var set []string
		for _, f := range r.FromCheckpoint {
			switch f {
			case "--window":
				set = append(set, fmt.Sprintf("--window %d", r.Window))
			case "--objective":
				set = append(set, "--objective "+r.Objective)
			case "--seed":
				set = append(set, fmt.Sprintf("--seed %d", r.Seed))
			}
		}
		fmt.Fprintf(w, "settings       %s: the training run's, from %s\n", strings.Join(set, ", "), r.Weights.File)
	}
	if r.LabelSmoothing > 0 {
		fmt.Fprintf(w, "loss           %.6f (label smoothing %g)\n", r.Loss, r.LabelSmoothing)
	} else {
		fmt.Fprintf(w, "loss           %.6f\n", r.Loss)
	}
	fmt.Fprintf(w, "bits per byte  %.4f\n", r.BitsPerByte)
	fmt.Fprintf(w, "accuracy       %.4f\n", r.Accuracy)
	fmt.Fprintf(w, "perplexity     %.3f\n", r.Perplexity)
}
