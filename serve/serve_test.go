package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

const fakeD = 4

// fakeModel is a model whose outputs depend on each row's own tokens only, so that any
// batching gives the same numbers: hidden[i, j, k] = 10·token + j + k/8, cls[i, 0..2] = the
// row's first token, its length and its batch's width. sizes records each batch's rows.
type fakeModel struct {
	mu    sync.Mutex
	sizes []int
	gate  chan struct{} // when set, Run waits for a value per batch
	ran   chan struct{} // when set, Run says it started
	fits  func(batch, n int) error
}

func (f *fakeModel) model() *Funcs {
	return &Funcs{Name: "fake", Vocab: 50, MaxLen: 64, Pad: 0, PoolFrom: "hidden", FitsFunc: f.fits,
		Outputs: []Output{{Name: "hidden", Shape: []int64{-1, -1, fakeD}, Seq: true}, {Name: "cls", Shape: []int64{-1, 2}}},
		TokenizeFunc: func(text string) ([]int64, error) {
			ids := []int64{1}
			for _, c := range []byte(text) {
				ids = append(ids, int64(c%40)+2)
			}
			return ids, nil
		},
		RunFunc: func(ctx context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error) {
			if f.ran != nil {
				f.ran <- struct{}{}
			}
			if f.gate != nil {
				<-f.gate
			}
			f.mu.Lock()
			f.sizes = append(f.sizes, b.B)
			f.mu.Unlock()
			h := &tensor.Tensor{DType: tensor.Float32, Shape: []int{b.B, b.N, fakeD}, F32: make([]float32, b.B*b.N*fakeD)}
			c := &tensor.Tensor{DType: tensor.Float32, Shape: []int{b.B, 2}, F32: make([]float32, b.B*2)}
			for i := 0; i < b.B; i++ {
				for j := 0; j < b.N; j++ {
					for k := 0; k < fakeD; k++ {
						h.F32[(i*b.N+j)*fakeD+k] = float32(b.Tokens[i*b.N+j]*10) + float32(j) + float32(k)/8
					}
				}
				c.F32[i*2], c.F32[i*2+1] = float32(b.Tokens[i*b.N]), float32(b.Lengths[i])
			}
			return map[string]*tensor.Tensor{"hidden": h, "cls": c}, nil
		},
		PoolFunc: func(h *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error) {
			l, d := h.Shape[1], h.Shape[2]
			e := &tensor.Tensor{DType: tensor.Float32, Shape: []int{1, d}, F32: make([]float32, d)}
			if mode == "cls" {
				l = 1
			}
			var norm float64
			for k := 0; k < d; k++ {
				var s float64
				for j := 0; j < l; j++ {
					s += float64(h.F32[j*d+k])
				}
				e.F32[k] = float32(s / float64(l))
				norm += float64(e.F32[k]) * float64(e.F32[k])
			}
			if normalize {
				for k := range e.F32 {
					e.F32[k] = float32(float64(e.F32[k]) / math.Sqrt(norm))
				}
			}
			return e, nil
		},
	}
}

// want returns the fake's hidden rows of one sequence.
func wantHidden(seq []int64) []float32 {
	var out []float32
	for j, t := range seq {
		for k := 0; k < fakeD; k++ {
			out = append(out, float32(t*10)+float32(j)+float32(k)/8)
		}
	}
	return out
}

func newTestServer(t *testing.T, f *fakeModel, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 8
	}
	if cfg.Queue == 0 {
		cfg.Queue = 64
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 16
	}
	s, err := New(cfg, []Encoder{f.model()})
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

