package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/benchplot"
	"github.com/zoo-dev/zoo/internal/pairtime"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// benchMemoryDoc says exactly what the memory columns measure (printed in every report).
const benchMemoryDoc = "mem = peak RSS growth: before each row zoo collects garbage, returns free memory to the OS " +
	"(debug.FreeOSMemory), resets the kernel's peak-RSS mark (/proc/self/clear_refs) and reads VmRSS; after the " +
	"warm-up and timed runs it reads VmHWM; mem = VmHWM − VmRSS before. It counts everything the runs touched " +
	"(Go heap including garbage not yet collected, C memory, stacks), not the weights compiled beforehand. " +
	"With --against, each runtime's mem is measured the same way over its own warm-up runs (at least one), run alone"

// benchTimingDoc says how a row is timed.
const benchTimingDoc = "ms = mean ± sample stddev of the wall time of one Run over --reps repetitions after --warmup untimed runs; " +
	"tokens/s = batch·n / mean; GFLOP/s = FLOPs counted over the graph (zoo show) / mean; " +
	"% SGEMM peak = GFLOP/s / measured SGEMM peak"

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "time variants over batch sizes × sequence lengths (ms, tokens/s, GFLOP/s, % of measured SGEMM peak, memory)",
		ArgsUsage: "NAME[.PRESET]...",
		Description: "Runs every combination of models × backends × --batch × --seq on synthetic token batches (the sample\n" +
			"text, no padding) and prints one row each, like llama-bench. " + benchTimingDoc + ".\n" +
			"The SGEMM peak is measured per backend before the rows and again after each row, and the best reading\n" +
			"kept: a 1024×1024×1024 MatMul graph (4096 on accelerators) compiled by that backend with the same\n" +
			"threads, best of 5 runs after a warm-up.\n" +
			benchMemoryDoc + ". go_alloc_bytes_per_run (JSON/CSV) is the Go heap allocated per timed run.\n" +
			"Sequence lengths beyond a model's max_len are skipped with a note. --against onnxruntime also runs the\n" +
			"model's ONNX export under ONNX Runtime with the same thread count (zoo then runs that same exported graph)\n" +
			"and reports zoo/ORT = the median over the --reps timed pairs of ORT time / zoo time (above 1: zoo is\n" +
			"faster); the timed runs alternate zoo and ORT, each after a 5 ms pause, because a shared machine's load\n" +
			"drifts between two back-to-back series by more than the difference being measured. The footer gives each series' fitted\n" +
			"exponent k: the least-squares slope of log time against log n (time ∝ n^k).\n" +
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
		),
		Action: benchAction,
	}
}

// benchRow is one measured combination; JSON and CSV carry every field.
type benchRow struct {
	Variant        string    `json:"variant"`
	Backend        string    `json:"backend"`
	Level          string    `json:"kernel_level"`
	Threads        int       `json:"threads"`
	Batch          int       `json:"batch"`
	N              int       `json:"n"`
	Reps           int       `json:"reps"`
	Warmup         int       `json:"warmup"`
	MSMean         float64   `json:"ms_mean"`
	MSStddev       float64   `json:"ms_stddev"`
	MSSamples      []float64 `json:"ms_samples"`
	TokensPS       float64   `json:"tokens_per_s"`
	FLOPs          int64     `json:"flops"`
	GFLOPS         float64   `json:"gflop_per_s"`
	PeakGFLOPS     float64   `json:"sgemm_peak_gflop_per_s"`
	PctPeak        float64   `json:"pct_of_sgemm_peak"`
	PeakRSSGrowth  *int64    `json:"peak_rss_growth_bytes"`
	GoAllocPerRun  int64     `json:"go_alloc_bytes_per_run"`
	GraphActBytes  int64     `json:"graph_peak_activation_bytes"`
	ORTMSMean      *float64  `json:"ort_ms_mean,omitempty"`
	ORTMSStddev    *float64  `json:"ort_ms_stddev,omitempty"`
	ORTMSSamples   []float64 `json:"ort_ms_samples,omitempty"`
	ORTTokensPS    *float64  `json:"ort_tokens_per_s,omitempty"`
	ORTPeakRSS     *int64    `json:"ort_peak_rss_growth_bytes,omitempty"`
	ZooOverORT     *float64  `json:"zoo_over_ort,omitempty"`
	seriesKey      string
	ortSeriesLabel string
}

