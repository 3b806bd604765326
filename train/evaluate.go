package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	zoo "github.com/zoo-dev/zoo"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// EvalConfig says how Evaluate scores a model.
type EvalConfig struct {
	// Objective is MLM (mask 15 % of each window's tokens BERT's way, drawn from Seed, and
	// count those) or CLM (count every position but a window's last, whose target is the
	// next token; the model must be causal: load a variant with EvalHook).
	Objective string
	// LabelSmoothing is the cross-entropy's label smoothing, in [0, 1] (F.cross_entropy's).
	LabelSmoothing float64
	// Window is the number of tokens per window (0: min(512, the model's maximum length));
	// Batch the number of windows per run.
	Window, Batch int
	// Seed draws mlm's masks.
	Seed uint64
	// Threads caps the backend's worker threads (0: every core); Precision is "" (the
	// backend's default), "fp32", "bf16" or "int8".
	Threads   int
	Precision string
}

// Option names of EvalConfig, as messages write them.
const (
	optEvalObjective      = "EvalConfig.Objective"
	optEvalLabelSmoothing = "EvalConfig.LabelSmoothing"
	optEvalWindow         = "EvalConfig.Window"
	optEvalBatch          = "EvalConfig.Batch"
	optEvalSeed           = "EvalConfig.Seed"
	optEvalThreads        = "EvalConfig.Threads"
	optEvalPrecision      = "EvalConfig.Precision"
)

// Validate checks the settings; the error, an *zoo.InputError, names the field at fault.
func (c EvalConfig) Validate() error {
	switch {
	case c.Objective != MLM && c.Objective != CLM:
		return inputErrf(optEvalObjective, "%s: objective %q: want mlm or clm", optEvalObjective, c.Objective)
	case !(c.LabelSmoothing >= 0 && c.LabelSmoothing <= 1):
		return inputErrf(optEvalLabelSmoothing, "%s must be in [0, 1], got %v", optEvalLabelSmoothing, c.LabelSmoothing)
	case c.Batch < 1:
		return inputErrf(optEvalBatch, "%s must be at least 1, got %d", optEvalBatch, c.Batch)
	case c.Threads < 0:
		return inputErrf(optEvalThreads, "%s must not be negative, got %d", optEvalThreads, c.Threads)
	case c.Precision != "" && !slices.Contains(zoo.Precisions(), c.Precision):
		ps := zoo.Precisions()
		return inputErrf(optEvalPrecision, "%s %q: want %s or %s", optEvalPrecision, c.Precision, strings.Join(ps[:len(ps)-1], ", "), ps[len(ps)-1])
	}
	return nil
}

// FromCheckpoint returns c with the settings of ck's run (a training checkpoint given as the
// model's weights, TrainedWith) where given says the caller set none, so that Evaluate scores
// text as the run's own evaluations did: the window (EvalConfig.Window), the objective
// (EvalConfig.Objective) and the seed of mlm's masks (EvalConfig.Seed). given reports by
// option name ("EvalConfig.Window") what the caller set (nil: nothing). It also returns the
// names of the options it took from the checkpoint. A run that cut its text with another
// tokenizer than zoo's byte tokenizer, which Evaluate uses, is an *zoo.InputError.
func (c EvalConfig) FromCheckpoint(ck *Checkpoint, given func(option string) bool) (EvalConfig, []string, error) {
	if ck == nil {
		return c, nil, nil
	}
	if ck.Tokenizer != "" && ck.Tokenizer != ByteTokenizer {
		return c, nil, inputErrf(optLoadWeights, "%s %s was trained on text cut by the %s tokenizer; Evaluate scores with zoo's byte tokenizer",
			optLoadWeights, ck.Path, ck.Tokenizer)
	}
	if given == nil {
		given = func(string) bool { return false }
	}
	var taken []string
	if !given(optEvalWindow) && ck.Config.Window > 0 {
		c.Window = ck.Config.Window
		taken = append(taken, optEvalWindow)
	}
	if !given(optEvalObjective) && ck.Config.Objective != "" {
		c.Objective = ck.Config.Objective
		taken = append(taken, optEvalObjective)
	}
	if !given(optEvalSeed) && c.Objective == MLM {
		c.Seed = ck.Config.Seed
		taken = append(taken, optEvalSeed)
	}
	return c, taken, nil
}

