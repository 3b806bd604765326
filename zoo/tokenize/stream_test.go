package tokenize

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/hostile"
)

// streamFixtures are the tokenizers the streaming tests cut text for, with whether they have
// safe cut points.
var streamFixtures = []struct {
	file string
	cuts bool
}{
	{"minilm.tokenizer.json", true},          // BertNormalizer, BertPreTokenizer, WordPiece
	{"bytelevel-bpe.tokenizer.json", true},   // GPT-2 byte-level BPE, <mask> with lstrip
	{"spm-bpe.model", true},                  // SentencePiece BPE
	{"spm-unigram.tokenizer.json", false},    // Precompiled normalizer, Metaspace, Unigram
	{"spm-unigram.model", false},             // SentencePiece Unigram: one Viterbi
	{"inline:metaspace-wordpiece", true},     // Metaspace without a normalizer
	{"inline:whitespace-strip-rstrip", true}, // Strip and an rstrip added token, dropped whitespace
	{"inline:bytelevel-rstrip", true},        // byte-level BPE with an rstrip added token
}

// inlineTokenizers are small tokenizer.json files for the cut rules the fixtures lack.
var inlineTokenizers = map[string]string{
	"metaspace-wordpiece": `{"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"\u2581a":1,"\u2581b":2,"##a":3,"\u2581":4,"<m>":5}},
		"pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":true},
		"added_tokens":[{"id":5,"content":"<m>","lstrip":true,"special":true}]}`,
	"whitespace-strip-rstrip": `{"model":{"type":"WordLevel","unk_token":"[UNK]","vocab":{"[UNK]":0,"a":1,"b":2,"<m>":3,"a b":4}},
		"normalizer":{"type":"Sequence","normalizers":[{"type":"Strip"},{"type":"NFKC"},{"type":"Lowercase"}]},
		"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Punctuation"}]},
		"added_tokens":[{"id":3,"content":"<m>","rstrip":true,"special":true},{"id":4,"content":"a\tb"}]}`,
	"bytelevel-rstrip": `{"model":{"type":"BPE","vocab":{"a":0,"b":1,"Ġ":2,"Ċ":3,"ĉ":4,"č":5,"Ġa":6,"<m>":7,"ab":8},"merges":["Ġ a","a b"]},
		"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
		"added_tokens":[{"id":7,"content":"<m>","rstrip":true,"special":true}]}`,
}