// benchBackend describes one backend of the run and its measured SGEMM peak.
type benchBackend struct {
	Name       string  `json:"name"`
	Level      string  `json:"kernel_level"`
	Device     string  `json:"device"`
	Threads    int     `json:"threads"`
	Why        string  `json:"why_chosen"`
	PeakSize   int     `json:"sgemm_size"`
	PeakMS     float64 `json:"sgemm_best_ms"`
	PeakGFLOPS float64 `json:"sgemm_peak_gflop_per_s"`
}

// benchMachine is the header of the JSON document.
type benchMachine struct {
	CPU         string         `json:"cpu"`
	Cores       int            `json:"cores"`
	OS          string         `json:"os"`
	Arch        string         `json:"arch"`
	ZooVersion  string         `json:"zoo_version"`
	GoVersion   string         `json:"go_version"`
	Backends    []benchBackend `json:"backends"`
	ONNXRuntime string         `json:"onnxruntime_version,omitempty"`
	Timing      string         `json:"timing"`
	Memory      string         `json:"memory"`
}

// benchFit is a series' fitted exponents.
type benchFit struct {
	Series       string   `json:"series"`
	Variant      string   `json:"variant"`
	Backend      string   `json:"backend"`
	Batch        int      `json:"batch"`
	Points       int      `json:"points"`
	TimeExponent *float64 `json:"time_exponent"`
	MemExponent  *float64 `json:"memory_exponent"`
}

// benchSkip is a combination that was not run, and why.
type benchSkip struct {
	Variant string `json:"variant"`
	Batch   int    `json:"batch"`
	N       int    `json:"n"`
	Reason  string `json:"reason"`
}

