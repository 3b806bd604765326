package optim

import (
	"fmt"
	"math"
)

// The optimizers zoo train offers.
const (
	AdamW = "adamw"
	SGD   = "sgd"
)

// Hyper holds an optimizer's hyperparameters (one torch.optim parameter group). The
// learning rate is not here: it changes every step and is passed to Step.
type Hyper struct {
	// Optimizer is AdamW or SGD.
	Optimizer string
	// WeightDecay: AdamW's decoupled decay (p -= lr·wd·p) or SGD's L2 term added to the
	// gradient (g += wd·p), as torch.optim does for each.
	WeightDecay float64
	// Beta1, Beta2 and Eps are AdamW's.
	Beta1, Beta2, Eps float64
	// Momentum is SGD's (0: plain SGD). Dampening is 0 and Nesterov off, torch's defaults.
	Momentum float64
}

// DefaultHyper returns zoo train's defaults (issue 18): AdamW, betas 0.9 and 0.999, eps
// 1e-8, weight decay 0.01.
func DefaultHyper() Hyper {
	return Hyper{Optimizer: AdamW, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Validate returns an error naming the first out-of-range hyperparameter, with the flag
// users set it by.
func (h Hyper) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case h.Optimizer != AdamW && h.Optimizer != SGD:
		return fmt.Errorf("--optimizer %q: want adamw or sgd", h.Optimizer)
	case !finite(h.WeightDecay) || h.WeightDecay < 0:
		return fmt.Errorf("--weight-decay must be a finite number ≥ 0, got %g", h.WeightDecay)
	}
	if h.Optimizer == AdamW {
		switch {
		case !finite(h.Beta1) || h.Beta1 < 0 || h.Beta1 >= 1, !finite(h.Beta2) || h.Beta2 < 0 || h.Beta2 >= 1:
			return fmt.Errorf("--betas %g,%g: each must be in [0, 1)", h.Beta1, h.Beta2)
		case !finite(h.Eps) || h.Eps <= 0:
			return fmt.Errorf("--eps must be a finite number > 0, got %g", h.Eps)
		case h.Momentum != 0:
			return fmt.Errorf("--momentum applies to --optimizer sgd; AdamW's momentum is --betas")
		}
		return nil
	}
	if !finite(h.Momentum) || h.Momentum < 0 || h.Momentum >= 1 {
		return fmt.Errorf("--momentum must be in [0, 1), got %g", h.Momentum)
	}
	return nil
}

// Optimizer updates a flat parameter buffer from a flat gradient buffer, keeping its
// moments in flat buffers of the same layout.
type Optimizer struct {
	hyper  Hyper
	layout *Layout
	par    ParallelFor
	step   int64
	// m is AdamW's exp_avg or SGD's momentum_buffer; v is AdamW's exp_avg_sq.
	m, v []float32
}

// New returns an optimizer at step 0 with zero moments. It returns an error for invalid
// hyperparameters.
func New(h Hyper, layout *Layout, par ParallelFor) (*Optimizer, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	o := &Optimizer{hyper: h, layout: layout, par: par}
	switch {
	case h.Optimizer == AdamW:
		o.m, o.v = make([]float32, layout.Size()), make([]float32, layout.Size())
	case h.Momentum != 0:
		o.m = make([]float32, layout.Size())
	}
	return o, nil
}

// Hyper returns the optimizer's hyperparameters.
func (o *Optimizer) Hyper() Hyper { return o.hyper }

// Layout returns the layout of the buffers the optimizer works on.
func (o *Optimizer) Layout() *Layout { return o.layout }

// StepCount is the number of steps taken (torch's state["step"]).
func (o *Optimizer) StepCount() int64 { return o.step }

// Step applies one update with learning rate lr to params from grads (both Layout().Size()
// long) and counts the step. It returns an error for buffers of the wrong length or a
// non-finite lr.
func (o *Optimizer) Step(params, grads []float32, lr float64) error {
	n := o.layout.Size()
	if len(params) != n || len(grads) != n {
		return fmt.Errorf("optim: step over %d parameters and %d gradients, want %d of each", len(params), len(grads), n)
	}
	if math.IsNaN(lr) || math.IsInf(lr, 0) {
		return fmt.Errorf("optim: learning rate %g", lr)
	}
	o.step++
	if o.hyper.Optimizer == AdamW {
		o.adamw(params, grads, lr)
	} else {
		o.sgd(params, grads, lr)
	}
	return nil
}

