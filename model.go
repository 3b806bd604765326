package zoo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"

	// The backends a model compiles on register themselves; cuda builds without cgo as a
	// backend that says it is unavailable.
	_ "github.com/zoo-dev/zoo/backends/cpu"
	_ "github.com/zoo-dev/zoo/backends/cuda"
)

// LoadOptions say how Load resolves, builds and compiles a model. The zero value loads a
// variant's default config with seed 0's weights, zoo's byte tokenizer (an .onnx file: the
// tokenizer next to it), on the backend backends.Select chooses.
type LoadOptions struct {
	// Preset is the variant's preset (also written name.preset in the reference).
	Preset string
	// Set overrides hyperparameters, applied after the preset; values are parsed as the
	// variant's schema says (variant.Resolve); unknown keys are errors.
	Set map[string]string
	// Seed seeds the deterministic initial weights of a variant.
	Seed uint64
	// Weights is a .safetensors state_dict loaded over the initial weights, strict by PyTorch
	// parameter name, dtype and shape ("" for none).
	Weights string
	// Tokenizer is a tokenizer file (tokenizer.json, SentencePiece .model, vocab.txt). For a
	// variant it also sets the variant's vocab hyperparameter to the tokenizer's vocabulary
	// (before Set, which still wins). Default: for an .onnx file the tokenizer next to it,
	// else zoo's byte tokenizer.
	Tokenizer string
	// Registries are extra registry files layered over the built-in and the user's.
	Registries []string
	// Backend names the backend ("cpu", "cuda"); "" chooses as backends.Select does.
	Backend string
	// Precision of matrix products: "" (the backend's default), "fp32", "bf16", "int8"
	// (inference only: linear layers' weights in int8) or "int8-attention" (int8 and
	// attention's products in int8 too); see backends.Options.Precision.
	Precision string
	// Threads caps the backend's worker threads (0: every core).
	Threads int
	// Plugins gives the variants of registry entries; nil builds built-in variants in this
	// process and refuses third-party plugins (see Plugins).
	Plugins VariantSource
	// Training builds the variant for training (variant.WithTraining: its dropout sites are
	// graph inputs); Config still reports the config without that build flag.
	Training bool
	// Configure, when set, adjusts a variant's resolved config before the build (a training
	// objective turning causal on, say); its error is returned as it is. It does not run for
	// an .onnx file, whose config is fixed.
	Configure func(d variant.Description, cfg variant.Config) error
}

// precisions are the values LoadOptions.Precision takes besides "".
var precisions = []string{"fp32", "bf16", "int8", "int8-attention"}

// Precisions returns the values LoadOptions.Precision takes besides "", the default (fp32)
// first: what a front end offers and validates against.
func Precisions() []string { return slices.Clone(precisions) }

// Model is a loaded model: its graph with its weights, its config, its tokenizer and, once
// compiled, its program on a backend. Its methods are safe for concurrent use, but Run and
// the encoders of one model share one program and take turns on it.
type Model struct {
	name, preset string
	desc         variant.Description
	config       variant.Config
	seed         uint64
	graph        *graph.Graph
	fromFile     bool
	weightsFile  string
	opts         LoadOptions

	tokOnce sync.Once
	tok     *Tokenizer
	tokErr  error

	mu     sync.Mutex // guards choice, prog, closed and serialises prog.Run
	choice backends.Choice
	prog   backends.Program
	closed bool
}

// Spec is a variant reference resolved against the registry: its entry, its variant, the
// preset in force and the complete config, before anything is built.
type Spec struct {
	Entry   registry.Entry
	Variant variant.Variant
	Preset  string
	Config  variant.Config

	inProcess bool // Variant builds in this process: its build errors are the config's
}

// IsONNXPath reports whether a model reference names an ONNX file rather than a variant.
func IsONNXPath(ref string) bool { return strings.HasSuffix(strings.ToLower(ref), ".onnx") }

