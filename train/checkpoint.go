package train

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	zoo "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// MetaKey is the metadata key under which both checkpoint files record the run (its model,
// data and Config, as JSON), so that a resumed run continues with exactly the settings it
// started with.
const MetaKey = "zoo_train"

// record is a run as checkpoints record it under MetaKey. Its JSON is the checkpoint format:
// fields are only ever added.
type record struct {
	Model          string    `json:"model"`
	Sets           []string  `json:"set,omitempty"`
	Seed           uint64    `json:"seed"`
	Weights        string    `json:"weights,omitempty"`
	Input          string    `json:"input"`
	Objective      string    `json:"objective"`
	Steps          int       `json:"steps"`
	Batch          int       `json:"batch"`
	Window         int       `json:"window"`
	Shuffle        bool      `json:"shuffle"`
	Optimizer      string    `json:"optimizer"`
	LR             float64   `json:"lr"`
	WeightDecay    float64   `json:"weight_decay"`
	Eps            float64   `json:"eps"`
	Betas          []float64 `json:"betas"`
	Momentum       float64   `json:"momentum"`
	Warmup         int       `json:"warmup"`
	Schedule       string    `json:"schedule"`
	LabelSmoothing float64   `json:"label_smoothing"`
	Clip           float64   `json:"clip"`
	// Precision is "" when the run was given none (the backend's default, fp32), so that
	// checkpoints written before precisions existed resume as fp32.
	Precision string `json:"precision,omitempty"`
	// Tokenizer is the tokenizer the run cut its text with: "bytes" (zoo's byte tokenizer,
	// the only one training uses; "" in checkpoints written before it was recorded).
	Tokenizer string `json:"tokenizer,omitempty"`
	// InputOffset and InputSize select the part of Input trained on (0, 0: all of it).
	InputOffset int64 `json:"input_offset,omitempty"`
	InputSize   int64 `json:"input_size,omitempty"`
	// Held is the held-out text the run evaluated on (nil: none).
	Held *sourceRecord `json:"held,omitempty"`
	// The settings that shape how the run is carried out, which a resumed run keeps unless
	// given others (fields added with them: absent in older checkpoints).
	EvalEvery             int               `json:"eval_every,omitempty"`
	SaveEvery             int               `json:"save_every,omitempty"`
	Threads               int               `json:"threads,omitempty"`
	CheckpointActivations bool              `json:"checkpoint_activations,omitempty"`
	Labels                map[string]string `json:"labels,omitempty"`
	// Cycles are the schedule's cycles of an extended run (Config.Cycles).
	Cycles []Cycle `json:"cycles,omitempty"`
}

// sourceRecord is a TextSource read from a file, as a record holds it.
type sourceRecord struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// ByteTokenizer is the tokenizer a run records: zoo's byte tokenizer (id = byte + 1, 0 the
// pad and mask id), the one training and Evaluate cut text with.
const ByteTokenizer = "bytes"

func newRecord(model string, set map[string]string, weights string, data Data, c Config) record {
	var sets []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		sets = append(sets, k+"="+set[k])
	}
	r := record{Model: model, Sets: sets, Seed: c.Seed, Weights: weights, Input: data.Train.Path, Objective: c.Objective,
		Steps: c.Steps, Batch: c.Batch, Window: c.Window, Shuffle: c.Shuffle, Optimizer: c.Optimizer, LR: c.LR,
		WeightDecay: c.WeightDecay, Eps: c.Eps, Betas: c.Betas[:], Momentum: c.Momentum, Warmup: c.Warmup,
		Schedule: c.Schedule, LabelSmoothing: c.LabelSmoothing, Clip: c.Clip, Precision: c.Precision, Tokenizer: ByteTokenizer,
		InputOffset: data.Train.Offset, InputSize: data.Train.Size, EvalEvery: c.EvalEvery, SaveEvery: c.SaveEvery,
		Threads: c.Threads, CheckpointActivations: c.CheckpointActivations, Labels: c.Labels, Cycles: c.Cycles}
	if data.Held.Path != "" {
		r.Held = &sourceRecord{Path: data.Held.Path, Offset: data.Held.Offset, Size: data.Held.Size}
	}
	return r
}

func (r record) config() Config {
	c := Config{Seed: r.Seed, Objective: r.Objective, Steps: r.Steps, Batch: r.Batch, Window: r.Window, Shuffle: r.Shuffle,
		Optimizer: r.Optimizer, LR: r.LR, WeightDecay: r.WeightDecay, Eps: r.Eps, Momentum: r.Momentum, Warmup: r.Warmup,
		Schedule: r.Schedule, LabelSmoothing: r.LabelSmoothing, Clip: r.Clip, Precision: r.Precision,
		EvalEvery: r.EvalEvery, SaveEvery: r.SaveEvery, Threads: r.Threads, CheckpointActivations: r.CheckpointActivations,
		Labels: r.Labels, Cycles: r.Cycles}
	copy(c.Betas[:], r.Betas)
	return c
}

