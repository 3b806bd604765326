// Package compare holds the results of `zoo compare` and renders them: the table printed
// as each variant finishes, the JSON array, and the self-contained HTML report with its
// plots (drawn by internal/benchplot, embedded as PNG data so the page loads nothing). The
// plan of a comparison is here too (plan.go): its flag checks, the shared window, the
// held-out split, the max_len raises, the inference lengths and their timing, and the
// command line the report shows.
package compare

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/train"
)

// Inference is one inference measurement of a variant at sequence length N (batch 1), as
// `zoo bench` measures it: the mean wall time of one run with its sample standard deviation
// over the timed runs, Noisy when that spread exceeds a fifth of the mean, and the peak RSS
// growth over the runs (nil where /proc does not allow measuring it).
type Inference struct {
	N        int     `json:"n"`
	MS       float64 `json:"ms"`
	MSSD     float64 `json:"ms_sd"`
	Reps     int     `json:"reps"`
	Noisy    bool    `json:"noisy"`
	MemBytes *int64  `json:"mem_bytes"`
	// Untrained marks a length timed on a build with max_len raised to reach it (random
	// weights: time and memory do not depend on their values).
	Untrained bool `json:"untrained,omitempty"`
}

// Stat is the MS of in as a train.Stat.
func (in Inference) Stat() train.Stat { return train.Stat{Mean: in.MS, SD: in.MSSD, N: in.Reps} }

// Point is one value of a loss curve: the mean loss at a step and, for a held-out
// evaluation, its bits per byte.
type Point struct {
	Step        int
	Loss        float64
	BitsPerByte float64
}

// Seed is one training run of a variant: its seed, its held-out scores after the last step
// and its training speed, and its curves (Train: every step; Eval: before the first step,
// at every --eval-every and after the last).
type Seed struct {
	Seed          uint64  `json:"seed"`
	EvalLoss      float64 `json:"eval_loss"`
	EvalBPB       float64 `json:"eval_bits_per_byte"`
	TrainTokensPS float64 `json:"train_tokens_per_s"`
	Train         []Point `json:"-"`
	Eval          []Point `json:"-"`
}

// Result is one variant's line of the comparison. The exported JSON fields are the
// contract of `zoo compare --json` (one object per variant under "variants"); the rest feed
// the table and the report.
type Result struct {
	Variant string `json:"variant"`
	Params  int    `json:"params"`
	// TrainTokensPS, EvalLoss and EvalBPB are means over the seeds, the SD fields their
	// sample standard deviations (0 for one seed), Seeds the per-seed figures.
	TrainTokensPS   float64     `json:"train_tokens_per_s"`
	TrainTokensPSSD float64     `json:"train_tokens_per_s_sd"`
	EvalLoss        float64     `json:"eval_loss"`
	EvalLossSD      float64     `json:"eval_loss_sd"`
	EvalBPB         float64     `json:"eval_bits_per_byte"`
	EvalBPBSD       float64     `json:"eval_bits_per_byte_sd"`
	Seeds           []Seed      `json:"seeds"`
	Inference       []Inference `json:"inference"`
	TimeExponent    *float64    `json:"time_exponent"`
	MemExponent     *float64    `json:"memory_exponent"`
	// ConfigChanges are the changes the comparison made to the variant's configuration for
	// training (--params-match's d_ff, say): its row says so.
	ConfigChanges []string `json:"config_changes"`

	// Model is the model that ran ("linformer.tiny"); Config its resolved hyperparameters.
	Model  string `json:"-"`
	Config string `json:"-"`
	// TimePoints and MemPoints count the points each exponent rests on.
	TimePoints, MemPoints int `json:"-"`
	// Notes say what else differs from the settings every variant shares (a length timed
	// on a raised max_len, a length skipped).
	Notes []string `json:"-"`
}

