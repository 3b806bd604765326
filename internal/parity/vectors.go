package parity

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// VectorRule names VectorStats' definitions in reports and help text.
const VectorRule = "relative error of an element = |got - want| / max|want| over its position's vector " +
	"(the absolute error where that vector is all zeros); cosine = got·want / (|got| |want|) per position"

// VectorStats compares two runs of one output position by position, for accuracy reports
// such as bf16 against fp32: each position (an index over every axis but the last) holds a
// vector along the last axis. The element-wise relative error is scaled by the largest
// magnitude of the reference vector, not by the element's own, so that elements near zero
// (which every hidden state has) do not turn a tiny absolute error into a huge relative one.
type VectorStats struct {
	// Positions counts the compared positions; Width is the length of each vector.
	Positions int `json:"positions"`
	Width     int `json:"width"`
	// MaxRel is the largest relative error, at MaxRelAt (an index into the tensors);
	// MeanRel the mean over every compared element.
	MaxRel   float64 `json:"max_rel_error"`
	MaxRelAt []int   `json:"max_rel_error_at"`
	MeanRel  float64 `json:"mean_rel_error"`
	// Cosine is each compared position's cosine similarity, in position order; MinCosine
	// and MeanCosine summarise it.
	MinCosine  float64   `json:"min_cosine"`
	MeanCosine float64   `json:"mean_cosine"`
	Cosine     []float64 `json:"cosine"`
}

// CompareVectors compares got with the reference want under VectorRule, over the positions
// valid marks (valid[p] for position p in row-major order over every axis but the last; nil
// compares every position). Sums run in float64; a cosine is clamped to [-1, 1] (rounding
// may push it past), is 1 where both vectors are zero and 0 where only one is.
//
// It returns an error, and no statistics, when a tensor is nil or not float32, the shapes
// differ or have no axis, a vector is empty, valid's length is not the number of positions,
// no position is valid, or a compared element is NaN or infinite on either side (an accuracy
// figure over such values would mean nothing).
func CompareVectors(got, want *tensor.Tensor, valid []bool) (VectorStats, error) {
	var s VectorStats
	switch {
	case got == nil || want == nil:
		return s, errors.New("missing output (nil tensor)")
	case got.DType != tensor.Float32 || want.DType != tensor.Float32:
		return s, fmt.Errorf("want float32 tensors, got %s and %s", got.DType, want.DType)
	case !slices.Equal(got.Shape, want.Shape):
		return s, fmt.Errorf("shapes differ: %s against %s", tensor.ShapeString(got.Shape), tensor.ShapeString(want.Shape))
	case len(want.Shape) == 0 || want.Shape[len(want.Shape)-1] == 0:
		return s, fmt.Errorf("shape %s has no vectors to compare (want at least one axis, of length ≥ 1)", tensor.ShapeString(want.Shape))
	}
	d := want.Shape[len(want.Shape)-1]
	n := len(want.F32) / d
	if valid != nil && len(valid) != n {
		return s, fmt.Errorf("the valid-position mask has %d entries for %d positions", len(valid), n)
	}
	s.Width, s.MinCosine, s.MaxRelAt = d, 1, []int{}
	var relSum, cosSum float64
	for p := 0; p < n; p++ {
		if valid != nil && !valid[p] {
			continue
		}
		x, y := want.F32[p*d:(p+1)*d], got.F32[p*d:(p+1)*d]
		scale := 0.0
		for j := range x {
			if bad(x[j]) || bad(y[j]) {
				return VectorStats{}, fmt.Errorf("a non-finite value at %v (got %v, want %v)", unravel(p*d+j, want.Shape), y[j], x[j])
			}
			scale = max(scale, math.Abs(float64(x[j])))
		}
		if scale == 0 {
			scale = 1 // an all-zero reference: the absolute error
		}
		var dot, xx, yy float64
		for j := range x {
			a, b := float64(x[j]), float64(y[j])
			rel := math.Abs(b-a) / scale
			if rel > s.MaxRel || len(s.MaxRelAt) == 0 {
				s.MaxRel, s.MaxRelAt = rel, unravel(p*d+j, want.Shape)
			}
			relSum += rel
			dot, xx, yy = dot+a*b, xx+a*a, yy+b*b
		}
		cos := 1.0
		switch {
		case xx == 0 && yy == 0:
		case xx == 0 || yy == 0:
			cos = 0
		default:
			cos = max(-1, min(1, dot/(math.Sqrt(xx)*math.Sqrt(yy))))
		}
		s.Cosine = append(s.Cosine, cos)
		s.MinCosine = min(s.MinCosine, cos)
		cosSum += cos
		s.Positions++
	}
	if s.Positions == 0 {
		return VectorStats{}, errors.New("no valid position to compare")
	}
	s.MeanRel = relSum / float64(s.Positions*d)
	s.MeanCosine = cosSum / float64(s.Positions)
	return s, nil
}

// bad reports whether x is NaN or infinite.
func bad(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }
