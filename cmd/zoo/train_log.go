package main

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

// trainRecorder is the hook that keeps zoo train's lines (for the plot and the report) and
// writes them to --log.
type trainRecorder struct {
	lines []trainLog
	log   *logWriter
}

func (r *trainRecorder) record(s train.Step) error {
	l := stepLine(s.Step, s.Loss, s.LR, s.GradNorm, s.TokensPerSecond)
	if s.Eval {
		l = evalLine(s.Step, s.EvalLoss, s.EvalBitsPerByte)
	}
	r.lines = append(r.lines, l)
	return r.log.write(l)
}
