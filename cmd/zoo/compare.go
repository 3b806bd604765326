package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/compare"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// compareHoldout is the share of --input held out for evaluation when no --eval is given.
const compareHoldout = 0.1

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "train variants on the same text with the same budget and compare quality, speed, memory and scaling",
		ArgsUsage: "NAME[.PRESET]...",
		Description: "Trains each variant as `zoo train` would, all with the same data, steps, batch, window, schedule and seed, then\n" +
			"measures the trained model's inference at batch 1 and each --seq length as `zoo bench` does (same timing and\n" +
			"peak-RSS-growth memory) and fits time ∝ n^k and memory ∝ n^k. Per variant it reports parameters, training\n" +
			"tokens/s, held-out loss and bits per byte after the last step, ms and memory at each n, and both exponents;\n" +
			"the table prints a row as each variant finishes (progress on stderr when it is a terminal); --json prints\n" +
			"one JSON array on stdout instead, one object per variant: variant, params, train_tokens_per_s, eval_loss,\n" +
			"eval_bits_per_byte, inference [{n, ms, mem_bytes}], time_exponent, memory_exponent. --report writes one\n" +
			"self-contained HTML file (plots embedded as PNG data, no script, nothing fetched): the table, loss curves,\n" +
			"time and memory against n on log axes, and quality against speed.\n" +
			"Held-out text: --eval FILE; without it the last 10 % of --input's bytes (--holdout) is held out and the run\n" +
			"trains on the bytes before it, so no variant ever sees the text it is scored on. The default objective is\n" +
			"mlm, which every variant can train (clm needs a causal hyperparameter, which linformer and nystrom lack).\n" +
			"A variant whose max_len is below the longest --seq is built with max_len raised to it (noted; linformer's\n" +
			"E and F grow with it), unless --set max_len=N is given, in which case longer lengths are skipped for it." +
			examples("zoo compare vanilla linformer linear performer sparse --preset tiny --input corpus.txt --steps 200 --report report.html",
				"zoo compare vanilla.tiny linear.tiny --input corpus.txt --eval heldout.txt --seq 128,512,2048 --json"),
		Flags: slices.Concat(variantFlags(), []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "training text `FILE` (any bytes)"},
			&cli.StringFlag{Name: "eval", Usage: "held-out text `FILE` (default: the tail of --input, see --holdout)"},
			&cli.Float64Flag{Name: "holdout", Value: compareHoldout, Usage: "without --eval: the share `X` of --input's bytes, from its end, held out for evaluation"},
			&cli.IntFlag{Name: "steps", Value: 1000, Usage: "optimizer steps `N` per variant"},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "windows per step"},
			&cli.IntFlag{Name: "window", Usage: "tokens per window (default: min(512, the smallest max_len of the variants))"},
			&cli.StringFlag{Name: "objective", Value: objectiveMLM, Usage: "mlm (masked tokens, BERT's 15 % with 80/10/10) or clm (next token; turns causal on)"},
		}, optimizerFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "shuffle", Usage: "visit the windows in a seeded random order"},
			&cli.IntFlag{Name: "eval-every", Usage: "also evaluate every `N` steps, for the loss curves (0: before and after training only)"},
			&cli.StringFlag{Name: "seq", Value: "128,512,2048", Usage: "inference lengths `N,N,...`"},
			&cli.IntFlag{Name: "reps", Aliases: []string{"r"}, Value: 5, Usage: "timed inference runs per length"},
			&cli.IntFlag{Name: "infer-warmup", Value: 1, Usage: "untimed inference runs before the timed ones"},
			&cli.StringFlag{Name: "report", Usage: "write the HTML report to `FILE.html`"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			flagCheckpointActivations,
			flagBackend, flagJSON,
		}),
		Action: compareAction,
	}
}

// comparePlan is one variant of a comparison, resolved before anything trains so that a
// typo in the last name fails at once.
type comparePlan struct {
	name  string // as given
	st    trainSettings
	notes []string
	// maxLen is the variant's length limit after any raise (0: none).
	maxLen int
}

