package zoo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// stateDictScript converts a PyTorch checkpoint (torch.save of a state_dict) to safetensors
// without the safetensors package; the errors about weights files name it.
const stateDictScript = "scripts/state_dict_to_safetensors.py"

// LoadWeights reads a .safetensors state_dict at path and loads its tensors into the model's
// graph (graph.LoadStateDict: strict by name, dtype and shape; F16, BF16 and F64 converted to
// F32), before anything compiles it, and records where the weights come from. A file that
// cannot be read, is not safetensors, or does not fit is an *InputError naming the tensor at
// fault; a model that has compiled already is refused.
func (m *Model) LoadWeights(path string) error {
	m.mu.Lock()
	compiled := m.prog != nil
	m.mu.Unlock()
	if compiled {
		return fmt.Errorf("weights %s: model %s has compiled already; load weights before it runs", path, m.Name())
	}
	return inputErr(optWeights, m.loadWeightsFile(path))
}

func (m *Model) loadWeightsFile(path string) error {
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
	budget, source, err := readBudget()
	if err != nil {
		return err
	}
	list, meta, err := tensorio.ReadWeightsLimit(f, budget)
	if err != nil {
		var be *tensorio.BudgetError
		if errors.As(withSource(err, source), &be) {
			return fmt.Errorf("weights %s: %w", path, err)
		}
		return fmt.Errorf("weights %s: %w (want a .safetensors state_dict; convert a PyTorch checkpoint with %s)", path, err, stateDictScript)
	}
	if err := m.checkWrittenFor(path, meta); err != nil {
		return err
	}
	tensors := make(map[string]*tensor.Tensor, len(list))
	for _, nt := range list {
		tensors[nt.Name] = nt.Tensor
	}
	if err := graph.LoadStateDict(m.graph, tensors); err != nil {
		return fmt.Errorf("weights %s do not fit %s: %w%s", path, m.Name(), err, m.writtenFor(meta))
	}
	m.weightsFile = path
	return nil
}

// LoadStateDict loads tensors into the model's graph by name (graph.LoadStateDict: strict by
// name, dtype and shape) and records source as where its weights come from (a training
// checkpoint, say). A state_dict that does not fit is an *InputError naming the tensor.
func (m *Model) LoadStateDict(tensors map[string]*tensor.Tensor, source string) error {
	if err := graph.LoadStateDict(m.graph, tensors); err != nil {
		return inputErrf("", "%s does not fit %s: %w", source, m.Name(), err)
	}
	m.weightsFile = source
	return nil
}

// checkWrittenFor refuses the weights at path when zoo wrote them (zoo train, zoo export:
// their metadata name the variant and its config) for another variant or another config than
// m's, whatever the shapes: weights that happen to fit another model are not that model's.
// Hyperparameters that only training reads (dropout rates) may differ. A file without that
// metadata (PyTorch's, say) is checked by shape alone.
func (m *Model) checkWrittenFor(path string, meta map[string]string) error {
	written := meta["variant"]
	if written == "" || m.fromFile {
		return nil
	}
	base, _, _ := strings.Cut(written, ".")
	if base != m.name {
		return inputErrf(optWeights, "%s %s were written for %s, not %s; load them into %s", optWeights, path, written, m.Name(), written)
	}
	if meta["config"] == "" {
		return nil
	}
	var theirs map[string]any
	if err := json.Unmarshal([]byte(meta["config"]), &theirs); err != nil {
		return nil // not zoo's config: the shapes decide
	}
	var ours map[string]any
	_ = json.Unmarshal([]byte(m.config.JSON()), &ours)
	var want, have []string
	for _, k := range slices.Sorted(maps.Keys(theirs)) {
		if strings.Contains(k, "dropout") || strings.HasPrefix(k, "@") {
			continue
		}
		if a, b := fmt.Sprint(theirs[k]), fmt.Sprint(ours[k]); a != b {
			want, have = append(want, k+"="+a), append(have, k+"="+b)
		}
	}
	if len(want) == 0 {
		return nil
	}
	advice := fmt.Sprintf("give %s %s to load them", optSet, strings.Join(want, " "+optSet+" "))
	if strings.Contains(written, ".") && written != m.Name() {
		advice = "load them into " + written
	}
	return inputErrf(optWeights, "%s %s were written for %s with %s, not %s's %s; %s",
		optWeights, path, written, strings.Join(want, " "), m.Name(), strings.Join(have, " "), advice)
}

// writtenFor says which model a zoo-written weights file was made for, when that is not m.
func (m *Model) writtenFor(meta map[string]string) string {
	v := meta["variant"]
	if v == "" {
		return ""
	}
	if v != m.name || (meta["config"] != "" && meta["config"] != m.config.JSON()) {
		return fmt.Sprintf(" (the file holds %s with config %s)", v, meta["config"])
	}
	return ""
}

// WeightsSource says where a model's weights came from; reports print it as "weights":
// {"source": "trained", "file": FILE} (loaded from a state_dict), {"source": "random",
// "seed": N} (drawn from the seed) or {"source": "onnx"} (an imported file's own).
type WeightsSource struct {
	Source string  `json:"source"`
	File   string  `json:"file,omitempty"`
	Seed   *uint64 `json:"seed,omitempty"`
}

// Weights describes where the model's weights came from.
func (m *Model) Weights() WeightsSource {
	if m.weightsFile != "" {
		return WeightsSource{Source: "trained", File: m.weightsFile}
	}
	if m.fromFile {
		return WeightsSource{Source: "onnx"}
	}
	seed := m.seed
	return WeightsSource{Source: "random", Seed: &seed}
}

// String is the text form: "trained, from FILE", "random (seed N)" or, for an imported ONNX
// file that keeps its own, "the ONNX file's".
func (w WeightsSource) String() string {
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