func loadFixture(t testing.TB, name string) Tokenizer {
	t.Helper()
	var tk Tokenizer
	var err error
	if inline, ok := strings.CutPrefix(name, "inline:"); ok {
		tk, err = LoadBytes(inline+".json", []byte(inlineTokenizers[inline]))
	} else {
		tk, err = Load(filepath.Join("testdata", name))
	}
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// streamIDs streams text through tk with the given sizes and returns the ids and the number of
// pieces it was encoded in.
func streamIDs(t testing.TB, tk Tokenizer, text string, chunk, maxRun int) ([]int64, int, error) {
	var got []int64
	pieces := 0
	err := stream(context.Background(), tk, strings.NewReader(text), func(ids []int64, _ []string) error {
		got = append(got, ids...)
		pieces++
		return nil
	}, false, chunk, maxRun)
	return got, pieces, err
}

// cutTexts are texts whose cuts the rules must get right: line endings, runs and kinds of
// whitespace, added tokens next to whitespace, long lines, Unicode after whitespace.
var cutTexts = []string{
	strings.Repeat("the quick brown fox.\r\n", 40),
	strings.Repeat("the quick brown fox.\n", 40),
	strings.Repeat("word ", 300),
	strings.Repeat("a  b\t\tc \n\n d\r\r\ne \v\f f", 40),
	strings.Repeat("x <mask> y\n<mask>z <m>  a\n\n<m>\tb a\tb a b\n", 30),
	strings.Repeat("é \u0301x \u00a0y\u3000z 東京 \U0001F600 d'\n's ", 30),
	strings.Repeat("ab", 500) + " " + strings.Repeat("b", 300),
	strings.Repeat(" ", 200) + "a" + strings.Repeat("\n", 200),
	strings.Repeat("ab\fab\vab cd\f", 40), // BertNormalizer drops \f and \v: they join words
}

// TestStreamCutsAreExact streams texts in small chunks, so that they are cut at every safe
// point the tokenizer has, and checks the ids are the whole text's.
func TestStreamCutsAreExact(t *testing.T) {
	for _, fx := range streamFixtures {
		tk := loadFixture(t, fx.file)
		if s := tk.(streamSafe).StreamSafe(); s != fx.cuts {
			t.Errorf("%s: StreamSafe is %v, want %v", fx.file, s, fx.cuts)
		}
		for i, text := range cutTexts {
			want, _, err := tk.EncodeRaw(text)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{8, 13, 64} {
				got, pieces, err := streamIDs(t, tk, text, chunk, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if !equalIDs(got, want) {
					t.Errorf("%s, text %d, chunks of %d: %d ids in %d pieces, the whole text %d (first difference at %d)", fx.file, i, chunk, len(got), pieces, len(want), firstDiff(got, want))
				}
				if fx.cuts && pieces < 2 && len(want) > 0 && i < 3 {
					t.Errorf("%s, text %d: never cut", fx.file, i)
				}
			}
		}
	}
}

// TestStreamCRLFAndLongLines: CRLF text and a line of words are cut (the old rule cut only
// after a '\n' between printable ASCII, so both were held whole).
func TestStreamCRLFAndLongLines(t *testing.T) {
	tk := loadFixture(t, "minilm.tokenizer.json")
	for _, eol := range []string{"\r\n", ""} {
		text := string(hostile.Text(1<<20, eol))
		_, pieces, err := streamIDs(t, tk, text, StreamChunk, StreamMaxRun)
		if err != nil {
			t.Fatal(err)
		}
		if pieces < 1<<20/StreamChunk-1 {
			t.Errorf("eol %q: 1 MiB encoded in %d pieces, want one a chunk", eol, pieces)
		}
	}
}

// TestStreamForcedCuts: a text with no safe cut point is cut at StreamMaxRun anyway, at its
// last whitespace, so memory stays bounded; the ids differ at most next to the cuts.
func TestStreamForcedCuts(t *testing.T) {
	tk := loadFixture(t, "spm-unigram.model") // no safe cut at all
	text := string(hostile.Text(100_000, "\n"))
	got, pieces, err := streamIDs(t, tk, text, 1000, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if pieces < 9 {
		t.Errorf("100 kB with a run limit of 10 kB in %d pieces", pieces)
	}
	want, _, _ := tk.EncodeRaw(text)
	if d := len(got) - len(want); d < -2*pieces || d > 2*pieces {
		t.Errorf("%d ids, the whole text %d", len(got), len(want))
	}
	// No whitespace at all: cut at a character boundary, never inside a character.
	tk = loadFixture(t, "bytelevel-bpe.tokenizer.json")
	text = strings.Repeat("é東", 10_000)
	got, pieces, err = streamIDs(t, tk, text, 1000, 10_000)
	if err != nil || pieces < 5 {
		t.Fatalf("%d pieces, %v", pieces, err)
	}
	var sb strings.Builder
	for _, id := range got {
		sb.WriteString(byteLevelDecode(tk.(*pipeline).model.(*bpe).v.tokens[id]))
	}
	if sb.String() != text {
		t.Errorf("the pieces do not decode to the text")
	}
}

func byteLevelDecode(tok string) string {
	var b []byte
	for _, r := range tok {
		b = append(b, runeByte[r])
	}
	return string(b)
}

// countingCutter counts how often Stream asks where to cut.
type countingCutter struct {
	Bytes
	asked *int
}

func (c countingCutter) cuts() cutRule {
	return cutRule{at: func(b []byte, i int) bool { *c.asked++; return b[i] == '\n' }}
}

// TestStreamLooksOnce: every byte is looked at once, whatever the line lengths (the old
// Stream looked for the last cut by rescanning everything it held every 64 KiB).
func TestStreamLooksOnce(t *testing.T) {
	asked := 0
	text := hostile.Text(4<<20, "") // one 4 MiB line of words: the rule never says yes
	if err := stream(context.Background(), countingCutter{asked: &asked}, bytes.NewReader(text), func([]int64, []string) error { return nil }, false, StreamChunk, StreamMaxRun); err != nil {
		t.Fatal(err)
	}
	spaces := bytes.Count(text, []byte(" "))
	if asked > spaces {
		t.Errorf("asked %d times about %d spaces", asked, spaces)
	}
}

// TestStreamPeakMemory tokenizes a 32 MB CRLF text, a 64 MB line and two 16 MB texts in a
// child process each and bounds the growth of its peak resident memory with the input: before,
// the CRLF text took 843 MB (held whole and rescanned) and a 16 MB line 498 MB. The bound is on
// the difference from the same child on an eighth of the text, not on the absolute figure,
// because the runtime's own share (a heap per processor, how far a starved collector lags)
// differs by tens of MiB between an idle 2-core machine and a loaded CI machine with many cores.
func TestStreamPeakMemory(t *testing.T) {
	if v, _ := env.Get(env.TestChild); strings.HasPrefix(v, "stream:") {
		tk := loadFixture(t, strings.TrimPrefix(v, "stream:"))
		f, err := os.Open("text.txt")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = Stream(context.Background(), tk, f, func(ids []int64, _ []string) error { n += len(ids); return nil })
		peak, _ := hostile.PeakRSS()
		fmt.Println(peak, n, err)
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("tokenizes 128 MB")
	}
	dir := t.TempDir()
	// The child's tokenizer files are found from the package directory.
	wd, _ := os.Getwd()
	_ = os.Symlink(filepath.Join(wd, "testdata"), filepath.Join(dir, "testdata"))
	peakOf := func(name, tok string, n int, eol string) int64 {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "text.txt"), hostile.Text(n, eol), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestStreamPeakMemory$")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env.TestChild+"=stream:"+tok)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		f := strings.Fields(string(out))
		if err != nil || len(f) != 3 || f[2] != "<nil>" {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		peak, _ := strconv.ParseInt(f[0], 10, 64)
		if peak <= 0 {
			t.Fatalf("%s: no peak resident memory (%q)", name, out)
		}
		t.Logf("%s, %d MB: %s tokens, peak resident memory %d MiB, %v", name, n>>20, f[1], peak>>20, time.Since(start).Round(time.Millisecond))
		return peak
	}
	const growth = 64 << 20
	for _, c := range []struct {
		name, tok string
		n         int
		eol       string
	}{
		{"CRLF", "minilm.tokenizer.json", 32 << 20, "\r\n"},
		{"one line", "minilm.tokenizer.json", 64 << 20, ""},
		{"one line, byte-level BPE", "bytelevel-bpe.tokenizer.json", 16 << 20, ""},
		{"SentencePiece Unigram", "spm-unigram.model", 16 << 20, "\n"},
	} {
		small := peakOf(c.name, c.tok, c.n/8, c.eol)
		big := peakOf(c.name, c.tok, c.n, c.eol)
		if big-small > growth {
			t.Errorf("%s: peak resident memory %d MiB for %d MB against %d MiB for %d MB: grows with the input by more than %d MiB",
				c.name, big>>20, c.n>>20, small>>20, c.n>>23, growth>>20)
		}
	}
}

// FuzzStream checks the streaming cutter with real tokenizers: any text, cut in chunks of any
// size at the points the tokenizer calls safe, encodes as the whole text does.
func FuzzStream(f *testing.F) {
	tks := make([]Tokenizer, len(streamFixtures))
	for i, fx := range streamFixtures {
		tks[i] = loadFixture(f, fx.file)
	}
	for _, text := range cutTexts {
		f.Add([]byte(text[:min(len(text), 200)]), uint8(7))
	}
	text, _ := readCorpus(f)
	f.Add([]byte(text[:2000]), uint8(31))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		for i, tk := range tks {
			want, _, err := tk.EncodeRaw(string(data))
			got, _, serr := streamIDs(t, tk, string(data), int(chunk)+1, 1<<20)
			if (err == nil) != (serr == nil) {
				t.Fatalf("%s: Encode: %v, Stream: %v", streamFixtures[i].file, err, serr)
			}
			if err == nil && !equalIDs(got, want) {
				t.Fatalf("%s, chunks of %d: %d ids, the whole text %d (first difference at %d)", streamFixtures[i].file, int(chunk)+1, len(got), len(want), firstDiff(got, want))
			}
		}
	})
}
