package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/benchplot"
	"github.com/zoo-dev/zoo/onnx/ort"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Flags are zoo bench's flags as given (FormatSet: --format was given).
type Flags struct {
	Seq, Batch            string
	Reps, Warmup, Threads int
	Format                string
	FormatSet, JSON       bool
	Against, Plot         string
}

// Options are zoo bench's flags, checked.
type Options struct {
	Seqs, Batches         []int
	Reps, Warmup, Threads int
	Format                Format
	// Against is the reference runtime ("onnxruntime"), or "" for none.
	Against string
	// Plot is the .png file to plot to ("" for none).
	Plot string
}

// Parse checks zoo bench's flags; its errors name the flag at fault.
func Parse(f Flags) (Options, error) {
	o := Options{Reps: f.Reps, Warmup: f.Warmup, Threads: f.Threads, Plot: f.Plot}
	var err error
	if o.Seqs, err = format.ParseCounts("seq", f.Seq); err != nil {
		return o, err
	}
	if o.Batches, err = format.ParseCounts("batch", f.Batch); err != nil {
		return o, err
	}
	if o.Reps < 1 {
		return o, fmt.Errorf("--reps must be at least 1, got %d", o.Reps)
	}
	if o.Warmup < 0 || o.Threads < 0 {
		return o, fmt.Errorf("--warmup and --threads must not be negative (got %d, %d)", o.Warmup, o.Threads)
	}
	if o.Format, err = ParseFormat(f.Format); err != nil {
		return o, err
	}
	if f.JSON {
		if f.FormatSet && o.Format != JSON {
			return o, fmt.Errorf("--json and --format %s disagree; use one", o.Format)
		}
		o.Format = JSON
	}
	switch o.Against = strings.ToLower(strings.TrimSpace(f.Against)); o.Against {
	case "", "onnxruntime":
	case "ort":
		o.Against = "onnxruntime"
	default:
		return o, fmt.Errorf("unknown --against %q: the only reference runtime is onnxruntime", f.Against)
	}
	if o.Plot != "" && !strings.EqualFold(filepath.Ext(o.Plot), ".png") {
		return o, fmt.Errorf("--plot %s: want a .png file", o.Plot)
	}
	return o, nil
}

// Backends chooses the backends named in names ("cpu,cuda"; "" for the default), each once,
// and refuses one that check refuses (check's error is returned as it is).
func Backends(names string, check func(backends.Choice) error) ([]backends.Choice, error) {
	var choices []backends.Choice
	seen := map[string]bool{}
	for _, name := range strings.Split(names, ",") {
		ch, err := backends.Select(name)
		if err != nil {
			return nil, err
		}
		if err := check(ch); err != nil {
			return nil, err
		}
		if !seen[ch.Backend.Name()] {
			seen[ch.Backend.Name()] = true
			choices = append(choices, ch)
		}
	}
	return choices, nil
}

// Model is a model to time: its display name, the graph zoo runs (the model's, or its ONNX
// export re-imported when a reference runtime runs the export), the export (with a
// reference runtime), the plan that feeds every input by its role as zoo run feeds them,
// and its maximum length (0: none) with what sets it (FeedPlan.Limit; "" reads max_len).
type Model struct {
	Name      string
	Graph     *graph.Graph
	ONNX      []byte
	Feeds     *zooroot.FeedPlan
	MaxLen    int
	MaxLenWhy string
}

// why says what sets m's maximum length, and for a variant's max_len how to change it.
func (m Model) why() string {
	if m.MaxLenWhy == "" || m.MaxLenWhy == "max_len" {
		return "max_len; pass shorter lengths or --set max_len=N"
	}
	return m.MaxLenWhy
}

// Fits reports whether length n fits the model.
func (m Model) Fits(n int) bool { return m.MaxLen == 0 || n <= m.MaxLen }

// Plan is a benchmark: every model on every backend at every batch size and length.
type Plan struct {
	Options
	Models   []Model
	Backends []backends.Choice
	// Precision is what programs compile with (backends.Options.Precision); Reported names
	// the precision a backend's programs then compute in, for the report.
	Precision string
	Reported  func(backend string) string
	// Runtime is the reference runtime (with Options.Against), else nil.
	Runtime *ort.Runtime
	// ZooVersion is zoo's version, for the report's header.
	ZooVersion string
	// SeqSet says --seq was given: one model and a length it cannot take is then an error.
	SeqSet bool
}

// CheckLengths refuses, for one model and an explicit --seq, a length beyond its maximum (as
// zoo show does); over several models (or the default list) such lengths are skipped.
func (p *Plan) CheckLengths() error {
	if m := p.Models[0]; len(p.Models) == 1 && p.SeqSet {
		for _, n := range p.Seqs {
			if !m.Fits(n) {
				return fmt.Errorf("--seq %d is longer than %s's maximum length %d (%s)", n, m.Name, m.MaxLen, m.why())
			}
		}
	}
	return nil
}

