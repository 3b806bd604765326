package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/compare"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/train"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// compareHoldout is the share of --input held out for evaluation when no --eval is given.
const compareHoldout = 0.1

// compareDefaults are zoo compare's defaults of the training budget: 300 steps of 8 windows
// of 128 tokens at a peak learning rate of 1e-3 after a tenth of the steps of warm-up (30),
// decaying linearly. At zoo train's 1e-4 and no warm-up, 300 steps leave every tiny variant
// near chance and their curves on top of each other; at 1e-3 they separate within 100 steps.
func compareDefaults() train.Config {
	d := train.DefaultConfig()
	d.Steps, d.LR, d.Window = 300, 1e-3, 128
	return d
}

// compareFlagsWith replaces the flags of fs named like one of with (compare's own usage).
func compareFlagsWith(fs []cli.Flag, with ...cli.Flag) []cli.Flag {
	out := slices.Clone(fs)
	for _, w := range with {
		for i, f := range out {
			if f.Names()[0] == w.Names()[0] {
				out[i] = w
			}
		}
	}
	return out
}

// compareAutoSeeds is the number of seeds --seeds 0 trains each variant with when --steps is
// at most compareAutoSeedSteps (one beyond: a long run is its own budget).
const (
	compareAutoSeeds     = 3
	compareAutoSeedSteps = 1000
)

func compareCommand() *cli.Command {
	d := compareDefaults()
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
			&cli.Float64Flag{Name: "holdout", Value: compareHoldout, Usage: "without --eval: the share `X` of --input's bytes, from its end, held out for evaluation"},
			&cli.IntFlag{Name: "steps", Value: d.Steps, Usage: "optimizer steps `N` per variant and seed"},
			&cli.IntFlag{Name: "seeds", Usage: "train each variant `N` times, with seeds --seed, --seed+1, ... (0: 3 up to 1000 steps, else 1)"},
			&cli.IntFlag{Name: "batch", Value: d.Batch, Usage: "windows per step"},
			&cli.IntFlag{Name: "window", Value: d.Window, Usage: "tokens per window (at most every variant's max_len)"},
			&cli.StringFlag{Name: "objective", Value: train.MLM, Usage: "mlm (masked tokens, BERT's 15 % with 80/10/10) or clm (next token; turns causal on)"},
			&cli.BoolFlag{Name: "params-match", Usage: "set each variant's d_ff so that its parameters match the first variant's"},
		}, compareFlagsWith(optimizerFlags(d), &cli.IntFlag{Name: "warmup", DefaultText: "a tenth of --steps", Usage: "steps `N` of linear warm-up from 0 to --lr"}), []cli.Flag{
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
	// maxLen is the variant's length limit (0: none), maxLenParam its hyperparameter and
	// maxLenSet whether --set gives it (then longer lengths are skipped, not raised).
	maxLen      int
	maxLenParam string
	maxLenSet   bool
	params      int
}

// compareInference is how zoo compare times the trained models' inference: --seq, --reps,
// --infer-warmup and --threads.
type compareInference struct {
	seqs                  []int
	reps, warmup, threads int
}

