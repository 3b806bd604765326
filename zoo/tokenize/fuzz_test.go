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
	// Small seeds: the fuzzer minimises every new input, which takes too long on the fixtures.
	f.Add([]byte(`{"added_tokens":[{"id":5,"content":"<mask>","lstrip":true,"special":true}],"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true},"post_processor":{"type":"RobertaProcessing","sep":["</s>",1],"cls":["<s>",0]},"model":{"type":"BPE","vocab":{"<s>":0,"</s>":1,"a":2,"b":3,"ab":4,"Ġ":6,"Ġab":7},"merges":["a b","Ġ ab"],"byte_fallback":true}}`))
	f.Add([]byte(`{"normalizer":{"type":"Precompiled","precompiled_charsmap":"CAAAAAEAAAAAAAAAAA=="},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Split","pattern":{"String":"-"},"behavior":"MergedWithNext"},{"type":"Digits","individual_digits":true},{"type":"Punctuation"}]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]"}},{"Sequence":{"id":"A"}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[0],"tokens":["[CLS]"]}}},"model":{"type":"WordLevel","vocab":{"[CLS]":0,"a":1,"[UNK]":2},"unk_token":"[UNK]"}}`))
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
