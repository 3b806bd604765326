package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/tokenout"
)

const tokData = "../../zoo/tokenize/testdata/"

// TestTokenizeJSONMatchesReference: the verb prints the reference ids (Hugging Face's
// tokenizers, SentencePiece) for the whole corpus as one sequence.
func TestTokenizeJSONMatchesReference(t *testing.T) {
	for _, c := range []struct{ tok, golden string }{
		{"minilm.tokenizer.json", "minilm.hf.golden.json"},
		{"bytelevel-bpe.tokenizer.json", "bytelevel-bpe.hf.golden.json"},
		{"spm-bpe.model", "spm-bpe.spm.golden.json"},
		{"spm-unigram.model", "spm-unigram.spm.golden.json"},
	} {
		code, out, errs := zoo(t, "tokenize", "--tokenizer", tokData+c.tok, "--input", tokData+"corpus.txt", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.tok, code, errs)
		}
		var got struct {
			IDs    []int64  `json:"ids"`
			Tokens []string `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: output is not JSON: %v", c.tok, err)
		}
		var want struct {
			Whole struct {
				IDs []int64 `json:"ids"`
			} `json:"whole"`
		}
		b, err := os.ReadFile(tokData + c.golden)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if len(got.IDs) != len(want.Whole.IDs) || len(got.Tokens) != len(got.IDs) {
			t.Fatalf("%s: %d ids, %d tokens, want %d", c.tok, len(got.IDs), len(got.Tokens), len(want.Whole.IDs))
		}
		for i := range got.IDs {
			if got.IDs[i] != want.Whole.IDs[i] {
				t.Fatalf("%s: id %d is %d, want %d", c.tok, i, got.IDs[i], want.Whole.IDs[i])
			}
		}
		if !strings.Contains(errs, "tokens (") {
			t.Errorf("%s: stderr lacks the summary: %q", c.tok, errs)
		}
	}
}

func TestTokenizeHumanOutput(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte("Hello, world!\ttab"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := zoo(t, "tokenize", "-t", tokData+"minilm.tokenizer.json", "-i", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "101\t[CLS]\n7592\thello\n1010\t,\n2088\tworld\n999\t!\n21628\ttab\n102\t[SEP]\n"
	if out != want {
		t.Errorf("output\n%q\nwant\n%q", out, want)
	}
	// Without --tokenizer: the byte tokenizer; invisible tokens are quoted.
	code, out, errs = zoo(t, "tokenize", "-i", in)
	if code != 0 || !strings.HasPrefix(out, "73\t<0x48>\n") || !strings.Contains(errs, "bytes") {
		t.Errorf("bytes: exit %d, out %q, stderr %q", code, out[:min(len(out), 40)], errs)
	}
	code, out, _ = zoo(t, "tokenize", "-t", tokData+"spm-unigram-bytes.model", "-i", in)
	if code != 0 || !strings.Contains(out, "\t<0x09>\n") {
		t.Errorf("byte fallback: exit %d, out %q", code, out)
	}
	if tokenout.ShowToken("a b") != `"a b"` || tokenout.ShowToken("\u200b") != `"\u200b"` || tokenout.ShowToken("▁x") != "▁x" {
		t.Errorf("showToken: %s %s %s", tokenout.ShowToken("a b"), tokenout.ShowToken("\u200b"), tokenout.ShowToken("▁x"))
	}
}

// TestTokenizeBadInput: each bad input is one line on stderr and exit 2.
func TestTokenizeBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	model, err := os.ReadFile(tokData + "spm-bpe.model")
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(tokData + "bytelevel-bpe.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), model...)
	for i := 10; i < 60; i++ {
		corrupt[i] ^= 0x5a
	}
	good := tokData + "minilm.tokenizer.json"
	text := write("text.txt", []byte("some text"))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown model type", []string{"-t", write("unknown.json", []byte(`{"model":{"type":"Transducer"}}`)), "-i", text}, `unsupported model type "Transducer"`},
		{"truncated tokenizer.json", tokArgs(write("trunc.json", js[:len(js)/3]), text), "not a valid tokenizer.json"},
		{"truncated .model", tokArgs(write("trunc.model", model[:len(model)/3]), text), "truncated"},
		{"corrupted .model", tokArgs(write("corrupt.model", corrupt), text), "SentencePiece model"},
		{"missing tokenizer", []string{"-t", filepath.Join(dir, "nope.json"), "-i", text}, "no such file"},
		{"missing input", []string{"-t", good, "-i", filepath.Join(dir, "nope.txt")}, "no such file"},
		{"not UTF-8", []string{"-t", good, "-i", write("bad.txt", []byte("ok\xff"))}, "not valid UTF-8"},
		{"no input flag", []string{"-t", good}, "input"},
		{"stray argument", []string{"-t", good, "-i", text, "extra"}, "no arguments"},
	}
	for _, c := range cases {
		code, out, errs := zoo(t, append([]string{"tokenize"}, c.args...)...)
		// urfave/cli prints the verb's help on stdout for a missing required flag, as for every verb.
		if code != 2 || (out != "" && c.name != "no input flag") || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.name, code, out, errs, c.want)
		}
	}
}

func tokArgs(tok, text string) []string { return []string{"--tokenizer", tok, "--input", text} }
