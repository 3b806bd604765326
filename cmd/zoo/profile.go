package main

import (
	"bytes"
	"fmt"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/profile"
	"github.com/zoo-dev/zoo/train"
)

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "time every op type and node of one run (ms, % of the run, GFLOP/s, bytes moved) and write a Chrome trace",
		ArgsUsage: "NAME[.PRESET]|FILE.onnx",
		Description: "Runs the model on a batch of --batch × --seq tokens of the sample text (ids wrapped to the model's\n" +
			"vocabulary, no padding): --warmup untimed runs, then --reps profiled runs in which the backend reads the clock\n" +
			"around every step, the Go heap collected before each (untimed). Times are means per run. A step is a graph node or a fused kernel of the backend, which\n" +
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
	m, err := loadModel(c.Context, c, ref)
	if err != nil {
		return err
	}
	plan, err := planFeeds(m.Graph(), c.StringSlice(flagFeed.Name))
	if err != nil {
		return badInput(err)
	}
	lim := profile.Limits{Batch: plan.Batch, Seq: plan.Seq, TableRows: plan.MaxLen, TableWhy: plan.MaxLenWhy()}
	if !m.FromFile() {
		lim.MaxLen = m.Config().Int(m.Description().Caps.MaxLenParam)
	}
	b, n, err := profile.Shape(m.Name(), lim, set.Batch, set.Seq, c.IsSet("batch"), c.IsSet("seq"))
	if err != nil {
		return badInput(err)
	}
	inputs, err := plan.Tensors(profile.FullBatch(b, n, plan.VocabRows), 0)
	if err != nil {
		return failed(fmt.Errorf("feed %s: %w", m.Name(), err))
	}
	if err := zooroot.GuardMemory(m.Name(), m.Graph(), zooroot.MemoryRun{Batch: b, N: n, Shapes: plan.Shapes, BatchOption: "--batch", NOption: "--seq"}); err != nil {
		return err
	}
	choice, prog, err := compileModel(m, backends.Options{Threads: set.Threads, Precision: prec})
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
		return failed(fmt.Errorf("run %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	rep := profile.Report{Model: m.Name(), Weights: m.Weights(), Backend: choice.Backend.Name(), Level: choice.Probe.Level,
		Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec), Batch: b, N: n}
	return failed(profile.Finish(c.App.Writer, &rep, runs, m.Graph(), plan.Shapes(b, n), prog, set))
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
	if zooroot.IsONNXPath(ref) {
		return badInputf("profile --train: %s is an ONNX file; zoo trains its variants (see `zoo list`), whose parameters it knows by name", ref)
	}
	if len(c.StringSlice(flagFeed.Name)) > 0 {
		return badInputf("profile --train: --feed sets inference inputs; a training step is fed windows of the sample text (--batch, --seq)")
	}
	sets, err := parseSets(c.StringSlice(flagSet.Name))
	if err != nil {
		return badInput(err)
	}
	cfg := train.DefaultConfig()
	cfg.Steps, cfg.Batch, cfg.Window, cfg.Seed, cfg.Precision = 1, set.Batch, set.Seq, c.Uint64(flagSeed.Name), prec
	cfg.Threads, cfg.CheckpointActivations = set.Threads, c.Bool(flagCheckpointActivations.Name)
	// Every window full: the sample text repeated to cover the batch. The trainer never steps,
	// so every profiled run sees the initial weights.
	text := bytes.Repeat(zooroot.SampleText, set.Batch*set.Seq/max(1, len(zooroot.SampleText))+1)
	run := trainRun{model: withPreset(ref, c.String(flagPreset.Name)), sets: sets, weights: c.String(flagWeights.Name), cfg: cfg,
		data: train.Data{Train: train.TextSource{Name: "the sample text", Text: text}}}
	m, err := loadTrainModel(c.Context, c, run)
	if err != nil {
		return err
	}
	defer m.Close()
	tr, err := train.New(c.Context, m, run.data, cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	choice := tr.Backend()
	step, err := tr.StepProgram(1)
	if err != nil {
		return failed(err)
	}
	profiler, err := profile.ProfilerOf(step.Program, choice.Backend.Name())
	if err != nil {
		return badInput(err)
	}
	runs, err := profile.Runs(c.Context, step.Program, profiler, step.Inputs, set)
	if err != nil {
		return failed(fmt.Errorf("the training step of %s on %s: %w", m.Name(), choice.Backend.Name(), err))
	}
	rep := profile.Report{Model: m.Name(), Weights: m.Weights(), Train: true, Backend: choice.Backend.Name(),
		Level: choice.Probe.Level, Threads: choice.Probe.Threads, Precision: reportedPrecision(choice.Backend.Name(), prec),
		Batch: step.Batch, N: step.N}
	return failed(profile.Finish(c.App.Writer, &rep, runs, step.Graph, step.Shapes, step.Program, set))
}
