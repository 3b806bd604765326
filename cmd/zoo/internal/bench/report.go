package bench

import "github.com/zoo-dev/zoo/internal/benchplot"

// TimingDoc says how a row is timed (printed in the help and every JSON report).
const TimingDoc = "ms = mean ± sample stddev of the wall time of one Run over --reps repetitions after --warmup untimed runs, " +
	"the Go heap collected before each timed run (untimed: a run then reuses memory already touched, as in a long-running process); " +
	"tokens/s = batch·n / mean; GFLOP/s = FLOPs counted over the graph (zoo show) / mean; " +
	"% SGEMM peak = GFLOP/s / measured SGEMM peak (the best reading so far when a row is printed; the JSON document " +
	"uses the best reading of the whole run)"

// Row is one measured combination; JSON and CSV carry every exported field.
type Row struct {
	Variant       string    `json:"variant"`
	Backend       string    `json:"backend"`
	Level         string    `json:"kernel_level"`
	Precision     string    `json:"precision"` // of the matrix products: fp32 or bf16
	Threads       int       `json:"threads"`
	Batch         int       `json:"batch"`
	N             int       `json:"n"`
	Reps          int       `json:"reps"`
	Warmup        int       `json:"warmup"`
	MSMean        float64   `json:"ms_mean"`
	MSStddev      float64   `json:"ms_stddev"`
	MSSamples     []float64 `json:"ms_samples"`
	TokensPS      float64   `json:"tokens_per_s"`
	FLOPs         int64     `json:"flops"`
	GFLOPS        float64   `json:"gflop_per_s"`
	PeakGFLOPS    float64   `json:"sgemm_peak_gflop_per_s"`
	PctPeak       float64   `json:"pct_of_sgemm_peak"`
	PeakRSSGrowth *int64    `json:"peak_rss_growth_bytes"`
	GoAllocPerRun int64     `json:"go_alloc_bytes_per_run"`
	GraphActBytes int64     `json:"graph_peak_activation_bytes"`
	// WeightBytes is the memory the compiled program holds for its constants (packed weight
	// matrices, int8 ones at --precision int8, and the other constants), where the backend
	// reports it (the cpu backend's Program.WeightBytes).
	WeightBytes  *int64    `json:"weight_bytes,omitempty"`
	ORTMSMean    *float64  `json:"ort_ms_mean,omitempty"`
	ORTMSStddev  *float64  `json:"ort_ms_stddev,omitempty"`
	ORTMSSamples []float64 `json:"ort_ms_samples,omitempty"`
	ORTTokensPS  *float64  `json:"ort_tokens_per_s,omitempty"`
	ORTPeakRSS   *int64    `json:"ort_peak_rss_growth_bytes,omitempty"`
	ZooOverORT   *float64  `json:"zoo_over_ort,omitempty"`
	// SeriesKey names the series the row belongs to ("vanilla.tiny cpu b=8"): one variant on
	// one backend at one batch size, over n. ORTSeries names the matching ONNX Runtime series.
	SeriesKey string `json:"-"`
	ORTSeries string `json:"-"`
}

// SetThroughput fills the derived columns (tokens/s, GFLOP/s, % of peak) from the mean time,
// the FLOP count and the SGEMM peak; a zero mean leaves them zero.
func (r *Row) SetThroughput(peakGFLOPS float64) {
	r.PeakGFLOPS = peakGFLOPS
	if r.MSMean > 0 {
		r.TokensPS = float64(r.Batch*r.N) / (r.MSMean / 1000)
		r.GFLOPS = float64(r.FLOPs) / (r.MSMean / 1000) / 1e9
	}
	if peakGFLOPS > 0 {
		r.PctPeak = 100 * r.GFLOPS / peakGFLOPS
	}
}

// Backend describes one backend of the run and its measured SGEMM peak.
type Backend struct {
	Name       string  `json:"name"`
	Level      string  `json:"kernel_level"`
	Precision  string  `json:"precision"` // of the matrix products (--precision): fp32 or bf16
	Device     string  `json:"device"`
	Threads    int     `json:"threads"`
	Why        string  `json:"why_chosen"`
	PeakSize   int     `json:"sgemm_size"`
	PeakMS     float64 `json:"sgemm_best_ms"`
	PeakGFLOPS float64 `json:"sgemm_peak_gflop_per_s"`
	// FirstPeakGFLOPS is the reading before the first row; the footer says when later
	// readings beat it.
	FirstPeakGFLOPS float64 `json:"-"`
}

// Machine is the header of the report.
type Machine struct {
	CPU         string    `json:"cpu"`
	Cores       int       `json:"cores"`
	OS          string    `json:"os"`
	Arch        string    `json:"arch"`
	ZooVersion  string    `json:"zoo_version"`
	GoVersion   string    `json:"go_version"`
	Backends    []Backend `json:"backends"`
	ONNXRuntime string    `json:"onnxruntime_version,omitempty"`
	Timing      string    `json:"timing"`
	Memory      string    `json:"memory"`
}

// Fit is a series' fitted exponents: the least-squares slope of log time (and log peak RSS
// growth) against log n. An exponent rests on the points where the measurement is positive;
// on two points it is the line through them and says nothing about whether the series
// follows a power law at all: TwoPointFit flags a time exponent on two points (the memory
// exponent's count is MemPoints).
type Fit struct {
	Series       string   `json:"series"`
	Variant      string   `json:"variant"`
	Backend      string   `json:"backend"`
	Batch        int      `json:"batch"`
	Points       int      `json:"points"`
	TimeExponent *float64 `json:"time_exponent"`
	TimePoints   int      `json:"time_fit_points"`
	MemExponent  *float64 `json:"memory_exponent"`
	MemPoints    int      `json:"memory_fit_points"`
	TwoPointFit  bool     `json:"two_point_fit"`
}

// Skip is a combination that was not run, and why.
type Skip struct {
	Variant string `json:"variant"`
	Batch   int    `json:"batch"`
	N       int    `json:"n"`
	Reason  string `json:"reason"`
}

// Doc is the whole report (--format json prints it).
type Doc struct {
	Machine Machine `json:"machine"`
	Rows    []Row   `json:"rows"`
	Fits    []Fit   `json:"fits"`
	Skipped []Skip  `json:"skipped"`
	// Series are the plotted lines, filled by Fit in the order of Fits.
	Series []benchplot.Series `json:"-"`
}

// KeepBetterPeak replaces backend bi's SGEMM peak with again's when again measured more,
// and sets that backend's rows' peak and percentage from the peak kept: on a shared machine
// one reading can fall in a slow spell, and rows timed in a faster one would then show more
// than 100 % of it. An index out of range changes nothing.
func (d *Doc) KeepBetterPeak(bi int, again Backend) {
	if bi < 0 || bi >= len(d.Machine.Backends) {
		return
	}
	bb := &d.Machine.Backends[bi]
	if again.PeakGFLOPS > bb.PeakGFLOPS {
		bb.PeakSize, bb.PeakMS, bb.PeakGFLOPS = again.PeakSize, again.PeakMS, again.PeakGFLOPS
	}
	if bb.PeakGFLOPS <= 0 {
		return
	}
	for i := range d.Rows {
		if r := &d.Rows[i]; r.Backend == bb.Name {
			r.PeakGFLOPS, r.PctPeak = bb.PeakGFLOPS, 100*r.GFLOPS/bb.PeakGFLOPS
		}
	}
}
