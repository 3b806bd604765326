package main

import (
	"bytes"
	"context"
	"fmt"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/train"
)

// profileTrain is zoo profile --train: it prepares a training run as zoo train does (the
// same build, layout, backend and step program: train.New) on b windows of n tokens of the
// sample text, and profiles the step program on step 1's batch. The trainer never steps, so
// every profiled run sees the initial weights.
func profileTrain(ctx context.Context, c flags, ref string, b, n int, prec string, po profileOutput) error {
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
	cfg.Steps, cfg.Batch, cfg.Window, cfg.Seed, cfg.Precision = 1, b, n, c.Uint64(flagSeed.Name), prec
	cfg.Threads, cfg.CheckpointActivations = po.threads, c.Bool(flagCheckpointActivations.Name)
	// Every window full: the sample text repeated to cover the batch.
	text := bytes.Repeat(zooroot.SampleText, b*n/max(1, len(zooroot.SampleText))+1)
	run := trainRun{model: withPreset(ref, c.String(flagPreset.Name)), sets: sets, weights: c.String(flagWeights.Name), cfg: cfg,
		data: train.Data{Train: train.TextSource{Name: "the sample text", Text: text}}}
	m, err := loadTrainModel(ctx, c, run)
	if err != nil {
		return err
	}
	defer m.Close()
	tr, err := train.New(ctx, m, run.data, cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	backend := tr.Backend().Backend.Name()
	step, err := tr.StepProgram(1)
	if err != nil {
		return failed(err)
	}
	profiler, err := profilerOf(step.Program, backend)
	if err != nil {
		return badInput(err)
	}
	runs, err := profileRuns(ctx, po, step.Program, profiler, step.Inputs)
	if err != nil {
		return failed(fmt.Errorf("the training step of %s on %s: %w", m.Name(), backend, err))
	}
	rep := profileReport{Model: m.Name(), Weights: m.Weights(), Train: true, Backend: backend, Level: tr.Backend().Probe.Level,
		Threads: tr.Backend().Probe.Threads, Precision: reportedPrecision(backend, prec), Batch: step.Batch, N: step.N}
	return reportProfile(po, &rep, runs, step.Graph, step.Shapes, step.Program)
}
