package compare

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
	"github.com/zoo-dev/zoo/train"
)

func sample() ([]Result, Setup) {
	k1, k2 := 1.02, 0.97
	mem := int64(3 << 20)
	r := []Result{
		{Variant: "vanilla", Params: 100100,
			Inference: []Inference{{N: 64, MS: 0.68, MSSD: 0.01, Reps: 2, MemBytes: &mem}, {N: 256, MS: 212.4, MSSD: 60, Reps: 2, Noisy: true}}, TimeExponent: &k1, TimePoints: 2,
			ConfigChanges: []string{"d_ff=97 (its own is 128), to match 100.10 k parameters (--params-match)"}},
		{Variant: "linear", Params: 100100,
			Inference: []Inference{{N: 64, MS: 1.2, Reps: 1, MemBytes: &mem}}, MemExponent: &k2, MemPoints: 3},
	}
	r[0].AddSeed(Seed{Seed: 0, EvalLoss: 2.5, EvalBPB: 3.6, TrainTokensPS: 9200, Train: []Point{{Step: 1, Loss: 5.7}, {Step: 2, Loss: 5.1}},
		Eval: []Point{{Step: 0, Loss: 5.8, BitsPerByte: 8.3}, {Step: 2, Loss: 2.5, BitsPerByte: 3.6}}})
	r[0].AddSeed(Seed{Seed: 1, EvalLoss: 2.6, EvalBPB: 3.7, TrainTokensPS: 9240, Train: []Point{{Step: 1, Loss: 5.6}, {Step: 2, Loss: 5.0}},
		Eval: []Point{{Step: 0, Loss: 5.8, BitsPerByte: 8.3}, {Step: 2, Loss: 2.6, BitsPerByte: 3.7}}})
	r[1].AddSeed(Seed{Seed: 0, EvalLoss: 2.6, EvalBPB: 3.75, TrainTokensPS: 10582})
	r[1].AddSeed(Seed{Seed: 1, EvalLoss: 2.6, EvalBPB: 3.75, TrainTokensPS: 10582})
	return r, Setup{Objective: "mlm", Steps: 2, Batch: 2, Window: 64, Seqs: []int{64, 256}, Reps: 2, InferWarmup: 1, Eval: "--eval h.txt", Seeds: []uint64{0, 1}}
}

// TestCells checks the table's cells: means ± spreads over seeds and timed runs, a ! on a
// spread above a fifth of the mean, a * on a variant whose config was changed, missing
// lengths and memory "-", an exponent on two points says so, an unfitted one is n/a.
func TestCells(t *testing.T) {
	rs, s := sample()
	tests := []struct {
		r    Result
		want []string
	}{
		{rs[0], []string{"vanilla*", "100.10 k", "9220 ± 28", "2.5500 ± 0.0707", "3.650 ± 0.071", "0.68 ± 0.01 ms", "212 ± 60 ms!", "3.00 MiB", "-", "1.02 (2 pts)", "n/a"}},
		{rs[1], []string{"linear", "100.10 k", "10582 ± 0", "2.6000 ± 0.0000", "3.750 ± 0.000", "1.20 ms", "-", "3.00 MiB", "-", "n/a", "0.97"}},
	}
	for _, tc := range tests {
		if got := Cells(tc.r, s.Seqs); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s:\n got %q\nwant %q", tc.r.Variant, got, tc.want)
		}
	}
}

// TestJSONFields checks the --json contract of a variant: exactly the documented fields.
func TestJSONFields(t *testing.T) {
	rs, _ := sample()
	b, err := json.Marshal(rs[1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"variant":"linear","params":100100,"train_tokens_per_s":10582,"train_tokens_per_s_sd":0,"eval_loss":2.6,"eval_loss_sd":0,` +
		`"eval_bits_per_byte":3.75,"eval_bits_per_byte_sd":0,"seeds":[{"seed":0,"eval_loss":2.6,"eval_bits_per_byte":3.75,"train_tokens_per_s":10582},` +
		`{"seed":1,"eval_loss":2.6,"eval_bits_per_byte":3.75,"train_tokens_per_s":10582}],"inference":[{"n":64,"ms":1.2,"ms_sd":0,"reps":1,"noisy":false,"mem_bytes":3145728}],` +
		`"time_exponent":null,"memory_exponent":0.97,"config_changes":null}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// TestTableAndHTML checks the text output (the verdict first, then a table that lines up,
// the changes and notes, a legend of the columns shown) and that the report holds the
// verdict, the table with each row's changes, the notes and three embedded figures; a
// partial comparison says so in both.
func TestTableAndHTML(t *testing.T) {
	rs, s := sample()
	var cs []train.Contender
	for _, r := range rs {
		cs = append(cs, r.Contender())
	}
	v := train.Judge(cs, s.Window, "h.txt")
	s.Partial, s.Total = true, 3
	var buf bytes.Buffer
	tb := NewTable(&buf, []string{"vanilla", "linear"}, s.Seqs)
	tb.Begin(s)
	tb.End(rs, v, s)
	out := buf.String()
	for _, want := range []string{"PARTIAL: interrupted after 2 of 3 variants", "Verdict: At n = 64 on h.txt, vanilla", "VARIANT", "MS@256", "MEM@64",
		"* vanilla: d_ff=97", "2 steps × batch 2 × window 64", "2 seeds (0, 1) per variant", "! marks a spread above a fifth"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GFLOP") || strings.Contains(out, "SGEMM") || strings.Contains(out, "u marks") {
		t.Errorf("the legend describes columns or marks the table does not have:\n%s", out)
	}
	if strings.Index(out, "Verdict:") > strings.Index(out, "VARIANT") {
		t.Errorf("the verdict comes after the table:\n%s", out)
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, rs, v, s); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, `src="data:image/png;base64,`); n != 3 {
		t.Errorf("%d embedded figures, want 3", n)
	}
	for _, want := range []string{`<table id="results">`, "<tr><td>vanilla*</td>", "<tr><td>linear</td>", `id="verdict"`, `id="partial"`,
		"<td>d_ff=97 (its own is 128), to match 100.10 k parameters (--params-match)</td>", "<th>CONFIG CHANGES</th>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(html, "GFLOP") || strings.Contains(html, "SGEMM") {
		t.Error("the report's footer describes columns it does not have")
	}
	var f bench.Fit
	rs[1].SetFit(f)
	if rs[1].MemExponent != nil {
		t.Error("SetFit kept the old memory exponent")
	}
}

// TestSmooth: the moving average follows a constant exactly and damps alternating noise.
func TestSmooth(t *testing.T) {
	flat := Smooth([]float64{2, 2, 2, 2, 2})
	for _, x := range flat {
		if x != 2 {
			t.Fatalf("a constant smoothed to %v", flat)
		}
	}
	var noisy []float64
	for i := range 100 {
		noisy = append(noisy, 5+float64(i%2*2-1))
	}
	sm := Smooth(noisy)
	if d := sm[50] - sm[49]; d > 0.5 || d < -0.5 {
		t.Errorf("alternating ±1 still moves by %v after smoothing", d)
	}
	// A straight line stays on itself: the average is centred, so it does not lag.
	var line []float64
	for i := range 200 {
		line = append(line, 10-0.05*float64(i))
	}
	for i, x := range Smooth(line) {
		if d := x - line[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("a straight line smoothed to %v at %d, want %v (a lag)", x, i, line[i])
		}
	}
}
