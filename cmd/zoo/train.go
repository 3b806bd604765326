package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// The training objectives.
const (
	objectiveMLM = "mlm"
	objectiveCLM = "clm"
)

// trainMetaKey holds the run's settings (trainSettings as JSON) in both checkpoint files, so
// that --resume continues with exactly the settings the run started with.
const trainMetaKey = "zoo_train"

func trainCommand() *cli.Command {
	return &cli.Command{
		Name:      "train",
		Usage:     "train a variant on a text file and write its state_dict (.safetensors, PyTorch names)",
		ArgsUsage: "NAME[.PRESET]",
		Description: "Step k (1-based) trains on windows (k-1)*B ... k*B-1 of the input, cut as `zoo run` cuts them\n" +
			"and taken cyclically (--shuffle: in a seeded order). -o FILE.safetensors holds the model's state_dict;\n" +
			"FILE.optim.safetensors beside it the optimizer's moments and step count. --resume FILE continues a run\n" +
			"with the settings it started with, so that its losses equal an uninterrupted run's bit for bit;\n" +
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
			&cli.IntFlag{Name: "steps", Value: 1000, Usage: "optimizer steps `N` in all (a resumed run counts the steps already taken)"},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "windows per step"},
			&cli.IntFlag{Name: "window", Usage: "tokens per window (0: min(512, the model's maximum length))"},
			&cli.StringFlag{Name: "objective", Value: objectiveMLM, Usage: "mlm (masked tokens, BERT's 15 % with 80/10/10) or clm (next token within each window; turns causal on)"},
		}, optimizerFlags(), []cli.Flag{
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

// trainSettings is everything that decides a run's numbers. It is stored in the checkpoint
// (trainMetaKey), and --resume restores it.
type trainSettings struct {
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
	// Precision is --precision as given ("" when not: the backend's default, fp32), so that
	// checkpoints written before the flag existed resume as fp32.
	Precision string `json:"precision,omitempty"`
}

func (s trainSettings) hyper() optim.Hyper {
	h := optim.Hyper{Optimizer: s.Optimizer, WeightDecay: s.WeightDecay, Eps: s.Eps, Momentum: s.Momentum}
	if len(s.Betas) == 2 {
		h.Beta1, h.Beta2 = s.Betas[0], s.Betas[1]
	}
	return h
}

func (s trainSettings) schedule() optim.Schedule {
	return optim.Schedule{LR: s.LR, Warmup: s.Warmup, Steps: s.Steps, Kind: s.Schedule}
}

// optimizerFlags are the flags of the optimizer, the schedule and the loss, which zoo train
// and zoo compare share (settingsFromFlags reads them).
func optimizerFlags() []cli.Flag {
	d := optim.DefaultHyper()
	return []cli.Flag{
		&cli.StringFlag{Name: "optimizer", Value: d.Optimizer, Usage: "adamw (torch.optim.AdamW) or sgd (torch.optim.SGD)"},
		&cli.Float64Flag{Name: "momentum", Usage: "SGD momentum (0: plain SGD)"},
		&cli.Float64Flag{Name: "lr", Value: 1e-4, Usage: "peak learning rate"},
		&cli.Float64Flag{Name: "weight-decay", Value: d.WeightDecay, Usage: "weight decay on every parameter (AdamW: decoupled; SGD: added to the gradient)"},
		&cli.Float64Flag{Name: "eps", Value: d.Eps, Usage: "AdamW's epsilon"},
		&cli.StringFlag{Name: "betas", Value: "0.9,0.999", Usage: "AdamW's `B1,B2`"},
		&cli.IntFlag{Name: "warmup", Usage: "steps `N` of linear warm-up from 0 to --lr"},
		&cli.StringFlag{Name: "schedule", Value: optim.Linear, Usage: "learning rate after warm-up: constant, linear (to 0 at the last step) or cosine"},
		&cli.Float64Flag{Name: "label-smoothing", Usage: "label smoothing `X` of the cross-entropy (PyTorch's formula)"},
		&cli.Float64Flag{Name: "clip", Value: 1.0, Usage: "clip the global gradient norm to `X` (0: no clipping)"},
	}
}

// flagCheckpointActivations trades compute for memory in the training step. It changes the
// math of nothing (the same ops on the same inputs), only which kernels the backend may fuse,
// so losses agree to float rounding and a resumed run may set it or not.
var flagCheckpointActivations = &cli.BoolFlag{Name: "checkpoint-activations",
	Usage: "keep only each layer's input for the backward pass and recompute the layer's activations from it (a second forward pass of each layer; far less activation memory; the same math)"}

// settingsFromFlags reads the flags that decide a run's numbers; ref is the model name.
func settingsFromFlags(c *cli.Context, ref string) (trainSettings, error) {
	s := trainSettings{
		Model: ref, Sets: c.StringSlice(flagSet.Name), Seed: c.Uint64(flagSeed.Name), Weights: c.String(flagWeights.Name),
		Input: c.String("input"), Objective: c.String("objective"), Steps: c.Int("steps"), Batch: c.Int("batch"),
		Window: c.Int("window"), Shuffle: c.Bool("shuffle"), Optimizer: c.String("optimizer"), LR: c.Float64("lr"),
		WeightDecay: c.Float64("weight-decay"), Eps: c.Float64("eps"), Momentum: c.Float64("momentum"),
		Warmup: c.Int("warmup"), Schedule: c.String("schedule"), LabelSmoothing: c.Float64("label-smoothing"), Clip: c.Float64("clip"),
	}
	if p := c.String(flagPreset.Name); p != "" && !strings.Contains(ref, ".") {
		s.Model = ref + "." + p
	}
	prec, err := precisionOf(c)
	if err != nil {
		return s, err
	}
	s.Precision = prec
	betas, err := parseBetas(c.String("betas"))
	if err != nil {
		return s, err
	}
	s.Betas = betas
	return s, nil
}

func parseBetas(v string) ([]float64, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 2 {
		return nil, fmt.Errorf("--betas %q: want B1,B2, e.g. 0.9,0.999", v)
	}
	out := make([]float64, 2)
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("--betas %q: %q is not a number", v, p)
		}
		out[i] = x
	}
	return out, nil
}