// adamw is torch.optim.AdamW's single-tensor step (torch 1.13, amsgrad off): the scalars are
// computed in float64 as Python does, then rounded to float32 as the tensor kernels take them.
func (o *Optimizer) adamw(params, grads []float32, lr float64) {
	h := o.hyper
	step := float64(o.step)
	decay := float32(1 - lr*h.WeightDecay)
	b1, omb1 := float32(h.Beta1), float32(1-h.Beta1)
	b2, omb2 := float32(h.Beta2), float32(1-h.Beta2)
	bc1 := 1 - math.Pow(h.Beta1, step)
	bc2 := 1 - math.Pow(h.Beta2, step)
	negStep := float32(-(lr / bc1))
	bc2Sqrt := float32(math.Sqrt(bc2))
	eps := float32(h.Eps)
	m, v := o.m, o.v
	o.par.run(len(params), grain, func(lo, hi int) {
		p, g, m, v := params[lo:hi], grads[lo:hi], m[lo:hi], v[lo:hi]
		for i := range p {
			x := p[i] * decay                                      // param.mul_(1 - lr*wd)
			mi := fma32(g[i], omb1, m[i]*b1)                       // exp_avg.mul_(b1).add_(g, alpha=1-b1)
			vi := v[i]*b2 + omb2*g[i]*g[i]                         // exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
			denom := float32(math.Sqrt(float64(vi)))/bc2Sqrt + eps // (v.sqrt() / bc2_sqrt).add_(eps)
			p[i], m[i], v[i] = x+negStep*mi/denom, mi, vi          // param.addcdiv_(m, denom, value=-lr/bc1)
		}
	})
}

// sgd is torch.optim.SGD's single-tensor step (dampening 0, no Nesterov): the first step
// copies the gradient into the momentum buffer, later ones compute buf·momentum + g.
func (o *Optimizer) sgd(params, grads []float32, lr float64) {
	h := o.hyper
	wd, mom, negLR := float32(h.WeightDecay), float32(h.Momentum), float32(-lr)
	first := o.step == 1
	buf := o.m
	o.par.run(len(params), grain, func(lo, hi int) {
		p, g := params[lo:hi], grads[lo:hi]
		var b []float32
		if buf != nil {
			b = buf[lo:hi]
		}
		for i := range p {
			d := g[i]
			if wd != 0 {
				d = fma32(wd, p[i], d) // d_p = d_p.add(param, alpha=wd)
			}
			if b != nil {
				if !first {
					d += b[i] * mom // buf.mul_(momentum).add_(d_p)
				}
				b[i] = d
			}
			p[i] = fma32(negLR, d, p[i]) // param.add_(d_p, alpha=-lr)
		}
	})
}

// GradNorm returns the Euclidean norm of grads (every parameter's gradient together, as
// clip_grad_norm_ with norm_type 2). Squares are summed in float64 per fixed block and the
// blocks in order, so the result does not depend on the thread count. A NaN or infinite
// gradient gives a NaN or infinite norm.
func GradNorm(grads []float32, par ParallelFor) float64 {
	nb := (len(grads) + block - 1) / block
	partial := make([]float64, nb)
	par.run(nb, max(1, grain/block), func(lo, hi int) {
		for b := lo; b < hi; b++ {
			var s float64
			for _, g := range grads[b*block : min(len(grads), (b+1)*block)] {
				s += float64(g) * float64(g)
			}
			partial[b] = s
		}
	})
	var s float64
	for _, p := range partial {
		s += p
	}
	return math.Sqrt(s)
}

// ClipCoef is clip_grad_norm_'s factor for a gradient of norm: min(1, maxNorm/(norm+1e-6)),
// in float32 as torch computes it on float32 gradients.
func ClipCoef(norm, maxNorm float64) float32 {
	c := float32(maxNorm) / (float32(norm) + float32(1e-6))
	return min(c, 1)
}

// ClipGradNorm scales grads in place so that their global norm is at most maxNorm
// (torch.nn.utils.clip_grad_norm_) and returns the norm before clipping. maxNorm ≤ 0 turns
// clipping off (the norm is still returned).
func ClipGradNorm(grads []float32, maxNorm float64, par ParallelFor) float64 {
	norm := GradNorm(grads, par)
	Clip(grads, norm, maxNorm, par)
	return norm
}

// Clip is the scaling half of ClipGradNorm, for a caller that has already taken the norm
// (and checked it): it multiplies grads by ClipCoef(norm, maxNorm) unless that is 1 or
// maxNorm ≤ 0.
func Clip(grads []float32, norm, maxNorm float64, par ParallelFor) {
	if maxNorm <= 0 {
		return
	}
	if c := ClipCoef(norm, maxNorm); c != 1 {
		par.run(len(grads), grain, func(lo, hi int) {
			for i := range grads[lo:hi] {
				grads[lo+i] *= c
			}
		})
	}
}

// LargestGrad names the parameter whose gradient has the largest norm; one holding a NaN or
// infinity counts as largest (the first such in layout order). It is the diagnostic of a
// diverged step, not a hot path.
func LargestGrad(l *Layout, grads []float32) (name string, norm float64) {
	best := -1.0
	for i := range l.Names {
		n := GradNorm(l.Slice(grads, i), nil)
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return l.Names[i], n
		}
		if n > best {
			best, name, norm = n, l.Names[i], n
		}
	}
	return name, norm
}

// fma32 is a·b + c rounded once, as ATen's vectorised add with alpha computes it
// (vec::fmadd). The float64 product of two float32 values is exact, so only the sum rounds
// twice (to float64, then float32), which matches a float32 FMA except in rare halfway cases.
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