// benchDoc is the whole report (--format json prints it).
type benchDoc struct {
	Machine benchMachine `json:"machine"`
	Rows    []benchRow   `json:"rows"`
	Fits    []benchFit   `json:"fits"`
	Skipped []benchSkip  `json:"skipped"`
	series  []benchplot.Series
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
	*model
	tok, mask string
	maxLen    int
	onnx      []byte       // the export, with --against
	graph     *graph.Graph // the graph zoo runs: the model's, or the export re-imported with --against
}

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
	format := strings.ToLower(strings.TrimSpace(c.String("format")))
	if c.Bool(flagJSON.Name) {
		if c.IsSet("format") && format != "json" {
			return badInputf("--json and --format %s disagree; use one", format)
		}
		format = "json"
	}
	switch format {
	case "table", "md", "csv", "json":
	default:
		return badInputf("unknown --format %q: want table, md, csv or json", c.String("format"))
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
		if err := tensorio.CheckWritable(plotPath); err != nil {
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
		if !seen[ch.Backend.Name()] {
			seen[ch.Backend.Name()] = true
			choices = append(choices, ch)
		}
	}
	var rt *ort.Runtime
	if against != "" {
		if rt, err = ort.Open(); err != nil {
			return failed(fmt.Errorf("--against onnxruntime: %w", err))
		}
	}
	// Load every model before timing anything, so a typo fails at once.
	var models []*benchModel
	for _, ref := range c.Args().Slice() {
		m, err := loadModel(c, ref)
		if err != nil {
			return err
		}
		bm := &benchModel{model: m, graph: m.Graph}
		if bm.tok, bm.mask, err = tokenInputs(m.Graph); err != nil {
			return badInput(err)
		}
		if p := m.Desc.Caps.MaxLenParam; p != "" && !m.FromFile {
			bm.maxLen = m.Config.Int(p)
		}
		if rt != nil {
			if bm.onnx, err = onnx.Export(m.Graph, onnx.ExportOptions{ProducerVersion: version}); err != nil {
				return failed(fmt.Errorf("export %s: %w", m.displayName(), err))
			}
			if bm.graph, err = onnx.Import(bm.onnx); err != nil {
				return failed(fmt.Errorf("re-import the export of %s: %w", m.displayName(), err))
			}
		}
		models = append(models, bm)
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	prog := newBenchProgress(c.App.ErrWriter)
	defer prog.done()
	doc := &benchDoc{Machine: benchMachine{CPU: cpuModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		ZooVersion: version, GoVersion: runtime.Version(), Timing: benchTimingDoc, Memory: benchMemoryDoc}}
	if rt != nil {
		doc.Machine.ONNXRuntime = rt.Version
	}
	for _, ch := range choices {
		bb := benchBackend{Name: ch.Backend.Name(), Level: ch.Probe.Level, Device: ch.Probe.Device, Threads: ch.Probe.Threads, Why: ch.Why}
		if threads > 0 {
			bb.Threads = threads
		}
		prog.say("measuring the SGEMM peak of %s", bb.Name)
		if err := measurePeak(ctx, ch.Backend, &bb); err != nil {
			return failed(err)
		}
		doc.Machine.Backends = append(doc.Machine.Backends, bb)
	}
	total := len(models) * len(choices) * len(batches) * len(seqs)
	done := 0
	// rowsOn times model bm on backend choice bi at every batch size and length, appends
	// the rows, and measures the backend's SGEMM peak again after each row, keeping the
	// best reading: on a shared machine one reading can fall in a slow spell, and rows
	// timed in a faster one would then show more than 100 % of it.
	rowsOn := func(bm *benchModel, bi int, ch backends.Choice) error {
		bb := doc.Machine.Backends[bi]
		p, err := ch.Backend.Compile(bm.graph, backends.Options{Threads: threads})
		if err != nil {
			return failed(fmt.Errorf("compile %s on %s: %w", bm.displayName(), bb.Name, err))
		}
		defer p.Close()
		var sess *ort.Session
		if rt != nil {
			if sess, err = rt.NewSession(bm.onnx, ort.SessionOptions{Threads: bb.Threads}); err != nil {
				return failed(fmt.Errorf("onnxruntime: model %s: %w", bm.displayName(), err))
			}
			defer sess.Close()
		}
		for _, b := range batches {
			for _, n := range seqs {
				if bm.maxLen > 0 && n > bm.maxLen {
					continue
				}
				done++
				prog.say("%s on %s: batch %d, n %d (%d/%d)", bm.displayName(), bb.Name, b, n, done, total)
				row, err := benchOne(ctx, bm, p, sess, bb, b, n, reps, warmup)
				if err != nil {
					return err
				}
				row.seriesKey = bm.displayName() + " " + bb.Name
				row.ortSeriesLabel = bm.displayName() + " onnxruntime"
				if len(choices) > 1 {
					row.ortSeriesLabel += " (vs " + bb.Name + ")"
				}
				if len(batches) > 1 {
					row.seriesKey += fmt.Sprintf(" b=%d", b)
					row.ortSeriesLabel += fmt.Sprintf(" b=%d", b)
				}
				doc.Rows = append(doc.Rows, row)
				again := doc.Machine.Backends[bi]
				if err := measurePeak(ctx, ch.Backend, &again); err != nil {
					return failed(err)
				}
				doc.keepBetterPeak(bi, again)
			}
		}
		return nil
	}
	for _, bm := range models {
		for _, b := range batches {
			for _, n := range seqs {
				if bm.maxLen > 0 && n > bm.maxLen {
					doc.Skipped = append(doc.Skipped, benchSkip{Variant: bm.displayName(), Batch: b, N: n,
						Reason: fmt.Sprintf("longer than its maximum length %d (max_len)", bm.maxLen)})
				}
			}
		}
		for bi, ch := range choices {
			if err := rowsOn(bm, bi, ch); err != nil {
				return err
			}
		}
	}
	prog.done()
	doc.fit()

	if plotPath != "" {
		if err := writeBenchPlot(plotPath, doc); err != nil {
			return failed(err)
		}
	}
	w := c.App.Writer
	switch format {
	case "json":
		if doc.Rows == nil {
			doc.Rows = []benchRow{}
		}
		if doc.Skipped == nil {
			doc.Skipped = []benchSkip{}
		}
		if doc.Fits == nil {
			doc.Fits = []benchFit{}
		}
		return writeJSON(w, doc)
	case "csv":
		for _, s := range doc.Skipped {
			fmt.Fprintf(c.App.ErrWriter, "zoo bench: note: %s n=%d skipped: %s\n", s.Variant, s.N, s.Reason)
		}
		return writeBenchCSV(w, doc)
	default:
		renderBench(w, doc, format == "md", rt != nil, reps, warmup)
		if plotPath != "" {
			fmt.Fprintf(w, "plot: %s\n", plotPath)
		}
		return nil
	}
}

// benchOne times one (model, backend, batch, n) combination on zoo and, when sess is set,
// on ONNX Runtime.
func benchOne(ctx context.Context, bm *benchModel, p backends.Program, sess *ort.Session, bb benchBackend, b, n, reps, warmup int) (benchRow, error) {
	row := benchRow{Variant: bm.displayName(), Backend: bb.Name, Level: bb.Level, Threads: bb.Threads, Batch: b, N: n,
		Reps: reps, Warmup: warmup, PeakGFLOPS: bb.PeakGFLOPS}
	feed, err := benchInputs(bm, b, n)
	if err != nil {
		return row, failed(err)
	}
	shapes := map[string][]int{bm.tok: {b, n}}
	if bm.mask != "" {
		shapes[bm.mask] = []int{b, n}
	}
	if cost, err := bm.graph.Cost(shapes); err == nil {
		row.FLOPs, row.GraphActBytes = cost.FLOPs, cost.ActivationBytes
	}
	name := fmt.Sprintf("%s on %s at batch %d, n %d", bm.displayName(), bb.Name, b, n)
	zooRun := func() error {
		_, err := p.Run(ctx, feed)
		return err
	}
	var samples, ortSamples []float64
	var rss, ortRSS *int64
	var alloc int64
	if sess == nil {
		samples, rss, alloc, err = timeRuns(ctx, zooRun, reps, warmup)
	} else {
		ortRun := func() error {
			_, err := sess.Run(feed, nil)
			return err
		}
		var pairs paired
		pairs, err = timePaired(ctx, zooRun, ortRun, reps, warmup)
		if err != nil {
			return row, failed(fmt.Errorf("%s: %w", name, err))
		}
		samples, rss, alloc = pairs.zoo, pairs.zooRSS, pairs.zooAlloc
		ortSamples, ortRSS = pairs.ref, pairs.refRSS
		ratio := pairs.ratio
		row.ZooOverORT = &ratio
	}
	if err != nil {
		return row, failed(fmt.Errorf("run %s: %w", name, err))
	}
	row.MSSamples = samples
	row.MSMean, row.MSStddev = meanStddev(samples)
	row.PeakRSSGrowth, row.GoAllocPerRun = rss, alloc
	tokens := float64(b * n)
	if row.MSMean > 0 {
		row.TokensPS = tokens / (row.MSMean / 1000)
		row.GFLOPS = float64(row.FLOPs) / (row.MSMean / 1000) / 1e9
	}
	if bb.PeakGFLOPS > 0 {
		row.PctPeak = 100 * row.GFLOPS / bb.PeakGFLOPS
	}
	if sess != nil {
		mean, sd := meanStddev(ortSamples)
		row.ORTMSSamples, row.ORTMSMean, row.ORTMSStddev, row.ORTPeakRSS = ortSamples, &mean, &sd, ortRSS
		tps := tokens / (mean / 1000)
		row.ORTTokensPS = &tps
	}
	return row, nil
}

// benchInputs makes a (b, n) batch of the sample text's token ids (wrapping around) and an
// all-valid padding mask.
func benchInputs(bm *benchModel, b, n int) (map[string]*tensor.Tensor, error) {
	ids := tokenize.Encode(zooroot.SampleText)
	if len(ids) == 0 {
		ids = []int64{1}
	}
	data := make([]int64, b*n)
	for i := range data {
		data[i] = ids[i%len(ids)]
	}
	tok, err := tensor.FromInt64(data, b, n)
	if err != nil {
		return nil, fmt.Errorf("bench input (%d, %d): %w", b, n, err)
	}
	feed := map[string]*tensor.Tensor{bm.tok: tok}
	if bm.mask != "" {
		if feed[bm.mask], err = tensor.FromBool(make([]bool, b*n), b, n); err != nil {
			return nil, fmt.Errorf("bench mask (%d, %d): %w", b, n, err)
		}
	}
	return feed, nil
}

// timeRuns runs fn warmup times untimed and reps times timed, returning the times in ms, the
// peak RSS growth over all runs (nil where it cannot be measured; see benchMemoryDoc) and
// the Go heap bytes allocated per timed run.
func timeRuns(ctx context.Context, fn func() error, reps, warmup int) ([]float64, *int64, int64, error) {
	base, rssOK := rssBegin()
	for i := 0; i < warmup; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		if err := fn(); err != nil {
			return nil, nil, 0, err
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	samples := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		t0 := time.Now()
		if err := fn(); err != nil {
			return nil, nil, 0, err
		}
		samples = append(samples, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	runtime.ReadMemStats(&after)
	var rss *int64
	if rssOK {
		if _, hwm, ok := readRSS(); ok {
			g := max(hwm-base, 0)
			rss = &g
		}
	}
	return samples, rss, int64(after.TotalAlloc-before.TotalAlloc) / int64(reps), nil
}

// paired holds the results of timePaired.
type paired struct {
	zoo, ref       []float64 // ms per timed run
	zooRSS, refRSS *int64    // peak RSS growth over each one's own warm-up (nil: not measurable)
	zooAlloc       int64     // Go heap allocated per timed zoo run
	ratio          float64   // median over the pairs of ref time / zoo time
}

// pairGap is the idle time before each timed run of timePaired: both runtimes keep worker
// threads spinning for a moment after a run (zoo's for 2 ms), and the other runtime's next
// run must not pay for it.
const pairGap = 5 * time.Millisecond

// timePaired times zoo against a reference runtime on a shared machine, whose load drifts
// between two consecutive series by more than the difference being measured: it warms up
// each alone (max(warmup, 1) runs, measuring each one's peak RSS growth there), then runs
// reps timed pairs, alternating which goes first, and takes the ratio from each pair.
func timePaired(ctx context.Context, zoo, ref func() error, reps, warmup int) (paired, error) {
	var r paired
	ortRun := func() error {
		if err := ref(); err != nil {
			return fmt.Errorf("onnxruntime: %w", err)
		}
		return nil
	}
	// Each warms up alone, as an untimed series of its own, which also gives its peak RSS.
	var err error
	if _, r.zooRSS, _, err = timeRuns(ctx, zoo, max(warmup, 1), 0); err != nil {
		return r, err
	}
	if _, r.refRSS, _, err = timeRuns(ctx, ortRun, max(warmup, 1), 0); err != nil {
		return r, err
	}
	var before, after runtime.MemStats
	var allocs uint64
	res, err := pairtime.Interleave(ctx, zoo, ortRun, reps, pairGap, func(done bool) {
		if !done {
			runtime.ReadMemStats(&before)
			return
		}
		runtime.ReadMemStats(&after)
		allocs += after.TotalAlloc - before.TotalAlloc
	})
	if err != nil {
		return r, err
	}
	r.zoo, r.ref, r.ratio = res.A, res.B, res.Ratio
	r.zooAlloc = int64(allocs) / int64(reps)
	return r, nil
}

// rssBegin frees what it can, resets the peak-RSS mark and returns the current RSS. It
// reports false where /proc does not allow that (not Linux, or a restricted sandbox).
func rssBegin() (int64, bool) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, false
	}
	rss, _, ok := readRSS()
	return rss, ok
}

// readRSS returns VmRSS and VmHWM from /proc/self/status, in bytes.
func readRSS() (rss, hwm int64, ok bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, cut := strings.Cut(sc.Text(), ":")
		if !cut || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
		found++
	}
	return rss, hwm, found == 2
}