func post(t *testing.T, c *http.Client, url, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func tokensBody(rows [][]int64, width int, mask bool) string {
	var ids, pads []string
	for _, r := range rows {
		for j := 0; j < width; j++ {
			if j < len(r) {
				ids = append(ids, fmt.Sprint(r[j]))
				pads = append(pads, "false")
			} else {
				ids = append(ids, "0")
				pads = append(pads, "true")
			}
		}
	}
	s := fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[%d,%d],"data":[%s]}`, len(rows), width, strings.Join(ids, ","))
	if mask {
		s += fmt.Sprintf(`,{"name":"key_padding_mask","datatype":"BOOL","shape":[%d,%d],"data":[%s]}`, len(rows), width, strings.Join(pads, ","))
	}
	return s + `]}`
}

type inferResponse struct {
	Outputs []struct {
		Name  string    `json:"name"`
		Shape []int     `json:"shape"`
		Data  []float32 `json:"data"`
	} `json:"outputs"`
}

func TestInferTokens(t *testing.T) {
	_, hs := newTestServer(t, &fakeModel{}, Config{MaxDelay: time.Millisecond})
	rows := [][]int64{{1, 2, 3}, {4, 5}}
	code, _, body := post(t, hs.Client(), hs.URL+"/v2/models/fake/infer", tokensBody(rows, 3, true))
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var r inferResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Outputs) != 2 || r.Outputs[0].Name != "hidden" || fmt.Sprint(r.Outputs[0].Shape) != "[2 3 4]" || fmt.Sprint(r.Outputs[1].Shape) != "[2 2]" {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	want := append(wantHidden(rows[0]), append(wantHidden(rows[1]), 0, 0, 0, 0)...)
	if fmt.Sprint(r.Outputs[0].Data) != fmt.Sprint(want) {
		t.Fatalf("hidden %v, want %v", r.Outputs[0].Data, want)
	}
	if fmt.Sprint(r.Outputs[1].Data) != "[1 3 4 2]" {
		t.Fatalf("cls %v", r.Outputs[1].Data)
	}
	code, _, body = post(t, hs.Client(), hs.URL+"/v2/models/fake/infer",
		`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":["ab"]}],"outputs":[{"name":"embedding"}],"parameters":{"pool":"cls"}}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	r = inferResponse{}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Outputs) != 1 || fmt.Sprint(r.Outputs[0].Data) != fmt.Sprint(wantHidden([]int64{1})) {
		t.Fatalf("cls pooling %+v", r.Outputs)
	}
}

