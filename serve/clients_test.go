package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zoo-dev/zoo/serve/inferencepb"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// crossModel is a fake cross-encoder with its own embedding head: TokenizePair writes
// 1 a 2 b 2 with type ids 0…0 1…1 (a BERT pair template), truncating the longer side first;
// its output score is the row's sum of token·(type+1) over 100, and its output emb (B, 3) is
// (first token, length, 2·length), the model's own sentence embedding.
func crossModel() *Funcs {
	byteIDs := func(s string) []int64 {
		ids := make([]int64, len(s))
		for i, c := range []byte(s) {
			ids[i] = int64(c%40) + 3
		}
		return ids
	}
	return &Funcs{Name: "cross", Vocab: 50, MaxLen: 16, Score: "score", Embedding: "emb",
		Outputs: []Output{{Name: "score", Shape: []int64{-1, 1}}, {Name: "emb", Shape: []int64{-1, 3}}},
		TokenizeFunc: func(text string) ([]int64, error) {
			return append(append([]int64{1}, byteIDs(text)...), 2), nil
		},
		TruncateFunc: func(ids []int64, n int) []int64 { return append(ids[:n-1:n-1], 2) },
		TokensFunc: func(text string, special bool) ([]Token, error) {
			var toks []Token
			if special {
				toks = append(toks, Token{ID: 1, Text: "[CLS]", Special: true})
			}
			for i, id := range byteIDs(text) {
				toks = append(toks, Token{ID: id, Text: text[i : i+1]})
			}
			if special {
				toks = append(toks, Token{ID: 2, Text: "[SEP]", Special: true})
			}
			return toks, nil
		},
		TokenizePairFunc: func(a, b string, truncate int) ([]int64, []int64, error) {
			x, y := byteIDs(a), byteIDs(b)
			for truncate > 0 && len(x)+len(y)+3 > truncate {
				if len(x) > len(y) {
					x = x[:len(x)-1]
				} else {
					y = y[:len(y)-1]
				}
			}
			ids := append(append(append(append([]int64{1}, x...), 2), y...), 2)
			types := make([]int64, len(ids))
			for i := len(x) + 2; i < len(ids); i++ {
				types[i] = 1
			}
			return ids, types, nil
		},
		RunFunc: func(_ context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error) {
			score := &tensor.Tensor{DType: tensor.Float32, Shape: []int{b.B, 1}, F32: make([]float32, b.B)}
			emb := &tensor.Tensor{DType: tensor.Float32, Shape: []int{b.B, 3}, F32: make([]float32, 3*b.B)}
			for i := 0; i < b.B; i++ {
				var sum float32
				for j := 0; j < b.Lengths[i]; j++ {
					typ := int64(0)
					if b.Types != nil {
						typ = b.Types[i*b.N+j]
					}
					sum += float32(b.Tokens[i*b.N+j] * (typ + 1))
				}
				score.F32[i] = sum / 100
				emb.F32[3*i], emb.F32[3*i+1], emb.F32[3*i+2] = float32(b.Tokens[i*b.N]), float32(b.Lengths[i]), float32(2*b.Lengths[i])
			}
			return map[string]*tensor.Tensor{"score": score, "emb": emb}, nil
		},
		PoolFunc: func(h *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error) {
			return nil, fmt.Errorf("cross pools nothing")
		},
	}
}

func startServer(t *testing.T, cfg Config, encs ...Encoder) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = time.Millisecond
	}
	s, err := New(cfg, encs)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		s.Stop()
	})
	return s, hs
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

// TestOpenAIClients checks /v1/embeddings as OpenAI's SDKs call it: base64 (the SDKs'
// default) carries the float answer's bits, dimensions keeps the first values renormalised,
// usage counts tokens, and /v1/models lists the models.
func TestOpenAIClients(t *testing.T) {
	_, hs := startServer(t, Config{}, (&fakeModel{}).model())
	c := hs.Client()
	type answer struct {
		Object string
		Model  string
		Data   []struct {
			Object    string
			Index     int
			Embedding json.RawMessage
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	call := func(body string) answer {
		t.Helper()
		code, _, b := post(t, c, hs.URL+"/v1/embeddings", body)
		var a answer
		if err := json.Unmarshal(b, &a); code != 200 || err != nil {
			t.Fatalf("%s: %d %s", body, code, b)
		}
		return a
	}
	floats := call(`{"model":"fake","input":["abc","hello"],"encoding_format":"float"}`)
	b64 := call(`{"model":"fake","input":["abc","hello"],"encoding_format":"base64"}`)
	if floats.Object != "list" || floats.Model != "fake" || len(floats.Data) != 2 || floats.Usage.PromptTokens != 4+6 || floats.Usage.TotalTokens != 10 {
		t.Errorf("answer %+v", floats)
	}
	for i := range floats.Data {
		var want []float32
		if err := json.Unmarshal(floats.Data[i].Embedding, &want); err != nil || len(want) != fakeD {
			t.Fatalf("float embedding %s", floats.Data[i].Embedding)
		}
		var s string
		if err := json.Unmarshal(b64.Data[i].Embedding, &s); err != nil {
			t.Fatalf("base64 embedding %s is not a string", b64.Data[i].Embedding)
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != 4*fakeD {
			t.Fatalf("base64 %q: %v", s, err)
		}
		for k := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:])); got != want[k] {
				t.Errorf("text %d value %d: base64 %v, float %v", i, k, got, want[k])
			}
		}
		// dimensions 2: the first two values, renormalised.
		var cut []float32
		json.Unmarshal(call(`{"input":["abc","hello"],"dimensions":2}`).Data[i].Embedding, &cut)
		n := math.Hypot(float64(want[0]), float64(want[1]))
		if len(cut) != 2 || math.Abs(float64(cut[0])-float64(want[0])/n) > 1e-6 || math.Abs(float64(cut[1])-float64(want[1])/n) > 1e-6 {
			t.Errorf("dimensions 2 of %v: %v", want, cut)
		}
	}
	code, b := get(t, c, hs.URL+"/v1/models")
	if code != 200 || !strings.Contains(string(b), `"object":"list"`) || !strings.Contains(string(b), `{"id":"fake","object":"model","created":`) {
		t.Errorf("/v1/models: %d %s", code, b)
	}
	if code, b := get(t, c, hs.URL+"/v1/models/fake"); code != 200 || !strings.Contains(string(b), `"owned_by":"zoo"`) {
		t.Errorf("/v1/models/fake: %d %s", code, b)
	}
	if code, b := get(t, c, hs.URL+"/v1/models/nope"); code != 404 || !strings.Contains(string(b), `"code":"model_not_found"`) {
		t.Errorf("/v1/models/nope: %d %s", code, b)
	}
}

// TestAPIKey: with a key, requests without it (or with another) are 401 in each API's shape,
// with it they pass, and the probes stay open.
func TestAPIKey(t *testing.T) {
	_, hs := startServer(t, Config{APIKey: "sekrit"}, (&fakeModel{}).model())
	c := hs.Client()
	for _, path := range []string{"/v2/health/live", "/v2/health/ready", "/health"} {
		if code, b := get(t, c, hs.URL+path); code != 200 {
			t.Errorf("probe %s without a key: %d %s", path, code, b)
		}
	}
	for _, path := range []string{"/v1/models", "/info", "/metrics", "/v2/models/fake"} {
		for _, auth := range []string{"", "Bearer nope", "Basic sekrit"} {
			code, b := get(t, c, hs.URL+path, "Authorization", auth)
			if _, err := errorMessage(path, b); code != 401 || err != nil {
				t.Errorf("%s with %q: %d %s (%v)", path, auth, code, b, err)
			}
		}
		if code, b := get(t, c, hs.URL+path, "Authorization", "Bearer sekrit"); code != 200 {
			t.Errorf("%s with the key: %d %s", path, code, b)
		}
	}
}

// TestLogs: no line per request unless AccessLog is set; a failed run is logged on Logger.
func TestLogs(t *testing.T) {
	var life, access bytes.Buffer
	f := (&fakeModel{}).model()
	_, hs := startServer(t, Config{Logger: slog.New(slog.NewJSONHandler(&life, nil))}, f)
	post(t, hs.Client(), hs.URL+"/embed", `{"inputs":"abc"}`)
	if life.Len() != 0 {
		t.Errorf("a request logged on Logger without AccessLog: %s", life.String())
	}
	_, hs = startServer(t, Config{AccessLog: slog.New(slog.NewJSONHandler(&access, nil))}, (&fakeModel{}).model())
	post(t, hs.Client(), hs.URL+"/embed", `{"inputs":"abc"}`)
	post(t, hs.Client(), hs.URL+"/embed", `{"inputs":5}`)
	if n := strings.Count(access.String(), `"msg":"request"`); n != 2 || !strings.Contains(access.String(), `"status":400`) {
		t.Errorf("access log: %d lines: %s", n, access.String())
	}
}

