package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensorio"
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

// trainLog is one line of --log: a training step, or an evaluation when Eval is set.
type trainLog struct {
	Step        int      `json:"step"`
	Loss        *float64 `json:"loss,omitempty"`
	LR          *float64 `json:"lr,omitempty"`
	GradNorm    *float64 `json:"grad_norm,omitempty"`
	TokensPS    *float64 `json:"tokens_per_s,omitempty"`
	EvalLoss    *float64 `json:"eval_loss,omitempty"`
	EvalBitsPB  *float64 `json:"eval_bits_per_byte,omitempty"`
	eval        bool
	lossV, lrV  float64
	evalV, bpbV float64
}

func stepLine(k int, loss, lr, norm, tps float64) trainLog {
	return trainLog{Step: k, Loss: &loss, LR: &lr, GradNorm: &norm, TokensPS: &tps, lossV: loss, lrV: lr}
}

func evalLine(k int, loss, bpb float64) trainLog {
	return trainLog{Step: k, EvalLoss: &loss, EvalBitsPB: &bpb, eval: true, evalV: loss, bpbV: bpb}
}

// logWriter appends --log lines, one JSON object each, flushed per line so that a killed run
// leaves every finished step in the file.
type logWriter struct {
	f *os.File
}

// openTrainLog opens path for the log of a run that starts after step from: a fresh run
// (from 0) truncates it; a resumed run keeps the lines of steps up to from (the steps after
// the checkpoint are trained again and logged again) and appends. It also returns the lines
// it kept, for the plot.
func openTrainLog(path string, from int) (*logWriter, []trainLog, error) {
	var kept []trainLog
	if from > 0 {
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, fmt.Errorf("--log %s: %w", path, err)
		}
		var buf bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(old))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l trainLog
			// A line torn by a kill does not parse and is dropped.
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Step > from {
				continue
			}
			l.fill()
			kept = append(kept, l)
			buf.Write(sc.Bytes())
			buf.WriteByte('\n')
		}
		if err := tensorio.AtomicWriteFile(path, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
			return nil, nil, fmt.Errorf("--log: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("--log %s: %w", path, err)
		}
		return &logWriter{f: f}, kept, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--log %s: %w", path, err)
	}
	return &logWriter{f: f}, nil, nil
}

// fill copies the pointer fields of a parsed line into the value fields.
func (l *trainLog) fill() {
	if l.EvalLoss != nil {
		l.eval, l.evalV = true, *l.EvalLoss
		if l.EvalBitsPB != nil {
			l.bpbV = *l.EvalBitsPB
		}
	}
	if l.Loss != nil {
		l.lossV = *l.Loss
	}
	if l.LR != nil {
		l.lrV = *l.LR
	}
}

func (w *logWriter) write(l trainLog) error {
	if w == nil {
		return nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("--log: %w", err)
	}
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("--log %s: %w", w.f.Name(), err)
	}
	return nil
}

func (w *logWriter) close() error {
	if w == nil {
		return nil
	}
	return w.f.Close()
}

// divergedError is the one line a NaN or infinite loss (or gradient) ends training with.
type divergedError struct {
	step      int
	what      string
	value     float64
	param     string
	paramNorm float64
	kept      string
}

func (e *divergedError) Error() string {
	return fmt.Sprintf("training diverged at step %d: the %s is %s; the largest gradient is %s's (norm %s); %s",
		e.step, e.what, fmtNum(e.value), e.param, fmtNum(e.paramNorm), e.kept)
}

func fmtNum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// trainLoop runs the steps of one zoo train invocation.
type trainLoop struct {
	eng       trainEngine
	opt       *optim.Optimizer
	sched     optim.Schedule
	clip      float64
	par       optim.ParallelFor
	params    []float32
	grads     []float32
	saveEvery int
	evalEvery int
	hasEval   bool
	// save writes the checkpoint of the state after step k.
	save func(k int) error
	log  *logWriter
	// progress is told of each finished step (the terminal bar); it may be nil.
	progress func(k int, loss, lr, tokensPS float64, elapsed time.Duration)

	history   []trainLog
	lastSaved int // step of the last checkpoint written, -1 for none
	tokens    int64
	trainTime time.Duration
}

func (l *trainLoop) record(line trainLog) error {
	l.history = append(l.history, line)
	return l.log.write(line)
}