// data is the run's data as the record holds it (held-out text only from a file).
func (r record) data() Data {
	d := Data{Train: TextSource{Path: r.Input, Offset: r.InputOffset, Size: r.InputSize}}
	if r.Held != nil {
		d.Held = TextSource{Path: r.Held.Path, Offset: r.Held.Offset, Size: r.Held.Size}
	}
	return d
}

// Checkpoint is a training checkpoint read back (ReadCheckpoint): the run it continues and
// the step it holds.
type Checkpoint struct {
	// Path is the checkpoint file (its optimizer state is optim.OptimPath(Path)).
	Path string
	// Step is the number of steps taken.
	Step int
	// Model is the model's reference ("vanilla.tiny"), Set its LoadOptions.Set, Weights the
	// file its initial weights came from ("" for the seed's), and Input the training text's
	// path: load the model with Load(ctx, Model, Config.Objective, zoo.LoadOptions{Set: Set,
	// Seed: Config.Seed}) to resume.
	Model   string
	Set     map[string]string
	Weights string
	Input   string
	// Data is the run's data: Train the part of Input it trains on, Held the held-out text
	// it evaluated on (when that was a file). Name them before use (TextSource.Name).
	Data Data
	// Tokenizer is the tokenizer the run cut its text with (ByteTokenizer).
	Tokenizer string
	// ModelConfig is the trained model's resolved hyperparameters, as JSON ("" in a
	// checkpoint without them).
	ModelConfig string
	// Config holds the recorded settings (the fields up to Config.Seed). Its Window is the
	// window the run trained with (the default it chose when Config.Window was 0), except in
	// checkpoints written before that was recorded.
	Config Config
}

// ReadCheckpoint reads the run and the step of a checkpoint that Trainer wrote (the tensors
// are loaded by New, given Config.Resume). A file that cannot be read or was not written by
// a Trainer is an *zoo.InputError.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	ck, err := readCheckpoint(path, optResume)
	if err == nil && ck == nil {
		return nil, inputErrf(optResume, "%s %s was not written by zoo train (no %s metadata); to start from its weights use %s %s",
			optResume, path, MetaKey, optLoadWeights, path)
	}
	return ck, err
}

// TrainedWith reads the run that the training checkpoint at path records, for a file given as
// weights (LoadOptions.Weights): nil and no error when the file holds weights without a
// training record (a state_dict that zoo export or PyTorch wrote). A file that cannot be read
// or whose record does not parse is an *zoo.InputError naming LoadOptions.Weights.
func TrainedWith(path string) (*Checkpoint, error) { return readCheckpoint(path, optLoadWeights) }

// readCheckpoint reads path's training record; nil, nil when it has none. Errors name option.
func readCheckpoint(path, option string) (*Checkpoint, error) {
	hdr, err := readMetadata(path)
	if err != nil {
		return nil, inputErrf(option, "%s %s: %w", option, path, err)
	}
	raw, ok := hdr[MetaKey]
	if !ok {
		return nil, nil
	}
	var rec record
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil, inputErrf(option, "%s %s: metadata %s: %w", option, path, MetaKey, err)
	}
	step, err := strconv.Atoi(hdr[optim.MetaStep])
	if err != nil || step < 0 {
		return nil, inputErrf(option, "%s %s: metadata %s=%q is not a step count", option, path, optim.MetaStep, hdr[optim.MetaStep])
	}
	ck := &Checkpoint{Path: path, Step: step, Model: rec.Model, Weights: rec.Weights, Input: rec.Input, Tokenizer: rec.Tokenizer,
		ModelConfig: hdr["config"], Config: rec.config(), Data: rec.data()}
	if len(rec.Sets) > 0 {
		ck.Set = map[string]string{}
		for _, s := range rec.Sets {
			k, v, _ := strings.Cut(s, "=")
			ck.Set[strings.TrimSpace(k)] = v
		}
	}
	return ck, nil
}

