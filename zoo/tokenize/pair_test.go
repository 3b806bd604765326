package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/internal/env"
)

type pairGolden struct {
	Pairs []struct {
		A, B       string
		IDs, Types []int64
	} `json:"pairs"`
}

// TestGoldenPairs compares zoo's pair encodings, ids and token type ids, with tokenizers.js's
// (gen_pairs.mjs) on the pairs of the corpus's first 121 lines (without empty ones), for a BERT template, RoBERTa's processing and
// a TemplateProcessing pair.
func TestGoldenPairs(t *testing.T) {
	for _, name := range []string{"minilm", "bytelevel-bpe", "spm-unigram"} {
		t.Run(name, func(t *testing.T) {
			tk, err := Load(filepath.Join("testdata", name+".tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g pairGolden
			b, err := os.ReadFile(filepath.Join("testdata", name+".pairs.golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &g); err != nil || len(g.Pairs) < 100 {
				t.Fatalf("golden: %v, %d pairs", err, len(g.Pairs))
			}
			pe := tk.(PairEncoder)
			bad := 0
			for i, p := range g.Pairs {
				ids, types, toks, err := pe.EncodePair(p.A, p.B, 0)
				if err != nil {
					t.Fatalf("pair %d: %v", i, err)
				}
				if len(toks) != len(ids) || !slices.Equal(ids, p.IDs) || !slices.Equal(types, p.Types) {
					if bad++; bad <= 3 {
						t.Errorf("pair %d (%.30q, %.30q):\nids   %v\nwant  %v\ntypes %v\nwant  %v", i, p.A, p.B, ids, p.IDs, types, p.Types)
					}
				}
			}
		})
	}
}

// TestGoldenPairsLive runs gen_pairs.mjs with tokenizers.js when node and the package are
// there (ZOO_TOKENIZERS_JS: its node_modules folder; .ci/run installs it) and checks that
// the committed goldens are what it writes today.
func TestGoldenPairsLive(t *testing.T) {
	dir, _ := env.Get(env.TokenizersJS)
	if dir == "" {
		t.Skip("ZOO_TOKENIZERS_JS is not set: the committed goldens are checked by TestGoldenPairs")
	}
	if _, err := os.Stat(filepath.Join(dir, "@huggingface", "tokenizers")); err != nil {
		t.Skipf("no @huggingface/tokenizers under %s", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	tmp := t.TempDir()
	for _, f := range []string{"gen_pairs.mjs", "corpus.txt", "minilm.tokenizer.json", "bytelevel-bpe.tokenizer.json", "spm-unigram.tokenizer.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(tmp, f), b, 0o644)
	}
	cmd := exec.Command(node, "gen_pairs.mjs")
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "NODE_PATH="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen_pairs.mjs: %v\n%s", err, out)
	}
	for _, name := range []string{"minilm", "bytelevel-bpe", "spm-unigram"} {
		got, _ := os.ReadFile(filepath.Join(tmp, name+".pairs.golden.json"))
		want, _ := os.ReadFile(filepath.Join("testdata", name+".pairs.golden.json"))
		if string(got) != string(want) {
			t.Errorf("%s: tokenizers.js today writes other pairs than the committed golden", name)
		}
	}
}

// TestTruncatePair checks Hugging Face's longest_first cut of a pair: the shorter text stays
// whole while it fits in half the room, else both get half.
func TestTruncatePair(t *testing.T) {
	for _, c := range []struct{ a, b, room, wa, wb int }{
		{3, 4, 10, 3, 4},   // fits
		{3, 20, 10, 3, 7},  // the longer takes the rest
		{20, 3, 10, 7, 3},  // either order
		{8, 9, 10, 5, 5},   // the shorter does not fit in half: both get half
		{9, 8, 11, 6, 5},   // the longer text gets the odd token
		{2, 20, 3, 1, 2},   // room 3: half and half
		{12, 12, 10, 5, 5}, // both over
	} {
		if a, b := TruncatePair(c.a, c.b, c.room); a != c.wa || b != c.wb {
			t.Errorf("TruncatePair(%d, %d, %d) = %d, %d; want %d, %d", c.a, c.b, c.room, a, b, c.wa, c.wb)
		}
	}
	tk, err := Load("testdata/minilm.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	pe := tk.(PairEncoder)
	ids, types, _, err := pe.EncodePair("the cat sat on the mat", "a b c d e f g h i j k l m n o p", 15)
	if err != nil || len(ids) != 15 || ids[0] != 101 || ids[len(ids)-1] != 102 || types[len(types)-1] != 1 {
		t.Errorf("a pair cut to 15: %v %v %v", ids, types, err)
	}
	if fmt.Sprint(ids[1:7]) != "[1996 4937 2938 2006 1996 13523]" {
		t.Errorf("the shorter text (6 tokens in room 12) should stay whole: %v", ids)
	}
	ids, _, _, _ = pe.EncodePair("the cat sat on the mat", "a b c d e f g h i j k l m n o p", 12)
	if fmt.Sprint(ids) != "[101 1996 4937 2938 2006 102 1037 1038 1039 1040 1041 102]" {
		t.Errorf("room 9: 4 and 5 tokens, as Hugging Face cuts: %v", ids)
	}
	if _, _, _, err := pe.EncodePair("a", "b", 4); err == nil {
		t.Errorf("room for one token per text: no error")
	}
}
