package optim

import (
	"fmt"
	"math"
)

// The learning-rate schedules after warm-up.
const (
	Constant = "constant"
	Linear   = "linear"
	Cosine   = "cosine"
)

// Schedule gives the learning rate of each step (issue 18): step k (1-based) gets
// LR·k/Warmup while k ≤ Warmup; after it, with S = Steps, LR (constant),
// LR·(S−k)/(S−Warmup) (linear) or LR·0.5·(1+cos(π·(k−Warmup)/(S−Warmup))) (cosine).
type Schedule struct {
	LR     float64
	Warmup int
	Steps  int
	Kind   string
}

// Validate returns an error naming the flag at fault.
func (s Schedule) Validate() error {
	switch {
	case math.IsNaN(s.LR) || math.IsInf(s.LR, 0) || s.LR <= 0:
		return fmt.Errorf("--lr must be a finite number > 0, got %g", s.LR)
	case s.Steps < 1:
		return fmt.Errorf("--steps must be at least 1, got %d", s.Steps)
	case s.Warmup < 0:
		return fmt.Errorf("--warmup must not be negative, got %d", s.Warmup)
	case s.Warmup > s.Steps:
		return fmt.Errorf("--warmup %d is longer than --steps %d", s.Warmup, s.Steps)
	case s.Kind != Constant && s.Kind != Linear && s.Kind != Cosine:
		return fmt.Errorf("--schedule %q: want constant, linear or cosine", s.Kind)
	}
	return nil
}

// At returns the learning rate of step k (1-based, at most Steps).
func (s Schedule) At(k int) float64 {
	if k <= s.Warmup {
		return s.LR * float64(k) / float64(s.Warmup)
	}
	span := float64(s.Steps - s.Warmup)
	switch s.Kind {
	case Linear:
		return s.LR * float64(s.Steps-k) / span
	case Cosine:
		return s.LR * 0.5 * (1 + math.Cos(math.Pi*float64(k-s.Warmup)/span))
	}
	return s.LR
}
