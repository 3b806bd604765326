package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/trainout"
	"github.com/zoo-dev/zoo/train"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

func trainCommand() *cli.Command {
	d := train.DefaultConfig()
	return &cli.Command{
		Name:      "train",
		Usage:     "train a variant on a text file and write its state_dict (.safetensors, PyTorch names)",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Step k (1-based) trains on windows (k-1)*B ... k*B-1 of the input, cut as `zoo run` cuts them\n" +
			"and taken cyclically (--shuffle: in a seeded order). -o FILE.safetensors holds the model's state_dict;\n" +
			"FILE.optim.safetensors beside it the optimizer's moments and step count. --resume FILE continues a run\n" +
			"with the settings it started with, so that its losses equal an uninterrupted run's bit for bit, and with\n" +
			"its --eval, --eval-every, --log (appended to), --plot, --save-every, --threads and --checkpoint-activations\n" +
			"unless given again; -o defaults to FILE.\n" + format.Wrap(train.ExtendRule, 110) + "\n" +
			"Ctrl-C or SIGTERM saves the last finished step's checkpoint before zoo exits (130 or 143); a killed run\n" +
			"loses the steps since its last save (--save-every). A NaN or infinite\n" +
			"loss stops training with one line naming the step and the parameter with the largest gradient.\n" +
			"--seed draws the initial weights and also mlm's masks, dropout and --shuffle's order." +
			examples("zoo train vanilla.tiny --input corpus.txt -o model.safetensors --save-every 100",
				"zoo train vanilla.tiny -i corpus.txt --objective clm --eval heldout.txt --eval-every 100 --log train.jsonl --plot loss.png -o model.safetensors",
				"zoo train --resume model.safetensors --steps 5000 -o model.safetensors"),
		Flags: slices.Concat(modelFlags(), []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "training text `FILE` (any bytes)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the trained state_dict to `FILE`.safetensors (and the optimizer state to FILE.optim.safetensors)"},
			&cli.IntFlag{Name: "steps", Value: d.Steps, Usage: "optimizer steps `N` in all (a resumed run counts the steps already taken)"},
			&cli.IntFlag{Name: "batch", Value: d.Batch, Usage: "windows per step"},
			&cli.IntFlag{Name: "window", Usage: "tokens per window (0: min(512, the model's maximum length))"},
			&cli.StringFlag{Name: "objective", Value: d.Objective, Usage: "mlm (masked tokens, BERT's 15 % with 80/10/10) or clm (next token within each window; turns causal on)"},
		}, optimizerFlags(d), []cli.Flag{
			&cli.IntFlag{Name: "save-every", Usage: "also write the checkpoint every `N` steps (0: only at the end)"},
			&cli.StringFlag{Name: "resume", Usage: "continue the run whose checkpoint is `FILE`.safetensors (with FILE.optim.safetensors beside it)"},
			&cli.StringFlag{Name: "eval", Usage: "held-out text `FILE`: its loss and bits per byte before training, every --eval-every steps and at the end"},
			&cli.IntFlag{Name: "eval-every", Usage: "evaluate every `N` steps (0: before and after training only)"},
			&cli.StringFlag{Name: "log", Usage: "write one JSON object per step (and per evaluation) to `FILE`.jsonl"},
			&cli.StringFlag{Name: "plot", Usage: "draw the loss curve to `FILE`.png"},
			&cli.BoolFlag{Name: "shuffle", Usage: "visit the windows in a seeded random order (each pass over the file its own order)"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagCheckpointActivations,
			flagPrecision(), flagBackend, flagJSON,
		}),
		Action: trainAction,
	}
}

