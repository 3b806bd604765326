package compare

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
)

// Flags are zoo compare's own flags, as given.
type Flags struct {
	Input, Seq            string
	Reps, Warmup, Threads int
	EvalEvery             int
}

// Check refuses a comparison that cannot run (isONNX tells an .onnx file from a variant
// name) and returns the inference lengths; its errors name the argument or flag at fault.
func Check(names []string, isONNX func(string) bool, f Flags) ([]int, error) {
	if len(names) == 0 {
		return nil, errors.New("compare: want the variants to compare (see `zoo list`), e.g. zoo compare vanilla linformer --preset tiny --input corpus.txt")
	}
	seen := map[string]bool{}
	for _, n := range names {
		if isONNX(n) {
			return nil, fmt.Errorf("compare: %s is an ONNX file; zoo compare trains variants (see `zoo list`)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("compare: %s is named twice", n)
		}
		seen[n] = true
	}
	if f.Input == "" {
		return nil, errors.New("compare: --input FILE is required (the text to train on)")
	}
	seqs, err := format.ParseCounts("seq", f.Seq)
	if err != nil {
		return nil, err
	}
	if f.Reps < 1 || f.Warmup < 0 || f.Threads < 0 {
		return nil, fmt.Errorf("--reps must be at least 1, --infer-warmup and --threads not negative (got %d, %d, %d)", f.Reps, f.Warmup, f.Threads)
	}
	if f.EvalEvery < 0 {
		return nil, fmt.Errorf("--eval-every must not be negative, got %d", f.EvalEvery)
	}
	return seqs, nil
}

// Window is the window every variant trains with: flag when given, else min(512, the
// smallest of maxLens above 0), so that it fits every variant.
func Window(flag int, maxLens []int) int {
	if flag != 0 {
		return flag
	}
	w := 512
	for _, m := range maxLens {
		if m > 0 {
			w = min(w, m)
		}
	}
	return w
}

// Holdout splits a text of size bytes at path (the file of --input) for a held-out share
// frac from its end: training uses bytes [0, cut), evaluation [cut, size). It returns cut
// and a description of the held-out text for the report.
func Holdout(path string, size int64, frac float64) (cut int64, desc string, err error) {
	if !(frac > 0 && frac < 1) {
		return 0, "", fmt.Errorf("--holdout must be between 0 and 1 (exclusive), got %g", frac)
	}
	held := int64(math.Ceil(float64(size) * frac))
	if held < 2 || size-held < 2 {
		return 0, "", fmt.Errorf("--input %s has %d bytes, too few to hold out %g of them; give a longer text or --eval FILE", path, size, frac)
	}
	cut = size - held
	return cut, fmt.Sprintf("the last %g %% of --input %s (bytes %d–%d; training uses bytes 0–%d)", 100*frac, path, cut, size-1, cut-1), nil
}

// MaxLen is a variant's length limit for the comparison: its own (mine), raised to longest,
// the longest inference length, unless the user set it (set); the note says so when raised.
// It returns the --set value that raises it ("" when not raised).
func MaxLen(param string, mine, longest int, set bool) (maxLen int, raise, note string) {
	if mine >= longest || set {
		return mine, "", ""
	}
	return longest, fmt.Sprintf("%s=%d", param, longest), fmt.Sprintf("built with %s=%d (its own is %d) to reach --seq %d", param, longest, mine, longest)
}

// Lengths are the inference lengths among seqs that a model of maximum length maxLen (0:
// none) can take, and a note for each it cannot.
func Lengths(seqs []int, maxLen int) (lengths []int, notes []string) {
	for _, n := range seqs {
		if maxLen == 0 || n <= maxLen {
			lengths = append(lengths, n)
		} else {
			notes = append(notes, fmt.Sprintf("n=%d skipped: longer than its max_len %d", n, maxLen))
		}
	}
	return lengths, notes
}

// Infer times prog, model m compiled on backend bb, at batch 1 and each of lengths as zoo
// bench does (reps timed runs after warmup untimed ones), saying on status which length of
// which variant (e.g. "(1/3) vanilla") runs. It returns the measurements (never nil) and
// the fitted exponents.
func Infer(ctx context.Context, m bench.Model, prog backends.Program, bb bench.Backend, lengths []int, reps, warmup int, status *bench.Progress, which string) ([]Inference, bench.Fit, error) {
	out := []Inference{}
	var rows []bench.Row
	for _, n := range lengths {
		status.Say("%s: inference at n=%d", which, n)
		row, err := bench.RunOne(ctx, m, prog, nil, bb, 1, n, reps, warmup)
		if err != nil {
			return nil, bench.Fit{}, err
		}
		rows = append(rows, row)
		out = append(out, Inference{N: n, MS: row.MSMean, MemBytes: row.PeakRSSGrowth})
	}
	status.Done()
	return out, bench.FitRows(rows), nil
}

// Flag is a flag given on the command line, with its values as typed (none for a bool).
type Flag struct {
	Name   string
	Bool   bool
	Values []string
}

// CommandLine is the comparison as a command line, "zoo compare" with the variants and
// every flag given, for the report; values with blanks or quotes are quoted.
func CommandLine(names []string, flags []Flag) string {
	quote := func(a string) string {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			return strconv.Quote(a)
		}
		return a
	}
	parts := []string{"zoo", "compare"}
	for _, n := range names {
		parts = append(parts, quote(n))
	}
	for _, f := range flags {
		if f.Bool {
			parts = append(parts, "--"+f.Name)
			continue
		}
		for _, v := range f.Values {
			parts = append(parts, "--"+f.Name, quote(v))
		}
	}
	return strings.Join(parts, " ")
}