// EvalResult is a model's score on a text.
type EvalResult struct {
	// Windows is the number of windows scored, Window their length (the last may be
	// shorter), Tokens the number of tokens counted.
	Windows, Window, Tokens int
	// Loss is the mean cross-entropy over the counted tokens (with EvalConfig.LabelSmoothing
	// as F.cross_entropy), BitsPerByte and Perplexity the plain cross-entropy's: total nats /
	// ln 2 / bytes of the counted targets, and exp(mean nats); Accuracy the share of counted
	// tokens whose largest logit is the target's.
	Loss, BitsPerByte, Accuracy, Perplexity float64
	// Backend is the backend the model ran on; Duration the time the scoring runs took.
	Backend  backends.Choice
	Duration time.Duration
}

// EvalHook is the LoadOptions.Configure of a variant to evaluate with objective: for CLM it
// turns the variant's causal hyperparameter on (a variant without one, or set's causal=false,
// is an *zoo.InputError); for MLM it leaves the config alone.
func EvalHook(objective string, set map[string]string) func(variant.Description, variant.Config) error {
	if objective != CLM {
		return func(variant.Description, variant.Config) error { return nil }
	}
	return causalHook(nil, set, func(d variant.Description) error {
		return inputErrf(optEvalObjective, "%s has no causal hyperparameter, which %s clm needs (its attention cannot hide later positions); use %s mlm",
			d.Name, optEvalObjective, optEvalObjective)
	}, func(v string) error {
		return inputErrf(optLoadSet, "%s clm needs causal=true; drop %s causal=%s", optEvalObjective, optLoadSet, v)
	})
}