// AddSeed adds one training run and updates the means and spreads.
func (r *Result) AddSeed(s Seed) {
	r.Seeds = append(r.Seeds, s)
	var loss, bpb, tps []float64
	for _, x := range r.Seeds {
		loss, bpb, tps = append(loss, x.EvalLoss), append(bpb, x.EvalBPB), append(tps, x.TrainTokensPS)
	}
	l, b, t := train.NewStat(loss), train.NewStat(bpb), train.NewStat(tps)
	r.EvalLoss, r.EvalLossSD, r.EvalBPB, r.EvalBPBSD, r.TrainTokensPS, r.TrainTokensPSSD = l.Mean, l.SD, b.Mean, b.SD, t.Mean, t.SD
}

// Contender is r as train.Judge weighs it.
func (r Result) Contender() train.Contender {
	c := train.Contender{Name: r.Variant, Params: r.Params, Quality: train.Stat{Mean: r.EvalBPB, SD: r.EvalBPBSD, N: len(r.Seeds)},
		TrainSpeed: train.Stat{Mean: r.TrainTokensPS, SD: r.TrainTokensPSSD, N: len(r.Seeds)}, Changes: r.ConfigChanges}
	for _, in := range r.Inference {
		c.Inference = append(c.Inference, train.Timing{N: in.N, MS: in.Stat()})
	}
	return c
}

// Document is `zoo compare --json`: every variant that finished, the verdict, and whether
// the comparison was interrupted before the last variant (Partial).
type Document struct {
	Variants []Result      `json:"variants"`
	Verdict  train.Verdict `json:"verdict"`
	Partial  bool          `json:"partial"`
	Seeds    []uint64      `json:"seeds"`
	Window   int           `json:"window"`
	Steps    int           `json:"steps"`
}

// SetFit fills the exponents of r from the fitted series of its inference rows.
func (r *Result) SetFit(f bench.Fit) {
	r.TimeExponent, r.TimePoints = f.TimeExponent, f.TimePoints
	r.MemExponent, r.MemPoints = f.MemExponent, f.MemPoints
}

// Setup is what every variant shares: the budget and the data, shown above the table and
// in the report.
type Setup struct {
	// Input and Eval say where the training and the held-out text came from.
	Input, Eval string
	Objective   string
	Steps       int
	Batch       int
	Window      int
	Optimizer   string
	LR          float64
	Warmup      int
	Schedule    string
	// Seeds are the seeds every variant trains with (one run each).
	Seeds []uint64
	// Backend, Level and Threads are what every variant ran on.
	Backend, Level string
	Threads        int
	// Seqs are the inference lengths; Reps and InferWarmup the timed and untimed runs.
	Seqs              []int
	Reps, InferWarmup int
	CPU, Zoo, GoVer   string
	Cores             int
	// Command is the command line that made the comparison.
	Command string
	// MemDoc says how inference memory is measured (bench's wording).
	MemDoc string
	// ParamsMatch is set when --params-match resized the variants.
	ParamsMatch bool
	// Partial is set when the comparison was interrupted: the results are those of the
	// variants that finished, of Total.
	Partial bool
	Total   int
}

// TimingDoc says how compare's inference columns are timed.
const TimingDoc = "ms = mean ± sample standard deviation of the wall time of one run of the trained model at batch 1, over --reps " +
	"timed runs after --infer-warmup untimed ones (zoo bench's timing); a ! marks a spread above a fifth of the mean (a " +
	"machine busy with something else: rerun before trusting that number)."

// Table prints the comparison: Begin once, then End with every result and the verdict.
// Write errors are not reported (as with fmt.Print).
type Table struct {
	w     io.Writer
	seqs  []int
	width []int
	right []bool
}

// NewTable returns a table on w for variants named as in names (for the first column's
// width) measured at seqs.
func NewTable(w io.Writer, names []string, seqs []int) *Table {
	t := &Table{w: w, seqs: seqs}
	head := t.head()
	t.width = make([]int, len(head))
	t.right = make([]bool, len(head))
	typical := map[string]int{"PARAMS": len("123.4M"), "TRAIN TOK/S": len("12345 ± 123"), "EVAL LOSS": len("5.5452 ± 0.0123"),
		"BITS/BYTE": len("8.000 ± 0.012"), "K TIME": len("1.23 (2 pts)"), "K MEM": len("1.23 (2 pts)")}
	for i, h := range head {
		t.width[i] = max(utf8.RuneCountInString(h), typical[h], len("1234.5 ms"))
		t.right[i] = i > 0
	}
	t.width[0] = len("VARIANT")
	for _, n := range names {
		t.width[0] = max(t.width[0], utf8.RuneCountInString(n)+1)
	}
	return t
}

