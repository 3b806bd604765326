package train_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/train"
	"github.com/zoo-dev/zoo/zoo/optim"
	"github.com/zoo-dev/zoo/zoo/variant"
)

const corpus = "../examples/corpus/kjv-ruth.txt"

// TestEvalHook: clm turns causal on, and names a variant that has no causal hyperparameter
// and a Set that turns it off; mlm leaves the config alone.
func TestEvalHook(t *testing.T) {
	with := variant.Description{Name: "v", Params: []variant.Param{{Name: "causal", Kind: variant.KindBool, Default: false}}}
	without := variant.Description{Name: "w"}
	for _, tc := range []struct {
		d      variant.Description
		obj    string
		set    map[string]string
		causal any
		err    string
	}{
		{with, train.CLM, nil, true, ""},
		{without, train.CLM, nil, false, "w has no causal hyperparameter, which EvalConfig.Objective clm needs"},
		{with, train.CLM, map[string]string{"causal": "false"}, false, "EvalConfig.Objective clm needs causal=true; drop LoadOptions.Set causal=false"},
		{without, train.MLM, nil, false, ""},
	} {
		cfg := variant.Config{"causal": false}
		err := train.EvalHook(tc.obj, tc.set)(tc.d, cfg)
		if (err == nil) != (tc.err == "") || (err != nil && (!strings.Contains(err.Error(), tc.err) || !zoo.IsInput(err))) || cfg["causal"] != tc.causal {
			t.Errorf("%s on %s with %v: %v, config %v; want %q and causal %v", tc.obj, tc.d.Name, tc.set, err, cfg, tc.err, tc.causal)
		}
	}
}

