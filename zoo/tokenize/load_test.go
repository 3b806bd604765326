package tokenize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestVocabTxt builds vocab.txt from the MiniLM tokenizer.json's vocabulary: BERT's defaults
// for a vocab.txt are exactly that file's settings, so the Hugging Face goldens apply.
func TestVocabTxt(t *testing.T) {
	var f struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	b, err := os.ReadFile("testdata/minilm.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	toks := make([]string, len(f.Model.Vocab))
	for s, id := range f.Model.Vocab {
		toks[id] = s
	}
	path := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(path, []byte(strings.Join(toks, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	gb, err := os.ReadFile("testdata/minilm.hf.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	text, _ := readCorpus(t)
	ids, _, err := tk.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	if !equalIDs(ids, g.Whole.IDs) {
		t.Fatalf("vocab.txt: %d ids, want %d (first difference at %d)", len(ids), len(g.Whole.IDs), firstDiff(ids, g.Whole.IDs))
	}
	if tk.VocabSize() != 30522 || tk.Kind() != "vocab.txt WordPiece" {
		t.Errorf("VocabSize %d, Kind %q", tk.VocabSize(), tk.Kind())
	}
	want := Special{Pad: 0, CLS: 101, SEP: 102, Mask: 103, UNK: 100, BOS: -1, EOS: -1}
	if got := tk.Special(); got != want {
		t.Errorf("Special = %+v, want %+v", got, want)
	}
}

// TestBertSupplementaryCJK: BertNormalizer isolates CJK ideographs by code point, including
// those outside the BMP (Hugging Face's Rust code works on chars; the JS reference on UTF-16
// units does not, so this case is checked here by the rule rather than by the golden files).
func TestBertSupplementaryCJK(t *testing.T) {
	tk, err := Load("testdata/minilm.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	_, toks, err := tk.Encode("a\U0002000Bb 東京")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[CLS]", "a", "[UNK]", "b", "東", "京", "[SEP]"}
	if strings.Join(toks, " ") != strings.Join(want, " ") {
		t.Errorf("tokens %q, want %q", toks, want)
	}
}

// TestLowercasePerCharacter: Hugging Face lowercases character by character (Rust's
// char::to_lowercase), so a word-final capital sigma becomes σ, not ς (the JS reference applies
// JavaScript's final-sigma rule, so this case is checked here by the rule).
func TestLowercasePerCharacter(t *testing.T) {
	tk, err := Load("testdata/minilm.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	_, toks, err := tk.EncodeRaw("ΟΔΟΣ")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toks, " "); got != "ο ##δ ##ο ##σ" {
		t.Errorf("tokens %q, want ο ##δ ##ο ##σ", got)
	}
}

func TestSpecialAndAffixes(t *testing.T) {
	cases := []struct {
		file           string
		special        Special
		prefix, suffix []int64
		kind           string
		size           int
	}{
		{"minilm.tokenizer.json", Special{0, 101, 102, 103, 100, -1, -1}, []int64{101}, []int64{102}, "tokenizer.json WordPiece", 30522},
		{"bytelevel-bpe.tokenizer.json", Special{1, 0, 2, 960, 3, 0, 2}, []int64{0}, []int64{2}, "tokenizer.json BPE", 961},
		{"spm-unigram.tokenizer.json", Special{-1, 1, 2, -1, 0, 1, 2}, nil, []int64{2}, "tokenizer.json Unigram", 534},
		{"spm-unigram.model", Special{-1, 1, 2, -1, 0, 1, 2}, nil, nil, "SentencePiece Unigram", 534},
		{"spm-bpe.model", Special{-1, 1, 2, -1, 0, 1, 2}, nil, nil, "SentencePiece BPE", 900},
	}
	for _, c := range cases {
		tk, err := Load(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		p, s := tk.Affixes()
		if tk.Special() != c.special || !equalIDs(p.IDs, c.prefix) || !equalIDs(s.IDs, c.suffix) || tk.Kind() != c.kind || tk.VocabSize() != c.size {
			t.Errorf("%s: special %+v prefix %v suffix %v kind %q size %d", c.file, tk.Special(), p.IDs, s.IDs, tk.Kind(), tk.VocabSize())
		}
		raw, _, _ := tk.EncodeRaw("hello world")
		full, _, _ := tk.Encode("hello world")
		if len(full) != len(p.IDs)+len(raw)+len(s.IDs) {
			t.Errorf("%s: Encode has %d ids, EncodeRaw %d plus affixes %d", c.file, len(full), len(raw), len(p.IDs)+len(s.IDs))
		}
	}
}

func TestBytesTokenizer(t *testing.T) {
	var tk Tokenizer = Bytes{}
	ids, toks, err := tk.Encode("hé\xff")
	if err != nil {
		t.Fatal(err)
	}
	if !equalIDs(ids, []int64{105, 196, 170, 256}) || toks[0] != "<0x68>" || toks[3] != "<0xFF>" {
		t.Errorf("ids %v tokens %q", ids, toks)
	}
	if tk.VocabSize() != VocabSize || tk.Special().Pad != PadID || tk.Special().CLS != -1 {
		t.Errorf("VocabSize %d Special %+v", tk.VocabSize(), tk.Special())
	}
	var got []int64
	if err := Stream(context.Background(), tk, bytes.NewReader([]byte("hé\xff")), func(i []int64, _ []string) error {
		got = append(got, i...)
		return nil
	}); err != nil || !equalIDs(got, ids) {
		t.Errorf("Stream = %v, %v", got, err)
	}
}

// TestStreamLongInput streams more than one chunk and checks the cut changes nothing.
func TestStreamLongInput(t *testing.T) {
	text, _ := readCorpus(t)
	for len(text) < 3*StreamChunk {
		text += text
	}
	for _, f := range []string{"minilm.tokenizer.json", "bytelevel-bpe.tokenizer.json", "spm-unigram.model", "spm-bpe.model"} {
		wantSafe := f != "spm-unigram.model"
		tk, err := Load(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := tk.(streamSafe); !ok || s.StreamSafe() != wantSafe {
			t.Errorf("%s: StreamSafe is not %v", f, wantSafe)
		}
		want, _, err := tk.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		calls, first := 0, 0
		if err := Stream(context.Background(), tk, strings.NewReader(text), func(i []int64, _ []string) error {
			got = append(got, i...)
			if calls++; calls == 1 {
				first = len(i)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if wantSafe && (!equalIDs(got, want) || calls < 4) {
			t.Errorf("%s: Stream gave %d ids in %d calls, Encode %d (first difference at %d)", f, len(got), calls, len(want), firstDiff(got, want))
		}
		// Without a safe cut, the text is cut every StreamMaxRun bytes: the first piece is the
		// whole text's; after the cut SentencePiece's float scores start afresh, which may
		// decide near ties differently.
		if !wantSafe && (calls < 2 || firstDiff(got, want) < first) {
			t.Errorf("%s: Stream gave %d ids in %d calls, the first %d; Encode %d (first difference at %d)", f, len(got), calls, first, len(want), firstDiff(got, want))
		}
	}
}

func TestStreamBadUTF8(t *testing.T) {
	tk, err := Load("testdata/spm-bpe.model")
	if err != nil {
		t.Fatal(err)
	}
	err = Stream(context.Background(), tk, strings.NewReader("abc\xffdef"), func([]int64, []string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "offset 3") {
		t.Errorf("err = %v, want one naming offset 3", err)
	}
}

// TestBadFiles: every unusable tokenizer file is an ErrFormat error naming the file.
func TestBadFiles(t *testing.T) {
	model, err := os.ReadFile("testdata/spm-unigram-bytes.model")
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), model...)
	for i := 100; i < 140; i++ {
		corrupt[i] = 0xff
	}
	minimal := func(model string) string {
		return `{"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,"model":` + model + `}`
	}
	cases := []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"unknown model", "x.json", []byte(minimal(`{"type":"Transducer","vocab":{}}`)), `unsupported model type "Transducer"`},
		{"no model", "x.json", []byte(`{"version":"1.0"}`), "has no model"},
		{"truncated json", "x.json", []byte(minimal(`{"type":"WordPiece","vocab":{"[UNK]":0`)), "not a valid tokenizer.json"},
		{"unknown normalizer", "x.json", []byte(strings.Replace(minimal(`{"type":"WordPiece","vocab":{"[UNK]":0}}`), `"normalizer":null`, `"normalizer":{"type":"Shout"}`, 1)), `unsupported normalizer "Shout"`},
		{"unknown pre_tokenizer", "x.json", []byte(strings.Replace(minimal(`{"type":"WordPiece","vocab":{"[UNK]":0}}`), `"pre_tokenizer":null`, `"pre_tokenizer":{"type":"Magic"}`, 1)), `unsupported pre_tokenizer "Magic"`},
		{"unknown post_processor", "x.json", []byte(strings.Replace(minimal(`{"type":"WordPiece","vocab":{"[UNK]":0}}`), `"post_processor":null`, `"post_processor":{"type":"Glue"}`, 1)), `unsupported post_processor "Glue"`},
		{"lookahead regex", "x.json", []byte(strings.Replace(minimal(`{"type":"WordPiece","vocab":{"[UNK]":0}}`), `"pre_tokenizer":null`, `"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+(?!\\S)"},"behavior":"Isolated"}`, 1)), "not supported by zoo"},
		{"wordpiece without unk", "x.json", []byte(minimal(`{"type":"WordPiece","vocab":{"a":0}}`)), "unk_token"},
		{"bpe merge outside vocab", "x.json", []byte(minimal(`{"type":"BPE","vocab":{"a":0},"merges":["a b"]}`)), "missing from the vocabulary"},
		{"empty model file", "x.model", nil, "empty"},
		{"truncated model", "x.model", model[:len(model)/2], "truncated"},
		{"corrupted model", "x.model", corrupt, "SentencePiece model"},
		{"not a model", "x.model", []byte("hello, this is text"), "SentencePiece model"},
		{"binary vocab", "vocab.txt", []byte("\xff\xfe\x00"), "not UTF-8"},
		{"vocab without unk", "vocab.txt", []byte("a\nb\n"), "[UNK]"},
	}
	for _, c := range cases {
		_, err := LoadBytes(c.file, c.data)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.file) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line with %q naming %s", c.name, err, c.want, c.file)
		}
	}
}

// TestSplitBehaviors checks the delimiter behaviours against Hugging Face's documented examples.
func TestSplitBehaviors(t *testing.T) {
	spans := func(s string) [][2]int {
		var out [][2]int
		for i := 0; i < len(s); i++ {
			if s[i] == '-' {
				out = append(out, [2]int{i, i + 1})
			}
		}
		return out
	}
	s := "the-final--countdown"
	cases := map[string][]string{
		"Removed":            {"the", "final", "countdown"},
		"Isolated":           {"the", "-", "final", "-", "-", "countdown"},
		"MergedWithPrevious": {"the-", "final-", "-", "countdown"},
		"MergedWithNext":     {"the", "-final", "-", "-countdown"},
		"Contiguous":         {"the", "-", "final", "--", "countdown"},
	}
	names := make([]string, 0, len(cases))
	for k := range cases {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, b := range names {
		got := splitSpans(s, spans(s), b, nil)
		if strings.Join(got, "|") != strings.Join(cases[b], "|") {
			t.Errorf("%s: %q, want %q", b, got, cases[b])
		}
	}
}

// TestPrecompiledRules applies the nmt_nfkc charsmap of spm-unigram.model the way a
// tokenizer.json Precompiled normalizer does; the expected strings are NFKC's (Unicode's
// compatibility mappings), which nmt_nfkc contains, plus its whitespace rule (tab → space).
func TestPrecompiledRules(t *testing.T) {
	b, err := os.ReadFile("testdata/spm-unigram.model")
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseSP(b)
	if err != nil || m.cm == nil {
		t.Fatalf("charsmap: %v", err)
	}
	p := &hfPrecompiled{m.cm}
	for in, want := range map[string]string{
		"ﬁnance":   "finance",
		"①½":       "11⁄2",
		"Ⅻ":        "XII",
		"ｆｕｌｌ":     "full",
		"e\u0301":  "é",
		"a\tb":     "a b",
		"plain":    "plain",
		"東京":       "東京",
		"👩\u200d💻": "👩\u200d💻",
	} {
		if got := p.normalize(in); got != want {
			t.Errorf("Precompiled(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConcurrentEncode: a loaded tokenizer (with its word caches and Viterbi lattice) is safe
// for concurrent use.
func TestConcurrentEncode(t *testing.T) {
	_, lines := readCorpus(t)
	for _, f := range []string{"bytelevel-bpe.tokenizer.json", "spm-unigram.tokenizer.json", "spm-unigram.model", "spm-bpe.model"} {
		tk, err := Load(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]int64, len(lines))
		for i, l := range lines {
			want[i], _, _ = tk.Encode(l)
		}
		errs := make(chan string, 4)
		for g := range 4 {
			go func() {
				for i := range lines {
					j := (i + g*61) % len(lines)
					if got, _, _ := tk.Encode(lines[j]); !equalIDs(got, want[j]) {
						errs <- fmt.Sprintf("%s line %d differs under concurrency", f, j+1)
						return
					}
				}
				errs <- ""
			}()
		}
		for range 4 {
			if e := <-errs; e != "" {
				t.Error(e)
			}
		}
	}
}
