package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
)

// The test binary runs the CLI itself when ZOO_BENCH_TEST_CLI=1, so that a test can run zoo
// in a fresh process (ONNX Runtime is opened once per process, so "ORT is missing" cannot
// be tested in process once another test has loaded it). The variable is removed first so
// that plugin processes started by that CLI serve variants as usual.
func init() {
	if os.Getenv("ZOO_BENCH_TEST_CLI") == "1" {
		os.Unsetenv("ZOO_BENCH_TEST_CLI")
		os.Exit(run(os.Args, os.Stdout, os.Stderr))
	}
}

var benchTiny = []string{"bench", "vanilla", "linformer", "--preset", "tiny", "--seq", "16,32", "--reps", "2"}

func benchArgs(extra ...string) []string {
	return append(append([]string{}, benchTiny...), extra...)
}

// checkRows checks the rows every format reports: one per variant × batch × n, every
// measured column filled.
func checkRows(t *testing.T, rows []bench.Row, batches []int) {
	t.Helper()
	want := 2 * 2 * len(batches)
	if len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Variant] = true
		if r.Backend != "cpu" || r.Level == "" || r.Threads < 1 || (r.N != 16 && r.N != 32) {
			t.Errorf("row %+v: want backend cpu with a kernel level, threads and n 16 or 32", r)
		}
		if !(r.MSMean > 0 && r.MSStddev >= 0 && r.TokensPS > 0 && r.FLOPs > 0 && r.GFLOPS > 0 && r.PeakGFLOPS > 0 && r.PctPeak > 0) {
			t.Errorf("row %s b=%d n=%d: a measured column is empty: %+v", r.Variant, r.Batch, r.N, r)
		}
		if runtime.GOOS == "linux" && r.PeakRSSGrowth == nil {
			t.Errorf("row %s n=%d: no peak RSS growth on Linux", r.Variant, r.N)
		}
	}
	if !seen["vanilla.tiny"] || !seen["linformer.tiny"] {
		t.Errorf("rows cover %v, want vanilla.tiny and linformer.tiny", seen)
	}
}