// TestTEI checks text-embeddings-inference's endpoints against their documented shapes.
func TestTEI(t *testing.T) {
	s, hs := startServer(t, Config{MaxSequences: 8}, crossModel())
	c := hs.Client()
	if code, b := get(t, c, hs.URL+"/health"); code != 200 || len(b) != 0 {
		t.Errorf("/health: %d %q", code, b)
	}
	code, b := get(t, c, hs.URL+"/info")
	var info map[string]any
	if err := json.Unmarshal(b, &info); code != 200 || err != nil {
		t.Fatalf("/info: %d %s", code, b)
	}
	for k, want := range map[string]any{"model_id": "cross", "model_dtype": "float32", "max_input_length": 16.0, "max_client_batch_size": 8.0,
		"auto_truncate": false, "embedding_output": "the model's own output emb", "score_output": "score"} {
		if fmt.Sprint(info[k]) != fmt.Sprint(want) {
			t.Errorf("/info %s: %v, want %v", k, info[k], want)
		}
	}
	if _, ok := info["model_type"].(map[string]any)["reranker"]; !ok {
		t.Errorf("/info model_type %v, want a reranker", info["model_type"])
	}
	// /embed answers the model's own embedding output, normalised unless asked not to.
	code, _, b = post(t, c, hs.URL+"/embed", `{"inputs":["ab","abcd"],"normalize":false}`)
	if code != 200 || string(b) != `[[1,4,8],[1,6,12]]` {
		t.Errorf("/embed of the model's own output: %d %s", code, b)
	}
	code, _, b = post(t, c, hs.URL+"/embed", `{"inputs":"ab"}`)
	var e [][]float32
	if json.Unmarshal(b, &e); code != 200 || len(e) != 1 || math.Abs(float64(e[0][1])-4/math.Sqrt(81)) > 1e-6 {
		t.Errorf("/embed normalised: %d %s", code, b)
	}
	// truncate: the text keeps [CLS] and [SEP] within the 16 tokens.
	long := strings.Repeat("x", 30)
	if code, _, b := post(t, c, hs.URL+"/embed", `{"inputs":"`+long+`","normalize":false,"truncate":true}`); code != 200 || string(b) != `[[1,16,32]]` {
		t.Errorf("/embed truncate: %d %s", code, b)
	}
	if code, _, b := post(t, c, hs.URL+"/embed", `{"inputs":"`+long+`"}`); code != 413 || !strings.Contains(string(b), "limit of 16 tokens") {
		t.Errorf("/embed too long: %d %s", code, b)
	}
	if code, _, b := post(t, c, hs.URL+"/embed", `{"inputs":["a","a","a","a","a","a","a","a","a"]}`); code != 413 || !strings.Contains(string(b), "limit of 8 per request") {
		t.Errorf("/embed over the sequences limit: %d %s", code, b)
	}
	s.cfg.Truncate = true // the server's default for requests that do not say
	if code, _, b := post(t, c, hs.URL+"/embed", `{"inputs":"`+long+`","normalize":false}`); code != 200 || string(b) != `[[1,16,32]]` {
		t.Errorf("/embed with the server truncating: %d %s", code, b)
	}
	s.cfg.Truncate = false
	// /tokenize
	code, _, b = post(t, c, hs.URL+"/tokenize", `{"inputs":["ab"]}`)
	if code != 200 || string(b) != `[[{"id":1,"text":"[CLS]","special":true,"start":null,"stop":null},{"id":20,"text":"a","special":false,"start":null,"stop":null},{"id":21,"text":"b","special":false,"start":null,"stop":null},{"id":2,"text":"[SEP]","special":true,"start":null,"stop":null}]]` {
		t.Errorf("/tokenize: %d %s", code, b)
	}
	if code, _, b := post(t, c, hs.URL+"/tokenize", `{"inputs":"ab","add_special_tokens":false}`); code != 200 || strings.Contains(string(b), "CLS") {
		t.Errorf("/tokenize without special tokens: %d %s", code, b)
	}
	// /rerank: scores by the pair's ids and type ids, sorted, sigmoid unless raw.
	raw := func(q, p string) float64 {
		ids, types, _ := crossModel().TokenizePair(q, p, 0)
		var sum float32
		for i := range ids {
			sum += float32(ids[i] * (types[i] + 1))
		}
		return float64(sum / 100)
	}
	code, _, b = post(t, c, hs.URL+"/rerank", `{"query":"q","texts":["a","zzzz","bb"],"raw_scores":true,"return_text":true}`)
	var ranks []struct {
		Index int
		Score float64
		Text  *string
	}
	if err := json.Unmarshal(b, &ranks); code != 200 || err != nil || len(ranks) != 3 {
		t.Fatalf("/rerank: %d %s", code, b)
	}
	texts := []string{"a", "zzzz", "bb"}
	for k, r := range ranks {
		if want := raw("q", texts[r.Index]); math.Abs(r.Score-want) > 1e-6 || r.Text == nil || *r.Text != texts[r.Index] {
			t.Errorf("rank %d: %+v, want score %v", k, r, want)
		}
		if k > 0 && r.Score > ranks[k-1].Score {
			t.Errorf("ranks not sorted: %s", b)
		}
	}
	code, _, b = post(t, c, hs.URL+"/rerank", `{"query":"q","texts":["a"]}`)
	ranks = nil
	if err := json.Unmarshal(b, &ranks); code != 200 || err != nil || ranks[0].Text != nil || math.Abs(ranks[0].Score-1/(1+math.Exp(-raw("q", "a")))) > 1e-9 {
		t.Errorf("/rerank sigmoid: %d %s", code, b)
	}
	if code, _, b := post(t, c, hs.URL+"/rerank", `{"query":"q","texts":["`+long+`"]}`); code != 413 {
		t.Errorf("/rerank too long: %d %s", code, b)
	}
	if code, _, b := post(t, c, hs.URL+"/rerank", `{"query":"q","texts":["`+long+`"],"truncate":true,"raw_scores":true}`); code != 200 ||
		!strings.Contains(string(b), fmt.Sprint(raw("q", long[:12]))) {
		t.Errorf("/rerank truncate: %d %s, want the score of q with 12 x", code, b)
	}
}

