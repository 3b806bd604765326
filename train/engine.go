package train

import (
	"context"
	"errors"
	"fmt"
	"slices"

	zoo "github.com/zoo-dev/zoo"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// graphEngine trains on a backend: the step program computes the loss and every parameter's
// gradient (the model graph extended by autodiff.WithCrossEntropy and autodiff.Gradients),
// the eval program the logits of the forward graph. In both the parameters are graph inputs
// fed from the flat parameter buffer, so each step sees the optimizer's update without a
// recompile.
type graphEngine struct {
	step_, eval_ backends.Program
	layout       *optim.Layout
	gradNames    []string
	tokName      string
	maskName     string
	vocab        int
	batch        int
	train, held  *lmdata.Loader
	release      []func() // releases the loaders' files
	feed         map[string]*tensor.Tensor
	smoothing    float64
	// model is the training build (its dropout inputs and rate); seed draws the masks.
	model *graph.Graph
	seed  uint64
	// stepGraph is the graph the step program was compiled from, and stepShapes the shapes
	// of its run-time inputs at batch b × window n (what zoo profile --train prices it at).
	stepGraph  *graph.Graph
	stepShapes func(b, n int) map[string][]int
}

// withoutDropoutInputs returns g's view without its dropout inputs, for finding the token
// inputs of a training build.
func withoutDropoutInputs(g *graph.Graph) *graph.Graph {
	out := *g
	out.Inputs = nil
	for _, in := range g.Inputs {
		if !variant.IsDropoutInput(in.Name) {
			out.Inputs = append(out.Inputs, in)
		}
	}
	return &out
}

// liftKeeping returns g with the named parameters as graph inputs (autodiff.LiftParams)
// and only the outputs named keep, so that a backend neither computes nor returns the rest.
func liftKeeping(g *graph.Graph, params []string, keep []string) (*graph.Graph, error) {
	out, err := autodiff.LiftParams(g, params)
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for _, k := range keep {
		wanted[k] = true
	}
	outs := out.Outputs
	out.Outputs = nil
	for _, o := range outs {
		if wanted[o.Name] {
			out.Outputs = append(out.Outputs, o)
		}
	}
	return out, nil
}

// newGraphEngine builds and compiles the step (and, with held-out data, the eval) program of
// m, whose parameters live in params (layout), for batches of cfg.Batch windows of window
// tokens. The eval program is infer's (the inference build of the same config).
// With cfg.CheckpointActivations, the backward pass recomputes each layer's activations from
// the layer's input instead of keeping them (autodiff.Checkpoint): the same numbers, less
// memory.
func newGraphEngine(ctx context.Context, m, infer *zoo.Model, cfg Config, window int, data Data, choice backends.Choice,
	layout *optim.Layout, params []float32) (_ *graphEngine, err error) {
	tokName, maskName, err := zoo.TokenInputs(withoutDropoutInputs(m.Graph()))
	if err != nil {
		return nil, inputErr("", err)
	}
	vocab := 0
	for _, o := range m.Graph().Outputs {
		if o.Name == variant.OutputLogits && len(o.Shape) == 3 && o.Shape[2].Known() {
			vocab = int(o.Shape[2].Size)
		}
	}
	if vocab == 0 {
		return nil, inputErrf("", "%s has no (batch, seq, vocab) logits output to train", m.Name())
	}
	obj := lmdata.Objective(cfg.Objective)
	e := &graphEngine{layout: layout, tokName: tokName, maskName: maskName, vocab: vocab, batch: cfg.Batch,
		feed: map[string]*tensor.Tensor{}, smoothing: cfg.LabelSmoothing, model: m.Graph(), seed: cfg.Seed}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	var release func()
	if e.train, release, err = data.Train.loader(window, lmdata.ByteOptions(obj, cfg.Batch, cfg.Seed), cfg.Shuffle); err != nil {
		return nil, err
	}
	e.release = append(e.release, release)
	if data.HasHeld() {
		if e.held, release, err = data.Held.loader(window, lmdata.ByteOptions(obj, cfg.Batch, cfg.Seed), false); err != nil {
			e.close()
			return nil, err
		}
		e.release = append(e.release, release)
	}

	lossG, err := autodiff.WithCrossEntropy(m.Graph(), autodiff.LossOptions{LabelSmoothing: float32(cfg.LabelSmoothing), IgnoreIndex: lmdata.IgnoreIndex})
	if err != nil {
		return nil, err
	}
	trainG, grads, err := autodiff.Gradients(ctx, lossG, autodiff.OutputLoss, layout.Names)
	if err != nil {
		return nil, err
	}
	if cfg.CheckpointActivations {
		if trainG, err = autodiff.Checkpoint(trainG, len(lossG.Nodes), autodiff.LayerSegment); err != nil {
			return nil, err
		}
	}
	// The step keeps the forward activations for the backward pass; the guard counts both.
	shapes := func(b, n int) map[string][]int {
		s := zoo.TokenShapes(tokName, maskName)(b, n)
		s[autodiff.InputTargets] = []int{b, n}
		for _, in := range m.Graph().Inputs {
			if variant.IsDropoutInput(in.Name) && len(in.Shape) == 3 {
				s[in.Name] = []int{b, n, int(in.Shape[2].Size)}
			}
		}
		return s
	}
	keep := []string{autodiff.OutputLoss}
	for _, p := range layout.Names {
		e.gradNames = append(e.gradNames, grads[p])
		keep = append(keep, grads[p])
	}
	opts := backends.Options{Threads: cfg.Threads, Precision: cfg.Precision}
	stepG, err := liftKeeping(trainG, layout.Names, keep)
	if err != nil {
		return nil, err
	}
	e.stepGraph = stepG
	e.stepShapes = func(b, n int) map[string][]int {
		s := shapes(b, n)
		for _, in := range stepG.Inputs { // the lifted parameters, whose shapes are static
			if _, ok := s[in.Name]; ok {
				continue
			}
			dims := make([]int, len(in.Shape))
			for i, d := range in.Shape {
				dims[i] = int(d.Size)
			}
			if !slices.ContainsFunc(in.Shape, func(d graph.Dim) bool { return !d.Known() }) {
				s[in.Name] = dims
			}
		}
		return s
	}
	if e.step_, err = choice.Backend.Compile(stepG, opts); err != nil {
		return nil, fmt.Errorf("compile the training step of %s on %s: %w", m.Name(), choice.Backend.Name(), err)
	}
	// The guard counts the step as compiled where the backend can: the CPU's fused
	// attention keeps no n×n probabilities for the backward pass, which the graph's own
	// count charges to every layer. Compiling allocates little (the weights are inputs).
	r := zoo.MemoryRun{Batch: cfg.Batch, N: window, Shapes: shapes, BatchOption: optBatch, NOption: optWindow}
	guarded := trainG
	if est, ok := e.step_.(backends.ActivationEstimator); ok {
		guarded, r.Shapes, r.Estimator, r.Weights = stepG, e.stepShapes, est, layout.Names
	}
	if err := zoo.GuardMemory("the training step of "+m.Name(), guarded, r); err != nil {
		e.close()
		return nil, err
	}
	if e.held != nil {
		evalG, err := liftKeeping(infer.Graph(), layout.Names, []string{variant.OutputLogits})
		if err != nil {
			e.close()
			return nil, err
		}
		if e.eval_, err = choice.Backend.Compile(evalG, opts); err != nil {
			e.close()
			return nil, fmt.Errorf("compile the evaluation of %s on %s: %w", m.Name(), choice.Backend.Name(), err)
		}
	}
	for i, t := range layout.Tensors(params) {
		e.feed[layout.Names[i]] = t
	}
	return e, nil
}

func (e *graphEngine) close() {
	for _, r := range e.release {
		r()
	}
	e.release = nil
	if e.step_ != nil {
		e.step_.Close()
		e.step_ = nil
	}
	if e.eval_ != nil {
		e.eval_.Close()
		e.eval_ = nil
	}
}

// inputs sets the batch's token and mask tensors in the feed.
func (e *graphEngine) inputs(b *lmdata.Batch) {
	tokens, mask := b.Tensors()
	e.feed[e.tokName] = tokens
	if e.maskName != "" {
		e.feed[e.maskName] = mask
	}
}

// feedStep puts step k's batch (tokens, mask, targets and dropout masks) into the feed and
// returns it with the function that takes the step's inputs out again.
func (e *graphEngine) feedStep(k int) (*lmdata.Batch, func(), error) {
	b, err := e.train.Step(k)
	if err != nil {
		return nil, nil, err
	}
	e.inputs(b)
	e.feed[autodiff.InputTargets] = &tensor.Tensor{DType: tensor.Int64, Shape: []int{b.B, b.N}, I64: b.Targets}
	drops, err := lmdata.DropoutFeeds(e.model, e.seed, k, b.B, b.N)
	if err != nil {
		delete(e.feed, autodiff.InputTargets)
		return nil, nil, err
	}
	for name, t := range drops {
		e.feed[name] = t
	}
	return b, func() {
		delete(e.feed, autodiff.InputTargets)
		for name := range drops {
			delete(e.feed, name)
		}
	}, nil
}

func (e *graphEngine) step(ctx context.Context, k int, params, grads []float32) (float64, int, error) {
	b, done, err := e.feedStep(k)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	outs, err := e.step_.Run(ctx, e.feed)
	if err != nil {
		return 0, 0, err
	}
	gs := make([]*tensor.Tensor, len(e.gradNames))
	for i, n := range e.gradNames {
		gs[i] = outs[n]
	}
	if err := e.layout.Scatter(grads, gs); err != nil {
		return 0, 0, fmt.Errorf("gradients: %w", err)
	}
	loss := outs[autodiff.OutputLoss]
	if loss == nil || len(loss.F32) != 1 {
		return 0, 0, errors.New("the step program returned no scalar loss")
	}
	tokens := 0
	for _, l := range b.Lengths {
		tokens += l
	}
	return float64(loss.F32[0]), tokens, nil
}

func (e *graphEngine) eval(ctx context.Context, params []float32) (float64, float64, error) {
	if e.eval_ == nil {
		return 0, 0, errors.New("no evaluation file")
	}
	var s lmdata.Score
	for first := 0; ; first += e.batch {
		b, err := e.held.Sequential(first, e.batch)
		if err != nil {
			return 0, 0, err
		}
		if b == nil {
			break
		}
		e.inputs(b)
		outs, err := e.eval_.Run(ctx, e.feed)
		if err != nil {
			return 0, 0, err
		}
		logits := outs[variant.OutputLogits]
		if logits == nil {
			return 0, 0, errors.New("the evaluation program returned no logits")
		}
		if err := s.Add(logits.F32, e.vocab, b.Targets, b.TargetBytes); err != nil {
			return 0, 0, err
		}
	}
	return s.MeanLoss(), s.BitsPerByte(), nil
}

// StepProgram is a Trainer's compiled training step with the inputs of one step's batch, for
// profiling it (zoo profile --train).
type StepProgram struct {
	// Program is the compiled step; the Trainer owns it (Close closes it).
	Program backends.Program
	// Graph is the graph Program was compiled from: the model's, extended by the loss and
	// every parameter's gradient, with the parameters lifted to inputs.
	Graph *graph.Graph
	// Inputs are the step's inputs: the batch's tokens, mask, targets and dropout masks, and
	// the parameters (aliasing the Trainer's buffer).
	Inputs map[string]*tensor.Tensor
	// Batch and N are the batch's windows and tokens per window; Shapes every input's shape
	// at them.
	Batch, N int
	Shapes   map[string][]int
}

// StepProgram returns the compiled training step with the inputs of step k's batch (k is
// 1-based). Running it computes the loss and gradients and changes nothing.
func (t *Trainer) StepProgram(k int) (StepProgram, error) {
	e := t.graph
	if e == nil || e.step_ == nil {
		return StepProgram{}, errors.New("the trainer is closed")
	}
	b, done, err := e.feedStep(k)
	if err != nil {
		return StepProgram{}, fmt.Errorf("the batch of step %d of %s: %w", k, t.m.Name(), err)
	}
	defer done()
	inputs := make(map[string]*tensor.Tensor, len(e.feed))
	for name, v := range e.feed {
		inputs[name] = v
	}
	return StepProgram{Program: e.step_, Graph: e.stepGraph, Inputs: inputs, Batch: b.B, N: b.N, Shapes: e.stepShapes(b.B, b.N)}, nil
}
