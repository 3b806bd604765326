package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/benchplot"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "time variants over batch sizes × sequence lengths (ms, tokens/s, GFLOP/s, % of measured SGEMM peak, memory)",
		ArgsUsage: "NAME[.PRESET]...",
		Description: "Runs every combination of models × backends × --batch × --seq on synthetic token batches (the sample\n" +
			"text, no padding) and prints one row each as it finishes, like llama-bench. " + bench.TimingDoc + ".\n" +
			bench.PeakDoc + "\n" +
			bench.MemoryDoc + ". go_alloc_bytes_per_run (JSON/CSV) is the Go heap allocated per timed run.\n" +
			"Over several models (or with the default --seq), lengths beyond a model's max_len are skipped for it with a\n" +
			"note; for one model an explicit --seq beyond its max_len is an error. When no combination can run, zoo bench\n" +
			"exits 1. --against onnxruntime also runs the\n" +
			"model's ONNX export under ONNX Runtime with the same thread count (zoo then runs that same exported graph)\n" +
			"and reports zoo/ORT = the median over the --reps timed pairs of ORT time / zoo time (above 1: zoo is\n" +
			"faster); the timed runs alternate zoo and ORT, each after a 5 ms pause, because a shared machine's load\n" +
			"drifts between two back-to-back series by more than the difference being measured. The footer gives each series' fitted\n" +
			"exponent k: the least-squares slope of log time against log n (time ∝ n^k); one fitted on two points is marked\n" +
			"\"(2 points)\" (JSON: two_point_fit), since a line through two points tests nothing.\n" +
			"Table, markdown and CSV rows are printed as they finish (CSV rows when their series is complete, as each\n" +
			"carries the series' exponent); JSON is one document at the end.\n" +
			"Data goes to stdout; progress goes to stderr only when it is a terminal." +
			examples("zoo bench vanilla linformer --seq 128,512,2048", "zoo bench vanilla.tiny --batch 1,8 --format csv", "zoo bench linformer --against onnxruntime"),
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "seq", Value: "128,512,2048", Usage: "sequence lengths `N,N,...`"},
			&cli.StringFlag{Name: "batch", Value: "1", Usage: "batch sizes `B,B,...`"},
			&cli.StringFlag{Name: "backend", Usage: "backend(s) to run on, `NAME[,NAME]` (see `zoo backends`); default: ZOO_BACKEND, then the fastest available"},
			&cli.StringFlag{Name: "against", Usage: "also run the exported graph on `RUNTIME` (onnxruntime) and report the throughput ratio"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "output `FORMAT`: table, md, csv or json"},
			flagJSON,
			&cli.StringFlag{Name: "plot", Usage: "write time and memory against n (log-log, fitted exponents) to `FILE.png`"},
			&cli.IntFlag{Name: "reps", Aliases: []string{"r"}, Value: 5, Usage: "timed repetitions per row"},
			&cli.IntFlag{Name: "warmup", Value: 1, Usage: "untimed runs before the timed ones"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads for zoo and ONNX Runtime (0: the backend's default)"},
			flagPrecision(),
		),
		Action: benchAction,
	}
}

