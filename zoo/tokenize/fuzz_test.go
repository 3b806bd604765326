package tokenize

import (
	"encoding/base64"
	"errors"
	"math"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
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

// spmPiece is one piece of a SentencePiece model built by spmModel.
type spmPiece struct {
	s     string
	score float32
	typ   int32
}

// spmModel encodes a small SentencePiece ModelProto: kind 1 (Unigram) or 2 (BPE), the pieces,
// byte fallback, and a normalizer spec (charsmap may be nil).
func spmModel(kind int, pieces []spmPiece, byteFallback bool, charsmap []byte) []byte {
	var b []byte
	for _, p := range pieces {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, p.s)
		m = protowire.AppendTag(m, 2, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.typ))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	var tr []byte
	tr = protowire.AppendTag(tr, 3, protowire.VarintType)
	tr = protowire.AppendVarint(tr, uint64(kind))
	if byteFallback {
		tr = protowire.AppendTag(tr, 35, protowire.VarintType)
		tr = protowire.AppendVarint(tr, 1)
	}
	for _, f := range [][2]uint64{{40, 0}, {41, 1}, {42, 2}, {43, uint64(math.MaxUint64)}} { // unk, bos, eos, pad (-1)
		tr = protowire.AppendTag(tr, protowire.Number(f[0]), protowire.VarintType)
		tr = protowire.AppendVarint(tr, f[1])
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, tr)
	var ns []byte
	name := "identity"
	if charsmap != nil {
		name = "nmt_nfkc"
		ns = protowire.AppendTag(ns, 2, protowire.BytesType)
		ns = protowire.AppendBytes(ns, charsmap)
	}
	ns = protowire.AppendTag(ns, 1, protowire.BytesType)
	ns = protowire.AppendString(ns, name)
	for _, f := range []protowire.Number{3, 4, 5} { // add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces
		ns = protowire.AppendTag(ns, f, protowire.VarintType)
		ns = protowire.AppendVarint(ns, 1)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, ns)
}

// spmSeeds are small valid SentencePiece models of each kind: the fixtures are 12 to 250 KB,
// and the fuzzer, which minimises every input that finds new code, spent its time on them
// (about 20 executions a second); these run thousands.
func spmSeeds() [][]byte {
	common := []spmPiece{{"<unk>", 0, spUnknown}, {"<s>", 0, spControl}, {"</s>", 0, spControl}, {"[X]", 0, spUserDefined}}
	words := []spmPiece{{"\u2581", -1, spNormal}, {"a", -2, spNormal}, {"b", -2, spNormal}, {"\u2581a", -1.5, spNormal},
		{"ab", -1.5, spNormal}, {"\u2581ab", -1, spNormal}, {"東", -3, spNormal}}
	bytePieces := []spmPiece{{"<0x41>", 0, spByte}, {"<0xE4>", 0, spByte}, {"<0x0A>", 0, spByte}}
	uni := append(append(append([]spmPiece{}, common...), words...), bytePieces...)
	bpe := append(append([]spmPiece{}, common...), words...)
	tinyCharsmap, _ := base64.StdEncoding.DecodeString("CAAAAAEAAAAAAAAAAA==")
	return [][]byte{
		spmModel(1, uni, true, nil),
		spmModel(2, bpe, false, nil),
		spmModel(1, append(append([]spmPiece{}, common...), words...), false, tinyCharsmap),
		spmModel(2, append(append([]spmPiece{}, common...), spmPiece{"a", 0, spUnused}), false, nil), // refused: unused BPE piece
	}
}

// FuzzLoadSentencePiece: any bytes as a .model either load into a tokenizer that encodes text
// without panicking, or fail with an ErrFormat error.
func FuzzLoadSentencePiece(f *testing.F) {
	for _, seed := range spmSeeds() {
		f.Add(seed)
	}
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

// TestSPMSeeds: the small models FuzzLoadSentencePiece starts from load (but the last) and
// encode, so that the fuzzer starts deep.
func TestSPMSeeds(t *testing.T) {
	seeds := spmSeeds()
	for i, seed := range seeds {
		tk, err := LoadBytes("seed.model", seed)
		if i == len(seeds)-1 {
			if err == nil {
				t.Errorf("seed %d loads", i)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		ids, toks, err := tk.Encode("ab a [X] b\n東A")
		if err != nil || len(ids) < 5 || len(ids) != len(toks) {
			t.Errorf("seed %d (%s): %v %q %v", i, tk.Kind(), ids, toks, err)
		}
	}
}

// FuzzLoadVocabTxt: any bytes as a vocab.txt either load into a BERT tokenizer that encodes
// text, in one piece or streamed in pieces, to the same ids, or fail with an ErrFormat error.
func FuzzLoadVocabTxt(f *testing.F) {
	f.Add([]byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##lo\nhe\n##llo\nw\n##ö\n##rld\n,\n!\n東\n京\ndon\n'\nt\n"), "Hello, wörld! 東京 don't [MASK] x")
	f.Add([]byte("[UNK]\r\n[CLS]\r\n[SEP]\r\na\r\n##a\r\n[UNK]\r\n"), "aaa a\r\na")
	f.Add([]byte("[PAD]\n[UNK]\n"), "a")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tk, err := LoadBytes("vocab.txt", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		ids, toks, err := tk.EncodeRaw(text)
		if err != nil {
			return // not UTF-8
		}
		if len(ids) != len(toks) {
			t.Fatalf("%d ids, %d tokens", len(ids), len(toks))
		}
		for _, id := range ids {
			if id < 0 || id >= int64(tk.VocabSize()) {
				t.Fatalf("id %d outside VocabSize %d", id, tk.VocabSize())
			}
		}
		got, _, err := streamIDs(t, tk, text, 3, 1<<20)
		if err != nil || !equalIDs(got, ids) {
			t.Fatalf("streamed in chunks of 3: %v %v, whole %v", got, err, ids)
		}
	})
}
