package bench

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/internal/benchplot"
)

// MeanStddev returns the mean and the sample standard deviation of x (0 for fewer than two
// values; NaN mean for none).
func MeanStddev(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)-1))
}

// exponent fits y ∝ n^k over the points where both are positive and finite (the ones
// benchplot.Slope uses); it returns nil and the count when no slope can be fitted.
func exponent(n, y []float64) (*float64, int) {
	points := 0
	for i := range n {
		if i < len(y) && n[i] > 0 && y[i] > 0 && !math.IsInf(y[i], 0) {
			points++
		}
	}
	k, ok := benchplot.Slope(n, y)
	if !ok {
		return nil, points
	}
	return &k, points
}

// series accumulates one series' measurements over n.
type series struct {
	fit         Fit
	n, t, sd, m []float64
	dashed      bool
	color       int
}

func (s *series) add(n int, ms, msSD float64, mem *int64) {
	s.n = append(s.n, float64(n))
	s.t = append(s.t, ms)
	s.sd = append(s.sd, msSD)
	m := -1.0 // not measured: left out of the fit and the plot
	if mem != nil {
		m = float64(*mem)
	}
	s.m = append(s.m, m)
}

func (s *series) finish() Fit {
	f := s.fit
	f.Points = len(s.n)
	f.TimeExponent, f.TimePoints = exponent(s.n, s.t)
	f.MemExponent, f.MemPoints = exponent(s.n, s.m)
	f.TwoPointFit = f.TimeExponent != nil && f.TimePoints == 2
	return f
}

// FitRows fits the zoo series that rows (all of one series) form: what a CSV row's
// time_exponent column holds.
func FitRows(rows []Row) Fit {
	if len(rows) == 0 {
		return Fit{}
	}
	r0 := rows[0]
	s := &series{fit: Fit{Series: r0.SeriesKey, Variant: r0.Variant, Backend: r0.Backend, Batch: r0.Batch}}
	for _, r := range rows {
		s.add(r.N, r.MSMean, r.MSStddev, r.PeakRSSGrowth)
	}
	return s.finish()
}

// Fit groups the rows into series (zoo's, then ONNX Runtime's) and fits each one's time and
// memory exponents into d.Fits, and the plotted lines into d.Series.
func (d *Doc) Fit() {
	colors := map[string]int{} // one colour per variant and batch, shared by its backends and ORT
	var order []string
	all := map[string]*series{}
	add := func(key, variant, backend string, batch, n int, ms, msSD float64, mem *int64, dashed bool) {
		s := all[key]
		if s == nil {
			ck := fmt.Sprintf("%s b=%d", variant, batch)
			if _, ok := colors[ck]; !ok {
				colors[ck] = len(colors)
			}
			s = &series{fit: Fit{Series: key, Variant: variant, Backend: backend, Batch: batch}, dashed: dashed, color: colors[ck]}
			all[key] = s
			order = append(order, key)
		}
		s.add(n, ms, msSD, mem)
	}
	for _, r := range d.Rows {
		add(r.SeriesKey, r.Variant, r.Backend, r.Batch, r.N, r.MSMean, r.MSStddev, r.PeakRSSGrowth, false)
	}
	for _, r := range d.Rows {
		if r.ORTMSMean != nil {
			sd := 0.0
			if r.ORTMSStddev != nil {
				sd = *r.ORTMSStddev
			}
			add(r.ORTSeries, r.Variant, "onnxruntime", r.Batch, r.N, *r.ORTMSMean, sd, r.ORTPeakRSS, true)
		}
	}
	d.Fits, d.Series = nil, nil
	for _, key := range order {
		s := all[key]
		d.Fits = append(d.Fits, s.finish())
		d.Series = append(d.Series, benchplot.Series{Label: key, N: s.n, TimeMS: s.t, TimeSD: s.sd, MemBytes: s.m, Dashed: s.dashed, Color: s.color})
	}
}

// ExponentText formats an exponent for the table footer: "1.98", "1.98 (2 points)" when it
// rests on two points only, or "n/a (needs two or more n)".
func ExponentText(k *float64, points int) string {
	switch {
	case k == nil:
		return "n/a (needs two or more n)"
	case points == 2:
		return fmt.Sprintf("%.2f (2 points)", *k)
	}
	return fmt.Sprintf("%.2f", *k)
}