// Resolve finds ref ("name", "alias" or "name.preset") in the registry and resolves its config:
// the registry's defaults, the preset, vocab (> 0: a tokenizer's vocabulary, where the variant
// has a vocab hyperparameter), then opts.Set. An unknown name or preset, a preset named twice
// differently, or a value that does not fit the schema is an *InputError.
func Resolve(ctx context.Context, ref string, opts LoadOptions, vocab int) (*Spec, error) {
	reg, err := Registry(opts.Registries...)
	if err != nil {
		return nil, err
	}
	entry, preset, err := reg.Lookup(ref)
	if err != nil {
		return nil, inputErr("", err)
	}
	if p := opts.Preset; p != "" {
		if preset != "" && preset != p {
			return nil, inputErrf(optPreset, "model %q names preset %q but %s says %q; use one", ref, preset, optPreset, p)
		}
		preset = p
	}
	v, inProcess, err := variantOf(ctx, opts.Plugins, entry)
	if err != nil {
		return nil, err
	}
	layers := []map[string]any{entry.Defaults}
	if preset != "" {
		values, ok := entry.Presets[preset]
		if !ok {
			return nil, inputErrf(optPreset, "variant %s has no preset %q (presets: %s)", entry.Name, preset, strings.Join(entry.PresetNames(), ", "))
		}
		layers = append(layers, values)
	}
	if vocab > 0 {
		for _, p := range v.Describe().Params {
			if p.Name == vocabParam {
				layers = append(layers, map[string]any{vocabParam: int64(vocab)})
			}
		}
	}
	sets := make(map[string]any, len(opts.Set))
	for k, val := range opts.Set {
		sets[k] = val
	}
	layers = append(layers, sets)
	cfg, err := variant.Resolve(v.Describe(), layers...)
	if err != nil {
		return nil, inputErr(optSet, err)
	}
	return &Spec{Entry: entry, Variant: v, Preset: preset, Config: cfg, inProcess: inProcess}, nil
}

// vocabParam is the hyperparameter a tokenizer's vocabulary size sets.
const vocabParam = "vocab"

