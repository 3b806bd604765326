package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/zoo-dev/zoo/serve/inferencepb"
)

// serveRefs are zoo run's outputs on the texts the serve tests send: mean-pooled, and
// mean-pooled and normalised.
type serveRefs struct {
	texts         []string
	plain, normed []runOutputs
}

func zooRunRefs(t *testing.T, model string, texts ...string) serveRefs {
	t.Helper()
	r := serveRefs{texts: texts}
	for _, s := range texts {
		r.plain = append(r.plain, zooRun(t, model, s, "--pool", "mean"))
		r.normed = append(r.normed, zooRun(t, model, s, "--pool", "mean", "--normalize"))
	}
	return r
}

// metric returns the value of the Prometheus series whose line starts with series (name and
// labels as /metrics prints them), or -1 when /metrics lacks it.
func (p *serveProc) metric(t *testing.T, series string) float64 {
	t.Helper()
	code, body := httpDo(t, "GET", p.url+"/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			return v
		}
	}
	return -1
}

// rss returns the server's resident memory in bytes (VmRSS of /proc/PID/status).
func (p *serveProc) rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc to read the server's memory from: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// settleGoroutines waits for the server's goroutine count (go_goroutines, from the Go
// collector) to come back to at most want, and returns the last count seen. Connections
// being torn down end on their own, later on a loaded machine; the wait (20s) is bounded
// so that a leak fails the test.
func (p *serveProc) settleGoroutines(t *testing.T, want float64) float64 {
	t.Helper()
	n := 0.0
	for range 400 {
		if n = p.metric(t, "go_goroutines"); n <= want {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// dialRequest writes an HTTP/1.1 request head for path with the given Content-Length on a
// new connection to p, and returns the connection.
func (p *serveProc) dialRequest(path string, length int) (net.Conn, error) {
	host := strings.TrimPrefix(p.url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, host, length); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// rawRequest is dialRequest failing t on an error.
func (p *serveProc) rawRequest(t *testing.T, path string, length int) net.Conn {
	t.Helper()
	c, err := p.dialRequest(path, length)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func textBody(texts ...string) string {
	q := make([]string, len(texts))
	for i, s := range texts {
		q[i] = strconv.Quote(s)
	}
	return fmt.Sprintf(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[%d],"data":[%s]}],"parameters":{"pool":"mean"}}`, len(texts), strings.Join(q, ","))
}

// TestServeSlowAndGoneClients runs zoo serve with short timeouts and a long batching delay:
// a client sending its body (or its headers) a byte a second is cut off by the read timeout
// (408, or the connection closed); clients that leave mid-body or while their request waits
// for its batch leave no goroutine behind and hold no queue slot (a queue of 4 then takes 4
// requests at once), and the batches never run their sequences.
func TestServeSlowAndGoneClients(t *testing.T) {
	const model = "vanilla.tiny"
	p := startServe(t, model, "--read-timeout", "2s", "--max-delay", "1s", "--queue", "4")
	inferPath := "/v2/models/" + model + "/infer"
	full := textBody("hello there")
	if code, body := httpDo(t, "POST", p.url+inferPath, full); code != 200 {
		t.Fatalf("first request: %d %s", code, body)
	}
	before := p.metric(t, "go_goroutines")
	tokens := p.metric(t, `zoo_tokens_total{model="vanilla.tiny"}`)

	// A byte a second, of the body and of the headers: each is cut off long before it is
	// whole (100 bytes would take 100s; the read timeout is 2s). A late body is answered 408;
	// late headers get a 400 or 408 from net/http, or just the connection closed.
	var wg sync.WaitGroup
	slow := func(name string, conn net.Conn, data string, want ...string) {
		defer wg.Done()
		defer conn.Close()
		got := make(chan string, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				got <- "closed"
				return
			}
			resp.Body.Close()
			got <- strconv.Itoa(resp.StatusCode)
		}()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; i < len(data); i++ {
			if _, err := conn.Write([]byte{data[i]}); err != nil {
				break
			}
			select {
			case g := <-got:
				if !slices.Contains(want, g) {
					t.Errorf("%s: answered %s after %d bytes, want one of %v", name, g, i+1, want)
				}
				return
			case <-tick.C:
			}
		}
		t.Errorf("%s: sent all %d bytes a byte a second without being cut off", name, len(data))
	}
	wg.Add(2)
	go slow("slow body", p.rawRequest(t, inferPath, 100), strings.Repeat(" ", 100), "408")
	hc, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	go slow("slow headers", hc, "POST "+inferPath+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nX-Pad: "+strings.Repeat("a", 100), "closed", "400", "408")

	// Gone mid-body: half the body, then the connection closes.
	for range 20 {
		c := p.rawRequest(t, inferPath, len(full))
		io.WriteString(c, full[:len(full)/2])
		c.Close()
	}
	// Gone while waiting: the whole request, then the connection closes while the request
	// waits out the batching delay. Each is answered by nobody and counted as 499. They are
	// as many as the queue holds: on a loaded machine the batcher may not have taken any of
	// them from the queue before the last arrives, and one more would be answered 503.
	gone := 4
	conns := make([]net.Conn, gone)
	for i := range conns {
		conns[i] = p.rawRequest(t, inferPath, len(full))
		io.WriteString(conns[i], full)
	}
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	for range 100 {
		if p.metric(t, `zoo_requests_total{code="499",endpoint="infer"}`) >= float64(gone) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := p.metric(t, `zoo_requests_total{code="499",endpoint="infer"}`); n != float64(gone) {
		t.Errorf("%v requests counted as 499, want %d (%v answered 503)", n, gone, p.metric(t, `zoo_requests_total{code="503",endpoint="infer"}`))
	}
	if n := p.metric(t, `zoo_queue_depth{model="vanilla.tiny"}`); n != 0 {
		t.Errorf("queue depth %v after the clients left, want 0", n)
	}
	if after := p.settleGoroutines(t, before); after > before {
		t.Errorf("goroutines: %v before the slow and gone clients, %v after", before, after)
	}
	// The batcher dropped the sequences of clients that had left before their batch ran.
	if n := p.metric(t, `zoo_tokens_total{model="vanilla.tiny"}`); n != tokens {
		t.Errorf("tokens run: %v before, %v after clients that left; want no change", tokens, n)
	}
	// A queue of 4 takes 4 requests at once: no slot is held by a client that left.
	codes := make(chan int, 4)
	for range 4 {
		go func() {
			resp, err := http.Post(p.url+inferPath, "application/json", strings.NewReader(full))
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range 4 {
		if c := <-codes; c != 200 {
			t.Errorf("one of 4 requests into a queue of 4: status %d, want 200", c)
		}
	}
}

// mixedCase is one kind of request of TestServeMixedRequests: its endpoint, body, status,
// and for a good one a check of its answer.
type mixedCase struct {
	name, path, body string
	code             int
	check            func(body []byte) error
}

// TestServeMixedRequests sends 1,000 good and bad requests from 8 clients at once, with a
// client sending a byte a second alongside (which holds no one up): every good one is
// answered with zoo run's numbers (within 1e-6, being batched with others), every bad one
// with its status and {"error": ...}; afterwards the server's goroutines are back to their
// count before and its resident memory has not grown by more than a generous bound.
func TestServeMixedRequests(t *testing.T) {
	const model = "vanilla.tiny"
	ref := zooRunRefs(t, model, "hello there", "zoo serves encoders to anything that speaks HTTP")
	p := startServe(t, model, "--max-body", "64KiB", "--max-delay", "2ms")
	inferPath := "/v2/models/" + model + "/infer"

	checkV2 := func(want runOutputs, names ...string) func([]byte) error {
		return func(body []byte) error {
			var r v2Response
			if err := json.Unmarshal(body, &r); err != nil {
				return err
			}
			for _, name := range names {
				var got []float32
				for _, o := range r.Outputs {
					if o.Name == name {
						got = o.Data
					}
				}
				if err := near(got, want.Outputs[name].Data, 1e-6); err != nil {
					return fmt.Errorf("%s: %v", name, err)
				}
			}
			return nil
		}
	}
	checkEmbeddings := func(want []runOutputs) func([]byte) error {
		return func(body []byte) error {
			var r struct {
				Data []struct{ Embedding []float32 }
			}
			if err := json.Unmarshal(body, &r); err != nil {
				return err
			}
			if len(r.Data) != len(want) {
				return fmt.Errorf("%d embeddings, want %d", len(r.Data), len(want))
			}
			for i := range want {
				if err := near(r.Data[i].Embedding, want[i].Outputs["embedding"].Data, 1e-6); err != nil {
					return fmt.Errorf("embedding %d: %v", i, err)
				}
			}
			return nil
		}
	}
	checkTEI := func(want runOutputs) func([]byte) error {
		return func(body []byte) error {
			var r [][]float32
			if err := json.Unmarshal(body, &r); err != nil || len(r) != 1 {
				return fmt.Errorf("want one embedding: %v", err)
			}
			return near(r[0], want.Outputs["embedding"].Data, 1e-6)
		}
	}
	long := ref.plain[1].Tokens
	tok := func(datatype, shape, data string) string {
		return fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":%q,"shape":%s,"data":%s}],"outputs":[{"name":"hidden"}]}`, datatype, shape, data)
	}
	cases := []mixedCase{
		{"text", inferPath, textBody(ref.texts[0]), 200, checkV2(ref.plain[0], "hidden", "logits", "embedding")},
		{"malformed JSON", inferPath, `{"inputs":[{"name":"tokens",`, 400, nil},
		{"tokens", inferPath, tok("INT64", fmt.Sprintf("[1,%d]", len(long.Data)), "["+ints(long.Data)+"]"), 200, checkV2(ref.plain[1], "hidden")},
		{"wrong datatype", inferPath, tok("FP32", "[1,2]", "[1.5,2]"), 400, nil},
		{"openai", "/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":[%q,%q]}`, model, ref.texts[0], ref.texts[1]), 200, checkEmbeddings(ref.normed)},
		{"wrong shape", inferPath, tok("INT64", "[2,3]", "[1,2,3]"), 400, nil},
		{"id out of range", inferPath, tok("INT64", "[1,2]", "[5,100000]"), 400, nil},
		{"tei", "/embed", fmt.Sprintf(`{"inputs":%q}`, ref.texts[1]), 200, checkTEI(ref.normed[1])},
		{"unknown model", "/v2/models/nope/infer", tok("INT64", "[1,1]", "[1]"), 404, nil},
		{"body over the limit", inferPath, textBody(strings.Repeat("x", 65<<10)), 413, nil},
		{"openai malformed", "/v1/embeddings", `{"input":`, 400, nil},
		{"huge claimed length", inferPath, "", 413, nil}, // sent by sendMixed with Content-Length 1GiB and no body
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	// Warm up: every kind once, so that what a first request allocates (pools, caches) is
	// counted before, not as growth.
	for _, c := range cases {
		if err := sendMixed(p, client, c); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	before := p.metric(t, "go_goroutines")
	rssBefore := p.rss(t)

	// A slow client alongside: one byte a second of a body it never finishes.
	slowConn := p.rawRequest(t, inferPath, 1000)
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		for range 1000 {
			if _, err := slowConn.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
	}()

	const total = 1000
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 8 {
				c := cases[i%len(cases)]
				if err := sendMixed(p, client, c); err != nil {
					errs <- fmt.Errorf("request %d (%s): %v", i, c.name, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	// The slow client is still sending (its read timeout is the default 30s): the 1,000
	// requests were answered around it.
	select {
	case <-slowDone:
		t.Error("the slow client was cut off before the 1,000 requests were answered")
	default:
	}
	slowConn.Close()
	<-slowDone
	client.CloseIdleConnections()
	if after := p.settleGoroutines(t, before); after > before {
		t.Errorf("goroutines: %v before 1,000 mixed requests, %v after", before, after)
	}
	// Memory: a generous bound (the Go runtime keeps freed memory a while), far below what
	// 1,000 requests would keep if their bodies or answers leaked (each is 10-300 KB).
	const bound = 64 << 20
	rssAfter := p.rss(t)
	t.Logf("server: %v goroutines before, %v after; resident memory %.1f MiB before, %.1f MiB after", before, p.metric(t, "go_goroutines"), float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20))
	if rssAfter-rssBefore > bound {
		t.Errorf("resident memory grew from %d to %d MiB over 1,000 requests (bound %d MiB)", rssBefore>>20, rssAfter>>20, bound>>20)
	}
}

// sendMixed sends one mixedCase and checks its answer.
func sendMixed(p *serveProc, client *http.Client, c mixedCase) error {
	var code int
	var body []byte
	if c.body == "" {
		conn, err := p.dialRequest(c.path, 1<<30)
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		body, err = io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
	} else {
		resp, err := client.Post(p.url+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		if body, err = io.ReadAll(resp.Body); err != nil {
			return err
		}
	}
	if code != c.code {
		return fmt.Errorf("status %d, want %d: %.200s", code, c.code, body)
	}
	if c.check != nil {
		return c.check(body)
	}
	// {"error": "..."}, or OpenAI's {"error": {"message": "..."}} on /v1/.
	var e struct{ Error json.RawMessage }
	var msg struct{ Message string }
	if err := json.Unmarshal(body, &e); err != nil || !bytes.HasPrefix(body, []byte("{")) ||
		(json.Unmarshal(e.Error, new(string)) != nil && (!strings.HasPrefix(c.path, "/v1/") || json.Unmarshal(e.Error, &msg) != nil || msg.Message == "")) {
		return fmt.Errorf("answer %.200q is not {\"error\": ...}", body)
	}
	return nil
}

// curlDo sends a request with curl and returns the status and body.
func curlDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	args := []string{"-sS", "-X", method, "-w", "\n%{http_code}", url}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", "@-")
	}
	cmd := exec.Command("curl", args...)
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %s %s: %v", method, url, err)
	}
	i := bytes.LastIndexByte(out, '\n')
	code, err := strconv.Atoi(string(out[i+1:]))
	if i < 0 || err != nil {
		t.Fatalf("curl %s %s: no status in %q", method, url, out)
	}
	return code, out[:i]
}

// checkCurl checks every REST endpoint with curl as the client: the health, metadata and
// metrics endpoints, and inference from text and from tokens, /v1/embeddings and /embed,
// each request alone in its batch and so bit for bit zoo run's numbers on the same text.
func checkCurl(t *testing.T, url, model string, ref serveRefs) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (Debian: apt-get install curl); the REST endpoints are checked with Go's client only")
	}
	for path, want := range map[string]string{"/v2/health/live": `{"live":true}`, "/v2/health/ready": `{"ready":true}`,
		"/v2": `"name":"zoo"`, "/v2/models/" + model: `"name":"hidden","datatype":"FP32","shape":[-1,-1,64]`,
		"/v2/models/" + model + "/ready": `"ready":true`, "/metrics": `zoo_requests_total{code="200",endpoint="infer"}`} {
		if code, body := curlDo(t, "GET", url+path, ""); code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("curl GET %s: %d %.300s, want 200 with %s", path, code, body, want)
		}
	}
	infer := url + "/v2/models/" + model + "/infer"
	post := func(url, body string, v any) {
		t.Helper()
		code, b := curlDo(t, "POST", url, body)
		if code != 200 {
			t.Fatalf("curl POST %s: %d %.300s", url, code, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("curl POST %s: %v", url, err)
		}
	}
	var r v2Response
	post(infer, textBody(ref.texts[0]), &r)
	for _, name := range []string{"hidden", "logits", "embedding"} {
		if _, data := r.output(t, name); near(data, ref.plain[0].Outputs[name].Data, 0) != nil {
			t.Errorf("curl infer from text, %s against zoo run: %v", name, near(data, ref.plain[0].Outputs[name].Data, 0))
		}
	}
	toks := ref.plain[1].Tokens.Data
	r = v2Response{}
	post(infer, fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,%d],"data":[%s]}],"outputs":[{"name":"logits"},{"name":"embedding"}]}`, len(toks), ints(toks)), &r)
	for _, name := range []string{"logits", "embedding"} {
		if _, data := r.output(t, name); near(data, ref.plain[1].Outputs[name].Data, 0) != nil {
			t.Errorf("curl infer from tokens, %s against zoo run: %v", name, near(data, ref.plain[1].Outputs[name].Data, 0))
		}
	}
	var oa struct {
		Data []struct{ Embedding []float32 }
	}
	post(url+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":[%q]}`, model, ref.texts[1]), &oa)
	if len(oa.Data) != 1 || near(oa.Data[0].Embedding, ref.normed[1].Outputs["embedding"].Data, 0) != nil {
		t.Errorf("curl /v1/embeddings against zoo run --normalize: %+v", oa)
	}
	for i, body := range []string{fmt.Sprintf(`{"inputs":%q}`, ref.texts[0]), fmt.Sprintf(`{"inputs":[%q],"normalize":false}`, ref.texts[0])} {
		want := [][]runOutputs{ref.normed, ref.plain}[i][0].Outputs["embedding"].Data
		var tei [][]float32
		post(url+"/embed", body, &tei)
		if len(tei) != 1 || near(tei[0], want, 0) != nil {
			t.Errorf("curl /embed %s against zoo run: %v", body, tei)
		}
	}
	for _, c := range []struct {
		url, body string
		code      int
	}{{url + "/v2/models/nope/infer", textBody("a"), 404}, {infer, `{"inputs":[`, 400}, {infer, strings.Repeat(" ", 65<<10), 413}} {
		if code, body := curlDo(t, "POST", c.url, c.body); code != c.code || !bytes.Contains(body, []byte(`"error":`)) {
			t.Errorf("curl POST %s: %d %.200s, want %d with an error", c.url, code, body, c.code)
		}
	}
}

// TestServeMemoryGuard serves vanilla.tiny with 8 MiB of memory, where one sequence of 449
// tokens fits and 512 do not (zoo run's guard says so too): a longer sequence is refused
// with 413 saying what it needs, eight rows of 400 tokens are answered in several smaller
// batches, and the server keeps serving.
func TestServeMemoryGuard(t *testing.T) {
	const model = "vanilla.tiny"
	p := startServeEnv(t, []string{"ZOO_MEMORY_LIMIT=8MiB"}, model, "--max-delay", "1ms")
	infer := p.url + "/v2/models/" + model + "/infer"
	tokens := func(b, n int) string {
		ids := make([]int64, b*n)
		for i := range ids {
			ids[i] = int64(1 + i%200)
		}
		return fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[%d,%d],"data":[%s]}],"outputs":[{"name":"hidden"}]}`, b, n, ints(ids))
	}
	for _, c := range []struct{ url, body string }{{infer, tokens(1, 500)}, {p.url + "/v1/embeddings", fmt.Sprintf(`{"input":%q}`, strings.Repeat("a", 500))}} {
		code, body := httpDo(t, "POST", c.url, c.body)
		if code != 413 || !strings.Contains(string(body), "ZOO_MEMORY_LIMIT=8MiB") {
			t.Errorf("%s with 500 tokens in 8 MiB: %d %.300s, want 413 naming the limit", c.url, code, body)
		}
	}
	batches := p.metric(t, `zoo_batch_size_count{model="vanilla.tiny"}`)
	code, body := httpDo(t, "POST", infer, tokens(8, 400))
	var r v2Response
	if err := json.Unmarshal(body, &r); code != 200 || err != nil {
		t.Fatalf("8 rows of 400 tokens in 8 MiB: %d %.300s", code, body)
	}
	if shape, _ := r.output(t, "hidden"); fmt.Sprint(shape) != "[8 400 64]" {
		t.Errorf("hidden shape %v, want [8 400 64]", shape)
	}
	if n := p.metric(t, `zoo_batch_size_count{model="vanilla.tiny"}`) - max(batches, 0); n < 2 {
		t.Errorf("8 rows of 400 tokens ran in %v batches, want them split (8 × 400 does not fit in 8 MiB)", n)
	}
}

// TestServeTokenizerPerModel serves vanilla.tiny twice, as bytes (the default tokenizer)
// and as minilm (--tokenizer minilm=FILE, which also sizes its vocabulary): each answers a
// text with zoo run's tokens and numbers under the same tokenizer, bit for bit.
func TestServeTokenizerPerModel(t *testing.T) {
	const text = "The tokenizer of each model is its own."
	bytesRef := zooRun(t, "vanilla.tiny", text)
	wordsRef := zooRun(t, "vanilla.tiny", text, "--tokenizer", minilm)
	if len(bytesRef.Tokens.Data) == len(wordsRef.Tokens.Data) {
		t.Fatalf("the two tokenizers give %d tokens each; the test cannot tell them apart", len(bytesRef.Tokens.Data))
	}
	p := startServe(t, "vanilla.tiny", "vanilla.tiny", "--name", "bytes", "--name", "minilm", "--tokenizer", "minilm="+minilm)
	for name, ref := range map[string]runOutputs{"bytes": bytesRef, "minilm": wordsRef} {
		code, body := httpDo(t, "POST", p.url+"/v2/models/"+name+"/infer",
			fmt.Sprintf(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":[%q]}],"outputs":[{"name":"hidden"}]}`, text))
		var r v2Response
		if err := json.Unmarshal(body, &r); code != 200 || err != nil {
			t.Fatalf("%s: %d %.300s", name, code, body)
		}
		shape, data := r.output(t, "hidden")
		if shape[1] != len(ref.Tokens.Data) || near(data, ref.Outputs["hidden"].Data, 0) != nil {
			t.Errorf("%s: hidden %v against zoo run's %v: %v", name, shape, ref.Outputs["hidden"].Shape, near(data, ref.Outputs["hidden"].Data, 0))
		}
	}
	if code, _, stderr := zoo(t, "serve", "vanilla.tiny", "--tokenizer", "nope="+minilm); code != 2 || !strings.Contains(stderr, `no model is served as "nope"`) {
		t.Errorf("--tokenizer for a model not served: exit %d, %s", code, stderr)
	}
}