func meanStddev(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)-1))
}

// measurePeak times a large square SGEMM (a MatMul graph with a constant right operand, as
// in the models' projections) through the backend itself and records the best of 5 runs.
func measurePeak(ctx context.Context, b backends.Backend, bb *benchBackend) error {
	size := 1024
	if b.Name() != "cpu" {
		size = 4096 // accelerators need a larger product to approach their peak
	}
	bld := graph.NewBuilder("sgemm_peak")
	a := bld.Input("a", tensor.Float32, graph.Fixed(int64(size)), graph.Fixed(int64(size)))
	w, err := tensor.New(tensor.Float32, size, size)
	if err != nil {
		return fmt.Errorf("sgemm peak: %w", err)
	}
	x, err := tensor.New(tensor.Float32, size, size)
	if err != nil {
		return fmt.Errorf("sgemm peak: %w", err)
	}
	for i := range w.F32 {
		w.F32[i] = float32(i%17)/17 - 0.5
		x.F32[i] = float32(i%13)/13 - 0.5
	}
	y := bld.MatMul(a, bld.Param("b", w))
	bld.Output(y, y, tensor.Float32, graph.Fixed(int64(size)), graph.Fixed(int64(size)))
	g, err := bld.Build()
	if err != nil {
		return fmt.Errorf("sgemm peak graph: %w", err)
	}
	p, err := b.Compile(g, backends.Options{Threads: bb.Threads})
	if err != nil {
		return fmt.Errorf("sgemm peak: compile on %s: %w", b.Name(), err)
	}
	defer p.Close()
	feed := map[string]*tensor.Tensor{a: x}
	best := math.Inf(1)
	for i := 0; i < 6; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := p.Run(ctx, feed); err != nil {
			return fmt.Errorf("sgemm peak: run on %s: %w", b.Name(), err)
		}
		if d := float64(time.Since(t0).Nanoseconds()) / 1e6; i > 0 && d < best {
			best = d
		}
	}
	bb.PeakSize, bb.PeakMS = size, best
	bb.PeakGFLOPS = 2 * math.Pow(float64(size), 3) / (best / 1000) / 1e9
	return nil
}

