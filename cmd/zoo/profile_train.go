package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/optim"
)

// profileTrain is zoo profile --train: it prepares a training run as zoo train does (the
// same build, layout, backend and step program) on b windows of n tokens of the sample
// text, and profiles the step program on step 1's batch. The optimizer is built but never
// steps, so every profiled run sees the initial weights.
func profileTrain(c *cli.Context, ref string, b, n int, prec string, po profileOutput) error {
	if zooroot.IsONNXPath(ref) {
		return badInputf("profile --train: %s is an ONNX file; zoo trains its variants (see `zoo list`), whose parameters it knows by name", ref)
	}
	if len(c.StringSlice(flagFeed.Name)) > 0 {
		return badInputf("profile --train: --feed sets inference inputs; a training step is fed windows of the sample text (--batch, --seq)")
	}
	h := optim.DefaultHyper()
	st := trainSettings{Model: ref, Sets: c.StringSlice(flagSet.Name), Seed: c.Uint64(flagSeed.Name), Weights: c.String(flagWeights.Name),
		Objective: objectiveMLM, Steps: 1, Batch: b, Window: n,
		Optimizer: h.Optimizer, WeightDecay: h.WeightDecay, Eps: h.Eps, Betas: []float64{h.Beta1, h.Beta2},
		LR: 1e-4, Schedule: optim.Linear, Clip: 1, Precision: prec}
	if p := c.String(flagPreset.Name); p != "" && !strings.Contains(ref, ".") {
		st.Model = ref + "." + p
	}
	// Every window full: the sample text repeated to cover the batch.
	text := bytes.Repeat(zooroot.SampleText, b*n/max(1, len(zooroot.SampleText))+1)
	job, err := prepareTraining(c, st, nil, trainData{train: textSource{flag: "the sample text", text: text}})
	if err != nil {
		return err
	}
	defer job.close()
	eng, ok := job.engine.(*graphEngine)
	if !ok {
		return failed(fmt.Errorf("profile --train: the training engine of %s has no compiled step program to profile", job.model.Name()))
	}
	profiler, err := profilerOf(eng.step_, job.choice.Backend.Name())
	if err != nil {
		return badInput(err)
	}
	batch, done, err := eng.feedStep(1)
	if err != nil {
		return failed(fmt.Errorf("the first batch of %s: %w", job.model.Name(), err))
	}
	defer done()
	runs, err := profileRuns(c.Context, po, eng.step_, profiler, eng.feed)
	if err != nil {
		return failed(fmt.Errorf("the training step of %s on %s: %w", job.model.Name(), job.choice.Backend.Name(), err))
	}
	rep := profileReport{Model: job.model.Name(), Weights: job.model.Weights(), Train: true, Backend: job.choice.Backend.Name(),
		Level: job.choice.Probe.Level, Threads: job.choice.Probe.Threads, Precision: reportedPrecision(job.choice.Backend.Name(), prec),
		Batch: batch.B, N: batch.N}
	return reportProfile(po, &rep, runs, eng.stepGraph, eng.stepShapes(batch.B, batch.N), eng.step_)
}