// validate checks the settings that need no model; each error names its flag.
func (s trainSettings) validate() error {
	switch {
	case s.Input == "":
		return errors.New("train: --input FILE is required (the text to train on)")
	case s.Objective != objectiveMLM && s.Objective != objectiveCLM:
		return fmt.Errorf("--objective %q: want mlm or clm", s.Objective)
	case s.Batch < 1:
		return fmt.Errorf("--batch must be at least 1, got %d", s.Batch)
	case s.Window < 0:
		return fmt.Errorf("--window must be positive, got %d", s.Window)
	case bad(s.LabelSmoothing) || s.LabelSmoothing < 0 || s.LabelSmoothing >= 1:
		return fmt.Errorf("--label-smoothing must be in [0, 1), got %g", s.LabelSmoothing)
	case bad(s.Clip) || s.Clip < 0:
		return fmt.Errorf("--clip must be a finite number ≥ 0 (0: no clipping), got %g", s.Clip)
	}
	if err := s.schedule().Validate(); err != nil {
		return err
	}
	return s.hyper().Validate()
}

// resumable lists the flags a resumed run may change: they do not change what the steps
// compute (only --steps changes the schedule's S, which the user asks for by giving it).
var resumable = map[string]bool{"steps": true, "input": true}

// mergeResume returns the recorded settings of a checkpoint, with --steps (and --input, for
// a moved file) from the command line when given. Any other flag given with a value other
// than the recorded one is bad input: a resumed run keeps its settings.
func mergeResume(c *cli.Context, rec, flags trainSettings, ref string) (trainSettings, error) {
	if ref != "" && flags.Model != rec.Model {
		return rec, fmt.Errorf("--resume: the checkpoint is a run of %s, not %s", rec.Model, ref)
	}
	recF, flagF := settingsFields(rec), settingsFields(flags)
	for _, name := range slices.Sorted(maps.Keys(flagF)) {
		if resumable[name] || !c.IsSet(name) || flagF[name] == recF[name] {
			continue
		}
		return rec, fmt.Errorf("--%s %s differs from the resumed run's %s; a resumed run keeps its settings (start a new run with --weights %s to change them)",
			name, flagF[name], orDash(recF[name]), c.String("resume"))
	}
	if c.IsSet("steps") {
		rec.Steps = flags.Steps
	}
	if c.IsSet("input") {
		rec.Input = flags.Input
	}
	return rec, nil
}

