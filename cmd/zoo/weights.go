package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Loading a state_dict into a model. Every verb that builds a model goes through loadModel,
// which calls applyWeights: the flag is --weights everywhere except on export, where
// --weights names the state_dict export writes and --from-weights is the one that loads.
var (
	flagWeights = &cli.StringFlag{Name: "weights", Usage: "load the parameters and buffers, by PyTorch state_dict name, from `FILE`.safetensors " +
		"(written by zoo export --weights, zoo train or PyTorch's safetensors; F16, BF16 and F64 are converted to F32); default: random weights from --seed"}
	flagFromWeights = &cli.StringFlag{Name: "from-weights", Usage: "load the parameters and buffers, by PyTorch state_dict name, from `FILE`.safetensors before exporting " +
		"(default: random weights from --seed)"}
)

// stateDictScript converts a PyTorch checkpoint (torch.save of a state_dict) to safetensors
// without the safetensors package; the bad-input errors name it.
const stateDictScript = "scripts/state_dict_to_safetensors.py"

// weightsSource returns the state_dict file the command loads, or "": --from-weights, or
// --weights on a command whose --weights is the loading flag (every model verb but export).
func weightsSource(c *cli.Context) string {
	if p := c.String(flagFromWeights.Name); p != "" {
		return p
	}
	if c.Command == nil {
		return ""
	}
	for _, f := range c.Command.Flags {
		if f == flagWeights {
			return c.String(flagWeights.Name)
		}
	}
	return ""
}

// applyWeights loads the state_dict the command names (weightsSource) into m's graph, before
// anything compiles it, and records where m's weights come from. A file that cannot be read,
// is not safetensors, or whose tensors do not match the model's by name, dtype and shape is
// bad input (one line naming the tensor at fault).
func applyWeights(c *cli.Context, m *model) error {
	path := weightsSource(c)
	if path == "" {
		return nil
	}
	if err := loadWeightsFile(m, path); err != nil {
		return badInput(err)
	}
	return nil
}

// loadWeightsFile reads path and loads its tensors into m.Graph (graph.LoadStateDict).
func loadWeightsFile(m *model, path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt" {
		return fmt.Errorf("weights %s: zoo reads safetensors; convert a PyTorch state_dict with /usr/bin/python3 %s %s OUT.safetensors", path, stateDictScript, path)
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("weights %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return fmt.Errorf("weights %s is a directory; give a .safetensors file", path)
	}
	list, meta, err := tensorio.ReadWeightsFrom(f)
	if err != nil {
		return fmt.Errorf("weights %s: %w (want a .safetensors state_dict; convert a PyTorch checkpoint with %s)", path, err, stateDictScript)
	}
	tensors := make(map[string]*tensor.Tensor, len(list))
	for _, nt := range list {
		tensors[nt.Name] = nt.Tensor
	}
	if err := graph.LoadStateDict(m.Graph, tensors); err != nil {
		return fmt.Errorf("weights %s do not fit %s: %w%s", path, m.displayName(), err, writtenFor(meta, m))
	}
	m.WeightsFile = path
	return nil
}

// writtenFor says which model a zoo-written weights file was made for, when that is not m.
func writtenFor(meta map[string]string, m *model) string {
	v := meta["variant"]
	if v == "" {
		return ""
	}
	if v != m.Name || (meta["config"] != "" && meta["config"] != m.Config.JSON()) {
		return fmt.Sprintf(" (the file holds %s with config %s)", v, meta["config"])
	}
	return ""
}

// weightsReport says where a model's weights came from; reports print it as "weights":
// {"source": "trained", "file": FILE} (loaded with --weights), {"source": "random", "seed": N}
// (drawn from the seed) or {"source": "onnx"} (an imported file's own).
type weightsReport struct {
	Source string  `json:"source"`
	File   string  `json:"file,omitempty"`
	Seed   *uint64 `json:"seed,omitempty"`
}

// weightsOf describes m's weights.
func weightsOf(m *model) weightsReport {
	if m.WeightsFile != "" {
		return weightsReport{Source: "trained", File: m.WeightsFile}
	}
	if m.FromFile {
		return weightsReport{Source: "onnx"}
	}
	seed := m.Seed
	return weightsReport{Source: "random", Seed: &seed}
}

// String is the text form: "trained, from FILE", "random (seed N)" or, for an imported ONNX
// file that keeps its own, "the ONNX file's".
func (w weightsReport) String() string {
	switch w.Source {
	case "trained":
		return "trained, from " + w.File
	case "onnx":
		return "the ONNX file's"
	}
	var seed uint64
	if w.Seed != nil {
		seed = *w.Seed
	}
	return fmt.Sprintf("random (seed %d)", seed)
}
