package main

import (
	"fmt"
	"io"
	"os"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
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

// benchModel is a loaded model with what bench needs to feed and cost it (the memory guard,
// guardBench, reads it too).
type benchModel struct {
	*zooroot.Model
	plan      *zooroot.FeedPlan // every input by its role, as zoo run feeds them
	maxLen    int
	maxLenWhy string
	onnx      []byte       // the export, with --against
	graph     *graph.Graph // the graph zoo runs: the model's, or the export re-imported with --against
}

// fits reports whether length n fits the model.
func (bm *benchModel) fits(n int) bool { return bm.maxLen == 0 || n <= bm.maxLen }

// target is bm as package bench times it.
func (bm *benchModel) target() bench.Model {
	return bench.Model{Name: bm.Name(), Graph: bm.graph, ONNX: bm.onnx, Feeds: bm.plan, MaxLen: bm.maxLen, MaxLenWhy: bm.maxLenWhy}
}

func benchAction(c *cli.Context) error {
	if c.NArg() < 1 {
		return badInputf("bench: want at least one model name (see `zoo list`)")
	}
	opts, err := bench.Parse(bench.Flags{Seq: c.String("seq"), Batch: c.String("batch"), Reps: c.Int("reps"), Warmup: c.Int("warmup"),
		Threads: c.Int("threads"), Format: c.String("format"), FormatSet: c.IsSet("format"), JSON: c.Bool(flagJSON.Name),
		Against: c.String("against"), Plot: c.String("plot")})
	if err != nil {
		return badInput(err)
	}
	prec, err := precisionOf(c)
	if err != nil {
		return err
	}
	if opts.Plot != "" {
		if err := checkOutputPath(opts.Plot); err != nil {
			return badInputf("--plot: %w", err)
		}
	}
	choices, err := bench.Backends(c.String("backend"), func(ch backends.Choice) error { return zooroot.CheckPrecision(ch, prec) })
	if err != nil {
		return badInput(err)
	}
	plan := &bench.Plan{Options: opts, Backends: choices, Precision: prec, ZooVersion: version, SeqSet: c.IsSet("seq"),
		Reported: func(backend string) string { return reportedPrecision(backend, prec) }}
	if opts.Against != "" {
		if plan.Runtime, err = ort.Open(); err != nil {
			return failed(fmt.Errorf("--against onnxruntime: %w", err))
		}
	}
	// --preset, --set and --seed apply to the variants of the list; they are errors only
	// when every model is an .onnx file (loadModel says so).
	anyVariant := false
	for _, ref := range c.Args().Slice() {
		anyVariant = anyVariant || !zooroot.IsONNXPath(ref)
	}
	// Load every model before timing anything, so a typo fails at once.
	for _, ref := range c.Args().Slice() {
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
		bm.maxLen, bm.maxLenWhy = bm.plan.Limit(m.MaxLen()) // a file's too: its table, its static length
		if plan.Runtime != nil {
			if bm.onnx, err = onnx.Export(m.Graph(), onnx.ExportOptions{ProducerVersion: version}); err != nil {
				return failed(fmt.Errorf("export %s: %w", m.Name(), err))
			}
			if bm.graph, err = onnx.Import(bm.onnx); err != nil {
				return failed(fmt.Errorf("re-import the export of %s: %w", m.Name(), err))
			}
		}
		if err := guardBench(bm, opts.Batches, opts.Seqs, plan.Runtime != nil); err != nil {
			return err
		}
		plan.Models = append(plan.Models, bm.target())
	}
	if err := plan.CheckLengths(); err != nil {
		return badInput(err)
	}
	// The session cancels c.Context on SIGINT and SIGTERM (session.go).
	status := bench.NewProgress(c.App.ErrWriter, "bench", isTerminal(c.App.ErrWriter))
	defer status.Done()
	return failed(bench.Run(c.Context, plan, c.App.Writer, c.App.ErrWriter, status))
}

// isTerminal reports whether w is a terminal (an *os.File that is one).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