// optimizerFlags are the flags of the optimizer, the schedule and the loss, which zoo train
// and zoo compare share (trainConfig reads them), with d's defaults.
func optimizerFlags(d train.Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "optimizer", Value: d.Optimizer, Usage: "adamw (torch.optim.AdamW) or sgd (torch.optim.SGD)"},
		&cli.Float64Flag{Name: "momentum", Usage: "SGD momentum (0: plain SGD)"},
		&cli.Float64Flag{Name: "lr", Value: d.LR, Usage: "peak learning rate"},
		&cli.Float64Flag{Name: "weight-decay", Value: d.WeightDecay, Usage: "weight decay on every parameter (AdamW: decoupled; SGD: added to the gradient)"},
		&cli.Float64Flag{Name: "eps", Value: d.Eps, Usage: "AdamW's epsilon"},
		&cli.StringFlag{Name: "betas", Value: formatBetas(d.Betas), Usage: "AdamW's `B1,B2`"},
		&cli.IntFlag{Name: "warmup", Value: d.Warmup, Usage: "steps `N` of linear warm-up from 0 to --lr"},
		&cli.StringFlag{Name: "schedule", Value: d.Schedule, Usage: "learning rate after warm-up: constant, linear (to 0 at the last step) or cosine"},
		&cli.Float64Flag{Name: "label-smoothing", Usage: "label smoothing `X` of the cross-entropy (PyTorch's formula)"},
		&cli.Float64Flag{Name: "clip", Value: d.Clip, Usage: "clip the global gradient norm to `X` (0: no clipping)"},
	}
}

// flagCheckpointActivations trades compute for memory in the training step. It changes the
// math of nothing (the same ops on the same inputs), only which kernels the backend may fuse,
// so losses agree to float rounding and a resumed run may set it or not.
var flagCheckpointActivations = &cli.BoolFlag{Name: "checkpoint-activations",
	Usage: "keep only each layer's input for the backward pass and recompute the layer's activations from it (a second forward pass of each layer; far less activation memory; the same math)"}

// trainConfig reads the flags that zoo train and zoo compare share into a train.Config:
// --seed, the objective, the steps and batches, the optimizer, the schedule and the loss,
// --precision, --threads and --checkpoint-activations.
func trainConfig(c flags) (train.Config, error) {
	cfg := train.Config{Seed: c.Uint64(flagSeed.Name), Objective: c.String("objective"), Steps: c.Int("steps"), Batch: c.Int("batch"),
		Window: c.Int("window"), Shuffle: c.Bool("shuffle"), Optimizer: c.String("optimizer"), LR: c.Float64("lr"),
		WeightDecay: c.Float64("weight-decay"), Eps: c.Float64("eps"), Momentum: c.Float64("momentum"), Warmup: c.Int("warmup"),
		Schedule: c.String("schedule"), LabelSmoothing: c.Float64("label-smoothing"), Clip: c.Float64("clip"),
		Threads: c.Int("threads"), CheckpointActivations: c.Bool(flagCheckpointActivations.Name)}
	prec, err := precisionOf(c)
	if err != nil {
		return cfg, err
	}
	cfg.Precision = prec
	if cfg.Betas, err = parseBetas(c.String("betas")); err != nil {
		return cfg, badInput(err)
	}
	return cfg, nil
}

func parseBetas(v string) ([2]float64, error) {
	var out [2]float64
	parts := strings.Split(v, ",")
	if len(parts) != 2 {
		return out, fmt.Errorf("--betas %q: want B1,B2, e.g. 0.9,0.999", v)
	}
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return out, fmt.Errorf("--betas %q: %q is not a number", v, p)
		}
		out[i] = x
	}
	return out, nil
}

func formatBetas(b [2]float64) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return f(b[0]) + "," + f(b[1])
}

// withPreset is the model reference of NAME and --preset: NAME.PRESET unless NAME names one.
func withPreset(ref, preset string) string {
	if preset != "" && !strings.Contains(ref, ".") {
		return ref + "." + preset
	}
	return ref
}