func (l *trainLoop) evaluate(ctx context.Context, k int) error {
	loss, bpb, err := l.eng.eval(ctx, l.params)
	if err != nil {
		return failed(fmt.Errorf("evaluate after step %d: %w", k, err))
	}
	return l.record(evalLine(k, loss, bpb))
}

// run trains steps from+1 … to. With an evaluation set it evaluates before the first step of
// a fresh run (the untrained value), every evalEvery steps and after the last. It saves
// every saveEvery steps and after the last; a diverged step saves nothing.
func (l *trainLoop) run(ctx context.Context, from, to int) error {
	if l.hasEval && from == 0 {
		if err := l.evaluate(ctx, 0); err != nil {
			return err
		}
	}
	layout := l.opt.Layout()
	start := time.Now()
	for k := from + 1; k <= to; k++ {
		if ctx.Err() != nil {
			return l.stopped(ctx, from, k-1)
		}
		t0 := time.Now()
		loss, tokens, err := l.eng.step(ctx, k, l.params, l.grads)
		if err != nil {
			if ctx.Err() != nil {
				return l.stopped(ctx, from, k-1)
			}
			return failed(fmt.Errorf("step %d: %w", k, err))
		}
		norm := optim.GradNorm(l.grads, l.par)
		if bad(loss) || bad(norm) {
			name, pn := optim.LargestGrad(layout, l.grads)
			e := &divergedError{step: k, what: "loss", value: loss, param: name, paramNorm: pn}
			if !bad(loss) {
				e.what, e.value = "gradient norm", norm
			}
			e.kept = "nothing was saved (no checkpoint had been written yet; --save-every N writes one every N steps)"
			if l.lastSaved >= 0 {
				e.kept = fmt.Sprintf("the last good checkpoint (step %d) is kept", l.lastSaved)
			}
			return failed(e)
		}
		optim.Clip(l.grads, norm, l.clip, l.par)
		lr := l.sched.At(k)
		if err := l.opt.Step(l.params, l.grads, lr); err != nil {
			return failed(fmt.Errorf("step %d: %w", k, err))
		}
		dt := time.Since(t0)
		l.tokens += int64(tokens)
		l.trainTime += dt
		tps := float64(tokens) / dt.Seconds()
		if err := l.record(stepLine(k, loss, lr, norm, tps)); err != nil {
			return failed(err)
		}
		if l.progress != nil {
			l.progress(k, loss, lr, tps, time.Since(start))
		}
		if l.saveEvery > 0 && k%l.saveEvery == 0 && k < to {
			if err := l.save(k); err != nil {
				return failed(err)
			}
			l.lastSaved = k
		}
		if l.hasEval && l.evalEvery > 0 && k%l.evalEvery == 0 && k < to {
			if err := l.evaluate(ctx, k); err != nil {
				if ctx.Err() != nil {
					return l.stopped(ctx, from, k)
				}
				return err
			}
		}
	}
	if err := l.save(to); err != nil {
		return failed(err)
	}
	l.lastSaved = to
	if l.hasEval && to > from {
		return l.evaluate(ctx, to)
	}
	return nil
}

// stoppedError says that the context ended a run after step Step; Saved is whether that
// step's checkpoint is on disk (written now, or earlier by --save-every).
type stoppedError struct {
	Step  int
	Saved bool
	cause error
}

func (e *stoppedError) Error() string {
	return fmt.Sprintf("stopped after step %d: %v", e.Step, e.cause)
}

func (e *stoppedError) Unwrap() error { return e.cause }

// stopped is run's answer to a cancelled context after step done: the parameters and the
// optimizer hold step done exactly (a step that was cut short changed neither), so it saves
// them, as if --save-every had come due, unless nothing was trained or that step is saved.
// A resumed run then continues bit for bit.
func (l *trainLoop) stopped(ctx context.Context, from, done int) error {
	e := &stoppedError{Step: done, cause: context.Cause(ctx)}
	switch {
	case done == l.lastSaved:
		e.Saved = true
	case done > from:
		if err := l.save(done); err != nil {
			return failed(fmt.Errorf("save step %d after the interruption: %w", done, err))
		}
		l.lastSaved, e.Saved = done, true
	}
	return e
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
