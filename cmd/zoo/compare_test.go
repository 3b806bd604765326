package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/internal/env"
)

// compareCorpus is a small public-domain text (13 kB) for the compare tests.
const compareCorpus = "../../examples/corpus/kjv-ruth.txt"

// compareFast are the flags that keep a comparison of tiny variants to a few seconds: few
// steps of short windows, three short inference lengths, two timed runs each.
var compareFast = []string{"--preset", "tiny", "--input", compareCorpus, "--steps", "12", "--batch", "2", "--window", "32",
	"--lr", "3e-3", "--warmup", "2", "--seq", "32,64,128", "--reps", "2", "--seeds", "1"}

func compareArgs(variants []string, extra ...string) []string {
	return append(append(append([]string{"compare"}, variants...), compareFast...), extra...)
}

// TestCompareJSON runs zoo compare on three variants and checks that its JSON holds every
// field of the contract for every variant, in the order given, with values that can be
// true: a model, a throughput, a held-out loss that training brought below chance, bits
// per byte that are that loss in bits (the byte tokenizer: one token per byte), and a
// measured time and memory at every length, with finite exponents.
func TestCompareJSON(t *testing.T) {
	variants := []string{"vanilla", "linformer", "performer"}
	code, out, errs := zoo(t, compareArgs(variants, "--json", "--seeds", "2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Variants []map[string]json.RawMessage `json:"variants"`
		Verdict  map[string]json.RawMessage   `json:"verdict"`
		Partial  *bool                        `json:"partial"`
		Seeds    []uint64                     `json:"seeds"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	raw := doc.Variants
	want := []string{"config_changes", "eval_bits_per_byte", "eval_bits_per_byte_sd", "eval_loss", "eval_loss_sd", "inference", "memory_exponent", "params",
		"seeds", "time_exponent", "train_tokens_per_s", "train_tokens_per_s_sd", "variant"}
	var got struct {
		Variants []struct {
			Variant       string   `json:"variant"`
			Params        int      `json:"params"`
			TrainTokensPS float64  `json:"train_tokens_per_s"`
			EvalLoss      float64  `json:"eval_loss"`
			EvalLossSD    float64  `json:"eval_loss_sd"`
			EvalBPB       float64  `json:"eval_bits_per_byte"`
			TimeExponent  *float64 `json:"time_exponent"`
			MemExponent   *float64 `json:"memory_exponent"`
			Seeds         []struct {
				Seed     uint64  `json:"seed"`
				EvalLoss float64 `json:"eval_loss"`
			} `json:"seeds"`
			Inference []struct {
				N        int     `json:"n"`
				MS       float64 `json:"ms"`
				MSSD     float64 `json:"ms_sd"`
				MemBytes *int64  `json:"mem_bytes"`
			} `json:"inference"`
		} `json:"variants"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Variants) != len(variants) || doc.Partial == nil || *doc.Partial || fmt.Sprint(doc.Seeds) != "[0 1]" {
		t.Fatalf("%d variants, partial %v, seeds %v; want one per variant (%d), not partial, seeds 0 and 1", len(got.Variants), doc.Partial, doc.Seeds, len(variants))
	}
	for _, k := range []string{"best", "within_noise", "behind", "fastest", "pareto_front", "text"} {
		if _, ok := doc.Verdict[k]; !ok {
			t.Errorf("the verdict lacks %q", k)
		}
	}
	chance := math.Log(257)
	for i, r := range got.Variants {
		keys := make([]string, 0, len(raw[i]))
		for k := range raw[i] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("object %d has fields %v, want %v", i, keys, want)
		}
		if r.Variant != variants[i] {
			t.Errorf("object %d is %q, want %q (the name as given, in order)", i, r.Variant, variants[i])
		}
		if r.Params <= 0 || !(r.TrainTokensPS > 0) || math.IsInf(r.TrainTokensPS, 0) {
			t.Errorf("%s: params %d, train tokens/s %v; want both positive and finite", r.Variant, r.Params, r.TrainTokensPS)
		}
		if !(r.EvalLoss > 0 && r.EvalLoss < chance) {
			t.Errorf("%s: held-out loss %v, want in (0, ln 257 = %.4f) after training", r.Variant, r.EvalLoss, chance)
		}
		if len(r.Seeds) != 2 || r.Seeds[0].Seed != 0 || r.Seeds[1].Seed != 1 || r.Seeds[0].EvalLoss == r.Seeds[1].EvalLoss {
			t.Errorf("%s: seeds %+v; want two runs with their own losses", r.Variant, r.Seeds)
		}
		if mean := (r.Seeds[0].EvalLoss + r.Seeds[1].EvalLoss) / 2; math.Abs(mean-r.EvalLoss) > 1e-12 || !(r.EvalLossSD > 0) {
			t.Errorf("%s: eval_loss %v ± %v, want the mean %v of the seeds and their spread", r.Variant, r.EvalLoss, r.EvalLossSD, mean)
		}
		if bits := r.EvalLoss / math.Ln2; math.Abs(r.EvalBPB-bits) > 1e-9*bits {
			t.Errorf("%s: %v bits per byte, want the loss %v in bits, %v (one byte per token, no smoothing)", r.Variant, r.EvalBPB, r.EvalLoss, bits)
		}
		if len(r.Inference) != 3 {
			t.Fatalf("%s: %d inference lengths, want 3", r.Variant, len(r.Inference))
		}
		for j, in := range r.Inference {
			if n := []int{32, 64, 128}[j]; in.N != n {
				t.Errorf("%s: inference %d at n=%d, want %d", r.Variant, j, in.N, n)
			}
			if !(in.MS > 0) || math.IsInf(in.MS, 0) || in.MSSD < 0 {
				t.Errorf("%s n=%d: %v ± %v ms, want positive", r.Variant, in.N, in.MS, in.MSSD)
			}
			// 0 is a measurement too: a tiny model's run at n = 32 can fit in pages the process
			// already holds (it did once, under the whole suite's load)
			if in.MemBytes == nil || *in.MemBytes < 0 {
				t.Errorf("%s n=%d: mem_bytes %s, want a peak RSS growth of 0 or more (Linux /proc)", r.Variant, in.N, fmtPtr(in.MemBytes))
			}
		}
		for name, k := range map[string]*float64{"time": r.TimeExponent, "memory": r.MemExponent} {
			// A fit of measured times and RSS growth on a shared machine: its value is the
			// machine's, so the test asks only for a number (the fit itself is tested in
			// cmd/zoo/internal/bench).
			if k == nil || math.IsNaN(*k) || math.IsInf(*k, 0) {
				t.Errorf("%s: %s exponent %s, want a finite number", r.Variant, name, fmtPtr(k))
			}
		}
	}
	if strings.Contains(errs, "panic") {
		t.Errorf("stderr: %s", errs)
	}
}

