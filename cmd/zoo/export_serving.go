package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/serve"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Triton's batching of an exported model: zoo serve's defaults.
const (
	tritonMaxBatch = 32
	tritonDelay    = 5 * time.Millisecond
)

// tritonType is a dtype's Triton data type.
func tritonType(d tensor.DType) (string, error) {
	switch d {
	case tensor.Float32:
		return "TYPE_FP32", nil
	case tensor.Int64:
		return "TYPE_INT64", nil
	case tensor.Int32:
		return "TYPE_INT32", nil
	case tensor.Bool:
		return "TYPE_BOOL", nil
	}
	return "", fmt.Errorf("no Triton data type for %s", d)
}

// tritonSpecs states vs for Triton: the axes after the batch axis, -1 where dynamic. A
// value whose first axis is not a dynamic batch cannot be batched by Triton.
func tritonSpecs(model string, vs []graph.ValueInfo) ([]serve.TensorSpec, error) {
	var out []serve.TensorSpec
	for _, v := range vs {
		t, err := tritonType(v.DType)
		if err != nil {
			return nil, fmt.Errorf("--triton: %s's %s: %w", model, v.Name, err)
		}
		if len(v.Shape) == 0 || v.Shape[0].Known() {
			return nil, fmt.Errorf("--triton: %s's %s has shape %s, without a dynamic batch axis first", model, v.Name, v.Shape)
		}
		dims := make([]int64, 0, len(v.Shape)-1)
		for _, d := range v.Shape[1:] {
			if d.Known() {
				dims = append(dims, d.Size)
			} else {
				dims = append(dims, -1)
			}
		}
		out = append(out, serve.TensorSpec{Name: v.Name, DataType: t, Dims: dims})
	}
	return out, nil
}

// writeTriton writes m as a Triton model repository entry under dir: NAME/1/model.onnx and
// NAME/config.pbtxt.
func writeTriton(dir string, m *zooroot.Model, opset int) ([]exportFile, error) {
	name := m.Name()
	in, err := tritonSpecs(name, m.Graph().Inputs)
	if err != nil {
		return nil, badInput(err)
	}
	outs, err := tritonSpecs(name, m.Graph().Outputs)
	if err != nil {
		return nil, badInput(err)
	}
	version := filepath.Join(dir, name, "1")
	if err := os.MkdirAll(version, 0o755); err != nil {
		return nil, badInputf("--triton %s: %w", dir, err)
	}
	f, err := writeONNXFile(filepath.Join(version, "model.onnx"), m, opset)
	if err != nil {
		return nil, failed(err)
	}
	cfg := filepath.Join(dir, name, "config.pbtxt")
	text := serve.TritonConfig(name, tritonMaxBatch, tritonDelay, in, outs)
	if err := writeText(cfg, text); err != nil {
		return nil, failed(err)
	}
	return []exportFile{f, {Model: name, Path: cfg, Kind: "config", Bytes: int64(len(text))}}, nil
}

// writeKServe writes the KServe manifests and the Dockerfile for m into dir, and the model
// they serve into dir/model: model.onnx (its graph with the weights it was exported with,
// --from-weights included; the default opset) and its tokenizer file, which the Dockerfile
// puts in the image.
func writeKServe(dir string, m *zooroot.Model) ([]exportFile, error) {
	modelDir := filepath.Join(dir, "model")
	if err := os.MkdirAll(modelDir, 0o755); err != nil {
		return nil, badInputf("--kserve %s: %w", dir, err)
	}
	var out []exportFile
	f, err := writeONNXFile(filepath.Join(modelDir, filepath.Base(serve.KServeModel)), m, graph.DefaultOpset)
	if err != nil {
		return nil, failed(err)
	}
	out = append(out, f)
	if tk, err := m.Tokenizer(); err == nil && tk.Path != "" {
		dst := filepath.Join(modelDir, tokenizerFileName(tk.Path))
		data, err := os.ReadFile(tk.Path)
		if err != nil {
			return nil, failed(err)
		}
		if err := tensorio.AtomicWriteFile(dst, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return nil, failed(err)
		}
		out = append(out, exportFile{Model: m.Name(), Path: dst, Kind: "config", Bytes: int64(len(data))})
	}
	image := "zoo-" + serve.K8sName(m.Name()) + ":latest"
	files := serve.KServeFiles(m.Name(), image, "pvc://zoo-models/triton")
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := writeText(p, files[n]); err != nil {
			return nil, failed(err)
		}
		out = append(out, exportFile{Model: m.Name(), Path: p, Kind: "config", Bytes: int64(len(files[n]))})
	}
	return out, nil
}

// tokenizerFileName is the name a tokenizer file takes next to an exported model.onnx, one
// that zoo serve finds there: tokenizer.json, a SentencePiece .model as it is, else vocab.txt.
func tokenizerFileName(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return "tokenizer.json"
	case ".model":
		return filepath.Base(path)
	}
	return "vocab.txt"
}

func writeText(path, text string) error {
	return tensorio.AtomicWriteFile(path, func(w io.Writer) error { _, err := io.WriteString(w, text); return err })
}
