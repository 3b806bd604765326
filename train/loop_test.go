package train

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/zoo-dev/zoo/zoo/optim"
)

// fakeEngine's loss is 1/k at step k, NaN from step nan on, and its gradient 0.1 for every
// parameter.
type fakeEngine struct{ nan int }

func (e fakeEngine) step(_ context.Context, k int, _, grads []float32) (float64, int, error) {
	for i := range grads {
		grads[i] = 0.1
	}
	if e.nan > 0 && k >= e.nan {
		return math.NaN(), 4, nil
	}
	return 1 / float64(k), 4, nil
}

func (fakeEngine) eval(context.Context, []float32) (float64, float64, error) { return 2, 3, nil }

// fakeTrainer is a Trainer of two parameters on eng, without a model or checkpoints.
func fakeTrainer(t *testing.T, eng trainEngine, cfg Config) *Trainer {
	t.Helper()
	layout, err := optim.NewLayout([]string{"w"}, [][]int{{2}})
	if err != nil {
		t.Fatal(err)
	}
	par := parallelFor(1)
	opt, err := optim.New(cfg.hyper(), layout, par)
	if err != nil {
		t.Fatal(err)
	}
	return &Trainer{cfg: cfg, eng: eng, opt: opt, par: par, params: make([]float32, 2), grads: make([]float32, 2),
		lastSaved: -1, data: Data{Train: Text([]byte("x"))}}
}

// TestRunCallsHooks: each step reaches every hook, in order, with its loss, learning rate
// and tokens; the Result adds them up.
func TestRunCallsHooks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps, cfg.Schedule = 3, optim.Constant
	tr := fakeTrainer(t, fakeEngine{}, cfg)
	var order []int
	tr.OnStep(func(s Step) error { order = append(order, s.Step); return nil })
	tr.OnStep(func(s Step) error { order = append(order, -s.Step); return nil })
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 6 || order[0] != 1 || order[1] != -1 || order[5] != -3 {
		t.Errorf("hooks saw %v", order)
	}
	if res.Step != 3 || res.Tokens != 12 || len(res.History) != 3 || res.History[1].Loss != 0.5 || res.History[2].LR != cfg.LR || res.Saved != -1 {
		t.Errorf("result %+v", res)
	}
	if tr.params[0] == 0 {
		t.Error("the optimizer did not step")
	}
}

// TestRunDiverges: a NaN loss ends the run at that step with a *DivergedError that names the
// parameter, and the step's update is not applied.
func TestRunDiverges(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps = 5
	tr := fakeTrainer(t, fakeEngine{nan: 3}, cfg)
	res, err := tr.Run(context.Background())
	var d *DivergedError
	if !errors.As(err, &d) || d.Step != 3 || d.What != "loss" || d.Param != "w" || res.Step != 2 || tr.Step() != 2 {
		t.Fatalf("%v (%+v), result %+v", err, d, res)
	}
	want := "training diverged at step 3: the loss is NaN; the largest gradient is w's (norm 0.1414); nothing was saved (no checkpoint had been written yet; Config.SaveEvery N writes one every N steps)"
	if err.Error() != want {
		t.Errorf("message %q\nwant    %q", err, want)
	}
}

// TestRunStops: a context that ends after step 2 stops the run there with a *StoppedError
// that unwraps to the cause; a run that writes no checkpoint says nothing was saved. A second
// Run continues from step 2.
func TestRunStops(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps = 5
	tr := fakeTrainer(t, fakeEngine{}, cfg)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("interrupted")
	tr.OnStep(func(s Step) error {
		if s.Step == 2 {
			cancel(cause)
		}
		return nil
	})
	_, err := tr.Run(ctx)
	var stop *StoppedError
	if !errors.As(err, &stop) || stop.Step != 2 || stop.Saved || !errors.Is(err, cause) {
		t.Fatalf("%v (%+v)", err, stop)
	}
	res, err := tr.Run(context.Background())
	if err != nil || res.StartStep != 2 || res.Step != 5 || len(res.History) != 3 {
		t.Fatalf("continued: %+v, %v", res, err)
	}
}

// TestRunHookError: a hook's error ends the run and is returned as it is.
func TestRunHookError(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps = 5
	tr := fakeTrainer(t, fakeEngine{}, cfg)
	boom := errors.New("--log: disk full")
	tr.OnStep(func(Step) error { return boom })
	if _, err := tr.Run(context.Background()); err != boom {
		t.Fatalf("%v, want the hook's error", err)
	}
}
