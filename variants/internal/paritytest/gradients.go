package paritytest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// GradRtol and GradAtol bound each parameter's gradient against PyTorch autograd's: the
// largest |zoo − pytorch| over the parameter's elements must be at most GradRtol times the
// largest |pytorch| element of that parameter plus GradAtol (a relative rule per tensor, so
// that single elements whose gradient is nearly zero do not demand digits float32 does not
// have; GradAtol only admits gradients that are zero in exact arithmetic, such as the key
// bias's, which the softmax cancels: both sides then hold rounding noise near 1e-10). The loss
// must agree within GradRtol relative.
const (
	GradRtol = 1e-5
	GradAtol = 1e-8
)

// CheckGradients builds the training graph of g (autodiff.WithCrossEntropy with the
// fixture's label smoothing and ignore index, then autodiff.Gradients over every parameter),
// runs the fixture's batch and targets on the CPU backend at 1 and MaxThreads threads and once
// with the parameters fed as inputs (autodiff.LiftParams), and
// compares the loss and every parameter's gradient with the fixture's (written by
// zoofixtures.generate_grads): every parameter must have a gradient in the fixture and every
// gradient in the fixture must belong to a parameter.
//
// rtol replaces GradRtol for the gradients where it is positive (Suite.GradRtol says when).
func CheckGradients(t testing.TB, g *graph.Graph, f *Fixture, rtol float64) {
	t.Helper()
	if rtol <= 0 {
		rtol = GradRtol
	}
	smoothing, err := strconv.ParseFloat(f.Meta["label_smoothing"], 32)
	if err != nil {
		t.Fatalf("fixture %s: bad label_smoothing metadata: %v", f.Name, err)
	}
	ignore, err := strconv.ParseInt(f.Meta["ignore_index"], 10, 64)
	if err != nil {
		t.Fatalf("fixture %s: bad ignore_index metadata: %v", f.Name, err)
	}
	lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{LabelSmoothing: float32(smoothing), IgnoreIndex: ignore})
	if err != nil {
		t.Fatal(err)
	}
	train, grads, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*tensor.Tensor{}
	for _, nt := range f.Tensors {
		if len(nt.Name) > 5 && nt.Name[:5] == "grad." {
			want[nt.Name[5:]] = nt.Tensor
		}
	}
	for p := range grads {
		if want[p] == nil {
			t.Errorf("parameter %s has no gradient in the fixture (regenerate with %s)", p, f.Regenerate)
		}
	}
	for p := range want {
		if _, ok := grads[p]; !ok {
			t.Errorf("the fixture has a gradient for %s, which is not a parameter of zoo's graph", p)
		}
	}
	cpu, ok := backends.Lookup("cpu")
	if !ok {
		t.Fatal("cpu backend not registered")
	}
	feeds := map[string]*tensor.Tensor{nn.InputTokens: f.Get(t, "tokens"), nn.InputKeyPadding: f.Get(t, "key_padding_mask"), autodiff.InputTargets: f.Get(t, "targets")}
	lifted, err := autodiff.LiftParams(train, autodiff.Params(g))
	if err != nil {
		t.Fatal(err)
	}
	liftedFeeds := map[string]*tensor.Tensor{}
	for k, v := range feeds {
		liftedFeeds[k] = v
	}
	for _, p := range autodiff.Params(g) {
		liftedFeeds[p] = g.Initializer(p)
	}
	for _, run := range []struct {
		what    string
		g       *graph.Graph
		threads int
		feeds   map[string]*tensor.Tensor
	}{{"threads 1", train, 1, feeds}, {fmt.Sprintf("threads %d", MaxThreads), train, MaxThreads, feeds}, {"parameters as inputs", lifted, 1, liftedFeeds}} {
		threads := run.what
		prog, err := cpu.Compile(run.g, backends.Options{Threads: run.threads})
		if err != nil {
			t.Fatal(err)
		}
		out, err := prog.Run(context.Background(), run.feeds)
		prog.Close()
		if err != nil {
			t.Fatal(err)
		}
		gotLoss, wantLoss := float64(out[autodiff.OutputLoss].F32[0]), float64(f.Get(t, "loss").F32[0])
		if d := math.Abs(gotLoss - wantLoss); !(d <= GradRtol*math.Abs(wantLoss)) {
			t.Errorf("%s: loss %.8g, PyTorch %.8g", threads, gotLoss, wantLoss)
		}
		worst, worstName := 0.0, ""
		for p, name := range grads {
			w := want[p]
			if w == nil {
				continue
			}
			got := out[name]
			if got == nil || !tensor.SameShape(got.Shape, w.Shape) {
				t.Errorf("%s: gradient of %s is %v, want shape %v", threads, p, got, w.Shape)
				continue
			}
			diff, scale, at := 0.0, 0.0, 0
			for k, v := range w.F32 {
				scale = math.Max(scale, math.Abs(float64(v)))
				d := math.Abs(float64(got.F32[k]) - float64(v))
				if math.IsNaN(d) {
					d = math.Inf(1)
				}
				if d > diff {
					diff, at = d, k
				}
			}
			rel := diff / math.Max(scale, math.SmallestNonzeroFloat32)
			if !(diff <= rtol*scale+GradAtol) {
				t.Errorf("%s: gradient of %s differs from PyTorch's by %.3g at element %d (%.3g of its largest |element| %.3g; rtol %g, atol %g)", threads, p, diff, at, rel, scale, rtol, GradAtol)
			}
			if rel > worst && diff > GradAtol {
				worst, worstName = rel, p
			}
		}
		t.Logf("%s: loss %.8g (PyTorch %.8g); largest relative gradient difference above atol %.3g (%s)", threads, gotLoss, wantLoss, worst, worstName)
	}
}

// RunGradients runs CheckGradients on each named gradient fixture (testdata/<name>.safetensors,
// written by the variant's gen_fixtures.py through zoofixtures.generate_grads).
func (s Suite) RunGradients(t *testing.T, fixtures ...string) {
	t.Helper()
	if len(fixtures) == 0 {
		t.Fatal("paritytest: no gradient fixtures")
	}
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			f := s.Load(t, name)
			CheckGradients(t, s.Build(t, f), f, s.GradRtol)
		})
	}
}