// Run times every combination of p, printing each row to w as it finishes in p.Format, the
// notes of skipped lengths to notes (CSV), and its status to status; it writes p.Plot. A
// failed compile or run, or no combination that could run, is an error.
func Run(ctx context.Context, p *Plan, w, notes io.Writer, status *Progress) error {
	doc := &Doc{Machine: Machine{CPU: cpu.CPUModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		ZooVersion: p.ZooVersion, GoVersion: runtime.Version(), Timing: TimingDoc, Memory: MemoryDoc}}
	if p.Runtime != nil {
		doc.Machine.ONNXRuntime = p.Runtime.Version
	}
	lay := Layout{Batches: p.Batches, Seqs: p.Seqs, WithORT: p.Runtime != nil, Reps: p.Reps, Warmup: p.Warmup}
	total := 0
	for _, m := range p.Models {
		lay.Variants = append(lay.Variants, m.Name)
		for _, b := range p.Batches {
			for _, n := range p.Seqs {
				if m.Fits(n) {
					total += len(p.Backends)
				} else {
					doc.Skipped = append(doc.Skipped, Skip{Variant: m.Name, Batch: b, N: n,
						Reason: fmt.Sprintf("longer than its maximum length %d (%s)", m.MaxLen, strings.TrimSuffix(m.why(), "; pass shorter lengths or --set max_len=N"))})
				}
			}
		}
	}
	if p.Format == CSV {
		for _, s := range doc.Skipped {
			fmt.Fprintf(notes, "zoo bench: note: %s batch %d n=%d skipped: %s\n", s.Variant, s.Batch, s.N, s.Reason)
		}
	}
	for _, ch := range p.Backends {
		bb := Backend{Name: ch.Backend.Name(), Level: ch.Probe.Level, Precision: p.Reported(ch.Backend.Name()),
			Device: ch.Probe.Device, Threads: ch.Probe.Threads, Why: ch.Why}
		if p.Threads > 0 {
			bb.Threads = p.Threads
		}
		status.Say("measuring the SGEMM peak of %s", bb.Name)
		if err := MeasurePeak(ctx, ch.Backend, &bb); err != nil {
			return err
		}
		bb.FirstPeakGFLOPS = bb.PeakGFLOPS
		doc.Machine.Backends = append(doc.Machine.Backends, bb)
	}
	out := NewRenderer(w, p.Format, lay)
	if err := out.Begin(doc); err != nil {
		return err
	}
	r := &runner{Plan: p, doc: doc, out: out, status: status, total: total}
	for _, m := range p.Models {
		for bi, ch := range p.Backends {
			if err := r.rowsOn(ctx, m, bi, ch); err != nil {
				return err
			}
		}
	}
	status.Done()
	doc.Fit()
	if p.Plot != "" && len(doc.Rows) > 0 {
		if err := WritePlot(p.Plot, doc); err != nil {
			return err
		}
	}
	if err := out.End(doc); err != nil {
		return err
	}
	if len(doc.Rows) == 0 {
		return errors.New("bench: no combination could run: every --seq is longer than the models' maximum length (max_len); pass shorter lengths or --set max_len=N")
	}
	if p.Plot != "" && p.Format != JSON && p.Format != CSV {
		fmt.Fprintf(w, "plot: %s\n", p.Plot)
	}
	return nil
}

// runner is the state of Run between rows.
type runner struct {
	*Plan
	doc         *Doc
	out         *Renderer
	status      *Progress
	done, total int
}

// rowsOn times model m on backend choice bi at every batch size and length, printing each
// row as it finishes, and measures the backend's SGEMM peak again after each row, keeping
// the best reading (see Doc.KeepBetterPeak).
func (r *runner) rowsOn(ctx context.Context, m Model, bi int, ch backends.Choice) error {
	bb := r.doc.Machine.Backends[bi]
	prog, err := ch.Backend.Compile(m.Graph, backends.Options{Threads: r.Threads, Precision: r.Precision})
	if err != nil {
		return fmt.Errorf("compile %s on %s: %w", m.Name, bb.Name, err)
	}
	defer prog.Close()
	var sess *ort.Session
	if r.Runtime != nil {
		if sess, err = r.Runtime.NewSession(m.ONNX, ort.SessionOptions{Threads: bb.Threads}); err != nil {
			return fmt.Errorf("onnxruntime: model %s: %w", m.Name, err)
		}
		defer sess.Close()
	}
	for _, b := range r.Batches {
		for _, n := range r.Seqs {
			if !m.Fits(n) {
				continue
			}
			r.done++
			r.status.Say("%s on %s: batch %d, n %d (%d/%d)", m.Name, bb.Name, b, n, r.done, r.total)
			row, err := RunOne(ctx, m, prog, sess, r.doc.Machine.Backends[bi], b, n, r.Reps, r.Warmup)
			if err != nil {
				return err
			}
			row.SeriesKey = m.Name + " " + bb.Name
			row.ORTSeries = m.Name + " onnxruntime"
			if len(r.Backends) > 1 {
				row.ORTSeries += " (vs " + bb.Name + ")"
			}
			if len(r.Batches) > 1 {
				row.SeriesKey += fmt.Sprintf(" b=%d", b)
				row.ORTSeries += fmt.Sprintf(" b=%d", b)
			}
			r.doc.Rows = append(r.doc.Rows, row)
			again := r.doc.Machine.Backends[bi]
			if err := MeasurePeak(ctx, ch.Backend, &again); err != nil {
				return err
			}
			r.doc.KeepBetterPeak(bi, again)
			r.status.Clear()
			if err := r.out.Row(r.doc, r.doc.Rows[len(r.doc.Rows)-1]); err != nil {
				return err
			}
		}
		if err := r.out.EndSeries(r.doc); err != nil {
			return err
		}
	}
	return nil
}