// trainRun is what zoo train trains: the model (its reference, --set values and initial
// weights), the text and the Config, and where its log and plot go.
type trainRun struct {
	model     string
	sets      map[string]string
	weights   string
	data      train.Data
	cfg       train.Config
	log, plot string
	// carried lists the settings a resumed run took from its checkpoint ("--eval FILE");
	// notes says what else a user should know of it (an extension of the schedule).
	carried, notes []string
}

// The labels under which a checkpoint records zoo train's --log and --plot (train.Config.Labels).
const (
	labelLog  = "log"
	labelPlot = "plot"
)

// trainRunOf reads zoo train's flags into the run (ref is the model argument, "" for a
// resumed run), continuing --resume's run when it is given, and checks what needs no model.
func trainRunOf(c flags, ref string) (trainRun, error) {
	cfg, err := trainConfig(c)
	if err != nil {
		return trainRun{}, err
	}
	cfg.SaveEvery, cfg.EvalEvery, cfg.Output = c.Int("save-every"), c.Int("eval-every"), c.String("output")
	for label, flag := range map[string]string{labelLog: "log", labelPlot: "plot"} {
		if v := c.String(flag); v != "" {
			if cfg.Labels == nil {
				cfg.Labels = map[string]string{}
			}
			cfg.Labels[label] = v
		}
	}
	sets, err := parseSets(c.StringSlice(flagSet.Name))
	if err != nil {
		return trainRun{}, badInput(err)
	}
	run := trainRun{model: withPreset(ref, c.String(flagPreset.Name)), sets: sets, weights: c.String(flagWeights.Name), cfg: cfg,
		data: train.Data{Train: train.TextSource{Name: "--input", Path: c.String("input")}}}
	if p := c.String("eval"); p != "" {
		run.data.Held = train.TextSource{Name: "--eval", Path: p}
	}
	if c.String("resume") != "" {
		if run, err = resumeRun(c, run, ref); err != nil {
			return run, err
		}
	}
	run.log, run.plot = run.cfg.Labels[labelLog], run.cfg.Labels[labelPlot]
	if run.data.Train.Path == "" {
		return run, badInputf("train: --input FILE is required (the text to train on)")
	}
	if n := run.cfg.EvalEvery; n < 0 || (n > 0 && !run.data.HasHeld()) {
		return run, badInputf("--eval-every needs --eval FILE and a positive number of steps, got %d", n)
	}
	if err := run.cfg.Validate(); err != nil {
		return run, err
	}
	for _, src := range []train.TextSource{run.data.Train, run.data.Held} {
		if src.Path != "" {
			if err := src.Check(); err != nil {
				return run, err
			}
		}
	}
	return run, nil
}

// resumeRun continues the run of the checkpoint --resume names: its model, --set values and
// settings, with --steps (and --input, for a moved file) from the command line when given.
// Any other flag given with a value other than the recorded one is bad input.
func resumeRun(c flags, run trainRun, ref string) (trainRun, error) {
	if c.IsSet(flagWeights.Name) {
		return run, badInputf("--resume restores the weights of the run it continues; drop --weights")
	}
	ck, err := train.ReadCheckpoint(c.String("resume"))
	if err != nil {
		return run, err
	}
	if ref != "" && !sameModel(c, run.model, ck.Model) {
		return run, badInputf("--resume: the checkpoint is a run of %s, not %s", ck.Model, ref)
	}
	if c.IsSet(flagSet.Name) && !maps.Equal(run.sets, ck.Set) {
		return run, badInputf("--set %s differs from the resumed run's %s; a resumed run keeps its settings (start a new run with --weights %s to change them)",
			strings.Join(c.StringSlice(flagSet.Name), " "), orDash(joinSets(ck.Set)), ck.Path)
	}
	cfg, err := ck.Continue(run.cfg, func(option string) bool { return c.IsSet(flagOf(option)) })
	if err != nil {
		return run, err
	}
	run.model, run.sets, run.weights, run.cfg = ck.Model, ck.Set, "", cfg
	if len(cfg.Cycles) > max(1, len(ck.Config.Cycles)) {
		run.notes = append(run.notes, fmt.Sprintf("extending the run from %d to %d steps: %s (see zoo help train)",
			ck.Config.Steps, cfg.Steps, cfg.DescribeCycle(cfg.Cycles[len(cfg.Cycles)-1])))
	}
	if !c.IsSet("input") {
		run.data.Train = ck.Data.Train
		run.data.Train.Name = "--input"
	}
	// What the first run was given besides the recorded settings comes along.
	carry := func(flag, value string) {
		if !c.IsSet(flag) && value != "" && value != "0" && value != "false" {
			run.carried = append(run.carried, "--"+flag+" "+value)
		}
	}
	if !c.IsSet("eval") && ck.Data.Held.Path != "" {
		run.data.Held = ck.Data.Held
		run.data.Held.Name = "--eval"
		carry("eval", ck.Data.Held.Path)
	}
	carry("eval-every", strconv.Itoa(cfg.EvalEvery))
	carry("log", cfg.Labels[labelLog])
	carry("plot", cfg.Labels[labelPlot])
	carry("save-every", strconv.Itoa(cfg.SaveEvery))
	carry("threads", strconv.Itoa(cfg.Threads))
	if cfg.CheckpointActivations && !c.IsSet(flagCheckpointActivations.Name) {
		run.carried = append(run.carried, "--"+flagCheckpointActivations.Name)
	}
	return run, nil
}

