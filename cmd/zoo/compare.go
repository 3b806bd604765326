package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/compare"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/train"
)

func compareCommand() *cli.Command {
	d := compare.Defaults()
	opt := optimizerFlags(d)
	opt[slices.IndexFunc(opt, func(f cli.Flag) bool { return f.Names()[0] == "warmup" })].(*cli.IntFlag).DefaultText = "a tenth of --steps"
	return &cli.Command{
		Name:      "compare",
		Usage:     "train variants on the same text with the same budget and compare quality, speed, memory and scaling",
		ArgsUsage: "NAME[.PRESET]...",
		Description: "Trains each variant as `zoo train` would, all with the same data, steps, batch, window and schedule, once per\n" +
			"seed (--seeds N: seeds --seed, --seed+1, ...; the default, 0, is 3 seeds up to 1000 steps and 1 beyond), then\n" +
			"measures the trained model's inference at batch 1 and each --seq length as `zoo bench` does and fits time ∝ n^k\n" +
			"and memory ∝ n^k. It prints a verdict first: the variant with the lowest held-out bits per byte, those within\n" +
			"noise of it (means within two standard errors of the difference over the seeds: a tie), the fastest at each\n" +
			"length, the Pareto front of quality against inference time at the longest length, and a leader's extra\n" +
			"parameters; then per variant parameters, training tokens/s, held-out loss and bits per byte as mean ± sd over\n" +
			"the seeds, ms ± sd and memory at each n (! marks a spread above a fifth of the mean), and both exponents. The\n" +
			"defaults make a short comparison of tiny variants meaningful: 300 steps × batch 8 × window 128 at --lr 1e-3\n" +
			"after a tenth of the steps of warm-up, decaying linearly (at zoo train's 1e-4 the curves stay on top of each\n" +
			"other); --eval-every defaults to a tenth of the steps. Each variant trains with its own config; a length beyond\n" +
			"its max_len is timed on a build with max_len raised (untrained weights, marked u), unless --set max_len=N is\n" +
			"given (then skipped). --params-match changes each variant's d_ff so that its parameters match the first\n" +
			"variant's (said beside its row). --json prints one JSON object: variants [{variant, params,\n" +
			"train_tokens_per_s(_sd), eval_loss(_sd), eval_bits_per_byte(_sd), seeds [{seed, eval_loss, eval_bits_per_byte,\n" +
			"train_tokens_per_s}], inference [{n, ms, ms_sd, reps, noisy, mem_bytes, untrained}], time_exponent,\n" +
			"memory_exponent, config_changes}], verdict {best, within_noise, behind, judged, fastest, pareto_front, text,\n" +
			"...}, partial, seeds, window, steps. --report writes one self-contained HTML file (plots embedded as PNG data).\n" +
			"Ctrl-C stops the variant in training and writes the table, JSON and report of those that finished, marked\n" +
			"partial (exit 130). Held-out text: --eval FILE; without it the last 10 % of --input's bytes (--holdout), which\n" +
			"the runs do not train on. The default objective is mlm, which every variant can train." +
			examples("zoo compare vanilla linformer linear performer sparse --preset tiny --input corpus.txt --report report.html",
				"zoo compare vanilla.tiny linear.tiny --input corpus.txt --eval heldout.txt --seeds 5 --seq 128,512,2048 --json"),
		Flags: slices.Concat(variantFlags(), []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "training text `FILE` (any bytes)"},
			&cli.StringFlag{Name: "eval", Usage: "held-out text `FILE` (default: the tail of --input, see --holdout)"},
			&cli.Float64Flag{Name: "holdout", Value: compare.Holdout, Usage: "without --eval: the share `X` of --input's bytes, from its end, held out for evaluation"},
			&cli.IntFlag{Name: "steps", Value: d.Steps, Usage: "optimizer steps `N` per variant and seed"},
			&cli.IntFlag{Name: "seeds", Usage: "train each variant `N` times, with seeds --seed, --seed+1, ... (0: 3 up to 1000 steps, else 1)"},
			&cli.IntFlag{Name: "batch", Value: d.Batch, Usage: "windows per step"},
			&cli.IntFlag{Name: "window", Value: d.Window, Usage: "tokens per window (at most every variant's max_len)"},
			&cli.StringFlag{Name: "objective", Value: train.MLM, Usage: "mlm (masked tokens, BERT's 15 % with 80/10/10) or clm (next token; turns causal on)"},
			&cli.BoolFlag{Name: "params-match", Usage: "set each variant's d_ff so that its parameters match the first variant's"},
		}, opt, []cli.Flag{
			&cli.BoolFlag{Name: "shuffle", Usage: "visit the windows in a seeded random order"},
			&cli.IntFlag{Name: "eval-every", Usage: "also evaluate every `N` steps, for the loss curves (0: a tenth of --steps)"},
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
	name string // as given
	run  trainRun
	// changes are the changes made to the variant's config for training (--params-match).
	changes []string
	limit   compare.Limit
	params  int
}

// compareInference is how zoo compare times the trained models' inference: --seq, --reps,
// --infer-warmup and --threads.
type compareInference struct {
	seqs                  []int
	reps, warmup, threads int
}

func compareAction(c *cli.Context) error {
	names := c.Args().Slice()
	ci := compareInference{reps: c.Int("reps"), warmup: c.Int("infer-warmup"), threads: c.Int("threads")}
	seqs, err := compare.Check(names, zooroot.IsONNXPath, compare.Flags{Input: c.String("input"), Seq: c.String("seq"), Reps: ci.reps,
		Warmup: ci.warmup, Threads: ci.threads, EvalEvery: c.Int("eval-every")})
	if err != nil {
		return badInput(err)
	}
	ci.seqs = seqs
	reportPath := c.String("report")
	if reportPath != "" {
		if err := checkExtension("--report", reportPath, ".html", ".htm"); err != nil {
			return badInput(err)
		}
		if err := checkOutputPath(reportPath); err != nil {
			return badInputf("--report: %w", err)
		}
	}
	data, heldDoc, err := compare.Data(c.String("input"), c.String("eval"), c.Float64("holdout"), c.IsSet("holdout"))
	if err != nil {
		return badInput(err)
	}
	plans, err := planCompare(c.Context, c, names)
	if err != nil {
		return err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	var limits []compare.Limit
	for _, p := range plans {
		limits = append(limits, p.limit)
	}
	window, err := compare.Window(c.Int("window"), limits)
	if err != nil {
		return badInput(err)
	}
	for i := range plans {
		plans[i].run.cfg.Window = window
	}
	st0 := plans[0].run.cfg
	seeds, err := compare.Seeds(c.Int("seeds"), st0.Steps, st0.Seed)
	if err != nil {
		return badInput(err)
	}
	setup := compare.Setup{Input: data.Train.String(), Eval: heldDoc, Objective: st0.Objective, Steps: st0.Steps, Batch: st0.Batch,
		Window: window, Optimizer: st0.Optimizer, LR: st0.LR, Warmup: st0.Warmup, Schedule: st0.Schedule, Seeds: seeds,
		Backend: choice.Backend.Name(), Level: choice.Probe.Level, Threads: cmp.Or(ci.threads, choice.Probe.Threads), Seqs: seqs, Reps: ci.reps,
		InferWarmup: ci.warmup, CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), Zoo: version, GoVer: runtime.Version(),
		Command: compare.CommandLine(names, compare.GivenFlags(c.Command.Flags, c.IsSet, c.Value, c.StringSlice)),
		MemDoc:  bench.MemoryDoc, ParamsMatch: c.Bool("params-match"), Total: len(plans)}
	asJSON := c.Bool(flagJSON.Name)
	table := compare.NewTable(c.App.Writer, names, seqs)
	if !asJSON {
		table.Begin(setup)
	}
	// Ctrl-C stops the variant in training; the ones that finished are reported.
	if s, err := sessionOf(c.Context); err == nil {
		s.finishOnSignal()
	}
	results, stopErr := compareAll(c.Context, c, plans, data, seeds, ci, c.App.ErrWriter)
	if stopErr != nil && c.Context.Err() == nil {
		return stopErr
	}
	setup.Partial = stopErr != nil
	if err := compare.Finish(c.App.Writer, results, setup, data, table, asJSON, reportPath); err != nil {
		return failed(err)
	}
	return stopErr
}

// planCompare resolves and builds every variant with the shared flags (so that a config a
// variant refuses, such as clm where it cannot hide later positions, fails at once), and
// with --params-match sets each variant's d_ff so that its parameters match the first's.
func planCompare(ctx context.Context, c flags, names []string) ([]comparePlan, error) {
	cfg, err := trainConfig(c)
	if err != nil {
		return nil, err
	}
	cfg.EvalEvery = c.Int("eval-every")
	compare.Budget(&cfg, c.IsSet("warmup"))
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var plans []comparePlan
	for _, name := range names {
		sets, err := parseSets(c.StringSlice(flagSet.Name))
		if err != nil {
			return nil, badInput(err)
		}
		spec, err := resolveVariant(ctx, c, name)
		if err != nil {
			return nil, err
		}
		p := comparePlan{name: name, run: trainRun{model: withPreset(name, c.String(flagPreset.Name)), sets: sets, cfg: cfg}}
		p.limit.Variant = name
		if mp := spec.Variant.Describe().Caps.MaxLenParam; mp != "" {
			p.limit.MaxLen, p.limit.Param = spec.Config.Int(mp), mp
			_, p.limit.Set = sets[mp]
		}
		// Build it once now: a config the variant refuses (clm on linformer, whose
		// projections mix every position) fails here, before the first variant trains.
		if p.params, err = comparePlanParams(ctx, c, p.run); err != nil {
			return nil, fmt.Errorf("compare %s: %w", name, err)
		}
		if c.Bool("params-match") && len(plans) > 0 {
			if err := matchPlanParams(ctx, c, &p, spec.Config.Int("d_ff"), plans[0]); err != nil {
				return nil, err
			}
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// comparePlanParams builds the run's model and counts its trained parameters.
func comparePlanParams(ctx context.Context, c flags, run trainRun) (int, error) {
	m, err := loadTrainModel(ctx, c, run)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return train.Parameters(m)
}

// withSet returns run with hyperparameter k set to v (its own --set values untouched).
func withSet(run trainRun, k string, v int) trainRun {
	run.sets = maps.Clone(run.sets)
	if run.sets == nil {
		run.sets = map[string]string{}
	}
	run.sets[k] = strconv.Itoa(v)
	return run
}

// matchPlanParams sets p's d_ff so that its parameters come closest to ref's (--params-match).
func matchPlanParams(ctx context.Context, c flags, p *comparePlan, dff int, ref comparePlan) error {
	if _, given := p.run.sets["d_ff"]; given {
		return badInputf("--params-match sets d_ff; drop --set d_ff=%s", p.run.sets["d_ff"])
	}
	if dff == 0 {
		return badInputf("--params-match: %s has no d_ff to resize", p.name)
	}
	if p.params == ref.params {
		return nil
	}
	count := func(d int) (int, error) { return comparePlanParams(ctx, c, withSet(p.run, "d_ff", d)) }
	d, got, err := train.MatchParams(count, dff, ref.params)
	if err != nil {
		return badInputf("--params-match: %s cannot match %s's %s parameters: %v", p.name, ref.name, format.HumanCount(int64(ref.params)), err)
	}
	p.run = withSet(p.run, "d_ff", d)
	p.changes = append(p.changes, compare.ParamsNote(d, dff, got, ref.name, ref.params))
	p.params = got
	return nil
}

// compareAll compares the plans in turn, saying on stderr as each finishes; it returns the
// results of those that finished, and the error that stopped it.
func compareAll(ctx context.Context, c flags, plans []comparePlan, data train.Data, seeds []uint64, ci compareInference, stderr io.Writer) ([]compare.Result, error) {
	var results []compare.Result
	for i, p := range plans {
		which := fmt.Sprintf("(%d/%d)", i+1, len(plans))
		r, err := compareOne(ctx, c, p, data, seeds, ci, which, stderr)
		if err != nil {
			return results, err
		}
		results = append(results, r)
		// One line per finished variant, so that a log shows how far it got.
		fmt.Fprintf(stderr, "zoo compare: %s %s done: %.3f bits per byte (%s)\n", which, p.name, r.EvalBPB, format.Plural(len(r.Seeds), "seed"))
	}
	return results, nil
}

// compareOne trains one variant once per seed and measures the first seed's trained model's
// inference; the progress goes to stderr when it is a terminal.
func compareOne(ctx context.Context, c flags, p comparePlan, data train.Data, seeds []uint64, ci compareInference, which string, stderr io.Writer) (compare.Result, error) {
	r := compare.Result{Variant: p.name, ConfigChanges: p.changes, Seeds: []compare.Seed{}, Params: p.params}
	var first compareTrained
	defer func() {
		if first.infer != nil {
			first.infer.Close()
		}
	}()
	for i, seed := range seeds {
		run := p.run
		run.cfg.Seed = seed
		label := fmt.Sprintf("compare %s %s", which, p.name)
		if len(seeds) > 1 {
			label += fmt.Sprintf(" seed %d (%d/%d)", seed, i+1, len(seeds))
		}
		sd, t, err := compareTrain(ctx, c, run, data, label, stderr, i == 0)
		if err != nil {
			return r, fmt.Errorf("compare %s: %w", p.name, err)
		}
		if i == 0 {
			first = t
			r.Model, r.Config = t.infer.Name(), t.infer.Config().JSON()
		}
		r.AddSeed(sd)
	}
	return r, compareInfer(ctx, c, &r, p, first, ci, which+" "+p.name, stderr)
}

// compareTrained is a trained model's inference build with the backend and threads it
// trained on.
type compareTrained struct {
	infer   *zooroot.Model
	choice  backends.Choice
	threads int
}

// compareTrain trains run once and returns its scores and curves and, when keep, the trained
// model (which the caller closes).
func compareTrain(ctx context.Context, c flags, run trainRun, data train.Data, label string, stderr io.Writer, keep bool) (compare.Seed, compareTrained, error) {
	sd := compare.Seed{Seed: run.cfg.Seed}
	m, err := loadTrainModel(ctx, c, run)
	if err != nil {
		return sd, compareTrained{}, err
	}
	defer m.Close()
	// compare keeps no checkpoint (no Config.Output): the trained weights live on in the
	// inference build. The training programs are closed when it returns, so that their
	// buffers do not weigh on the memory measured.
	tr, err := train.New(ctx, m, data, run.cfg)
	if err != nil {
		return sd, compareTrained{}, err
	}
	defer tr.Close()
	if bar := trainBar(stderr, label+": ", run.cfg.Steps, 0); bar != nil {
		tr.OnStep(trainBarHook(bar, 0, run.cfg.Steps))
		defer bar.finish()
	}
	res, err := tr.Run(ctx)
	if err != nil {
		return sd, compareTrained{}, err
	}
	sd.TrainTokensPS = res.TokensPerSecond()
	for _, s := range res.History {
		if s.Eval {
			sd.Eval = append(sd.Eval, compare.Point{Step: s.Step, Loss: s.EvalLoss, BitsPerByte: s.EvalBitsPerByte})
			sd.EvalLoss, sd.EvalBPB = s.EvalLoss, s.EvalBitsPerByte
		} else {
			sd.Train = append(sd.Train, compare.Point{Step: s.Step, Loss: s.Loss})
		}
	}
	if !keep {
		return sd, compareTrained{}, nil
	}
	infer, err := tr.Trained(ctx)
	return sd, compareTrained{infer: infer, choice: tr.Backend(), threads: tr.Threads()}, err
}

// compareInfer times inference of the trained model at every --seq length it reaches, and
// beyond its max_len on a build with max_len raised (untrained weights: time and memory do
// not depend on their values), unless --set gave max_len (then those lengths are skipped).
func compareInfer(ctx context.Context, c flags, r *compare.Result, p comparePlan, t compareTrained, ci compareInference, which string, stderr io.Writer) error {
	trainedLens, raisedLens, notes := p.limit.Split(ci.seqs)
	r.Notes = append(r.Notes, notes...)
	builds := []struct {
		m    *zooroot.Model
		lens []int
	}{{t.infer, trainedLens}, {nil, raisedLens}}
	if len(raisedLens) > 0 {
		longest := slices.Max(raisedLens)
		run := withSet(p.run, p.limit.Param, longest)
		opts, err := loadOptions(ctx, c)
		if err != nil {
			return err
		}
		if builds[1].m, err = zooroot.Load(ctx, run.model, zooroot.LoadOptions{Set: run.sets, Seed: run.cfg.Seed, Registries: opts.Registries,
			Plugins: opts.Plugins, Backend: opts.Backend, Configure: train.EvalHook(run.cfg.Objective, run.sets)}); err != nil {
			return fmt.Errorf("compare %s: build with %s=%d to time n=%d: %w", p.name, p.limit.Param, longest, longest, err)
		}
		defer builds[1].m.Close()
		r.Notes = append(r.Notes, p.limit.RaisedNote(raisedLens, longest))
	}
	bb := bench.Backend{Name: t.choice.Backend.Name(), Level: t.choice.Probe.Level, Threads: t.threads}
	status := bench.NewProgress(stderr, "compare", isTerminal(underlying(stderr)))
	defer status.Done()
	var rows []bench.Row
	r.Inference = []compare.Inference{}
	for i, b := range builds {
		if len(b.lens) == 0 {
			continue
		}
		bm := &benchModel{Model: b.m, graph: b.m.Graph(), maxLen: max(p.limit.MaxLen, slices.Max(b.lens))}
		var err error
		if bm.plan, err = zooroot.PlanFeeds(b.m.Graph(), nil); err != nil {
			return badInput(err)
		}
		if err := guardBench(bm, []int{1}, b.lens, false); err != nil {
			return err
		}
		prog, err := t.choice.Backend.Compile(b.m.Graph(), backends.Options{Threads: ci.threads})
		if err != nil {
			return failed(fmt.Errorf("compile %s on %s: %w", b.m.Name(), bb.Name, err))
		}
		in, rs, err := compare.Infer(ctx, bm.target(), prog, bb, b.lens, ci.reps, ci.warmup, status, which, i == 1)
		prog.Close()
		if err != nil {
			return failed(err)
		}
		r.Inference, rows = append(r.Inference, in...), append(rows, rs...)
	}
	status.Done()
	r.SetFit(bench.FitRows(rows))
	return nil
}
