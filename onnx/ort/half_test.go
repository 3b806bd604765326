package ort_test

import (
	"context"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestHalfInputsAndOutputs runs a model with a float16 input and float16 and bfloat16
// outputs under ONNX Runtime (which the Go binding cannot hand 16-bit outputs back from: the
// session casts them to float32 inside the model) and under zoo, and checks both give the
// same values: zoo parity on a float16 file used to crash here.
func TestHalfInputsAndOutputs(t *testing.T) {
	rt := openORT(t)
	b := graph.NewBuilder("half")
	x := b.Input("x", tensor.Float16, graph.Fixed(4))
	y := b.Mul(b.Op("Cast", []string{x}, graph.Attrs{"to": graph.Int(int64(tensor.Float32))}), b.ConstFloat(1.0009765625))
	b.Output("h", b.Op("Cast", []string{y}, graph.Attrs{"to": graph.Int(int64(tensor.Float16))}), tensor.Float16)
	b.Output("bf", b.Op("Cast", []string{y}, graph.Attrs{"to": graph.Int(int64(tensor.BFloat16))}), tensor.BFloat16)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := onnx.Export(g, onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := rt.NewSession(data, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	in := &tensor.Tensor{DType: tensor.Float16, Shape: []int{4}, F32: []float32{1, -2.5, 1000, 0.333251953125}}
	want, err := sess.Run(map[string]*tensor.Tensor{"x": in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := onnx.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	be, _ := backends.Lookup("cpu")
	p, err := be.Compile(back, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": in})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h", "bf"} {
		w, g := want[name], got[name]
		if w == nil || g == nil || w.DType != tensor.Float32 || len(w.F32) != 4 {
			t.Fatalf("output %s: ONNX Runtime %v, zoo %v", name, w, g)
		}
		for i := range w.F32 {
			if w.F32[i] != g.F32[i] {
				t.Errorf("output %s[%d]: ONNX Runtime %v, zoo %v", name, i, w.F32[i], g.F32[i])
			}
		}
	}
}
