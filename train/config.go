package train

import (
	"math"
	"strconv"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/optim"
)

// The training objectives.
const (
	// MLM is masked language modelling: BERT's 15 % of each window's tokens, 80 % replaced by
	// the mask id, 10 % by a random byte, 10 % unchanged, drawn from Config.Seed.
	MLM = "mlm"
	// CLM is causal language modelling: the next token within each window, with the
	// variant's causal hyperparameter on (Load turns it on).
	CLM = "clm"
)

// Config is everything that decides a run's numbers, and how the run is carried out. The
// fields up to Seed are recorded in every checkpoint (ReadCheckpoint reads them back), and a
// resumed run must keep them, Steps excepted; the others may change from one invocation to
// the next. Start from DefaultConfig: the zero value is not a valid run.
type Config struct {
	// Steps is the number of optimizer steps in all (a resumed run counts the steps already
	// taken). Step k (1-based) trains on windows (k-1)·Batch … k·Batch-1 of the text, taken
	// cyclically (Shuffle: in a seeded order).
	Steps int
	// Batch is the number of windows per step (and per batch of an evaluation).
	Batch int
	// Window is the number of tokens per window; 0: min(512, the model's maximum length).
	Window int
	// Shuffle visits the windows in a seeded random order, each pass its own.
	Shuffle bool
	// Objective is MLM or CLM.
	Objective string
	// Optimizer is "adamw" (torch.optim.AdamW) or "sgd" (torch.optim.SGD).
	Optimizer string
	// LR is the peak learning rate.
	LR float64
	// WeightDecay applies to every parameter (AdamW: decoupled; SGD: added to the gradient).
	WeightDecay float64
	// Eps and Betas are AdamW's.
	Eps   float64
	Betas [2]float64
	// Momentum is SGD's (0: plain SGD); AdamW takes none.
	Momentum float64
	// Warmup is the number of steps of linear warm-up from 0 to LR.
	Warmup int
	// Schedule is the learning rate after warm-up: "constant", "linear" (to 0 at the last
	// step) or "cosine".
	Schedule string
	// LabelSmoothing is the cross-entropy's label smoothing, in [0, 1) (PyTorch's formula).
	LabelSmoothing float64
	// Clip clips the global gradient norm to it (0: no clipping).
	Clip float64
	// Precision of the step's matrix products: "" (the backend's default, fp32), "fp32" or
	// "bf16"; "int8" is refused (training stays fp32; int8 is for inference).
	Precision string
	// Seed draws mlm's masks, dropout and Shuffle's order (the model's initial weights are
	// LoadOptions.Seed's).
	Seed uint64

	// Threads caps the backend's worker threads and the optimizer's (0: every core).
	Threads int
	// EvalEvery also evaluates Data.Held every EvalEvery steps (0: before and after training
	// only).
	EvalEvery int
	// SaveEvery also writes the checkpoint every SaveEvery steps (0: only at the end and when
	// Run is stopped).
	SaveEvery int
	// CheckpointActivations keeps only each layer's input for the backward pass and
	// recomputes the layer's activations from it: far less activation memory, the same math
	// (losses agree to float rounding; a resumed run may set it or not).
	CheckpointActivations bool
	// Output is the checkpoint file (FILE.safetensors: the model's state_dict, with PyTorch
	// names; the optimizer's moments and step count go to optim.OptimPath(Output) beside it).
	// "" writes no checkpoint.
	Output string
	// Resume continues the run whose checkpoint is this file (ReadCheckpoint): its weights,
	// its optimizer state and its step. Its recorded settings must equal this Config's
	// (Steps excepted): see Checkpoint.Continue.
	Resume string
	// Cycles is the learning-rate schedule's cycles when the run was extended past the steps
	// it was given (ExtendRule): nil for a run of one cycle over Steps, which is every run
	// that Checkpoint.Continue did not extend. Recorded in every checkpoint.
	Cycles []Cycle
	// Labels are a front end's own settings of the run (zoo train keeps --log and --plot
	// there), recorded in every checkpoint and given back by ReadCheckpoint, so that a
	// resumed run can carry them; they change no number.
	Labels map[string]string
}