// keepBetterPeak replaces backend bi's SGEMM peak with again's when again measured more,
// and sets that backend's rows' peak and percentage from the peak kept.
func (d *benchDoc) keepBetterPeak(bi int, again benchBackend) {
	bb := &d.Machine.Backends[bi]
	if again.PeakGFLOPS > bb.PeakGFLOPS {
		bb.PeakSize, bb.PeakMS, bb.PeakGFLOPS = again.PeakSize, again.PeakMS, again.PeakGFLOPS
	}
	if bb.PeakGFLOPS <= 0 {
		return
	}
	for i := range d.Rows {
		if r := &d.Rows[i]; r.Backend == bb.Name {
			r.PeakGFLOPS, r.PctPeak = bb.PeakGFLOPS, 100*r.GFLOPS/bb.PeakGFLOPS
		}
	}
}

// fit groups rows into series and fits the time (and memory) exponents.
func (d *benchDoc) fit() {
	type acc struct {
		fit     benchFit
		n, t, m []float64
		dashed  bool
		color   int
	}
	colors := map[string]int{} // one colour per variant and batch, shared by its backends and ORT
	var order []string
	series := map[string]*acc{}
	add := func(key, variant, backend string, batch, n int, ms float64, mem *int64, dashed bool) {
		s := series[key]
		if s == nil {
			ck := fmt.Sprintf("%s b=%d", variant, batch)
			if _, ok := colors[ck]; !ok {
				colors[ck] = len(colors)
			}
			s = &acc{fit: benchFit{Series: key, Variant: variant, Backend: backend, Batch: batch}, dashed: dashed, color: colors[ck]}
			series[key] = s
			order = append(order, key)
		}
		s.n = append(s.n, float64(n))
		s.t = append(s.t, ms)
		m := -1.0
		if mem != nil {
			m = float64(*mem)
		}
		s.m = append(s.m, m)
	}
	for _, r := range d.Rows {
		add(r.seriesKey, r.Variant, r.Backend, r.Batch, r.N, r.MSMean, r.PeakRSSGrowth, false)
	}
	for _, r := range d.Rows {
		if r.ORTMSMean != nil {
			add(r.ortSeriesLabel, r.Variant, "onnxruntime", r.Batch, r.N, *r.ORTMSMean, r.ORTPeakRSS, true)
		}
	}
	d.Fits, d.series = nil, nil
	for _, key := range order {
		s := series[key]
		s.fit.Points = len(s.n)
		if k, ok := benchplot.Slope(s.n, s.t); ok {
			s.fit.TimeExponent = &k
		}
		if k, ok := benchplot.Slope(s.n, s.m); ok {
			s.fit.MemExponent = &k
		}
		d.Fits = append(d.Fits, s.fit)
		d.series = append(d.series, benchplot.Series{Label: key, N: s.n, TimeMS: s.t, MemBytes: s.m, Dashed: s.dashed, Color: s.color})
	}
}

