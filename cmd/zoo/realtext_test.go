package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
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
			var rep runReport
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
	var rep runReport
	json.Unmarshal([]byte(stdout), &rep)
	roles := map[string]role{}
	for _, f := range rep.Feeds {
		roles[f.Name] = f.Role
	}
	if !strings.Contains(rep.Tokenizer, "byte tokenizer") || roles["input_ids"] != roleIDs || roles["key_padding_mask"] != rolePadding || roles["position_ids"] != rolePositions {
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

// TestPlanFeeds checks the role guess and the tensors each role gets, padded to static shapes.
func TestPlanFeeds(t *testing.T) {
	in := func(name string, dt tensor.DType, dims ...graph.Dim) graph.ValueInfo {
		return graph.ValueInfo{Name: name, DType: dt, Shape: dims}
	}
	b, s := graph.Sym("batch"), graph.Sym("seq")
	for _, c := range []struct {
		name      string
		inputs    []graph.ValueInfo
		overrides []string
		roles     []role
		err       string
	}{
		{"zoo", []graph.ValueInfo{in("tokens", tensor.Int64, b, s), in("key_padding_mask", tensor.Bool, b, s)}, nil, []role{roleIDs, rolePadding}, ""},
		{"hf", []graph.ValueInfo{in("input_ids", tensor.Int64, b, s), in("attention_mask", tensor.Int64, b, s), in("token_type_ids", tensor.Int64, b, s)}, nil, []role{roleIDs, roleMask, roleTypes}, ""},
		{"bool mask by name", []graph.ValueInfo{in("ids", tensor.Int32, b, s), in("mask", tensor.Bool, b, s), in("position_ids", tensor.Int32, b, s)}, nil, []role{roleIDs, rolePadding, rolePositions}, ""},
		{"float mask", []graph.ValueInfo{in("x", tensor.Int64, b, s), in("attention_mask", tensor.Float32, b, s)}, nil, []role{roleIDs, roleMask}, ""},
		{"by type", []graph.ValueInfo{in("a", tensor.Int64, b, s), in("b", tensor.Bool, b, s)}, nil, []role{roleIDs, rolePadding}, ""},
		{"override", []graph.ValueInfo{in("input_ids", tensor.Int64, b, s), in("attention_mask", tensor.Int64, b, s)}, []string{"attention_mask=padding"}, []role{roleIDs, rolePadding}, ""},
		{"float input", []graph.ValueInfo{in("src", tensor.Float32, b, s, graph.Fixed(8))}, nil, nil, "does not take text"},
		{"float ids", []graph.ValueInfo{in("src", tensor.Float32, b, s)}, []string{"src=ids"}, nil, "role ids cannot take"},
		{"no ids", []graph.ValueInfo{in("attention_mask", tensor.Int64, b, s)}, nil, nil, "no input takes token ids"},
		{"rank 3", []graph.ValueInfo{in("input_ids", tensor.Int64, b, s, graph.Fixed(2))}, nil, nil, "rank 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := planFeeds(&graph.Graph{Name: "m", Inputs: c.inputs}, c.overrides)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range p.Feeds {
				if f.Role != c.roles[i] {
					t.Errorf("input %s: role %s, want %s", f.Name, f.Role, c.roles[i])
				}
			}
		})
	}

	// Static (3, 4) inputs: a batch of 2 windows of lengths 3 and 1 is padded to 3 rows of 4.
	g := &graph.Graph{Name: "m", Inputs: []graph.ValueInfo{
		in("input_ids", tensor.Int32, graph.Fixed(3), graph.Fixed(4)), in("attention_mask", tensor.Float32, graph.Fixed(3), graph.Fixed(4)),
		in("pad", tensor.Bool, graph.Fixed(3), graph.Fixed(4)), in("token_type_ids", tensor.Int64, graph.Fixed(3), graph.Fixed(4)),
		in("position_ids", tensor.Int64, graph.Fixed(3), graph.Fixed(4)),
	}}
	p, err := planFeeds(g, []string{"pad=padding"})
	if err != nil {
		t.Fatal(err)
	}
	batch := &tokenize.Batch{B: 2, N: 3, Tokens: []int64{7, 8, 9, 5, 0, 0}, Mask: []bool{false, false, false, false, true, true}, Lengths: []int{3, 1}, Offsets: []int64{0, 3}}
	ts, err := p.tensors(padBatch(batch, p.Seq, 99), 99)
	if err != nil {
		t.Fatal(err)
	}
	p99 := int64(99)
	wantI := map[string][]int64{
		"input_ids":      {7, 8, 9, p99, 5, p99, p99, p99, p99, p99, p99, p99},
		"token_type_ids": make([]int64, 12),
		"position_ids":   {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3},
	}
	for name, want := range wantI {
		if !slices.Equal(ts[name].Shape, []int{3, 4}) || !slices.Equal(ts[name].I64, want) || ts[name].DType != g.Inputs[indexOf(g, name)].DType {
			t.Errorf("%s: %v %v %v, want %v", name, ts[name].DType, ts[name].Shape, ts[name].I64, want)
		}
	}
	if want := []float32{1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0}; maxDiff(ts["attention_mask"].F32, want) != 0 {
		t.Errorf("attention_mask %v, want %v", ts["attention_mask"].F32, want)
	}
	for i, v := range ts["pad"].Bool {
		if want := !(i < 3 || i == 4); v != want {
			t.Errorf("pad[%d] = %v, want %v", i, v, want)
		}
	}
	if _, err := p.tensors(&tokenize.Batch{B: 4, N: 1, Tokens: make([]int64, 4), Mask: make([]bool, 4), Lengths: []int{1, 1, 1, 1}}, 0); err == nil {
		t.Error("a batch of 4 fed to inputs fixed at 3 rows: no error")
	}
}

