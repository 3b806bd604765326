package train

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	zoo "github.com/zoo-dev/zoo"
)

// Stat is a figure measured more than once (over seeds, over timed runs): its mean, its
// sample standard deviation (0 for one value) and how many values it rests on.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	N    int     `json:"n"`
}

// NewStat summarises xs (NaN and infinite values included as they are).
func NewStat(xs []float64) Stat {
	s := Stat{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(len(xs))
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(xs)-1))
	}
	return s
}

// Noisy reports whether the spread exceeds a fifth of the mean (a timing to distrust).
func (s Stat) Noisy() bool { return s.N > 1 && s.SD > 0.2*math.Abs(s.Mean) }

// Within reports whether s and o cannot be told apart: their means differ by at most two
// standard errors of the difference, √(sd²/n + sd'²/n'). Equal means always are; with a
// single value on either side (no spread known) only equal means are.
func (s Stat) Within(o Stat) bool {
	d := math.Abs(s.Mean - o.Mean)
	if d == 0 {
		return true
	}
	if s.N < 2 || o.N < 2 {
		return false
	}
	return d <= 2*math.Sqrt(s.SD*s.SD/float64(s.N)+o.SD*o.SD/float64(o.N))
}

// Contender is one variant of a comparison as Judge weighs it.
type Contender struct {
	// Name is the variant as the comparison names it; Params its trained parameters.
	Name   string
	Params int
	// Quality is the held-out bits per byte after training, over seeds (lower is better).
	Quality Stat
	// TrainSpeed is the training throughput in tokens/s, over seeds.
	TrainSpeed Stat
	// Inference is the inference time at each length measured, in ms over timed runs.
	Inference []Timing
	// Changes are the changes to the variant's configuration that the comparison made.
	Changes []string
}

// Timing is an inference time at length N.
type Timing struct {
	N  int
	MS Stat
}

// Fastest says which variant ran fastest over a range of lengths [From, To], and the
// others within timing noise of it.
type Fastest struct {
	Variant  string   `json:"variant"`
	From     int      `json:"from_n"`
	To       int      `json:"to_n"`
	Tied     []string `json:"within_noise,omitempty"`
	tiedText string
}

// Verdict is the answer of a comparison: which variant is best on held-out text, which
// are within noise of it, which are fastest at which lengths, the Pareto front of quality
// against inference time at the longest length, and what may explain a lead other than
// the attention (more parameters, a changed configuration). Text says it in one paragraph.
type Verdict struct {
	// Best has the lowest mean held-out bits per byte; Tied are within noise of it
	// (Stat.Within), Behind are not. Judged says whether seeds give a spread to judge by.
	Best   string   `json:"best"`
	Tied   []string `json:"within_noise"`
	Behind []string `json:"behind"`
	Judged bool     `json:"judged"`
	// Fastest are the fastest variants by inference length, in ranges of lengths.
	Fastest []Fastest `json:"fastest"`
	// Pareto are the variants that no other beats both in quality and in inference time at
	// the longest length (or in training speed when there is no inference time), best
	// quality first.
	Pareto      []string `json:"pareto_front"`
	ParetoAxis  string   `json:"pareto_against"`
	ParamsNotes []string `json:"params_notes,omitempty"`
	Text        string   `json:"text"`
}

// Judge weighs the contenders of a comparison trained at window tokens on corpus (for the
// text: "at n = 128 on corpus.txt").
func Judge(cs []Contender, window int, corpus string) Verdict {
	v := Verdict{Tied: []string{}, Behind: []string{}, Fastest: []Fastest{}, Pareto: []string{}}
	if len(cs) == 0 {
		v.Text = "Nothing finished, so there is nothing to compare."
		return v
	}
	byQuality := slices.Clone(cs)
	slices.SortStableFunc(byQuality, func(a, b Contender) int { return cmpFloat(a.Quality.Mean, b.Quality.Mean) })
	best := byQuality[0]
	v.Best = best.Name
	v.Judged = best.Quality.N > 1
	for _, c := range byQuality[1:] {
		if c.Quality.Within(best.Quality) {
			v.Tied = append(v.Tied, c.Name)
		} else {
			v.Behind = append(v.Behind, c.Name)
		}
	}
	v.Fastest = fastest(cs)
	v.Pareto, v.ParetoAxis = pareto(byQuality)
	minParams := slices.MinFunc(cs, func(a, b Contender) int { return a.Params - b.Params }).Params
	for _, c := range append([]Contender{best}, pick(cs, v.Tied)...) {
		if minParams > 0 && float64(c.Params) > 1.05*float64(minParams) {
			v.ParamsNotes = append(v.ParamsNotes, fmt.Sprintf("%s has %.0f %% more parameters than the smallest (%s against %s)",
				c.Name, 100*(float64(c.Params)/float64(minParams)-1), humanCount(c.Params), humanCount(minParams)))
		}
	}
	v.Text = v.text(cs, best, window, corpus)
	return v
}

