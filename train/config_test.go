package train

import (
	"errors"
	"math"
	"strings"
	"testing"

	zoo "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/optim"
)

// TestValidateNamesTheField: each setting out of range is an *zoo.InputError whose Option is
// the field, and whose message begins with it (so that a front end can render it as a flag).
func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		option string
		set    func(*Config)
	}{
		{optObjective, func(c *Config) { c.Objective = "nsp" }},
		{optBatch, func(c *Config) { c.Batch = 0 }},
		{optWindow, func(c *Config) { c.Window = -1 }},
		{optLabelSmoothing, func(c *Config) { c.LabelSmoothing = 1 }},
		{optClip, func(c *Config) { c.Clip = math.Inf(1) }},
		{optLR, func(c *Config) { c.LR = 0 }},
		{optSteps, func(c *Config) { c.Steps = 0 }},
		{optWarmup, func(c *Config) { c.Warmup = 2000 }},
		{optSchedule, func(c *Config) { c.Schedule = "step" }},
		{optOptimizer, func(c *Config) { c.Optimizer = "adam" }},
		{optWeightDecay, func(c *Config) { c.WeightDecay = -1 }},
		{optBetas, func(c *Config) { c.Betas[0] = 1 }},
		{optEps, func(c *Config) { c.Eps = 0 }},
		{optMomentum, func(c *Config) { c.Momentum = 0.9 }},
		{optMomentum, func(c *Config) { c.Optimizer, c.Momentum = "sgd", 1 }},
		{optPrecision, func(c *Config) { c.Precision = "fp16" }},
		{optThreads, func(c *Config) { c.Threads = -1 }},
		{optSaveEvery, func(c *Config) { c.SaveEvery = -1 }},
		{optEvalEvery, func(c *Config) { c.EvalEvery = -1 }},
	} {
		c := DefaultConfig()
		tc.set(&c)
		err := c.Validate()
		var ie *zoo.InputError
		if !errors.As(err, &ie) || ie.Option != tc.option || !strings.HasPrefix(err.Error(), tc.option) {
			t.Errorf("%s: %v (%#v); want an input error about it", tc.option, err, ie)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	sgd := DefaultConfig()
	sgd.Optimizer, sgd.Momentum = "sgd", 0.9
	if err := sgd.Validate(); err != nil {
		t.Errorf("sgd with momentum: %v", err)
	}
}

// TestOptionNamesAreDistinct: no option name is a prefix of another, so that a front end's
// replacements do not cut one name inside another.
func TestOptionNamesAreDistinct(t *testing.T) {
	names := OptionNames()
	for _, a := range names {
		for _, b := range names {
			if a != b && strings.HasPrefix(b, a) {
				t.Errorf("%s is a prefix of %s", a, b)
			}
		}
	}
}

// TestContinue: a resumed run keeps its recorded settings; only the fields given that
// differ are refused, Steps and the run-time fields come from the caller, and a checkpoint
// already at Steps is refused.
func TestContinue(t *testing.T) {
	rec := DefaultConfig()
	rec.LR, rec.Steps, rec.Seed, rec.Threads, rec.SaveEvery, rec.Labels = 1e-3, 10, 7, 1, 5, map[string]string{"log": "a.jsonl"}
	ck := &Checkpoint{Path: "m.safetensors", Step: 4, Config: rec}
	given := func(opts ...string) func(string) bool {
		return func(o string) bool {
			for _, x := range opts {
				if x == o {
					return true
				}
			}
			return false
		}
	}
	flags := DefaultConfig() // what a caller gives: the defaults, and a few set
	flags.LR, flags.Steps, flags.Threads, flags.Output = 3e-3, 20, 2, "n.safetensors"
	got, err := ck.Continue(flags, given(optSteps, optThreads))
	if err != nil || got.LR != 1e-3 || got.Steps != 20 || got.Seed != 7 || got.Threads != 2 || got.Output != "n.safetensors" || got.Resume != "m.safetensors" {
		t.Fatalf("Continue: %+v, %v", got, err)
	}
	// The settings of how the run is carried out come along unless given; Output defaults
	// to the checkpoint, the labels merge.
	flags.Output, flags.Labels = "", map[string]string{"plot": "p.png"}
	got, err = ck.Continue(flags, given(optSteps))
	if err != nil || got.Threads != 1 || got.SaveEvery != 5 || got.Output != "m.safetensors" || got.Labels["log"] != "a.jsonl" || got.Labels["plot"] != "p.png" {
		t.Fatalf("Continue without the run-time settings: %+v, %v", got, err)
	}
	flags.Output, flags.Labels = "n.safetensors", nil
	_, err = ck.Continue(flags, given(optLR))
	if err == nil || err.Error() != "Config.LR 0.003 differs from the resumed run's 0.001; a resumed run keeps its settings (start a new run with LoadOptions.Weights m.safetensors to change them)" {
		t.Errorf("a changed learning rate: %v", err)
	}
	flags.Precision = "fp32" // the default, which the record leaves empty
	if _, err := ck.Continue(flags, given(optPrecision, optSteps)); err != nil {
		t.Errorf("fp32 given, none recorded: %v", err)
	}
	flags.Steps = 4
	if _, err := ck.Continue(flags, given(optSteps)); err == nil || !strings.Contains(err.Error(), "already at step 4 of 4; give a larger Config.Steps") {
		t.Errorf("steps not beyond the checkpoint: %v", err)
	}
	if _, err := ck.Continue(ck.Config, nil); err != nil {
		t.Errorf("the recorded settings: %v", err)
	}
	// The record holds the window the run chose; a caller's 0 asks for that default.
	ck.Config.Window = 24
	flags = ck.Config
	flags.Window = 0
	if got, err := ck.Continue(flags, nil); err != nil || got.Window != 24 {
		t.Errorf("window 0 against a recorded 24: window %d, %v", got.Window, err)
	}
	flags.Window = 32
	if _, err := ck.Continue(flags, nil); err == nil || !strings.Contains(err.Error(), "Config.Window 32 differs from the resumed run's 24") {
		t.Errorf("window 32 against a recorded 24: %v", err)
	}
}

// TestExtendSchedule: a run extended past its steps keeps the learning rate of every step
// taken and climbs back to the peak over a new cycle's warm-up (ExtendRule): the finished
// 60-step linear run ended at lr 0; extended to 100 it rises by a tenth of the peak per step
// to the peak at step 70 and decays linearly to 0 at step 100. A constant schedule stays
// flat; a run ended early keeps its schedule; a second extension adds a third cycle.
func TestExtendSchedule(t *testing.T) {
	const lr = 1e-4
	for _, kind := range []string{optim.Linear, optim.Cosine, optim.Constant} {
		rec := DefaultConfig()
		rec.Steps, rec.LR, rec.Schedule, rec.Warmup = 60, lr, kind, 5
		ck := &Checkpoint{Path: "m.safetensors", Step: 60, Config: rec}
		more := rec
		more.Steps = 100
		got, err := ck.Continue(more, func(o string) bool { return o == optSteps })
		if err != nil {
			t.Fatal(err)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("%s: the extended config: %v", kind, err)
		}
		for k := 1; k <= 60; k++ {
			if a, b := got.LearningRate(k), rec.LearningRate(k); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("%s: step %d: lr %g extended, %g as given", kind, k, a, b)
			}
		}
		prev := got.LearningRate(60)
		for k := 61; k <= 100; k++ {
			x := got.LearningRate(k)
			if d := math.Abs(x - prev); d > lr/10+1e-15 {
				t.Errorf("%s: lr %g at step %d, %g at step %d: a jump", kind, prev, k-1, x, k)
			}
			prev = x
		}
		if got.LearningRate(70) != lr {
			t.Errorf("%s: lr %g at step 70, want the peak back", kind, got.LearningRate(70))
		}
		if kind != optim.Constant && got.LearningRate(100) > 1e-12 {
			t.Errorf("%s: lr %g at the new last step", kind, got.LearningRate(100))
		}
		if kind == optim.Linear && math.Abs(got.LearningRate(61)-lr/10) > 1e-18 {
			t.Errorf("linear: lr %g at step 61, want a tenth of the peak", got.LearningRate(61))
		}

		// Ended early: the schedule of 60 steps, to step 50.
		early := &Checkpoint{Path: "m.safetensors", Step: 30, Config: rec}
		fewer := rec
		fewer.Steps = 50
		short, err := early.Continue(fewer, func(o string) bool { return o == optSteps })
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= 50; k++ {
			if short.LearningRate(k) != rec.LearningRate(k) {
				t.Fatalf("%s ended early: step %d: lr %g, the run's %g", kind, k, short.LearningRate(k), rec.LearningRate(k))
			}
		}

		// Extended again: a third cycle, the first two kept.
		ck2 := &Checkpoint{Path: "m.safetensors", Step: 100, Config: got}
		again := got
		again.Steps, again.Cycles = 150, nil
		got2, err := ck2.Continue(again, func(o string) bool { return o == optSteps })
		if err != nil || len(got2.Cycles) != 3 || got2.Cycles[2].Start != 100 {
			t.Fatalf("%s extended twice: cycles %v, %v", kind, got2.Cycles, err)
		}
		for k := 1; k <= 100; k++ {
			if got2.LearningRate(k) != got.LearningRate(k) {
				t.Fatalf("%s extended twice: step %d changed", kind, k)
			}
		}
	}
}
