// Package parity compares the outputs of two runtimes (zoo against ONNX Runtime or PyTorch)
// element by element and reports the errors the way NVIDIA Polygraphy does.
//
// # Comparison rule
//
// Rule is Polygraphy's "elemwise" check, not numpy's allclose: with
//
//	abs = |got - want|   rel = abs / |want|   (|want| = 0 is replaced by 2.22e-16)
//
// an element FAILS iff abs > atol AND rel > rtol. So an element passes when it is within
// either tolerance. (numpy.allclose instead passes iff abs <= atol + rtol·|want|.) NaN is
// equal to NaN and an infinity to the same infinity; a NaN or infinity on one side only
// fails. Integer and bool tensors are compared as numbers by the same rule (so any
// difference fails at tolerances below 1).
//
// Only valid positions are compared when a mask is given: valid[b*n+i] says whether position
// (b, i) over the first two dimensions (batch, sequence) holds a real token; padded positions
// of encoder outputs are unspecified.
package parity

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Rule names the comparison rule in reports.
const Rule = "elemwise: fail iff |got-want| > atol AND |got-want|/|want| > rtol (Polygraphy)"

// zeroEps replaces a zero reference magnitude in the relative error, as Polygraphy does.
const zeroEps = 2.220446049250313e-16

// Stats summarises one tensor over the compared positions.
type Stats struct {
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"std_dev"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Result is the comparison of one output. Positions are index tuples into the tensors.
type Result struct {
	Name      string  `json:"name"`
	GotDType  string  `json:"got_dtype"`
	WantDType string  `json:"want_dtype"`
	GotShape  []int   `json:"got_shape"`
	WantShape []int   `json:"want_shape"`
	Atol      float64 `json:"atol"`
	Rtol      float64 `json:"rtol"`
	// Compared counts the elements compared; Masked those skipped as padding.
	Compared int `json:"compared"`
	Masked   int `json:"masked"`
	// Failed counts the elements that fail the rule.
	Failed int `json:"failed"`
	// FirstFailAt is the first failing position (nil when none).
	FirstFailAt []int `json:"first_fail_at,omitempty"`
	// MaxAbs is the largest absolute error, at MaxAbsAt; MeanAbs the mean.
	MaxAbs   float64 `json:"max_abs"`
	MaxAbsAt []int   `json:"max_abs_at,omitempty"`
	MeanAbs  float64 `json:"mean_abs"`
	// MaxRel is the largest relative error, at MaxRelAt; MeanRel the mean.
	MaxRel   float64 `json:"max_rel"`
	MaxRelAt []int   `json:"max_rel_at,omitempty"`
	MeanRel  float64 `json:"mean_rel"`
	// MinAtol is the smallest atol that passes with this Rtol; MinRtol the smallest rtol that
	// passes with this Atol. MaxAbs alone (with rtol 0) or MaxRel alone (with atol 0) also pass:
	// Polygraphy's "Minimum Required Tolerance: [abs=MaxAbs] OR [rel=MaxRel]".
	MinAtol float64 `json:"min_atol"`
	MinRtol float64 `json:"min_rtol"`
	// NaNMismatches counts positions where exactly one side is NaN, or an infinity meets a
	// different value. They always fail and are left out of the error statistics above.
	NaNMismatches int `json:"nan_mismatches"`
	// Got and Want summarise the two tensors over the compared, finite positions.
	Got  Stats `json:"got_stats"`
	Want Stats `json:"want_stats"`
	// Pass is the verdict; Err explains a comparison that could not run (shape, dtype, mask).
	Pass bool   `json:"pass"`
	Err  string `json:"error,omitempty"`
}

// Compare compares got with the reference want under Rule with tolerances atol and rtol.
// valid masks positions over the first two dimensions (len = shape[0]·shape[1]); nil compares
// everything. A nil tensor, different shapes, different dtype kinds (float vs integer), or a
// mask of the wrong length give a failed Result whose Err says why; Compare never panics.
func Compare(name string, got, want *tensor.Tensor, valid []bool, atol, rtol float64) Result {
	r := Result{Name: name, Atol: atol, Rtol: rtol}
	if got == nil || want == nil {
		r.Err = "missing output (nil tensor)"
		return r
	}
	r.GotDType, r.WantDType = got.DType.String(), want.DType.String()
	r.GotShape, r.WantShape = append([]int{}, got.Shape...), append([]int{}, want.Shape...)
	if err := got.Check(); err != nil {
		r.Err = "got: " + err.Error()
		return r
	}
	if err := want.Check(); err != nil {
		r.Err = "want: " + err.Error()
		return r
	}
	if !tensor.SameShape(got.Shape, want.Shape) {
		r.Err = fmt.Sprintf("shape mismatch: got %s, want %s", tensor.ShapeString(got.Shape), tensor.ShapeString(want.Shape))
		return r
	}
	// Floats compare as floats whatever their width (a float16 output of zoo's against ONNX
	// Runtime's, which its Go binding returns as float32).
	if got.DType.IsFloat() != want.DType.IsFloat() {
		r.Err = fmt.Sprintf("dtype mismatch: got %v, want %v", got.DType, want.DType)
		return r
	}
	if !(atol >= 0 && rtol >= 0) || math.IsInf(atol, 0) || math.IsInf(rtol, 0) {
		r.Err = fmt.Sprintf("tolerances must be finite and >= 0 (atol %g, rtol %g)", atol, rtol)
		return r
	}
	per := 1
	if valid != nil {
		if len(got.Shape) < 2 || len(valid) != got.Shape[0]*got.Shape[1] {
			r.Err = fmt.Sprintf("mask has %d entries, shape %s needs one per (batch, position) pair", len(valid), tensor.ShapeString(got.Shape))
			return r
		}
		per = tensor.NumElements(got.Shape[2:])
	}
	gv, wv := values(got), values(want)
	var sumAbs, sumRel float64
	var gs, ws accum
	maxAbsAt, maxRelAt, firstFail := -1, -1, -1
	for i := range gv {
		if valid != nil && !valid[i/per] {
			r.Masked++
			continue
		}
		r.Compared++
		g, w := gv[i], wv[i]
		gs.add(g)
		ws.add(w)
		var abs, rel float64
		switch {
		case math.IsNaN(g) && math.IsNaN(w), g == w: // equal values, same infinities, both NaN
		case math.IsNaN(g) || math.IsNaN(w) || math.IsInf(g, 0) || math.IsInf(w, 0):
			// Fails at any tolerance; kept out of the error statistics so they stay finite.
			r.NaNMismatches++
			r.Failed++
			if firstFail < 0 {
				firstFail = i
			}
			continue
		default:
			abs = math.Abs(g - w)
			mag := math.Abs(w)
			if mag == 0 {
				mag = zeroEps
			}
			rel = abs / mag
		}
		if abs > atol && rel > rtol {
			r.Failed++
			if firstFail < 0 {
				firstFail = i
			}
		}
		if maxAbsAt < 0 || abs > r.MaxAbs {
			r.MaxAbs, maxAbsAt = abs, i
		}
		if maxRelAt < 0 || rel > r.MaxRel {
			r.MaxRel, maxRelAt = rel, i
		}
		if rel > rtol && abs > r.MinAtol {
			r.MinAtol = abs
		}
		if abs > atol && rel > r.MinRtol {
			r.MinRtol = rel
		}
		sumAbs += abs
		sumRel += rel
	}
	if finite := r.Compared - r.NaNMismatches; finite > 0 {
		r.MeanAbs = sumAbs / float64(finite)
		r.MeanRel = sumRel / float64(finite)
		r.MaxAbsAt = unravel(maxAbsAt, got.Shape)
		r.MaxRelAt = unravel(maxRelAt, got.Shape)
	}
	if firstFail >= 0 {
		r.FirstFailAt = unravel(firstFail, got.Shape)
	}
	r.Got, r.Want = gs.stats(), ws.stats()
	r.Pass = r.Failed == 0
	return r
}

// AllPass reports whether every result passed.
func AllPass(results []Result) bool {
	for _, r := range results {
		if !r.Pass {
			return false
		}
	}
	return true
}

// ValidFromPadding turns a key-padding mask (true = padding, zoo's and PyTorch's convention)
// into the valid-position mask Compare takes. It returns nil for a nil or non-bool tensor.
func ValidFromPadding(mask *tensor.Tensor) []bool {
	if mask == nil || mask.DType != tensor.Bool {
		return nil
	}
	v := make([]bool, len(mask.Bool))
	for i, p := range mask.Bool {
		v[i] = !p
	}
	return v
}

func values(t *tensor.Tensor) []float64 {
	v := make([]float64, t.Len())
	switch {
	case t.DType.IsFloat():
		for i, x := range t.F32 {
			v[i] = float64(x)
		}
	case t.DType.IsInt():
		for i, x := range t.I64 {
			v[i] = float64(x)
		}
	case t.DType == tensor.Bool:
		for i, x := range t.Bool {
			if x {
				v[i] = 1
			}
		}
	}
	return v
}

func unravel(i int, shape []int) []int {
	if i < 0 {
		return nil
	}
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}

type accum struct {
	n        int
	sum, sq  float64
	min, max float64
}

func (a *accum) add(x float64) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return
	}
	if a.n == 0 || x < a.min {
		a.min = x
	}
	if a.n == 0 || x > a.max {
		a.max = x
	}
	a.n++
	a.sum += x
	a.sq += x * x
}

func (a *accum) stats() Stats {
	if a.n == 0 {
		return Stats{}
	}
	mean := a.sum / float64(a.n)
	v := a.sq/float64(a.n) - mean*mean
	if v < 0 {
		v = 0
	}
	return Stats{Mean: mean, StdDev: math.Sqrt(v), Min: a.min, Max: a.max}
}
