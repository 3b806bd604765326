// Package approx computes attention exactly and through the approximations of zoo's
// efficient variants, on one head's Q, K and V, in float64, so that `zoo approx` can say how
// far each approximation is from exact softmax attention on a user's data. Each method is
// the variant's mechanism with its approximation knob as a parameter and, where the variant
// learns a parameter (linformer's projections), the random draw its paper analyses:
//
//   - Linformer (Wang et al. 2020): softmax(Q (E K)ᵀ/√d) (F V) with E, F ∈ R^{k×n} drawn
//     N(0, 1/k) (the Johnson-Lindenstrauss projection of the paper's Theorem 1).
//   - Performer (Choromanski et al. 2021): FAVOR+ positive random features,
//     φ(x) = exp(ωᵀx − |x|²/2)/√m on x = q/d^{1/4} (and k), ω ~ N(0, I), m features.
//   - Nyström (Xiong et al. 2021): landmarks as segment means of Q and K,
//     softmax(Q K̃ᵀ/√d) · pinv(softmax(Q̃ K̃ᵀ/√d)) · softmax(Q̃ Kᵀ/√d) V, the pseudo-inverse
//     exact (SVD) rather than iterated.
//   - Sparse: exact softmax restricted to the sliding window of blocks (variants/sparse's
//     Pattern).
//   - Linear (Katharopoulos et al. 2020): φ = elu + 1, no knob.
//
// Matrices are row-major [][]float64; every function expects non-empty, rectangular input.
//
// sweep.go is the rest of `zoo approx`: which values of a vanilla run to keep (Probes: each
// layer's Q, K, V and attention output), the knob's values (Values), the sweep of every value
// over every layer and head (Sweep, into a Doc), and its table (Print) and plot (Plot).
package approx

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// Exact returns softmax(Q Kᵀ/√d) V for Q (n×d), K and V (nk×d), every key allowed where
// allowed is nil, else only the pairs allowed(i, j) holds.
func Exact(q, k, v [][]float64, allowed func(i, j int) bool) [][]float64 {
	d := len(q[0])
	s := 1 / math.Sqrt(float64(d))
	out := make([][]float64, len(q))
	w := make([]float64, len(k))
	for i, qi := range q {
		m := math.Inf(-1)
		for j, kj := range k {
			if allowed != nil && !allowed(i, j) {
				w[j] = math.Inf(-1)
				continue
			}
			w[j] = dot(qi, kj) * s
			m = math.Max(m, w[j])
		}
		var sum float64
		for j := range w {
			if math.IsInf(w[j], -1) {
				w[j] = 0
				continue
			}
			w[j] = math.Exp(w[j] - m)
			sum += w[j]
		}
		out[i] = make([]float64, len(v[0]))
		for j, wj := range w {
			if wj != 0 {
				axpy(out[i], wj/sum, v[j])
			}
		}
	}
	return out
}

// Linformer returns Linformer attention with k projected keys and values, E and F drawn
// from r.
func Linformer(q, kk, v [][]float64, k int, r *rand.Rand) [][]float64 {
	e, f := gaussian(k, len(kk), 1/math.Sqrt(float64(k)), r), gaussian(k, len(kk), 1/math.Sqrt(float64(k)), r)
	return Exact(q, matmul(e, kk), matmul(f, v), nil)
}

// Performer returns FAVOR+ attention with m positive random features drawn from r.
func Performer(q, k, v [][]float64, m int, r *rand.Rand) [][]float64 {
	d := len(q[0])
	w := gaussian(m, d, 1, r)
	scale := math.Pow(float64(d), -0.25)
	features := func(x [][]float64, rowMax bool) [][]float64 {
		out := make([][]float64, len(x))
		global := math.Inf(-1)
		for i, xi := range x {
			xs := make([]float64, d)
			for t := range xs {
				xs[t] = xi[t] * scale
			}
			half := dot(xs, xs) / 2
			out[i] = make([]float64, m)
			for f := range out[i] {
				out[i][f] = dot(w[f], xs) - half
				global = math.Max(global, out[i][f])
			}
			if rowMax { // a constant per query row cancels in its normalisation
				mx := math.Inf(-1)
				for _, z := range out[i] {
					mx = math.Max(mx, z)
				}
				for f := range out[i] {
					out[i][f] -= mx
				}
			}
		}
		for i := range out {
			for f := range out[i] {
				if !rowMax { // one constant over every key cancels as well
					out[i][f] -= global
				}
				out[i][f] = math.Exp(out[i][f])
			}
		}
		return out
	}
	return kernelAttention(features(q, true), features(k, false), v)
}

// Linear returns linear attention with φ = elu + 1.
func Linear(q, k, v [][]float64) [][]float64 {
	phi := func(x [][]float64) [][]float64 {
		out := make([][]float64, len(x))
		for i, xi := range x {
			out[i] = make([]float64, len(xi))
			for t, z := range xi {
				if z > 0 {
					out[i][t] = z + 1
				} else {
					out[i][t] = math.Exp(z)
				}
			}
		}
		return out
	}
	return kernelAttention(phi(q), phi(k), v)
}