func writeBenchPlot(path string, d *benchDoc) error {
	if len(d.series) == 0 {
		return fmt.Errorf("--plot %s: no rows were measured, nothing to plot", path)
	}
	var title []string
	for _, b := range d.Machine.Backends {
		title = append(title, fmt.Sprintf("%s (%s, %d threads)", b.Name, b.Level, b.Threads))
	}
	opts := benchplot.Options{Title: "zoo bench on " + strings.Join(title, ", "), MemLabel: "peak RSS growth (MiB)"}
	return tensorio.AtomicWriteFile(path, func(w io.Writer) error {
		return benchplot.Render(w, d.series, opts)
	})
}

// benchColumns returns the header and the formatted cells of the human-readable table.
func benchColumns(d *benchDoc, withORT bool) ([]string, []bool, [][]string) {
	head := []string{"variant", "backend", "level", "batch", "n", "ms", "tokens/s", "GFLOP/s", "% SGEMM peak", "mem"}
	right := []bool{false, false, false, true, true, true, true, true, true, true}
	if withORT {
		head = append(head, "ORT ms", "zoo/ORT")
		right = append(right, true, true)
	}
	var rows [][]string
	for _, r := range d.Rows {
		gf, pct := "-", "-"
		if r.FLOPs > 0 {
			gf = fmt.Sprintf("%.2f", r.GFLOPS)
			pct = fmt.Sprintf("%.1f%%", r.PctPeak)
		}
		mem := "-"
		if r.PeakRSSGrowth != nil {
			mem = humanBytes(*r.PeakRSSGrowth)
		}
		cells := []string{r.Variant, r.Backend, r.Level, strconv.Itoa(r.Batch), strconv.Itoa(r.N),
			fmtMS(r.MSMean, r.MSStddev), fmt.Sprintf("%.0f", r.TokensPS), gf, pct, mem}
		if withORT {
			ortMS, ratio := "-", "-"
			if r.ORTMSMean != nil {
				ortMS = fmtMS(*r.ORTMSMean, *r.ORTMSStddev)
			}
			if r.ZooOverORT != nil {
				ratio = fmt.Sprintf("%.2f×", *r.ZooOverORT)
			}
			cells = append(cells, ortMS, ratio)
		}
		rows = append(rows, cells)
	}
	return head, right, rows
}