func compareAction(c *cli.Context) error {
	names := c.Args().Slice()
	if err := checkCompareNames(names, c.String("input")); err != nil {
		return err
	}
	seqs, err := parseCounts("seq", c.String("seq"))
	if err != nil {
		return badInput(err)
	}
	ci := compareInference{seqs: seqs, reps: c.Int("reps"), warmup: c.Int("infer-warmup"), threads: c.Int("threads")}
	if ci.reps < 1 || ci.warmup < 0 || ci.threads < 0 {
		return badInputf("--reps must be at least 1, --infer-warmup and --threads not negative (got %d, %d, %d)", ci.reps, ci.warmup, ci.threads)
	}
	if n := c.Int("eval-every"); n < 0 {
		return badInputf("--eval-every must not be negative, got %d", n)
	}
	nSeeds := c.Int("seeds")
	switch {
	case nSeeds < 0:
		return badInputf("--seeds must not be negative, got %d", nSeeds)
	case nSeeds == 0 && c.Int("steps") <= compareAutoSeedSteps:
		nSeeds = compareAutoSeeds
	case nSeeds == 0:
		nSeeds = 1
	}
	reportPath := c.String("report")
	if err := checkReportPath(reportPath); err != nil {
		return err
	}
	data, heldDoc, err := compareData(c.String("input"), c.String("eval"), c.Float64("holdout"), c.IsSet("holdout"))
	if err != nil {
		return err
	}
	plans, err := planCompare(c.Context, c, names)
	if err != nil {
		return err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	window, err := compareWindow(plans, c.Int("window"))
	if err != nil {
		return err
	}
	nThreads := choice.Probe.Threads
	if ci.threads > 0 {
		nThreads = ci.threads
	}
	st0 := plans[0].run.cfg
	var seeds []uint64
	for i := range nSeeds {
		seeds = append(seeds, st0.Seed+uint64(i))
	}
	setup := compare.Setup{Input: data.Train.String(), Eval: heldDoc, Objective: st0.Objective, Steps: st0.Steps, Batch: st0.Batch,
		Window: window, Optimizer: st0.Optimizer, LR: st0.LR, Warmup: st0.Warmup, Schedule: st0.Schedule, Seeds: seeds,
		Backend: choice.Backend.Name(), Level: choice.Probe.Level, Threads: nThreads, Seqs: seqs, Reps: ci.reps, InferWarmup: ci.warmup,
		CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), Zoo: version, GoVer: runtime.Version(), Command: commandLine(c.Args().Slice(), c.Command.Flags, c),
		MemDoc: bench.MemoryDoc, ParamsMatch: c.Bool("params-match"), Total: len(plans)}
	asJSON := c.Bool(flagJSON.Name)
	var table *compare.Table
	if !asJSON {
		table = compare.NewTable(c.App.Writer, names, seqs)
		table.Begin(setup)
	}
	// Ctrl-C stops the variant in training; the ones that finished are reported.
	if s, err := sessionOf(c.Context); err == nil {
		s.finishOnSignal()
	}
	var results []compare.Result
	var stopErr error
	for i, p := range plans {
		r, err := compareOne(c.Context, c, p, data, seeds, ci, fmt.Sprintf("(%d/%d)", i+1, len(plans)), c.App.ErrWriter)
		if err != nil {
			if c.Context.Err() != nil {
				stopErr = err
				break
			}
			return err
		}
		results = append(results, r)
		// One line per finished variant on stderr, so that a log shows how far it got.
		fmt.Fprintf(c.App.ErrWriter, "zoo compare: %s %s done: %.3f bits per byte (%s)\n", fmt.Sprintf("(%d/%d)", i+1, len(plans)), p.name, r.EvalBPB,
			format.Plural(len(r.Seeds), "seed"))
	}
	setup.Partial = stopErr != nil
	var contenders []train.Contender
	for _, r := range results {
		contenders = append(contenders, r.Contender())
	}
	verdict := train.Judge(contenders, window, corpusName(data))
	if reportPath != "" && len(results) > 0 {
		if err := tensorio.AtomicWriteFile(reportPath, func(w io.Writer) error { return compare.WriteHTML(w, results, verdict, setup) }); err != nil {
			return failed(fmt.Errorf("--report %s: %w", reportPath, err))
		}
	}
	if asJSON {
		if results == nil {
			results = []compare.Result{}
		}
		doc := compare.Document{Variants: results, Verdict: verdict, Partial: setup.Partial, Seeds: seeds, Window: window, Steps: st0.Steps}
		if err := format.WriteJSON(c.App.Writer, doc); err != nil {
			return err
		}
		return stopErr
	}
	table.End(results, verdict, setup)
	if reportPath != "" && len(results) > 0 {
		fmt.Fprintf(c.App.Writer, "report: %s\n", reportPath)
	}
	return stopErr
}

// corpusName names the held-out text for the verdict: the file's base name.
func corpusName(d train.Data) string {
	if d.Held.Path != "" {
		return filepath.Base(d.Held.Path)
	}
	return d.Held.Name
}

// checkCompareNames checks the variants to compare and that there is a text to train on.
func checkCompareNames(names []string, input string) error {
	if len(names) == 0 {
		return badInputf("compare: want the variants to compare (see `zoo list`), e.g. zoo compare vanilla linformer --preset tiny --input corpus.txt")
	}
	seen := map[string]bool{}
	for _, n := range names {
		if zooroot.IsONNXPath(n) {
			return badInputf("compare: %s is an ONNX file; zoo compare trains variants (see `zoo list`)", n)
		}
		if seen[n] {
			return badInputf("compare: %s is named twice", n)
		}
		seen[n] = true
	}
	if input == "" {
		return badInputf("compare: --input FILE is required (the text to train on)")
	}
	return nil
}

