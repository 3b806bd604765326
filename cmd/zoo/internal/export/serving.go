package export

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zoo-dev/zoo/serve"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Triton's batching of an exported model: zoo serve's defaults.
const (
	TritonMaxBatch = 32
	TritonDelay    = 5 * time.Millisecond
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

// TritonSpecs states vs, values of model, for Triton: the axes after the batch axis, -1
// where dynamic. A value whose first axis is not a dynamic batch cannot be batched by Triton.
func TritonSpecs(model string, vs []graph.ValueInfo) ([]serve.TensorSpec, error) {
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

// WriteTriton writes the model name (graph g, exported at opset by producer) as a Triton
// model repository entry under dir: NAME/1/model.onnx and NAME/config.pbtxt. A model Triton
// cannot batch, or a directory that cannot be made, is an *InputError.
func WriteTriton(dir, name string, g *graph.Graph, opset int, producer string) ([]File, error) {
	in, err := TritonSpecs(name, g.Inputs)
	if err != nil {
		return nil, &InputError{err}
	}
	outs, err := TritonSpecs(name, g.Outputs)
	if err != nil {
		return nil, &InputError{err}
	}
	version := filepath.Join(dir, name, "1")
	if err := os.MkdirAll(version, 0o755); err != nil {
		return nil, &InputError{fmt.Errorf("--triton %s: %w", dir, err)}
	}
	f, err := WriteONNX(filepath.Join(version, "model.onnx"), name, g, opset, producer)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, name, "config.pbtxt")
	text := serve.TritonConfig(name, TritonMaxBatch, TritonDelay, in, outs)
	if err := writeText(cfg, text); err != nil {
		return nil, err
	}
	return []File{f, {Model: name, Path: cfg, Kind: "config", Bytes: int64(len(text))}}, nil
}

// WriteKServe writes the KServe manifests and the Dockerfile for the model name into dir,
// and the model they serve into dir/model: model.onnx (g, with the weights it was exported
// with; the default opset) and the tokenizer file at tokenizer ("" for none), which the
// Dockerfile puts in the image. A directory that cannot be made is an *InputError.
func WriteKServe(dir, name string, g *graph.Graph, tokenizer, producer string) ([]File, error) {
	modelDir := filepath.Join(dir, "model")
	if err := os.MkdirAll(modelDir, 0o755); err != nil {
		return nil, &InputError{fmt.Errorf("--kserve %s: %w", dir, err)}
	}
	f, err := WriteONNX(filepath.Join(modelDir, filepath.Base(serve.KServeModel)), name, g, graph.DefaultOpset, producer)
	if err != nil {
		return nil, err
	}
	out := []File{f}
	if tokenizer != "" {
		dst := filepath.Join(modelDir, tokenizerFileName(tokenizer))
		data, err := os.ReadFile(tokenizer)
		if err != nil {
			return nil, err
		}
		if err := tensorio.AtomicWriteFile(dst, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return nil, err
		}
		out = append(out, File{Model: name, Path: dst, Kind: "config", Bytes: int64(len(data))})
	}
	files := serve.KServeFiles(name, "zoo-"+serve.K8sName(name)+":latest", "pvc://zoo-models/triton")
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := writeText(p, files[n]); err != nil {
			return nil, err
		}
		out = append(out, File{Model: name, Path: p, Kind: "config", Bytes: int64(len(files[n]))})
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