func (t *Table) head() []string {
	h := []string{"VARIANT", "PARAMS", "TRAIN TOK/S", "EVAL LOSS", "BITS/BYTE"}
	for _, n := range t.seqs {
		h = append(h, "MS@"+strconv.Itoa(n))
	}
	for _, n := range t.seqs {
		h = append(h, "MEM@"+strconv.Itoa(n))
	}
	return append(h, "K TIME", "K MEM")
}

// Begin prints the shared setup.
func (t *Table) Begin(s Setup) {
	fmt.Fprintln(t.w, SetupLine(s))
	fmt.Fprintln(t.w)
}

// SetupLine describes the shared budget in one line.
func SetupLine(s Setup) string {
	return fmt.Sprintf("zoo compare: %s, %s × batch %d × window %d, %s lr %g (%s, warm-up %d), %s; held out: %s; %s (%s, %s)",
		s.Objective, format.Plural(s.Steps, "step"), s.Batch, s.Window, s.Optimizer, s.LR, s.Schedule, s.Warmup, seedsText(s.Seeds), s.Eval, s.Backend, s.Level, format.Plural(s.Threads, "thread"))
}

func seedsText(seeds []uint64) string {
	if len(seeds) == 1 {
		return fmt.Sprintf("seed %d", seeds[0])
	}
	var parts []string
	for _, x := range seeds {
		parts = append(parts, strconv.FormatUint(x, 10))
	}
	return fmt.Sprintf("%d seeds (%s) per variant", len(seeds), strings.Join(parts, ", "))
}

// End prints the verdict, the table, each variant's changes and notes, and what the
// columns mean.
func (t *Table) End(results []Result, v train.Verdict, s Setup) {
	if s.Partial {
		fmt.Fprintf(t.w, "PARTIAL: interrupted after %d of %d variants; these are the ones that finished.\n\n", len(results), s.Total)
	}
	fmt.Fprintln(t.w, format.Wrap("Verdict: "+v.Text, 110))
	fmt.Fprintln(t.w)
	rows := [][]string{t.head()}
	for _, r := range results {
		rows = append(rows, Cells(r, t.seqs))
	}
	for _, row := range rows {
		for i, c := range row {
			if i < len(t.width) {
				t.width[i] = max(t.width[i], utf8.RuneCountInString(c))
			}
		}
	}
	for _, row := range rows {
		t.line(row)
	}
	fmt.Fprintln(t.w)
	for _, r := range results {
		for _, c := range r.ConfigChanges {
			fmt.Fprintf(t.w, "* %s: %s\n", r.Variant, c)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(t.w, "note: %s: %s\n", r.Variant, n)
		}
	}
	fmt.Fprintln(t.w, Legend(results, s))
}

// Legend says what the columns shown measure: the spread and the ! mark only where a row
// has them.
func Legend(results []Result, s Setup) string {
	var b strings.Builder
	spread := len(s.Seeds) > 1
	fmt.Fprintf(&b, "PARAMS: trained parameters (* beside a variant: its configuration was changed, see above). ")
	if spread {
		fmt.Fprintf(&b, "TRAIN TOK/S, EVAL LOSS, BITS/BYTE: mean ± sample standard deviation over the %d seeds. ", len(s.Seeds))
	}
	fmt.Fprintf(&b, "TRAIN TOK/S: tokens of the training batches / time in training steps. EVAL LOSS: mean cross-entropy (nats) of the held-out "+
		"text after the last step; BITS/BYTE: its plain cross-entropy in bits per byte (ln 257 = %.4f nats is chance). ", math.Log(257))
	fmt.Fprintf(&b, "MS@n, MEM@n: inference of the trained model at batch 1 and length n: ms = mean ± sample standard deviation of %s after %s; "+
		"mem = peak RSS growth during the runs. ", format.Plural(s.Reps, "timed run"), format.Plural(s.InferWarmup, "warm-up run"))
	if anyNoisy(results) {
		b.WriteString("! marks a spread above a fifth of the mean: the machine was busy, rerun before trusting it. ")
	}
	if anyUntrained(results) {
		b.WriteString("u marks a length beyond the variant's max_len, timed on a build with max_len raised (untrained weights; time and memory do not depend on them). ")
	}
	b.WriteString("K TIME, K MEM: least-squares slope of log time (log mem) against log n.")
	return format.Wrap(b.String(), 120)
}