func TestBenchFormats(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		batches []int
		check   func(t *testing.T, out string)
	}{
		{"table", benchArgs(), []int{1}, func(t *testing.T, out string) {
			for _, want := range []string{"VARIANT", "BACKEND", "LEVEL", "BATCH", "N", "MS", "TOKENS/S", "GFLOP/S", "% SGEMM PEAK", "MEM",
				"vanilla.tiny", "linformer.tiny", " ± ", "measured SGEMM peak", "fitted exponent", "vanilla.tiny cpu", "k = ", "(2 points)"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			if strings.Count(out, "vanilla.tiny  ") != 2 {
				t.Errorf("want 2 vanilla rows:\n%s", out)
			}
		}},
		{"markdown", benchArgs("--format", "md", "--batch", "1,2"), []int{1, 2}, func(t *testing.T, out string) {
			for _, want := range []string{"| variant", "| backend", "| level", " batch |", " n |", " ms |", " tokens/s |", " GFLOP/s |", " % SGEMM peak |", " mem |", "| -", ": |", "b=2", "k = "} {
				if !strings.Contains(out, want) {
					t.Errorf("markdown lacks %q:\n%s", want, out)
				}
			}
			if n := strings.Count(out, "| vanilla.tiny"); n != 4 {
				t.Errorf("%d vanilla rows, want 4:\n%s", n, out)
			}
		}},
		{"csv", benchArgs("-f", "csv"), []int{1}, func(t *testing.T, out string) {
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatalf("not CSV: %v\n%s", err, out)
			}
			if strings.Join(recs[0], ",") != strings.Join(bench.CSVHeader, ",") {
				t.Errorf("header %v", recs[0])
			}
			var rows []bench.Row
			col := map[string]int{}
			for i, h := range recs[0] {
				col[h] = i
			}
			num := func(rec []string, name string) float64 {
				v, err := strconv.ParseFloat(rec[col[name]], 64)
				if err != nil {
					t.Errorf("column %s = %q: %v", name, rec[col[name]], err)
				}
				return v
			}
			for _, rec := range recs[1:] {
				rss := int64(num(rec, "peak_rss_growth_bytes"))
				rows = append(rows, bench.Row{Variant: rec[col["variant"]], Backend: rec[col["backend"]], Level: rec[col["kernel_level"]],
					Threads: int(num(rec, "threads")), Batch: int(num(rec, "batch")), N: int(num(rec, "n")),
					MSMean: num(rec, "ms_mean"), MSStddev: num(rec, "ms_stddev"), TokensPS: num(rec, "tokens_per_s"),
					FLOPs: int64(num(rec, "flops")), GFLOPS: num(rec, "gflop_per_s"), PeakGFLOPS: num(rec, "sgemm_peak_gflop_per_s"),
					PctPeak: num(rec, "pct_of_sgemm_peak"), PeakRSSGrowth: &rss})
				if rec[col["cpu"]] == "" || rec[col["go_version"]] == "" || rec[col["time_exponent"]] == "" || rec[col["time_exponent_points"]] != "2" {
					t.Errorf("machine or exponent columns empty: %v", rec)
				}
			}
			checkRows(t, rows, []int{1})
		}},
		{"json", benchArgs("--json"), []int{1}, func(t *testing.T, out string) {
			var doc bench.Doc
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			m := doc.Machine
			if m.CPU == "" || m.Cores < 1 || m.GoVersion == "" || m.ZooVersion == "" || len(m.Backends) != 1 ||
				m.Backends[0].Level == "" || m.Backends[0].PeakGFLOPS <= 0 || m.Backends[0].PeakSize != 1024 || m.Memory == "" {
				t.Errorf("machine header %+v", m)
			}
			checkRows(t, doc.Rows, []int{1})
			for _, r := range doc.Rows {
				if len(r.MSSamples) != 2 || r.Reps != 2 || r.GraphActBytes <= 0 || r.ORTMSMean != nil {
					t.Errorf("row %+v: want 2 samples, activation bytes and no ORT fields", r)
				}
			}
			if len(doc.Fits) != 2 || doc.Fits[0].TimeExponent == nil || doc.Fits[0].Points != 2 || !doc.Fits[0].TwoPointFit {
				t.Errorf("fits %+v: want one per variant with a time exponent over 2 points, marked so", doc.Fits)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := zoo(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if errs != "" {
				t.Errorf("stderr is not a terminal, yet got %q", errs)
			}
			c.check(t, out)
		})
	}
}

// TestBenchSkipsBeyondMaxLen checks that over several models a length beyond one's max_len
// is skipped for it with a note, not an error, with flags on either side of the names; and
// that the default --seq is skipped the same way for one model.
func TestBenchSkipsBeyondMaxLen(t *testing.T) {
	cases := []struct {
		args          []string
		rows, skipped int
	}{
		{[]string{"bench", "vanilla.tiny", "linformer.tiny", "--seq", "16,256", "--reps", "1"}, 3, 1},
		{[]string{"bench", "--seq", "16,256", "--reps", "1", "--format", "json", "vanilla.tiny", "linformer.tiny"}, 3, 1},
		{[]string{"bench", "linformer.tiny", "--reps", "1", "--json"}, 1, 2}, // default --seq 128,512,2048
	}
	for _, c := range cases {
		code, out, errs := zoo(t, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if !strings.Contains(strings.Join(c.args, " "), "json") {
			if !strings.Contains(out, "linformer.tiny batch 1 n=256 skipped") || !strings.Contains(out, "n/a") {
				t.Errorf("%v: no skip note or n/a exponent:\n%s", c.args, out)
			}
			continue
		}
		var doc bench.Doc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Rows) != c.rows || len(doc.Skipped) != c.skipped || !strings.Contains(doc.Skipped[0].Reason, "max_len") {
			t.Errorf("%v: rows %d, skipped %+v; want %d rows, %d skipped", c.args, len(doc.Rows), doc.Skipped, c.rows, c.skipped)
		}
		for _, f := range doc.Fits {
			if f.Variant == "linformer.tiny" && f.TimeExponent != nil {
				t.Errorf("%v: one point cannot fit an exponent: %+v", c.args, f)
			}
		}
	}
}

func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scaling.png")
	code, out, errs := zoo(t, benchArgs("--plot", path, "--batch", "1,2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, path) {
		t.Errorf("report does not name the plot:\n%s", out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Errorf("plot is %v", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the plot only (temporary file left?)", len(entries))
	}
}

func TestBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"bench"}, "model name"},
		{"unknown variant", []string{"bench", "vanila", "--preset", "tiny"}, `did you mean "vanilla"`},
		{"one unknown among several", []string{"bench", "vanilla.tiny", "linformr.tiny"}, `did you mean "linformer"`},
		{"seq zero", []string{"bench", "vanilla.tiny", "--seq", "16,0"}, "--seq"},
		{"seq non-numeric", []string{"bench", "vanilla.tiny", "--seq", "abc"}, "--seq"},
		{"batch zero", []string{"bench", "vanilla.tiny", "--batch", "0"}, "--batch"},
		{"reps zero", []string{"bench", "vanilla.tiny", "--reps", "0"}, "--reps"},
		{"unknown format", []string{"bench", "vanilla.tiny", "--format", "xml"}, "--format"},
		{"json and csv", []string{"bench", "vanilla.tiny", "--json", "--format", "csv"}, "--json"},
		{"against other", []string{"bench", "vanilla.tiny", "--against", "pytorch"}, "--against"},
		{"unknown backend", []string{"bench", "vanilla.tiny", "--backend", "tpu"}, "unknown backend"},
		{"plot not png", []string{"bench", "vanilla.tiny", "--plot", filepath.Join(dir, "p.jpg")}, ".png"},
		{"seq beyond max_len, one model", []string{"bench", "linformer.tiny", "--seq", "16,4096"}, "--seq 4096 is longer than linformer.tiny's maximum length 128"},
		{"plot dir missing", []string{"bench", "vanilla.tiny", "--plot", filepath.Join(dir, "no", "p.png")}, "p.png"},
	}
	if runtime.GOOS != "windows" && os.Getuid() != 0 {
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"plot unwritable", []string{"bench", "vanilla.tiny", "--plot", filepath.Join(ro, "p.png")}, "p.png"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := zoo(t, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, errs)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("stderr %q lacks %q", errs, c.want)
			}
			if strings.Count(errs, "\n") != 1 || out != "" {
				t.Errorf("want one line on stderr and nothing on stdout; stderr %q, stdout %q", errs, out)
			}
		})
	}
	if entries, _ := os.ReadDir(ro); len(entries) != 0 {
		t.Errorf("unwritable directory holds %d entries", len(entries))
	}
}

