package ort_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// The training graph autodiff builds is ordinary ONNX: exported, it runs under ONNX Runtime
// and gives the loss and every parameter's gradient that zoo's CPU backend gives (within 1e-5
// of each gradient's largest element); imported back, it runs on the CPU backend again.
func TestGradientGraphUnderORT(t *testing.T) {
	rt := openORT(t)
	cfg, err := variant.Resolve(vanilla.New().Describe(), map[string]any{"d_model": 32, "heads": 4, "layers": 2, "d_ff": 64, "max_len": 64})
	if err != nil {
		t.Fatal(err)
	}
	g, err := vanilla.New().Build(context.Background(), cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{LabelSmoothing: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	train, grads, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, nil)
	if err != nil {
		t.Fatal(err)
	}
	// onnxruntime_go cannot hold rank-0 tensors: ONNX Runtime gets the loss as a 1-element vector.
	b := train.Extend("ort")
	b.Output("loss_1d", b.Reshape(autodiff.OutputLoss, 1), tensor.Float32, graph.Fixed(1))
	forORT, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	forORT.Outputs = slices.DeleteFunc(forORT.Outputs, func(v graph.ValueInfo) bool { return v.Name == autodiff.OutputLoss })
	model, err := onnx.Export(forORT, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const B, N = 2, 19
	tokens, _ := tensor.New(tensor.Int64, B, N)
	mask, _ := tensor.New(tensor.Bool, B, N)
	targets, _ := tensor.New(tensor.Int64, B, N)
	for i := range tokens.I64 {
		tokens.I64[i] = int64(1 + (i*37)%256)
		targets.I64[i] = int64(1 + (i*11)%256)
	}
	for i := N - 6; i < N; i++ {
		tokens.I64[N+i], targets.I64[N+i], mask.Bool[N+i] = 0, 0, true
	}
	inputs := map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": mask, autodiff.InputTargets: targets}
	s, err := rt.NewSession(model, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Run(inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, err := onnx.Export(train, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	imported, err := onnx.Import(full)
	if err != nil {
		t.Fatal(err)
	}
	be, _ := backends.Lookup("cpu")
	for _, c := range []struct {
		name string
		g    *graph.Graph
	}{{"built", train}, {"imported", imported}} {
		name := c.name
		prog, err := be.Compile(c.g, backends.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := prog.Run(context.Background(), inputs)
		prog.Close()
		if err != nil {
			t.Fatal(err)
		}
		if l, w := got[autodiff.OutputLoss].F32[0], want["loss_1d"].F32[0]; math.Abs(float64(l-w)) > 1e-5*math.Abs(float64(w)) {
			t.Errorf("%s: loss %v, ONNX Runtime %v", name, l, w)
		}
		worst := 0.0
		for p, out := range grads {
			a, b := got[out], want[out]
			if a == nil || b == nil || !tensor.SameShape(a.Shape, b.Shape) {
				t.Fatalf("%s: gradient of %s: zoo %v, ONNX Runtime %v", name, p, a, b)
			}
			diff, scale := 0.0, 0.0
			for k := range b.F32 {
				scale = math.Max(scale, math.Abs(float64(b.F32[k])))
				diff = math.Max(diff, math.Abs(float64(a.F32[k]-b.F32[k])))
			}
			if !(diff <= 1e-5*scale+1e-8) {
				t.Errorf("%s: gradient of %s differs from ONNX Runtime's by %.3g (largest element %.3g)", name, p, diff, scale)
			}
			if diff > 1e-8 { // above the noise of gradients that are zero in exact arithmetic
				worst = math.Max(worst, diff/scale)
			}
		}
		t.Logf("%s graph on zoo's CPU backend vs ONNX Runtime %s: %d gradients, largest relative difference above 1e-8 %.3g", name, rt.Version, len(grads), worst)
	}
}
