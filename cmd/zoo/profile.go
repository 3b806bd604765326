package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/profile"
	"github.com/zoo-dev/zoo/zoo/optim"
)

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "time every op type and node of one run (ms, % of the run, GFLOP/s, bytes moved) and write a Chrome trace",
		ArgsUsage: "NAME[.PRESET]|FILE.onnx",
		Description: "Runs the model on a batch of --batch × --seq tokens of the sample text (ids wrapped to the model's\n" +
			"vocabulary, no padding): --warmup untimed runs, then --reps profiled runs in which the backend reads the clock\n" +
			"around every step. Times are means per run. A step is a graph node or a fused kernel of the backend, which\n" +
			"does the work of several nodes: it is listed under its own name (FusedAttention, FusedLinear, ...) with the\n" +
			"ops it replaced in brackets. FLOPs are the op table's cost rules of the nodes a step covers (a multiply-add\n" +
			"counts 2); bytes moved are the op table's bytes of a plain node, and for a fused step the values it reads\n" +
			"(weights included) and writes, its intermediates not counted. \"steps\" says how much of the measured run the steps account for.\n" +
			"--trace writes every profiled run's steps as Chrome trace events (one complete event, \"ph\":\"X\", per step\n" +
			"run; times in µs), which chrome://tracing and https://ui.perfetto.dev open. Backends whose programs cannot\n" +
			"time their steps (cuda) say so.\n" +
			"--train profiles a training step instead: the program zoo train compiles (forward pass, cross-entropy\n" +
			"and every parameter's gradient; mlm, dropout as the build sets it) on --batch windows of --seq tokens of the\n" +
			"sample text repeated. The optimizer's update runs outside that program and is not listed." +
			examples("zoo profile linformer --seq 512 --trace trace.json", "zoo profile model.onnx --batch 4 --json",
				"zoo profile vanilla --train --batch 8 --seq 128 --threads 2 --reps 2"),
		Flags: append(modelFlags(),
			&cli.IntFlag{Name: "seq", Value: 128, Usage: "tokens per sequence `N` (at most the model's maximum length)"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "sequences per batch `B`"},
			&cli.StringFlag{Name: "trace", Usage: "write a Chrome trace of the profiled runs to `FILE.json`"},
			&cli.IntFlag{Name: "reps", Aliases: []string{"r"}, Value: 3, Usage: "profiled runs"},
			&cli.IntFlag{Name: "warmup", Value: 1, Usage: "untimed runs before the profiled ones"},
			&cli.IntFlag{Name: "top", Value: 20, Usage: "nodes listed in the table, slowest first (0: every step, in order)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			&cli.BoolFlag{Name: "train", Usage: "profile one training step (loss and gradients, as zoo train runs it) instead of inference"},
			flagCheckpointActivations,
			flagPrecision(), flagFeed, flagBackend, flagJSON,
		),
		Action: profileAction,
	}
}

func profileAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("profile: want one model name (see `zoo list`) or .onnx file, got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	set := profile.Settings{Batch: c.Int("batch"), Seq: c.Int("seq"), Reps: c.Int("reps"), Warmup: c.Int("warmup"), Top: c.Int("top"),
		Threads: c.Int("threads"), Trace: c.String("trace"), JSON: c.Bool(flagJSON.Name)}
	if err := set.Check(); err != nil {
		return badInput(err)
	}
	if set.Trace != "" {
		if err := checkExtension("--trace", set.Trace, ".json"); err != nil {
			return badInput(err)
		}
		if err := checkOutputPath(set.Trace); err != nil {
			return badInputf("--trace: %w", err)
		}
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if c.Bool("train") {
		return profileTrainAction(c)
	}
	if c.Bool(flagCheckpointActivations.Name) {
		return badInputf("--checkpoint-activations changes only a training step; add --train")
	}
	m, err := loadModel(c, ref)
	if err != nil {
		return err
	}
	plan, err := planFeeds(m.Graph, c.StringSlice(flagFeed.Name))
	if err != nil {
		return badInput(err)
	}
	lim := profile.Limits{Batch: plan.Batch, Seq: plan.Seq, TableRows: plan.MaxLen, TableFrom: plan.MaxLenFrom}
	if !m.FromFile {
		lim.MaxLen = m.Config.Int(m.Desc.Caps.MaxLenParam)
	}
	b, n, err := profile.Shape(m.displayName(), lim, set.Batch, set.Seq, c.IsSet("batch"), c.IsSet("seq"))
	if err != nil {
		return badInput(err)
	}
	inputs, err := plan.tensors(profile.FullBatch(b, n, plan.VocabRows), 0)
	if err != nil {
		return failed(fmt.Errorf("feed %s: %w", m.displayName(), err))
	}
	if err := guardMemory(m.displayName(), m.Graph, memRun{batch: b, n: n, shapes: plan.shapes, batchFlag: "--batch", nFlag: "--seq"}); err != nil {
		return err
	}
	choice, prog, err := compileModel(c, m, backends.Options{Threads: set.Threads, Precision: prec})
	if err != nil {
		return err
	}
	defer prog.Close()
	profiler, err := profile.ProfilerOf(prog, choice.Backend.Name())
	if err != nil {
		return badInput(err)
	}
	runs, err := profile.Runs(c.Context, prog, profiler, inputs, set)
	if err != nil {
		return failed(fmt.Errorf("run %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
	}
	rep := profile.Report{Model: m.displayName(), Weights: weightsOf(m), Backend: choice.Backend.Name(), Level: choice.Probe.Level,
		Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec), Batch: b, N: n}
	return failed(profile.Finish(c.App.Writer, &rep, runs, m.Graph, plan.shapes(b, n), prog, set))
}

// profileTrainAction is zoo profile --train (profileAction has checked the flags): it
// prepares a training run as zoo train does (the same build, layout, backend and step
// program) on --batch windows of --seq tokens of the sample text, and profiles the step
// program on step 1's batch. The optimizer is built but never steps, so every profiled run
// sees the initial weights.
func profileTrainAction(c *cli.Context) error {
	ref := c.Args().First()
	set := profile.Settings{Batch: c.Int("batch"), Seq: c.Int("seq"), Reps: c.Int("reps"), Warmup: c.Int("warmup"), Top: c.Int("top"),
		Threads: c.Int("threads"), Trace: c.String("trace"), JSON: c.Bool(flagJSON.Name)}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if isONNXPath(ref) {
		return badInputf("profile --train: %s is an ONNX file; zoo trains its variants (see `zoo list`), whose parameters it knows by name", ref)
	}
	if len(c.StringSlice(flagFeed.Name)) > 0 {
		return badInputf("profile --train: --feed sets inference inputs; a training step is fed windows of the sample text (--batch, --seq)")
	}
	h := optim.DefaultHyper()
	st := trainSettings{Model: ref, Sets: c.StringSlice(flagSet.Name), Seed: c.Uint64(flagSeed.Name), Weights: c.String(flagWeights.Name),
		Objective: objectiveMLM, Steps: 1, Batch: set.Batch, Window: set.Seq,
		Optimizer: h.Optimizer, WeightDecay: h.WeightDecay, Eps: h.Eps, Betas: []float64{h.Beta1, h.Beta2},
		LR: 1e-4, Schedule: optim.Linear, Clip: 1, Precision: prec}
	if p := c.String(flagPreset.Name); p != "" && !strings.Contains(ref, ".") {
		st.Model = ref + "." + p
	}
	// Every window full: the sample text repeated to cover the batch.
	text := bytes.Repeat(zooroot.SampleText, set.Batch*set.Seq/max(1, len(zooroot.SampleText))+1)
	job, err := prepareTraining(c, st, nil, trainData{train: textSource{flag: "the sample text", text: text}})
	if err != nil {
		return err
	}
	defer job.close()
	eng, ok := job.engine.(*graphEngine)
	if !ok {
		return failed(fmt.Errorf("profile --train: the training engine of %s has no compiled step program to profile", job.model.displayName()))
	}
	profiler, err := profile.ProfilerOf(eng.step_, job.choice.Backend.Name())
	if err != nil {
		return badInput(err)
	}
	batch, done, err := eng.feedStep(1)
	if err != nil {
		return failed(fmt.Errorf("the first batch of %s: %w", job.model.displayName(), err))
	}
	defer done()
	runs, err := profile.Runs(c.Context, eng.step_, profiler, eng.feed, set)
	if err != nil {
		return failed(fmt.Errorf("the training step of %s on %s: %w", job.model.displayName(), job.choice.Backend.Name(), err))
	}
	rep := profile.Report{Model: job.model.displayName(), Weights: weightsOf(job.model), Train: true, Backend: job.choice.Backend.Name(),
		Level: job.choice.Probe.Level, Threads: job.choice.Probe.Threads, Precision: reportedPrecision(job.choice.Backend.Name(), prec),
		Batch: batch.B, N: batch.N}
	return failed(profile.Finish(c.App.Writer, &rep, runs, eng.stepGraph, eng.stepShapes(batch.B, batch.N), eng.step_, set))
}