func anyNoisy(rs []Result) bool {
	for _, r := range rs {
		if r.TrainTokensPSSD > 0.2*r.TrainTokensPS {
			return true
		}
		for _, in := range r.Inference {
			if in.Noisy {
				return true
			}
		}
	}
	return false
}

func anyUntrained(rs []Result) bool {
	for _, r := range rs {
		for _, in := range r.Inference {
			if in.Untrained {
				return true
			}
		}
	}
	return false
}

// Cells formats one variant's table cells, in the order of the header.
func Cells(r Result, seqs []int) []string {
	name := r.Variant
	if len(r.ConfigChanges) > 0 {
		name += "*"
	}
	multi := len(r.Seeds) > 1
	tps := fmt.Sprintf("%.0f", r.TrainTokensPS)
	loss, bpb := fmt.Sprintf("%.4f", r.EvalLoss), fmt.Sprintf("%.3f", r.EvalBPB)
	if multi {
		tps += fmt.Sprintf(" ± %.0f", r.TrainTokensPSSD)
		if r.TrainTokensPSSD > 0.2*r.TrainTokensPS {
			tps += "!"
		}
		loss += fmt.Sprintf(" ± %.4f", r.EvalLossSD)
		bpb += fmt.Sprintf(" ± %.3f", r.EvalBPBSD)
	}
	out := []string{name, format.HumanCount(int64(r.Params)), tps, loss, bpb}
	at := map[int]Inference{}
	for _, in := range r.Inference {
		at[in.N] = in
	}
	for _, n := range seqs {
		if in, ok := at[n]; ok {
			c := fmtMS(in.MS, in.MSSD, in.Reps)
			if in.Noisy {
				c += "!"
			}
			if in.Untrained {
				c += " u"
			}
			out = append(out, c)
		} else {
			out = append(out, "-")
		}
	}
	for _, n := range seqs {
		if in, ok := at[n]; ok && in.MemBytes != nil {
			out = append(out, format.HumanBytes(*in.MemBytes))
		} else {
			out = append(out, "-")
		}
	}
	return append(out, exponentCell(r.TimeExponent, r.TimePoints), exponentCell(r.MemExponent, r.MemPoints))
}

func fmtMS(ms, sd float64, reps int) string {
	f := "%.2f"
	if ms >= 100 {
		f = "%.0f"
	}
	if reps < 2 {
		return fmt.Sprintf(f+" ms", ms)
	}
	return fmt.Sprintf(f+" ± "+f+" ms", ms, sd)
}

func exponentCell(k *float64, points int) string {
	switch {
	case k == nil:
		return "n/a"
	case points == 2:
		return fmt.Sprintf("%.2f (2 pts)", *k)
	}
	return fmt.Sprintf("%.2f", *k)
}

func (t *Table) line(cells []string) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		w := 0
		if i < len(t.width) {
			w = t.width[i]
		}
		gap := strings.Repeat(" ", max(w-utf8.RuneCountInString(c), 0))
		if i < len(t.right) && t.right[i] {
			parts[i] = gap + c
		} else {
			parts[i] = c + gap
		}
	}
	fmt.Fprintln(t.w, strings.TrimRight(strings.Join(parts, "  "), " "))
}