func orDash(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// settingsFields formats the settings by flag name, for mergeResume's comparison.
func settingsFields(s trainSettings) map[string]string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	betas := ""
	if len(s.Betas) == 2 {
		betas = f(s.Betas[0]) + "," + f(s.Betas[1])
	}
	return map[string]string{
		flagSet.Name: strings.Join(s.Sets, " "), flagSeed.Name: strconv.FormatUint(s.Seed, 10), "input": s.Input,
		"objective": s.Objective, "steps": strconv.Itoa(s.Steps), "batch": strconv.Itoa(s.Batch), "window": strconv.Itoa(s.Window),
		"shuffle": strconv.FormatBool(s.Shuffle), "optimizer": s.Optimizer, "lr": f(s.LR), "weight-decay": f(s.WeightDecay),
		"eps": f(s.Eps), "betas": betas, "momentum": f(s.Momentum), "warmup": strconv.Itoa(s.Warmup), "schedule": s.Schedule,
		"label-smoothing": f(s.LabelSmoothing), "clip": f(s.Clip), precisionFlagName: reportedPrecision("", s.Precision),
	}
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
	if c.NArg() > 1 {
		return badInputf("train: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	ref := c.Args().First()
	resume := c.String("resume")
	if ref == "" && resume == "" {
		return badInputf("train: want a model name (see `zoo list`), e.g. zoo train vanilla.tiny --input corpus.txt -o model.safetensors")
	}
	outPath := c.String("output")
	if outPath == "" {
		return badInputf("train: -o FILE.safetensors is required (where the trained state_dict goes)")
	}
	if !strings.EqualFold(filepath.Ext(outPath), ".safetensors") {
		return badInputf("-o %s: the trained state_dict is written as .safetensors; name the file FILE.safetensors", outPath)
	}
	for _, p := range []string{outPath, optim.OptimPath(outPath)} {
		if err := checkOutputPath(p); err != nil {
			return badInput(err)
		}
	}
	flags, err := settingsFromFlags(c, ref)
	if err != nil {
		return badInput(err)
	}
	st := flags
	var rs *resumeState
	if resume != "" {
		if c.IsSet(flagWeights.Name) {
			return badInputf("--resume restores the weights of the run it continues; drop --weights")
		}
		if rs, err = readResume(resume); err != nil {
			return badInput(err)
		}
		if st, err = mergeResume(c, rs.settings, flags, ref); err != nil {
			return badInput(err)
		}
	}
	if err := st.validate(); err != nil {
		return badInput(err)
	}
	for _, f := range []struct{ flag, path string }{{"--input", st.Input}, {"--eval", c.String("eval")}} {
		if f.path == "" {
			continue
		}
		if err := checkTextFile(f.flag, f.path); err != nil {
			return badInput(err)
		}
	}
	if n := c.Int("save-every"); n < 0 {
		return badInputf("--save-every must not be negative, got %d", n)
	}
	if n := c.Int("eval-every"); n < 0 || (n > 0 && c.String("eval") == "") {
		return badInputf("--eval-every needs --eval FILE and a positive number of steps, got %d", n)
	}
	if c.Int("threads") < 0 {
		return badInputf("--threads must not be negative, got %d", c.Int("threads"))
	}
	if rs != nil && rs.step >= st.Steps {
		return badInputf("--resume %s is already at step %d of %d; give a larger --steps to train further", resume, rs.step, st.Steps)
	}

	t0 := time.Now()
	data := trainData{train: wholeFile("--input", st.Input)}
	if p := c.String("eval"); p != "" {
		data.held = wholeFile("--eval", p)
	}
	job, err := prepareTraining(c, st, rs, data)
	if err != nil {
		return err
	}
	defer job.close()
	from := 0
	if rs != nil {
		from = rs.step
	}

	var logw *logWriter
	var kept []trainLog
	if p := c.String("log"); p != "" {
		if logw, kept, err = openTrainLog(p, from); err != nil {
			return badInput(err)
		}
		defer logw.close()
	}
	recJSON, _ := json.Marshal(st)
	meta := map[string]string{trainMetaKey: string(recJSON), "variant": job.model.Name(), "config": job.model.Config().JSON(), "seed": fmt.Sprint(job.model.Seed())}
	layout := job.opt.Layout()
	loop := &trainLoop{
		eng: job.engine, opt: job.opt, sched: st.schedule(), clip: st.Clip, par: job.par,
		params: job.params, grads: make([]float32, layout.Size()),
		saveEvery: c.Int("save-every"), evalEvery: c.Int("eval-every"), hasEval: c.String("eval") != "",
		log: logw, history: kept, lastSaved: -1,
		save: func(int) error {
			return optim.SaveCheckpoint(outPath, job.stateDict(), meta, job.opt, map[string]string{trainMetaKey: string(recJSON)})
		},
	}
	if rs != nil && filepath.Clean(resume) == filepath.Clean(outPath) {
		loop.lastSaved = from
	}
	bar := trainBar(c.App.ErrWriter, "", st.Steps, from)
	if bar != nil {
		loop.progress = func(k int, loss, lr, tps float64, elapsed time.Duration) {
			eta := time.Duration(float64(elapsed) / float64(k-from) * float64(st.Steps-k)).Round(time.Second)
			bar.update(k, fmt.Sprintf("loss %.4f lr %.3g %.0f tok/s ETA %s", loss, lr, tps, eta))
		}
	}
	if s, err := sessionOf(c.Context); err == nil {
		s.finishOnSignal()
	}
	runErr := loop.run(c.Context, from, st.Steps)
	if bar != nil {
		bar.finish()
	}
	var stop *stoppedError
	if errors.As(runErr, &stop) {
		if stop.Saved {
			fmt.Fprintf(c.App.ErrWriter, "zoo train: stopped after step %d of %d; its checkpoint is in %s (continue with --resume %s)\n", stop.Step, st.Steps, outPath, outPath)
		} else {
			fmt.Fprintf(c.App.ErrWriter, "zoo train: stopped after step %d of %d; nothing new was trained, nothing written\n", stop.Step, st.Steps)
		}
	}
	if p := c.String("plot"); p != "" && len(loop.history) > 0 {
		title := fmt.Sprintf("zoo train %s — %s, %s, batch %d × %d tokens", job.model.Name(), st.Objective, st.Optimizer, st.Batch, job.window)
		if err := tensorio.AtomicWriteFile(p, func(w io.Writer) error { return renderTrainPlot(w, loop.history, title) }); err != nil && runErr == nil {
			runErr = failed(err)
		}
	}
	if runErr != nil {
		return runErr
	}
	rep := trainReport{Model: job.model.Name(), Backend: job.choice.Backend.Name(), Level: job.choice.Probe.Level,
		Threads: job.threads, Precision: reportedPrecision(job.choice.Backend.Name(), st.Precision), Objective: st.Objective,
		Optimizer: st.Optimizer, Params: layout.Size(), StartStep: from, Steps: st.Steps, Tokens: loop.tokens, Seconds: time.Since(t0).Seconds(),
		Written: []string{outPath, optim.OptimPath(outPath)}}
	if loop.trainTime > 0 {
		rep.TokensPS = float64(loop.tokens) / loop.trainTime.Seconds()
	}
	for i := range loop.history {
		l := &loop.history[i]
		switch {
		case l.eval && l.Step == 0:
			rep.InitialEval, rep.InitialEvalBPB = &l.evalV, &l.bpbV
		case l.eval:
			rep.EvalLoss, rep.EvalBPB = &l.evalV, &l.bpbV
		case l.Step > from && rep.FirstLoss == nil:
			rep.FirstLoss = &l.lossV
		}
		if !l.eval {
			rep.FinalLoss = &l.lossV
		}
	}
	if p := c.String("log"); p != "" {
		rep.Written = append(rep.Written, p)
	}
	if p := c.String("plot"); p != "" {
		rep.Written = append(rep.Written, p)
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rep)
	}
	fmt.Fprintln(c.App.Writer, trainSummary(rep))
	return nil
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

// checkTextFile checks that path names a non-empty regular file.
func checkTextFile(flag, path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, errors.Unwrap(err))
	case st.IsDir():
		return fmt.Errorf("%s %s is a directory; give a text file", flag, path)
	case st.Size() == 0:
		return fmt.Errorf("%s %s is empty (0 bytes): nothing to train on", flag, path)
	}
	return nil
}