// RunOne times one (model, backend, batch, n) combination: prog, compiled from m.Graph on
// backend bb, and when sess is set ONNX Runtime's session of m.ONNX, in interleaved pairs.
func RunOne(ctx context.Context, m Model, prog backends.Program, sess *ort.Session, bb Backend, b, n, reps, warmup int) (Row, error) {
	row := Row{Variant: m.Name, Backend: bb.Name, Level: bb.Level, Precision: bb.Precision, Threads: bb.Threads, Batch: b, N: n,
		Reps: reps, Warmup: warmup}
	feed, err := Inputs(m, b, n)
	if err != nil {
		return row, err
	}
	if cost, err := m.Graph.Cost(m.Feeds.Shapes(b, n)); err == nil {
		row.FLOPs, row.GraphActBytes = cost.FLOPs, cost.ActivationBytes
	}
	name := fmt.Sprintf("%s on %s at batch %d, n %d", m.Name, bb.Name, b, n)
	zooRun := func() error {
		_, err := prog.Run(ctx, feed)
		return err
	}
	if sess == nil {
		t, err := TimeRuns(ctx, zooRun, reps, warmup)
		if err != nil {
			return row, fmt.Errorf("run %s: %w", name, err)
		}
		row.MSSamples, row.PeakRSSGrowth, row.GoAllocPerRun = t.MS, t.PeakRSS, t.AllocPerRun
	} else {
		ortRun := func() error {
			_, err := sess.Run(feed, nil)
			return err
		}
		pairs, err := TimePaired(ctx, zooRun, ortRun, reps, warmup)
		if err != nil {
			return row, fmt.Errorf("%s: %w", name, err)
		}
		row.MSSamples, row.PeakRSSGrowth, row.GoAllocPerRun = pairs.Zoo, pairs.ZooRSS, pairs.ZooAlloc
		mean, sd := MeanStddev(pairs.Ref)
		tps := float64(b*n) / (mean / 1000)
		row.ORTMSSamples, row.ORTMSMean, row.ORTMSStddev, row.ORTPeakRSS, row.ORTTokensPS = pairs.Ref, &mean, &sd, pairs.RefRSS, &tps
		row.ZooOverORT = &pairs.Ratio
	}
	row.MSMean, row.MSStddev = MeanStddev(row.MSSamples)
	row.SetThroughput(bb.PeakGFLOPS)
	return row, nil
}

// Inputs makes a (b, n) batch of the sample text's token ids (wrapping around) for m's token
// input, every other input fed by its role as zoo run feeds it (masks all valid, token types
// zero, positions 0..n-1).
func Inputs(m Model, b, n int) (map[string]*tensor.Tensor, error) {
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
	feed, err := m.Feeds.Tensors(batch, 0)
	if err != nil {
		return nil, fmt.Errorf("bench input (%d, %d): %w", b, n, err)
	}
	return feed, nil
}

// WritePlot plots d's series (time and memory against n, log-log) to the PNG file path.
func WritePlot(path string, d *Doc) error {
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

// Progress writes a one-line status (to a terminal), or nothing when inactive (scripts and
// pipes get a clean stderr).
type Progress struct {
	w      io.Writer
	active bool
	// verb starts the line ("bench").
	verb string
}

// NewProgress returns the status line of verb on w, shown only when active (w is a
// terminal).
func NewProgress(w io.Writer, verb string, active bool) *Progress {
	return &Progress{w: w, active: active, verb: verb}
}

// Say replaces the status line.
func (p *Progress) Say(format string, args ...any) {
	if p.active {
		fmt.Fprintf(p.w, "\r\033[K"+p.verb+": "+format, args...)
	}
}

// Clear erases the status line so that a row printed to the same terminal starts clean.
func (p *Progress) Clear() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// Done erases the status line for good.
func (p *Progress) Done() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
		p.active = false
	}
}