func (v Verdict) text(cs []Contender, best Contender, window int, corpus string) string {
	var b strings.Builder
	where := fmt.Sprintf("At n = %d on %s", window, corpus)
	switch {
	case len(cs) == 1:
		fmt.Fprintf(&b, "%s, %s reaches %s bits per byte (one variant: nothing to compare it with).", where, best.Name, fmtStat(best.Quality, 3))
	case !v.Judged && len(v.Tied) == 0:
		fmt.Fprintf(&b, "%s, %s has the lowest held-out loss (%s bits per byte), but one seed gives no spread, so whether its lead exceeds seed-to-seed noise is unknown (--seeds 3 tells).",
			where, best.Name, fmtStat(best.Quality, 3))
	case len(v.Behind) == 0:
		fmt.Fprintf(&b, "%s, %s are tied: their held-out losses (%s) differ by less than the noise between seeds, so none is better.",
			where, joinAnd(append([]string{best.Name}, v.Tied...)), qualityList(cs, append([]string{best.Name}, v.Tied...)))
	case len(v.Tied) == 0:
		fmt.Fprintf(&b, "%s, %s is best (%s bits per byte), beyond seed-to-seed noise of every other.", where, best.Name, fmtStat(best.Quality, 3))
	default:
		verb := "is"
		if len(v.Tied) > 1 {
			verb = "are"
		}
		fmt.Fprintf(&b, "%s, %s has the lowest held-out loss (%s bits per byte); %s %s within noise of it, so it is a tie among them.",
			where, best.Name, fmtStat(best.Quality, 3), joinAnd(v.Tied), verb)
	}
	if len(cs) > 1 && len(v.Behind) > 0 && (len(v.Tied) > 0 || v.Judged) {
		fmt.Fprintf(&b, " %s %s behind.", joinAnd(v.Behind), map[bool]string{true: "is", false: "are"}[len(v.Behind) == 1])
	}
	for i, n := range v.ParamsNotes {
		if i == 0 && strings.HasPrefix(n, best.Name+" ") && len(v.Behind) > 0 {
			fmt.Fprintf(&b, " Note: %s, which may explain part of its lead (--params-match compares at equal size).", n)
		} else {
			fmt.Fprintf(&b, " Note: %s.", n)
		}
	}
	for _, c := range cs {
		if len(c.Changes) > 0 && (c.Name == best.Name || slices.Contains(v.Tied, c.Name)) {
			fmt.Fprintf(&b, " %s was changed for this comparison (%s).", c.Name, strings.Join(c.Changes, "; "))
		}
	}
	if len(cs) > 1 {
		for i, f := range v.Fastest {
			from, to := f.From, f.To
			if i == 0 {
				from = 0 // open below: "n ≤ To"
			}
			if i == len(v.Fastest)-1 {
				to = -1 // open above: "n ≥ From"
			}
			fmt.Fprintf(&b, " %s is fastest at %s%s.", f.Variant, lengthRange(from, to), f.tiedText)
		}
		if len(v.Pareto) > 0 {
			fmt.Fprintf(&b, " The Pareto front of quality against %s is %s.", v.ParetoAxis, joinAnd(v.Pareto))
		}
	}
	return b.String()
}

// fastest finds the fastest variant at each length measured by every contender that has it,
// and merges consecutive lengths with the same winner into ranges.
func fastest(cs []Contender) []Fastest {
	lengths := map[int]bool{}
	for _, c := range cs {
		for _, t := range c.Inference {
			lengths[t.N] = true
		}
	}
	var out []Fastest
	for _, n := range slices.Sorted(maps.Keys(lengths)) {
		type at struct {
			name string
			ms   Stat
		}
		var here []at
		for _, c := range cs {
			for _, t := range c.Inference {
				if t.N == n && t.MS.Mean > 0 {
					here = append(here, at{c.Name, t.MS})
				}
			}
		}
		if len(here) < 2 {
			continue
		}
		slices.SortStableFunc(here, func(a, b at) int { return cmpFloat(a.ms.Mean, b.ms.Mean) })
		var tied []string
		for _, h := range here[1:] {
			if h.ms.Within(here[0].ms) {
				tied = append(tied, h.name)
			}
		}
		if k := len(out) - 1; k >= 0 && out[k].Variant == here[0].name {
			// The same winner: one range, whose ties are those within noise at every length.
			out[k].To = n
			out[k].Tied = slices.DeleteFunc(out[k].Tied, func(v string) bool { return !slices.Contains(tied, v) })
			continue
		}
		out = append(out, Fastest{Variant: here[0].name, From: n, To: n, Tied: tied})
	}
	for i := range out {
		if len(out[i].Tied) > 0 {
			out[i].tiedText = fmt.Sprintf(" (%s within timing noise)", joinAnd(out[i].Tied))
		}
	}
	return out
}