// trainBar returns a step progress bar on w when w is a terminal, else nil. prefix starts its
// line ("" for zoo train, "compare clm vanilla.tiny: " for zoo compare).
func trainBar(w io.Writer, prefix string, steps, from int) *stepBar {
	f, ok := underlying(w).(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return newStepBar(w, prefix, steps, from)
}

// stepBarInterval is the least time between two redraws of a stepBar (a variable for tests).
var stepBarInterval = 100 * time.Millisecond

// stepBar is the progress line of a training loop: "step 3/15 loss 5.1234 … 20% |██    |".
// The step count is written once, in the description: the bar shows no counter of its own
// (it repeated the count, and disagreed with it whenever the bar redrew between setting the
// step and describing it). update sets both, then redraws: at most every stepBarInterval,
// and always for the last step.
type stepBar struct {
	bar    *progressbar.ProgressBar
	prefix string
	steps  int
	drawn  time.Time
}

func newStepBar(w io.Writer, prefix string, steps, from int) *stepBar {
	b := &stepBar{prefix: prefix, steps: steps}
	b.bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(b.describe(from, "")),
		progressbar.OptionSetPredictTime(false), progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }), progressbar.OptionClearOnFinish())
	_ = b.bar.Set(from)
	b.drawn = time.Now()
	return b
}