// sameModel reports whether two model references name the same variant and preset (through
// an alias, say).
func sameModel(c flags, a, b string) bool {
	if a == b {
		return true
	}
	reg, err := loadRegistry(c)
	if err != nil {
		return false
	}
	ea, pa, errA := reg.Lookup(a)
	eb, pb, errB := reg.Lookup(b)
	return errA == nil && errB == nil && ea.Name == eb.Name && pa == pb
}

func joinSets(set map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k])
	}
	return strings.Join(out, " ")
}

func orDash(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// loadTrainModel builds the run's model for training (train.Load) with the command's
// registry, plugins and backend.
func loadTrainModel(ctx context.Context, c flags, run trainRun) (*zooroot.Model, error) {
	if zooroot.IsONNXPath(run.model) {
		return nil, badInputf("train: %s is an ONNX file; zoo trains its variants (see `zoo list`), whose parameters it knows by name", run.model)
	}
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, err
	}
	return train.Load(ctx, run.model, run.cfg.Objective, zooroot.LoadOptions{Set: run.sets, Seed: run.cfg.Seed, Weights: run.weights,
		Registries: opts.Registries, Plugins: opts.Plugins, Backend: opts.Backend})
}

// checkTrainArgs checks zoo train's arguments and its output path.
func checkTrainArgs(nArgs int, ref, resume, out string) error {
	switch {
	case nArgs > 1:
		return badInputf("train: want one model name (see `zoo list`), got %d arguments", nArgs)
	case ref == "" && resume == "":
		return badInputf("train: want a model name (see `zoo list`), e.g. zoo train vanilla.tiny --input corpus.txt -o model.safetensors")
	case out == "" && resume == "":
		return badInputf("train: -o FILE.safetensors is required (where the trained state_dict goes)")
	case out == "":
		out = resume // a resumed run writes its checkpoint back
	case !strings.EqualFold(filepath.Ext(out), ".safetensors"):
		return badInputf("-o %s: the trained state_dict is written as .safetensors; name the file FILE.safetensors", out)
	}
	for _, p := range []string{out, optim.OptimPath(out)} {
		if err := checkOutputPath(p); err != nil {
			return badInput(err)
		}
	}
	return nil
}