// TestCompareTable checks the human-readable output: the shared setup, the verdict, one row
// per variant, and a note where a length beyond a variant's max_len was timed on a build with
// max_len raised (the trained model keeps its own, and its parameters).
func TestCompareTable(t *testing.T) {
	args := compareArgs([]string{"vanilla", "linformer"})
	args = slices.DeleteFunc(args, func(s string) bool { return s == "32,64,128" })
	i := slices.Index(args, "--seq")
	args = slices.Insert(args, i+1, "64,256")
	code, out, errs := zoo(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	var rows []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 && (f[0] == "vanilla" || f[0] == "linformer") && strings.Contains(l, " ms") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("want one row per variant, got %d:\n%s", len(rows), out)
	}
	for _, want := range []string{"12 steps × batch 2 × window 32", "Verdict: At n = 32 on kjv-ruth.txt", "MS@64", "MEM@256", "K TIME",
		"note: linformer: n=256 timed on a build with max_len=256 (its own is 128; untrained weights)", "held out: the last 10 % of --input"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCompareBadInput checks that mistakes are one line and exit 2, before any training.
func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no variants", []string{"compare", "--input", compareCorpus}, "want the variants"},
		{"no input", []string{"compare", "vanilla.tiny"}, "--input FILE is required"},
		{"twice", []string{"compare", "vanilla.tiny", "vanilla.tiny", "--input", compareCorpus}, "named twice"},
		{"onnx", []string{"compare", "model.onnx", "--input", compareCorpus}, "ONNX file"},
		{"unknown variant", []string{"compare", "vanilla.tiny", "nosuch", "--input", compareCorpus}, "nosuch"},
		{"clm on linformer", []string{"compare", "vanilla.tiny", "linformer.tiny", "--input", compareCorpus, "--objective", "clm"}, "linformer"},
		{"holdout and eval", []string{"compare", "vanilla.tiny", "--input", compareCorpus, "--eval", compareCorpus, "--holdout", "0.2"}, "--holdout splits --input"},
		{"holdout range", []string{"compare", "vanilla.tiny", "--input", compareCorpus, "--holdout", "1"}, "--holdout must be between 0 and 1"},
		{"report extension", []string{"compare", "vanilla.tiny", "--input", compareCorpus, "--report", filepath.Join(dir, "r.png")}, "want a .html"},
		{"bad steps", []string{"compare", "vanilla.tiny", "--input", compareCorpus, "--batch", "0"}, "--batch"},
		{"missing eval", []string{"compare", "vanilla.tiny", "--input", compareCorpus, "--eval", filepath.Join(dir, "none.txt")}, "none.txt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One step at most, should a check be missing: the test then fails fast.
			code, out, errs := zoo(t, append(tc.args, "--steps", "1", "--reps", "1", "--seq", "16")...)
			if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line containing %q", code, errs, tc.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed comparison left %d files in %s", len(entries), dir)
	}
}

