package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/zoo-dev/zoo/internal/env"
)

// TestServeOpenAISDK drives zoo serve with the official OpenAI Node SDK (npm openai), as an
// application does: embeddings.create with no encoding_format (the SDK asks for base64 and
// decodes it), with float, with dimensions 8; models.list and models.retrieve; a wrong key.
// The vectors are zoo run's, bit for bit.
func TestServeOpenAISDK(t *testing.T) {
	dir, _ := env.Get(env.OpenAINode)
	if dir == "" {
		t.Skip("ZOO_OPENAI_NODE is not set (the openai npm package's node_modules; .ci/run installs it)")
	}
	if _, err := os.Stat(filepath.Join(dir, "openai", "package.json")); err != nil {
		t.Skipf("no openai package under %s: %v", dir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node to run the OpenAI SDK")
	}
	const model = "vanilla.tiny"
	texts := []string{"hello there", "zoo serves encoders to the OpenAI SDK"}
	var plain, normed []runOutputs
	for _, s := range texts {
		plain = append(plain, zooRun(t, model, s, "--pool", "mean"))
		normed = append(normed, zooRun(t, model, s, "--pool", "mean", "--normalize"))
	}
	p := startServe(t, model, "--api-key", "sekrit")
	in, _ := json.Marshal(texts)
	script, _ := filepath.Abs("testdata/openai_client.cjs")
	cmd := exec.Command(node, script, p.url+"/v1", "sekrit", model, string(in))
	cmd.Env = append(os.Environ(), "NODE_PATH="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the OpenAI SDK: %v\n%s", err, stderr.String())
	}
	t.Logf("node + the OpenAI SDK, 6 calls: %s", time.Since(t0).Round(time.Millisecond))
	var r struct {
		Default, Float, Dimensions [][]float32
		Usage                      struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
		Model, Retrieved, WrongKey string
		Models                     []string
		MS                         map[string]float64
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("round trips (ms): %v", r.MS)
	tokens := len(plain[0].Tokens.Data) + len(plain[1].Tokens.Data)
	if r.Model != model || r.Usage.PromptTokens != tokens || r.Usage.TotalTokens != tokens {
		t.Errorf("model %q, usage %+v; want %s and %d tokens", r.Model, r.Usage, model, tokens)
	}
	for i := range texts {
		want := normed[i].Outputs["embedding"].Data
		if err := near(r.Default[i], want, 0); err != nil {
			t.Errorf("text %d, the SDK's default (base64): %v", i, err)
		}
		if err := near(r.Float[i], want, 0); err != nil {
			t.Errorf("text %d, float: %v", i, err)
		}
		// dimensions 8: the first 8 values of the mean, renormalised.
		mean := plain[i].Outputs["embedding"].Data[:8]
		var n float64
		for _, v := range mean {
			n += float64(v) * float64(v)
		}
		cut := make([]float32, 8)
		for k, v := range mean {
			cut[k] = float32(float64(v) / math.Sqrt(n))
		}
		if err := near(r.Dimensions[i], cut, 1e-6); err != nil {
			t.Errorf("text %d, dimensions 8: %v", i, err)
		}
	}
	if fmt.Sprint(r.Models) != "["+model+"]" || r.Retrieved != model {
		t.Errorf("models.list %v, models.retrieve %q", r.Models, r.Retrieved)
	}
	if r.WrongKey != "401 AuthenticationError" {
		t.Errorf("a wrong key: %q, want 401 AuthenticationError", r.WrongKey)
	}
}

// headsFixture is testdata/heads/expected.json (gen_heads.py): PyTorch's numbers.
type headsFixture struct {
	Query string   `json:"query"`
	Texts []string `json:"texts"`
	Pairs []struct {
		IDs, Types []int64
		Logit      float64
	} `json:"pairs"`
	Long struct {
		Query, Text string
		Tokens      int
		Logit       float64
	} `json:"long"`
	Embeddings []struct {
		IDs               []int64   `json:"ids"`
		SentenceEmbedding []float32 `json:"sentence_embedding"`
		Mean              []float32 `json:"mean"`
	} `json:"embeddings"`
}

func readHeadsFixture(t *testing.T) headsFixture {
	t.Helper()
	b, err := os.ReadFile("testdata/heads/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var f headsFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestServeHeads serves a cross-encoder and a sentence encoder with its own embedding head
// (PyTorch exports) and checks text-embeddings-inference's endpoints against PyTorch: /rerank's
// logits within 1e-5 and their order, a long pair truncated as Hugging Face does, /embed's
// sentence_embedding (not a pool of last_hidden_state), --embedding-output, /info, /tokenize
// and the start-up line; then zoo rerank on the command line.
func TestServeHeads(t *testing.T) {
	want := readHeadsFixture(t)
	p := startServe(t, "testdata/heads/cross.onnx", "testdata/heads/bi.onnx", "testdata/heads/bi.onnx", "--name", "cross", "--name", "bi", "--name", "bi-mean",
		"--tokenizer", minilm, "--embedding-output", "bi-mean=last_hidden_state")
	for _, line := range []string{`"name":"bi","ref":"testdata/heads/bi.onnx"`, `"embedding":"output sentence_embedding (the model's own)"`,
		`"embedding":"mean of last_hidden_state"`, `"rerank":"logits"`, `"max_tokens":64`} {
		if !strings.Contains(p.log(), line) {
			t.Errorf("start-up lines lack %s:\n%s", line, p.log())
		}
	}
	texts, _ := json.Marshal(want.Texts)
	code, body := httpDo(t, "POST", p.url+"/rerank", fmt.Sprintf(`{"model":"cross","query":%q,"texts":%s,"raw_scores":true}`, want.Query, texts))
	var ranks []struct {
		Index int
		Score float64
	}
	if err := json.Unmarshal(body, &ranks); code != 200 || err != nil || len(ranks) != len(want.Texts) {
		t.Fatalf("/rerank: %d %s", code, body)
	}
	for k, r := range ranks {
		if math.Abs(r.Score-want.Pairs[r.Index].Logit) > 1e-5 {
			t.Errorf("/rerank text %d: %v, PyTorch %v", r.Index, r.Score, want.Pairs[r.Index].Logit)
		}
		if k > 0 && r.Score > ranks[k-1].Score {
			t.Errorf("/rerank not sorted: %s", body)
		}
	}
	long := fmt.Sprintf(`{"model":"cross","query":%q,"texts":[%q],"raw_scores":true`, want.Long.Query, want.Long.Text)
	if code, body := httpDo(t, "POST", p.url+"/rerank", long+"}"); code != 413 || !strings.Contains(string(body), "limit of 64 tokens") {
		t.Errorf("/rerank of a %d-token pair: %d %s, want 413 naming the limit", want.Long.Tokens, code, body)
	}
	code, body = httpDo(t, "POST", p.url+"/rerank", long+`,"truncate":true}`)
	if err := json.Unmarshal(body, &ranks); code != 200 || err != nil || math.Abs(ranks[0].Score-want.Long.Logit) > 1e-5 {
		t.Errorf("/rerank truncated: %d %s, PyTorch %v", code, body, want.Long.Logit)
	}
	// /embed: the model's own sentence_embedding; bi-mean: the mean, normalised.
	for _, c := range []struct {
		model string
		pick  func(i int) []float32
	}{{"bi", func(i int) []float32 { return want.Embeddings[i].SentenceEmbedding }}, {"bi-mean", func(i int) []float32 { return unit(want.Embeddings[i].Mean) }}} {
		code, body := httpDo(t, "POST", p.url+"/embed", fmt.Sprintf(`{"model":%q,"inputs":%s}`, c.model, texts))
		var embs [][]float32
		if err := json.Unmarshal(body, &embs); code != 200 || err != nil || len(embs) != len(want.Texts) {
			t.Fatalf("/embed %s: %d %.300s", c.model, code, body)
		}
		for i := range embs {
			if err := near(embs[i], c.pick(i), 1e-5); err != nil {
				t.Errorf("/embed %s text %d against PyTorch: %v", c.model, i, err)
			}
		}
	}
	code, body = httpDo(t, "GET", p.url+"/info?model=bi", "")
	if code != 200 || !strings.Contains(string(body), `"embedding_output":"the model's own output sentence_embedding"`) || !strings.Contains(string(body), `"max_input_length":64`) {
		t.Errorf("/info: %d %s", code, body)
	}
	code, body = httpDo(t, "POST", p.url+"/tokenize", fmt.Sprintf(`{"model":"bi","inputs":%q}`, want.Texts[0]))
	var toks [][]struct {
		ID      int64
		Text    string
		Special bool
	}
	if err := json.Unmarshal(body, &toks); code != 200 || err != nil || len(toks) != 1 || len(toks[0]) != len(want.Embeddings[0].IDs) {
		t.Fatalf("/tokenize: %d %.300s", code, body)
	}
	for k, tok := range toks[0] {
		if tok.ID != want.Embeddings[0].IDs[k] || tok.Special != (k == 0 || k == len(toks[0])-1) {
			t.Errorf("/tokenize token %d: %+v, want id %d", k, tok, want.Embeddings[0].IDs[k])
		}
	}

	// zoo rerank: the same ranking on the command line.
	passages := filepath.Join(t.TempDir(), "passages.txt")
	os.WriteFile(passages, []byte(strings.Join(want.Texts, "\n")+"\n"), 0o644)
	code, stdout, stderr := zoo(t, "rerank", "testdata/heads/cross.onnx", "--tokenizer", minilm, "--query", want.Query, "-i", passages, "--json")
	var cli struct {
		Ranked []struct {
			Line  int
			Logit float64
		}
	}
	if err := json.Unmarshal([]byte(stdout), &cli); code != 0 || err != nil || len(cli.Ranked) != len(want.Texts) {
		t.Fatalf("zoo rerank: exit %d %v: %s %s", code, err, stdout, stderr)
	}
	for k, r := range cli.Ranked {
		if r.Line-1 != ranks0(t, p, want)[k] || math.Abs(r.Logit-want.Pairs[r.Line-1].Logit) > 1e-5 {
			t.Errorf("zoo rerank rank %d: line %d logit %v", k, r.Line, r.Logit)
		}
	}
	if code, _, stderr := zoo(t, "rerank", "testdata/heads/bi.onnx", "--tokenizer", minilm, "--query", "q", "-i", passages); code != 2 || !strings.Contains(stderr, "not a cross-encoder") {
		t.Errorf("zoo rerank on a model without logits: exit %d: %s", code, stderr)
	}
	// A passage over the window is named by its line in the input (a blank line before it
	// counts), as zoo embed names one.
	longIn := filepath.Join(t.TempDir(), "long.txt")
	os.WriteFile(longIn, []byte("short\n\n"+want.Long.Text+"\n"), 0o644)
	if code, _, stderr := zoo(t, "rerank", "testdata/heads/cross.onnx", "--tokenizer", minilm, "--query", want.Long.Query, "-i", longIn); code != 2 ||
		!strings.Contains(stderr, fmt.Sprintf("line 3 is %d tokens with the query, longer than the window of 64 tokens", want.Long.Tokens)) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("zoo rerank on a passage over the window: exit %d: %s", code, stderr)
	}
}

// ranks0 returns the server's ranking of the fixture's texts, by index.
func ranks0(t *testing.T, p *serveProc, want headsFixture) []int {
	t.Helper()
	texts, _ := json.Marshal(want.Texts)
	_, body := httpDo(t, "POST", p.url+"/rerank", fmt.Sprintf(`{"model":"cross","query":%q,"texts":%s}`, want.Query, texts))
	var ranks []struct{ Index int }
	json.Unmarshal(body, &ranks)
	out := make([]int, len(ranks))
	for i, r := range ranks {
		out[i] = r.Index
	}
	return out
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(n))
	}
	return out
}

// TestServeLength: a model serves its whole maximum length by default (vanilla.tiny's
// positional table has 5000 rows; the server used to cap every model at 512), and the answer
// is zoo run's with the same window; a text over --max-tokens is a 413 naming the limit, and
// --truncate cuts instead of refusing.
func TestServeLength(t *testing.T) {
	const model = "vanilla.tiny"
	text := strings.Repeat("zoo ", 150) // 600 bytes, 600 tokens
	ref := zooRun(t, model, text, "--pool", "mean", "--normalize", "--window", "600")
	p := startServe(t, model)
	if !strings.Contains(p.log(), `"max_tokens":5000`) {
		t.Errorf("the start-up line does not say 5000 tokens: %s", p.log())
	}
	code, body := httpDo(t, "POST", p.url+"/embed", fmt.Sprintf(`{"inputs":%q}`, text))
	var embs [][]float32
	if err := json.Unmarshal(body, &embs); code != 200 || err != nil || near(embs[0], ref.Outputs["embedding"].Data, 1e-6) != nil {
		t.Errorf("600 tokens: %d %.200s", code, body)
	}
	p = startServe(t, model, "--max-tokens", "512")
	code, body = httpDo(t, "POST", p.url+"/embed", fmt.Sprintf(`{"inputs":%q}`, text))
	if code != 413 || !strings.Contains(string(body), "600 tokens, over model vanilla.tiny's limit of 512 tokens") {
		t.Errorf("600 tokens with --max-tokens 512: %d %s", code, body)
	}
	short := zooRun(t, model, text[:100], "--pool", "mean", "--normalize")
	p = startServe(t, model, "--max-tokens", "100", "--truncate")
	code, body = httpDo(t, "POST", p.url+"/v1/embeddings", fmt.Sprintf(`{"input":%q}`, text))
	var oa struct {
		Data []struct{ Embedding []float32 }
	}
	if err := json.Unmarshal(body, &oa); code != 200 || err != nil || near(oa.Data[0].Embedding, short.Outputs["embedding"].Data, 1e-6) != nil {
		t.Errorf("--truncate at 100 tokens: %d %.200s", code, body)
	}
	if code, body := httpDo(t, "POST", p.url+"/embed", fmt.Sprintf(`{"inputs":%q,"truncate":false}`, text)); code != 413 || !strings.Contains(string(body), "limit of 100 tokens") {
		t.Errorf("a request that says truncate false: %d %s", code, body)
	}
	if code, _, stderr := zoo(t, "serve", model, "--max-tokens", "-1"); code != 2 || !strings.Contains(stderr, "--max-tokens") {
		t.Errorf("--max-tokens -1: exit %d %s", code, stderr)
	}
	if code, _, stderr := zoo(t, "serve", "testdata/heads/bi.onnx", "--tokenizer", minilm, "--max-tokens", "65", "--addr", "127.0.0.1:0"); code != 2 || !strings.Contains(stderr, "--max-tokens 65 is longer than testdata/heads/bi.onnx's maximum length 64") {
		t.Errorf("--max-tokens over the position table: exit %d %s", code, stderr)
	}
}

// TestServeAccessLog: no line per request on stderr by default; --access-log - writes one per
// request, --access-log FILE to the file.
func TestServeAccessLog(t *testing.T) {
	const model = "vanilla.tiny"
	quiet := startServe(t, model)
	file := filepath.Join(t.TempDir(), "access.log")
	loud := startServe(t, model, "--access-log", "-")
	toFile := startServe(t, model, "--access-log", file)
	for _, p := range []*serveProc{quiet, loud, toFile} {
		for range 20 {
			httpDo(t, "POST", p.url+"/embed", `{"inputs":"hello"}`)
		}
		httpDo(t, "GET", p.url+"/nope", "")
	}
	for deadline := time.Now().Add(5 * time.Second); strings.Count(loud.log(), `"msg":"request"`) < 21 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(quiet.log(), `"msg":"request"`); n != 0 {
		t.Errorf("default: %d request lines on stderr", n)
	}
	if n := strings.Count(loud.log(), `"msg":"request"`); n != 21 {
		t.Errorf("--access-log -: %d request lines, want 21", n)
	}
	b, _ := os.ReadFile(file)
	if n := strings.Count(string(b), `"msg":"request"`); n != 21 || !strings.Contains(string(b), `"status":404`) {
		t.Errorf("--access-log FILE: %d lines: %.300s", n, b)
	}
}

// TestServeBoundedMemory sends what took the server to gigabytes before: 200,000 one-token
// sequences in one /v2 infer request (400 KB) and 200,000 one-letter inputs to
// /v1/embeddings; each is refused with 413 naming the limit, and resident memory stays flat.
func TestServeBoundedMemory(t *testing.T) {
	const model = "vanilla.tiny"
	p := startServe(t, model)
	httpDo(t, "POST", p.url+"/embed", `{"inputs":"warm up"}`)
	before := p.rss(t)
	ids := strings.TrimSuffix(strings.Repeat("1,", 200000), ",")
	t0 := time.Now()
	code, body := httpDo(t, "POST", p.url+"/v2/models/"+model+"/infer", fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[200000,1],"data":[%s]}]}`, ids))
	if code != 413 || !strings.Contains(string(body), "200000 sequences in one request, over the server's limit of 2048") {
		t.Errorf("200,000 one-token sequences: %d %s", code, body)
	}
	inputs := `"a"` + strings.Repeat(`,"a"`, 199999)
	code, body = httpDo(t, "POST", p.url+"/v1/embeddings", fmt.Sprintf(`{"input":[%s]}`, inputs))
	if code != 413 || !strings.Contains(string(body), "over the server's limit of 2048") {
		t.Errorf("200,000 inputs: %d %s", code, body)
	}
	// Within the sequence limit, an answer over --max-answer is refused before it runs too.
	ids = strings.TrimSuffix(strings.Repeat("1,", 2000*100), ",")
	code, body = httpDo(t, "POST", p.url+"/v2/models/"+model+"/infer", fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[2000,100],"data":[%s]}]}`, ids))
	if code != 413 || !strings.Contains(string(body), "per answer") {
		t.Errorf("an answer of 64M values: %d %.200s", code, body)
	}
	after := p.rss(t)
	t.Logf("resident memory %d MiB before, %d MiB after the three requests (%s)", before>>20, after>>20, time.Since(t0).Round(time.Millisecond))
	if after-before > 200<<20 {
		t.Errorf("resident memory grew by %d MiB", (after-before)>>20)
	}
	// An answer just within the limit (1,000 × 25 tokens, every output: 8.0M values, 89 MB of
	// JSON) is answered, and the memory it took goes back to the system.
	ids = strings.TrimSuffix(strings.Repeat("5,", 1000*25), ",")
	t0 = time.Now()
	code, body = httpDo(t, "POST", p.url+"/v2/models/"+model+"/infer", fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1000,25],"data":[%s]}]}`, ids))
	if code != 200 || len(body) < 80<<20 {
		t.Fatalf("an answer of 8.0M values: %d, %d bytes", code, len(body))
	}
	took := time.Since(t0)
	peak := p.rss(t)
	body = nil
	settled := peak
	for deadline := time.Now().Add(10 * time.Second); settled > before+40<<20 && time.Now().Before(deadline); settled = p.rss(t) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("an answer of 8.0M values (%s): resident memory %d MiB before, %d MiB after it, %d MiB once settled", took.Round(time.Millisecond), before>>20, peak>>20, settled>>20)
	if settled > before+40<<20 {
		t.Errorf("resident memory still %d MiB 10s after a large answer (%d MiB before)", settled>>20, before>>20)
	}
}

// stallGRPC opens a connection to addr and starts n ModelInfer streams on it, each sending its
// headers and 15 bytes of a 100-byte message, then nothing; it returns the connection and the
// streams the server refused (RST_STREAM REFUSED_STREAM) within settle.
func stallGRPC(addr string, n int, settle time.Duration) (net.Conn, int, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	msg := append([]byte{0, 0, 0, 0, 100}, make([]byte, 10)...)
	for i := 0; i < n; i++ {
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/inference.GRPCInferenceService/ModelInfer"},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			conn.Close()
			return nil, 0, err
		}
		if err := fr.WriteData(id, false, msg); err != nil {
			conn.Close()
			return nil, 0, err
		}
	}
	refused := 0
	conn.SetReadDeadline(time.Now().Add(settle))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeRefusedStream {
				refused++
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	}
	conn.SetReadDeadline(time.Time{})
	return conn, refused, nil
}

// TestServeGRPCStalledStreams opens 20,000 streams on one gRPC connection, each stalled after
// its headers and 15 bytes: at most --max-streams are held, the rest refused; the held ones
// are cancelled after --read-timeout, with the connection still open; then SIGTERM with a
// stalled gRPC stream and a stalled HTTP body exits within the documented 2s drain.
func TestServeGRPCStalledStreams(t *testing.T) {
	p := startServe(t, "vanilla.tiny", "--read-timeout", "2s")
	base := p.metric(t, "go_goroutines")
	rss0 := p.rss(t)
	conn, refused, err := stallGRPC(p.grpc, 20000, 700*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	held := p.metric(t, "go_goroutines")
	rss1 := p.rss(t)
	after := p.settleGoroutines(t, base+10)
	t.Logf("20,000 stalled streams on one connection: %d refused; goroutines %.0f before, %.0f held, %.0f after the read timeout; resident memory %d → %d MiB",
		refused, base, held, after, rss0>>20, rss1>>20)
	// 100 streams held, the rest refused (a few more are let in if the first ones' read
	// timeout passes while the client is still opening streams on a slow machine).
	if refused < 19000 || held > base+300 {
		t.Errorf("%d of 20,000 streams refused, goroutines %.0f → %.0f; want at most 100 held", refused, base, held)
	}
	if after > base+10 {
		t.Errorf("goroutines %.0f after the read timeout passed, %.0f before", after, base)
	}
	conn2, _, err := stallGRPC(p.grpc, 1, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	body := p.rawRequest(t, "/embed", 100)
	defer body.Close()
	fmt.Fprint(body, `{"inputs":`)
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("zoo serve still running 15s after SIGTERM")
	}
	d := time.Since(t0)
	t.Logf("SIGTERM with a stalled gRPC stream and a stalled HTTP body: exit after %s", d.Round(time.Millisecond))
	if code := p.cmd.ProcessState.ExitCode(); code != 0 || d > 5*time.Second {
		t.Errorf("exit %d after %s; want 0 within the 2s drain: %s", code, d, p.log())
	}
}

// TestServeFlagsRefused: bad values of the new flags are one line and exit 2.
func TestServeFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--embedding-output", "nope"}, "--embedding-output nope: model vanilla has no such output"},
		{[]string{"--embedding-output", "other=hidden"}, `no model is served as "other"`},
		{[]string{"--max-sequences", "0"}, "--max-sequences must be at least 1"},
		{[]string{"--access-log", "/nonexistent/dir/log"}, "--access-log /nonexistent/dir/log"},
	} {
		code, _, stderr := zoo(t, append([]string{"serve", "vanilla.tiny", "--addr", "127.0.0.1:0", "--grpc-addr", "off"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", c.args, code, stderr, c.want)
		}
	}
	_ = http.StatusOK
}