// trainCalls are the training layer's entry points as compare calls them, bound by the
// Action to the command's flags.
type trainCalls struct {
	settings func(name string) (trainSettings, error)
	resolve  func(name string) (variant.Variant, registry.Entry, string, variant.Config, error)
	build    func(st trainSettings) error
	prepare  func(st trainSettings, data trainData) (*trainJob, error)
}

func compareAction(c *cli.Context) error {
	names := c.Args().Slice()
	seqs, err := compare.Check(names, isONNXPath, compare.Flags{Input: c.String("input"), Seq: c.String("seq"), Reps: c.Int("reps"),
		Warmup: c.Int("infer-warmup"), Threads: c.Int("threads"), EvalEvery: c.Int("eval-every")})
	if err != nil {
		return badInput(err)
	}
	reportPath := c.String("report")
	if reportPath != "" {
		if err := checkExtension("--report", reportPath, ".html", ".htm"); err != nil {
			return badInput(err)
		}
		if err := checkOutputPath(reportPath); err != nil {
			return badInputf("--report: %w", err)
		}
	}
	data, heldDoc, err := compareData(c.String("input"), c.String("eval"), c.Float64("holdout"), c.IsSet("holdout"))
	if err != nil {
		return err
	}
	calls := trainCalls{
		settings: func(name string) (trainSettings, error) { return settingsFromFlags(c, name) },
		resolve: func(name string) (variant.Variant, registry.Entry, string, variant.Config, error) {
			return resolveVariant(c, name)
		},
		build:   func(st trainSettings) error { _, _, err := buildTrainModel(c, st, false); return err },
		prepare: func(st trainSettings, data trainData) (*trainJob, error) { return prepareTraining(c, st, nil, data) },
	}
	plans, err := planCompare(calls, names, c.StringSlice(flagSet.Name), slices.Max(seqs))
	if err != nil {
		return err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	window := setWindow(plans, c.Int("window"))
	run := compareRun{stderr: c.App.ErrWriter, evalEvery: c.Int("eval-every"), threads: c.Int("threads"), reps: c.Int("reps"),
		warmup: c.Int("infer-warmup"), seqs: seqs, data: data, prepare: calls.prepare}
	st0 := plans[0].st
	setup := compare.Setup{Input: data.train.describe(), Eval: heldDoc, Objective: st0.Objective, Steps: st0.Steps, Batch: st0.Batch,
		Window: window, Optimizer: st0.Optimizer, LR: st0.LR, Warmup: st0.Warmup, Schedule: st0.Schedule, Seed: st0.Seed,
		Backend: choice.Backend.Name(), Level: choice.Probe.Level, Threads: cmp.Or(run.threads, choice.Probe.Threads), Seqs: seqs, Reps: run.reps,
		InferWarmup: run.warmup, CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), Zoo: version, GoVer: runtime.Version(),
		Command:   compare.CommandLine(names, givenFlags(c.Command.Flags, c.IsSet, c.Value, c.StringSlice)),
		TimingDoc: bench.TimingDoc, MemDoc: bench.MemoryDoc}
	asJSON := c.Bool(flagJSON.Name)
	table := compare.NewTable(c.App.Writer, names, seqs)
	if !asJSON {
		table.Begin(setup)
	}
	var results []compare.Result
	for i, p := range plans {
		r, err := run.one(c.Context, p, fmt.Sprintf("(%d/%d)", i+1, len(plans)))
		if err != nil {
			return err
		}
		results = append(results, r)
		if !asJSON {
			table.Row(r)
		}
	}
	if reportPath != "" {
		if err := tensorio.AtomicWriteFile(reportPath, func(w io.Writer) error { return compare.WriteHTML(w, results, setup) }); err != nil {
			return failed(fmt.Errorf("--report %s: %w", reportPath, err))
		}
	}
	if asJSON {
		return format.WriteJSON(c.App.Writer, results)
	}
	table.End(results, setup)
	if reportPath != "" {
		fmt.Fprintf(c.App.Writer, "report: %s\n", reportPath)
	}
	return nil
}