func TestBadRequests(t *testing.T) {
	_, hs := newTestServer(t, &fakeModel{}, Config{MaxDelay: time.Millisecond, MaxBody: 4096})
	infer := hs.URL + "/v2/models/fake/infer"
	tok := func(shape, data string) string {
		return `{"inputs":[{"name":"tokens","datatype":"INT64","shape":` + shape + `,"data":` + data + `}]}`
	}
	for _, c := range []struct {
		name, url, body string
		code            int
		says            string
	}{
		{"malformed JSON", infer, `{"inputs":[`, 400, "malformed JSON"},
		{"trailing data", infer, tok("[1,1]", "[1]") + "x", 400, "malformed JSON"},
		{"not an object", infer, `[1,2]`, 400, "malformed JSON"},
		{"no inputs", infer, `{"inputs":[]}`, 400, "no inputs"},
		{"unknown input", infer, `{"inputs":[{"name":"ids","datatype":"INT64","shape":[1,1],"data":[1]}]}`, 400, "unknown input"},
		{"wrong datatype", infer, `{"inputs":[{"name":"tokens","datatype":"FP32","shape":[1,1],"data":[1]}]}`, 400, "datatype"},
		{"wrong rank", infer, tok("[2]", "[1,2]"), 400, "rank"},
		{"zero axis", infer, tok("[0,1]", "[]"), 400, "at least 1"},
		{"negative axis", infer, tok("[-1,2]", "[1,2]"), 400, "at least 1"},
		{"huge shape", infer, tok("[100000000,100000000]", "[1]"), 400, "too large"},
		{"large shape, little data", infer, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[2000],"data":["a"]}]}`, 400, "holds 2000"},
		{"more sequences than a request holds", infer, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[268435456],"data":["a"]}]}`, 413, "limit of 2048 per request"},
		{"more token rows than a request holds", infer, tok("[3000,1]", "[1]"), 413, "limit of 2048 per request"},
		{"too little data", infer, tok("[1,3]", "[1,2]"), 400, "holds 3"},
		{"too much data", infer, tok("[1,1]", "[1,2]"), 400, "more data"},
		{"string token", infer, tok("[1,1]", `["a"]`), 400, "want an integer"},
		{"float token", infer, tok("[1,1]", `[1.5]`), 400, "not an INT64"},
		{"id out of range", infer, tok("[1,2]", "[1,50]"), 400, "out of range"},
		{"negative id", infer, tok("[1,1]", "[-1]"), 400, "out of range"},
		{"data not a list", infer, tok("[1,1]", "7"), 400, "list"},
		{"too long", infer, tok("[1,65]", "["+strings.Repeat("1,", 64)+"1]"), 413, "limit of 64 tokens"},
		{"mask not trailing", infer, `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,3],"data":[1,2,3]},{"name":"key_padding_mask","datatype":"BOOL","shape":[1,3],"data":[false,true,false]}]}`, 400, "must trail"},
		{"mask shape", infer, `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,2],"data":[1,2]},{"name":"key_padding_mask","datatype":"BOOL","shape":[2,1],"data":[false,false]}]}`, 400, "want the shape"},
		{"mask all padding", infer, `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,1],"data":[1]},{"name":"key_padding_mask","datatype":"BOOL","shape":[1,1],"data":[true]}]}`, 400, "all padding"},
		{"mask alone", infer, `{"inputs":[{"name":"key_padding_mask","datatype":"BOOL","shape":[1,1],"data":[true]}]}`, 400, "without"},
		{"text and tokens", infer, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":["a"]},{"name":"tokens","datatype":"INT64","shape":[1,1],"data":[1]}]}`, 400, "not both"},
		{"text number", infer, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":[3]}]}`, 400, "want a string"},
		{"unknown output", infer, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":["a"]}],"outputs":[{"name":"nope"}]}`, 400, "unknown output"},
		{"bad pool", infer, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":["a"]}],"parameters":{"pool":"max"}}`, 400, "parameter pool"},
		{"unknown model", hs.URL + "/v2/models/nope/infer", tok("[1,1]", "[1]"), 404, "unknown model"},
		{"over max body", infer, tok("[1,1]", "[1]") + strings.Repeat(" ", 5000), 413, "over the limit"},
		{"openai no input", hs.URL + "/v1/embeddings", `{"model":"fake"}`, 400, "input"},
		{"openai unknown model", hs.URL + "/v1/embeddings", `{"model":"nope","input":"a"}`, 404, "unknown model"},
		{"openai int8", hs.URL + "/v1/embeddings", `{"input":"a","encoding_format":"int8"}`, 400, "encoding_format"},
		{"openai dimensions over the width", hs.URL + "/v1/embeddings", `{"input":"a","dimensions":5}`, 400, "dimensions 5: model fake's embeddings have 4"},
		{"openai dimensions 0", hs.URL + "/v1/embeddings", `{"input":"a","dimensions":0}`, 400, "at least 1"},
		{"openai text too long", hs.URL + "/v1/embeddings", `{"input":"` + strings.Repeat("a", 64) + `"}`, 413, "limit of 64 tokens"},
		{"tei wrong type", hs.URL + "/embed", `{"inputs":5}`, 400, "inputs"},
		{"tei text too long", hs.URL + "/embed", `{"inputs":"` + strings.Repeat("a", 64) + `"}`, 413, "limit of 64 tokens"},
		{"tei left truncation", hs.URL + "/embed", `{"inputs":"a","truncation_direction":"Left"}`, 400, "truncation_direction"},
		{"tei rerank without a cross-encoder", hs.URL + "/rerank", `{"query":"a","texts":["b"]}`, 400, "not a cross-encoder"},
		{"no endpoint", hs.URL + "/v3/x", `{}`, 404, "no endpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, hdr, body := post(t, hs.Client(), c.url, c.body)
			msg, err := errorMessage(c.url, body)
			if err != nil || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("body %q is not the endpoint's error shape (%v)", body, err)
			}
			if code != c.code || !strings.Contains(msg, c.says) {
				t.Fatalf("status %d, error %q; want %d saying %q", code, msg, c.code, c.says)
			}
		})
	}
	// Chunked (no Content-Length): the limit is found while reading.
	req, _ := http.NewRequest("POST", infer, io.MultiReader(strings.NewReader(tok("[1,1]", "[1]")), strings.NewReader(strings.Repeat(" ", 5000))))
	req.ContentLength = -1
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked oversize body: status %d, want 413", resp.StatusCode)
	}
	if code, _, body := post(t, hs.Client(), infer, tok("[1,1]", "[1]")); code != 200 {
		t.Fatalf("after bad requests: status %d: %s", code, body)
	}
}

