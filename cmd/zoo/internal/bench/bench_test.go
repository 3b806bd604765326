package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestKeepBetterPeak checks that a second SGEMM peak reading replaces the first only when
// it is higher, and that the rows of that backend (and no other) follow it.
func TestKeepBetterPeak(t *testing.T) {
	doc := &Doc{
		Machine: Machine{Backends: []Backend{{Name: "cpu", PeakGFLOPS: 100, PeakMS: 20, PeakSize: 1024}, {Name: "cuda", PeakGFLOPS: 1000}}},
		Rows:    []Row{{Backend: "cpu", GFLOPS: 120, PeakGFLOPS: 100, PctPeak: 120}, {Backend: "cuda", GFLOPS: 500, PeakGFLOPS: 1000, PctPeak: 50}},
	}
	steps := []struct {
		again    float64
		wantPeak float64
		wantPct  float64
	}{
		{again: 150, wantPeak: 150, wantPct: 80},
		{again: 90, wantPeak: 150, wantPct: 80},
	}
	for _, st := range steps {
		doc.KeepBetterPeak(0, Backend{Name: "cpu", PeakGFLOPS: st.again, PeakMS: 1, PeakSize: 1024})
		if b := doc.Machine.Backends[0]; b.PeakGFLOPS != st.wantPeak || b.Name != "cpu" {
			t.Fatalf("after a reading of %g: backend %+v, want peak %g", st.again, b, st.wantPeak)
		}
		if r := doc.Rows[0]; r.PeakGFLOPS != st.wantPeak || math.Abs(r.PctPeak-st.wantPct) > 1e-9 {
			t.Fatalf("after a reading of %g: row peak %g (%g %%), want %g (%g %%)", st.again, r.PeakGFLOPS, r.PctPeak, st.wantPeak, st.wantPct)
		}
		if r := doc.Rows[1]; r.PeakGFLOPS != 1000 || r.PctPeak != 50 {
			t.Fatalf("another backend's row changed: %+v", r)
		}
	}
	doc.KeepBetterPeak(7, Backend{PeakGFLOPS: 1e9}) // out of range: no change, no panic
	if doc.Machine.Backends[0].PeakGFLOPS != 150 {
		t.Errorf("an out-of-range index changed backend 0")
	}
}

func TestParseStatus(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		rss, hwm int64
		ok       bool
	}{
		{"both", "Name:\tzoo\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n", 1024 << 10, 2048 << 10, true},
		{"rss only", "VmRSS:\t1024 kB\n", 1024 << 10, 0, false},
		{"bad unit", "VmRSS:\t1024 MB\nVmHWM:\t2048 kB\n", 0, 2048 << 10, false},
		{"not a number", "VmRSS:\tlots kB\nVmHWM:\t2048 kB\n", 0, 2048 << 10, false},
		{"empty", "", 0, 0, false},
	}
	for _, c := range cases {
		rss, hwm, ok := parseStatus(strings.NewReader(c.in))
		if rss != c.rss || hwm != c.hwm || ok != c.ok {
			t.Errorf("%s: got %d, %d, %v; want %d, %d, %v", c.name, rss, hwm, ok, c.rss, c.hwm, c.ok)
		}
	}
}