// setWindow sets the window every variant trains with, flag when given, and returns it: it
// must fit every variant, so the smallest limit decides (compare.Window).
func setWindow(plans []comparePlan, flag int) int {
	var maxLens []int
	for _, p := range plans {
		maxLens = append(maxLens, p.maxLen)
	}
	window := compare.Window(flag, maxLens)
	for i := range plans {
		plans[i].st.Window = window
	}
	return window
}

// compareData returns what every variant trains and evaluates on, and a description of the
// held-out text: the --eval file evalPath, or the tail of --input (frac of its bytes;
// fracSet: --holdout was given).
func compareData(in, evalPath string, frac float64, fracSet bool) (trainData, string, error) {
	if err := checkTextFile("--input", in); err != nil {
		return trainData{}, "", badInput(err)
	}
	if evalPath != "" {
		if fracSet {
			return trainData{}, "", badInputf("--holdout splits --input when there is no --eval file; give one of them")
		}
		if err := checkTextFile("--eval", evalPath); err != nil {
			return trainData{}, "", badInput(err)
		}
		return trainData{train: wholeFile("--input", in), held: wholeFile("--eval", evalPath)}, "--eval " + evalPath, nil
	}
	fi, err := os.Stat(in)
	if err != nil {
		return trainData{}, "", badInputf("--input %s: %w", in, err)
	}
	cut, desc, err := compare.Holdout(in, fi.Size(), frac)
	if err != nil {
		return trainData{}, "", badInput(err)
	}
	held := fi.Size() - cut
	return trainData{train: textSource{flag: "--input", path: in, size: cut}, held: textSource{flag: "--input", path: in, off: cut, size: held}}, desc, nil
}