// Continue returns the Config that continues ck's run: ck's recorded settings, with cfg's
// Steps when given; the fields that may change between invocations (Threads, EvalEvery,
// SaveEvery, CheckpointActivations) are cfg's where given and the run's otherwise; Output is
// cfg's (ck.Path when cfg has none), Labels the run's with cfg's over them, and Resume is
// ck.Path. given reports which of cfg's fields the caller set, by option name ("Config.LR";
// nil: every one): each recorded one must equal the checkpoint's, for a resumed run keeps its
// settings, so that its losses equal an uninterrupted run's bit for bit. A field that
// differs, or Steps not beyond the checkpoint's step, is an *zoo.InputError. More Steps than
// the run was given extend it by a new cycle of the schedule (Config.Cycles), fewer keep its
// schedule: ExtendRule.
func (ck *Checkpoint) Continue(cfg Config, given func(option string) bool) (Config, error) {
	all := given == nil
	if all {
		given = func(string) bool { return true }
	}
	want := ck.Config.recorded()
	for i, s := range cfg.recorded() {
		if s.option == optWindow && (cfg.Window == 0 || ck.Config.Window == 0) {
			continue // the default: the window the model chose, which the record holds
		}
		if given(s.option) && s.value != want[i].value {
			return cfg, inputErrf(s.option, "%s %s differs from the resumed run's %s; a resumed run keeps its settings (start a new run with %s %s to change them)",
				s.option, s.value, orNone(want[i].value), optLoadWeights, ck.Path)
		}
	}
	if ext := ck.Config.extended(cfg.Steps); all && cfg.Cycles != nil && cfg.cyclesString() != ext.cyclesString() {
		return cfg, inputErrf(optSchedule, "%s: the schedule's cycles (%s) are not the resumed run's continued to step %d (%s); take Config.Cycles from Checkpoint.Continue, or leave them nil",
			optSchedule, orNone(cfg.cyclesString()), cfg.Steps, orNone(ext.cyclesString()))
	}
	out := ck.Config
	if given(optSteps) {
		out = out.extended(cfg.Steps)
	}
	if given(optThreads) {
		out.Threads = cfg.Threads
	}
	if given(optEvalEvery) {
		out.EvalEvery = cfg.EvalEvery
	}
	if given(optSaveEvery) {
		out.SaveEvery = cfg.SaveEvery
	}
	if given(optCheckpointActivations) {
		out.CheckpointActivations = cfg.CheckpointActivations
	}
	if len(cfg.Labels) > 0 {
		out.Labels = maps.Clone(out.Labels)
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		maps.Copy(out.Labels, cfg.Labels)
	}
	out.Output = cfg.Output
	if out.Output == "" {
		out.Output = ck.Path
	}
	out.Resume = ck.Path
	if ck.Step >= out.Steps {
		return out, inputErrf(optResume, "%s %s is already at step %d of %d; give a larger %s to train further", optResume, ck.Path, ck.Step, out.Steps, optSteps)
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// checkpointMeta is the metadata of both checkpoint files: the run's record, and in the model
// file the variant, its config and seed (which zoo show and LoadWeights report).
func checkpointMeta(rec record, variant, config string, seed uint64) (model, opt map[string]string, err error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, fmt.Errorf("record the run: %w", err)
	}
	model = map[string]string{MetaKey: string(raw), "variant": variant, "config": config, "seed": strconv.FormatUint(seed, 10)}
	return model, map[string]string{MetaKey: string(raw)}, nil
}

// readMetadata reads the metadata of the safetensors file at path from its header alone (the
// tensors are read, and checked, by whoever loads them).
func readMetadata(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u
		}
		return nil, err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("safetensors: the file is too short for the 8-byte header length")
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > tensorio.MaxSafetensorsHeader {
		return nil, fmt.Errorf("safetensors: header length %d is beyond the limit of %d", size, tensorio.MaxSafetensorsHeader)
	}
	hdr := make([]byte, size)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("safetensors: header length %d is beyond the end of the file", size)
	}
	var head struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(hdr, &head); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	return head.Meta, nil
}

// checkModel refuses to continue ck's run in m when m is another model than the run's, or
// the same variant with another config, whatever the shapes: one line naming both.
func (ck *Checkpoint) checkModel(m *zoo.Model) error {
	if ck.Model != "" && ck.Model != m.Name() {
		return inputErrf(optResume, "%s %s is a run of %s, not %s; resume it with %s", optResume, ck.Path, ck.Model, m.Name(), ck.Model)
	}
	if ck.ModelConfig == "" {
		return nil
	}
	var theirs, ours map[string]any
	if json.Unmarshal([]byte(ck.ModelConfig), &theirs) != nil || json.Unmarshal([]byte(m.Config().JSON()), &ours) != nil {
		return nil
	}
	var want, have []string
	for _, k := range slices.Sorted(maps.Keys(theirs)) {
		if a, b := fmt.Sprint(theirs[k]), fmt.Sprint(ours[k]); a != b {
			want, have = append(want, k+"="+a), append(have, k+"="+b)
		}
	}
	if len(want) == 0 {
		return nil
	}
	return inputErrf(optResume, "%s %s is a run of %s with %s, not %s with %s; load the model with %s %s",
		optResume, ck.Path, ck.Model, strings.Join(want, " "), m.Name(), strings.Join(have, " "), optLoadSet, strings.Join(want, " "+optLoadSet+" "))
}
