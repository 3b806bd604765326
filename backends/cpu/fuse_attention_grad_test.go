package cpu_test

import (
	"context"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// vanillaTrainGraph returns the training graph (loss and every parameter's gradient) of a
// small vanilla encoder with the given settings.
func vanillaTrainGraph(t *testing.T, set map[string]any) *graph.Graph {
	t.Helper()
	v := vanilla.New()
	cfg, err := variant.Resolve(v.Describe(), set)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{LabelSmoothing: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, nil)
	if err != nil {
		t.Fatal(err)
	}
	return train
}

// trainInputs returns random tokens and targets for batch windows of n tokens whose second
// half is padding in every other window (a window's first token is never padding).
func trainInputs(r *rand.Rand, batch, n int) map[string]*tensor.Tensor {
	in := encoderInputs(batch, n)
	targets, _ := tensor.New(tensor.Int64, batch, n)
	for i := range targets.I64 {
		in["tokens"].I64[i] = 1 + r.Int63n(256)
		targets.I64[i] = r.Int63n(257)
	}
	for b := 1; b < batch; b += 2 {
		for j := n/2 + 1; j < n; j++ {
			in["key_padding_mask"].Bool[b*n+j] = true
		}
	}
	in[autodiff.InputTargets] = targets
	return in
}

// A training step's attention, forward and backward, fuses into the two tiled steps in each
// layer, plain and causal, and the fused program's loss, outputs and gradients agree with the
// unfused program's and with the reference evaluator's, for sequence lengths of one, odd ones,
// and one past the kernels' query and key blocks (64 and 512).
func TestFusedAttentionTraining(t *testing.T) {
	for _, c := range []struct {
		name string
		set  map[string]any
		ns   []int
	}{
		{"plain", map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64}, []int{1, 9, 67}},
		{"causal", map[string]any{"d_model": 24, "heads": 3, "layers": 1, "d_ff": 32, "causal": true}, []int{2, 33}},
		{"long", map[string]any{"d_model": 16, "heads": 2, "layers": 1, "d_ff": 16}, []int{515}},
	} {
		t.Run(c.name, func(t *testing.T) {
			train := vanillaTrainGraph(t, c.set)
			fused, plain := compileBoth(t, train, backends.Options{Threads: 2})
			layers := c.set["layers"].(int)
			if f := fused.Fusions(); f["attention-train"] != layers {
				t.Fatalf("fusions %v, want %d attention-train", f, layers)
			}
			r := rand.New(rand.NewSource(7))
			for _, n := range c.ns {
				in := trainInputs(r, 2, n)
				got := runAgree(t, fused, plain, in, 2e-5)
				if n > 100 {
					continue // the reference evaluator is slow at this length
				}
				want, err := train.Eval(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				for name, w := range want {
					if w.DType != tensor.Float32 {
						continue
					}
					if d, ok := maxDiff(got[name], w); !ok || d > 2e-5 {
						t.Errorf("n=%d: %s: fused and graph.Eval differ by %g (NaN placement ok: %v)", n, name, d, ok)
					}
				}
			}
		})
	}
}

// With checkpointed activations the backward reads a recomputed copy of each layer's
// forward; that copy's attention fuses as training attention and the gradients still agree.
func TestFusedAttentionTrainingCheckpointed(t *testing.T) {
	set := map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64}
	train := vanillaTrainGraph(t, set)
	ck, err := autodiff.Checkpoint(train, forwardNodes(t, set), autodiff.LayerSegment)
	if err != nil {
		t.Fatal(err)
	}
	fused, plain := compileBoth(t, ck, backends.Options{Threads: 2})
	if f := fused.Fusions(); f["attention-train"] != 2 {
		t.Fatalf("fusions %v, want 2 attention-train", f)
	}
	runAgree(t, fused, plain, trainInputs(rand.New(rand.NewSource(3)), 2, 21), 2e-5)
}

// forwardNodes returns the number of nodes of the loss graph of the vanilla build set (the
// forward part of its training graph).
func forwardNodes(t *testing.T, set map[string]any) int {
	t.Helper()
	v := vanilla.New()
	cfg, err := variant.Resolve(v.Describe(), set)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{LabelSmoothing: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return len(lg.Nodes)
}

// singleHeadTrain is the training graph of one attention over x (2, n, 6) without heads
// (rank 3): Q, K, V projections, scores divided by 2, Softmax over axis, and the loss
// Σ r∘attention for a random input r.
func singleHeadTrain(t *testing.T, axis int64) *graph.Graph {
	t.Helper()
	r := rand.New(rand.NewSource(11))
	b := graph.NewBuilder("single")
	x := b.Input("x", tensor.Float32, graph.Fixed(2), graph.Sym("n"), graph.Fixed(6))
	w := b.Input("r", tensor.Float32, graph.Fixed(2), graph.Sym("n"), graph.Fixed(6))
	proj := func(name string) string { return b.MatMul(x, b.Param(name, randT(r, 6, 6))) }
	q, k, v := proj("wq"), proj("wk"), proj("wv")
	s := b.Div(b.MatMul(q, b.Transpose(k, 0, 2, 1)), b.ConstFloat(2))
	o := b.MatMul(b.Softmax(s, axis), v)
	loss := b.Op("ReduceSum", []string{b.Mul(o, w)}, graph.Attrs{"keepdims": graph.Int(0)})
	b.Output("loss", loss, tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := autodiff.Gradients(context.Background(), g, "loss", nil)
	if err != nil {
		t.Fatal(err)
	}
	return train
}

// Without heads (rank 3) the pattern fuses too; with the softmax over the queries instead of
// the keys it still matches, and both fused steps run the steps they replaced (the forward
// passes P where the log-sum-exps go), so the gradients are the unfused ones.
func TestFusedAttentionTrainingFallsBack(t *testing.T) {
	for _, axis := range []int64{-1, 1} {
		train := singleHeadTrain(t, axis)
		fused, plain := compileBoth(t, train, backends.Options{Threads: 2})
		if f := fused.Fusions(); f["attention-train"] != 1 {
			t.Fatalf("axis %d: fusions %v, want 1 attention-train", axis, f)
		}
		r := rand.New(rand.NewSource(2))
		for _, n := range []int{1, 5} {
			in := map[string]*tensor.Tensor{"x": randT(r, 2, n, 6), "r": randT(r, 2, n, 6)}
			runAgree(t, fused, plain, in, 1e-5)
		}
	}
}