// DefaultConfig returns zoo train's defaults: 1000 steps of 8 windows, mlm, AdamW (betas 0.9
// and 0.999, eps 1e-8, weight decay 0.01) at a peak learning rate of 1e-4 decaying linearly,
// gradients clipped to norm 1.
func DefaultConfig() Config {
	h := optim.DefaultHyper()
	return Config{Steps: 1000, Batch: 8, Objective: MLM, Optimizer: h.Optimizer, LR: 1e-4, WeightDecay: h.WeightDecay,
		Eps: h.Eps, Betas: [2]float64{h.Beta1, h.Beta2}, Schedule: optim.Linear, Clip: 1}
}

// Option names, as messages write them.
const (
	optSteps                 = "Config.Steps"
	optBatch                 = "Config.Batch"
	optWindow                = "Config.Window"
	optShuffle               = "Config.Shuffle"
	optObjective             = "Config.Objective"
	optOptimizer             = "Config.Optimizer"
	optLR                    = "Config.LR"
	optWeightDecay           = "Config.WeightDecay"
	optEps                   = "Config.Eps"
	optBetas                 = "Config.Betas"
	optMomentum              = "Config.Momentum"
	optWarmup                = "Config.Warmup"
	optSchedule              = "Config.Schedule"
	optLabelSmoothing        = "Config.LabelSmoothing"
	optClip                  = "Config.Clip"
	optPrecision             = "Config.Precision"
	optSeed                  = "Config.Seed"
	optThreads               = "Config.Threads"
	optEvalEvery             = "Config.EvalEvery"
	optSaveEvery             = "Config.SaveEvery"
	optCheckpointActivations = "Config.CheckpointActivations"
	optOutput                = "Config.Output"
	optResume                = "Config.Resume"
	optTrain                 = "Data.Train"
	optHeld                  = "Data.Held"

	// Package zoo's, which messages of this package name too.
	optLoadSet     = "LoadOptions.Set"
	optLoadWeights = "LoadOptions.Weights"
	optEncWindow   = "EncoderOptions.Window"
)

// OptionNames lists every option name that messages of this package may carry (besides
// package zoo's, zoo.OptionNames), for front ends that render them with their own names.
func OptionNames() []string {
	return []string{optSteps, optBatch, optWindow, optShuffle, optObjective, optOptimizer, optLR, optWeightDecay, optEps,
		optBetas, optMomentum, optWarmup, optSchedule, optLabelSmoothing, optClip, optPrecision, optSeed, optThreads,
		optEvalEvery, optSaveEvery, optCheckpointActivations, optOutput, optResume, optTrain, optHeld,
		optEvalObjective, optEvalLabelSmoothing, optEvalWindow, optEvalBatch, optEvalSeed, optEvalThreads, optEvalPrecision}
}

