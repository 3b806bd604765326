package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// isONNXPath reports whether a model reference names an ONNX file rather than a variant.
func isONNXPath(ref string) bool { return strings.HasSuffix(strings.ToLower(ref), ".onnx") }

// rejectVariantFlags returns a bad-input error when --preset, --set or --seed is given for
// the ONNX file at path: they shape a variant's config and initial weights, and a file's are
// fixed, so the flag would be silently ignored.
func rejectVariantFlags(c *cli.Context, path string) error {
	for _, f := range []string{flagPreset.Name, flagSet.Name, flagSeed.Name} {
		if c.IsSet(f) {
			return badInputf("--%s does not apply to %s: an ONNX file's hyperparameters and weights are fixed (--preset, --set and --seed shape a variant)", f, path)
		}
	}
	return nil
}

// loadONNXModel imports an ONNX file (written by zoo, PyTorch or anything else) as a model.
func loadONNXModel(path string) (*model, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, badInputf("model %s: %w", path, errors.Unwrap(err))
	case st.IsDir():
		return nil, badInputf("model %s is a directory; give an .onnx file", path)
	}
	g, err := onnx.ImportFile(path)
	if err != nil {
		return nil, badInputf("model %s: %w", path, err)
	}
	m := &model{Name: path, Desc: variant.Description{Name: path, Summary: "ONNX file"}, Config: variant.Config{}, Graph: g, FromFile: true}
	// A file zoo exported records its variant's config; its max_len bounds the windows.
	var cfg map[string]any
	if json.Unmarshal([]byte(g.Meta["config"]), &cfg) == nil {
		if v, ok := cfg["max_len"].(float64); ok && v >= 1 && v == math.Trunc(v) {
			m.Config["max_len"] = int64(v)
			m.Desc.Caps.MaxLenParam = "max_len"
		}
	}
	return m, nil
}

// tokenInputs finds the graph inputs that take token ids (int64, rank 2) and the key-padding
// mask (bool, rank 2, true = padding; optional). zoo's own graphs call them tokens and
// key_padding_mask; imported graphs may use any names.
func tokenInputs(g *graph.Graph) (tokens, mask string, err error) {
	for _, in := range g.Inputs {
		if len(in.Shape) != 2 {
			continue
		}
		switch {
		case in.DType == tensor.Int64 && tokens == "":
			tokens = in.Name
		case in.DType == tensor.Bool && mask == "":
			mask = in.Name
		}
	}
	if tokens == "" || len(g.Inputs) > 2 || (mask == "" && len(g.Inputs) > 1) {
		var parts []string
		for _, in := range g.Inputs {
			parts = append(parts, fmt.Sprintf("%s %v %s", in.Name, in.DType, in.Shape))
		}
		return "", "", fmt.Errorf("model %s does not take text: zoo feeds token ids (int64 (batch, seq)) and an optional key-padding mask (bool (batch, seq)), but its inputs are %s", g.Name, strings.Join(parts, ", "))
	}
	return tokens, mask, nil
}
