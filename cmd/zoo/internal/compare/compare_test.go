package compare

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/bench"
)

func sample() ([]Result, Setup) {
	k1, k2 := 1.02, 0.97
	mem := int64(3 << 20)
	r := []Result{
		{Variant: "vanilla", Params: 100100, TrainTokensPS: 9220, EvalLoss: 2.5, EvalBPB: 3.6067,
			Inference: []Inference{{N: 64, MS: 0.68, MemBytes: &mem}, {N: 256, MS: 212.4}}, TimeExponent: &k1, TimePoints: 2,
			Train: []Point{{Step: 1, Loss: 5.7}, {Step: 2, Loss: 5.1}}, Eval: []Point{{Step: 0, Loss: 5.8, BitsPerByte: 8.3}, {Step: 2, Loss: 2.5, BitsPerByte: 3.6}},
			Notes: []string{"built with max_len=256"}},
		{Variant: "linear", Params: 100100, TrainTokensPS: 10582, EvalLoss: 2.6, EvalBPB: 3.75,
			Inference: []Inference{{N: 64, MS: 1.2, MemBytes: &mem}}, MemExponent: &k2, MemPoints: 3},
	}
	return r, Setup{Objective: "mlm", Steps: 2, Batch: 2, Window: 64, Seqs: []int{64, 256}, Reps: 2, InferWarmup: 1, Eval: "--eval h.txt"}
}

// TestCells checks the table's cells: missing lengths and memory are "-", an exponent on two
// points says so, an unfitted one is n/a.
func TestCells(t *testing.T) {
	rs, s := sample()
	tests := []struct {
		r    Result
		want []string
	}{
		{rs[0], []string{"vanilla", "100.10 k", "9220", "2.5000", "3.607", "0.68 ms", "212 ms", "3.00 MiB", "-", "1.02 (2 pts)", "n/a"}},
		{rs[1], []string{"linear", "100.10 k", "10582", "2.6000", "3.750", "1.20 ms", "-", "3.00 MiB", "-", "n/a", "0.97"}},
	}
	for _, tc := range tests {
		if got := Cells(tc.r, s.Seqs); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s:\n got %q\nwant %q", tc.r.Variant, got, tc.want)
		}
	}
}

// TestJSONFields checks the --json contract: exactly the documented fields.
func TestJSONFields(t *testing.T) {
	rs, _ := sample()
	b, err := json.Marshal(rs[1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"variant":"linear","params":100100,"train_tokens_per_s":10582,"eval_loss":2.6,"eval_bits_per_byte":3.75,"inference":[{"n":64,"ms":1.2,"mem_bytes":3145728}],"time_exponent":null,"memory_exponent":0.97}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// TestTableAndHTML checks that the table lines up (every row as wide as the header's
// columns) and that the report holds the table, the notes and three embedded figures.
func TestTableAndHTML(t *testing.T) {
	rs, s := sample()
	var buf bytes.Buffer
	tb := NewTable(&buf, []string{"vanilla", "linear"}, s.Seqs)
	tb.Begin(s)
	for _, r := range rs {
		tb.Row(r)
	}
	tb.End(rs, s)
	out := buf.String()
	for _, want := range []string{"VARIANT", "MS@256", "MEM@64", "note: vanilla: built with max_len=256", "2 steps × batch 2 × window 64"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, rs, s); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, `src="data:image/png;base64,`); n != 3 {
		t.Errorf("%d embedded figures, want 3", n)
	}
	for _, want := range []string{`<table id="results">`, "<tr><td>vanilla</td>", "<tr><td>linear</td>", "note: vanilla: built with max_len=256"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	var f bench.Fit
	rs[1].SetFit(f)
	if rs[1].MemExponent != nil {
		t.Error("SetFit kept the old memory exponent")
	}
}
