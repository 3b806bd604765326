// Package trainout writes what `zoo train` leaves beside its checkpoint: the --log, one JSON
// object per step or evaluation, kept across resumes, and the --plot of its losses.
package trainout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/zoo-dev/zoo/train"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Line is one line of --log: a training step, or an evaluation when EvalLoss is set. The
// fields are the log's contract (nil ones are left out).
type Line struct {
	Step       int      `json:"step"`
	Loss       *float64 `json:"loss,omitempty"`
	LR         *float64 `json:"lr,omitempty"`
	GradNorm   *float64 `json:"grad_norm,omitempty"`
	TokensPS   *float64 `json:"tokens_per_s,omitempty"`
	EvalLoss   *float64 `json:"eval_loss,omitempty"`
	EvalBitsPB *float64 `json:"eval_bits_per_byte,omitempty"`
}

// IsEval reports whether l is an evaluation of the held-out text.
func (l Line) IsEval() bool { return l.EvalLoss != nil }

// LineOf is the line of one step or evaluation of a run.
func LineOf(s train.Step) Line {
	if s.Eval {
		return Line{Step: s.Step, EvalLoss: &s.EvalLoss, EvalBitsPB: &s.EvalBitsPerByte}
	}
	return Line{Step: s.Step, Loss: &s.Loss, LR: &s.LR, GradNorm: &s.GradNorm, TokensPS: &s.TokensPerSecond}
}

// Log appends --log lines, flushed per line so that a killed run leaves every finished step
// in the file. A nil *Log writes nothing.
type Log struct {
	f *os.File
}

// Open opens path for the log of a run that starts after step from: a fresh run (from 0)
// truncates it; a resumed run keeps the lines of steps up to from (the steps after the
// checkpoint are trained again and logged again; a line torn by a kill is dropped) and
// appends. It also returns the lines it kept, for the plot. Errors name --log.
func Open(path string, from int) (*Log, []Line, error) {
	if from == 0 {
		f, err := os.Create(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--log %s: %w", path, err)
		}
		return &Log{f: f}, nil, nil
	}
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, nil, fmt.Errorf("--log %s: %w", path, err)
	}
	var kept []Line
	var buf bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(old))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l Line
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Step > from {
			continue
		}
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
	return &Log{f: f}, kept, nil
}

// Write appends l as one JSON line.
func (w *Log) Write(l Line) error {
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

// Close closes the log's file.
func (w *Log) Close() error {
	if w == nil {
		return nil
	}
	return w.f.Close()
}

// Recorder is the hook (Record, for train.Trainer.OnStep) that keeps a run's lines, for the
// plot and the report, and writes them to Log (nil: none).
type Recorder struct {
	Lines []Line
	Log   *Log
}

// Record keeps s's line and writes it to the log.
func (r *Recorder) Record(s train.Step) error {
	l := LineOf(s)
	r.Lines = append(r.Lines, l)
	return r.Log.Write(l)
}
