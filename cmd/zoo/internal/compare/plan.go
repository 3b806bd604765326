package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/train"
	"github.com/zoo-dev/zoo/zoo/tensorio"
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

// Holdout is the share of --input held out for evaluation when no --eval is given.
const Holdout = 0.1

// AutoSeeds is the number of seeds --seeds 0 trains each variant with when --steps is at most
// AutoSeedSteps (one beyond: a long run is its own budget).
const (
	AutoSeeds     = 3
	AutoSeedSteps = 1000
)

// Defaults are zoo compare's defaults of the training budget: 300 steps of 8 windows of 128
// tokens at a peak learning rate of 1e-3, decaying linearly (Budget adds a tenth of the steps
// of warm-up). At zoo train's 1e-4 and no warm-up, 300 steps leave every tiny variant near
// chance and their curves on top of each other; at 1e-3 they separate within 100 steps.
func Defaults() train.Config {
	d := train.DefaultConfig()
	d.Steps, d.LR, d.Window = 300, 1e-3, 128
	return d
}

// Budget completes cfg, read from the flags, with compare's defaults that depend on --steps:
// a tenth of the steps of warm-up unless warmupSet, and --eval-every 0 as a tenth of the
// steps (points for the held-out curves).
func Budget(cfg *train.Config, warmupSet bool) {
	if !warmupSet {
		cfg.Warmup = cfg.Steps / 10
	}
	if cfg.EvalEvery == 0 {
		cfg.EvalEvery = max(1, cfg.Steps/10)
	}
}

// Seeds are the seeds each variant trains with: n of them from first (n = 0: AutoSeeds up
// to AutoSeedSteps steps, else 1). A negative n is an error.
func Seeds(n, steps int, first uint64) ([]uint64, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("--seeds must not be negative, got %d", n)
	case n == 0 && steps <= AutoSeedSteps:
		n = AutoSeeds
	case n == 0:
		n = 1
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = first + uint64(i)
	}
	return seeds, nil
}

// Data returns what every variant trains and evaluates on, and a description of the
// held-out text for the report: evalPath (--eval), or the tail of in (--input), frac
// (--holdout, holdoutSet when given) of its bytes. Its errors are the user's input's.
func Data(in, evalPath string, frac float64, holdoutSet bool) (train.Data, string, error) {
	input := train.TextSource{Name: "--input", Path: in}
	if err := input.Check(); err != nil {
		return train.Data{}, "", err
	}
	if evalPath != "" {
		if holdoutSet {
			return train.Data{}, "", errors.New("--holdout splits --input when there is no --eval file; give one of them")
		}
		held := train.TextSource{Name: "--eval", Path: evalPath}
		if err := held.Check(); err != nil {
			return train.Data{}, "", err
		}
		return train.Data{Train: input, Held: held}, "--eval " + evalPath, nil
	}
	if !(frac > 0 && frac < 1) {
		return train.Data{}, "", fmt.Errorf("--holdout must be between 0 and 1 (exclusive), got %g", frac)
	}
	fi, err := os.Stat(in)
	if err != nil {
		return train.Data{}, "", fmt.Errorf("--input %s: %w", in, err)
	}
	size := fi.Size()
	held := int64(math.Ceil(float64(size) * frac))
	if held < 2 || size-held < 2 {
		return train.Data{}, "", fmt.Errorf("--input %s has %d bytes, too few to hold out %g of them; give a longer text or --eval FILE", in, size, frac)
	}
	cut := size - held
	data := train.Data{Train: train.TextSource{Name: "--input", Path: in, Size: cut}, Held: train.TextSource{Name: "--input", Path: in, Offset: cut, Size: held}}
	return data, fmt.Sprintf("the last %g %% of --input %s (bytes %d–%d; training uses bytes 0–%d)", 100*frac, in, cut, size-1, cut-1), nil
}

// CorpusName names the held-out text of d for the verdict: the file's base name.
func CorpusName(d train.Data) string {
	if d.Held.Path != "" {
		return filepath.Base(d.Held.Path)
	}
	return d.Held.Name
}

// Limit is a variant's length limit: its hyperparameter (max_len) and value (0: none), and
// whether --set gives it (then longer lengths are skipped, not timed on a raised build).
type Limit struct {
	Variant, Param string
	MaxLen         int
	Set            bool
}

// Window is the window every variant trains with: flag when given, else min(512, the
// smallest limit), so that it fits every variant. A flag longer than some variant's limit is
// an error naming it and the longest window that fits.
func Window(flag int, limits []Limit) (int, error) {
	smallest := 0
	for _, l := range limits {
		if l.MaxLen > 0 && (smallest == 0 || l.MaxLen < smallest) {
			smallest = l.MaxLen
		}
	}
	if flag == 0 {
		if smallest > 0 {
			return min(512, smallest), nil
		}
		return 512, nil
	}
	for _, l := range limits {
		if l.MaxLen > 0 && flag > l.MaxLen {
			return 0, fmt.Errorf("--window %d is longer than %s's %s %d; give --window %d or less (every variant trains with the same window)",
				flag, l.Variant, l.Param, l.MaxLen, smallest)
		}
	}
	return flag, nil
}

