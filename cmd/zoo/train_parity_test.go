package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// seedTrainingFixture is testdata/train/seed_training.safetensors, written by
// testdata/train/gen_seed_training.py: torch.optim training the seed's module for five steps
// on zoo's batches.
const seedTrainingFixture = "testdata/train/seed_training.safetensors"

// TestSeedTrainingParity runs zoo train with the fixture's settings and compares every step's
// loss and gradient norm and the weights after the last step with PyTorch's: AdamW with
// warm-up, weight decay, label smoothing and clipping, and SGD with momentum and weight decay.
func TestSeedTrainingParity(t *testing.T) {
	data, err := os.ReadFile(seedTrainingFixture)
	if err != nil {
		t.Fatal(err)
	}
	list, meta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	fx := map[string]*tensor.Tensor{}
	for _, nt := range list {
		fx[nt.Name] = nt.Tensor
	}
	var sets map[string]any
	var dataCfg struct {
		Input     string `json:"input"`
		Window    int    `json:"window"`
		Batch     int    `json:"batch"`
		Objective string `json:"objective"`
		Seed      uint64 `json:"seed"`
		Steps     int    `json:"steps"`
	}
	var cases map[string]struct {
		Optimizer      string    `json:"optimizer"`
		LR             float64   `json:"lr"`
		Betas          []float64 `json:"betas"`
		Eps            float64   `json:"eps"`
		WeightDecay    float64   `json:"weight_decay"`
		Momentum       float64   `json:"momentum"`
		Warmup         int       `json:"warmup"`
		Schedule       string    `json:"schedule"`
		LabelSmoothing float64   `json:"label_smoothing"`
		Clip           float64   `json:"clip"`
	}
	for key, dst := range map[string]any{"set": &sets, "data": &dataCfg, "cases": &cases} {
		if err := json.Unmarshal([]byte(meta[key]), dst); err != nil {
			t.Fatalf("fixture metadata %s: %v", key, err)
		}
	}
	if strconv.FormatUint(dataCfg.Seed, 10) != meta["seed"] {
		t.Fatalf("fixture masks with seed %d but initialises with %s; zoo train has one --seed", dataCfg.Seed, meta["seed"])
	}
	input := filepath.Join("..", "..", dataCfg.Input)

	// The fixture's batches are zoo's: the data pipeline has not changed since it was written.
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	windows, err := lmdata.ReadWindows(f, dataCfg.Window)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	loader, err := lmdata.NewLoader(windows, lmdata.ByteOptions(lmdata.Objective(dataCfg.Objective), dataCfg.Batch, dataCfg.Seed))
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= dataCfg.Steps; k++ {
		b, err := loader.Step(k)
		if err != nil {
			t.Fatal(err)
		}
		tok, want := fx[fmt.Sprintf("step%d.tokens", k)], fx[fmt.Sprintf("step%d.targets", k)]
		if tok == nil || want == nil || fmt.Sprint(tok.I64) != fmt.Sprint(b.Tokens) || fmt.Sprint(want.I64) != fmt.Sprint(b.Targets) {
			t.Fatalf("step %d: the fixture's batch is not the one zoo feeds now; regenerate it with %s", k, "testdata/train/gen_seed_training.py")
		}
	}

	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	base := []string{"train", "vanilla", "--seed", meta["seed"], "--input", input, "--window", strconv.Itoa(dataCfg.Window),
		"--batch", strconv.Itoa(dataCfg.Batch), "--objective", dataCfg.Objective, "--steps", strconv.Itoa(dataCfg.Steps)}
	for _, k := range keys {
		base = append(base, "--set", fmt.Sprintf("%s=%v", k, sets[k]))
	}
	if hasHyperparameter(t, "vanilla", "dropout") {
		base = append(base, "--set", "dropout=0") // the fixture trains with dropout off
	}
	f64 := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			out, logf := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "m.jsonl")
			args := append(append([]string(nil), base...), "--optimizer", c.Optimizer, "--lr", f64(c.LR),
				"--weight-decay", f64(c.WeightDecay), "--warmup", strconv.Itoa(c.Warmup), "--schedule", c.Schedule,
				"--label-smoothing", f64(c.LabelSmoothing), "--clip", f64(c.Clip), "-o", out, "--log", logf, "--threads", "1")
			if c.Optimizer == "adamw" {
				args = append(args, "--betas", f64(c.Betas[0])+","+f64(c.Betas[1]), "--eps", f64(c.Eps))
			} else {
				args = append(args, "--momentum", f64(c.Momentum))
			}
			if code, _, stderr := zoo(t, args...); code != 0 {
				t.Fatalf("zoo %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			}
			var worstLoss, worstNorm float64
			steps := 0
			for _, l := range readTrainLog(t, logf) {
				k := int(l["step"])
				wantLoss, wantNorm := float64(fx[name+".loss"].F32[k-1]), float64(fx[name+".grad_norm"].F32[k-1])
				dl, dn := math.Abs(l["loss"]-wantLoss)/math.Abs(wantLoss), math.Abs(l["grad_norm"]-wantNorm)/math.Abs(wantNorm)
				if dl > 1e-5 || dn > 1e-5 {
					t.Errorf("step %d: loss %.7g (torch %.7g), grad norm %.7g (torch %.7g)", k, l["loss"], wantLoss, l["grad_norm"], wantNorm)
				}
				worstLoss, worstNorm = max(worstLoss, dl), max(worstNorm, dn)
				steps++
			}
			if steps != dataCfg.Steps {
				t.Fatalf("logged %d steps, want %d", steps, dataCfg.Steps)
			}
			got := readStateDict(t, out)
			worstW, checked := 0.0, 0
			for fname, want := range fx {
				pname, ok := strings.CutPrefix(fname, name+".final.")
				if !ok {
					continue
				}
				if strings.HasSuffix(pname, ".W_K.bias") && c.Optimizer == "adamw" {
					// The key bias adds q·b to every score of a query's row, which the softmax
					// cancels: its gradient is exactly zero, and what either side computes is
					// rounding noise that AdamW's m/√v turns into ±lr steps of random sign.
					continue
				}
				g := got[pname]
				if len(g) != len(want.F32) {
					t.Fatalf("%s: %d values, torch %d", pname, len(g), len(want.F32))
				}
				for i, w := range want.F32 {
					d := math.Abs(float64(g[i]) - float64(w))
					if d > 1e-5*math.Max(1, math.Abs(float64(w))) {
						t.Fatalf("%s[%d] = %.8g after %d steps, torch %.8g", pname, i, g[i], steps, w)
					}
					worstW = max(worstW, d)
				}
				checked++
			}
			if checked == 0 {
				t.Fatal("the fixture holds no final weights")
			}
			t.Logf("%s, %d steps: largest relative loss difference %.2g, grad-norm %.2g; largest weight difference %.2g over %d tensors",
				name, steps, worstLoss, worstNorm, worstW, checked)
		})
	}
}

// hasHyperparameter reports whether the variant's schema has the named hyperparameter.
func hasHyperparameter(t *testing.T, variantName, param string) bool {
	t.Helper()
	code, stdout, stderr := zoo(t, "show", variantName, "--json")
	if code != 0 {
		t.Fatalf("zoo show %s: %s", variantName, stderr)
	}
	var res struct {
		Params []struct {
			Name string `json:"name"`
		} `json:"hyperparameters"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Params {
		if p.Name == param {
			return true
		}
	}
	return false
}