// TestLoadCLM: Load turns causal on for clm, refuses a variant that cannot hide later
// positions and an .onnx file, and New refuses clm on a model that is not causal.
func TestLoadCLM(t *testing.T) {
	ctx := context.Background()
	m, err := train.Load(ctx, "vanilla.tiny", train.CLM, zoo.LoadOptions{})
	if err != nil || !m.Config().Bool("causal") {
		t.Fatalf("clm build: %v", err)
	}
	m.Close()
	_, err = train.Load(ctx, "vanilla.tiny", train.CLM, zoo.LoadOptions{Set: map[string]string{"causal": "false"}})
	if err == nil || !strings.Contains(err.Error(), "Config.Objective clm needs causal=true; drop LoadOptions.Set causal=false") {
		t.Errorf("causal=false: %v", err)
	}
	if _, err := train.Load(ctx, "model.onnx", train.MLM, zoo.LoadOptions{}); !zoo.IsInput(err) {
		t.Errorf("an .onnx file: %v", err)
	}
	mlm, err := train.Load(ctx, "vanilla.tiny", train.MLM, zoo.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mlm.Close()
	cfg := train.DefaultConfig()
	cfg.Objective = train.CLM
	if _, err := train.New(ctx, mlm, train.Data{Train: train.File(corpus)}, cfg); !zoo.IsInput(err) || !strings.Contains(err.Error(), "causal=true") {
		t.Errorf("clm on a model built without causal: %v", err)
	}
}

// TestNewBadData: missing text is an input error naming the option or the source's name.
func TestNewBadData(t *testing.T) {
	ctx := context.Background()
	m, err := train.Load(ctx, "vanilla.tiny", train.MLM, zoo.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := train.DefaultConfig()
	for _, tc := range []struct {
		data train.Data
		cfg  func(*train.Config)
		want string
	}{
		{train.Data{}, nil, "Data.Train is required"},
		{train.Data{Train: train.File("no-such.txt")}, nil, "Data.Train no-such.txt: no such file"},
		{train.Data{Train: train.File(corpus), Held: train.TextSource{Name: "held", Path: "."}}, nil, "held . is a directory"},
		{train.Data{Train: train.File(corpus)}, func(c *train.Config) { c.EvalEvery = 2 }, "Config.EvalEvery needs Data.Held"},
		{train.Data{Train: train.File(corpus)}, func(c *train.Config) { c.Window = 100000 }, "Config.Window 100000 is longer than vanilla.tiny's maximum length"},
	} {
		c := cfg
		if tc.cfg != nil {
			tc.cfg(&c)
		}
		_, err := train.New(ctx, m, tc.data, c)
		if !zoo.IsInput(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an input error with %q", tc.data, err, tc.want)
		}
	}
}

// TestResumeBitExact trains four steps straight through, and two, then two more resumed
// from the checkpoint (ReadCheckpoint, Continue): every step's loss and the final weights
// are bitwise equal, the held-out evaluation included.
func TestResumeBitExact(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := train.DefaultConfig()
	cfg.Steps, cfg.Batch, cfg.Window, cfg.LR, cfg.Schedule, cfg.Shuffle, cfg.Seed = 4, 2, 24, 1e-3, optim.Constant, true, 3
	data := train.Data{Train: train.File(corpus), Held: train.TextSource{Path: corpus, Size: 200}}
	run := func(cfg train.Config, set map[string]string) ([]train.Step, *zoo.Model) {
		t.Helper()
		m, err := train.Load(ctx, "vanilla.tiny", cfg.Objective, zoo.LoadOptions{Seed: cfg.Seed, Set: set})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(ctx, m, data, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		res, err := tr.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.History, m
	}
	set := map[string]string{"layers": "1"}
	straight, a := run(cfg, set)

	first := cfg
	first.Steps, first.Output = 2, filepath.Join(dir, "b.safetensors")
	half, _ := run(first, set)
	ck, err := train.ReadCheckpoint(first.Output)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Step != 2 || ck.Model != "vanilla.tiny" || ck.Set["layers"] != "1" || ck.Config.LR != cfg.LR || !ck.Config.Shuffle {
		t.Fatalf("checkpoint %+v", ck)
	}
	more := train.DefaultConfig()
	more.Steps, more.Output = 4, first.Output
	more, err = ck.Continue(more, func(o string) bool { return o == "Config.Steps" })
	if err != nil {
		t.Fatal(err)
	}
	rest, b := run(more, ck.Set)

	losses := func(h []train.Step) (out []uint64) {
		for _, s := range h {
			out = append(out, math.Float64bits(s.Loss), math.Float64bits(s.EvalLoss))
		}
		return out
	}
	got, want := losses(append(half, rest...)), losses(straight)
	// The straight run evaluates before step 1 and after step 4; the halves also after step 2.
	if len(got) != len(want)+2 {
		t.Fatalf("%d values resumed, %d straight", len(got), len(want))
	}
	got = append(got[:6], got[8:]...)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: %x resumed, %x straight", i, got[i], want[i])
		}
	}
	sa, sb := a.Graph().StateDict(), b.Graph().StateDict()
	for name, x := range sa {
		y := sb[name]
		for i := range x.F32 {
			if math.Float32bits(x.F32[i]) != math.Float32bits(y.F32[i]) {
				t.Fatalf("%s[%d]: %v straight, %v resumed", name, i, x.F32[i], y.F32[i])
			}
		}
	}

	// A resumed run must keep its settings.
	changed := more
	changed.LR = 2e-3
	m, err := train.Load(ctx, "vanilla.tiny", train.MLM, zoo.LoadOptions{Set: ck.Set})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var ie *zoo.InputError
	if _, err := train.New(ctx, m, data, changed); !errors.As(err, &ie) || ie.Option != "Config.LR" {
		t.Errorf("a changed learning rate: %v", err)
	}

	// Another variant, or the same with another config, is refused whatever the shapes
	// (linear.tiny's parameters have vanilla.tiny's names and shapes).
	for _, tc := range []struct {
		ref  string
		set  map[string]string
		want string
	}{
		{"linear.tiny", ck.Set, "is a run of vanilla.tiny, not linear.tiny"},
		{"vanilla.tiny", map[string]string{"layers": "1", "dropout": "0.2"}, "is a run of vanilla.tiny with dropout=0.1, not vanilla.tiny with dropout=0.2"},
	} {
		other, err := train.Load(ctx, tc.ref, train.MLM, zoo.LoadOptions{Set: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		_, err = train.New(ctx, other, data, more)
		other.Close()
		if !errors.As(err, &ie) || ie.Option != "Config.Resume" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v; want an input error naming Config.Resume: %s", tc.ref, tc.set, err, tc.want)
		}
	}
}

// TestEvaluate scores the tiny encoder's seed weights on a text: about ln 257 nats per
// token, and bits per byte that are that loss in bits (one token per byte).
func TestEvaluate(t *testing.T) {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := train.Evaluate(ctx, m, train.File(corpus), train.EvalConfig{Objective: train.MLM, Window: 128, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.Window != 128 || r.Tokens == 0 || math.Abs(r.Loss-math.Log(257)) > 1.5 || math.Abs(r.BitsPerByte-r.Loss/math.Ln2) > 1e-9 {
		t.Errorf("%+v", r)
	}
	_, err = train.Evaluate(ctx, m, train.File(corpus), train.EvalConfig{Objective: train.CLM, Batch: 4})
	if !zoo.IsInput(err) || !strings.Contains(err.Error(), "EvalConfig.Objective clm needs") {
		t.Errorf("clm on a model built without causal: %v", err)
	}
}
