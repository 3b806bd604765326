package tokenize

import (
	"errors"
	"os"
	"testing"
)

// fuzzText is encoded by every tokenizer a fuzzed file yields, to reach the model code too.
const fuzzText = "Hello, wörld! 東京 👩\u200d💻 don't\t  x\u200by [CLS] <s>"

func addSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzLoadTokenizerJSON: any bytes as a tokenizer.json either load into a tokenizer that
// encodes text without panicking, or fail with an ErrFormat error.
func FuzzLoadTokenizerJSON(f *testing.F) {
	addSeeds(f, "testdata/bytelevel-bpe.tokenizer.json", "testdata/spm-unigram.tokenizer.json")
	f.Add([]byte(`{"model":{"type":"WordPiece","vocab":{"[UNK]":0,"he":1,"##llo":2}},"normalizer":{"type":"BertNormalizer"},"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",4]}}`))
	f.Add([]byte(`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["\u2581a",-1]]},"normalizer":{"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Replace","pattern":{"String":"  "},"content":" "}]},"pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := LoadBytes("fuzz.json", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		ids, toks, err := tk.Encode(fuzzText)
		if err == nil && len(ids) != len(toks) {
			t.Fatalf("%d ids, %d tokens", len(ids), len(toks))
		}
		for _, id := range ids {
			if id < 0 || id >= int64(tk.VocabSize()) {
				t.Fatalf("id %d outside VocabSize %d", id, tk.VocabSize())
			}
		}
	})
}

// FuzzLoadSentencePiece: any bytes as a .model either load into a tokenizer that encodes text
// without panicking, or fail with an ErrFormat error.
func FuzzLoadSentencePiece(f *testing.F) {
	addSeeds(f, "testdata/spm-unigram-bytes.model")
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := LoadBytes("fuzz.model", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		ids, toks, err := tk.Encode(fuzzText)
		if err == nil && len(ids) != len(toks) {
			t.Fatalf("%d ids, %d tokens", len(ids), len(toks))
		}
		for _, id := range ids {
			if id < 0 || id >= int64(tk.VocabSize()) {
				t.Fatalf("id %d outside VocabSize %d", id, tk.VocabSize())
			}
		}
	})
}