// errorMessage returns an error answer's message, checking the shape of the API the URL
// belongs to: OpenAI's {"error": {"message", "type", "param", "code"}}, text-embeddings-
// inference's {"error", "error_type"}, else {"error": "..."}.
func errorMessage(url string, body []byte) (string, error) {
	switch {
	case strings.Contains(url, "/v1/"):
		var e struct {
			Error *struct {
				Message *string `json:"message"`
				Type    *string `json:"type"`
				Param   any     `json:"param"`
				Code    any     `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return "", err
		}
		if e.Error == nil || e.Error.Message == nil || e.Error.Type == nil {
			return "", fmt.Errorf("no error.message or error.type")
		}
		return *e.Error.Message, nil
	case strings.HasSuffix(url, "/embed") || strings.HasSuffix(url, "/rerank") || strings.HasSuffix(url, "/tokenize") || strings.HasSuffix(url, "/info"):
		var e struct {
			Error     string `json:"error"`
			ErrorType string `json:"error_type"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return "", err
		}
		if e.ErrorType == "" {
			return "", fmt.Errorf("no error_type")
		}
		return e.Error, nil
	}
	var e struct{ Error string }
	err := json.Unmarshal(body, &e)
	return e.Error, err
}

// TestBatching sends concurrent requests of mixed lengths: every answer is its own, and the
// requests share batches.
func TestBatching(t *testing.T) {
	f := &fakeModel{}
	_, hs := newTestServer(t, f, Config{MaxBatch: 8, MaxDelay: 50 * time.Millisecond})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]int64, 1+i%5)
			for j := range row {
				row[j] = int64(i + j)
			}
			resp, err := hs.Client().Post(hs.URL+"/v2/models/fake/infer", "application/json", strings.NewReader(tokensBody([][]int64{row}, len(row), false)))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var r inferResponse
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("request %d: status %d, %v", i, resp.StatusCode, err)
				return
			}
			if fmt.Sprint(r.Outputs[0].Data) != fmt.Sprint(wantHidden(row)) {
				errs <- fmt.Errorf("request %d: hidden %v, want %v", i, r.Outputs[0].Data, wantHidden(row))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	total, most := 0, 0
	for _, s := range f.sizes {
		total += s
		most = max(most, s)
	}
	if total != 16 || most < 2 || most > 8 {
		t.Fatalf("batch sizes %v: want 16 rows in batches of 2 to 8", f.sizes)
	}
}