// checkReportPath checks --report's name and that it can be written ("" for none).
func checkReportPath(path string) error {
	if path == "" {
		return nil
	}
	if err := checkExtension("--report", path, ".html", ".htm"); err != nil {
		return badInput(err)
	}
	if err := checkOutputPath(path); err != nil {
		return badInputf("--report: %w", err)
	}
	return nil
}

// compareWindow settles the window every variant trains with and sets it in their Configs:
// --window (0: min(512, the smallest max_len)), which must fit every variant's own max_len.
func compareWindow(plans []comparePlan, window int) (int, error) {
	smallest := 0
	for _, p := range plans {
		if p.maxLen > 0 && (smallest == 0 || p.maxLen < smallest) {
			smallest = p.maxLen
		}
	}
	if window == 0 {
		window = 512
		if smallest > 0 {
			window = min(window, smallest)
		}
	}
	for _, p := range plans {
		if p.maxLen > 0 && window > p.maxLen {
			return 0, badInputf("--window %d is longer than %s's %s %d; give --window %d or less (every variant trains with the same window)",
				window, p.name, p.maxLenParam, p.maxLen, smallest)
		}
	}
	for i := range plans {
		plans[i].run.cfg.Window = window
	}
	return window, nil
}

// compareData returns what every variant trains and evaluates on, and a description of the
// held-out text: evalPath (--eval), or the tail of in (--input), frac (--holdout) of its
// bytes.
func compareData(in, evalPath string, frac float64, holdoutSet bool) (train.Data, string, error) {
	input := train.TextSource{Name: "--input", Path: in}
	if err := input.Check(); err != nil {
		return train.Data{}, "", err
	}
	if evalPath != "" {
		if holdoutSet {
			return train.Data{}, "", badInputf("--holdout splits --input when there is no --eval file; give one of them")
		}
		held := train.TextSource{Name: "--eval", Path: evalPath}
		if err := held.Check(); err != nil {
			return train.Data{}, "", err
		}
		return train.Data{Train: input, Held: held}, "--eval " + evalPath, nil
	}
	if !(frac > 0 && frac < 1) {
		return train.Data{}, "", badInputf("--holdout must be between 0 and 1 (exclusive), got %g", frac)
	}
	fi, err := os.Stat(in)
	if err != nil {
		return train.Data{}, "", badInputf("--input %s: %w", in, err)
	}
	size := fi.Size()
	held := int64(math.Ceil(float64(size) * frac))
	if held < 2 || size-held < 2 {
		return train.Data{}, "", badInputf("--input %s has %d bytes, too few to hold out %g of them; give a longer text or --eval FILE", in, size, frac)
	}
	cut := size - held
	data := train.Data{Train: train.TextSource{Name: "--input", Path: in, Size: cut}, Held: train.TextSource{Name: "--input", Path: in, Offset: cut, Size: held}}
	return data, fmt.Sprintf("the last %g %% of --input %s (bytes %d–%d; training uses bytes 0–%d)", 100*frac, in, cut, size-1, cut-1), nil
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
	if !c.IsSet("warmup") {
		cfg.Warmup = cfg.Steps / 10
	}
	if cfg.EvalEvery == 0 {
		cfg.EvalEvery = max(1, cfg.Steps/10) // points for the held-out curves
	}
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
		if mp := spec.Variant.Describe().Caps.MaxLenParam; mp != "" {
			p.maxLen, p.maxLenParam = spec.Config.Int(mp), mp
			_, p.maxLenSet = sets[mp]
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
	count := func(d int) (int, error) {
		run := p.run
		run.sets = maps.Clone(p.run.sets)
		if run.sets == nil {
			run.sets = map[string]string{}
		}
		run.sets["d_ff"] = strconv.Itoa(d)
		return comparePlanParams(ctx, c, run)
	}
	d, got, err := train.MatchParams(count, dff, ref.params)
	if err != nil {
		return badInputf("--params-match: %s cannot match %s's %s parameters: %v", p.name, ref.name, format.HumanCount(int64(ref.params)), err)
	}
	if p.run.sets == nil {
		p.run.sets = map[string]string{}
	}
	p.run.sets["d_ff"] = strconv.Itoa(d)
	p.changes = append(p.changes, fmt.Sprintf("d_ff=%d (its own is %d), so that its %s parameters match %s's %s (--params-match)",
		d, dff, format.HumanCount(int64(got)), ref.name, format.HumanCount(int64(ref.params))))
	p.params = got
	return nil
}

// compareOne trains one variant once per seed and measures the first seed's trained model's
// inference; the progress goes to stderr when it is a terminal.
func compareOne(ctx context.Context, c flags, p comparePlan, data train.Data, seeds []uint64, ci compareInference, which string, stderr io.Writer) (compare.Result, error) {
	r := compare.Result{Variant: p.name, ConfigChanges: p.changes, Seeds: []compare.Seed{}}
	var infer *zooroot.Model
	var choice backends.Choice
	var threads int
	defer func() {
		if infer != nil {
			infer.Close()
		}
	}()
	for i, seed := range seeds {
		run := p.run
		run.cfg.Seed = seed
		label := fmt.Sprintf("compare %s %s", which, p.name)
		if len(seeds) > 1 {
			label += fmt.Sprintf(" seed %d (%d/%d)", seed, i+1, len(seeds))
		}
		sd, trained, ch, th, err := compareTrain(ctx, c, run, data, label, stderr, i == 0)
		if err != nil {
			return r, fmt.Errorf("compare %s: %w", p.name, err)
		}
		if trained != nil {
			infer, choice, threads = trained, ch, th
			r.Model, r.Config = trained.Name(), trained.Config().JSON()
		}
		r.AddSeed(sd)
	}
	r.Params = p.params
	if err := compareInfer(ctx, c, &r, p, infer, choice, threads, ci, which, stderr); err != nil {
		return r, err
	}
	return r, nil
}

// compareTrain trains run once and returns its scores and curves and, when keep, the trained
// model's inference build with the backend and threads it ran on (the caller closes it).
func compareTrain(ctx context.Context, c flags, run trainRun, data train.Data, label string, stderr io.Writer, keep bool) (compare.Seed, *zooroot.Model, backends.Choice, int, error) {
	sd := compare.Seed{Seed: run.cfg.Seed}
	m, err := loadTrainModel(ctx, c, run)
	if err != nil {
		return sd, nil, backends.Choice{}, 0, err
	}
	defer m.Close()
	// compare keeps no checkpoint (no Config.Output): the trained weights live on in the
	// inference build.
	tr, err := train.New(ctx, m, data, run.cfg)
	if err != nil {
		return sd, nil, backends.Choice{}, 0, err
	}
	defer tr.Close()
	bar := trainBar(stderr, label+": ", run.cfg.Steps, 0)
	if bar != nil {
		tr.OnStep(func(s train.Step) error {
			if !s.Eval {
				bar.update(s.Step, fmt.Sprintf("loss %.4f %.0f tok/s", s.Loss, s.TokensPerSecond))
			}
			return nil
		})
	}
	res, runErr := tr.Run(ctx)
	if bar != nil {
		bar.finish()
	}
	if runErr != nil {
		return sd, nil, backends.Choice{}, 0, runErr
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
		return sd, nil, backends.Choice{}, 0, nil
	}
	infer, err := tr.Trained(ctx)
	if err != nil {
		return sd, nil, backends.Choice{}, 0, err
	}
	return sd, infer, tr.Backend(), tr.Threads(), nil
}

// compareInfer times inference of the trained model at every --seq length it reaches, and
// beyond its max_len on a build with max_len raised (untrained weights: time and memory do
// not depend on their values), unless --set gave max_len (then those lengths are skipped).
func compareInfer(ctx context.Context, c flags, r *compare.Result, p comparePlan, infer *zooroot.Model, choice backends.Choice, threads int,
	ci compareInference, which string, stderr io.Writer) error {
	if infer == nil {
		return nil
	}
	bb := bench.Backend{Name: choice.Backend.Name(), Level: choice.Probe.Level, Threads: threads}
	status := newCompareStatus(stderr)
	defer status.done()
	var rows []bench.Row
	var raised *zooroot.Model
	defer func() {
		if raised != nil {
			raised.Close()
		}
	}()
	var trainedLens, raisedLens []int
	for _, n := range ci.seqs {
		switch {
		case p.maxLen == 0 || n <= p.maxLen:
			trainedLens = append(trainedLens, n)
		case p.maxLenSet:
			r.Notes = append(r.Notes, fmt.Sprintf("n=%d skipped: longer than its %s %d (given by --set)", n, p.maxLenParam, p.maxLen))
		default:
			raisedLens = append(raisedLens, n)
		}
	}
	if len(raisedLens) > 0 {
		longest := slices.Max(raisedLens)
		run := p.run
		run.sets = maps.Clone(p.run.sets)
		if run.sets == nil {
			run.sets = map[string]string{}
		}
		run.sets[p.maxLenParam] = strconv.Itoa(longest)
		opts, err := loadOptions(ctx, c)
		if err != nil {
			return err
		}
		if raised, err = zooroot.Load(ctx, run.model, zooroot.LoadOptions{Set: run.sets, Seed: run.cfg.Seed, Registries: opts.Registries,
			Plugins: opts.Plugins, Backend: opts.Backend, Configure: train.EvalHook(run.cfg.Objective, run.sets)}); err != nil {
			return fmt.Errorf("compare %s: build with %s=%d to time n=%d: %w", p.name, p.maxLenParam, longest, longest, err)
		}
		r.Notes = append(r.Notes, fmt.Sprintf("n=%s timed on a build with %s=%d (its own is %d; untrained weights)",
			joinInts(raisedLens), p.maxLenParam, longest, p.maxLen))
	}
	for _, set := range []struct {
		m         *zooroot.Model
		lens      []int
		untrained bool
	}{{infer, trainedLens, false}, {raised, raisedLens, true}} {
		if set.m == nil || len(set.lens) == 0 {
			continue
		}
		bm := &benchModel{Model: set.m, graph: set.m.Graph(), maxLen: max(p.maxLen, slices.Max(set.lens))}
		var err error
		if bm.tok, bm.mask, err = zooroot.TokenInputs(set.m.Graph()); err != nil {
			return badInput(err)
		}
		if err := guardBench(bm, []int{1}, set.lens, false); err != nil {
			return err
		}
		prog, err := choice.Backend.Compile(set.m.Graph(), backends.Options{Threads: ci.threads})
		if err != nil {
			return failed(fmt.Errorf("compile %s on %s: %w", set.m.Name(), bb.Name, err))
		}
		for _, n := range set.lens {
			status.say("%s %s: inference at n=%d", which, p.name, n)
			row, err := benchOne(ctx, bm, prog, nil, bb, 1, n, ci.reps, ci.warmup)
			if err != nil {
				prog.Close()
				return err
			}
			rows = append(rows, row)
			ms := train.Stat{Mean: row.MSMean, SD: row.MSStddev, N: ci.reps}
			r.Inference = append(r.Inference, compare.Inference{N: n, MS: row.MSMean, MSSD: row.MSStddev, Reps: ci.reps, Noisy: ms.Noisy(),
				MemBytes: row.PeakRSSGrowth, Untrained: set.untrained})
		}
		prog.Close()
	}
	status.done()
	r.SetFit(bench.FitRows(rows))
	if r.Inference == nil {
		r.Inference = []compare.Inference{}
	}
	return nil
}

func joinInts(xs []int) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.Itoa(x))
	}
	return strings.Join(parts, ", ")
}

// newCompareStatus is zoo bench's one-line status on stderr, shown only when stderr (behind
// the session's synchronised writer) is a terminal.
func newCompareStatus(w io.Writer) *benchProgress {
	f, ok := underlying(w).(*os.File)
	return &benchProgress{w: w, active: ok && term.IsTerminal(int(f.Fd())), verb: "compare"}
}

// commandLine is the comparison as a command line: the variants and every flag given (c),
// in the order the command defines them (defs), for the report.
func commandLine(args []string, defs []cli.Flag, c interface {
	flags
	Value(name string) any
}) string {
	quote := func(a string) string {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			return strconv.Quote(a)
		}
		return a
	}
	parts := []string{"zoo", "compare"}
	for _, n := range args {
		parts = append(parts, quote(n))
	}
	for _, f := range defs {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		switch f.(type) {
		case *cli.BoolFlag:
			parts = append(parts, "--"+name)
		case *cli.StringSliceFlag:
			for _, v := range c.StringSlice(name) {
				parts = append(parts, "--"+name, quote(v))
			}
		default:
			parts = append(parts, "--"+name, quote(fmt.Sprint(c.Value(name))))
		}
	}
	return strings.Join(parts, " ")
}
