package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestRequestCheck(t *testing.T) {
	none := func(string) bool { return false }
	for _, c := range []struct {
		r     Request
		isSet func(string) bool
		err   string
	}{
		{Request{ONNX: true, Opset: 17, Named: true}, none, ""},
		{Request{Opset: 17}, none, "say what to write"},
		{Request{Triton: "t", Opset: 17}, none, "--triton and --kserve write one model's files"},
		{Request{ONNX: true, Opset: 3}, none, "--opset 3: zoo exports opsets"},
		{Request{Weights: "w.safetensors", Opset: 17}, func(f string) bool { return f == "output" }, "-o/--output applies to the ONNX file"},
		{Request{Triton: "t", Opset: 17, Named: true}, func(f string) bool { return f == "opset" }, ""}, // --opset of the Triton model
	} {
		err := c.r.Check(c.isSet)
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: error %v, want %q", c.r, err, c.err)
		}
	}
}

func TestReport(t *testing.T) {
	files := []File{{Path: "a.onnx", Kind: "onnx", Bytes: 2048, Opset: 17, Nodes: 9}, {Path: "w.safetensors", Kind: "weights", Tensors: 3, Parameters: 1500}, {Path: "c.pbtxt", Kind: "config"}}
	var b bytes.Buffer
	r := NewReport(&b, false)
	r.Say(files...)
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	want := "wrote a.onnx (2.00 KiB, opset 17, 9 nodes)\nwrote w.safetensors (3 tensors, 1.50 k parameters)\nwrote c.pbtxt\n"
	if b.String() != want {
		t.Errorf("text\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	r = NewReport(&b, true)
	if err := r.Finish(); err != nil || strings.TrimSpace(b.String()) != "{\n  \"written\": []\n}" {
		t.Errorf("empty JSON report %q, %v", b.String(), err)
	}
}

func TestWriteTritonRefusesStaticBatch(t *testing.T) {
	g := &graph.Graph{Inputs: []graph.ValueInfo{{Name: "x", DType: tensor.Float32, Shape: graph.Shape{graph.Fixed(1), graph.Fixed(4)}}}}
	_, err := WriteTriton(t.TempDir(), "m", g, 17, "test")
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "without a dynamic batch axis first") {
		t.Errorf("a static batch: %v", err)
	}
	specs, err := TritonSpecs("m", []graph.ValueInfo{{Name: "ids", DType: tensor.Int64, Shape: graph.Shape{graph.Sym("b"), graph.Sym("n"), graph.Fixed(3)}}})
	if err != nil || len(specs) != 1 || specs[0].DataType != "TYPE_INT64" || !slices.Equal(specs[0].Dims, []int64{-1, 3}) {
		t.Errorf("specs %+v, %v", specs, err)
	}
}

func TestWriteKServeAndCheckDir(t *testing.T) {
	dir := t.TempDir()
	m, err := zoo.Load(context.Background(), "vanilla.tiny", zoo.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := WriteKServe(filepath.Join(dir, "k"), "vanilla.tiny", m.Graph(), "", "test")
	if err != nil || len(files) < 2 || filepath.Base(files[0].Path) != "model.onnx" {
		t.Fatalf("files %v, %v", files, err)
	}
	for _, f := range files[1:] {
		if st, err := os.Stat(f.Path); err != nil || st.Size() != f.Bytes || f.Kind != "config" {
			t.Errorf("%+v: %v", f, err)
		}
	}
	if err := CheckDir(dir); err != nil {
		t.Errorf("a directory: %v", err)
	}
	if err := CheckDir(files[1].Path); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a file: %v", err)
	}
	if err := CheckDir(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "no such directory") {
		t.Errorf("missing: %v", err)
	}
	var doc Report
	if err := json.Unmarshal([]byte(`{"written":[{"model":"m","path":"p","kind":"onnx","bytes":1}]}`), &doc); err != nil || len(doc.Written) != 1 {
		t.Errorf("the JSON report does not read back: %v", err)
	}
}
