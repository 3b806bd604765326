package optim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// torchFixture is testdata/torch_optim.json, written by testdata/gen_torch_optim.py.
type torchFixture struct {
	Shapes [][]int     `json:"shapes"`
	Init   []float32   `json:"init"`
	Grads  [][]float32 `json:"grads"`
	Cases  []torchCase `json:"cases"`
}

type torchCase struct {
	Name        string    `json:"name"`
	Optimizer   string    `json:"optimizer"`
	LR          float64   `json:"lr"`
	Betas       []float64 `json:"betas"`
	Eps         float64   `json:"eps"`
	WeightDecay float64   `json:"weight_decay"`
	Momentum    float64   `json:"momentum"`
	Warmup      int       `json:"warmup"`
	Schedule    string    `json:"schedule"`
	Clip        float64   `json:"clip"`
	Steps       []struct {
		LR       float64   `json:"lr"`
		GradNorm *float64  `json:"grad_norm"`
		Params   []float32 `json:"params"`
	} `json:"steps"`
}

func loadFixture(t *testing.T) torchFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "torch_optim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f torchFixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func fixtureLayout(t *testing.T, f torchFixture) *Layout {
	t.Helper()
	names := make([]string, len(f.Shapes))
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	l, err := NewLayout(names, f.Shapes)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (c torchCase) hyper() Hyper {
	h := Hyper{Optimizer: c.Optimizer, WeightDecay: c.WeightDecay, Eps: c.Eps, Momentum: c.Momentum}
	if len(c.Betas) == 2 {
		h.Beta1, h.Beta2 = c.Betas[0], c.Betas[1]
	}
	return h
}

// closeRel is numpy's allclose rule with rtol 1e-6 and atol 1e-7 (parameters of order 1).
func closeRel(got, want float64) bool { return math.Abs(got-want) <= 1e-7+1e-6*math.Abs(want) }

// threadsFor is a ParallelFor that splits into exactly n goroutines, to check that the
// kernels' results do not depend on the partition.
func threadsFor(threads int) ParallelFor {
	return func(n, g int, fn func(lo, hi int)) {
		chunks := min(threads, max(1, n/g))
		var wg sync.WaitGroup
		for c := 0; c < chunks; c++ {
			lo, hi := c*n/chunks, (c+1)*n/chunks
			wg.Add(1)
			go func() { defer wg.Done(); fn(lo, hi) }()
		}
		wg.Wait()
	}
}

// TestTorchParity replays torch.optim's five steps of every fixture case: the schedule's
// learning rate, the clip norm and every parameter after every step.
func TestTorchParity(t *testing.T) {
	f := loadFixture(t)
	l := fixtureLayout(t, f)
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			opt, err := New(c.hyper(), l, nil)
			if err != nil {
				t.Fatal(err)
			}
			sched := Schedule{LR: c.LR, Warmup: c.Warmup, Steps: len(c.Steps), Kind: c.Schedule}
			if err := sched.Validate(); err != nil {
				t.Fatal(err)
			}
			params := append([]float32(nil), f.Init...)
			worst := 0.0
			for k := 1; k <= len(c.Steps); k++ {
				want := c.Steps[k-1]
				grads := append([]float32(nil), f.Grads[k-1]...)
				if lr := sched.At(k); !closeRel(lr, want.LR) || math.Abs(lr-want.LR) > 1e-15 {
					t.Errorf("step %d: lr %.17g, torch %.17g", k, lr, want.LR)
				}
				norm := ClipGradNorm(grads, c.Clip, nil)
				if want.GradNorm != nil && !closeRel(norm, *want.GradNorm) {
					t.Errorf("step %d: grad norm %.9g, torch %.9g", k, norm, *want.GradNorm)
				}
				if err := opt.Step(params, grads, want.LR); err != nil {
					t.Fatal(err)
				}
				for i, p := range params {
					w := float64(want.Params[i])
					if !closeRel(float64(p), w) {
						t.Fatalf("step %d: param %d = %.9g, torch %.9g", k, i, p, w)
					}
					worst = max(worst, math.Abs(float64(p)-w)/math.Max(math.Abs(w), 1e-30))
				}
			}
			if opt.StepCount() != int64(len(c.Steps)) {
				t.Errorf("step count %d, want %d", opt.StepCount(), len(c.Steps))
			}
			t.Logf("largest relative difference to torch over %d steps: %.3g", len(c.Steps), worst)
		})
	}
}