// TestServeGRPCSlowAndGoneClients is TestServeSlowAndGoneClients for the gRPC port: a client
// dribbling its HTTP/2 handshake a byte a second is cut off by the handshake timeout (gRPC's
// default would hold it for two minutes), and ModelInfer calls cancelled while they wait out
// the batching delay are counted as 499, leave the queue empty and no goroutine behind, and
// never run.
func TestServeGRPCSlowAndGoneClients(t *testing.T) {
	const model = "vanilla.tiny"
	p := startServe(t, model, "--read-timeout", "2s", "--max-delay", "1s", "--queue", "16")
	conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewGRPCInferenceServiceClient(conn)
	req := &pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "tokens", Datatype: "INT64", Shape: []int64{1, 3}, Contents: &pb.InferTensorContents{Int64Contents: []int64{5, 6, 7}}}}}
	if _, err := c.ModelInfer(context.Background(), req); err != nil {
		t.Fatalf("first ModelInfer: %v", err)
	}
	before := p.metric(t, "go_goroutines")
	tokens := p.metric(t, `zoo_tokens_total{model="vanilla.tiny"}`)

	slow, err := net.Dial("tcp", p.grpc)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, slow) // returns when the server closes the connection
		close(closed)
	}()
	preface := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	cut := false
	for i := 0; i < len(preface) && !cut; i++ {
		if _, err := slow.Write([]byte{preface[i]}); err != nil {
			cut = true
			break
		}
		select {
		case <-closed:
			cut = true
		case <-time.After(time.Second):
		}
	}
	if !cut {
		t.Errorf("sent the whole %d-byte HTTP/2 preface a byte a second without being cut off", len(preface))
	}

	const gone = 12
	var wg sync.WaitGroup
	codesSeen := make(chan codes.Code, gone)
	for range gone {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			_, err := c.ModelInfer(ctx, req)
			codesSeen <- status.Code(err)
		}()
	}
	wg.Wait()
	close(codesSeen)
	for code := range codesSeen {
		if code != codes.Canceled {
			t.Errorf("a ModelInfer cancelled while waiting: %v, want Canceled", code)
		}
	}
	for range 100 {
		if p.metric(t, `zoo_requests_total{code="499",endpoint="grpc_infer"}`) >= gone {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := p.metric(t, `zoo_requests_total{code="499",endpoint="grpc_infer"}`); n != gone {
		t.Errorf("%v gRPC requests counted as 499, want %d", n, gone)
	}
	if n := p.metric(t, `zoo_queue_depth{model="vanilla.tiny"}`); n != 0 {
		t.Errorf("queue depth %v after the clients left, want 0", n)
	}
	if n := p.metric(t, `zoo_tokens_total{model="vanilla.tiny"}`); n != tokens {
		t.Errorf("tokens run: %v before, %v after clients that left; want no change", tokens, n)
	}
	if after := p.settleGoroutines(t, before); after > before {
		t.Errorf("goroutines: %v before the slow and gone gRPC clients, %v after", before, after)
	}
	if _, err := c.ModelInfer(context.Background(), req); err != nil {
		t.Errorf("ModelInfer after the gone clients: %v", err)
	}
}