func TestBenchAgainstORT(t *testing.T) {
	needORT(t)
	code, out, errs := zoo(t, benchArgs("--against", "onnxruntime", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc bench.Doc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	checkRows(t, doc.Rows, []int{1})
	if doc.Machine.ONNXRuntime == "" {
		t.Errorf("no ONNX Runtime version in %+v", doc.Machine)
	}
	for _, r := range doc.Rows {
		if r.ORTMSMean == nil || *r.ORTMSMean <= 0 || r.ORTTokensPS == nil || r.ZooOverORT == nil || *r.ZooOverORT <= 0 || len(r.ORTMSSamples) != 2 {
			t.Errorf("row %s n=%d lacks ONNX Runtime results: %+v", r.Variant, r.N, r)
		}
	}
	if len(doc.Fits) != 4 {
		t.Errorf("want a fit per variant for zoo and for ONNX Runtime, got %+v", doc.Fits)
	}
	code, out, errs = zoo(t, benchArgs("--against", "onnxruntime")...)
	if code != 0 || !strings.Contains(out, "ZOO/ORT") || !strings.Contains(out, "×") || !strings.Contains(out, "vanilla.tiny onnxruntime") {
		t.Errorf("exit %d, stderr %q\n%s", code, errs, out)
	}
}

// TestBenchORTMissing runs zoo in a fresh process with ZOO_ORT_LIB pointing nowhere: exit 1
// and the install hint.
func TestBenchORTMissing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	cmd := exec.Command(exe, "bench", "vanilla.tiny", "--seq", "16", "--against", "onnxruntime")
	cmd.Env = append(os.Environ(), "ZOO_BENCH_TEST_CLI=1", "ZOO_ORT_LIB="+filepath.Join(t.TempDir(), "missing.so"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 1 || !strings.Contains(stderr.String(), "npm install onnxruntime-node") || strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
		t.Errorf("exit %d, stderr %q, stdout %q; want exit 1 and the install hint on one line", code, stderr.String(), stdout.String())
	}
}

// stampWriter records when each write arrives.
type stampWriter struct {
	mu     sync.Mutex
	writes []stamped
}

type stamped struct {
	at   time.Time
	data string
}

func (w *stampWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, stamped{time.Now(), string(p)})
	return len(p), nil
}

// firstWrite returns when the first write containing s arrived.
func (w *stampWriter) firstWrite(t *testing.T, s string) time.Time {
	t.Helper()
	for _, st := range w.writes {
		if strings.Contains(st.data, s) {
			return st.at
		}
	}
	t.Fatalf("no write contains %q", s)
	return time.Time{}
}

// TestBenchStreamsRows checks that rows are printed as they finish, not gathered to the end:
// between the write of one row (or CSV series) and the next lie the next one's timed runs,
// so the gap between the two writes is at least the sum of those runs' times.
func TestBenchStreamsRows(t *testing.T) {
	cases := []struct {
		format      string
		first, next string // a substring of the first and of the next streamed write
	}{
		{"table", "vanilla.tiny    cpu", "linformer.tiny  cpu"},
		{"md", "| vanilla.tiny ", "| linformer.tiny "},
		{"csv", "vanilla.tiny,cpu", "linformer.tiny,cpu"},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			var out stampWriter
			var errb bytes.Buffer
			args := []string{"zoo", "bench", "vanilla.tiny", "linformer.tiny", "--seq", "64", "--reps", "3", "--format", c.format}
			if code := run(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			gap := out.firstWrite(t, c.next).Sub(out.firstWrite(t, c.first))
			var all strings.Builder
			for _, w := range out.writes {
				all.WriteString(w.data)
			}
			mean := rowMeanMS(t, all.String(), c.format, "linformer.tiny")
			if sum := time.Duration(3 * mean * float64(time.Millisecond)); gap < sum*9/10 {
				t.Errorf("the linformer row came %v after the vanilla row, less than its own timed runs (%v): rows were not streamed", gap, sum)
			}
		})
	}
}