// externalRef finds an attribute or style that would make a browser fetch something: a
// src, href, srcset, action, poster or data attribute that is not a data: URL or an
// in-page #anchor, and CSS url(...) or @import.
var externalRef = regexp.MustCompile(`(?i)\b(src|href|srcset|action|poster|data)\s*=\s*["']?\s*([^"'\s>]*)|url\(|@import`)

// externalRefs returns every reference in page that leaves it, and every element that
// loads or runs something.
func externalRefs(page string) []string {
	var out []string
	for _, m := range externalRef.FindAllStringSubmatch(page, -1) {
		if m[1] == "" {
			out = append(out, m[0])
			continue
		}
		if v := strings.ToLower(m[2]); !strings.HasPrefix(v, "data:") && !strings.HasPrefix(v, "#") {
			out = append(out, m[1]+"="+m[2])
		}
	}
	for _, tag := range []string{"<script", "<link", "<iframe", "<object", "<embed"} {
		if strings.Contains(strings.ToLower(page), tag) {
			out = append(out, tag+">")
		}
	}
	return out
}

func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, r := range externalRefs(page) {
		t.Errorf("the report refers outside itself: %s", r)
	}
}

// TestExternalRefs checks the check: what would make a browser fetch is found, what
// would not is not.
func TestExternalRefs(t *testing.T) {
	tests := []struct {
		page string
		want int
	}{
		{`<img src="data:image/png;base64,AAAA" alt="x"><a href="#table">t</a>`, 0},
		{`<p>mem = peak RSS growth; tokens/s = batch·n / mean</p>`, 0},
		{`<img src="https://example.com/x.png">`, 1},
		{`<img src=http://example.com/x.png>`, 1},
		{`<a href="//cdn.example.com/x">`, 1},
		{`<img src="plot.png">`, 1},
		{`<style>body { background: url(x.png) }</style>`, 1},
		{`<style>@import "x.css";</style>`, 1},
		{`<script>fetch("x")</script>`, 1},
		{`<link rel="stylesheet" href="x.css">`, 2},
	}
	for _, tc := range tests {
		if got := externalRefs(tc.page); len(got) != tc.want {
			t.Errorf("%s: found %q, want %d", tc.page, got, tc.want)
		}
	}
}

// imgTag matches the report's embedded PNG figures.
var imgTag = regexp.MustCompile(`<img id="fig-([a-z]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"`)

