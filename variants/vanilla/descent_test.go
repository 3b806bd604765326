package vanilla_test

import (
	"context"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// The gradients drive learning: plain gradient descent on one padded batch, with the
// training graph compiled once and fed the updated weights each step (autodiff.LiftParams),
// lowers the cross-entropy of the tiny model at every step and by more than half in 30 steps.
func TestGradientDescentLowersTheLoss(t *testing.T) {
	cfg, err := variant.Resolve(vanilla.New().Describe(), map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64})
	if err != nil {
		t.Fatal(err)
	}
	g, err := vanilla.New().Build(context.Background(), cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	train, grads, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, nil)
	if err != nil {
		t.Fatal(err)
	}
	params := autodiff.Params(g)
	lifted, err := autodiff.LiftParams(train, params)
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := backends.Lookup("cpu")
	prog, err := cpu.Compile(lifted, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	f := loadFixture(t, "tiny")
	tokens := f.get(t, "tokens")
	targets := tokens.Clone() // the next token of the row; 0 (ignored) at the end and on padding
	n := tokens.Shape[1]
	for i := range targets.I64 {
		if i%n == n-1 {
			targets.I64[i] = 0
		} else {
			targets.I64[i] = tokens.I64[i+1]
		}
	}
	feeds := map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": f.get(t, "key_padding_mask"), autodiff.InputTargets: targets}
	for _, p := range params {
		feeds[p] = g.Initializer(p).Clone()
	}
	const lr = 0.1
	var first, last float32
	for step := 0; step < 30; step++ {
		out, err := prog.Run(context.Background(), feeds)
		if err != nil {
			t.Fatal(err)
		}
		loss := out[autodiff.OutputLoss].F32[0]
		if step == 0 {
			first = loss
		} else if loss >= last {
			t.Fatalf("step %d: loss %v did not fall below %v", step, loss, last)
		}
		last = loss
		for _, p := range params {
			w, gr := feeds[p], out[grads[p]]
			for k := range w.F32 {
				w.F32[k] -= lr * gr.F32[k]
			}
		}
	}
	if last > first/2 {
		t.Errorf("loss %v → %v in 30 steps, want below half", first, last)
	}
	t.Logf("loss %.4f → %.4f in 30 steps of gradient descent", first, last)
}
