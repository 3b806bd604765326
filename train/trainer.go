package train

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	zoo "github.com/zoo-dev/zoo"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Trainer trains one model: its step program (the forward pass, the loss and every
// parameter's gradient) compiled on the model's backend, the optimizer over one flat
// parameter buffer, and, with held-out data, the evaluation program. It is not safe for
// concurrent use. Close releases it.
type Trainer struct {
	m     *zoo.Model
	infer *zoo.Model // the inference build, for evaluation (nil without held-out data)
	cfg   Config
	data  Data

	choice  backends.Choice
	threads int
	window  int
	graph   *graphEngine
	eng     trainEngine
	opt     *optim.Optimizer
	par     optim.ParallelFor
	// params is the flat parameter buffer; the graph's parameter tensors alias it. grads
	// has its layout.
	params, grads []float32
	// state lists the state_dict in graph order, parameters aliasing params.
	state []tensorio.Named
	// meta and optMeta are the metadata of the checkpoint's two files.
	meta, optMeta map[string]string

	// removed names the temporary files of killed saves that New removed.
	removed []string

	hooks     []func(Step) error
	step      int // the last step finished
	lastSaved int // the step of the last checkpoint written, -1 for none
}

// New prepares m for training on data with cfg: it checks cfg (Validate) and the data, loads
// Config.Resume's checkpoint (its weights, optimizer state and step) when set, lays m's
// parameters out in one buffer that the trainer owns from now on (m.Graph() shows the
// trained values), selects m's backend (LoadOptions.Backend) and compiles the step and, with
// held-out data, an inference build of m for evaluation, within the memory guard. Load m
// with Load (zoo.Load with LoadOptions.Training and, for CLM, causal on); m must not run
// while the trainer does. It removes the temporary files that saves to Config.Output left
// when they were killed mid-write (Removed). Errors the caller can fix are *zoo.InputError,
// naming the option (Config.Batch, Data.Train).
func New(ctx context.Context, m *zoo.Model, data Data, cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	data.Train, data.Held = data.Train.named(optTrain), data.Held.named(optHeld)
	if !data.Train.set() {
		return nil, inputErrf(optTrain, "%s is required (the text to train on)", optTrain)
	}
	for _, src := range []TextSource{data.Train, data.Held} {
		if src.set() {
			if err := src.Check(); err != nil {
				return nil, err
			}
		}
	}
	if cfg.EvalEvery > 0 && !data.HasHeld() {
		return nil, inputErrf(optEvalEvery, "%s needs %s (held-out text to evaluate)", optEvalEvery, optHeld)
	}
	if m.FromFile() {
		return nil, inputErrf("", "%s is an ONNX file; training builds a variant of the registry, whose parameters it knows by name", m.Name())
	}
	if cfg.Objective == CLM && !causal(m) {
		return nil, inputErrf(optObjective, "%s clm needs %s built with causal=true (Load turns it on)", optObjective, m.Name())
	}
	var ck *Checkpoint
	if cfg.Resume != "" {
		var err error
		if ck, err = ReadCheckpoint(cfg.Resume); err != nil {
			return nil, err
		}
		if err := ck.checkModel(m); err != nil {
			return nil, err
		}
		if _, err := ck.Continue(cfg, nil); err != nil {
			return nil, err
		}
		if cfg.Window == 0 {
			cfg.Window = ck.Config.Window // the window the run chose, not this model's default
		}
		if cfg.Cycles == nil {
			cfg.Cycles = ck.Config.extended(cfg.Steps).Cycles // ExtendRule
		}
	}
	t := &Trainer{m: m, cfg: cfg, data: data, lastSaved: -1}
	if cfg.Output != "" {
		// A save that was killed leaves its temporary files; nothing else removes them.
		removed, err := optim.RemoveStaleTemps(cfg.Output)
		t.removed = removed
		if err != nil {
			return nil, inputErrf(optOutput, "%s %s: remove the temporary files of an interrupted save: %w", optOutput, cfg.Output, err)
		}
	}
	if err := t.prepare(ctx, ck); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// prepare does New's work once the inputs are checked.
func (t *Trainer) prepare(ctx context.Context, ck *Checkpoint) error {
	m, cfg := t.m, t.cfg
	if t.data.HasHeld() {
		opts := m.Options()
		opts.Training, opts.Weights = false, ""
		infer, err := zoo.Load(ctx, m.Name(), opts)
		if err != nil {
			return err
		}
		t.infer = infer
	}
	layout, err := trainableLayout(m.Graph())
	if err != nil {
		return inputErrf("", "train %s: %w", m.Name(), err)
	}
	t.par = parallelFor(cfg.Threads)
	if t.opt, err = optim.New(cfg.hyper(), layout, t.par); err != nil {
		return inputErr("", err)
	}
	weights := m.Options().Weights
	if ck != nil {
		list, _, _, err := optim.LoadCheckpoint(ck.Path, t.opt)
		if err != nil {
			return inputErrf(optResume, "%s: %w", optResume, err)
		}
		tensors := make(map[string]*tensor.Tensor, len(list))
		for _, nt := range list {
			tensors[nt.Name] = nt.Tensor
		}
		if err := m.LoadStateDict(tensors, optResume+" "+ck.Path); err != nil {
			return err
		}
		t.step = ck.Step
		if filepath.Clean(ck.Path) == filepath.Clean(cfg.Output) {
			t.lastSaved = ck.Step
		}
		if weights == "" {
			weights = ck.Weights
		}
	}
	if t.infer != nil {
		// The evaluation build gets the same state: buffers loaded from weights or the
		// checkpoint too (its parameters are fed from the training buffer).
		if err := graph.LoadStateDict(t.infer.Graph(), m.Graph().StateDict()); err != nil {
			return fmt.Errorf("the evaluation build of %s differs from the training build: %w", m.Name(), err)
		}
	}
	if t.window, err = zoo.ChooseWindow(m.Name(), m.MaxLen(), &zoo.FeedPlan{}, cfg.Window); err != nil {
		return renamed(err, optEncWindow, optWindow)
	}
	if t.params, t.state, err = flattenParams(m.Graph(), layout); err != nil {
		return err
	}
	t.grads = make([]float32, layout.Size())
	if t.choice, err = m.SelectBackend(); err != nil {
		return err
	}
	if err := zoo.CheckPrecision(t.choice, cfg.Precision); err != nil {
		return err
	}
	if t.graph, err = newGraphEngine(ctx, m, t.infer, cfg, t.window, t.data, t.choice, layout, t.params); err != nil {
		return err
	}
	t.eng = t.graph
	t.threads = t.choice.Probe.Threads
	if cfg.Threads > 0 && cfg.Threads < t.threads {
		t.threads = cfg.Threads
	}
	recCfg := cfg
	recCfg.Window = t.window // the window chosen, which evaluations of the checkpoint take
	rec := newRecord(m.Name(), m.Options().Set, weights, t.data, recCfg)
	t.meta, t.optMeta, err = checkpointMeta(rec, m.Name(), m.Config().JSON(), m.Seed())
	return err
}

// OnStep adds a hook that Run calls after every step and every evaluation, in the order
// added. A hook's error ends Run, which returns it as it is.
func (t *Trainer) OnStep(hook func(Step) error) { t.hooks = append(t.hooks, hook) }

// Removed names the temporary files that earlier saves to Config.Output left when they were
// killed mid-write, which New removed.
func (t *Trainer) Removed() []string { return t.removed }

// Model is the model being trained (its graph's parameters are the trainer's buffer).
func (t *Trainer) Model() *zoo.Model { return t.m }

// Config is the Config the trainer runs with.
func (t *Trainer) Config() Config { return t.cfg }

// Backend is the backend the programs compiled on, with its probe.
func (t *Trainer) Backend() backends.Choice { return t.choice }

// Threads is the number of worker threads the run uses.
func (t *Trainer) Threads() int { return t.threads }

// Window is the number of tokens per window (Config.Window, or the default it chose).
func (t *Trainer) Window() int { return t.window }

// Parameters is the number of trained parameters (the values in the parameter buffer).
func (t *Trainer) Parameters() int { return len(t.params) }

// Step is the number of steps taken: 0 for a fresh run, the checkpoint's step for a resumed
// one, the last finished step after Run.
func (t *Trainer) Step() int { return t.step }

// Evaluate returns the held-out loss and bits per byte at the current parameters, as an
// evaluation Step after the trainer's step. Without Data.Held it is an *zoo.InputError.
func (t *Trainer) Evaluate(ctx context.Context) (Step, error) {
	if !t.data.HasHeld() {
		return Step{}, inputErrf(optHeld, "%s is not set: nothing to evaluate", optHeld)
	}
	if t.eng == nil {
		return Step{}, errors.New("the trainer is closed")
	}
	loss, bpb, err := t.eng.eval(ctx, t.params)
	if err != nil {
		return Step{}, err
	}
	return Step{Step: t.step, Eval: true, EvalLoss: loss, EvalBitsPerByte: bpb}, nil
}

// Save writes the checkpoint of the trainer's step to Config.Output (FILE.safetensors, and
// the optimizer state beside it), as Run does. Without Config.Output it is an
// *zoo.InputError.
func (t *Trainer) Save() error {
	if t.cfg.Output == "" {
		return inputErrf(optOutput, "%s is not set: nowhere to save", optOutput)
	}
	return t.save(t.step)
}

// save writes the checkpoint of the state after step k, when the run has Config.Output.
func (t *Trainer) save(k int) error {
	if t.cfg.Output == "" {
		return nil
	}
	if err := optim.SaveCheckpoint(t.cfg.Output, optim.StateDict(t.state), t.meta, t.opt, t.optMeta); err != nil {
		return err
	}
	t.lastSaved = k
	return nil
}

// Trained returns an inference build of the model (without dropout inputs) that holds the
// trained parameters and buffers, ready to run, benchmark or export. The caller owns it
// (Close it); it does not change as the trainer trains further.
func (t *Trainer) Trained(ctx context.Context) (*zoo.Model, error) {
	m := t.infer
	t.infer = nil
	if m == nil {
		opts := t.m.Options()
		opts.Training, opts.Weights = false, ""
		var err error
		if m, err = zoo.Load(ctx, t.m.Name(), opts); err != nil {
			return nil, err
		}
	}
	if err := graph.LoadStateDict(m.Graph(), t.m.Graph().StateDict()); err != nil {
		m.Close()
		return nil, fmt.Errorf("the trained weights of %s do not fit its inference build: %w", t.m.Name(), err)
	}
	return m, nil
}

// Close releases the compiled programs and the evaluation build. The trained model stays
// usable; the trainer does not. It is safe to call more than once.
func (t *Trainer) Close() error {
	if t.graph != nil {
		t.graph.close()
	}
	t.eng = nil
	if t.infer != nil {
		t.infer.Close()
		t.infer = nil
	}
	return nil
}

// trainableLayout lays out g's learned parameters (float initializers that are neither
// buffers nor builder constants) in graph order.
func trainableLayout(g *graph.Graph) (*optim.Layout, error) {
	var names []string
	var shapes [][]int
	for _, in := range g.Initializers {
		if in.Buffer || graph.IsConstName(in.Name) || in.Tensor.DType != tensor.Float32 {
			continue
		}
		names = append(names, in.Name)
		shapes = append(shapes, in.Tensor.Shape)
	}
	if len(names) == 0 {
		return nil, errors.New("the model has no learned parameters")
	}
	return optim.NewLayout(names, shapes)
}

// flattenParams moves g's parameters into one flat buffer: the graph's initializers are
// replaced by tensors aliasing it, so the state_dict written at a checkpoint is the trained
// one without copies. It returns the buffer and the state_dict in graph order.
func flattenParams(g *graph.Graph, layout *optim.Layout) ([]float32, []tensorio.Named, error) {
	buf, err := layout.Gather(g.Initializer)
	if err != nil {
		return nil, nil, err
	}
	views := layout.Tensors(buf)
	var state []tensorio.Named
	for i := range g.Initializers {
		in := &g.Initializers[i]
		if graph.IsConstName(in.Name) {
			continue
		}
		if j := layout.Index(in.Name); j >= 0 {
			in.Tensor = views[j]
		}
		state = append(state, tensorio.Named{Name: in.Name, Tensor: in.Tensor})
	}
	return buf, state, nil
}

// parallelFor is the optimizer's loop on the CPU worker pool with the run's thread count.
func parallelFor(threads int) optim.ParallelFor { return optim.ParallelFor(cpu.ParallelFor(threads)) }
