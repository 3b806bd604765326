package optim

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func TestOptimPath(t *testing.T) {
	for in, want := range map[string]string{
		"m.safetensors":       "m.optim.safetensors",
		"dir/run.safetensors": "dir/run.optim.safetensors",
		"model.bin":           "model.bin.optim.safetensors",
	} {
		if got := OptimPath(in); got != want {
			t.Errorf("OptimPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestResumeIsBitExact runs five steps straight through and as two steps, a checkpoint
// written to disk and read into a fresh optimizer, and three more: the parameters must be
// bitwise equal, for every optimizer kind the fixture has.
func TestResumeIsBitExact(t *testing.T) {
	f := loadFixture(t)
	l := fixtureLayout(t, f)
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			sched := Schedule{LR: c.LR, Warmup: c.Warmup, Steps: 5, Kind: c.Schedule}
			steps := func(opt *Optimizer, params []float32, from, to int) {
				for k := from; k <= to; k++ {
					g := append([]float32(nil), f.Grads[k-1]...)
					ClipGradNorm(g, c.Clip, nil)
					if err := opt.Step(params, g, sched.At(k)); err != nil {
						t.Fatal(err)
					}
				}
			}
			straight, _ := New(c.hyper(), l, nil)
			want := append([]float32(nil), f.Init...)
			steps(straight, want, 1, 5)

			first, _ := New(c.hyper(), l, nil)
			params := append([]float32(nil), f.Init...)
			steps(first, params, 1, 2)
			path := filepath.Join(t.TempDir(), "m.safetensors")
			state := StateDict{}
			for i, tt := range l.Tensors(params) {
				state = append(state, tensorio.Named{Name: l.Names[i], Tensor: tt})
			}
			if err := SaveCheckpoint(path, state, map[string]string{"model": "fixture"}, first, map[string]string{"zoo_train": "{}"}); err != nil {
				t.Fatal(err)
			}
			second, _ := New(c.hyper(), l, nil)
			list, mm, om, err := LoadCheckpoint(path, second)
			if err != nil {
				t.Fatal(err)
			}
			if second.StepCount() != 2 || mm["model"] != "fixture" || mm[MetaStep] != "2" || om["zoo_train"] != "{}" {
				t.Fatalf("restored step %d, model meta %v, optim meta %v", second.StepCount(), mm, om)
			}
			resumed, err := l.Gather(func(name string) *tensor.Tensor { return tensorio.Lookup(list, name) })
			if err != nil {
				t.Fatal(err)
			}
			steps(second, resumed, 3, 5)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(resumed[i]) {
					t.Fatalf("param %d: %v straight through, %v resumed", i, want[i], resumed[i])
				}
			}
		})
	}
}

func TestCheckpointErrors(t *testing.T) {
	l, err := NewLayout([]string{"w", "b"}, [][]int{{2, 2}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	params, grads := make([]float32, l.Size()), []float32{1, 2, 3, 4, 5, 6}
	adam, _ := New(DefaultHyper(), l, nil)
	if err := adam.Step(params, grads, 0.1); err != nil {
		t.Fatal(err)
	}
	state := StateDict{}
	for i, tt := range l.Tensors(params) {
		state = append(state, tensorio.Named{Name: l.Names[i], Tensor: tt})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := SaveCheckpoint(path, state, nil, adam, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := adam.WriteState(&buf, nil); err != nil {
		t.Fatal(err)
	}

	sgd, _ := New(Hyper{Optimizer: SGD, Momentum: 0.9}, l, nil)
	if _, err := sgd.ReadState(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "adamw") {
		t.Errorf("adamw state into sgd: %v", err)
	}
	other, _ := NewLayout([]string{"w", "c"}, [][]int{{2, 2}, {2}})
	o2, _ := New(DefaultHyper(), other, nil)
	if _, err := o2.ReadState(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "exp_avg.c is missing") {
		t.Errorf("other layout: %v", err)
	}
	small, _ := NewLayout([]string{"w"}, [][]int{{2, 2}})
	o3, _ := New(DefaultHyper(), small, nil)
	if _, err := o3.ReadState(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "unexpected tensor exp_avg.b") && !strings.Contains(err.Error(), "unexpected tensor exp_avg_sq.b") {
		t.Errorf("extra tensor: %v", err)
	}
	if err := adam.WriteState(&buf, map[string]string{MetaStep: "9"}); err == nil {
		t.Error("a reserved metadata key was accepted")
	}

	os.Remove(OptimPath(path))
	fresh, _ := New(DefaultHyper(), l, nil)
	if _, _, _, err := LoadCheckpoint(path, fresh); err == nil || !strings.Contains(err.Error(), "needs both files") {
		t.Errorf("missing optimizer file: %v", err)
	}
}

// TestCheckpointSurvivesAKill replays a kill at each point of SaveCheckpoint: after the
// pending optimizer state is written (the old pair stays), and after the model file is
// replaced (the pending state completes the new pair). Without the pending file a torn pair
// is refused, naming both steps.
func TestCheckpointSurvivesAKill(t *testing.T) {
	l, err := NewLayout([]string{"w"}, [][]int{{3}})
	if err != nil {
		t.Fatal(err)
	}
	params, grads := []float32{1, 2, 3}, []float32{0.5, -1, 2}
	opt, _ := New(DefaultHyper(), l, nil)
	state := StateDict{{Name: "w", Tensor: l.Tensors(params)[0]}}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := opt.Step(params, grads, 0.1); err != nil {
		t.Fatal(err)
	}
	if err := SaveCheckpoint(path, state, nil, opt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(OptimPath(path) + pendingSuffix); err == nil {
		t.Fatal("a finished save left its pending file")
	}
	if err := opt.Step(params, grads, 0.1); err != nil {
		t.Fatal(err)
	}
	writePending := func() {
		t.Helper()
		if err := tensorio.AtomicWriteFile(OptimPath(path)+pendingSuffix, func(w io.Writer) error { return opt.WriteState(w, nil) }); err != nil {
			t.Fatal(err)
		}
	}
	writeModel := func(step string) {
		t.Helper()
		if err := tensorio.AtomicWriteFile(path, func(w io.Writer) error {
			return tensorio.WriteSafetensors(w, state, map[string]string{MetaStep: step})
		}); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (int64, error) {
		fresh, _ := New(DefaultHyper(), l, nil)
		_, _, _, err := LoadCheckpoint(path, fresh)
		return fresh.StepCount(), err
	}

	writePending() // killed before the model file was replaced
	if step, err := load(); err != nil || step != 1 {
		t.Fatalf("killed after the pending write: step %d, %v; want the old pair (step 1)", step, err)
	}
	if _, err := os.Stat(OptimPath(path) + pendingSuffix); err == nil {
		t.Error("the stale pending file was kept")
	}

	writePending()
	writeModel("2") // killed after the model file was replaced
	if step, err := load(); err != nil || step != 2 {
		t.Fatalf("killed after the model write: step %d, %v; want the new pair (step 2)", step, err)
	}

	writeModel("3") // no pending state: a torn pair
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "at step 3 but") {
		t.Errorf("torn pair: %v", err)
	}
}
