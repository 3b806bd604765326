package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/compare"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/graph"
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

func compareAction(c *cli.Context) error {
	names := c.Args().Slice()
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
	if c.String("input") == "" {
		return badInputf("compare: --input FILE is required (the text to train on)")
	}
	seqs, err := parseCounts("seq", c.String("seq"))
	if err != nil {
		return badInput(err)
	}
	reps, warmup, threads := c.Int("reps"), c.Int("infer-warmup"), c.Int("threads")
	if reps < 1 || warmup < 0 || threads < 0 {
		return badInputf("--reps must be at least 1, --infer-warmup and --threads not negative (got %d, %d, %d)", reps, warmup, threads)
	}
	if n := c.Int("eval-every"); n < 0 {
		return badInputf("--eval-every must not be negative, got %d", n)
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
	data, heldDoc, err := compareData(c)
	if err != nil {
		return err
	}
	plans, err := planCompare(c, names, slices.Max(seqs))
	if err != nil {
		return err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return badInput(err)
	}
	// The window every variant trains with: the first variant's choice (chooseWindow,
	// min(512, max_len) by default) must fit every other, so the smallest limit decides it.
	window := c.Int("window")
	if window == 0 {
		window = 512
		for _, p := range plans {
			if p.maxLen > 0 {
				window = min(window, p.maxLen)
			}
		}
	}
	for i := range plans {
		plans[i].st.Window = window
	}

	nThreads := choice.Probe.Threads
	if threads > 0 {
		nThreads = threads
	}
	st0 := plans[0].st
	setup := compare.Setup{Input: data.train.describe(), Eval: heldDoc, Objective: st0.Objective, Steps: st0.Steps, Batch: st0.Batch,
		Window: window, Optimizer: st0.Optimizer, LR: st0.LR, Warmup: st0.Warmup, Schedule: st0.Schedule, Seed: st0.Seed,
		Backend: choice.Backend.Name(), Level: choice.Probe.Level, Threads: nThreads, Seqs: seqs, Reps: reps, InferWarmup: warmup,
		CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), Zoo: version, GoVer: runtime.Version(), Command: commandLine(c),
		TimingDoc: bench.TimingDoc, MemDoc: bench.MemoryDoc}
	asJSON := c.Bool(flagJSON.Name)
	var table *compare.Table
	if !asJSON {
		table = compare.NewTable(c.App.Writer, names, seqs)
		table.Begin(setup)
	}
	var results []compare.Result
	for i, p := range plans {
		r, err := compareOne(c, p, data, seqs, reps, warmup, fmt.Sprintf("(%d/%d)", i+1, len(plans)))
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

// compareData returns what every variant trains and evaluates on, and a description of the
// held-out text: --eval FILE, or the tail of --input (--holdout of its bytes).
func compareData(c *cli.Context) (trainData, string, error) {
	in, evalPath := c.String("input"), c.String("eval")
	if err := checkTextFile("--input", in); err != nil {
		return trainData{}, "", badInput(err)
	}
	if evalPath != "" {
		if c.IsSet("holdout") {
			return trainData{}, "", badInputf("--holdout splits --input when there is no --eval file; give one of them")
		}
		if err := checkTextFile("--eval", evalPath); err != nil {
			return trainData{}, "", badInput(err)
		}
		return trainData{train: wholeFile("--input", in), held: wholeFile("--eval", evalPath)}, "--eval " + evalPath, nil
	}
	frac := c.Float64("holdout")
	if !(frac > 0 && frac < 1) {
		return trainData{}, "", badInputf("--holdout must be between 0 and 1 (exclusive), got %g", frac)
	}
	fi, err := os.Stat(in)
	if err != nil {
		return trainData{}, "", badInputf("--input %s: %w", in, err)
	}
	size := fi.Size()
	held := int64(math.Ceil(float64(size) * frac))
	if held < 2 || size-held < 2 {
		return trainData{}, "", badInputf("--input %s has %d bytes, too few to hold out %g of them; give a longer text or --eval FILE", in, size, frac)
	}
	cut := size - held
	data := trainData{train: textSource{flag: "--input", path: in, size: cut}, held: textSource{flag: "--input", path: in, off: cut, size: held}}
	return data, fmt.Sprintf("the last %g %% of --input %s (bytes %d–%d; training uses bytes 0–%d)", 100*frac, in, cut, size-1, cut-1), nil
}

// planCompare resolves and builds every variant with the shared flags (so that a config a
// variant refuses, such as clm where it cannot hide later positions, fails at once), and raises a max_len below the longest inference length
// (unless --set gives max_len, which then skips the longer lengths).
func planCompare(c *cli.Context, names []string, longest int) ([]comparePlan, error) {
	userSets := map[string]bool{}
	for _, s := range c.StringSlice(flagSet.Name) {
		k, _, _ := strings.Cut(s, "=")
		userSets[strings.TrimSpace(k)] = true
	}
	var plans []comparePlan
	for _, name := range names {
		st, err := settingsFromFlags(c, name)
		if err != nil {
			return nil, badInput(err)
		}
		if err := st.validate(); err != nil {
			return nil, badInput(err)
		}
		spec, err := resolveVariant(c.Context, c, name)
		if err != nil {
			return nil, err
		}
		desc, cfg := spec.Variant.Describe(), spec.Config
		p := comparePlan{name: name, st: st}
		if mp := desc.Caps.MaxLenParam; mp != "" {
			p.maxLen = cfg.Int(mp)
			if p.maxLen < longest && !userSets[mp] {
				p.st.Sets = append(slices.Clone(p.st.Sets), fmt.Sprintf("%s=%d", mp, longest))
				p.notes = append(p.notes, fmt.Sprintf("built with %s=%d (its own is %d) to reach --seq %d", mp, longest, p.maxLen, longest))
				p.maxLen = longest
			}
		}
		// Build it once now: a config the variant refuses (clm on linformer, whose
		// projections mix every position) fails here, before the first variant trains.
		if _, _, err := buildTrainModel(c.Context, c, p.st, false); err != nil {
			return nil, fmt.Errorf("compare %s: %w", name, err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// compareOne trains one variant and measures its trained model's inference.
func compareOne(c *cli.Context, p comparePlan, data trainData, seqs []int, reps, warmup int, which string) (compare.Result, error) {
	ctx := c.Context
	r := compare.Result{Variant: p.name, Notes: p.notes}
	job, err := prepareTraining(c, p.st, nil, data)
	if err != nil {
		return r, err
	}
	defer job.close()
	r.Model, r.Config = job.model.Name(), job.model.Config().JSON()
	layout := job.opt.Layout()
	r.Params = layout.Size()
	st := p.st
	loop := &trainLoop{
		eng: job.engine, opt: job.opt, sched: st.schedule(), clip: st.Clip, par: job.par,
		params: job.params, grads: make([]float32, layout.Size()),
		evalEvery: c.Int("eval-every"), hasEval: true, lastSaved: -1,
		// compare keeps no checkpoint: the trained weights live on in the inference build.
		save: func(int) error { return nil },
	}
	bar := trainBar(c.App.ErrWriter, fmt.Sprintf("compare %s %s: ", which, p.name), st.Steps, 0)
	if bar != nil {
		loop.progress = func(k int, loss, _, tps float64, _ time.Duration) {
			bar.update(k, fmt.Sprintf("loss %.4f %.0f tok/s", loss, tps))
		}
	}
	runErr := loop.run(ctx, 0, st.Steps)
	if bar != nil {
		bar.finish()
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
	trained := job.model.Graph().StateDict()
	job.close()
	job.closer = nil
	infer := job.infer
	if err := graph.LoadStateDict(infer.Graph(), trained); err != nil {
		return r, failed(fmt.Errorf("compare %s: the trained weights do not fit its inference build: %w", p.name, err))
	}
	bm := &benchModel{Model: infer, graph: infer.Graph(), maxLen: p.maxLen}
	if bm.plan, err = zooroot.PlanFeeds(infer.Graph(), nil); err != nil {
		return r, badInput(err)
	}
	bm.tok = bm.plan.IDs()
	var lengths []int
	for _, n := range seqs {
		if bm.fits(n) {
			lengths = append(lengths, n)
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("n=%d skipped: longer than its max_len %d", n, p.maxLen))
		}
	}
	if err := guardBench(bm, []int{1}, lengths, false); err != nil {
		return r, err
	}
	bb := bench.Backend{Name: job.choice.Backend.Name(), Level: job.choice.Probe.Level, Threads: job.threads}
	prog, err := job.choice.Backend.Compile(infer.Graph(), backends.Options{Threads: c.Int("threads")})
	if err != nil {
		return r, failed(fmt.Errorf("compile %s on %s: %w", infer.Name(), bb.Name, err))
	}
	defer prog.Close()
	status := newCompareStatus(c.App.ErrWriter)
	defer status.done()
	var rows []bench.Row
	for _, n := range lengths {
		status.say("%s %s: inference at n=%d", which, p.name, n)
		row, err := benchOne(ctx, bm, prog, nil, bb, 1, n, reps, warmup)
		if err != nil {
			return r, err
		}
		rows = append(rows, row)
		r.Inference = append(r.Inference, compare.Inference{N: n, MS: row.MSMean, MemBytes: row.PeakRSSGrowth})
	}
	status.done()
	r.SetFit(bench.FitRows(rows))
	if r.Inference == nil {
		r.Inference = []compare.Inference{}
	}
	return r, nil
}

// newCompareStatus is zoo bench's one-line status on stderr, shown only when stderr (behind
// the session's synchronised writer) is a terminal.
func newCompareStatus(w io.Writer) *benchProgress {
	f, ok := underlying(w).(*os.File)
	return &benchProgress{w: w, active: ok && term.IsTerminal(int(f.Fd())), verb: "compare"}
}

// commandLine is the comparison as a command line: the variants and every flag given, in
// the order the command defines them, for the report.
func commandLine(c *cli.Context) string {
	quote := func(a string) string {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			return strconv.Quote(a)
		}
		return a
	}
	parts := []string{"zoo", "compare"}
	for _, n := range c.Args().Slice() {
		parts = append(parts, quote(n))
	}
	for _, f := range c.Command.Flags {
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
