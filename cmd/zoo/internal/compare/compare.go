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
)

// Inference is one inference measurement of a variant at sequence length N (batch 1), as
// `zoo bench` measures it: the mean wall time of one run and the peak RSS growth over the
// runs (nil where /proc does not allow measuring it).
type Inference struct {
	N        int     `json:"n"`
	MS       float64 `json:"ms"`
	MemBytes *int64  `json:"mem_bytes"`
}

// Point is one value of a loss curve: the mean loss at a step and, for a held-out
// evaluation, its bits per byte.
type Point struct {
	Step        int
	Loss        float64
	BitsPerByte float64
}

// Result is one variant's line of the comparison. The exported JSON fields are the
// contract of `zoo compare --json` (one object per variant); the rest feed the table and
// the report.
type Result struct {
	Variant       string      `json:"variant"`
	Params        int         `json:"params"`
	TrainTokensPS float64     `json:"train_tokens_per_s"`
	EvalLoss      float64     `json:"eval_loss"`
	EvalBPB       float64     `json:"eval_bits_per_byte"`
	Inference     []Inference `json:"inference"`
	TimeExponent  *float64    `json:"time_exponent"`
	MemExponent   *float64    `json:"memory_exponent"`

	// Model is the model that ran ("linformer.tiny"); Config its resolved hyperparameters.
	Model  string `json:"-"`
	Config string `json:"-"`
	// Train holds the training loss of every step, Eval the held-out loss before the first
	// step, at every --eval-every and after the last.
	Train, Eval []Point `json:"-"`
	// TimePoints and MemPoints count the points each exponent rests on.
	TimePoints, MemPoints int `json:"-"`
	// TrainSeconds is the time spent in training steps (not evaluations).
	TrainSeconds float64 `json:"-"`
	// Notes say what differs from the settings every variant shares (a raised max_len,
	// a length skipped).
	Notes []string `json:"-"`
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
	Seed        uint64
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
	// TimingDoc and MemDoc say how inference is timed and measured (bench's wording).
	TimingDoc, MemDoc string
}

// Table prints the comparison as it goes: Begin once, Row as each variant finishes, End
// after the last. Write errors are not reported (as with fmt.Print).
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
	typical := map[string]int{"PARAMS": len("123.4M"), "TRAIN TOK/S": len("123456"), "EVAL LOSS": len("5.5452"),
		"BITS/BYTE": len("8.000"), "K TIME": len("1.23 (2 pts)"), "K MEM": len("1.23 (2 pts)")}
	for i, h := range head {
		t.width[i] = max(utf8.RuneCountInString(h), typical[h], len("1234.5 ms"))
		t.right[i] = i > 0
	}
	t.width[0] = len("VARIANT")
	for _, n := range names {
		t.width[0] = max(t.width[0], utf8.RuneCountInString(n))
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

// Begin prints the shared setup and the header line.
func (t *Table) Begin(s Setup) {
	fmt.Fprintln(t.w, SetupLine(s))
	fmt.Fprintln(t.w)
	t.line(t.head())
}

// SetupLine describes the shared budget in one line.
func SetupLine(s Setup) string {
	return fmt.Sprintf("zoo compare: %s, %s × batch %d × window %d, %s lr %g (%s, warm-up %d), seed %d; held out: %s; %s (%s, %s)",
		s.Objective, format.Plural(s.Steps, "step"), s.Batch, s.Window, s.Optimizer, s.LR, s.Schedule, s.Warmup, s.Seed, s.Eval, s.Backend, s.Level, format.Plural(s.Threads, "thread"))
}

// Row prints one variant's line.
func (t *Table) Row(r Result) { t.line(Cells(r, t.seqs)) }

// End prints what the columns mean and each variant's notes.
func (t *Table) End(results []Result, s Setup) {
	fmt.Fprintln(t.w)
	for _, r := range results {
		for _, n := range r.Notes {
			fmt.Fprintf(t.w, "note: %s: %s\n", r.Variant, n)
		}
	}
	fmt.Fprintln(t.w, Legend(s))
}

// Legend says what the columns measure.
func Legend(s Setup) string {
	return fmt.Sprintf("TRAIN TOK/S: tokens of the training batches / time in training steps. EVAL LOSS: mean cross-entropy (nats) of the\n"+
		"held-out text after the last step; BITS/BYTE: its plain cross-entropy in bits per byte (ln 257 = %.4f nats is chance).\n"+
		"MS@n, MEM@n: inference of the trained model at batch 1 and length n, as `zoo bench` measures it (%s after %s;\n"+
		"mem = peak RSS growth during the runs). K TIME, K MEM: least-squares slope of log time (log mem) against log n.",
		math.Log(257), format.Plural(s.Reps, "rep"), format.Plural(s.InferWarmup, "warm-up run"))
}

// Cells formats one variant's table cells, in the order of the header.
func Cells(r Result, seqs []int) []string {
	out := []string{r.Variant, format.HumanCount(int64(r.Params)), fmt.Sprintf("%.0f", r.TrainTokensPS),
		fmt.Sprintf("%.4f", r.EvalLoss), fmt.Sprintf("%.3f", r.EvalBPB)}
	at := map[int]Inference{}
	for _, in := range r.Inference {
		at[in.N] = in
	}
	for _, n := range seqs {
		if in, ok := at[n]; ok {
			out = append(out, fmtMS(in.MS))
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

func fmtMS(ms float64) string {
	if ms >= 100 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
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