func indexOf(g *graph.Graph, name string) int {
	for i, in := range g.Inputs {
		if in.Name == name {
			return i
		}
	}
	return -1
}

// TestTokenWindows cuts a pretrained tokenizer's ids into windows with [CLS] … [SEP] in each,
// batch by batch, with offsets counting text tokens; an input with no tokens is one window of
// the special tokens; an id past the embedding rows is bad input.
func TestTokenWindows(t *testing.T) {
	tok, err := tokenize.Load(minilm)
	if err != nil {
		t.Fatal(err)
	}
	tk := textTokenizer{tok: tok, path: minilm}
	ids := func(text string) []int64 {
		v, _, err := tok.EncodeRaw(text)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b, c, d, e := ids("a")[0], ids("b")[0], ids("c")[0], ids("d")[0], ids("e")[0]
	for _, tc := range []struct {
		text    string
		window  int
		rows    int // vocabulary rows (0: unchecked)
		batches [][][]int64
		offsets [][]int64
		err     string
	}{
		{"a b c d e", 4, 0, [][][]int64{{{101, a, b, 102}, {101, c, d, 102}}, {{101, e, 102}}}, [][]int64{{0, 2}, {4}}, ""},
		{"a b", 8, 0, [][][]int64{{{101, a, b, 102}}}, [][]int64{{0}}, ""},
		{" \n ", 8, 0, [][][]int64{{{101, 102}}}, [][]int64{{0}}, ""},
		{"a b", 2, 0, nil, nil, "leaves no room"},
		{"a b", 8, 1000, nil, nil, "has 1000 rows"},
	} {
		src, stop, err := newWindows(context.Background(), tk, strings.NewReader(tc.text), tc.window, 2, tc.rows, "word.weight")
		var got [][][]int64
		var offs [][]int64
		for err == nil {
			var bt *tokenize.Batch
			if bt, err = src.Next(); err == nil {
				var rows [][]int64
				for i := 0; i < bt.B; i++ {
					rows = append(rows, append([]int64(nil), bt.Row(i)...))
					for j := bt.Lengths[i]; j < bt.N; j++ {
						if !bt.Mask[i*bt.N+j] || bt.Tokens[i*bt.N+j] != 0 {
							t.Errorf("%q: padded position (%d, %d) is not [PAD] with the mask set", tc.text, i, j)
						}
					}
				}
				got, offs = append(got, rows), append(offs, bt.Offsets)
			}
		}
		if stop != nil {
			stop()
		}
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.text, err, tc.err)
			}
		case err != io.EOF:
			t.Errorf("%q: %v", tc.text, err)
		case fmt.Sprint(got) != fmt.Sprint(tc.batches) || fmt.Sprint(offs) != fmt.Sprint(tc.offsets):
			t.Errorf("%q: batches %v offsets %v, want %v %v", tc.text, got, offs, tc.batches, tc.offsets)
		}
	}
}

// TestChooseTokenizer finds the tokenizer next to a model: tokenizer.json first, then vocab.txt,
// then a single SentencePiece .model; several .model files are an error; none, the byte tokenizer.
func TestChooseTokenizer(t *testing.T) {
	spm, err := os.ReadFile("../../zoo/tokenize/testdata/spm-unigram.model")
	if err != nil {
		t.Fatal(err)
	}
	vocab := []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
	for _, c := range []struct {
		files map[string][]byte
		kind  string // substring of Kind(), or of the error
		err   bool
	}{
		{map[string][]byte{}, "bytes", false},
		{map[string][]byte{"vocab.txt": vocab, "x.model": spm}, "WordPiece", false},
		{map[string][]byte{"x.model": spm}, "SentencePiece", false},
		{map[string][]byte{"a.model": spm, "b.model": spm}, "several SentencePiece models", true},
	} {
		dir := t.TempDir()
		for name, data := range c.files {
			os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
		tk, err := chooseTokenizer("", filepath.Join(dir, "m.onnx"), true)
		switch {
		case c.err:
			if err == nil || !strings.Contains(err.Error(), c.kind) {
				t.Errorf("%v: error %v, want %q", c.files, err, c.kind)
			}
		case err != nil:
			t.Errorf("%v: %v", c.files, err)
		case !strings.Contains(tk.tok.Kind(), c.kind):
			t.Errorf("%v: tokenizer %s, want %s", c.files, tk.tok.Kind(), c.kind)
		}
	}
	// A variant keeps the byte tokenizer unless given one.
	if tk, err := chooseTokenizer("", "vanilla.tiny", false); err != nil || tk.tok.Kind() != "bytes" {
		t.Errorf("variant: %v, %v", tk, err)
	}
}
