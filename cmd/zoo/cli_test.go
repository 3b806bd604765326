package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// zoo runs the CLI in process and returns its exit code, stdout and stderr.
func zoo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"zoo"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

const text = "../../examples/text.txt"

func TestRunTinyBothFlagOrders(t *testing.T) {
	for _, args := range [][]string{
		{"run", "vanilla", "--input", text, "--preset", "tiny"},
		{"run", "--input", text, "--preset", "tiny", "vanilla"},
		{"run", "vanilla.tiny", "-i", text, "--json"},
	} {
		code, out, errs := zoo(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		if !strings.Contains(out, "vanilla.tiny") || !strings.Contains(out, "592") {
			t.Errorf("%v: report lacks the model or the token count:\n%s", args, out)
		}
	}
}

func TestRunJSONReport(t *testing.T) {
	code, out, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "--json", "--window", "100", "--batch", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep runout.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Tokens != 592 || rep.Windows != 6 || rep.Batches != 2 || rep.Backend != "cpu" {
		t.Errorf("report %+v: want 592 tokens, 6 windows, 2 batches on cpu", rep)
	}
}

func TestRunOutputs(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".json", ".npy", ".safetensors"} {
		path := filepath.Join(dir, "out"+ext)
		code, _, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "--output", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", ext, code, errs)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch ext {
		case ".json":
			var doc struct {
				Lengths []int `json:"lengths"`
				Tokens  struct {
					Shape []int   `json:"shape"`
					Data  []int64 `json:"data"`
				} `json:"tokens"`
				Outputs map[string]struct {
					Shape []int     `json:"shape"`
					Data  []float32 `json:"data"`
				} `json:"outputs"`
				Tokenizer map[string]any `json:"tokenizer"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("json output: %v", err)
			}
			h := doc.Outputs["hidden"]
			if len(doc.Lengths) != 2 || doc.Lengths[0] != 512 || doc.Lengths[1] != 80 || len(h.Data) != 2*512*64 || doc.Tokenizer["pad_id"] != 0.0 {
				t.Errorf("json output: lengths %v, hidden shape %v with %d values, tokenizer %v", doc.Lengths, h.Shape, len(h.Data), doc.Tokenizer)
			}
			if doc.Tokens.Data[0] != int64('A')+1 {
				t.Errorf("first token %d, want byte 'A' + 1", doc.Tokens.Data[0])
			}
		case ".npy":
			x, err := tensorio.ReadNPY(bytes.NewReader(data))
			if err != nil || len(x.Shape) != 3 || x.Shape[0] != 2 || x.Shape[1] != 512 || x.Shape[2] != 64 {
				t.Errorf("npy output: %v, shape %v", err, x)
			}
		case ".safetensors":
			ts, meta, err := tensorio.ReadSafetensors(data)
			if err != nil || tensorio.Lookup(ts, "logits") == nil || tensorio.Lookup(ts, "hidden") == nil || !strings.Contains(meta["tokenizer"], "byte") {
				t.Errorf("safetensors output: %v, meta %v", err, meta)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("output directory holds %d entries, want the 3 outputs only (temporary files left?)", len(entries))
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"empty file", []string{"run", "vanilla.tiny", "--input", empty}, 2, "is empty"},
		{"missing file", []string{"run", "vanilla.tiny", "--input", filepath.Join(dir, "nope.txt")}, 2, "no such file"},
		{"directory", []string{"run", "vanilla.tiny", "--input", dir}, 2, "is a directory"},
		{"no input flag", []string{"run", "vanilla.tiny"}, 2, "input"},
		{"unknown variant", []string{"run", "vanila", "--input", text}, 2, `did you mean "vanilla"`},
		{"unknown preset", []string{"run", "vanilla.huge", "--input", text}, 2, "tiny"},
		{"heads do not divide", []string{"run", "vanilla", "--input", text, "--set", "heads=7"}, 2, "heads=7 must divide d_model=512"},
		{"negative", []string{"run", "vanilla", "--input", text, "--set", "layers=-2"}, 2, "layers"},
		{"non-numeric", []string{"run", "vanilla", "--input", text, "--set", "d_ff=big"}, 2, "d_ff"},
		{"unknown hyperparameter", []string{"run", "vanilla", "--input", text, "--set", "head=4"}, 2, `did you mean "heads"`},
		{"bad set syntax", []string{"run", "vanilla", "--input", text, "--set", "heads"}, 2, "KEY=VALUE"},
		{"unknown output format", []string{"run", "vanilla.tiny", "--input", text, "--output", filepath.Join(dir, "o.csv")}, 2, "unknown format"},
		{"window too long", []string{"run", "vanilla.tiny", "--input", text, "--window", "9000"}, 2, "max_len"},
		{"unknown backend", []string{"run", "vanilla.tiny", "--input", text, "--backend", "tpu"}, 2, "unknown backend"},
		{"unknown flag", []string{"run", "vanilla.tiny", "--input", text, "--frobnicate"}, 2, "frobnicate"},
		{"unknown command", []string{"frobnicate"}, 2, "frobnicate"},
		{"show bad seq", []string{"show", "vanilla.tiny", "--seq", "0"}, 2, "--seq"},
	}
	if runtime.GOOS != "windows" && os.Getuid() != 0 {
		cases = append(cases, struct {
			name string
			args []string
			code int
			want string
		}{"unwritable output", []string{"run", "vanilla.tiny", "--input", text, "--output", filepath.Join(ro, "o.json")}, 2, "o.json"})
	}
	cases = append(cases, struct {
		name string
		args []string
		code int
		want string
	}{"output dir missing", []string{"run", "vanilla.tiny", "--input", text, "--output", filepath.Join(dir, "no", "such", "o.json")}, 2, "o.json"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := zoo(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, errs)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("stderr %q lacks %q", errs, c.want)
			}
			if lines := strings.Count(strings.TrimSpace(errs), "\n"); lines > 0 && !strings.Contains(errs, "Usage") && !strings.Contains(errs, "USAGE") {
				t.Errorf("stderr has %d lines, want one:\n%s", lines+1, errs)
			}
			if strings.Contains(errs, "goroutine") || strings.Contains(errs, "panic") {
				t.Errorf("a panic reached the user:\n%s", errs)
			}
		})
	}
	entries, _ := os.ReadDir(ro)
	if len(entries) != 0 {
		t.Errorf("unwritable directory holds %d entries", len(entries))
	}
}

func TestListShowBackends(t *testing.T) {
	code, out, errs := zoo(t, "list")
	if code != 0 || !strings.Contains(out, "vanilla") || !strings.Contains(out, "O(n²)") {
		t.Errorf("list: exit %d, out %q, err %q", code, out, errs)
	}
	code, out, errs = zoo(t, "show", "vanilla", "--preset", "tiny", "--seq", "16,32")
	if code != 0 || !strings.Contains(out, "layers.1.ffn.2.weight") || !strings.Contains(out, "d_model") {
		t.Errorf("show: exit %d, err %q\n%s", code, errs, out)
	}
	code, out, errs = zoo(t, "backends")
	if code != 0 || !strings.Contains(out, "cpu") || !strings.Contains(out, "chosen") {
		t.Errorf("backends: exit %d, err %q\n%s", code, errs, out)
	}
}

func TestLargeInputStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 50 MB file")
	}
	path := filepath.Join(t.TempDir(), "big.txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 1<<14)
	for written := 0; written < 50<<20; written += len(chunk) {
		f.Write(chunk)
	}
	f.Close()
	code, out, errs := zoo(t, "run", "vanilla.tiny", "--input", path, "--max-windows", "16", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep runout.Report
	json.Unmarshal([]byte(out), &rep)
	if rep.Windows != 16 || rep.Tokens != 16*512 {
		t.Errorf("report %+v: want 16 windows of 512 tokens", rep)
	}
}

// An exported file runs like the variant, windowed by the max_len its metadata records.
func TestRunExportedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.onnx")
	if code, _, errs := zoo(t, "export", "linformer.tiny", "--onnx", "-o", path); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	code, out, errs := zoo(t, "run", path, "--input", text, "--json")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	var rep runout.Report
	json.Unmarshal([]byte(out), &rep)
	if rep.Window != 128 || rep.Tokens != 592 {
		t.Errorf("report %+v: want 592 tokens in windows of 128 (linformer.tiny's max_len)", rep)
	}
	if code, _, errs := zoo(t, "run", "../../onnx/testdata/torch/enc_relu_op17.onnx", "--input", text); code != 2 || !strings.Contains(errs, "does not take text") {
		t.Errorf("float-input model: exit %d, stderr %q", code, errs)
	}
}

// TestReportSingular: counts of one read as one (1 window, 1 batch, 1 thread, 1 token), not
// "1 windows".
func TestReportSingular(t *testing.T) {
	dir := t.TempDir()
	hello, h := filepath.Join(dir, "hello.txt"), filepath.Join(dir, "h.txt")
	os.WriteFile(hello, []byte("hello"), 0o644)
	os.WriteFile(h, []byte("h"), 0o644)
	code, out, errs := zoo(t, "run", "vanilla.tiny", "--input", hello, "--threads", "1")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	for _, want := range []string{"input     " + hello + ": 5 tokens in 1 window of ≤512, 1 batch\n", ", 1 thread; "} {
		if !strings.Contains(out, want) {
			t.Errorf("run report lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs := zoo(t, "tokenize", "--input", h); code != 0 || errs != "zoo: 1 token (bytes, vocabulary 257)\n" {
		t.Errorf("tokenize of one byte: exit %d, stderr %q", code, errs)
	}
}
