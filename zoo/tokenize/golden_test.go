package tokenize

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// golden is what gen_hf.mjs and gen_spm.py write: the reference ids of each corpus line and of
// the whole corpus as one sequence.
type golden struct {
	Source string      `json:"source"`
	Lines  []goldenEnc `json:"lines"`
	Whole  goldenEnc   `json:"whole"`
}

type goldenEnc struct {
	IDs    []int64  `json:"ids"`
	Tokens []string `json:"tokens"`
}

func readCorpus(t testing.TB) (string, []string) {
	t.Helper()
	b, err := os.ReadFile("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	return text, lines
}

// TestGolden compares zoo's ids, id for id, with the references' (Hugging Face's tokenizers in
// JS for tokenizer.json, SentencePiece for .model) on every corpus line and the whole corpus.
func TestGolden(t *testing.T) {
	text, lines := readCorpus(t)
	cases := []struct{ tok, golden string }{
		{"minilm.tokenizer.json", "minilm.hf.golden.json"},
		{"bytelevel-bpe.tokenizer.json", "bytelevel-bpe.hf.golden.json"},
		{"spm-unigram.tokenizer.json", "spm-unigram.hf.golden.json"},
		{"spm-unigram.model", "spm-unigram.spm.golden.json"},
		{"spm-bpe.model", "spm-bpe.spm.golden.json"},
		{"spm-unigram-bytes.model", "spm-unigram-bytes.spm.golden.json"},
	}
	for _, c := range cases {
		t.Run(c.tok, func(t *testing.T) {
			tk, err := Load(filepath.Join("testdata", c.tok))
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			b, err := os.ReadFile(filepath.Join("testdata", c.golden))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			if len(g.Lines) != len(lines) {
				t.Fatalf("golden has %d lines, corpus %d", len(g.Lines), len(lines))
			}
			bad := 0
			for i, l := range lines {
				ids, toks, err := tk.Encode(l)
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				if !equalIDs(ids, g.Lines[i].IDs) {
					bad++
					if bad <= 5 {
						t.Errorf("line %d %q:\n got %v %q\nwant %v %q", i+1, l, ids, toks, g.Lines[i].IDs, g.Lines[i].Tokens)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d lines differ", bad, len(lines))
			}
			ids, _, err := tk.Encode(text)
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(ids, g.Whole.IDs) {
				t.Errorf("whole corpus: %d ids, want %d (first difference at %d)", len(ids), len(g.Whole.IDs), firstDiff(ids, g.Whole.IDs))
			}
			// Streaming in small chunks gives the whole-text ids too.
			var got []int64
			err = Stream(context.Background(), tk, bytes.NewReader([]byte(text)), func(ids []int64, _ []string) error {
				got = append(got, ids...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(got, g.Whole.IDs) {
				t.Errorf("Stream: %d ids, want %d (first difference at %d)", len(got), len(g.Whole.IDs), firstDiff(got, g.Whole.IDs))
			}
		})
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