// planCompare resolves and builds every variant with the shared flags (so that a config a
// variant refuses, such as clm where it cannot hide later positions, fails at once), and
// raises a max_len below the longest inference length (unless sets, the --set values, give
// max_len, which then skips the longer lengths).
func planCompare(calls trainCalls, names, sets []string, longest int) ([]comparePlan, error) {
	userSets := map[string]bool{}
	for _, s := range sets {
		k, _, _ := strings.Cut(s, "=")
		userSets[strings.TrimSpace(k)] = true
	}
	var plans []comparePlan
	for _, name := range names {
		st, err := calls.settings(name)
		if err != nil {
			return nil, badInput(err)
		}
		if err := st.validate(); err != nil {
			return nil, badInput(err)
		}
		v, _, _, cfg, err := calls.resolve(name)
		if err != nil {
			return nil, err
		}
		p := comparePlan{name: name, st: st}
		if mp := v.Describe().Caps.MaxLenParam; mp != "" {
			var raise, note string
			if p.maxLen, raise, note = compare.MaxLen(mp, cfg.Int(mp), longest, userSets[mp]); raise != "" {
				p.st.Sets = append(slices.Clone(p.st.Sets), raise)
				p.notes = append(p.notes, note)
			}
		}
		// Build it once now: a config the variant refuses (clm on linformer, whose
		// projections mix every position) fails here, before the first variant trains.
		if err := calls.build(p.st); err != nil {
			return nil, fmt.Errorf("compare %s: %w", name, err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// compareRun is what every variant of a comparison shares: the data, the inference
// lengths and runs, the flags of the training loop, stderr for progress, and the training
// layer's prepare (bound to the command's flags).
type compareRun struct {
	stderr             io.Writer
	evalEvery, threads int
	reps, warmup       int
	seqs               []int
	data               trainData
	prepare            func(st trainSettings, data trainData) (*trainJob, error)
}

// one trains one variant and measures its trained model's inference; which says which
// of how many it is ("(1/3)").
func (cr compareRun) one(ctx context.Context, p comparePlan, which string) (compare.Result, error) {
	r := compare.Result{Variant: p.name, Notes: p.notes}
	job, err := cr.prepare(p.st, cr.data)
	if err != nil {
		return r, err
	}
	defer job.close()
	r.Model, r.Config = job.model.displayName(), job.model.Config.JSON()
	layout := job.opt.Layout()
	r.Params = layout.Size()
	st := p.st
	loop := &trainLoop{
		eng: job.engine, opt: job.opt, sched: st.schedule(), clip: st.Clip, par: job.par,
		params: job.params, grads: make([]float32, layout.Size()),
		evalEvery: cr.evalEvery, hasEval: true, lastSaved: -1,
		// compare keeps no checkpoint: the trained weights live on in the inference build.
		save: func(int) error { return nil },
	}
	bar := trainBar(cr.stderr, st.Steps, 0)
	if bar != nil {
		loop.progress = func(k int, loss, _, tps float64, _ time.Duration) {
			_ = bar.Set(k)
			bar.Describe(fmt.Sprintf("compare %s %s: step %d/%d loss %.4f %.0f tok/s", which, p.name, k, st.Steps, loss, tps))
		}
	}
	runErr := loop.run(ctx, 0, st.Steps)
	if bar != nil {
		_ = bar.Finish()
	}
	if runErr != nil {
		return r, fmt.Errorf("compare %s: %w", p.name, runErr)
	}
	if loop.trainTime > 0 {
		r.TrainTokensPS = float64(loop.tokens) / loop.trainTime.Seconds()
	}
	r.TrainSeconds = loop.trainTime.Seconds()
	for _, l := range loop.history {
		if l.eval {
			r.Eval = append(r.Eval, compare.Point{Step: l.Step, Loss: l.evalV, BitsPerByte: l.bpbV})
			r.EvalLoss, r.EvalBPB = l.evalV, l.bpbV
		} else {
			r.Train = append(r.Train, compare.Point{Step: l.Step, Loss: l.lossV})
		}
	}

	// Inference of the trained model, timed as zoo bench times it. The training programs
	// are closed first so that their buffers do not weigh on the memory measured.
	trained := job.model.Graph.StateDict()
	job.close()
	job.closer = nil
	infer := job.infer
	if err := graph.LoadStateDict(infer.Graph, trained); err != nil {
		return r, failed(fmt.Errorf("compare %s: the trained weights do not fit its inference build: %w", p.name, err))
	}
	bm := &benchModel{model: infer, graph: infer.Graph, maxLen: p.maxLen}
	if bm.tok, bm.mask, err = tokenInputs(infer.Graph); err != nil {
		return r, badInput(err)
	}
	lengths, notes := compare.Lengths(cr.seqs, p.maxLen)
	r.Notes = append(r.Notes, notes...)
	if err := guardBench(bm, []int{1}, lengths, false); err != nil {
		return r, err
	}
	bb := bench.Backend{Name: job.choice.Backend.Name(), Level: job.choice.Probe.Level, Threads: job.threads}
	prog, err := job.choice.Backend.Compile(infer.Graph, backends.Options{Threads: cr.threads})
	if err != nil {
		return r, failed(fmt.Errorf("compile %s on %s: %w", infer.displayName(), bb.Name, err))
	}
	defer prog.Close()
	status := bench.NewProgress(cr.stderr, "compare", isTerminal(underlying(cr.stderr)))
	defer status.Done()
	var fit bench.Fit
	if r.Inference, fit, err = compare.Infer(ctx, bm.target(), prog, bb, lengths, cr.reps, cr.warmup, status, which+" "+p.name); err != nil {
		return r, failed(err)
	}
	r.SetFit(fit)
	return r, nil
}

// givenFlags lists the flags of a command given on its command line, in the order the
// command defines them, with their values as typed (isSet, value and slice are the
// context's IsSet, Value and StringSlice).
func givenFlags(flags []cli.Flag, isSet func(string) bool, value func(string) any, slice func(string) []string) []compare.Flag {
	var out []compare.Flag
	for _, f := range flags {
		name := f.Names()[0]
		if !isSet(name) {
			continue
		}
		switch f.(type) {
		case *cli.BoolFlag:
			out = append(out, compare.Flag{Name: name, Bool: true})
		case *cli.StringSliceFlag:
			out = append(out, compare.Flag{Name: name, Values: slice(name)})
		default:
			out = append(out, compare.Flag{Name: name, Values: []string{fmt.Sprint(value(name))}})
		}
	}
	return out
}
