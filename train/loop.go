package train

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/zoo-dev/zoo/zoo/optim"
)

// trainEngine computes what one training step needs from the model: the loss of a batch and
// the gradient of every parameter, and the held-out loss. params and grads are flat buffers
// in the optimizer's layout.
type trainEngine interface {
	// step computes step k's batch (k is 1-based) at params: its mean loss, written into
	// grads as the gradient of every parameter, and the number of tokens the batch held.
	step(ctx context.Context, k int, params, grads []float32) (loss float64, tokens int, err error)
	// eval returns the held-out loss (nats per counted token) and bits per byte at params.
	eval(ctx context.Context, params []float32) (loss, bitsPerByte float64, err error)
}

// Step is what the hooks (OnStep) are told after each training step, and after each
// evaluation of the held-out text (Eval set).
type Step struct {
	// Step is the 1-based number of the step just taken; for an evaluation, the number of
	// the step it follows (0: before training).
	Step int
	// Eval marks an evaluation: EvalLoss and EvalBitsPerByte are set, the training fields
	// are zero.
	Eval bool
	// Loss is the batch's mean loss (nats per counted token), LR the learning rate the step
	// took, GradNorm the global gradient norm before clipping.
	Loss, LR, GradNorm float64
	// Tokens is the number of tokens the batch held, TokensPerSecond how fast the step took
	// them.
	Tokens          int
	TokensPerSecond float64
	// EvalLoss is the held-out loss (nats per counted token), EvalBitsPerByte the plain
	// cross-entropy in bits per byte of the counted targets.
	EvalLoss, EvalBitsPerByte float64
	// Elapsed is the time since Run's first step began (after the evaluation before it).
	Elapsed time.Duration
}

// Result is what Run did.
type Result struct {
	// StartStep is the step Run began after (a resumed run's checkpoint step); Step the last
	// step finished; Steps is Config.Steps.
	StartStep, Step, Steps int
	// Saved is the step of the last checkpoint written (-1: none).
	Saved int
	// Tokens is the number of tokens trained on, TrainTime the time the steps took (without
	// evaluations and checkpoints).
	Tokens    int64
	TrainTime time.Duration
	// History holds every step and evaluation of this Run, as the hooks saw them.
	History []Step
}

// TokensPerSecond is the training throughput of the Run (0 when it took no step).
func (r Result) TokensPerSecond() float64 {
	if r.TrainTime <= 0 {
		return 0
	}
	return float64(r.Tokens) / r.TrainTime.Seconds()
}

// DivergedError is the error a NaN or infinite loss (or gradient norm) ends training with.
// The step's update is not applied and nothing is saved.
type DivergedError struct {
	// Step is the step that diverged; What says what ("loss" or "gradient norm") and Value
	// its value.
	Step  int
	What  string
	Value float64
	// Param is the parameter with the largest gradient, and ParamNorm its gradient's norm.
	Param     string
	ParamNorm float64
	// LastSaved is the step of the last checkpoint written (-1: none), which is kept.
	LastSaved int
}

func (e *DivergedError) Error() string {
	kept := "nothing was saved (no checkpoint had been written yet; " + optSaveEvery + " N writes one every N steps)"
	if e.LastSaved >= 0 {
		kept = fmt.Sprintf("the last good checkpoint (step %d) is kept", e.LastSaved)
	}
	return fmt.Sprintf("training diverged at step %d: the %s is %s; the largest gradient is %s's (norm %s); %s",
		e.Step, e.What, fmtNum(e.Value), e.Param, fmtNum(e.ParamNorm), kept)
}

func fmtNum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// StoppedError says that the context ended a run after step Step; Saved is whether that
// step's checkpoint is on disk (written then, or earlier by Config.SaveEvery). It unwraps to
// the context's cause.
type StoppedError struct {
	Step  int
	Saved bool
	cause error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped after step %d: %v", e.Step, e.cause)
}

func (e *StoppedError) Unwrap() error { return e.cause }

