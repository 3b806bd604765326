package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
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

// newGraphEngine builds and compiles the step (and, with an eval file, the eval) program of
// m, whose parameters live in params (layout).
// With recompute, the backward pass recomputes each layer's activations from the layer's
// input instead of keeping them (autodiff.Checkpoint): the same numbers, less memory.
func newGraphEngine(ctx context.Context, m, infer *zooroot.Model, st trainSettings, data trainData, choice backends.Choice, threads int,
	recompute bool, layout *optim.Layout, params []float32) (*graphEngine, error) {
	tokName, maskName, err := zooroot.TokenInputs(withoutDropoutInputs(m.Graph()))
	if err != nil {
		return nil, badInput(err)
	}
	vocab := 0
	for _, o := range m.Graph().Outputs {
		if o.Name == variant.OutputLogits && len(o.Shape) == 3 && o.Shape[2].Known() {
			vocab = int(o.Shape[2].Size)
		}
	}
	if vocab == 0 {
		return nil, badInputf("%s has no (batch, seq, vocab) logits output to train", m.Name())
	}
	obj, err := lmdata.ParseObjective(st.Objective)
	if err != nil {
		return nil, badInput(err)
	}
	e := &graphEngine{layout: layout, tokName: tokName, maskName: maskName, vocab: vocab, batch: st.Batch,
		feed: map[string]*tensor.Tensor{}, smoothing: st.LabelSmoothing, model: m.Graph(), seed: st.Seed}
	if e.train, err = loaderFor(data.train, st.Window, lmdata.ByteOptions(obj, st.Batch, st.Seed), st.Shuffle); err != nil {
		return nil, err
	}
	if data.hasHeld() {
		if e.held, err = loaderFor(data.held, st.Window, lmdata.ByteOptions(obj, st.Batch, st.Seed), false); err != nil {
			return nil, err
		}
	}

	lossG, err := autodiff.WithCrossEntropy(m.Graph(), autodiff.LossOptions{LabelSmoothing: float32(st.LabelSmoothing), IgnoreIndex: lmdata.IgnoreIndex})
	if err != nil {
		return nil, failed(err)
	}
	trainG, grads, err := autodiff.Gradients(ctx, lossG, autodiff.OutputLoss, layout.Names)
	if err != nil {
		return nil, failed(err)
	}
	if recompute {
		if trainG, err = autodiff.Checkpoint(trainG, len(lossG.Nodes), autodiff.LayerSegment); err != nil {
			return nil, failed(err)
		}
	}
	// The step keeps the forward activations for the backward pass; the guard counts both.
	shapes := func(b, n int) map[string][]int {
		s := zooroot.TokenShapes(tokName, maskName)(b, n)
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
	opts := backends.Options{Threads: threads, Precision: st.Precision}
	stepG, err := liftKeeping(trainG, layout.Names, keep)
	if err != nil {
		return nil, failed(err)
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
		return nil, failed(fmt.Errorf("compile the training step of %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	// The guard counts the step as compiled where the backend can: the CPU's fused
	// attention keeps no n×n probabilities for the backward pass, which the graph's own
	// count charges to every layer. Compiling allocates little (the weights are inputs).
	r := zooroot.MemoryRun{Batch: st.Batch, N: st.Window, Shapes: shapes, BatchOption: "--batch", NOption: "--window"}
	guarded := trainG
	if est, ok := e.step_.(backends.ActivationEstimator); ok {
		guarded, r.Shapes, r.Estimator, r.Weights = stepG, e.stepShapes, est, layout.Names
	}
	if err := zooroot.GuardMemory("the training step of "+m.Name(), guarded, r); err != nil {
		e.close()
		return nil, err
	}
	if e.held != nil {
		evalG, err := liftKeeping(infer.Graph(), layout.Names, []string{variant.OutputLogits})
		if err != nil {
			e.close()
			return nil, failed(err)
		}
		if e.eval_, err = choice.Backend.Compile(evalG, opts); err != nil {
			e.close()
			return nil, failed(fmt.Errorf("compile the evaluation of %s on %s: %w", m.Name(), choice.Backend.Name(), err))
		}
	}
	for i, t := range layout.Tensors(params) {
		e.feed[layout.Names[i]] = t
	}
	return e, nil
}

// textSource is the text a run reads: the bytes [off, off+size) of a file (size < 0: to its
// end), named by the flag that gave it, or text in memory when path is empty (zoo profile
// --train's sample). zoo compare trains on the head of --input and evaluates on its tail
// when no --eval file is given.
type textSource struct {
	flag, path string
	off, size  int64
	text       []byte
}

// wholeFile is the source of all of path's bytes.
func wholeFile(flag, path string) textSource { return textSource{flag: flag, path: path, size: -1} }

// describe names the source in messages: "--input corpus.txt" or "--input corpus.txt
// (bytes 900-999)".
func (s textSource) describe() string {
	if s.path == "" {
		return s.flag
	}
	if s.off == 0 && s.size < 0 {
		return s.flag + " " + s.path
	}
	return fmt.Sprintf("%s %s (bytes %d–%d)", s.flag, s.path, s.off, s.off+s.size-1)
}

// trainData is what a run trains on and, when held.path is set, evaluates on.
type trainData struct {
	train, held textSource
}

func (d trainData) hasHeld() bool { return d.held.path != "" }

// loaderFor cuts a text source into windows and returns a loader over them.
func loaderFor(src textSource, window int, opt lmdata.Options, shuffle bool) (*lmdata.Loader, error) {
	var r io.Reader = bytes.NewReader(src.text)
	if src.path != "" {
		f, err := os.Open(src.path)
		if err != nil {
			return nil, badInputf("%s %s: %w", src.flag, src.path, errors.Unwrap(err))
		}
		defer f.Close()
		r = f
		if src.off > 0 || src.size >= 0 {
			size := src.size
			if size < 0 {
				size = 1<<63 - 1 - src.off
			}
			r = io.NewSectionReader(f, src.off, size)
		}
	}
	windows, err := lmdata.ReadWindows(r, window)
	if err != nil {
		if errors.Is(err, tokenize.ErrEmpty) {
			return nil, badInputf("%s is empty: nothing to train on", src.describe())
		}
		return nil, failed(fmt.Errorf("%s: %w", src.describe(), err))
	}
	opt.Shuffle = shuffle
	l, err := lmdata.NewLoader(windows, opt)
	if err != nil {
		return nil, badInputf("%s: %w", src.describe(), err)
	}
	return l, nil
}

func (e *graphEngine) close() {
	if e.step_ != nil {
		e.step_.Close()
	}
	if e.eval_ != nil {
		e.eval_.Close()
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
		b := e.held.Sequential(first, e.batch)
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

// buildTrainModel resolves and builds the model of a run from its settings (not from the
// flags, which a resumed run may not repeat): the registry entry, the preset, the --set
// values and, for clm, causal on. It returns the training build (variant.WithTraining:
// dropout sites are graph inputs) and, when infer is set, the inference build of the same
// config (for evaluation), both from the run's seed.
func buildTrainModel(ctx context.Context, c flags, st trainSettings, infer bool) (train, inference *zooroot.Model, err error) {
	if zooroot.IsONNXPath(st.Model) {
		return nil, nil, badInputf("train: %s is an ONNX file; zoo trains its variants (see `zoo list`), whose parameters it knows by name", st.Model)
	}
	sets, err := parseSets(st.Sets)
	if err != nil {
		return nil, nil, badInput(err)
	}
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	opts = zooroot.LoadOptions{Set: sets, Seed: st.Seed, Registries: opts.Registries, Plugins: opts.Plugins, Training: true}
	if st.Objective == objectiveCLM {
		opts.Configure = func(desc variant.Description, cfg variant.Config) error {
			if _, ok := desc.Param("causal"); !ok {
				return badInputf("--objective clm: %s has no causal hyperparameter (its attention cannot hide later positions, so every position would see its target); use --objective mlm", desc.Name)
			}
			if v, ok := sets["causal"]; ok && strings.TrimSpace(v) != "true" {
				return badInputf("--objective clm needs causal=true; drop --set causal=%v", v)
			}
			cfg["causal"] = true
			return nil
		}
	}
	if train, err = zooroot.Load(ctx, st.Model, opts); err != nil {
		return nil, nil, err
	}
	if infer {
		opts.Training = false
		if inference, err = zooroot.Load(ctx, st.Model, opts); err != nil {
			return nil, nil, err
		}
	}
	return train, inference, nil
}

// prepareTraining builds the model, loads its initial weights (--weights, or the resumed
// checkpoint with its optimizer state), lays out its parameters, selects the backend
// (--backend) and compiles the step and, when data has a held-out part, the eval program
// (--threads workers).
func prepareTraining(c *cli.Context, st trainSettings, rs *resumeState, data trainData) (*trainJob, error) {
	m, infer, err := buildTrainModel(c.Context, c, st, data.hasHeld())
	if err != nil {
		return nil, err
	}
	if st.Weights != "" && rs == nil {
		if err := m.LoadWeights(st.Weights); err != nil {
			return nil, err
		}
	}
	layout, err := trainableLayout(m.Graph())
	if err != nil {
		return nil, badInputf("train %s: %w", m.Name(), err)
	}
	threads := c.Int("threads")
	par := parallelFor(threads)
	opt, err := optim.New(st.hyper(), layout, par)
	if err != nil {
		return nil, badInput(err)
	}
	if rs != nil {
		list, _, _, err := optim.LoadCheckpoint(rs.path, opt)
		if err != nil {
			return nil, badInputf("--resume: %w", err)
		}
		tensors := make(map[string]*tensor.Tensor, len(list))
		for _, nt := range list {
			tensors[nt.Name] = nt.Tensor
		}
		if err := m.LoadStateDict(tensors, "--resume "+rs.path); err != nil {
			return nil, err
		}
	}
	if infer != nil {
		// The evaluation build gets the same state: buffers loaded with --weights or --resume
		// too (its parameters are fed from the training buffer).
		if err := graph.LoadStateDict(infer.Graph(), m.Graph().StateDict()); err != nil {
			return nil, failed(fmt.Errorf("the evaluation build of %s differs from the training build: %w", m.Name(), err))
		}
	}
	window, err := zooroot.ChooseWindow(m.Name(), m.MaxLen(), &zooroot.FeedPlan{}, st.Window)
	if err != nil {
		return nil, badInput(err)
	}
	st.Window = window
	params, state, err := flattenParams(m.Graph(), layout)
	if err != nil {
		return nil, failed(err)
	}
	choice, err := m.SelectBackend()
	if err != nil {
		return nil, err
	}
	if err := zooroot.CheckPrecision(choice, st.Precision); err != nil {
		return nil, err
	}
	eng, err := newGraphEngine(c.Context, m, infer, st, data, choice, threads, c.Bool(flagCheckpointActivations.Name), layout, params)
	if err != nil {
		return nil, err
	}
	n := choice.Probe.Threads
	if threads > 0 && threads < n {
		n = threads
	}
	return &trainJob{model: m, infer: infer, choice: choice, threads: n, window: window, engine: eng, closer: eng.close, opt: opt, par: par, params: params, state: state}, nil
}