func (b *stepBar) describe(step int, detail string) string {
	return strings.TrimSpace(fmt.Sprintf("%sstep %d/%d %s", b.prefix, step, b.steps, detail))
}

// update shows step (done of b.steps) and detail (loss, rate, ...) on the line.
func (b *stepBar) update(step int, detail string) {
	if step < b.steps && time.Since(b.drawn) < stepBarInterval {
		return
	}
	b.drawn = time.Now()
	// progressbar draws on each call, so the line is drawn with the new description and the
	// old step, then at once with both new.
	b.bar.Describe(b.describe(step, detail))
	_ = b.bar.Set(step)
}

// finish ends the line.
func (b *stepBar) finish() { _ = b.bar.Finish() }

// resumeState is a checkpoint read for --resume.
type resumeState struct {
	path     string
	settings trainSettings
	step     int
}

// readResume reads the settings and step of a checkpoint; the tensors are loaded once the
// model is built (prepareTraining).
func readResume(path string) (*resumeState, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--resume %s: %w", path, errors.Unwrap(err))
	}
	_, hdr, err := tensorio.ReadSafetensors(data)
	if err != nil {
		return nil, fmt.Errorf("--resume %s: %w", path, err)
	}
	raw, ok := hdr[trainMetaKey]
	if !ok {
		return nil, fmt.Errorf("--resume %s was not written by zoo train (no %s metadata); to start from its weights use --weights %s", path, trainMetaKey, path)
	}
	rs := &resumeState{path: path}
	if err := json.Unmarshal([]byte(raw), &rs.settings); err != nil {
		return nil, fmt.Errorf("--resume %s: metadata %s: %w", path, trainMetaKey, err)
	}
	step, err := strconv.Atoi(hdr[optim.MetaStep])
	if err != nil || step < 0 {
		return nil, fmt.Errorf("--resume %s: metadata %s=%q is not a step count", path, optim.MetaStep, hdr[optim.MetaStep])
	}
	rs.step = step
	return rs, nil
}

// trainJob is a model prepared for training.
type trainJob struct {
	model *zooroot.Model
	// infer is the inference build of the same config (nil without held-out data); its
	// parameters are the initial ones, not the trained: use stateDict for those.
	infer   *zooroot.Model
	choice  backends.Choice
	threads int
	window  int
	engine  trainEngine
	closer  func()
	opt     *optim.Optimizer
	par     optim.ParallelFor
	// params is the flat parameter buffer; the graph's parameter tensors alias it.
	params []float32
	// state lists the state_dict in graph order, parameters aliasing params.
	state []tensorio.Named
}

func (j *trainJob) close() {
	if j.closer != nil {
		j.closer()
	}
}

func (j *trainJob) stateDict() optim.StateDict { return j.state }

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

// underlying returns the writer behind the session's synchronised stderr, so that a
// terminal can be recognised through it.
func underlying(w io.Writer) io.Writer {
	if sw, ok := w.(*syncWriter); ok {
		return sw.w
	}
	return w
}