// pareto returns the contenders (sorted by quality) that none beats in both quality and
// speed: inference time at the longest length all share, else training speed.
func pareto(byQuality []Contender) ([]string, string) {
	longest := 0
	for _, c := range byQuality {
		for _, t := range c.Inference {
			longest = max(longest, t.N)
		}
	}
	cost := func(c Contender) (float64, bool) { // lower is better
		for _, t := range c.Inference {
			if t.N == longest && t.MS.Mean > 0 {
				return t.MS.Mean, true
			}
		}
		return 0, false
	}
	axis := fmt.Sprintf("inference time at n = %d", longest)
	for _, c := range byQuality {
		if _, ok := cost(c); !ok {
			cost = func(c Contender) (float64, bool) { return -c.TrainSpeed.Mean, c.TrainSpeed.Mean > 0 }
			axis = "training speed"
			break
		}
	}
	front := []string{}
	bestCost := math.Inf(1)
	for _, c := range byQuality {
		x, ok := cost(c)
		if ok && x < bestCost {
			front = append(front, c.Name)
			bestCost = x
		}
	}
	return front, axis
}

func pick(cs []Contender, names []string) []Contender {
	var out []Contender
	for _, c := range cs {
		if slices.Contains(names, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func qualityList(cs []Contender, names []string) string {
	var parts []string
	for _, c := range pick(cs, names) {
		parts = append(parts, c.Name+" "+fmtStat(c.Quality, 3))
	}
	return strings.Join(parts, ", ")
}

// fmtStat formats a mean ± sd with prec decimals (the mean alone for one value).
func fmtStat(s Stat, prec int) string {
	if s.N < 2 {
		return fmt.Sprintf("%.*f", prec, s.Mean)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, s.Mean, prec, s.SD)
}

func lengthRange(from, to int) string {
	switch {
	case from == 0 && to == -1:
		return "every length measured"
	case to == -1:
		return fmt.Sprintf("n ≥ %d", from)
	case from == 0:
		return fmt.Sprintf("n ≤ %d", to)
	case from == to:
		return fmt.Sprintf("n = %d", from)
	}
	return fmt.Sprintf("n = %d–%d", from, to)
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func humanCount(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.2f k", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Parameters returns the number of m's trained parameters (what a Trainer of m trains:
// float initializers that are neither buffers nor constants).
func Parameters(m *zoo.Model) (int, error) {
	layout, err := trainableLayout(m.Graph())
	if err != nil {
		return 0, err
	}
	return layout.Size(), nil
}

// MatchParams finds the feed-forward width d_ff at which a model's parameter count comes
// closest to target, given count(dff), the model's parameters at d_ff: linear in d_ff for
// zoo's encoders (each layer's feed-forward block holds 2·d_model·d_ff + d_ff + d_model).
// It measures count at dff and at a second width, solves the line for target and checks the
// answer; d_ff stays at least 1. It returns the width and its count.
func MatchParams(count func(dff int) (int, error), dff, target int) (int, int, error) {
	p0, err := count(dff)
	if err != nil {
		return 0, 0, err
	}
	if p0 == target {
		return dff, p0, nil
	}
	d1 := max(1, dff/2)
	if d1 == dff {
		d1 = dff + 1
	}
	p1, err := count(d1)
	if err != nil {
		return 0, 0, err
	}
	if p1 == p0 {
		return 0, 0, fmt.Errorf("its parameter count does not change with d_ff (%d at d_ff %d and %d)", p0, dff, d1)
	}
	slope := float64(p0-p1) / float64(dff-d1)
	want := dff + int(math.Round(float64(target-p0)/slope))
	if want < 1 {
		return 0, 0, fmt.Errorf("it would need d_ff %d to have %s parameters (it has %s at d_ff %d)", want, humanCount(target), humanCount(p0), dff)
	}
	got, err := count(want)
	if err != nil {
		return 0, 0, err
	}
	return want, got, nil
}
