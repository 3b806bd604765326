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

// In a training graph the attention fusion (fuse_attention_grad.go) takes each attention's
// softmax backward with it, and the fused program's loss and gradients agree with the
// unfused one's; the softmax backward fuses on its own where attention does not (below).
func TestFusedSoftmaxGrad(t *testing.T) {
	v := vanilla.New()
	cfg, err := variant.Resolve(v.Describe(), map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64})
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, nil)
	if err != nil {
		t.Fatal(err)
	}
	fused, plain := compileBoth(t, train, backends.Options{Threads: 2})
	if f := fused.Fusions(); f["attention-train"] != 2 || f["softmax-backward"] != 0 {
		t.Fatalf("fusions %v, want 2 attention-train (which include the softmax backward)", f)
	}
	r := rand.New(rand.NewSource(5))
	for _, n := range []int{1, 9, 40} {
		in := encoderInputs(2, n)
		targets, _ := tensor.New(tensor.Int64, 2, n)
		for i := range targets.I64 {
			in["tokens"].I64[i] = 1 + r.Int63n(256)
			targets.I64[i] = r.Int63n(257)
		}
		for j := n / 2; j < n; j++ {
			in["key_padding_mask"].Bool[n+j] = j > 0
		}
		in[autodiff.InputTargets] = targets
		runAgree(t, fused, plain, in, 1e-6)
	}
}

// The softmax gradient fuses over the softmax's own axis (the fused step runs the unfused
// steps when it is not the last), and stays unfused when its product is read twice.
func TestFusedSoftmaxGradDeclines(t *testing.T) {
	for _, c := range []struct {
		name    string
		axis    int64
		twice   bool
		matches int
	}{{"plain", -1, false, 1}, {"last axis by number", 1, false, 1}, {"axis 0", 0, false, 1}, {"product read twice", -1, true, 0}} {
		b := graph.NewBuilder("smg")
		x := b.Input("x", tensor.Float32, graph.Fixed(3), graph.Fixed(4))
		dy := b.Input("dy", tensor.Float32, graph.Fixed(3), graph.Fixed(4))
		y := b.Softmax(x, c.axis)
		prod := b.Mul(dy, y)
		s := b.Op("ReduceSum", []string{prod, b.ConstInts(c.axis)}, graph.Attrs{"keepdims": graph.Int(1)})
		b.Output("dx", b.Mul(y, b.Sub(dy, s)), tensor.Float32, graph.Fixed(3), graph.Fixed(4))
		if c.twice {
			b.Output("prod", prod, tensor.Float32, graph.Fixed(3), graph.Fixed(4))
		}
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{})
		if got := fused.Fusions()["softmax-backward"]; got != c.matches {
			t.Errorf("%s: %d softmax-backward fusions, want %d", c.name, got, c.matches)
		}
		r := rand.New(rand.NewSource(1))
		in := map[string]*tensor.Tensor{"x": randT(r, 3, 4), "dy": randT(r, 3, 4)}
		runAgree(t, fused, plain, in, 1e-6)
	}
}
