package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
)

// Format is an output format of the report.
type Format string

// The formats: a llama-bench-style table, the same as a markdown table, CSV with every
// field, and one JSON document.
const (
	Table    Format = "table"
	Markdown Format = "md"
	CSV      Format = "csv"
	JSON     Format = "json"
)

// ParseFormat returns the format named s (case and surrounding space ignored), or an error
// naming the formats.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case Table, Markdown, CSV, JSON:
		return f, nil
	}
	return "", fmt.Errorf("unknown --format %q: want table, md, csv or json", s)
}

// Layout is what a Renderer must know before the first row: the table's column widths
// follow from it, since rows are printed as they finish.
type Layout struct {
	Variants     []string // display names of the models
	Batches      []int
	Seqs         []int
	WithORT      bool // ONNX Runtime columns
	Reps, Warmup int
}

// Renderer prints a report row by row: Begin once the machine header is known, Row as each
// row finishes, EndSeries when a series (one variant on one backend at one batch size) has
// all its rows, and End after the last. Table and markdown rows appear as they finish; CSV
// rows when their series ends, since each carries its series' fitted exponent; JSON is one
// document, written by End. Write errors of the table are not reported (as with fmt.Print);
// CSV and JSON return theirs.
type Renderer struct {
	w       io.Writer
	f       Format
	lay     Layout
	head    []string
	right   []bool
	width   []int
	rows    int   // rows printed (table, md) or written (csv)
	pending []Row // csv: the rows of the current series
	cw      *csv.Writer
}

// NewRenderer returns a renderer of format f writing to w.
func NewRenderer(w io.Writer, f Format, lay Layout) *Renderer {
	return &Renderer{w: w, f: f, lay: lay}
}

// Begin prints the header: the machine and the backends' first SGEMM peaks (table, md) or
// the CSV header row.
func (r *Renderer) Begin(d *Doc) error {
	switch r.f {
	case CSV:
		r.cw = csv.NewWriter(r.w)
		r.cw.Write(CSVHeader)
		return r.flushCSV()
	case JSON:
		return nil
	}
	m := d.Machine
	fmt.Fprintf(r.w, "zoo %s, %s, %s/%s, %s (%s)\n", m.ZooVersion, m.GoVersion, m.OS, m.Arch, m.CPU, format.Plural(m.Cores, "core"))
	for _, b := range m.Backends {
		prec := ""
		if b.Precision != "" {
			prec = ", precision " + b.Precision
		}
		fmt.Fprintf(r.w, "backend %s: %s, %s%s; measured SGEMM peak %.1f GFLOP/s (%d×%d×%d MatMul, best of 5: %.2f ms)\n",
			b.Name, b.Level, format.Plural(b.Threads, "thread"), prec, b.PeakGFLOPS, b.PeakSize, b.PeakSize, b.PeakSize, b.PeakMS)
	}
	if m.ONNXRuntime != "" {
		fmt.Fprintf(r.w, "against onnxruntime %s (same threads; zoo runs the same exported graph); zoo/ORT = median over interleaved pairs of ORT time / zoo time\n", m.ONNXRuntime)
	}
	fmt.Fprintln(r.w)
	r.columns(m.Backends)
	return nil
}

// columns sets the table's header and column widths: wide enough for every name and for
// typical numbers (a longer cell shifts the rest of its line).
func (r *Renderer) columns(backends []Backend) {
	r.head = []string{"variant", "backend", "level", "batch", "n", "ms", "tokens/s", "GFLOP/s", "% SGEMM peak", "mem"}
	r.right = []bool{false, false, false, true, true, true, true, true, true, true}
	typical := []int{0, 0, 0, 0, 0, len("1234.56 ± 12.34"), len("123456789"), len("12345.67"), 0, len("123.45 MiB")}
	if r.lay.WithORT {
		r.head = append(r.head, "ORT ms", "zoo/ORT")
		r.right = append(r.right, true, true)
		typical = append(typical, len("1234.56 ± 12.34"), len("12.34×"))
	}
	r.width = make([]int, len(r.head))
	for i, h := range r.head {
		r.width[i] = max(utf8.RuneCountInString(h), typical[i])
	}
	for _, v := range r.lay.Variants {
		r.width[0] = max(r.width[0], utf8.RuneCountInString(v))
	}
	for _, b := range backends {
		r.width[1] = max(r.width[1], utf8.RuneCountInString(b.Name))
		r.width[2] = max(r.width[2], utf8.RuneCountInString(b.Level))
	}
	for _, b := range r.lay.Batches {
		r.width[3] = max(r.width[3], len(strconv.Itoa(b)))
	}
	for _, n := range r.lay.Seqs {
		r.width[4] = max(r.width[4], len(strconv.Itoa(n)))
	}
}