// Split sorts the inference lengths seqs for a variant of limit l: those the trained model
// takes, those to time on a build with max_len raised (untrained weights: time and memory do
// not depend on their values), and a note for each length skipped because --set gave max_len.
func (l Limit) Split(seqs []int) (trained, raised []int, notes []string) {
	for _, n := range seqs {
		switch {
		case l.MaxLen == 0 || n <= l.MaxLen:
			trained = append(trained, n)
		case l.Set:
			notes = append(notes, fmt.Sprintf("n=%d skipped: longer than its %s %d (given by --set)", n, l.Param, l.MaxLen))
		default:
			raised = append(raised, n)
		}
	}
	return trained, raised, notes
}

// RaisedNote says that lengths were timed on a build with max_len raised to longest.
func (l Limit) RaisedNote(lengths []int, longest int) string {
	var parts []string
	for _, n := range lengths {
		parts = append(parts, strconv.Itoa(n))
	}
	return fmt.Sprintf("n=%s timed on a build with %s=%d (its own is %d; untrained weights)", strings.Join(parts, ", "), l.Param, longest, l.MaxLen)
}

// ParamsNote says what --params-match changed: d_ff from its own to dff, so that the
// variant's got parameters match ref's refParams.
func ParamsNote(dff, own, got int, ref string, refParams int) string {
	return fmt.Sprintf("d_ff=%d (its own is %d), so that its %s parameters match %s's %s (--params-match)",
		dff, own, format.HumanCount(int64(got)), ref, format.HumanCount(int64(refParams)))
}

// Infer times prog, model m compiled on backend bb, at batch 1 and each of lengths as zoo
// bench does (reps timed runs after warmup untimed ones), saying on status which length of
// which variant (e.g. "(1/3) vanilla") runs; untrained marks a build with max_len raised.
// It returns the measurements and bench's rows, for the fit over every length.
func Infer(ctx context.Context, m bench.Model, prog backends.Program, bb bench.Backend, lengths []int, reps, warmup int, status *bench.Progress, which string, untrained bool) ([]Inference, []bench.Row, error) {
	var out []Inference
	var rows []bench.Row
	for _, n := range lengths {
		status.Say("%s: inference at n=%d", which, n)
		row, err := bench.RunOne(ctx, m, prog, nil, bb, 1, n, reps, warmup)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
		ms := train.Stat{Mean: row.MSMean, SD: row.MSStddev, N: reps}
		out = append(out, Inference{N: n, MS: row.MSMean, MSSD: row.MSStddev, Reps: reps, Noisy: ms.Noisy(), MemBytes: row.PeakRSSGrowth, Untrained: untrained})
	}
	return out, rows, nil
}

// Finish writes what a comparison found, of the variants that finished (results): the HTML
// report to reportPath ("" for none; atomically, and only when a variant finished), then
// the JSON document (asJSON) or the table's end on w. It returns the report's write error.
func Finish(w io.Writer, results []Result, setup Setup, data train.Data, table *Table, asJSON bool, reportPath string) error {
	var contenders []train.Contender
	for _, r := range results {
		contenders = append(contenders, r.Contender())
	}
	verdict := train.Judge(contenders, setup.Window, CorpusName(data))
	if reportPath != "" && len(results) > 0 {
		if err := tensorio.AtomicWriteFile(reportPath, func(w io.Writer) error { return WriteHTML(w, results, verdict, setup) }); err != nil {
			return fmt.Errorf("--report %s: %w", reportPath, err)
		}
	}
	if asJSON {
		if results == nil {
			results = []Result{}
		}
		return format.WriteJSON(w, Document{Variants: results, Verdict: verdict, Partial: setup.Partial, Seeds: setup.Seeds, Window: setup.Window, Steps: setup.Steps})
	}
	table.End(results, verdict, setup)
	if reportPath != "" && len(results) > 0 {
		fmt.Fprintf(w, "report: %s\n", reportPath)
	}
	return nil
}

// Flag is a flag given on the command line, with its values as typed (none for a bool).
type Flag struct {
	Name   string
	Bool   bool
	Values []string
}

// GivenFlags lists the flags of a command (defs) given on its command line, in the order
// the command defines them, with their values as typed (isSet, value and slice are the
// context's IsSet, Value and StringSlice).
func GivenFlags(defs []cli.Flag, isSet func(string) bool, value func(string) any, slice func(string) []string) []Flag {
	var out []Flag
	for _, f := range defs {
		name := f.Names()[0]
		if !isSet(name) {
			continue
		}
		switch f.(type) {
		case *cli.BoolFlag:
			out = append(out, Flag{Name: name, Bool: true})
		case *cli.StringSliceFlag:
			out = append(out, Flag{Name: name, Values: slice(name)})
		default:
			out = append(out, Flag{Name: name, Values: []string{fmt.Sprint(value(name))}})
		}
	}
	return out
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