func TestMeanStddev(t *testing.T) {
	m, sd := MeanStddev([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(sd-math.Sqrt(5.0/3)) > 1e-12 {
		t.Errorf("mean %g sd %g", m, sd)
	}
	if m, sd := MeanStddev([]float64{7}); m != 7 || sd != 0 {
		t.Errorf("one value: mean %g sd %g", m, sd)
	}
}

func TestTimeRuns(t *testing.T) {
	calls := 0
	var gcs []uint32 // runtime.NumGC at each call
	res, err := TimeRuns(context.Background(), func() error {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		calls++
		gcs = append(gcs, ms.NumGC)
		return nil
	}, 3, 2)
	if err != nil || calls != 5 || len(res.MS) != 3 {
		t.Fatalf("err %v, %d calls, %d samples; want 5 calls, 3 samples", err, calls, len(res.MS))
	}
	for i := 2; i < 5; i++ { // the timed runs each start on a collected heap
		if gcs[i] == gcs[i-1] {
			t.Errorf("timed run %d: no collection since the run before (NumGC %v)", i-1, gcs)
		}
	}
	boom := errors.New("boom")
	if _, err := TimeRuns(context.Background(), func() error { return boom }, 1, 0); !errors.Is(err, boom) {
		t.Errorf("err %v, want boom", err)
	}
	if _, err := TimeRuns(context.Background(), func() error { return nil }, 0, 0); err == nil {
		t.Error("reps 0: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TimeRuns(ctx, func() error { return nil }, 1, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v", err)
	}
}

func mem(b int64) *int64 { return &b }

// series makes the rows of one series with time ∝ n^k and memory ∝ n.
func seriesRows(key string, k float64, ns ...int) []Row {
	var rows []Row
	for _, n := range ns {
		rows = append(rows, Row{Variant: "v", Backend: "cpu", Level: "avx2", Batch: 1, N: n, SeriesKey: key,
			MSMean: math.Pow(float64(n), k) / 1000, PeakRSSGrowth: mem(int64(n) * 1000), FLOPs: 1e6, GFLOPS: 1, PctPeak: 1})
	}
	return rows
}

func TestFitMarksTwoPoints(t *testing.T) {
	cases := []struct {
		name     string
		ns       []int
		points   int
		twoPoint bool
		exp      bool
		text     string
	}{
		{"one point", []int{128}, 1, false, false, "n/a (needs two or more n)"},
		{"two points", []int{128, 512}, 2, true, true, "2.00 (2 points)"},
		{"three points", []int{128, 512, 2048}, 3, false, true, "2.00"},
	}
	for _, c := range cases {
		d := &Doc{Rows: seriesRows("v cpu", 2, c.ns...)}
		d.Fit()
		if len(d.Fits) != 1 || len(d.Series) != 1 {
			t.Fatalf("%s: %d fits, %d series", c.name, len(d.Fits), len(d.Series))
		}
		f := d.Fits[0]
		if f.TimePoints != c.points || f.TwoPointFit != c.twoPoint || (f.TimeExponent != nil) != c.exp {
			t.Errorf("%s: fit %+v", c.name, f)
		}
		if f.TimeExponent != nil && math.Abs(*f.TimeExponent-2) > 1e-9 || f.MemExponent != nil && math.Abs(*f.MemExponent-1) > 1e-9 {
			t.Errorf("%s: exponents %v %v, want 2 and 1", c.name, f.TimeExponent, f.MemExponent)
		}
		if got := ExponentText(f.TimeExponent, f.TimePoints); got != c.text {
			t.Errorf("%s: text %q, want %q", c.name, got, c.text)
		}
		if rf := FitRows(d.Rows); rf.TimePoints != f.TimePoints || rf.TwoPointFit != f.TwoPointFit {
			t.Errorf("%s: FitRows %+v differs from Fit %+v", c.name, rf, f)
		}
		js, _ := json.Marshal(f)
		if !strings.Contains(string(js), `"two_point_fit":`) || !strings.Contains(string(js), `"time_fit_points":`) {
			t.Errorf("%s: JSON %s lacks the fit fields", c.name, js)
		}
	}
}

// The table prints each row when Row is called, CSV each series at EndSeries, JSON only at End.
func TestRendererStreams(t *testing.T) {
	doc := &Doc{Machine: Machine{CPU: "test cpu", Cores: 2, Backends: []Backend{{Name: "cpu", Level: "avx2", PeakGFLOPS: 10, PeakSize: 1024}}}}
	lay := Layout{Variants: []string{"v"}, Batches: []int{1}, Seqs: []int{128, 512}, Reps: 1}
	a, b := seriesRows("v cpu", 2, 128, 512), seriesRows("w cpu", 1, 128, 512)
	for _, f := range []Format{Table, Markdown, CSV, JSON} {
		var out bytes.Buffer
		r := NewRenderer(&out, f, lay)
		if err := r.Begin(doc); err != nil {
			t.Fatal(err)
		}
		afterBegin := out.Len()
		doc.Rows = append(doc.Rows[:0], a[0])
		r.Row(doc, a[0])
		afterRow := out.Len()
		doc.Rows = append(doc.Rows, a[1])
		r.Row(doc, a[1])
		r.EndSeries(doc)
		afterSeries := out.String()
		doc.Rows = append(doc.Rows, b...)
		r.Row(doc, b[0])
		r.Row(doc, b[1])
		doc.Fit()
		if err := r.End(doc); err != nil {
			t.Fatal(err)
		}
		switch f {
		case Table, Markdown:
			if afterRow <= afterBegin || !strings.Contains(afterSeries, "512") {
				t.Errorf("%s: a row was not printed when it finished:\n%s", f, afterSeries)
			}
			if !strings.Contains(out.String(), "k = 2.00 (2 points)") || !strings.Contains(out.String(), "k = 1.00 (2 points)") {
				t.Errorf("%s: footer lacks the two-point marks:\n%s", f, out.String())
			}
		case CSV:
			if afterRow != afterBegin {
				t.Errorf("csv: a row was written before its series ended")
			}
			recs, err := csv.NewReader(strings.NewReader(afterSeries)).ReadAll()
			if err != nil || len(recs) != 3 || recs[1][slices.Index(CSVHeader, "time_exponent_points")] != "2" || !strings.HasPrefix(recs[1][23], "2") {
				t.Errorf("csv after the first series: %v %q", err, afterSeries)
			}
			all, _ := csv.NewReader(strings.NewReader(out.String())).ReadAll()
			if len(all) != 5 {
				t.Errorf("csv: %d records, want header and 4 rows", len(all))
			}
		case JSON:
			if afterSeries != "" {
				t.Errorf("json: wrote before End: %q", afterSeries)
			}
			var back Doc
			if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Rows) != 4 || len(back.Fits) != 2 || !back.Fits[0].TwoPointFit {
				t.Errorf("json: %v, %+v", err, back.Fits)
			}
		}
	}
}

// With no row, the table says so and the JSON document has empty lists, not null.
func TestRendererEmpty(t *testing.T) {
	doc := &Doc{Machine: Machine{Backends: []Backend{{Name: "cpu"}}}, Skipped: []Skip{{Variant: "v", Batch: 1, N: 4096, Reason: "too long"}}}
	var out bytes.Buffer
	r := NewRenderer(&out, Table, Layout{})
	r.Begin(doc)
	r.End(doc)
	if s := out.String(); !strings.Contains(s, "no combination was run") || !strings.Contains(s, "n=4096 skipped: too long") || strings.Contains(s, "VARIANT") {
		t.Errorf("table:\n%s", s)
	}
	out.Reset()
	r = NewRenderer(&out, JSON, Layout{})
	r.Begin(&Doc{})
	r.End(&Doc{})
	if s := out.String(); !strings.Contains(s, `"rows": []`) || !strings.Contains(s, `"fits": []`) || !strings.Contains(s, `"skipped": []`) {
		t.Errorf("json: %s", s)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"table": Table, " MD ": Markdown, "csv": CSV, "Json": JSON} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("xml: %v", err)
	}
}

// TestFitSeriesCarriesSpread: the plotted series carry each row's standard deviation, which
// zoo bench --plot draws as error bars (a noisy row then shows as noise, not as a kink).
func TestFitSeriesCarriesSpread(t *testing.T) {
	rows := seriesRows("v cpu", 2, 128, 512)
	rows[0].MSStddev, rows[1].MSStddev = 0.5, 10.15
	d := &Doc{Rows: rows}
	d.Fit()
	if len(d.Series) != 1 || fmt.Sprint(d.Series[0].TimeSD) != "[0.5 10.15]" {
		t.Errorf("series %+v: want the rows' standard deviations", d.Series)
	}
}