// TestAnswerLimit: a request whose answer would be over MaxAnswer, or whose tokens are over
// MaxTokens, is a 413 naming the limit, before it runs.
func TestAnswerLimit(t *testing.T) {
	f := &fakeModel{}
	_, hs := startServer(t, Config{MaxAnswer: 100, MaxTokens: 30}, f.model())
	c := hs.Client()
	if code, _, b := post(t, c, hs.URL+"/v2/models/fake/infer", tokensBody([][]int64{{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}}, 6, false)); code != 413 ||
		!strings.Contains(string(b), "limit of 100 per answer") {
		t.Errorf("answer over the limit: %d %s", code, b)
	}
	if code, _, b := post(t, c, hs.URL+"/embed", `{"inputs":["`+strings.Repeat("a", 20)+`","`+strings.Repeat("a", 20)+`"]}`); code != 413 || !strings.Contains(string(b), "limit of 30 per request") {
		t.Errorf("tokens over the limit: %d %s", code, b)
	}
	if len(f.sizes) != 0 {
		t.Errorf("refused requests ran: %v", f.sizes)
	}
	if code, _, b := post(t, c, hs.URL+"/v2/models/fake/infer", tokensBody([][]int64{{1, 2}}, 2, false)); code != 200 {
		t.Errorf("a small answer: %d %s", code, b)
	}
}

// TestAnswerBudget: the answers being computed at once hold at most 4 × MaxAnswer values; a
// request past that is a 503 with Retry-After, and the budget comes back when they finish.
func TestAnswerBudget(t *testing.T) {
	f := &fakeModel{gate: make(chan struct{}), ran: make(chan struct{}, 64)}
	s, hs := startServer(t, Config{MaxAnswer: 100}, f.model())
	body := tokensBody([][]int64{{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}}, 6, false) // 72 + 6 values
	codes := make(chan int, 5)
	for range 5 {
		go func() {
			code, _, _ := post(t, hs.Client(), hs.URL+"/v2/models/fake/infer", body)
			codes <- code
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); s.answering.Load() < 5*78 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	code, hdr, b := post(t, hs.Client(), hs.URL+"/v2/models/fake/infer", body)
	if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(string(b), "retry later") {
		t.Errorf("a sixth answer past 400 values in flight: %d %s", code, b)
	}
	close(f.gate)
	for range 5 {
		if code := <-codes; code != 200 {
			t.Errorf("an answer within the budget: %d", code)
		}
	}
	if n := s.answering.Load(); n != 0 {
		t.Errorf("%d values still reserved after the answers", n)
	}
}

// TestGRPCAPIKey: with a key, ModelInfer and the metadata RPCs need the authorization
// metadata; the liveness and readiness RPCs do not.
func TestGRPCAPIKey(t *testing.T) {
	s, err := New(Config{APIKey: "sekrit", MaxDelay: time.Millisecond}, []Encoder{(&fakeModel{}).model()})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	g := grpc.NewServer()
	s.RegisterGRPC(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	defer g.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := c.ServerReady(ctx, &pb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Errorf("ServerReady without a key: %v %v", r, err)
	}
	req := &pb.ModelInferRequest{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: InputTokens, Datatype: "INT64", Shape: []int64{1, 2}, Contents: &pb.InferTensorContents{Int64Contents: []int64{3, 4}}}}}
	if _, err := c.ModelInfer(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ModelInfer without a key: %v, want Unauthenticated", err)
	}
	if _, err := c.ModelMetadata(grpcmd.AppendToOutgoingContext(ctx, "authorization", "Bearer nope"), &pb.ModelMetadataRequest{Name: "fake"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ModelMetadata with a wrong key: %v, want Unauthenticated", err)
	}
	if _, err := c.ModelInfer(grpcmd.AppendToOutgoingContext(ctx, "authorization", "Bearer sekrit"), req); err != nil {
		t.Errorf("ModelInfer with the key: %v", err)
	}
}
