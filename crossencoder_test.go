package zoo_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/serve"
)

const (
	headsDir = "cmd/zoo/testdata/heads"
	minilm   = "zoo/tokenize/testdata/minilm.tokenizer.json"
)

// headsExpected is gen_heads.py's expected.json: PyTorch's numbers for cross.onnx and bi.onnx.
type headsExpected struct {
	Query string   `json:"query"`
	Texts []string `json:"texts"`
	Pairs []struct {
		IDs, Types []int64
		Logit      float64
	} `json:"pairs"`
	Long struct {
		Query, Text string
		Tokens      int
		IDs, Types  []int64
		Logit       float64
	} `json:"long"`
	Embeddings []struct {
		IDs               []int64   `json:"ids"`
		SentenceEmbedding []float32 `json:"sentence_embedding"`
		Mean              []float32 `json:"mean"`
		PoolerOutput      []float32 `json:"pooler_output"`
	} `json:"embeddings"`
}

func readHeads(t *testing.T) headsExpected {
	t.Helper()
	b, err := os.ReadFile(headsDir + "/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var e headsExpected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRerank checks the library's pair call against PyTorch on a BERT cross-encoder: each
// pair's logit within 1e-5, the ranking by it, and a pair over the window cut as Hugging
// Face cuts it (refused without Truncate).
func TestRerank(t *testing.T) {
	want := readHeads(t)
	m := load(t, headsDir+"/cross.onnx", zoo.LoadOptions{Tokenizer: minilm})
	enc, err := m.NewEncoder(zoo.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ranked, err := enc.Rerank(context.Background(), want.Query, want.Texts...)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range ranked {
		if d := math.Abs(r.Logit - want.Pairs[r.Index].Logit); d > 1e-5 {
			t.Errorf("text %d: logit %v, PyTorch %v", r.Index, r.Logit, want.Pairs[r.Index].Logit)
		}
		if math.Abs(r.Score-1/(1+math.Exp(-r.Logit))) > 1e-12 || (k > 0 && r.Logit > ranked[k-1].Logit) {
			t.Errorf("rank %d: %+v", k, r)
		}
	}
	long := [2]string{want.Long.Query, want.Long.Text}
	_, err = enc.ScorePairs(context.Background(), [2]string{"q", "short"}, long)
	var tl *zoo.TooLongError
	if !zoo.IsInput(err) || !errors.As(err, &tl) || !tl.Pair || tl.Index != 1 || tl.Text != long[1] || tl.Tokens != want.Long.Tokens {
		t.Errorf("a pair of %d tokens over the window of 64 (second of two): %v, want an *InputError holding a pair TooLongError for pair 1 of %d tokens", want.Long.Tokens, err, want.Long.Tokens)
	}
	cut, err := m.NewEncoder(zoo.EncoderOptions{Truncate: true})
	if err != nil {
		t.Fatal(err)
	}
	logits, err := cut.ScorePairs(context.Background(), long)
	if err != nil || math.Abs(logits[0]-want.Long.Logit) > 1e-5 {
		t.Errorf("the long pair cut to 64: %v %v, PyTorch %v", logits, err, want.Long.Logit)
	}
	// A model without a score output is not a cross-encoder.
	bi := load(t, headsDir+"/bi.onnx", zoo.LoadOptions{Tokenizer: minilm})
	be, _ := bi.NewEncoder(zoo.EncoderOptions{})
	if _, err := be.Rerank(context.Background(), "a", "b"); !zoo.IsInput(err) {
		t.Errorf("Rerank on a model without a score output: %v", err)
	}
}

// TestEmbeddingChoice: a model with its own sentence_embedding serves it, never pooler_output;
// ServeOptions.EmbeddingOutput names another; a name it does not have is an *InputError.
func TestEmbeddingChoice(t *testing.T) {
	bi := load(t, headsDir+"/bi.onnx", zoo.LoadOptions{Tokenizer: minilm})
	for _, c := range []struct {
		requested, output string
		perToken          bool
	}{{"", "sentence_embedding", false}, {"last_hidden_state", "last_hidden_state", true}, {"pooler_output", "pooler_output", false}} {
		got, err := zoo.ChooseEmbedding(bi.Graph(), c.requested)
		if err != nil || got.Output != c.output || got.PerToken != c.perToken {
			t.Errorf("ChooseEmbedding(%q) = %+v, %v", c.requested, got, err)
		}
	}
	bert := load(t, "cmd/zoo/testdata/bert/bert-opset17.onnx", zoo.LoadOptions{Tokenizer: minilm})
	if got, _ := zoo.ChooseEmbedding(bert.Graph(), ""); got.Output != "last_hidden_state" || !got.PerToken {
		t.Errorf("BERT without a head of its own: %+v, want the mean of last_hidden_state (never pooler_output)", got)
	}
	pooled, err := bi.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean})
	if err != nil || !strings.Contains(pooled.Pooling(), "mean of last_hidden_state → embedding (the model's own sentence embedding is its output sentence_embedding") {
		t.Errorf("zoo run --pool's line does not name the model's own embedding: %q %v", pooled.Pooling(), err)
	}
	var ie *zoo.InputError
	if _, err := bi.ServeEncoderWith(context.Background(), "bi", zoo.ServeOptions{EmbeddingOutput: "nope"}); !asInput(err, &ie) || ie.Option != "ServeOptions.EmbeddingOutput" {
		t.Errorf("an unknown embedding output: %v", err)
	}
	if _, err := bi.ServeEncoderWith(context.Background(), "bi", zoo.ServeOptions{MaxTokens: 65}); !asInput(err, &ie) || ie.Option != "ServeOptions.MaxTokens" {
		t.Errorf("max tokens over the position table: %v", err)
	}
	enc, err := bi.ServeEncoderWith(context.Background(), "bi", zoo.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := enc.Info()
	if info.Embedding != "sentence_embedding" || info.MaxLen != 64 || info.Score != "" {
		t.Errorf("served info %+v", info)
	}
	if _, ok := enc.(serve.PairTokenizer); ok && enc.(*serve.Funcs).TokenizePairFunc != nil {
		t.Errorf("a model without a score output encodes pairs for /rerank")
	}
}

func asInput(err error, ie **zoo.InputError) bool {
	e, ok := err.(*zoo.InputError)
	if ok {
		*ie = e
	}
	return ok
}