// Validate checks the settings that need no model; the error, an *zoo.InputError, names the
// field at fault (Config.Batch).
func (c Config) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Objective != MLM && c.Objective != CLM:
		return inputErrf(optObjective, "%s %q: want mlm or clm", optObjective, c.Objective)
	case c.Batch < 1:
		return inputErrf(optBatch, "%s must be at least 1, got %d", optBatch, c.Batch)
	case c.Window < 0:
		return inputErrf(optWindow, "%s must be positive, got %d", optWindow, c.Window)
	case !finite(c.LabelSmoothing) || c.LabelSmoothing < 0 || c.LabelSmoothing >= 1:
		return inputErrf(optLabelSmoothing, "%s must be in [0, 1), got %g", optLabelSmoothing, c.LabelSmoothing)
	case !finite(c.Clip) || c.Clip < 0:
		return inputErrf(optClip, "%s must be a finite number ≥ 0 (0: no clipping), got %g", optClip, c.Clip)
	// The schedule's (optim.Schedule.Validate's conditions).
	case !finite(c.LR) || c.LR <= 0:
		return inputErrf(optLR, "%s must be a finite number > 0, got %g", optLR, c.LR)
	case c.Steps < 1:
		return inputErrf(optSteps, "%s must be at least 1, got %d", optSteps, c.Steps)
	case c.Warmup < 0:
		return inputErrf(optWarmup, "%s must not be negative, got %d", optWarmup, c.Warmup)
	case c.Warmup > c.Steps && len(c.Cycles) == 0:
		return inputErrf(optWarmup, "%s %d is longer than %s %d", optWarmup, c.Warmup, optSteps, c.Steps)
	case c.Schedule != optim.Constant && c.Schedule != optim.Linear && c.Schedule != optim.Cosine:
		return inputErrf(optSchedule, "%s %q: want constant, linear or cosine", optSchedule, c.Schedule)
	// The optimizer's (optim.Hyper.Validate's conditions).
	case c.Optimizer != optim.AdamW && c.Optimizer != optim.SGD:
		return inputErrf(optOptimizer, "%s %q: want adamw or sgd", optOptimizer, c.Optimizer)
	case !finite(c.WeightDecay) || c.WeightDecay < 0:
		return inputErrf(optWeightDecay, "%s must be a finite number ≥ 0, got %g", optWeightDecay, c.WeightDecay)
	}
	if c.Optimizer == optim.AdamW {
		b1, b2 := c.Betas[0], c.Betas[1]
		switch {
		case !finite(b1) || b1 < 0 || b1 >= 1, !finite(b2) || b2 < 0 || b2 >= 1:
			return inputErrf(optBetas, "%s %g,%g: each must be in [0, 1)", optBetas, b1, b2)
		case !finite(c.Eps) || c.Eps <= 0:
			return inputErrf(optEps, "%s must be a finite number > 0, got %g", optEps, c.Eps)
		case c.Momentum != 0:
			return inputErrf(optMomentum, "%s applies to %s sgd; AdamW's momentum is %s", optMomentum, optOptimizer, optBetas)
		}
	} else if !finite(c.Momentum) || c.Momentum < 0 || c.Momentum >= 1 {
		return inputErrf(optMomentum, "%s must be in [0, 1), got %g", optMomentum, c.Momentum)
	}
	if err := c.validateCycles(); err != nil {
		return err
	}
	switch {
	case backends.Int8Precision(c.Precision):
		return inputErrf(optPrecision, "%s %s: training stays fp32 (int8 quantizes a trained model's linear layers for inference: "+
			"run, bench, parity, eval, profile, serve); train with fp32 or bf16", optPrecision, c.Precision)
	case c.Precision != "" && c.Precision != "fp32" && c.Precision != "bf16":
		return inputErrf(optPrecision, "%s %q: want fp32 or bf16", optPrecision, c.Precision)
	case c.Threads < 0:
		return inputErrf(optThreads, "%s must not be negative, got %d", optThreads, c.Threads)
	case c.SaveEvery < 0:
		return inputErrf(optSaveEvery, "%s must not be negative, got %d", optSaveEvery, c.SaveEvery)
	case c.EvalEvery < 0:
		return inputErrf(optEvalEvery, "%s must not be negative, got %d", optEvalEvery, c.EvalEvery)
	}
	return nil
}

func (c Config) hyper() optim.Hyper {
	return optim.Hyper{Optimizer: c.Optimizer, WeightDecay: c.WeightDecay, Eps: c.Eps, Momentum: c.Momentum,
		Beta1: c.Betas[0], Beta2: c.Betas[1]}
}

// setting is one recorded field of a Config, by option name, formatted for comparison.
type setting struct{ option, value string }

// recorded lists the fields a checkpoint records that a resumed run must keep (all but
// Steps), in the order of their flags' names in zoo train, formatted so that equal values
// compare equal (Precision "" is fp32).
func (c Config) recorded() []setting {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	prec := c.Precision
	if prec == "" {
		prec = "fp32"
	}
	return []setting{
		{optBatch, strconv.Itoa(c.Batch)}, {optBetas, f(c.Betas[0]) + "," + f(c.Betas[1])}, {optClip, f(c.Clip)},
		{optEps, f(c.Eps)}, {optLabelSmoothing, f(c.LabelSmoothing)}, {optLR, f(c.LR)}, {optMomentum, f(c.Momentum)},
		{optObjective, c.Objective}, {optOptimizer, c.Optimizer}, {optPrecision, prec}, {optSchedule, c.Schedule},
		{optSeed, strconv.FormatUint(c.Seed, 10)}, {optShuffle, strconv.FormatBool(c.Shuffle)}, {optWarmup, strconv.Itoa(c.Warmup)},
		{optWeightDecay, f(c.WeightDecay)}, {optWindow, strconv.Itoa(c.Window)},
	}
}