// TestCompareReportChromium writes the --report of three variants, checks it is one
// self-contained page (the table with a row per variant, a decodable PNG for each of the
// three plots, nothing that would fetch from outside) and opens it in headless Chromium,
// which must render it: its screenshot (compare-report.png, kept in $ZOO_TEST_ARTIFACTS
// when set, else the test's temporary directory) is a full-size PNG, and the DOM Chromium
// built holds the table and the three images. Skips when chromium is not installed.
func TestCompareReportChromium(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	variants := []string{"vanilla", "linear", "sparse"}
	code, out, errs := zoo(t, compareArgs(variants, "--report", report, "--eval-every", "4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "report: "+report) {
		t.Errorf("stdout does not name the report:\n%s", out)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	checkSelfContained(t, page)
	if !strings.Contains(page, `<table id="results">`) {
		t.Fatal("the report has no results table")
	}
	table := page[strings.Index(page, `<table id="results">`):]
	table = table[:strings.Index(table, "</table>")]
	for _, v := range variants {
		if !strings.Contains(table, "<tr><td>"+v+"</td>") {
			t.Errorf("the results table has no row for %s", v)
		}
	}
	figs := map[string]bool{}
	for _, m := range imgTag.FindAllStringSubmatch(page, -1) {
		raw, err := base64.StdEncoding.DecodeString(m[2])
		if err != nil {
			t.Errorf("figure %s: %v", m[1], err)
			continue
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(raw))
		if err != nil || cfg.Width < 400 || cfg.Height < 200 {
			t.Errorf("figure %s: PNG %dx%d, %v; want a real plot", m[1], cfg.Width, cfg.Height, err)
		}
		figs[m[1]] = true
	}
	for _, id := range []string{"loss", "scaling", "quality"} {
		if !figs[id] {
			t.Errorf("the report has no embedded image for the %s plot", id)
		}
	}

	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); the page was checked without a browser")
	}
	shots := t.TempDir()
	if d, _ := env.Get(env.TestArtifacts); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		shots = d
	}
	shot := filepath.Join(shots, "compare-report.png")
	_ = os.Remove(shot)
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir()}
	url := "file://" + report
	// A stuck browser must not hang the suite: chromium gets a deadline of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append(flags, "--screenshot="+shot, "--window-size=1200,2000", url)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, msg)
	}
	img, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width != 1200 || cfg.Height != 2000 {
		t.Fatalf("screenshot %s: %dx%d, %v; want a 1200x2000 PNG", shot, cfg.Width, cfg.Height, err)
	}
	t.Logf("screenshot of the report: %s", shot)
	dom, err := exec.CommandContext(ctx, browser, append(flags, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if n := strings.Count(string(dom), `src="data:image/png;base64,`); n != 3 || !strings.Contains(string(dom), `id="results"`) {
		t.Errorf("the DOM Chromium built has %d embedded images and results table %v; want 3 and true", n, strings.Contains(string(dom), `id="results"`))
	}
	checkSelfContained(t, string(dom))
}

// TestCompareFlagOrder checks that flags may come before the variants too.
func TestCompareFlagOrder(t *testing.T) {
	args := []string{"compare", "--input", compareCorpus, "--preset", "tiny", "--steps", "2", "--batch", "2", "--window", "16",
		"--seq", "16,32", "--reps", "1", "--seeds", "1", "--json", "vanilla", "linear"}
	code, out, errs := zoo(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Variants []struct {
			Variant string `json:"variant"`
		} `json:"variants"`
	}
	got := doc.Variants
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Variants) != 2 || doc.Variants[0].Variant != "vanilla" || doc.Variants[1].Variant != "linear" {
		t.Fatalf("got %+v (%v), want vanilla then linear:\n%s", got, err, out)
	}
}

func fmtPtr[T any](k *T) string {
	if k == nil {
		return "missing"
	}
	return fmt.Sprint(*k)
}