// trainReport is what zoo train prints; --json prints it as JSON.
type trainReport struct {
	Model          string   `json:"model"`
	Backend        string   `json:"backend"`
	Level          string   `json:"kernel_level"`
	Threads        int      `json:"threads"`
	Precision      string   `json:"precision"`
	Objective      string   `json:"objective"`
	Optimizer      string   `json:"optimizer"`
	Params         int      `json:"parameters"`
	StartStep      int      `json:"start_step"`
	Steps          int      `json:"steps"`
	Tokens         int64    `json:"tokens"`
	FirstLoss      *float64 `json:"first_loss,omitempty"`
	FinalLoss      *float64 `json:"final_loss,omitempty"`
	InitialEval    *float64 `json:"initial_eval_loss,omitempty"`
	InitialEvalBPB *float64 `json:"initial_eval_bits_per_byte,omitempty"`
	EvalLoss       *float64 `json:"eval_loss,omitempty"`
	EvalBPB        *float64 `json:"eval_bits_per_byte,omitempty"`
	Seconds        float64  `json:"seconds"`
	TokensPS       float64  `json:"tokens_per_second"`
	Written        []string `json:"written"`
}

func trainAction(c *cli.Context) error {
	ref := c.Args().First()
	if err := checkTrainArgs(c.NArg(), ref, c.String("resume"), c.String("output")); err != nil {
		return err
	}
	run, err := trainRunOf(c, ref)
	if err != nil {
		return err
	}
	if len(run.carried) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "zoo train: resuming %s with the run's %s\n", run.cfg.Resume, strings.Join(run.carried, " "))
	}
	for _, n := range run.notes {
		fmt.Fprintf(c.App.ErrWriter, "zoo train: %s\n", n)
	}
	t0 := time.Now()
	m, err := loadTrainModel(c.Context, c, run)
	if err != nil {
		return err
	}
	defer m.Close()
	tr, err := train.New(c.Context, m, run.data, run.cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	removed := tr.Removed()
	for _, p := range []string{run.log, run.plot} {
		if p != "" {
			r, _ := tensorio.RemoveStaleTemps(p)
			removed = append(removed, r...)
		}
	}
	if len(removed) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "zoo train: removed %s that killed saves left: %s\n", format.Plural(len(removed), "temporary file"), strings.Join(removed, ", "))
	}
	rec := &trainout.Recorder{}
	if p := run.log; p != "" {
		if rec.Log, rec.Lines, err = trainout.Open(p, tr.Step()); err != nil {
			return badInput(err)
		}
		defer rec.Log.Close()
	}
	tr.OnStep(rec.Record)
	bar := trainBar(c.App.ErrWriter, "", run.cfg.Steps, tr.Step())
	if bar != nil {
		tr.OnStep(trainBarHook(bar, tr.Step(), run.cfg.Steps))
	}
	if s, err := sessionOf(c.Context); err == nil {
		s.finishOnSignal()
	}
	res, runErr := tr.Run(c.Context)
	if bar != nil {
		bar.finish()
	}
	reportStopped(c.App.ErrWriter, runErr, run.cfg)
	if p := run.plot; p != "" && len(rec.Lines) > 0 {
		title := fmt.Sprintf("zoo train %s — %s, %s, batch %d × %d tokens", m.Name(), run.cfg.Objective, run.cfg.Optimizer, run.cfg.Batch, tr.Window())
		if err := tensorio.AtomicWriteFile(p, func(w io.Writer) error { return trainout.Plot(w, rec.Lines, title) }); err != nil && runErr == nil {
			runErr = failed(err)
		}
	}
	if runErr != nil {
		return runErr
	}
	rep := newTrainReport(tr, res, rec.Lines, time.Since(t0))
	for _, p := range []string{run.log, run.plot} {
		if p != "" {
			rep.Written = append(rep.Written, p)
		}
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rep)
	}
	fmt.Fprintln(c.App.Writer, trainSummary(rep))
	return nil
}

