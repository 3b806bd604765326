package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// The BERT fixtures (testdata/bert, written by gen_bert.py with PyTorch 1.13).
const (
	bertDir       = "testdata/bert"
	bertText      = bertDir + "/text.txt"
	minilm        = "../../zoo/tokenize/testdata/minilm.tokenizer.json"
	bertTolerance = 1e-4
)

// runJSON is the part of `zoo run --output x.json` the tests read.
type runJSON struct {
	Model     string         `json:"model"`
	Tokenizer map[string]any `json:"tokenizer"`
	Lengths   []int          `json:"lengths"`
	Offsets   []int64        `json:"offsets"`
	Tokens    struct {
		Shape []int   `json:"shape"`
		Data  []int64 `json:"data"`
	} `json:"tokens"`
	Outputs map[string]struct {
		Shape []int     `json:"shape"`
		Data  []float32 `json:"data"`
	} `json:"outputs"`
}

type torchWindows struct {
	Windows []struct {
		IDs    []int64   `json:"ids"`
		Hidden []float32 `json:"last_hidden_state"`
		Pooler []float32 `json:"pooler_output"`
		Pooled []float32 `json:"embedding"`
	} `json:"windows"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// bertModelDir returns a folder holding the model and, when tok is set, the MiniLM
// tokenizer.json next to it (so that zoo finds it).
func bertModelDir(t *testing.T, model string, tok bool) string {
	t.Helper()
	dir := t.TempDir()
	for src, dst := range map[string]string{filepath.Join(bertDir, model): model, minilm: "tokenizer.json"} {
		if dst == "tokenizer.json" && !tok {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, model)
}

// TestRunBERTMatchesPyTorch runs the BERT exports (opset 17 and 14 with dynamic shapes, opset 17
// with static (2, 64)) on the text with the real MiniLM WordPiece tokenizer, found next to the
// model or given by --tokenizer, and compares the mean-pooled embedding, every window's ids and
// both outputs with PyTorch's.
func TestRunBERTMatchesPyTorch(t *testing.T) {
	var want torchWindows
	readJSON(t, filepath.Join(bertDir, "expected.json"), &want)
	for _, c := range []struct {
		model string
		found bool // the tokenizer lies next to the model
	}{{"bert-opset17.onnx", true}, {"bert-opset14.onnx", false}, {"bert-static.onnx", true}} {
		t.Run(c.model, func(t *testing.T) {
			path := bertModelDir(t, c.model, c.found)
			out := filepath.Join(t.TempDir(), "x.json")
			args := []string{"run", path, "--input", bertText, "--pool", "mean", "--output", out, "--json"}
			if !c.found {
				args = append(args, "--tokenizer", minilm)
			}
			code, stdout, errs := zoo(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep runout.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatal(err)
			}
			wantWhy := "--tokenizer"
			if c.found {
				wantWhy = "found next to the model"
			}
			if !strings.Contains(rep.Tokenizer, wantWhy) || !strings.Contains(rep.Tokenizer, "WordPiece") || rep.Window != 64 {
				t.Errorf("report: tokenizer %q, window %d; want %q, WordPiece, window 64 (the position table's rows)", rep.Tokenizer, rep.Window, wantWhy)
			}
			var got runJSON
			readJSON(t, out, &got)
			emb, pooler, hidden := got.Outputs["embedding"], got.Outputs["pooler_output"], got.Outputs["last_hidden_state"]
			windows, n, d := len(want.Windows), got.Tokens.Shape[1], 32
			if !slices.Equal(emb.Shape, []int{windows, d}) || !slices.Equal(pooler.Shape, []int{windows, d}) || !slices.Equal(hidden.Shape, []int{windows, n, d}) || n != 64 {
				t.Fatalf("shapes: embedding %v, pooler_output %v, last_hidden_state %v, tokens %v; want (%d, %d), (%d, %d), (%d, 64, %d)",
					emb.Shape, pooler.Shape, hidden.Shape, got.Tokens.Shape, windows, d, windows, d, windows, d)
			}
			if got.Tokenizer["kind"] != "tokenizer.json WordPiece" || got.Offsets[1] != 62 {
				t.Errorf("tokenizer %v, offsets %v", got.Tokenizer, got.Offsets)
			}
			for i, w := range want.Windows {
				l := len(w.IDs)
				if got.Lengths[i] != l || !slices.Equal(got.Tokens.Data[i*n:i*n+l], w.IDs) {
					t.Fatalf("window %d: ids %v, want Hugging Face's %v", i, got.Tokens.Data[i*n:i*n+got.Lengths[i]], w.IDs)
				}
				for name, pair := range map[string][2][]float32{
					"embedding":         {emb.Data[i*d : (i+1)*d], w.Pooled},
					"pooler_output":     {pooler.Data[i*d : (i+1)*d], w.Pooler},
					"last_hidden_state": {hidden.Data[i*n*d : (i*n+l)*d], w.Hidden},
				} {
					if e := maxDiff(pair[0], pair[1]); e > bertTolerance {
						t.Errorf("window %d: %s differs from PyTorch by %.3g (> %g)", i, name, e, bertTolerance)
					}
				}
			}
		})
	}
}

// TestParityBERT: zoo parity passes on every fixture, on the sample text and on the text file.
func TestParityBERT(t *testing.T) {
	needORT(t)
	for _, model := range []string{"bert-opset17.onnx", "bert-opset14.onnx", "bert-static.onnx", "bytes-int32.onnx"} {
		for _, extra := range [][]string{nil, {"--input", bertText}} {
			args := append([]string{"parity", filepath.Join(bertDir, model)}, extra...)
			if strings.HasPrefix(model, "bert") {
				args = append(args, "--tokenizer", minilm)
			}
			code, out, errs := zoo(t, args...)
			if code != 0 || !strings.Contains(out, "PASSED | All outputs matched") {
				t.Errorf("%v: exit %d, stderr %q\n%s", args, code, errs, out)
			}
		}
	}
}

// TestRunRolesInt32BoolPositions runs a model with int32 ids, a bool padding mask and int32
// position ids as inputs, on the byte tokenizer (no tokenizer next to it), against PyTorch.
func TestRunRolesInt32BoolPositions(t *testing.T) {
	var want torchWindows
	readJSON(t, filepath.Join(bertDir, "bytes-expected.json"), &want)
	out := filepath.Join(t.TempDir(), "x.json")
	code, stdout, errs := zoo(t, "run", bertModelDir(t, "bytes-int32.onnx", false), "--input", bertText, "--pool", "mean", "--output", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep runout.Report
	json.Unmarshal([]byte(stdout), &rep)
	roles := map[string]zooroot.Role{}
	for _, f := range rep.Feeds {
		roles[f.Name] = f.Role
	}
	if !strings.Contains(rep.Tokenizer, "byte tokenizer") || roles["input_ids"] != zooroot.RoleIDs || roles["key_padding_mask"] != zooroot.RolePadding || roles["position_ids"] != zooroot.RolePositions {
		t.Errorf("report: tokenizer %q, feeds %v", rep.Tokenizer, rep.Feeds)
	}
	var got runJSON
	readJSON(t, out, &got)
	emb, d := got.Outputs["embedding"], 16
	if len(emb.Data) != len(want.Windows)*d {
		t.Fatalf("embedding %v, want (%d, %d)", emb.Shape, len(want.Windows), d)
	}
	for i, w := range want.Windows {
		if e := maxDiff(emb.Data[i*d:(i+1)*d], w.Pooled); e > bertTolerance {
			t.Errorf("window %d: embedding differs from PyTorch by %.3g", i, e)
		}
	}
}

// TestRunSelectAndNormalize writes one output to .npy (--select any output, pooled embeddings
// L2-normalised) and refuses an ambiguous or unknown --select before encoding.
func TestRunSelectAndNormalize(t *testing.T) {
	model := filepath.Join(bertDir, "bert-opset17.onnx")
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		shape []int
	}{
		{[]string{"--select", "pooler_output"}, []int{11, 32}},
		{[]string{"--pool", "cls", "--normalize"}, []int{11, 32}}, // embedding, the default with --pool
		{[]string{"--select", "last_hidden_state"}, []int{11, 64, 32}},
	} {
		out := filepath.Join(dir, "x.npy")
		args := append([]string{"run", model, "--tokenizer", minilm, "--input", bertText, "--output", out}, c.args...)
		if code, _, errs := zoo(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		tt, err := tensorio.ReadNPY(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tt.Shape, c.shape) {
			t.Errorf("%v: shape %v, want %v", c.args, tt.Shape, c.shape)
		}
		if c.args[0] == "--pool" {
			for i := 0; i < tt.Shape[0]; i++ {
				var s float64
				for _, v := range tt.F32[i*32 : (i+1)*32] {
					s += float64(v) * float64(v)
				}
				if math.Abs(s-1) > 1e-5 {
					t.Errorf("--normalize: window %d has squared norm %g", i, s)
				}
			}
		}
	}
}

// TestRunTokenizerSetsVariantVocab gives a variant a pretrained tokenizer: its vocab follows the
// tokenizer's, and the windows carry [CLS] … [SEP].
func TestRunTokenizerSetsVariantVocab(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.json")
	if code, _, errs := zoo(t, "run", "vanilla.tiny", "--tokenizer", minilm, "--input", bertText, "--output", out, "--max-windows", "2"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got runJSON
	readJSON(t, out, &got)
	logits := got.Outputs["logits"]
	n := got.Tokens.Shape[1]
	if len(logits.Shape) != 3 || logits.Shape[2] != 30522 || got.Tokens.Data[0] != 101 || got.Tokens.Data[got.Lengths[0]-1] != 102 || got.Tokens.Data[n] != 101 {
		t.Errorf("logits %v, tokens %v…; want vocab 30522 and [CLS] … [SEP] windows", logits.Shape, got.Tokens.Data[:4])
	}
}

func TestShowPrintsFeeds(t *testing.T) {
	code, out, errs := zoo(t, "show", filepath.Join(bertDir, "bert-static.onnx"), "--feed", "attention_mask=padding")
	for _, want := range []string{
		"input_ids int64 (2, 64): ids (guessed from its name)",
		"attention_mask int64 (2, 64): padding (given by --feed)",
		"token_type_ids int64 (2, 64): types",
		"maximum length 64 (the rows of the position table pos.weight)",
		"token ids below 30522 (the rows of the embedding table word.weight)",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, stderr %q: output lacks %q\n%s", code, errs, want, out)
		}
	}
}

// TestRealTextBadInput: every bad input of the text surface is one line and exit 2.
func TestRealTextBadInput(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(minilm)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(broken, data[:len(data)/2], 0o644)
	bert := filepath.Join(bertDir, "bert-opset17.onnx")
	static := filepath.Join(bertDir, "bert-static.onnx")
	out := filepath.Join(dir, "x.npy")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "vanilla.tiny", "--input", bertText, "--set", "vocab=100"}, "has 100 rows"},
		{[]string{"run", "vanilla.tiny", "--input", bertText, "--tokenizer", minilm, "--set", "vocab=1000"}, "has 1000 rows"},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--feed", "nosuch=ids"}, `has no input "nosuch"`},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--feed", "input_ids=words"}, `unknown role "words"`},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--feed", "input_ids"}, "want NAME=ROLE"},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--feed", "attention_mask=ids"}, "both take ids"},
		{[]string{"parity", bert, "--tokenizer", minilm, "--feed", "nosuch=ids"}, `has no input "nosuch"`},
		{[]string{"show", bert, "--feed", "nosuch=mask"}, `has no input "nosuch"`},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", broken}, "tokenizer"},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"run", bert, "--input", bertText, "--pool", "max"}, `--pool "max"`},
		{[]string{"run", bert, "--input", bertText, "--normalize"}, "--normalize"},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--output", out}, "choose one with --select"},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--output", out, "--select", "nosuch"}, `--select "nosuch"`},
		{[]string{"run", static, "--input", bertText, "--tokenizer", minilm, "--window", "100"}, "inputs are fixed at"},
		{[]string{"run", bert, "--input", bertText, "--tokenizer", minilm, "--window", "100"}, "position table"},
		{[]string{"run", static, "--input", bertText, "--tokenizer", minilm, "--batch", "4"}, "fixed at batch 2"},
	} {
		code, _, errs := zoo(t, c.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run left %s", out)
	}
}