// rowMeanMS reads a row's mean time in ms from a table, markdown or CSV report.
func rowMeanMS(t *testing.T, out, format, variant string) float64 {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, variant) {
			continue
		}
		var field string
		switch format {
		case "csv":
			rec, err := csv.NewReader(strings.NewReader(line)).Read()
			if err != nil {
				t.Fatal(err)
			}
			field = rec[8] // ms_mean
		case "md":
			field = strings.Fields(strings.Split(line, "|")[6])[0]
		default:
			field = strings.Fields(line)[5]
		}
		v, err := strconv.ParseFloat(field, 64)
		if err != nil {
			t.Fatalf("mean of %q: %v", line, err)
		}
		return v
	}
	t.Fatalf("no %s row in\n%s", variant, out)
	return 0
}

// When no combination can run, bench still prints its report (with the notes) and exits 1.
func TestBenchNoRowExits1(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "linformer.tiny", "--set", "max_len=64", "--reps", "1"}, // every default --seq skipped
		{"bench", "linformer.tiny", "rope.tiny", "--seq", "1024,4096", "--reps", "1", "--json"},
	} {
		code, out, errs := zoo(t, args...)
		if code != 1 || !strings.Contains(errs, "no combination could run") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line", args, code, errs)
		}
		if strings.Contains(strings.Join(args, " "), "--json") {
			var doc bench.Doc
			if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Rows) != 0 || len(doc.Skipped) != 4 {
				t.Errorf("%v: %v, %d rows, skipped %+v", args, err, len(doc.Rows), doc.Skipped)
			}
		} else if !strings.Contains(out, "no combination was run") || !strings.Contains(out, "n=2048 skipped") {
			t.Errorf("%v: report lacks the notes:\n%s", args, out)
		}
	}
}

// An exponent fitted on two points is marked as such in the table and the JSON; one on
// three is not.
func TestBenchTwoPointExponent(t *testing.T) {
	cases := []struct {
		seq      string
		twoPoint bool
	}{{"16,32", true}, {"16,32,64", false}}
	for _, c := range cases {
		code, out, errs := zoo(t, "bench", "vanilla.tiny", "--seq", c.seq, "--reps", "1")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if regexp.MustCompile(`k = -?[0-9.]+ \(2 points\)`).MatchString(out) != c.twoPoint {
			t.Errorf("--seq %s: table marks two points: %v, want %v:\n%s", c.seq, !c.twoPoint, c.twoPoint, out)
		}
		code, out, errs = zoo(t, "bench", "vanilla.tiny", "--seq", c.seq, "--reps", "1", "--json")
		var doc bench.Doc
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Fits) != 1 {
			t.Fatalf("exit %d, %v: %s", code, err, errs)
		}
		if f := doc.Fits[0]; f.TwoPointFit != c.twoPoint || f.TimePoints != strings.Count(c.seq, ",")+1 {
			t.Errorf("--seq %s: fit %+v", c.seq, f)
		}
	}
}

// TestBenchHuggingFaceInputs: a Hugging Face-style file (input_ids, attention_mask,
// token_type_ids) is benched with every input fed by its role, as zoo run feeds them (it was
// refused: only token ids and a bool padding mask were fed).
func TestBenchHuggingFaceInputs(t *testing.T) {
	code, out, errs := zoo(t, "bench", "testdata/bert/bert-opset17.onnx", "--seq", "8", "--batch", "1", "--reps", "1", "--warmup", "0", "--format", "csv")
	if code != 0 || !strings.Contains(out, "bert-opset17") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