// Evaluate scores m on text: it cuts the text into windows as `zoo run` does (zoo's byte
// tokenizer) and scores every window once, cfg.Batch at a time, with the objective's
// targets. m is compiled for it (cfg.Threads, cfg.Precision) and closed by the caller. A
// model that cannot be scored (no logits output of 257 classes, not causal for CLM), a
// text with no token to count and a loss that is not finite are errors; the first two are
// *zoo.InputError.
func Evaluate(ctx context.Context, m *zoo.Model, text TextSource, cfg EvalConfig) (EvalResult, error) {
	if err := cfg.Validate(); err != nil {
		return EvalResult{}, err
	}
	text = text.named("text")
	if cfg.Objective == CLM && !causal(m) {
		if m.FromFile() {
			return EvalResult{}, inputErrf(optEvalObjective, "%s was not exported with causal=true, which %s clm needs (export a variant with %s causal=true, or use %s mlm)",
				m.Variant(), optEvalObjective, optLoadSet, optEvalObjective)
		}
		return EvalResult{}, inputErrf(optEvalObjective, "%s clm needs %s built with causal=true (load it with LoadOptions.Configure EvalHook)", optEvalObjective, m.Name())
	}
	tokName, maskName, err := zoo.TokenInputs(m.Graph())
	if err != nil {
		return EvalResult{}, inputErr("", err)
	}
	vocab, err := logitsWidth(m)
	if err != nil {
		return EvalResult{}, inputErr("", err)
	}
	window, err := zoo.ChooseWindow(m.Name(), m.MaxLen(), &zoo.FeedPlan{}, cfg.Window)
	if err != nil {
		return EvalResult{}, renamed(err, optEncWindow, optEvalWindow)
	}
	if err := text.check("score"); err != nil {
		return EvalResult{}, err
	}
	src, release, err := text.windowSource(window)
	switch {
	case errors.Is(err, tokenize.ErrEmpty):
		return EvalResult{}, inputErrf(text.Name, "%s is empty (0 bytes): nothing to score", text.describe())
	case err != nil && zoo.IsInput(err):
		return EvalResult{}, err
	case err != nil:
		return EvalResult{}, fmt.Errorf("%s: %w", text.describe(), err)
	}
	defer release()
	opt := lmdata.ByteOptions(lmdata.Objective(cfg.Objective), cfg.Batch, cfg.Seed)
	if vocab < int(opt.RandomHi) {
		return EvalResult{}, inputErrf("", "%s has %d output classes; the byte tokenizer needs 257", m.Name(), vocab)
	}
	loader, err := lmdata.NewLoaderFrom(src, opt)
	if err != nil {
		return EvalResult{}, inputErr("", err)
	}
	first, err := src.Window(0)
	if err != nil {
		return EvalResult{}, fmt.Errorf("%s: %w", text.describe(), err)
	}
	if err := zoo.GuardMemory(m.Name(), m.Graph(), zoo.MemoryRun{Batch: min(cfg.Batch, src.Len()), N: len(first),
		Shapes: zoo.TokenShapes(tokName, maskName), BatchOption: optEvalBatch, NOption: optEvalWindow}); err != nil {
		return EvalResult{}, err
	}
	choice, prog, err := m.CompileWith(backends.Options{Threads: cfg.Threads, Precision: cfg.Precision})
	if err != nil {
		return EvalResult{}, err
	}
	defer prog.Close()

	t0 := time.Now()
	score := lmdata.Score{Smoothing: cfg.LabelSmoothing}
	for first := 0; first < loader.Windows(); first += cfg.Batch {
		b, err := loader.Sequential(first, cfg.Batch)
		if err != nil {
			return EvalResult{}, fmt.Errorf("%s: %w", text.describe(), err)
		}
		tokens, mask := b.Tensors()
		feed := map[string]*tensor.Tensor{tokName: tokens}
		if maskName != "" {
			feed[maskName] = mask
		}
		outs, err := prog.Run(ctx, feed)
		if err != nil {
			return EvalResult{}, fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err)
		}
		logits := outs[variant.OutputLogits]
		if logits == nil {
			return EvalResult{}, fmt.Errorf("%s produced no %s output", m.Name(), variant.OutputLogits)
		}
		if err := score.Add(logits.F32, vocab, b.Targets, b.TargetBytes); err != nil {
			return EvalResult{}, fmt.Errorf("score %s: %w", m.Name(), err)
		}
	}
	if score.Tokens == 0 {
		return EvalResult{}, inputErrf(text.Name, "%s: no token has a target (clm predicts the next token within a window: use windows of 2 tokens or more)", text.describe())
	}
	r := EvalResult{Windows: loader.Windows(), Window: window, Tokens: score.Tokens, Loss: score.MeanLoss(), BitsPerByte: score.BitsPerByte(),
		Accuracy: score.Accuracy(), Perplexity: score.Perplexity(), Backend: choice, Duration: time.Since(t0)}
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
		where := text.Path
		if where == "" {
			where = text.Name
		}
		return r, fmt.Errorf("%s: the loss on %s is %v (the weights hold NaN or infinite values?)", m.Name(), where, r.Loss)
	}
	return r, nil
}

// logitsWidth returns the number of classes of m's logits output (its fixed last dimension).
func logitsWidth(m *zoo.Model) (int, error) {
	for _, o := range m.Graph().Outputs {
		if o.Name == variant.OutputLogits && len(o.Shape) == 3 && o.Shape[2].Known() {
			return int(o.Shape[2].Size), nil
		}
	}
	return 0, fmt.Errorf("%s has no %s output (batch, seq, vocab) to score", m.Name(), variant.OutputLogits)
}