// Row prints row (table, md) or holds it until its series ends (csv).
func (r *Renderer) Row(d *Doc, row Row) error {
	switch r.f {
	case JSON:
		return nil
	case CSV:
		if len(r.pending) > 0 && r.pending[0].SeriesKey != row.SeriesKey {
			if err := r.EndSeries(d); err != nil {
				return err
			}
		}
		r.pending = append(r.pending, row)
		return nil
	}
	if r.rows == 0 {
		r.headLines()
	}
	r.line(cells(row, r.lay.WithORT))
	r.rows++
	return nil
}

// EndSeries writes the held CSV rows with their series' exponent; other formats have
// nothing to do.
func (r *Renderer) EndSeries(d *Doc) error {
	if r.f != CSV || len(r.pending) == 0 {
		return nil
	}
	fit := FitRows(r.pending)
	for _, row := range r.pending {
		r.cw.Write(csvRecord(row, fit, d.Machine))
		r.rows++
	}
	r.pending = r.pending[:0]
	return r.flushCSV()
}

func (r *Renderer) flushCSV() error {
	r.cw.Flush()
	if err := r.cw.Error(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	return nil
}

// End writes what only the whole run gives: the JSON document, or the table's footer
// (fitted exponents, later SGEMM peaks, skipped lengths, what the columns measure). d.Fit
// must have run.
func (r *Renderer) End(d *Doc) error {
	switch r.f {
	case CSV:
		return r.EndSeries(d)
	case JSON:
		if d.Rows == nil {
			d.Rows = []Row{}
		}
		if d.Skipped == nil {
			d.Skipped = []Skip{}
		}
		if d.Fits == nil {
			d.Fits = []Fit{}
		}
		return format.WriteJSON(r.w, d)
	}
	w := r.w
	if r.rows == 0 {
		fmt.Fprintln(w, "no combination was run")
	}
	fmt.Fprintln(w)
	for _, b := range d.Machine.Backends {
		if b.FirstPeakGFLOPS > 0 && b.PeakGFLOPS > b.FirstPeakGFLOPS {
			fmt.Fprintf(w, "backend %s: a later SGEMM peak reading reached %.1f GFLOP/s; rows printed before it show %% of the best reading up to them\n", b.Name, b.PeakGFLOPS)
		}
	}
	if len(d.Fits) > 0 {
		fmt.Fprintln(w, "fitted exponent k (time ∝ n^k; least-squares slope of log time vs log n over the measured n;\n a fit on 2 points is the line through them and does not test the power law):")
		for _, f := range d.Fits {
			mk := ""
			if f.MemExponent != nil {
				mk = "   (memory: " + ExponentText(f.MemExponent, f.MemPoints) + ")"
			}
			fmt.Fprintf(w, "  %-40s k = %s%s\n", f.Series, ExponentText(f.TimeExponent, f.TimePoints), mk)
		}
	}
	for _, s := range d.Skipped {
		fmt.Fprintf(w, "note: %s batch %d n=%d skipped: %s\n", s.Variant, s.Batch, s.N, s.Reason)
	}
	fmt.Fprintf(w, "ms: mean ± sample stddev of one run's wall time over %s after %s; tokens/s = batch·n / mean;\n"+
		"GFLOP/s: the graph's FLOPs (as `zoo show` counts them) / mean; %% SGEMM peak: of the best SGEMM peak measured up to the row.\n"+
		"mem: peak RSS growth during the row's runs (VmHWM after − VmRSS before; free memory returned to the OS and the peak\n"+
		"mark reset first): Go heap with uncollected garbage, C memory, stacks; the compiled weights are not counted.\n",
		format.Plural(r.lay.Reps, "repetition"), format.Plural(r.lay.Warmup, "warm-up run"))
	return nil
}

// cells formats one row of the human-readable table.
func cells(r Row, withORT bool) []string {
	gf, pct := "-", "-"
	if r.FLOPs > 0 {
		gf = fmt.Sprintf("%.2f", r.GFLOPS)
		pct = fmt.Sprintf("%.1f%%", r.PctPeak)
	}
	mem := "-"
	if r.PeakRSSGrowth != nil {
		mem = format.HumanBytes(*r.PeakRSSGrowth)
	}
	out := []string{r.Variant, r.Backend, r.Level, strconv.Itoa(r.Batch), strconv.Itoa(r.N),
		fmtMS(r.MSMean, r.MSStddev), fmt.Sprintf("%.0f", r.TokensPS), gf, pct, mem}
	if withORT {
		ortMS, ratio := "-", "-"
		if r.ORTMSMean != nil {
			ortMS = fmtMS(*r.ORTMSMean, *r.ORTMSStddev)
		}
		if r.ZooOverORT != nil {
			ratio = fmt.Sprintf("%.2f×", *r.ZooOverORT)
		}
		out = append(out, ortMS, ratio)
	}
	return out
}

func fmtMS(mean, sd float64) string {
	prec := 2
	if mean >= 100 {
		prec = 1
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, mean, prec, sd)
}

// headLines prints the table's header (and a markdown table's alignment row, as
// llama-bench prints it).
func (r *Renderer) headLines() {
	if r.f == Markdown {
		r.line(r.head)
		rule := make([]string, len(r.head))
		for i := range r.head {
			if r.right[i] {
				rule[i] = strings.Repeat("-", max(r.width[i]-1, 1)) + ":"
			} else {
				rule[i] = strings.Repeat("-", r.width[i])
			}
		}
		fmt.Fprintf(r.w, "| %s |\n", strings.Join(rule, " | "))
		return
	}
	upper := make([]string, len(r.head))
	for i, h := range r.head {
		upper[i] = strings.ToUpper(h)
	}
	r.line(upper)
}

// line prints one line of cells padded to the column widths.
func (r *Renderer) line(cells []string) {
	parts := make([]string, len(cells))
	for i, cell := range cells {
		gap := strings.Repeat(" ", max(r.width[i]-utf8.RuneCountInString(cell), 0))
		if r.right[i] {
			parts[i] = gap + cell
		} else {
			parts[i] = cell + gap
		}
	}
	if r.f == Markdown {
		fmt.Fprintf(r.w, "| %s |\n", strings.Join(parts, " | "))
	} else {
		fmt.Fprintln(r.w, strings.TrimRight(strings.Join(parts, "  "), " "))
	}
}

// CSVHeader is the CSV schema: every row field, the series' fitted time exponent, the
// machine, and the number of points the exponent rests on; precision came later and is
// last, so that the columns before it keep their places.
var CSVHeader = []string{"variant", "backend", "kernel_level", "threads", "batch", "n", "reps", "warmup",
	"ms_mean", "ms_stddev", "tokens_per_s", "flops", "gflop_per_s", "sgemm_peak_gflop_per_s", "pct_of_sgemm_peak",
	"peak_rss_growth_bytes", "go_alloc_bytes_per_run", "graph_peak_activation_bytes",
	"ort_ms_mean", "ort_ms_stddev", "ort_tokens_per_s", "ort_peak_rss_growth_bytes", "zoo_over_ort",
	"time_exponent", "cpu", "cores", "zoo_version", "go_version", "onnxruntime_version", "time_exponent_points",
	"precision"}

func csvRecord(r Row, fit Fit, m Machine) []string {
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
	points := ""
	if fit.TimeExponent != nil {
		points = strconv.Itoa(fit.TimePoints)
	}
	return []string{r.Variant, r.Backend, r.Level, strconv.Itoa(r.Threads), strconv.Itoa(r.Batch), strconv.Itoa(r.N),
		strconv.Itoa(r.Reps), strconv.Itoa(r.Warmup), f(r.MSMean), f(r.MSStddev), f(r.TokensPS),
		strconv.FormatInt(r.FLOPs, 10), f(r.GFLOPS), f(r.PeakGFLOPS), f(r.PctPeak),
		optInt(r.PeakRSSGrowth), strconv.FormatInt(r.GoAllocPerRun, 10), strconv.FormatInt(r.GraphActBytes, 10),
		opt(r.ORTMSMean), opt(r.ORTMSStddev), opt(r.ORTTokensPS), optInt(r.ORTPeakRSS), opt(r.ZooOverORT),
		opt(fit.TimeExponent), m.CPU, strconv.Itoa(m.Cores), m.ZooVersion, m.GoVersion, m.ONNXRuntime, points, r.Precision}
}