// kernelAttention returns rows Σ_j (φq_i·φk_j) v_j / Σ_j φq_i·φk_j, computed as the
// variants do: φQ (φKᵀ V) over φQ (φKᵀ 1).
func kernelAttention(fq, fk, v [][]float64) [][]float64 {
	kv := matmul(transpose(fk), v) // m×dv
	ksum := make([]float64, len(fk[0]))
	for _, r := range fk {
		axpy(ksum, 1, r)
	}
	out := matmul(fq, kv)
	for i := range out {
		z := dot(fq[i], ksum)
		for t := range out[i] {
			out[i][t] /= z
		}
	}
	return out
}

// Nystrom returns Nyström attention with m landmarks (segment means; m ≥ n gives every row
// its own landmark, and the exact attention up to rounding). The error is for an m below 1.
func Nystrom(q, k, v [][]float64, m int) ([][]float64, error) {
	if m < 1 {
		return nil, fmt.Errorf("nystrom: %d landmarks", m)
	}
	m = min(m, len(q))
	ql, kl := segmentMeans(q, m), segmentMeans(k, m)
	a1 := softmaxRows(scores(q, kl))
	a2 := softmaxRows(scores(ql, kl))
	a3 := softmaxRows(scores(ql, k))
	p, err := pinv(a2)
	if err != nil {
		return nil, err
	}
	return matmul(matmul(a1, p), matmul(a3, v)), nil
}

// RelErr returns ‖a − b‖_F / ‖b‖_F (0 when both are zero).
func RelErr(a, b [][]float64) float64 {
	var num, den float64
	for i := range b {
		for j := range b[i] {
			d := a[i][j] - b[i][j]
			num += d * d
			den += b[i][j] * b[i][j]
		}
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

func scores(q, k [][]float64) [][]float64 {
	s := 1 / math.Sqrt(float64(len(q[0])))
	out := matmul(q, transpose(k))
	for i := range out {
		for j := range out[i] {
			out[i][j] *= s
		}
	}
	return out
}

func softmaxRows(x [][]float64) [][]float64 {
	for _, r := range x {
		m := math.Inf(-1)
		for _, z := range r {
			m = math.Max(m, z)
		}
		var sum float64
		for j := range r {
			r[j] = math.Exp(r[j] - m)
			sum += r[j]
		}
		for j := range r {
			r[j] /= sum
		}
	}
	return x
}

// segmentMeans averages x's rows over m contiguous segments whose sizes differ by at most one.
func segmentMeans(x [][]float64, m int) [][]float64 {
	out := make([][]float64, m)
	n := len(x)
	for s := 0; s < m; s++ {
		lo, hi := s*n/m, (s+1)*n/m
		out[s] = make([]float64, len(x[0]))
		for i := lo; i < hi; i++ {
			axpy(out[s], 1/float64(hi-lo), x[i])
		}
	}
	return out
}

// pinv is the Moore-Penrose pseudo-inverse through the SVD, singular values below
// max(rows, cols)·ε·σ_max dropped (numpy's rule).
func pinv(a [][]float64) ([][]float64, error) {
	r, c := len(a), len(a[0])
	m := mat.NewDense(r, c, nil)
	for i := range a {
		m.SetRow(i, a[i])
	}
	var svd mat.SVD
	if !svd.Factorize(m, mat.SVDThin) {
		return nil, fmt.Errorf("nystrom: the SVD of the %d×%d landmark kernel did not converge", r, c)
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	sv := svd.Values(nil)
	tol := float64(max(r, c)) * 2.220446049250313e-16 * sv[0]
	out := make([][]float64, c)
	for i := range out {
		out[i] = make([]float64, r)
		for j := range out[i] {
			var s float64
			for t, x := range sv {
				if x > tol {
					s += v.At(i, t) * u.At(j, t) / x
				}
			}
			out[i][j] = s
		}
	}
	return out, nil
}

func gaussian(r, c int, sd float64, rng *rand.Rand) [][]float64 {
	out := make([][]float64, r)
	for i := range out {
		out[i] = make([]float64, c)
		for j := range out[i] {
			out[i][j] = rng.NormFloat64() * sd
		}
	}
	return out
}

func matmul(a, b [][]float64) [][]float64 {
	out := make([][]float64, len(a))
	for i, ai := range a {
		out[i] = make([]float64, len(b[0]))
		for t, x := range ai {
			if x != 0 {
				axpy(out[i], x, b[t])
			}
		}
	}
	return out
}

func transpose(a [][]float64) [][]float64 {
	out := make([][]float64, len(a[0]))
	for j := range out {
		out[j] = make([]float64, len(a))
		for i := range a {
			out[j][i] = a[i][j]
		}
	}
	return out
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(y []float64, a float64, x []float64) {
	for i := range y {
		y[i] += a * x[i]
	}
}