// parseCounts parses "1,8" into positive integers for flag.
func parseCounts(flag, s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--%s %q: want positive integers separated by commas", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchModel is a loaded model with what bench needs to feed and cost it.
type benchModel struct {
	*zooroot.Model
	plan   *zooroot.FeedPlan // every input by its role, as zoo run feeds them
	tok    string            // the token-ids input
	maxLen int
	onnx   []byte       // the export, with --against
	graph  *graph.Graph // the graph zoo runs: the model's, or the export re-imported with --against
}

// fits reports whether length n fits the model.
func (bm *benchModel) fits(n int) bool { return bm.maxLen == 0 || n <= bm.maxLen }

func benchAction(c *cli.Context) error {
	if c.NArg() < 1 {
		return badInputf("bench: want at least one model name (see `zoo list`)")
	}
	seqs, err := parseCounts("seq", c.String("seq"))
	if err != nil {
		return badInput(err)
	}
	batches, err := parseCounts("batch", c.String("batch"))
	if err != nil {
		return badInput(err)
	}
	reps, warmup, threads := c.Int("reps"), c.Int("warmup"), c.Int("threads")
	if reps < 1 {
		return badInputf("--reps must be at least 1, got %d", reps)
	}
	if warmup < 0 || threads < 0 {
		return badInputf("--warmup and --threads must not be negative (got %d, %d)", warmup, threads)
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	outFormat, err := bench.ParseFormat(c.String("format"))
	if err != nil {
		return badInput(err)
	}
	if c.Bool(flagJSON.Name) {
		if c.IsSet("format") && outFormat != bench.JSON {
			return badInputf("--json and --format %s disagree; use one", outFormat)
		}
		outFormat = bench.JSON
	}
	against := strings.ToLower(strings.TrimSpace(c.String("against")))
	switch against {
	case "", "onnxruntime":
	case "ort":
		against = "onnxruntime"
	default:
		return badInputf("unknown --against %q: the only reference runtime is onnxruntime", c.String("against"))
	}
	plotPath := c.String("plot")
	if plotPath != "" {
		if !strings.EqualFold(filepath.Ext(plotPath), ".png") {
			return badInputf("--plot %s: want a .png file", plotPath)
		}
		if err := checkOutputPath(plotPath); err != nil {
			return badInputf("--plot: %w", err)
		}
	}
	var choices []backends.Choice
	seen := map[string]bool{}
	for _, name := range strings.Split(c.String("backend"), ",") {
		ch, err := backends.Select(name)
		if err != nil {
			return badInput(err)
		}
		if err := zooroot.CheckPrecision(ch, prec); err != nil {
			return err
		}
		if !seen[ch.Backend.Name()] {
			seen[ch.Backend.Name()] = true
			choices = append(choices, ch)
		}
	}
	refs := c.Args().Slice()
	// --preset, --set and --seed apply to the variants of the list; they are errors only
	// when every model is an .onnx file (loadModel says so).
	anyVariant := false
	for _, ref := range refs {
		anyVariant = anyVariant || !zooroot.IsONNXPath(ref)
	}
	var rt *ort.Runtime
	if against != "" {
		if rt, err = ort.Open(); err != nil {
			return failed(fmt.Errorf("--against onnxruntime: %w", err))
		}
	}
	// Load every model before timing anything, so a typo fails at once.
	var models []*benchModel
	for _, ref := range refs {
		var m *zooroot.Model
		if zooroot.IsONNXPath(ref) && anyVariant {
			m, err = zooroot.Load(c.Context, ref, zooroot.LoadOptions{Backend: c.String(flagBackend.Name)})
		} else {
			m, err = loadModel(c.Context, c, ref)
		}
		if err != nil {
			return err
		}
		bm := &benchModel{Model: m, graph: m.Graph()}
		if bm.plan, err = zooroot.PlanFeeds(m.Graph(), nil); err != nil {
			return badInput(err)
		}
		bm.tok = bm.plan.IDs()
		if p := m.Description().Caps.MaxLenParam; p != "" && !m.FromFile() {
			bm.maxLen = m.Config().Int(p)
		}
		if rt != nil {
			if bm.onnx, err = onnx.Export(m.Graph(), onnx.ExportOptions{ProducerVersion: version}); err != nil {
				return failed(fmt.Errorf("export %s: %w", m.Name(), err))
			}
			if bm.graph, err = onnx.Import(bm.onnx); err != nil {
				return failed(fmt.Errorf("re-import the export of %s: %w", m.Name(), err))
			}
		}
		if err := guardBench(bm, batches, seqs, rt != nil); err != nil {
			return err
		}
		models = append(models, bm)
	}

	// The session cancels c.Context on SIGINT and SIGTERM (session.go).
	ctx := c.Context
	prog := newBenchProgress(c.App.ErrWriter)
	defer prog.done()
	doc := &bench.Doc{Machine: bench.Machine{CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		ZooVersion: version, GoVersion: runtime.Version(), Timing: bench.TimingDoc, Memory: bench.MemoryDoc}}
	if rt != nil {
		doc.Machine.ONNXRuntime = rt.Version
	}
	// One model and an explicit length it cannot take is an error, as in show; over several
	// models (or the default list) such lengths are skipped for the models they exceed.
	if bm := models[0]; len(models) == 1 && c.IsSet("seq") {
		for _, n := range seqs {
			if !bm.fits(n) {
				return badInputf("--seq %d is longer than %s's maximum length %d (max_len); pass shorter lengths or --set max_len=N", n, bm.Name(), bm.maxLen)
			}
		}
	}
	lay := bench.Layout{Batches: batches, Seqs: seqs, WithORT: rt != nil, Reps: reps, Warmup: warmup}
	total := 0
	for _, bm := range models {
		lay.Variants = append(lay.Variants, bm.Name())
		for _, b := range batches {
			for _, n := range seqs {
				if bm.fits(n) {
					total += len(choices)
				} else {
					doc.Skipped = append(doc.Skipped, bench.Skip{Variant: bm.Name(), Batch: b, N: n,
						Reason: fmt.Sprintf("longer than its maximum length %d (max_len)", bm.maxLen)})
				}
			}
		}
	}
	if outFormat == bench.CSV {
		for _, s := range doc.Skipped {
			fmt.Fprintf(c.App.ErrWriter, "zoo bench: note: %s batch %d n=%d skipped: %s\n", s.Variant, s.Batch, s.N, s.Reason)
		}
	}
	for _, ch := range choices {
		bb := bench.Backend{Name: ch.Backend.Name(), Level: ch.Probe.Level, Precision: reportedPrecision(ch.Backend.Name(), prec),
			Device: ch.Probe.Device, Threads: ch.Probe.Threads, Why: ch.Why}
		if threads > 0 {
			bb.Threads = threads
		}
		prog.say("measuring the SGEMM peak of %s", bb.Name)
		if err := bench.MeasurePeak(ctx, ch.Backend, &bb); err != nil {
			return failed(err)
		}
		bb.FirstPeakGFLOPS = bb.PeakGFLOPS
		doc.Machine.Backends = append(doc.Machine.Backends, bb)
	}
	out := bench.NewRenderer(c.App.Writer, outFormat, lay)
	if err := out.Begin(doc); err != nil {
		return failed(err)
	}
	done := 0
	// rowsOn times model bm on backend choice bi at every batch size and length, printing
	// each row as it finishes, and measures the backend's SGEMM peak again after each row,
	// keeping the best reading (see bench.Doc.KeepBetterPeak).
	rowsOn := func(bm *benchModel, bi int, ch backends.Choice) error {
		bb := doc.Machine.Backends[bi]
		p, err := ch.Backend.Compile(bm.graph, backends.Options{Threads: threads, Precision: prec})
		if err != nil {
			return failed(fmt.Errorf("compile %s on %s: %w", bm.Name(), bb.Name, err))
		}
		defer p.Close()
		var sess *ort.Session
		if rt != nil {
			if sess, err = rt.NewSession(bm.onnx, ort.SessionOptions{Threads: bb.Threads}); err != nil {
				return failed(fmt.Errorf("onnxruntime: model %s: %w", bm.Name(), err))
			}
			defer sess.Close()
		}
		for _, b := range batches {
			for _, n := range seqs {
				if !bm.fits(n) {
					continue
				}
				done++
				prog.say("%s on %s: batch %d, n %d (%d/%d)", bm.Name(), bb.Name, b, n, done, total)
				row, err := benchOne(ctx, bm, p, sess, doc.Machine.Backends[bi], b, n, reps, warmup)
				if err != nil {
					return err
				}
				row.SeriesKey = bm.Name() + " " + bb.Name
				row.ORTSeries = bm.Name() + " onnxruntime"
				if len(choices) > 1 {
					row.ORTSeries += " (vs " + bb.Name + ")"
				}
				if len(batches) > 1 {
					row.SeriesKey += fmt.Sprintf(" b=%d", b)
					row.ORTSeries += fmt.Sprintf(" b=%d", b)
				}
				doc.Rows = append(doc.Rows, row)
				again := doc.Machine.Backends[bi]
				if err := bench.MeasurePeak(ctx, ch.Backend, &again); err != nil {
					return failed(err)
				}
				doc.KeepBetterPeak(bi, again)
				prog.clear()
				if err := out.Row(doc, doc.Rows[len(doc.Rows)-1]); err != nil {
					return failed(err)
				}
			}
			if err := out.EndSeries(doc); err != nil {
				return failed(err)
			}
		}
		return nil
	}
	for _, bm := range models {
		for bi, ch := range choices {
			if err := rowsOn(bm, bi, ch); err != nil {
				return err
			}
		}
	}
	prog.done()
	doc.Fit()

	if plotPath != "" && len(doc.Rows) > 0 {
		if err := writeBenchPlot(plotPath, doc); err != nil {
			return failed(err)
		}
	}
	if err := out.End(doc); err != nil {
		return failed(err)
	}
	if len(doc.Rows) == 0 {
		return failed(fmt.Errorf("bench: no combination could run: every --seq is longer than the models' maximum length (max_len); pass shorter lengths or --set max_len=N"))
	}
	if plotPath != "" && outFormat != bench.JSON && outFormat != bench.CSV {
		fmt.Fprintf(c.App.Writer, "plot: %s\n", plotPath)
	}
	return nil
}

// benchOne times one (model, backend, batch, n) combination on zoo and, when sess is set,
// on ONNX Runtime.
func benchOne(ctx context.Context, bm *benchModel, p backends.Program, sess *ort.Session, bb bench.Backend, b, n, reps, warmup int) (bench.Row, error) {
	row := bench.Row{Variant: bm.Name(), Backend: bb.Name, Level: bb.Level, Precision: bb.Precision, Threads: bb.Threads, Batch: b, N: n,
		Reps: reps, Warmup: warmup}
	feed, err := benchInputs(bm, b, n)
	if err != nil {
		return row, failed(err)
	}
	if cost, err := bm.graph.Cost(bm.plan.Shapes(b, n)); err == nil {
		row.FLOPs, row.GraphActBytes = cost.FLOPs, cost.ActivationBytes
	}
	name := fmt.Sprintf("%s on %s at batch %d, n %d", bm.Name(), bb.Name, b, n)
	zooRun := func() error {
		_, err := p.Run(ctx, feed)
		return err
	}
	if sess == nil {
		t, err := bench.TimeRuns(ctx, zooRun, reps, warmup)
		if err != nil {
			return row, failed(fmt.Errorf("run %s: %w", name, err))
		}
		row.MSSamples, row.PeakRSSGrowth, row.GoAllocPerRun = t.MS, t.PeakRSS, t.AllocPerRun
	} else {
		ortRun := func() error {
			_, err := sess.Run(feed, nil)
			return err
		}
		pairs, err := bench.TimePaired(ctx, zooRun, ortRun, reps, warmup)
		if err != nil {
			return row, failed(fmt.Errorf("%s: %w", name, err))
		}
		row.MSSamples, row.PeakRSSGrowth, row.GoAllocPerRun = pairs.Zoo, pairs.ZooRSS, pairs.ZooAlloc
		mean, sd := bench.MeanStddev(pairs.Ref)
		tps := float64(b*n) / (mean / 1000)
		row.ORTMSSamples, row.ORTMSMean, row.ORTMSStddev, row.ORTPeakRSS, row.ORTTokensPS = pairs.Ref, &mean, &sd, pairs.RefRSS, &tps
		row.ZooOverORT = &pairs.Ratio
	}
	row.MSMean, row.MSStddev = bench.MeanStddev(row.MSSamples)
	row.SetThroughput(bb.PeakGFLOPS)
	return row, nil
}

// benchInputs makes a (b, n) batch of the sample text's token ids (wrapping around), every
// other input fed by its role as zoo run feeds it (masks all valid, types zero, positions 0..n-1).
func benchInputs(bm *benchModel, b, n int) (map[string]*tensor.Tensor, error) {
	ids := tokenize.Encode(zooroot.SampleText)
	if len(ids) == 0 {
		ids = []int64{1}
	}
	data := make([]int64, b*n)
	for i := range data {
		data[i] = ids[i%len(ids)]
	}
	lengths := make([]int, b)
	for i := range lengths {
		lengths[i] = n
	}
	batch := &tokenize.Batch{B: b, N: n, Tokens: data, Mask: make([]bool, b*n), Lengths: lengths, Offsets: make([]int64, b)}
	feed, err := bm.plan.Tensors(batch, 0)
	if err != nil {
		return nil, fmt.Errorf("bench input (%d, %d): %w", b, n, err)
	}
	return feed, nil
}

func writeBenchPlot(path string, d *bench.Doc) error {
	if len(d.Series) == 0 {
		return fmt.Errorf("--plot %s: no rows were measured, nothing to plot", path)
	}
	var title []string
	for _, b := range d.Machine.Backends {
		title = append(title, fmt.Sprintf("%s (%s, %s)", b.Name, b.Level, format.Plural(b.Threads, "thread")))
	}
	opts := benchplot.Options{Title: "zoo bench on " + strings.Join(title, ", "), MemLabel: "peak RSS growth (MiB)"}
	return tensorio.AtomicWriteFile(path, func(w io.Writer) error {
		return benchplot.Render(w, d.Series, opts)
	})
}

// benchProgress writes a one-line status to stderr when stderr is a terminal, and nothing
// otherwise (scripts and pipes get clean stderr).
type benchProgress struct {
	w      io.Writer
	active bool
	// verb starts the line ("bench").
	verb string
}

func newBenchProgress(w io.Writer) *benchProgress {
	f, ok := w.(*os.File)
	return &benchProgress{w: w, active: ok && term.IsTerminal(int(f.Fd())), verb: "bench"}
}

func (p *benchProgress) say(format string, args ...any) {
	if p.active {
		fmt.Fprintf(p.w, "\r\033[K"+p.verb+": "+format, args...)
	}
}

// clear erases the status line so that a row printed to the same terminal starts clean.
func (p *benchProgress) clear() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *benchProgress) done() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
		p.active = false
	}
}

// guardBench checks every batch size and length `zoo bench` will time bm at, before it times
// anything (lengths beyond the model's maximum are skipped there, and here).
func guardBench(bm *benchModel, batches, seqs []int, withORT bool) error {
	copies := 1
	if withORT {
		copies = 2
	}
	for _, b := range batches {
		for _, n := range seqs {
			if bm.maxLen > 0 && n > bm.maxLen {
				continue
			}
			r := zooroot.MemoryRun{Batch: b, N: n, Shapes: bm.plan.Shapes, Copies: copies, BatchOption: "--batch", NOption: "--seq"}
			if err := zooroot.GuardMemory(bm.Name(), bm.graph, r); err != nil {
				return err
			}
		}
	}
	return nil
}