// reportStopped says on w where a run that a signal stopped left its work.
func reportStopped(w io.Writer, err error, cfg train.Config) {
	var stop *train.StoppedError
	switch {
	case !errors.As(err, &stop):
	case stop.Saved:
		fmt.Fprintf(w, "zoo train: stopped after step %d of %d; its checkpoint is in %s (continue with --resume %s)\n", stop.Step, cfg.Steps, cfg.Output, cfg.Output)
	default:
		fmt.Fprintf(w, "zoo train: stopped after step %d of %d; nothing new was trained, nothing written\n", stop.Step, cfg.Steps)
	}
}

// newTrainReport reports a finished run: lines are the --log lines kept from before a resume
// and this run's, which give the first and final losses and the held-out scores.
func newTrainReport(tr *train.Trainer, res train.Result, lines []trainout.Line, took time.Duration) trainReport {
	cfg, choice := tr.Config(), tr.Backend()
	rep := trainReport{Model: tr.Model().Name(), Backend: choice.Backend.Name(), Level: choice.Probe.Level, Threads: tr.Threads(),
		Precision: reportedPrecision(choice.Backend.Name(), cfg.Precision), Objective: cfg.Objective, Optimizer: cfg.Optimizer,
		Params: tr.Parameters(), StartStep: res.StartStep, Steps: cfg.Steps, Tokens: res.Tokens, Seconds: took.Seconds(),
		TokensPS: res.TokensPerSecond(), Written: []string{cfg.Output, optim.OptimPath(cfg.Output)}}
	for _, l := range lines {
		switch {
		case l.IsEval() && l.Step == 0:
			rep.InitialEval, rep.InitialEvalBPB = l.EvalLoss, l.EvalBitsPB
		case l.IsEval():
			rep.EvalLoss, rep.EvalBPB = l.EvalLoss, l.EvalBitsPB
		case l.Step > res.StartStep && rep.FirstLoss == nil:
			rep.FirstLoss = l.Loss
		}
		if !l.IsEval() {
			rep.FinalLoss = l.Loss
		}
	}
	return rep
}

// trainSummary is the one line zoo train prints when it is done.
func trainSummary(r trainReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "trained %s (%s, %s, %s params) steps %d–%d of %d on %s (%s, %s, %s)", r.Model, r.Objective, r.Optimizer,
		format.HumanCount(int64(r.Params)), r.StartStep+1, r.Steps, r.Steps, r.Backend, r.Level, format.Plural(r.Threads, "thread"), r.Precision)
	if r.FirstLoss != nil && r.FinalLoss != nil {
		fmt.Fprintf(&b, ": loss %.4f → %.4f", *r.FirstLoss, *r.FinalLoss)
	}
	if r.EvalBPB != nil {
		if r.InitialEvalBPB != nil {
			fmt.Fprintf(&b, ", held-out %.3f → %.3f bits/byte", *r.InitialEvalBPB, *r.EvalBPB)
		} else {
			fmt.Fprintf(&b, ", held-out %.3f bits/byte", *r.EvalBPB)
		}
	}
	fmt.Fprintf(&b, "; %s tokens in %.1f s (%.0f tokens/s); wrote %s", format.HumanCount(r.Tokens), r.Seconds, r.TokensPS, strings.Join(r.Written, ", "))
	return b.String()
}

// trainBarHook moves zoo train's progress bar after each step of a run that began after step
// from: the step, its loss, learning rate and speed, and the time left.
func trainBarHook(bar *stepBar, from, steps int) func(train.Step) error {
	return func(s train.Step) error {
		if s.Eval {
			return nil
		}
		eta := time.Duration(float64(s.Elapsed) / float64(s.Step-from) * float64(steps-s.Step)).Round(time.Second)
		bar.update(s.Step, fmt.Sprintf("loss %.4f lr %.3g %.0f tok/s ETA %s", s.Loss, s.LR, s.TokensPerSecond, eta))
		return nil
	}
}

// underlying returns the writer behind the session's synchronised stderr, so that a
// terminal can be recognised through it.
func underlying(w io.Writer) io.Writer {
	if sw, ok := w.(*syncWriter); ok {
		return sw.w
	}
	return w
}
