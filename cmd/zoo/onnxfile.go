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
	if v := metaMaxLen(g); v > 0 {
		m.Config["max_len"] = int64(v)
		m.Desc.Caps.MaxLenParam = "max_len"
	}
	return m, nil
}

// metaMaxLen returns max_len from the config a zoo-exported file records (it bounds the
// windows), or 0.
func metaMaxLen(g *graph.Graph) int {
	var cfg map[string]any
	if json.Unmarshal([]byte(g.Meta["config"]), &cfg) == nil {
		if v, ok := cfg["max_len"].(float64); ok && v >= 1 && v == math.Trunc(v) && v < 1<<31 {
			return int(v)
		}
	}
	return 0
}

// tokenInputs returns the inputs of a model that takes token ids and at most a key-padding
// mask (bool, true = padding), as zoo's own graphs do (bench feeds these two only); the roles
// come from planFeeds. A model with other inputs (an attention mask, token types, ...) is an
// error naming them.
func tokenInputs(g *graph.Graph) (tokens, mask string, err error) {
	p, err := planFeeds(g, nil)
	if err != nil {
		return "", "", err
	}
	for _, f := range p.Feeds {
		switch {
		case f.Role == roleIDs && f.DType == tensor.Int64:
			tokens = f.Name
		case f.Role == rolePadding && f.DType == tensor.Bool:
			mask = f.Name
		default:
			return "", "", fmt.Errorf("model %s: input %s %s takes %s; only token ids (int64) and a key-padding mask (bool) are fed here", g.Name, f.Name, f.Type, f.Role)
		}
	}
	return tokens, mask, nil
}