// TestQueueFull fills a queue of one behind a held batch: the next request gets 503 with
// Retry-After, and a slow client's unfinished body holds no one up.
func TestQueueFull(t *testing.T) {
	f := &fakeModel{gate: make(chan struct{}), ran: make(chan struct{}, 4)}
	srv, hs := newTestServer(t, f, Config{MaxBatch: 1, Queue: 1, MaxDelay: 0})
	body := tokensBody([][]int64{{1}}, 1, false)
	url := hs.URL + "/v2/models/fake/infer"
	first, second := make(chan int, 1), make(chan int, 1)
	go func() { c, _, _ := post(t, hs.Client(), url, body); first <- c }()
	<-f.ran // the first is running; the second waits in the queue
	go func() { c, _, _ := post(t, hs.Client(), url, body); second <- c }()
	for len(srv.batch["fake"].q) == 0 {
		runtime.Gosched()
	}
	code, hdr, _ := post(t, hs.Client(), url, body)
	if code != 503 {
		t.Fatalf("third request: status %d while the queue is full, want 503", code)
	}
	if hdr.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	// A slow client: half a body, never finished, while the queue drains.
	pr, pw := io.Pipe()
	slow := make(chan struct{})
	go func() {
		defer close(slow)
		req, _ := http.NewRequest("POST", url, pr)
		resp, err := hs.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	pw.Write([]byte(body[:10]))
	f.gate <- struct{}{}
	<-f.ran
	f.gate <- struct{}{}
	if a, b := <-first, <-second; a != 200 || b != 200 {
		t.Fatalf("queued requests: status %d and %d, want 200", a, b)
	}
	pw.CloseWithError(fmt.Errorf("client gone"))
	<-slow
}

func goroutines() int {
	runtime.GC()
	return runtime.NumGoroutine()
}

// TestNoLeak sends 1,000 mixed good and bad requests: every good one is answered correctly
// and the goroutine count comes back to where it was.
func TestNoLeak(t *testing.T) {
	_, hs := newTestServer(t, &fakeModel{}, Config{MaxBatch: 8, MaxDelay: time.Millisecond, MaxBody: 2048})
	client := hs.Client()
	post(t, client, hs.URL+"/v2/models/fake/infer", tokensBody([][]int64{{1}}, 1, false))
	before := goroutines()
	bodies := []struct {
		body string
		code int
	}{
		{tokensBody([][]int64{{1, 2}, {3}}, 2, true), 200},
		{`{"inputs":[`, 400},
		{tokensBody([][]int64{{99}}, 1, false), 400},
		{strings.Repeat("x", 4096), 413},
		{`{"inputs":[{"name":"text","datatype":"BYTES","shape":[2],"data":["hello","a"]}]}`, 200},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1000; i += 8 {
				b := bodies[i%len(bodies)]
				resp, err := client.Post(hs.URL+"/v2/models/fake/infer", "application/json", strings.NewReader(b.body))
				if err != nil {
					errs <- err
					continue
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != b.code {
					errs <- fmt.Errorf("request %d: status %d, want %d: %s", i, resp.StatusCode, b.code, data)
				}
				if b.code == 200 && i%len(bodies) == 0 && !bytes.Contains(data, []byte(`"shape":[2,2,4]`)) {
					errs <- fmt.Errorf("request %d: %s", i, data)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	client.CloseIdleConnections()
	after := 0
	for range 100 {
		if after = goroutines(); after <= before+2 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("goroutines: %d before, %d after 1,000 requests", before, after)
}

func TestHealthAndMetrics(t *testing.T) {
	s, hs := newTestServer(t, &fakeModel{}, Config{MaxDelay: time.Millisecond})
	get := func(path string) (int, string) {
		resp, err := hs.Client().Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post(t, hs.Client(), hs.URL+"/embed", `{"inputs":["abc","de"]}`)
	post(t, hs.Client(), hs.URL+"/embed", `{"inputs":7}`)
	for path, want := range map[string]string{"/v2/health/live": `"live":true`, "/v2/health/ready": `"ready":true`,
		"/v2/models/fake/ready": `"ready":true`, "/v2/models/fake": `"name":"embedding","datatype":"FP32","shape":[-1,4]`} {
		if code, body := get(path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %s, want 200 with %s", path, code, body, want)
		}
	}
	_, m := get("/metrics")
	for _, want := range []string{`zoo_requests_total{code="200",endpoint="tei_embed"} 1`, "zoo_request_duration_seconds_bucket", `zoo_batch_size_count{model="fake"}`,
		`zoo_queue_depth{model="fake"} 0`, `zoo_tokens_total{model="fake"} 7`, "zoo_tokens_per_second", `zoo_request_errors_total{code="400",endpoint="tei_embed"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	s.SetReady(false)
	if code, _ := get("/v2/health/ready"); code != 503 {
		t.Errorf("ready while draining: %d, want 503", code)
	}
	if code, _, _ := post(t, hs.Client(), hs.URL+"/embed", `{"inputs":"a"}`); code != 503 {
		t.Errorf("embed while draining: %d, want 503", code)
	}
}

func FuzzDecodeInferRequest(f *testing.F) {
	for _, s := range []string{
		tokensBody([][]int64{{1, 2, 3}, {4}}, 3, true),
		`{"inputs":[{"name":"text","datatype":"BYTES","shape":[2],"data":["a","bc"]}],"outputs":[{"name":"embedding"}],"parameters":{"pool":"mean","normalize":true}}`,
		`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[2,2],"data":[[1,2],[3,4]]}]}`,
		`{"inputs":[]}`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	m, err := newModel((&fakeModel{}).model())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeInferRequest(body, m, false)
		if err != nil {
			if _, ok := err.(*httpError); !ok {
				t.Fatalf("error %T %v is not an *httpError", err, err)
			}
			return
		}
		if len(r.Seqs) == 0 || len(r.Outputs) == 0 {
			t.Fatalf("accepted a request with %d sequences and %d outputs", len(r.Seqs), len(r.Outputs))
		}
		for _, s := range r.Seqs {
			if len(s) == 0 || len(s) > m.MaxLen || len(s) > r.Width {
				t.Fatalf("sequence of %d tokens (width %d)", len(s), r.Width)
			}
			for _, id := range s {
				if id < 0 || id >= int64(m.Vocab) {
					t.Fatalf("token id %d accepted", id)
				}
			}
		}
	})
}

// TestBacklogFillsBatches queues 16 requests behind a held batch with no delay to wait: the
// queued ones run as two full batches, not one by one.
func TestBacklogFillsBatches(t *testing.T) {
	f := &fakeModel{gate: make(chan struct{}), ran: make(chan struct{}, 32)}
	srv, hs := newTestServer(t, f, Config{MaxBatch: 8, MaxDelay: 0})
	url, body := hs.URL+"/v2/models/fake/infer", tokensBody([][]int64{{1, 2}}, 2, false)
	var wg sync.WaitGroup
	codes := make(chan int, 17)
	send := func() {
		defer wg.Done()
		c, _, _ := post(t, hs.Client(), url, body)
		codes <- c
	}
	wg.Add(1)
	go send()
	<-f.ran
	for range 16 {
		wg.Add(1)
		go send()
	}
	for len(srv.batch["fake"].q) < 16 {
		runtime.Gosched()
	}
	close(f.gate)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("status %d", c)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fmt.Sprint(f.sizes) != "[1 8 8]" {
		t.Fatalf("batch sizes %v, want [1 8 8]", f.sizes)
	}
}

// TestMemoryGuard gives the fake model room for 8 tokens a batch: a sequence longer than that
// is refused with 413 before it is queued; rows that fit alone but not together are run in
// smaller batches with the same answers; a sequence that no longer fits when its batch comes
// (memory has shrunk) is answered 503 with Retry-After.
func TestMemoryGuard(t *testing.T) {
	var shrunk atomic.Bool
	f := &fakeModel{fits: func(b, n int) error {
		if shrunk.Load() || b*n > 8 {
			return fmt.Errorf("%d × %d tokens do not fit in 8", b, n)
		}
		return nil
	}}
	_, hs := newTestServer(t, f, Config{MaxBatch: 8, MaxDelay: time.Millisecond})
	infer := hs.URL + "/v2/models/fake/infer"
	for _, c := range []struct{ url, body string }{{infer, tokensBody([][]int64{{1, 2, 3, 4, 5, 6, 7, 8, 9}}, 9, false)},
		{hs.URL + "/embed", `{"inputs":"abcdefghij"}`}} {
		code, _, body := post(t, hs.Client(), c.url, c.body)
		if code != 413 || !strings.Contains(string(body), "memory available") || !strings.Contains(string(body), "do not fit") {
			t.Errorf("%s with a sequence over the memory: %d %s, want 413 saying why", c.url, code, body)
		}
	}
	rows := [][]int64{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15}}
	code, _, body := post(t, hs.Client(), infer, tokensBody(rows, 4, true))
	var r inferResponse
	if err := json.Unmarshal(body, &r); code != 200 || err != nil {
		t.Fatalf("4 rows that fit 2 at a time: %d %s", code, body)
	}
	var want []float32
	for _, row := range rows {
		want = append(want, wantHidden(row)...)
		for range 4 - len(row) {
			want = append(want, make([]float32, fakeD)...)
		}
	}
	if fmt.Sprint(r.Outputs[0].Data) != fmt.Sprint(want) {
		t.Errorf("hidden %v, want %v", r.Outputs[0].Data, want)
	}
	f.mu.Lock()
	sizes := fmt.Sprint(f.sizes)
	f.mu.Unlock()
	// Three rows of 4 tokens share a length bucket and run as 1 and 2; the row of 3 alone.
	if sizes != "[1 2 1]" {
		t.Errorf("batch sizes %s, want [1 2 1] (3 rows of 4 tokens and one of 3 in a room for 8)", sizes)
	}
	// Memory shrinks between the request's check and its batch.
	var once atomic.Int32
	f.fits = nil
	guard := func(b, n int) error {
		if once.Add(1) > 1 {
			return fmt.Errorf("no memory left")
		}
		return nil
	}
	s2, err := New(Config{MaxBatch: 8, Queue: 4, MaxBody: 1 << 16, MaxDelay: time.Millisecond}, []Encoder{func() *Funcs { m := f.model(); m.FitsFunc = guard; return m }()})
	if err != nil {
		t.Fatal(err)
	}
	s2.Start()
	defer s2.Stop()
	hs2 := httptest.NewServer(s2.Handler())
	defer hs2.Close()
	code, hdr, body := post(t, hs2.Client(), hs2.URL+"/v2/models/fake/infer", tokensBody([][]int64{{1, 2}}, 2, false))
	if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), "no memory left") {
		t.Errorf("a sequence that no longer fits: %d %s (Retry-After %q), want 503 saying why", code, body, hdr.Get("Retry-After"))
	}
}