// Run trains the steps after the trainer's step (0, or a resumed checkpoint's) up to
// Config.Steps, calling the hooks after each. With held-out data it evaluates before the
// first step of a fresh run (the untrained value), every Config.EvalEvery steps and after
// the last. It writes the checkpoint (Config.Output) every Config.SaveEvery steps and after
// the last. A step whose loss or gradient norm is NaN or infinite ends it with a
// *DivergedError and saves nothing. When ctx ends it, the parameters and the optimizer hold
// the last finished step exactly (a step cut short changed neither): Run saves them, unless
// nothing was trained or that step is saved, and returns a *StoppedError, so that a resumed
// run continues bit for bit. A hook's error ends Run and is returned as it is. The Result
// says what was done, also when Run returns an error.
func (t *Trainer) Run(ctx context.Context) (res Result, err error) {
	from, to := t.step, t.cfg.Steps
	res = Result{StartStep: from, Steps: to}
	defer func() { res.Step, res.Saved = t.step, t.lastSaved }()
	emit := func(s Step) error {
		res.History = append(res.History, s)
		for _, h := range t.hooks {
			if err := h(s); err != nil {
				return err
			}
		}
		return nil
	}
	evaluate := func(k int) error {
		s, err := t.Evaluate(ctx)
		if err != nil {
			return fmt.Errorf("evaluate after step %d: %w", k, err)
		}
		return emit(s)
	}
	hasEval := t.data.HasHeld()
	if hasEval && from == 0 {
		if err := evaluate(0); err != nil {
			return res, err
		}
	}
	layout := t.opt.Layout()
	start := time.Now()
	for k := from + 1; k <= to; k++ {
		if ctx.Err() != nil {
			return res, t.stopped(ctx, from)
		}
		t0 := time.Now()
		loss, tokens, err := t.eng.step(ctx, k, t.params, t.grads)
		if err != nil {
			if ctx.Err() != nil {
				return res, t.stopped(ctx, from)
			}
			return res, fmt.Errorf("step %d: %w", k, err)
		}
		norm := optim.GradNorm(t.grads, t.par)
		if bad(loss) || bad(norm) {
			name, pn := optim.LargestGrad(layout, t.grads)
			e := &DivergedError{Step: k, What: "loss", Value: loss, Param: name, ParamNorm: pn, LastSaved: t.lastSaved}
			if !bad(loss) {
				e.What, e.Value = "gradient norm", norm
			}
			return res, e
		}
		optim.Clip(t.grads, norm, t.cfg.Clip, t.par)
		lr := t.cfg.LearningRate(k)
		if err := t.opt.Step(t.params, t.grads, lr); err != nil {
			return res, fmt.Errorf("step %d: %w", k, err)
		}
		t.step = k
		dt := time.Since(t0)
		res.Tokens += int64(tokens)
		res.TrainTime += dt
		s := Step{Step: k, Loss: loss, LR: lr, GradNorm: norm, Tokens: tokens, TokensPerSecond: float64(tokens) / dt.Seconds(), Elapsed: time.Since(start)}
		if err := emit(s); err != nil {
			return res, err
		}
		if t.cfg.SaveEvery > 0 && k%t.cfg.SaveEvery == 0 && k < to {
			if err := t.save(k); err != nil {
				return res, err
			}
		}
		if hasEval && t.cfg.EvalEvery > 0 && k%t.cfg.EvalEvery == 0 && k < to {
			if err := evaluate(k); err != nil {
				if ctx.Err() != nil {
					return res, t.stopped(ctx, from)
				}
				return res, err
			}
		}
	}
	if err := t.save(to); err != nil {
		return res, err
	}
	if hasEval && to > from {
		return res, evaluate(to)
	}
	return res, nil
}

// stopped is Run's answer to a cancelled context: the parameters and the optimizer hold the
// trainer's step exactly, so it saves them, as if Config.SaveEvery had come due, unless
// nothing was trained since from, that step is saved, or the run writes no checkpoint.
func (t *Trainer) stopped(ctx context.Context, from int) error {
	done := t.step
	e := &StoppedError{Step: done, cause: context.Cause(ctx)}
	switch {
	case t.cfg.Output == "":
	case done == t.lastSaved:
		e.Saved = true
	case done > from:
		if err := t.save(done); err != nil {
			return fmt.Errorf("save step %d after the interruption: %w", done, err)
		}
		e.Saved = true
	}
	return e
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