func fmtMS(mean, sd float64) string {
	prec := 2
	if mean >= 100 {
		prec = 1
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, mean, prec, sd)
}

// renderBench prints the header line, the table (plain or markdown, llama-bench style) and
// the footer: fitted exponents, skipped lengths and what the columns measure.
func renderBench(w io.Writer, d *benchDoc, md, withORT bool, reps, warmup int) {
	m := d.Machine
	fmt.Fprintf(w, "zoo %s, %s, %s/%s, %s (%d cores)\n", m.ZooVersion, m.GoVersion, m.OS, m.Arch, m.CPU, m.Cores)
	for _, b := range m.Backends {
		fmt.Fprintf(w, "backend %s: %s, %d threads; measured SGEMM peak %.1f GFLOP/s (%d×%d×%d MatMul, best of 5: %.2f ms)\n",
			b.Name, b.Level, b.Threads, b.PeakGFLOPS, b.PeakSize, b.PeakSize, b.PeakSize, b.PeakMS)
	}
	if m.ONNXRuntime != "" {
		fmt.Fprintf(w, "against onnxruntime %s (same threads; zoo runs the same exported graph); zoo/ORT = median over interleaved pairs of ORT time / zoo time\n", m.ONNXRuntime)
	}
	fmt.Fprintln(w)
	head, right, rows := benchColumns(d, withORT)
	if len(rows) == 0 {
		fmt.Fprintln(w, "no combination was run")
	} else {
		writeTable(w, head, right, rows, md)
	}
	fmt.Fprintln(w)
	if len(d.Fits) > 0 {
		fmt.Fprintln(w, "fitted exponent k (time ∝ n^k; least-squares slope of log time vs log n over the measured n):")
		for _, f := range d.Fits {
			k := "n/a (needs two or more n)"
			if f.TimeExponent != nil {
				k = fmt.Sprintf("%.2f", *f.TimeExponent)
			}
			mk := ""
			if f.MemExponent != nil {
				mk = fmt.Sprintf("   (memory: %.2f)", *f.MemExponent)
			}
			fmt.Fprintf(w, "  %-40s k = %s%s\n", f.Series, k, mk)
		}
	}
	for _, s := range d.Skipped {
		fmt.Fprintf(w, "note: %s batch %d n=%d skipped: %s\n", s.Variant, s.Batch, s.N, s.Reason)
	}
	fmt.Fprintf(w, "ms: mean ± sample stddev of one run's wall time over %d repetitions after %d warm-up runs; tokens/s = batch·n / mean;\n"+
		"GFLOP/s: the graph's FLOPs (as `zoo show` counts them) / mean; %% SGEMM peak: of the measured SGEMM peak above.\n"+
		"mem: peak RSS growth during the row's runs (VmHWM after − VmRSS before; free memory returned to the OS and the peak\n"+
		"mark reset first): Go heap with uncollected garbage, C memory, stacks; the compiled weights are not counted.\n", reps, warmup)
}

