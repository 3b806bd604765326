package train

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func timings(ms ...float64) []Timing {
	var out []Timing
	for i, m := range ms {
		out = append(out, Timing{N: 128 << (2 * i), MS: Stat{Mean: m, SD: m / 100, N: 5}})
	}
	return out
}

// TestJudgeClearWinner: a variant far ahead of the others' spread is best, the rest behind;
// the fastest ranges and the Pareto front follow the timings; a leader with more parameters
// is said to have them.
func TestJudgeClearWinner(t *testing.T) {
	cs := []Contender{
		{Name: "vanilla", Params: 100_100, Quality: NewStat([]float64{3.00, 3.02, 2.98}), Inference: timings(1, 10, 160)},
		{Name: "linear", Params: 100_100, Quality: NewStat([]float64{3.60, 3.62, 3.58}), Inference: timings(2, 8, 40)},
		{Name: "linformer", Params: 165_630, Quality: NewStat([]float64{2.50, 2.52, 2.48}), Inference: timings(3, 9, 30),
			Changes: []string{"max_len=2048 (its own is 128)"}},
	}
	v := Judge(cs, 128, "corpus.txt")
	if v.Best != "linformer" || len(v.Tied) != 0 || !slices.Equal(v.Behind, []string{"vanilla", "linear"}) || !v.Judged {
		t.Errorf("best %s, tied %v, behind %v, judged %v", v.Best, v.Tied, v.Behind, v.Judged)
	}
	if len(v.Fastest) != 3 || v.Fastest[0].Variant != "vanilla" || v.Fastest[1].Variant != "linear" || v.Fastest[2].Variant != "linformer" {
		t.Errorf("fastest %+v", v.Fastest)
	}
	if !slices.Equal(v.Pareto, []string{"linformer"}) {
		t.Errorf("pareto front %v", v.Pareto)
	}
	for _, want := range []string{"At n = 128 on corpus.txt, linformer is best (2.500 ± 0.020 bits per byte), beyond seed-to-seed noise of every other.",
		"vanilla and linear are behind.", "linformer has 65 % more parameters than the smallest (165.63 k against 100.10 k), which may explain part of its lead",
		"linformer was changed for this comparison (max_len=2048 (its own is 128))", "vanilla is fastest at n ≤ 128.", "linear is fastest at n = 512.",
		"linformer is fastest at n ≥ 2048.", "The Pareto front of quality against inference time at n = 2048 is linformer."} {
		if !strings.Contains(v.Text, want) {
			t.Errorf("verdict lacks %q:\n%s", want, v.Text)
		}
	}
}

// TestJudgeTie: identical variants (the same figures at every seed) are a tie, as are
// variants whose difference is inside the spread; one seed judges nothing it cannot.
func TestJudgeTie(t *testing.T) {
	same := NewStat([]float64{3.1, 3.3, 3.2})
	v := Judge([]Contender{{Name: "a", Params: 10, Quality: same}, {Name: "b", Params: 10, Quality: same}}, 64, "x.txt")
	if v.Best != "a" || !slices.Equal(v.Tied, []string{"b"}) || len(v.Behind) != 0 {
		t.Fatalf("identical variants: best %s, tied %v, behind %v", v.Best, v.Tied, v.Behind)
	}
	if !strings.Contains(v.Text, "a and b are tied") {
		t.Errorf("verdict %q does not call the tie", v.Text)
	}
	close := Judge([]Contender{{Name: "a", Quality: NewStat([]float64{3.1, 3.3, 3.2})}, {Name: "c", Quality: NewStat([]float64{3.15, 3.35, 3.25})},
		{Name: "d", Quality: NewStat([]float64{4.1, 4.3, 4.2})}}, 64, "x.txt")
	if close.Best != "a" || !slices.Equal(close.Tied, []string{"c"}) || !slices.Equal(close.Behind, []string{"d"}) {
		t.Errorf("inside the spread: best %s, tied %v, behind %v", close.Best, close.Tied, close.Behind)
	}
	if !strings.Contains(close.Text, "c is within noise of it, so it is a tie among them. d is behind.") {
		t.Errorf("verdict %q", close.Text)
	}
	one := Judge([]Contender{{Name: "a", Quality: NewStat([]float64{3.1})}, {Name: "b", Quality: NewStat([]float64{3.2})}}, 64, "x.txt")
	if one.Judged || !strings.Contains(one.Text, "one seed gives no spread") || strings.Contains(one.Text, "behind") {
		t.Errorf("one seed: %+v", one)
	}
}

func TestStat(t *testing.T) {
	s := NewStat([]float64{1, 2, 3})
	if s.Mean != 2 || math.Abs(s.SD-1) > 1e-15 || s.N != 3 || !s.Noisy() {
		t.Errorf("%+v", s)
	}
	if !(Stat{Mean: 10, SD: 2.5, N: 5}).Noisy() || (Stat{Mean: 10, SD: 2, N: 5}).Noisy() {
		t.Error("Noisy: a spread above a fifth of the mean")
	}
}

// TestMatchParams solves the line of parameters against d_ff: a model of 1000 + 300·d_ff
// parameters matches 40 000 at d_ff 130, and a target below what d_ff 1 gives is an error.
func TestMatchParams(t *testing.T) {
	count := func(dff int) (int, error) { return 1000 + 300*dff, nil }
	dff, got, err := MatchParams(count, 128, 40_000)
	if err != nil || dff != 130 || got != 40_000 {
		t.Errorf("d_ff %d, %d parameters, %v; want 130 and 40000", dff, got, err)
	}
	if _, _, err := MatchParams(count, 128, 500); err == nil {
		t.Error("a target below d_ff 1: no error")
	}
}

// TestJudgeFastestRanges: lengths where the same variant is fastest make one range, whose
// ties are the variants within timing noise at each of its lengths.
func TestJudgeFastestRanges(t *testing.T) {
	at := func(ms ...float64) []Timing {
		var out []Timing
		for i, m := range ms {
			out = append(out, Timing{N: 128 << (2 * i), MS: Stat{Mean: m, SD: m / 10, N: 5}})
		}
		return out
	}
	v := Judge([]Contender{
		{Name: "a", Quality: NewStat([]float64{1, 1.1}), Inference: at(1, 10, 100)},
		{Name: "b", Quality: NewStat([]float64{2, 2.1}), Inference: at(1.05, 10.5, 300)},
		{Name: "c", Quality: NewStat([]float64{3, 3.1}), Inference: at(1.1, 30, 101)},
	}, 128, "x")
	if len(v.Fastest) != 1 || v.Fastest[0].Variant != "a" || v.Fastest[0].From != 128 || v.Fastest[0].To != 2048 || len(v.Fastest[0].Tied) != 0 {
		t.Errorf("fastest %+v; want a over every length, no variant tied at all of them", v.Fastest)
	}
	if !strings.Contains(v.Text, "a is fastest at every length measured.") {
		t.Errorf("verdict %q", v.Text)
	}
}