// TestThreadsDoNotChangeResults runs a large AdamW step and norm on 1 and 5 goroutines.
func TestThreadsDoNotChangeResults(t *testing.T) {
	const n = 100_003
	l, err := NewLayout([]string{"a", "b"}, [][]int{{n - 3}, {3}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(par ParallelFor) ([]float32, float64) {
		params, grads := make([]float32, n), make([]float32, n)
		for i := range params {
			params[i] = float32(math.Sin(float64(i)))
			grads[i] = float32(math.Cos(float64(i) * 0.7))
		}
		opt, err := New(DefaultHyper(), l, par)
		if err != nil {
			t.Fatal(err)
		}
		var norm float64
		for k := 0; k < 3; k++ {
			norm = ClipGradNorm(grads, 1, par)
			if err := opt.Step(params, grads, 1e-3); err != nil {
				t.Fatal(err)
			}
		}
		return params, norm
	}
	p1, n1 := run(nil)
	p5, n5 := run(threadsFor(5))
	if n1 != n5 {
		t.Errorf("norm %v on one thread, %v on five", n1, n5)
	}
	for i := range p1 {
		if math.Float32bits(p1[i]) != math.Float32bits(p5[i]) {
			t.Fatalf("param %d: %v on one thread, %v on five", i, p1[i], p5[i])
		}
	}
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		s    Schedule
		k    int
		want float64
	}{
		{Schedule{LR: 1, Warmup: 4, Steps: 10, Kind: Linear}, 1, 0.25},
		{Schedule{LR: 1, Warmup: 4, Steps: 10, Kind: Linear}, 4, 1},
		{Schedule{LR: 1, Warmup: 4, Steps: 10, Kind: Linear}, 7, 0.5},
		{Schedule{LR: 1, Warmup: 4, Steps: 10, Kind: Linear}, 10, 0},
		{Schedule{LR: 2, Warmup: 0, Steps: 10, Kind: Constant}, 9, 2},
		{Schedule{LR: 2, Warmup: 0, Steps: 4, Kind: Cosine}, 2, 1},
		{Schedule{LR: 2, Warmup: 2, Steps: 6, Kind: Cosine}, 6, 0},
		{Schedule{LR: 2, Warmup: 2, Steps: 6, Kind: Cosine}, 3, 2 * 0.5 * (1 + math.Cos(math.Pi/4))},
		{Schedule{LR: 1e-4, Warmup: 0, Steps: 1000, Kind: Linear}, 1, 1e-4 * 999 / 1000},
	}
	for _, tt := range tests {
		if err := tt.s.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := tt.s.At(tt.k); math.Abs(got-tt.want) > 1e-15 {
			t.Errorf("%+v step %d: lr %v, want %v", tt.s, tt.k, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		s    Schedule
		h    Hyper
		want string
	}{
		{s: Schedule{LR: 0, Steps: 1, Kind: Linear}, want: "--lr"},
		{s: Schedule{LR: math.NaN(), Steps: 1, Kind: Linear}, want: "--lr"},
		{s: Schedule{LR: 1, Steps: 0, Kind: Linear}, want: "--steps"},
		{s: Schedule{LR: 1, Steps: 3, Warmup: 4, Kind: Linear}, want: "--warmup"},
		{s: Schedule{LR: 1, Steps: 3, Kind: "step"}, want: "--schedule"},
		{h: Hyper{Optimizer: "adam"}, want: "--optimizer"},
		{h: Hyper{Optimizer: AdamW, Beta1: 1, Beta2: 0.9, Eps: 1}, want: "--betas"},
		{h: Hyper{Optimizer: AdamW, Beta1: 0.9, Beta2: 0.9, Eps: 0}, want: "--eps"},
		{h: Hyper{Optimizer: AdamW, Beta1: 0.9, Beta2: 0.9, Eps: 1, Momentum: 0.9}, want: "--momentum"},
		{h: Hyper{Optimizer: SGD, Momentum: 1}, want: "--momentum"},
		{h: Hyper{Optimizer: SGD, WeightDecay: -1}, want: "--weight-decay"},
	}
	for _, tt := range bad {
		var err error
		if tt.h.Optimizer != "" {
			err = tt.h.Validate()
		} else {
			err = tt.s.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v %+v: error %v, want one naming %s", tt.s, tt.h, err, tt.want)
		}
	}
	if err := DefaultHyper().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestLargestGrad(t *testing.T) {
	l, err := NewLayout([]string{"a", "b", "c"}, [][]int{{2}, {2}, {1}})
	if err != nil {
		t.Fatal(err)
	}
	if name, n := LargestGrad(l, []float32{1, 1, 3, 4, 2}); name != "b" || n != 5 {
		t.Errorf("largest %s %v, want b 5", name, n)
	}
	inf := float32(math.Inf(1))
	if name, _ := LargestGrad(l, []float32{1, 1, 3, 4, inf}); name != "c" {
		t.Errorf("largest %s, want c (infinite)", name)
	}
}