// writeTable prints a column-aligned table; md adds pipes and the alignment row of a
// markdown table (as llama-bench prints it).
func writeTable(w io.Writer, head []string, right []bool, rows [][]string, md bool) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	pad := func(s string, i int) string {
		gap := strings.Repeat(" ", width[i]-utf8.RuneCountInString(s))
		if right[i] {
			return gap + s
		}
		return s + gap
	}
	line := func(cells []string) {
		parts := make([]string, len(cells))
		for i, cell := range cells {
			parts[i] = pad(cell, i)
		}
		if md {
			fmt.Fprintf(w, "| %s |\n", strings.Join(parts, " | "))
		} else {
			fmt.Fprintln(w, strings.TrimRight(strings.Join(parts, "  "), " "))
		}
	}
	if md {
		line(head)
		rule := make([]string, len(head))
		for i := range head {
			if right[i] {
				rule[i] = strings.Repeat("-", max(width[i]-1, 1)) + ":"
			} else {
				rule[i] = strings.Repeat("-", width[i])
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(rule, " | "))
	} else {
		upper := make([]string, len(head))
		for i, h := range head {
			upper[i] = strings.ToUpper(h)
		}
		line(upper)
	}
	for _, r := range rows {
		line(r)
	}
}

// benchCSVHeader is the CSV schema: every row field, then the machine.
var benchCSVHeader = []string{"variant", "backend", "kernel_level", "threads", "batch", "n", "reps", "warmup",
	"ms_mean", "ms_stddev", "tokens_per_s", "flops", "gflop_per_s", "sgemm_peak_gflop_per_s", "pct_of_sgemm_peak",
	"peak_rss_growth_bytes", "go_alloc_bytes_per_run", "graph_peak_activation_bytes",
	"ort_ms_mean", "ort_ms_stddev", "ort_tokens_per_s", "ort_peak_rss_growth_bytes", "zoo_over_ort",
	"time_exponent", "cpu", "cores", "zoo_version", "go_version", "onnxruntime_version"}

func writeBenchCSV(w io.Writer, d *benchDoc) error {
	cw := csv.NewWriter(w)
	cw.Write(benchCSVHeader)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return f(*x)
	}
	optInt := func(x *int64) string {
		if x == nil {
			return ""
		}
		return strconv.FormatInt(*x, 10)
	}
	exps := map[string]*float64{}
	for _, fit := range d.Fits {
		exps[fit.Series] = fit.TimeExponent
	}
	m := d.Machine
	for _, r := range d.Rows {
		cw.Write([]string{r.Variant, r.Backend, r.Level, strconv.Itoa(r.Threads), strconv.Itoa(r.Batch), strconv.Itoa(r.N),
			strconv.Itoa(r.Reps), strconv.Itoa(r.Warmup), f(r.MSMean), f(r.MSStddev), f(r.TokensPS),
			strconv.FormatInt(r.FLOPs, 10), f(r.GFLOPS), f(r.PeakGFLOPS), f(r.PctPeak),
			optInt(r.PeakRSSGrowth), strconv.FormatInt(r.GoAllocPerRun, 10), strconv.FormatInt(r.GraphActBytes, 10),
			opt(r.ORTMSMean), opt(r.ORTMSStddev), opt(r.ORTTokensPS), optInt(r.ORTPeakRSS), opt(r.ZooOverORT),
			opt(exps[r.seriesKey]), m.CPU, strconv.Itoa(m.Cores), m.ZooVersion, m.GoVersion, m.ONNXRuntime})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	return nil
}

// cpuModel returns the CPU's model name from /proc/cpuinfo, or the architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "model name", "Model", "cpu model":
			if v := strings.Join(strings.Fields(val), " "); v != "" {
				return v
			}
		}
	}
	return runtime.GOARCH
}

// benchProgress writes a one-line status to stderr when stderr is a terminal, and nothing
// otherwise (scripts and pipes get clean stderr).
type benchProgress struct {
	w      io.Writer
	active bool
}

func newBenchProgress(w io.Writer) *benchProgress {
	f, ok := w.(*os.File)
	return &benchProgress{w: w, active: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *benchProgress) say(format string, args ...any) {
	if p.active {
		fmt.Fprintf(p.w, "\r\033[Kbench: "+format, args...)
	}
}

func (p *benchProgress) done() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
		p.active = false
	}
}
