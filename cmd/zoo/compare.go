package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
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
			&cli.IntFlag{Name: "window", Usage: "tokens per window (0: min(512, the smallest max_len of the variants))"},
			&cli.StringFlag{Name: "objective", Value: train.MLM, Usage: "mlm (masked tokens, BERT's 15 % with 80/10/10) or clm (next token; turns causal on)"},
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
	run   trainRun
	notes []string
	// maxLen is the variant's length limit after any raise (0: none).
	maxLen int
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
	seqs, err := format.ParseCounts("seq", c.String("seq"))
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
	reportPath := c.String("report")
	if err := checkReportPath(reportPath); err != nil {
		return err
	}
	data, heldDoc, err := compareData(c.String("input"), c.String("eval"), c.Float64("holdout"), c.IsSet("holdout"))
	if err != nil {
		return err
	}
	plans, err := planCompare(c.Context, c, names, slices.Max(seqs))
	if err != nil {
		return err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	window := compareWindow(plans, c.Int("window"))
	nThreads := choice.Probe.Threads
	if ci.threads > 0 {
		nThreads = ci.threads
	}
	st0 := plans[0].run.cfg
	setup := compare.Setup{Input: data.Train.String(), Eval: heldDoc, Objective: st0.Objective, Steps: st0.Steps, Batch: st0.Batch,
		Window: window, Optimizer: st0.Optimizer, LR: st0.LR, Warmup: st0.Warmup, Schedule: st0.Schedule, Seed: st0.Seed,
		Backend: choice.Backend.Name(), Level: choice.Probe.Level, Threads: nThreads, Seqs: seqs, Reps: ci.reps, InferWarmup: ci.warmup,
		CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), Zoo: version, GoVer: runtime.Version(), Command: commandLine(c.Args().Slice(), c.Command.Flags, c),
		TimingDoc: bench.TimingDoc, MemDoc: bench.MemoryDoc}
	asJSON := c.Bool(flagJSON.Name)
	var table *compare.Table
	if !asJSON {
		table = compare.NewTable(c.App.Writer, names, seqs)
		table.Begin(setup)
	}
	var results []compare.Result
	for i, p := range plans {
		r, err := compareOne(c.Context, c, p, data, ci, fmt.Sprintf("(%d/%d)", i+1, len(plans)), c.App.ErrWriter)
		if err != nil {
			return err
		}
		results = append(results, r)
		if table != nil {
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
// --window, else the first variant's choice (min(512, max_len) by default), which must fit
// every other, so the smallest limit decides it.
func compareWindow(plans []comparePlan, window int) int {
	if window == 0 {
		window = 512
		for _, p := range plans {
			if p.maxLen > 0 {
				window = min(window, p.maxLen)
			}
		}
	}
	for i := range plans {
		plans[i].run.cfg.Window = window
	}
	return window
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
// raises a max_len below the longest inference length (unless --set gives max_len, which
// then skips the longer lengths).
func planCompare(ctx context.Context, c flags, names []string, longest int) ([]comparePlan, error) {
	cfg, err := trainConfig(c)
	if err != nil {
		return nil, err
	}
	cfg.EvalEvery = c.Int("eval-every")
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
			p.maxLen = spec.Config.Int(mp)
			if _, given := sets[mp]; p.maxLen < longest && !given {
				sets[mp] = strconv.Itoa(longest)
				p.notes = append(p.notes, fmt.Sprintf("built with %s=%d (its own is %d) to reach --seq %d", mp, longest, p.maxLen, longest))
				p.maxLen = longest
			}
		}
		// Build it once now: a config the variant refuses (clm on linformer, whose
		// projections mix every position) fails here, before the first variant trains.
		m, err := loadTrainModel(ctx, c, p.run)
		if err != nil {
			return nil, fmt.Errorf("compare %s: %w", name, err)
		}
		m.Close()
		plans = append(plans, p)
	}
	return plans, nil
}

// compareOne trains one variant and measures its trained model's inference; the progress
// goes to stderr when it is a terminal.
func compareOne(ctx context.Context, c flags, p comparePlan, data train.Data, ci compareInference, which string, stderr io.Writer) (compare.Result, error) {
	r := compare.Result{Variant: p.name, Notes: p.notes}
	cfg := p.run.cfg
	m, err := loadTrainModel(ctx, c, p.run)
	if err != nil {
		return r, err
	}
	defer m.Close()
	// compare keeps no checkpoint (no Config.Output): the trained weights live on in the
	// inference build.
	tr, err := train.New(ctx, m, data, cfg)
	if err != nil {
		return r, err
	}
	defer tr.Close()
	r.Model, r.Config, r.Params = m.Name(), m.Config().JSON(), tr.Parameters()
	bar := trainBar(stderr, fmt.Sprintf("compare %s %s: ", which, p.name), cfg.Steps, 0)
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
		return r, fmt.Errorf("compare %s: %w", p.name, runErr)
	}
	r.TrainTokensPS, r.TrainSeconds = res.TokensPerSecond(), res.TrainTime.Seconds()
	for _, s := range res.History {
		if s.Eval {
			r.Eval = append(r.Eval, compare.Point{Step: s.Step, Loss: s.EvalLoss, BitsPerByte: s.EvalBitsPerByte})
			r.EvalLoss, r.EvalBPB = s.EvalLoss, s.EvalBitsPerByte
		} else {
			r.Train = append(r.Train, compare.Point{Step: s.Step, Loss: s.Loss})
		}
	}

	// Inference of the trained model, timed as zoo bench times it. The training programs
	// are closed first so that their buffers do not weigh on the memory measured.
	infer, err := tr.Trained(ctx)
	if err != nil {
		return r, fmt.Errorf("compare %s: %w", p.name, err)
	}
	defer infer.Close()
	choice, threads := tr.Backend(), tr.Threads()
	tr.Close()
	bm := &benchModel{Model: infer, graph: infer.Graph(), maxLen: p.maxLen}
	if bm.plan, err = zooroot.PlanFeeds(infer.Graph(), nil); err != nil {
		return r, badInput(err)
	}
	var lengths []int
	for _, n := range ci.seqs {
		if bm.fits(n) {
			lengths = append(lengths, n)
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("n=%d skipped: longer than its max_len %d", n, p.maxLen))
		}
	}
	if err := guardBench(bm, []int{1}, lengths, false); err != nil {
		return r, err
	}
	bb := bench.Backend{Name: choice.Backend.Name(), Level: choice.Probe.Level, Threads: threads}
	prog, err := choice.Backend.Compile(infer.Graph(), backends.Options{Threads: ci.threads})
	if err != nil {
		return r, failed(fmt.Errorf("compile %s on %s: %w", infer.Name(), bb.Name, err))
	}
	defer prog.Close()
	status := newCompareStatus(stderr)
	defer status.Done()
	var rows []bench.Row
	for _, n := range lengths {
		status.Say("%s %s: inference at n=%d", which, p.name, n)
		row, err := bench.RunOne(ctx, bm.target(), prog, nil, bb, 1, n, ci.reps, ci.warmup)
		if err != nil {
			return r, err
		}
		rows = append(rows, row)
		r.Inference = append(r.Inference, compare.Inference{N: n, MS: row.MSMean, MemBytes: row.PeakRSSGrowth})
	}
	status.Done()
	r.SetFit(bench.FitRows(rows))
	if r.Inference == nil {
		r.Inference = []compare.Inference{}
	}
	return r, nil
}

// newCompareStatus is zoo compare's one-line status on stderr, shown only when stderr (behind
// the session's synchronised writer) is a terminal.
func newCompareStatus(w io.Writer) *bench.Progress {
	f, ok := underlying(w).(*os.File)
	return bench.NewProgress(w, "compare", ok && term.IsTerminal(int(f.Fd())))
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
