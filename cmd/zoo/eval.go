package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Flags that eval shares with train: the objective and its loss.
var (
	flagObjective      = &cli.StringFlag{Name: "objective", Value: string(lmdata.MLM), Usage: "mlm (masked tokens, BERT's 15 %) or clm (next token; turns the variant's causal on)"}
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
			"counted targets, and exp(mean nats). Without --weights the model has the seed's random weights." +
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
}

// objectiveHook turns causal on for clm (a variant without the hyperparameter, or a
// --set causal=false, is bad input); mlm leaves the config alone.
func objectiveHook(sets []string, obj lmdata.Objective) func(variant.Description, variant.Config) error {
	return func(d variant.Description, cfg variant.Config) error {
		if obj != lmdata.CLM {
			return nil
		}
		if _, ok := d.Param("causal"); !ok {
			return badInputf("%s has no causal hyperparameter, which --objective clm needs (its attention cannot hide later positions); use --objective mlm", d.Name)
		}
		for _, s := range sets {
			if k, v, _ := strings.Cut(s, "="); strings.TrimSpace(k) == "causal" && strings.TrimSpace(v) != "true" {
				return badInputf("--objective clm needs causal=true; drop --set %s", s)
			}
		}
		cfg["causal"] = true
		return nil
	}
}

// checkObjectiveFile refuses clm for an ONNX file that zoo did not export with causal=true.
func checkObjectiveFile(m *zooroot.Model, obj lmdata.Objective) error {
	if obj == lmdata.CLM && m.FromFile() && !strings.Contains(m.Graph().Meta["config"], `"causal":true`) {
		return badInputf("%s was not exported with causal=true, which --objective clm needs (export a variant with --set causal=true, or use --objective mlm)", m.Variant())
	}
	return nil
}

func evalAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("eval: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	obj, err := lmdata.ParseObjective(c.String(flagObjective.Name))
	if err != nil {
		return badInputf("--objective: %w", err)
	}
	eps := c.Float64(flagLabelSmoothing.Name)
	if !(eps >= 0 && eps <= 1) {
		return badInputf("--label-smoothing must be in [0, 1], got %v", eps)
	}
	if c.Int("batch") < 1 || c.Int("threads") < 0 {
		return badInputf("--batch must be at least 1 and --threads not negative")
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	inPath := c.String("input")
	f, err := os.Open(inPath)
	if err != nil {
		return badInputf("input %s: %w", inPath, errors.Unwrap(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return badInputf("input %s is a directory; give a text file", inPath)
	}

	opts, err := loadOptions(c.Context, c)
	if err != nil {
		return err
	}
	opts.Configure = objectiveHook(c.StringSlice(flagSet.Name), obj)
	m, err := loadWith(c.Context, c, c.Args().First(), opts)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := checkObjectiveFile(m, obj); err != nil {
		return err
	}
	tokName, maskName, err := zooroot.TokenInputs(m.Graph())
	if err != nil {
		return badInput(err)
	}
	vocab, err := logitsWidth(m)
	if err != nil {
		return badInput(err)
	}
	window, err := zooroot.ChooseWindow(m.Name(), m.MaxLen(), &zooroot.FeedPlan{}, c.Int("window"))
	if err != nil {
		return badInput(err)
	}
	windows, err := lmdata.ReadWindows(f, window)
	if errors.Is(err, tokenize.ErrEmpty) {
		return badInputf("input %s is empty (0 bytes): nothing to score", inPath)
	}
	if err != nil {
		return failed(fmt.Errorf("input %s: %w", inPath, err))
	}
	batch := c.Int("batch")
	opt := lmdata.ByteOptions(obj, batch, c.Uint64(flagSeed.Name))
	if vocab < int(opt.RandomHi) {
		return badInputf("%s has %d output classes; the byte tokenizer needs 257", m.Name(), vocab)
	}
	loader, err := lmdata.NewLoader(windows, opt)
	if err != nil {
		return badInput(err)
	}
	if err := zooroot.GuardMemory(m.Name(), m.Graph(), zooroot.MemoryRun{Batch: min(batch, len(windows)), N: len(windows[0]),
		Shapes: zooroot.TokenShapes(tokName, maskName), BatchOption: "--batch", NOption: "--window"}); err != nil {
		return err
	}
	choice, prog, err := compileModel(m, backends.Options{Threads: c.Int("threads"), Precision: prec})
	if err != nil {
		return err
	}
	defer prog.Close()
	// The session cancels c.Context on SIGINT and SIGTERM (session.go).
	ctx := c.Context

	t0 := time.Now()
	score := lmdata.Score{Smoothing: eps}
	for first := 0; first < loader.Windows(); first += batch {
		b := loader.Sequential(first, batch)
		tokens, mask := b.Tensors()
		feed := map[string]*tensor.Tensor{tokName: tokens}
		if maskName != "" {
			feed[maskName] = mask
		}
		outs, err := prog.Run(ctx, feed)
		if err != nil {
			return failed(fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err))
		}
		logits := outs[variant.OutputLogits]
		if logits == nil {
			return failed(fmt.Errorf("%s produced no %s output", m.Name(), variant.OutputLogits))
		}
		if err := score.Add(logits.F32, vocab, b.Targets, b.TargetBytes); err != nil {
			return failed(fmt.Errorf("score %s: %w", m.Name(), err))
		}
	}
	if score.Tokens == 0 {
		return badInputf("input %s: no token has a target (clm predicts the next token within a window: use windows of 2 tokens or more)", inPath)
	}
	rep := evalReport{Model: m.Name(), Weights: m.Weights(), Objective: string(obj), Input: inPath, Windows: loader.Windows(),
		Window: window, Tokens: score.Tokens, Loss: score.MeanLoss(), BitsPerByte: score.BitsPerByte(), Accuracy: score.Accuracy(),
		Perplexity: score.Perplexity(), LabelSmoothing: eps, Backend: choice.Backend.Name(),
		Precision: reportedPrecision(choice.Backend.Name(), prec), RunMS: format.MS(time.Since(t0))}
	if math.IsNaN(rep.Loss) || math.IsInf(rep.Loss, 0) {
		return failed(fmt.Errorf("%s: the loss on %s is %v (the weights hold NaN or infinite values?)", m.Name(), inPath, rep.Loss))
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rep)
	}
	printEvalReport(c.App.Writer, rep)
	return nil
}

// logitsWidth returns the number of classes of m's logits output (its fixed last dimension).
func logitsWidth(m *zooroot.Model) (int, error) {
	for _, o := range m.Graph().Outputs {
		if o.Name == variant.OutputLogits && len(o.Shape) == 3 && o.Shape[2].Known() {
			return int(o.Shape[2].Size), nil
		}
	}
	return 0, fmt.Errorf("%s has no %s output (batch, seq, vocab) to score", m.Name(), variant.OutputLogits)
}

func printEvalReport(w io.Writer, r evalReport) {
	fmt.Fprintf(w, "model          %s\n", r.Model)
	fmt.Fprintf(w, "weights        %s\n", r.Weights)
	fmt.Fprintf(w, "input          %s: %s of ≤%d, %s, %s scored\n", r.Input, format.Plural(r.Windows, "window"), r.Window, r.Objective, format.Plural(r.Tokens, "token"))
	if r.LabelSmoothing > 0 {
		fmt.Fprintf(w, "loss           %.6f (label smoothing %g)\n", r.Loss, r.LabelSmoothing)
	} else {
		fmt.Fprintf(w, "loss           %.6f\n", r.Loss)
	}
	fmt.Fprintf(w, "bits per byte  %.4f\n", r.BitsPerByte)
	fmt.Fprintf(w, "accuracy       %.4f\n", r.Accuracy)
	fmt.Fprintf(w, "perplexity     %.3f\n", r.Perplexity)
}