// Load loads the model ref names: a variant ("name", an alias, "name.preset") built with its
// deterministic weights, or an .onnx file imported as it is; then opts.Weights over its weights.
// Nothing is compiled until the model first runs (or Compile). Bad references, options and
// files are *InputError; a plugin or build that fails is returned as it is. Close releases the
// model.
func Load(ctx context.Context, ref string, opts LoadOptions) (*Model, error) {
	if err := checkLoadOptions(opts); err != nil {
		return nil, err
	}
	var m *Model
	if IsONNXPath(ref) {
		for _, f := range []struct {
			name string
			set  bool
		}{{optPreset, opts.Preset != ""}, {optSet, len(opts.Set) > 0}, {optSeed, opts.Seed != 0}} {
			if f.set {
				return nil, inputErrf(f.name, "%s does not apply to %s: an ONNX file's hyperparameters and weights are fixed (%s, %s and %s shape a variant)", f.name, ref, optPreset, optSet, optSeed)
			}
		}
		var err error
		if m, err = importONNX(ref); err != nil {
			return nil, err
		}
	} else {
		var tok *Tokenizer
		vocab := 0
		if opts.Tokenizer != "" {
			t, err := ChooseTokenizer(opts.Tokenizer, ref, false)
			if err != nil {
				return nil, err
			}
			tok, vocab = t, t.VocabSize()
		}
		spec, err := Resolve(ctx, ref, opts, vocab)
		if err != nil {
			return nil, err
		}
		if opts.Configure != nil {
			if err := opts.Configure(spec.Variant.Describe(), spec.Config); err != nil {
				return nil, err
			}
		}
		built := *spec
		if opts.Training {
			built.Config = variant.WithTraining(spec.Config)
		}
		if m, err = built.build(ctx, opts.Seed); err != nil {
			return nil, err
		}
		m.config = spec.Config
		if tok != nil {
			m.tokOnce.Do(func() { m.tok = tok })
		}
	}
	m.opts = opts
	if opts.Weights != "" {
		if err := m.LoadWeights(opts.Weights); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Build builds the resolved variant with seed's weights. A build error of a variant in this
// process is an *InputError (the config is at fault); a VariantSource's error is returned as
// it is.
func (s *Spec) Build(ctx context.Context, seed uint64) (*Model, error) { return s.build(ctx, seed) }

func (s *Spec) build(ctx context.Context, seed uint64) (*Model, error) {
	g, err := s.Variant.Build(ctx, s.Config, seed)
	if err != nil {
		if s.inProcess {
			err = inputErr("", err)
		}
		return nil, err
	}
	return &Model{name: s.Entry.Name, preset: s.Preset, desc: s.Variant.Describe(), config: s.Config, seed: seed, graph: g}, nil
}

func checkLoadOptions(opts LoadOptions) error {
	if opts.Threads < 0 {
		return inputErrf(optThreads, "%s must not be negative, got %d", optThreads, opts.Threads)
	}
	if p := opts.Precision; p != "" && !slices.Contains(precisions, p) {
		return inputErrf(optPrecision, "%s %q: want %s", optPrecision, p, strings.Join(precisions, " or "))
	}
	return nil
}

// Name is the model's name in reports: "vanilla", "vanilla.tiny", or the .onnx file's path.
func (m *Model) Name() string {
	if m.preset != "" {
		return m.name + "." + m.preset
	}
	return m.name
}

// Variant is the registry entry's name ("vanilla"), or the .onnx file's path.
func (m *Model) Variant() string { return m.name }

// Preset is the preset in force ("" for none or an .onnx file).
func (m *Model) Preset() string { return m.preset }

// Description is the variant's description (an .onnx file's is its path and "ONNX file").
func (m *Model) Description() variant.Description { return m.desc }

// Config is the complete resolved config (an .onnx file's: max_len where its metadata has it).
func (m *Model) Config() variant.Config { return m.config }

// Seed is the seed of the variant's initial weights.
func (m *Model) Seed() uint64 { return m.seed }

// Graph is the model's graph with its weights. Callers must not change it once the model has
// compiled.
func (m *Model) Graph() *graph.Graph { return m.graph }

// FromFile reports whether the model was imported from an .onnx file.
func (m *Model) FromFile() bool { return m.fromFile }

// Options are the options the model was loaded with.
func (m *Model) Options() LoadOptions { return m.opts }

// MaxLen is the model's maximum sequence length where its config says it (the variant's
// max_len hyperparameter, or a zoo-exported file's metadata), else 0.
func (m *Model) MaxLen() int {
	if p := m.desc.Caps.MaxLenParam; p != "" {
		return m.config.Int(p)
	}
	return 0
}

// TensorInfo names one input or output of a model.
type TensorInfo struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape string `json:"shape"`
	// Role is what an Encoder feeds an input ("ids", "mask", "padding", "types",
	// "positions"); "" for outputs and for inputs of a model that does not take text.
	Role string `json:"role,omitempty"`
}

// Info describes a loaded model.
type Info struct {
	Name       string        `json:"name"`
	Parameters int64         `json:"parameters"`
	MaxLen     int           `json:"max_len,omitempty"`
	Vocab      int           `json:"vocab,omitempty"`
	Inputs     []TensorInfo  `json:"inputs"`
	Outputs    []TensorInfo  `json:"outputs"`
	Tokenizer  string        `json:"tokenizer"`
	Weights    WeightsSource `json:"weights"`
}

// Info describes the model: name, parameter count, maximum length (its config's, else its
// position table's rows), vocabulary rows, inputs with the roles an Encoder feeds them,
// outputs, tokenizer and where its weights come from. A tokenizer that cannot be loaded is
// described by its error.
func (m *Model) Info() Info {
	in := Info{Name: m.Name(), Parameters: m.graph.ParamCount(), MaxLen: m.MaxLen(), Weights: m.Weights()}
	plan, planErr := PlanFeeds(m.graph, nil)
	if planErr == nil {
		in.Vocab = plan.VocabRows
		if in.MaxLen == 0 {
			in.MaxLen = plan.MaxLen
		}
	}
	for _, v := range m.graph.Inputs {
		ti := TensorInfo{Name: v.Name, DType: v.DType.String(), Shape: v.Shape.String()}
		if planErr == nil {
			for _, f := range plan.Feeds {
				if f.Name == v.Name {
					ti.Role = string(f.Role)
				}
			}
		}
		in.Inputs = append(in.Inputs, ti)
	}
	for _, v := range m.graph.Outputs {
		in.Outputs = append(in.Outputs, TensorInfo{Name: v.Name, DType: v.DType.String(), Shape: v.Shape.String()})
	}
	if t, err := m.Tokenizer(); err != nil {
		in.Tokenizer = err.Error()
	} else {
		in.Tokenizer = t.Describe()
	}
	return in
}

// Tokenizer returns the model's tokenizer: LoadOptions.Tokenizer's, else for an .onnx file the
// one next to it, else zoo's byte tokenizer. A tokenizer file that cannot be used is an
// *InputError naming it.
func (m *Model) Tokenizer() (*Tokenizer, error) {
	m.tokOnce.Do(func() {
		m.tok, m.tokErr = ChooseTokenizer(m.opts.Tokenizer, m.name, m.fromFile)
	})
	return m.tok, m.tokErr
}

// SelectBackend chooses the backend the model compiles on (LoadOptions.Backend, else as
// backends.Select does). A backend that is unknown or unavailable is an *InputError.
func (m *Model) SelectBackend() (backends.Choice, error) {
	choice, err := backends.Select(m.opts.Backend)
	if err != nil {
		return backends.Choice{}, inputErr(optBackend, err)
	}
	return choice, nil
}

// CheckPrecision refuses a precision the chosen backend has no path for on this machine: bf16
// where its probe names no bf16 path (an *InputError carrying the probe's reason), int8 where
// it names no int8 path (an *InputError naming the CPU backend's int8 path instead).
func CheckPrecision(ch backends.Choice, p string) error {
	if backends.Int8Precision(p) && ch.Probe.Int8 == "" {
		cpu := "the cpu backend"
		if b, ok := backends.Lookup("cpu"); ok && b.Probe().Int8 != "" {
			cpu += " (its int8 path here: " + b.Probe().Int8 + ")"
		}
		return inputErrf(optPrecision, "%s %s: backend %s has no int8 path; int8 runs on %s: set %s cpu", optPrecision, p, ch.Backend.Name(), cpu, optBackend)
	}
	if p != "bf16" || ch.Probe.BF16 != "" {
		return nil
	}
	why := ch.Probe.BF16Reason
	if why == "" {
		why = "its probe names no bf16 path"
	}
	return inputErrf(optPrecision, "%s bf16: backend %s has no bf16 path on this machine: %s", optPrecision, ch.Backend.Name(), why)
}

// CompileWith compiles the model's graph on the chosen backend (SelectBackend) with opts,
// whose Precision and Threads default to LoadOptions'. The caller owns the program and closes
// it. A failed compile is returned wrapped with the model's and backend's names.
func (m *Model) CompileWith(opts backends.Options) (backends.Choice, backends.Program, error) {
	if opts.Precision == "" {
		opts.Precision = m.opts.Precision
	}
	if opts.Threads == 0 {
		opts.Threads = m.opts.Threads
	}
	if err := checkPrecisionValue(opts.Precision); err != nil {
		return backends.Choice{}, nil, err
	}
	choice, err := m.SelectBackend()
	if err != nil {
		return backends.Choice{}, nil, err
	}
	if err := CheckPrecision(choice, opts.Precision); err != nil {
		return backends.Choice{}, nil, err
	}
	prog, err := choice.Backend.Compile(m.graph, opts)
	if err != nil {
		return backends.Choice{}, nil, fmt.Errorf("compile %s on %s: %w", m.Name(), choice.Backend.Name(), err)
	}
	return choice, prog, nil
}

func checkPrecisionValue(p string) error {
	if p != "" && !slices.Contains(append(precisions, "tf32"), p) {
		return inputErrf(optPrecision, "%s %q: want %s", optPrecision, p, strings.Join(precisions, " or "))
	}
	return nil
}

// Compile compiles the model for Run and its encoders, once, with LoadOptions' backend,
// precision and threads, and returns the backend chosen (with its probe and why it was
// chosen). Later calls return the same choice. Errors are CompileWith's; a closed model's is
// an error too.
func (m *Model) Compile(ctx context.Context) (backends.Choice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.compileLocked(ctx)
}

func (m *Model) compileLocked(ctx context.Context) (backends.Choice, error) {
	if m.closed {
		return backends.Choice{}, fmt.Errorf("model %s is closed", m.Name())
	}
	if m.prog != nil {
		return m.choice, nil
	}
	if err := ctx.Err(); err != nil {
		return backends.Choice{}, err
	}
	choice, prog, err := m.CompileWith(backends.Options{})
	if err != nil {
		return backends.Choice{}, err
	}
	m.choice, m.prog = choice, prog
	return choice, nil
}

// Program returns the model's compiled program, compiling it first (Compile). It is for
// callers that need the backend's optional interfaces (backends.CompileReporter, Profiler);
// the model keeps owning it.
func (m *Model) Program(ctx context.Context) (backends.Program, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.compileLocked(ctx); err != nil {
		return nil, err
	}
	return m.prog, nil
}

// Run runs the model once on arrays keyed by input name (each of its input's dtype and rank;
// see BindArrays to convert and check arrays read from files) and returns every output by
// name. A missing or extra input is an *InputError; ctx stops a long run. Float outputs come
// back as float32: a model's float16 or bfloat16 outputs are widened (exactly).
func (m *Model) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	for _, in := range m.graph.Inputs {
		if inputs[in.Name] == nil {
			return nil, inputErrf("", "model %s: input %s %s %s is missing (inputs: %s)", m.Name(), in.Name, in.DType, in.Shape, inputList(m.graph))
		}
	}
	if len(inputs) != len(m.graph.Inputs) {
		for _, name := range slices.Sorted(maps.Keys(inputs)) {
			if !hasInput(m.graph, name) {
				return nil, inputErrf("", "model %s has no input %q (inputs: %s)", m.Name(), name, inputList(m.graph))
			}
		}
	}
	return m.run(ctx, inputs)
}