// verdictRegistry adds two presets for the verdict tests: vanilla.twin, vanilla.tiny under
// another name (the same config, so the same weights and losses at every seed), and
// linformer.blind, whose projection to one position gives every query the same attention
// output: it cannot find a byte's neighbours.
func verdictRegistry(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registry.yaml")
	yaml := "variants:\n" +
		"  - name: vanilla\n    plugin: builtin\n    presets:\n      tiny: {d_model: 64, heads: 4, layers: 2, d_ff: 128}\n      twin: {d_model: 64, heads: 4, layers: 2, d_ff: 128}\n" +
		"  - name: linformer\n    plugin: builtin\n    presets:\n      blind: {d_model: 64, heads: 4, layers: 2, d_ff: 128, k: 1, max_len: 128}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// periodicCorpus writes a text in which every byte is fixed by its neighbour (the digits
// 0–9 over and over): a model that sees context predicts a masked byte almost surely, one
// that does not is left with the digits' frequencies (ln 10 nats).
func periodicCorpus(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "digits.txt")
	if err := os.WriteFile(path, bytes.Repeat([]byte("0123456789"), 600), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompareVerdict compares, on the periodic corpus, vanilla.tiny with its identical twin
// and with linformer.blind, over two seeds: the twins are called a tie (equal figures at every
// seed), linformer.blind is behind (about 2 bits per byte against 3.3 after 300 steps), and
// the JSON verdict and the report say so. (That the text output opens with the verdict is
// TestTableAndHTML's, in internal/compare.)
func TestCompareVerdict(t *testing.T) {
	report := filepath.Join(t.TempDir(), "r.html")
	args := []string{"compare", "vanilla.tiny", "vanilla.twin", "linformer.blind", "--registry", verdictRegistry(t), "--input", periodicCorpus(t),
		"--steps", "300", "--batch", "8", "--window", "32", "--lr", "3e-3", "--seeds", "2", "--seq", "32,64", "--reps", "2", "--report", report}
	code, out, errs := zoo(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Variants []struct {
			Variant string  `json:"variant"`
			EvalBPB float64 `json:"eval_bits_per_byte"`
		} `json:"variants"`
		Verdict struct {
			Best   string   `json:"best"`
			Tied   []string `json:"within_noise"`
			Behind []string `json:"behind"`
			Judged bool     `json:"judged"`
			Text   string   `json:"text"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	v := doc.Verdict
	t.Logf("bits per byte: %+v; verdict: %s", doc.Variants, v.Text)
	if v.Best != "vanilla.tiny" || !slices.Equal(v.Tied, []string{"vanilla.twin"}) || !slices.Equal(v.Behind, []string{"linformer.blind"}) || !v.Judged {
		t.Errorf("verdict: best %s, tied %v, behind %v, judged %v; want vanilla.tiny tied with vanilla.twin, linformer.blind behind", v.Best, v.Tied, v.Behind, v.Judged)
	}
	if !strings.Contains(v.Text, "vanilla.twin is within noise of it, so it is a tie among them. linformer.blind is behind.") {
		t.Errorf("verdict text %q does not call the tie and the loser", v.Text)
	}
	page, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(page), "vanilla.twin is within noise of it") {
		t.Errorf("the report lacks the verdict (%v)", err)
	}
}

// TestCompareParamsMatch: --params-match sets linformer.tiny's d_ff so that its parameters
// (8.2 k more than vanilla.tiny's from its projections E and F) come within a few of
// vanilla's, and says so beside its row.
func TestCompareParamsMatch(t *testing.T) {
	code, out, errs := zoo(t, compareArgs([]string{"vanilla", "linformer"}, "--params-match", "--steps", "2", "--seq", "32", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Variants []struct {
			Params  int      `json:"params"`
			Changes []string `json:"config_changes"`
		} `json:"variants"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Variants) != 2 {
		t.Fatalf("%v\n%s", err, out)
	}
	a, b := doc.Variants[0], doc.Variants[1]
	if d := math.Abs(float64(a.Params - b.Params)); d > 0.01*float64(a.Params) || len(a.Changes) != 0 || len(b.Changes) != 1 || !strings.Contains(b.Changes[0], "--params-match") {
		t.Errorf("vanilla %d parameters (changes %v), linformer %d (changes %v); want within 1 %% and linformer's d_ff change stated", a.Params, a.Changes, b.Params, b.Changes)
	}
	code, out, _ = zoo(t, compareArgs([]string{"vanilla", "linformer"}, "--params-match", "--steps", "2", "--seq", "32")...)
	if code != 0 || !strings.Contains(out, "linformer*") || !strings.Contains(out, "* linformer: d_ff=") {
		t.Errorf("the table does not mark the changed row:\n%s", out)
	}
}

// TestComparePartial interrupts a real zoo compare with SIGINT while its second variant
// trains: it exits 130 and writes the table, the JSON and the report of the first, marked
// partial.
func TestComparePartial(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprint("json=", asJSON), func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "r.html")
			args := []string{"compare", "vanilla.tiny", "vanilla.base", "--input", compareCorpus, "--steps", "400", "--batch", "2", "--window", "32",
				"--seq", "32", "--reps", "1", "--seeds", "1", "--report", report}
			if asJSON {
				args = append(args, "--json")
			}
			p := startZoo(t, t.TempDir(), nil, args...)
			for !strings.Contains(p.stderr.String(), "(1/2) vanilla.tiny done") {
				select {
				case <-p.done:
					t.Fatalf("zoo compare ended before the first variant was done: %s", p.stderr.String())
				case <-time.After(50 * time.Millisecond):
				}
			}
			time.Sleep(300 * time.Millisecond) // into the second variant's training
			if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != 130 {
				t.Fatalf("exit %d, want 130: %s", code, p.stderr.String())
			}
			out := p.stdout.String()
			if asJSON {
				var doc struct {
					Variants []struct{ Variant string } `json:"variants"`
					Partial  bool                       `json:"partial"`
				}
				if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Partial || len(doc.Variants) != 1 || doc.Variants[0].Variant != "vanilla.tiny" {
					t.Errorf("JSON after Ctrl-C: %+v (%v); want the first variant, partial\n%s", doc, err, out)
				}
			} else if !strings.Contains(out, "PARTIAL: interrupted after 1 of 2 variants") || !strings.Contains(out, "vanilla.tiny ") {
				t.Errorf("table after Ctrl-C:\n%s", out)
			}
			page, err := os.ReadFile(report)
			if err != nil || !strings.Contains(string(page), `id="partial"`) || !strings.Contains(string(page), "<tr><td>vanilla.tiny</td>") {
				t.Errorf("no partial report after Ctrl-C (%v)", err)
			}
		})
	}
}
