package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func evalJSON(t *testing.T, args ...string) evalReport {
	t.Helper()
	code, out, errs := zoo(t, append([]string{"eval"}, append(args, "--json")...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var rep evalReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return rep
}

// TestEvalMatchesTorch scores PyTorch-initialised weights with clm and label smoothing and
// compares with F.cross_entropy on the seed's causal module (testdata/gen_weights.py).
func TestEvalMatchesTorch(t *testing.T) {
	rep := evalJSON(t, "vanilla.tiny", "--set", "max_len=64", "--weights", "testdata/torch_tiny_f64.safetensors",
		"--input", text, "--objective", "clm", "--window", "37", "--label-smoothing", "0.1", "--batch", "5")
	want := readST(t, "testdata/eval_clm.safetensors")
	loss := float64(want["loss"].F32[0])
	nll := float64(want["nll_sum"].F32[0])
	if rep.Tokens != int(want["tokens"].I64[0]) || rep.Windows != 16 {
		t.Fatalf("%d tokens in %d windows, torch %d in 16", rep.Tokens, rep.Windows, want["tokens"].I64[0])
	}
	if rel := math.Abs(rep.Loss-loss) / loss; rel > 1e-5 {
		t.Errorf("loss %.7f, torch %.7f (rel %.2g)", rep.Loss, loss, rel)
	}
	bpb := nll / math.Ln2 / float64(rep.Tokens)
	if rel := math.Abs(rep.BitsPerByte-bpb) / bpb; rel > 1e-5 {
		t.Errorf("bits per byte %.7f, torch %.7f", rep.BitsPerByte, bpb)
	}
	if ppl := math.Exp(nll / float64(rep.Tokens)); math.Abs(rep.Perplexity-ppl)/ppl > 1e-4 {
		t.Errorf("perplexity %.5f, torch %.5f", rep.Perplexity, ppl)
	}
	if acc := float64(want["correct"].I64[0]) / float64(rep.Tokens); rep.Accuracy != acc {
		t.Errorf("accuracy %v, torch %v", rep.Accuracy, acc)
	}
	if rep.Weights.Source != "trained" || rep.Objective != "clm" || rep.LabelSmoothing != 0.1 {
		t.Errorf("report %+v", rep)
	}
}

func TestEvalMLM(t *testing.T) {
	a := evalJSON(t, "vanilla.tiny", "--input", text, "--window", "100")
	// 592 bytes: 5 windows of 100 and one of 92; 15 of each hundred and round(13.8) = 14
	if a.Objective != "mlm" || a.Tokens != 5*15+14 || a.Weights.Source != "random" {
		t.Errorf("report %+v: want mlm over 89 tokens with random weights", a)
	}
	// The same seed masks the same positions (at any batch size); another seed masks others.
	b := evalJSON(t, "vanilla.tiny", "--input", text, "--window", "100", "--batch", "2")
	c := evalJSON(t, "vanilla.tiny", "--input", text, "--window", "100", "--seed", "1")
	if a.Loss != b.Loss {
		t.Errorf("batch size changed the loss: %v vs %v", a.Loss, b.Loss)
	}
	if a.Loss == c.Loss {
		t.Errorf("another seed gave the same loss %v", a.Loss)
	}
	// Random weights of a 257-way classifier: about ln 257 = 5.55 nats, 8 bits per byte.
	if a.Loss < 4 || a.Loss > 8 || math.Abs(a.BitsPerByte-a.Loss/math.Ln2) > 1e-9 {
		t.Errorf("loss %v, bits per byte %v", a.Loss, a.BitsPerByte)
	}
	code, out, _ := zoo(t, "eval", "vanilla.tiny", "--input", text)
	for _, want := range []string{"weights        random (seed 0)", "bits per byte  ", "perplexity     ", "mlm, 89 tokens scored"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"linformer.tiny", "--input", text, "--objective", "clm"}, "causal=true is not possible"},
		{[]string{"nystrom.tiny", "--input", text, "--objective", "clm"}, "causal=true is not possible"},
		{[]string{"vanilla.tiny", "--input", text, "--objective", "clm", "--set", "causal=false"}, "needs causal=true"},
		{[]string{"vanilla.tiny", "--input", text, "--objective", "xlm"}, "want mlm or clm"},
		{[]string{"vanilla.tiny", "--input", text, "--label-smoothing", "1.5"}, "--label-smoothing must be in [0, 1]"},
		{[]string{"vanilla.tiny", "--input", text, "--objective", "clm", "--window", "1"}, "no token has a target"},
		{[]string{"vanilla.tiny", "--input", "nonexistent.txt"}, "no such file"},
		{[]string{"vanilla.tiny", "--input", text, "--weights", "testdata/torch_tiny_f64.safetensors"}, "misshaped tensor pos_encoding.pe"},
	} {
		code, _, errs := zoo(t, append([]string{"eval"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestEvalTakesCheckpointSettings: weights that zoo train wrote are scored as the run scored
// its held-out text: without --window, --objective or --seed, eval takes the run's (window 24,
// not the default min(512, max_len); clm, which builds the variant causal) and gives the
// run's own final held-out loss; a flag given wins.
func TestEvalTakesCheckpointSettings(t *testing.T) {
	dir := t.TempDir()
	for _, obj := range []string{"mlm", "clm"} {
		t.Run(obj, func(t *testing.T) {
			out := filepath.Join(dir, obj+".safetensors")
			code, stdout, stderr := zoo(t, trainArgs("--steps", "2", "--objective", obj, "--seed", "3", "--eval", text, "-o", out, "--json")...)
			if code != 0 {
				t.Fatalf("train: exit %d: %s", code, stderr)
			}
			var tr trainReport
			if err := json.Unmarshal([]byte(stdout), &tr); err != nil || tr.EvalLoss == nil {
				t.Fatalf("train report %q: %v", stdout, err)
			}
			rep := evalJSON(t, "vanilla.tiny", "--weights", out, "--input", text)
			if rep.Window != 24 || rep.Objective != obj || rep.Loss != *tr.EvalLoss {
				t.Errorf("eval: window %d, %s, loss %v; want the run's window 24, %s and its held-out loss %v", rep.Window, rep.Objective, rep.Loss, obj, *tr.EvalLoss)
			}
			want := "[--window --objective --seed]"
			if obj == "clm" {
				want = "[--window --objective]" // clm draws no masks
			}
			if fmt.Sprint(rep.FromCheckpoint) != want {
				t.Errorf("from_checkpoint %v, want %s", rep.FromCheckpoint, want)
			}
			if other := evalJSON(t, "vanilla.tiny", "--weights", out, "--input", text, "--window", "37"); other.Window != 37 || slices.Contains(other.FromCheckpoint, "--window") {
				t.Errorf("--window 37 given: window %d, from the checkpoint %v", other.Window, other.FromCheckpoint)
			}
			code, text, _ := zoo(t, "eval", "vanilla.tiny", "--weights", out, "--input", text)
			if code != 0 || !strings.Contains(text, "settings       --window 24, --objective "+obj) {
				t.Errorf("the text report does not say which settings came from the checkpoint:\n%s", text)
			}
		})
	}
}