// run runs the compiled program (compiling it first), one call at a time.
func (m *Model) run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	choice, err := m.compileLocked(ctx)
	if err != nil {
		return nil, err
	}
	outs, err := m.prog.Run(ctx, inputs)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err)
	}
	for name, t := range outs {
		// An imported file's 16-bit float outputs keep their type in the program (onnx/dtype.go);
		// everything above the program reads floats as float32.
		if t != nil && t.DType.IsFloat() && t.DType != tensor.Float32 {
			outs[name], _ = tensor.ToFloat32(t)
		}
	}
	return outs, nil
}

// Close releases the compiled program; the model cannot run afterwards. It is safe to call
// more than once.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.prog == nil {
		return nil
	}
	err := m.prog.Close()
	m.prog = nil
	return err
}

// importONNX imports an ONNX file (written by zoo, PyTorch or anything else) as a model.
func importONNX(path string) (*Model, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, inputErrf("", "model %s: %w", path, errors.Unwrap(err))
	case st.IsDir():
		return nil, inputErrf("", "model %s is a directory; give an .onnx file", path)
	}
	g, err := onnx.ImportFile(path)
	if err != nil {
		return nil, inputErrf("", "model %s: %w", path, err)
	}
	m := &Model{name: path, desc: variant.Description{Name: path, Summary: "ONNX file"}, config: variant.Config{}, graph: g, fromFile: true}
	if v := MetaMaxLen(g); v > 0 {
		m.config["max_len"] = int64(v)
		m.desc.Caps.MaxLenParam = "max_len"
	}
	return m, nil
}
