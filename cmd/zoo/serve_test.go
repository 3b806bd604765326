package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/zoo-dev/zoo/serve/inferencepb"
)

// serveProc is `zoo serve` running as a real process (this test binary as zoo).
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	grpc   string // host:port of the gRPC service
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

var listening = regexp.MustCompile(`zoo serve: listening on (http://\S+) and grpc://(\S+)`)

// startServe starts zoo serve with args and waits for the line that says it is ready; a
// zoo that exits first fails the test.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with extra environment variables (KEY=VALUE).
func startServeEnv(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: exec.Command(exe, append([]string{"serve", "--addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, args...)...), done: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), asZooEnv+"=1"), env...)
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1:]
			}
		}
		close(ready)
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
	})
	addrs, ok := <-ready
	if !ok {
		t.Fatalf("zoo serve exited before it was ready: %s", p.log())
	}
	p.url, p.grpc = addrs[0], addrs[1]
	return p
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// httpDo sends a request and returns the status and body.
func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// runOutputs is `zoo run -o FILE.json`'s file: the tokens and every output of one window.
type runOutputs struct {
	Tokens struct {
		Shape []int   `json:"shape"`
		Data  []int64 `json:"data"`
	} `json:"tokens"`
	Outputs map[string]struct {
		Shape []int     `json:"shape"`
		Data  []float32 `json:"data"`
	} `json:"outputs"`
}

// zooRun runs `zoo run MODEL` on text with extra flags and returns its outputs.
func zooRun(t *testing.T, model, text string, flags ...string) runOutputs {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.json")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := zoo(t, append([]string{"run", model, "-i", in, "-o", out}, flags...)...); code != 0 {
		t.Fatalf("zoo run: exit %d: %s", code, stderr)
	}
	var r runOutputs
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

type v2Response struct {
	Outputs []struct {
		Name  string    `json:"name"`
		Shape []int     `json:"shape"`
		Data  []float32 `json:"data"`
	} `json:"outputs"`
}

func (r v2Response) output(t *testing.T, name string) ([]int, []float32) {
	t.Helper()
	for _, o := range r.Outputs {
		if o.Name == name {
			return o.Shape, o.Data
		}
	}
	t.Fatalf("no output %s in the answer", name)
	return nil, nil
}

// near reports whether got and want agree within tol (0: bit for bit).
func near(got, want []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if tol == 0 && math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Abs(float64(got[i])-float64(want[i])) > tol {
			return fmt.Errorf("value %d: %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}

func ints(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// TestServeEndToEnd starts zoo serve and checks every endpoint against zoo run on the same
// texts: bit for bit for a request batched alone, within 1e-6 for requests merged.
func TestServeEndToEnd(t *testing.T) {
	const model = "vanilla.tiny"
	texts := []string{"hello there", "zoo serves encoders to anything that speaks HTTP"}
	var plain, normed []runOutputs
	for _, s := range texts {
		plain = append(plain, zooRun(t, model, s, "--pool", "mean"))
		normed = append(normed, zooRun(t, model, s, "--pool", "mean", "--normalize"))
	}
	p := startServe(t, model, "--max-delay", "20ms", "--max-body", "64KiB")
	for path, want := range map[string]string{"/v2/health/live": `{"live":true}`, "/v2/health/ready": `{"ready":true}`,
		"/v2/models/" + model + "/ready": `"ready":true`} {
		if code, body := httpDo(t, "GET", p.url+path, ""); code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	code, body := httpDo(t, "GET", p.url+"/v2/models/"+model, "")
	var meta struct {
		Inputs, Outputs []struct {
			Name, Datatype string
			Shape          []int64
		}
	}
	if err := json.Unmarshal(body, &meta); code != 200 || err != nil {
		t.Fatalf("metadata: %d %s", code, body)
	}
	if got := fmt.Sprint(meta.Outputs); got != "[{hidden FP32 [-1 -1 64]} {logits FP32 [-1 -1 257]} {embedding FP32 [-1 64]}]" {
		t.Errorf("metadata outputs %s", got)
	}
	if got := fmt.Sprint(meta.Inputs); got != "[{tokens INT64 [-1 -1]} {key_padding_mask BOOL [-1 -1]} {text BYTES [-1]}]" {
		t.Errorf("metadata inputs %s", got)
	}
	if code, _ := httpDo(t, "GET", p.url+"/v2/models/nope", ""); code != 404 {
		t.Errorf("unknown model: %d, want 404", code)
	}

	infer := func(body string) v2Response {
		t.Helper()
		code, b := httpDo(t, "POST", p.url+"/v2/models/"+model+"/infer", body)
		if code != 200 {
			t.Fatalf("infer: %d %s", code, b)
		}
		var r v2Response
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Alone: the same numbers bit for bit, from text and from tokens.
	ref := plain[0]
	r := infer(fmt.Sprintf(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":[%q]}],"parameters":{"pool":"mean"}}`, texts[0]))
	for _, name := range []string{"hidden", "logits", "embedding"} {
		shape, data := r.output(t, name)
		if fmt.Sprint(shape) != fmt.Sprint(ref.Outputs[name].Shape) {
			t.Errorf("%s: shape %v, zoo run %v", name, shape, ref.Outputs[name].Shape)
		}
		if err := near(data, ref.Outputs[name].Data, 0); err != nil {
			t.Errorf("text %s against zoo run: %v", name, err)
		}
	}
	n := len(ref.Tokens.Data)
	r = infer(fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,%d],"data":[%s]}],"outputs":[{"name":"hidden"}]}`, n, ints(ref.Tokens.Data)))
	if _, data := r.output(t, "hidden"); near(data, ref.Outputs["hidden"].Data, 0) != nil {
		t.Errorf("tokens hidden against zoo run: %v", near(data, ref.Outputs["hidden"].Data, 0))
	}
	// Two rows of one request, padded: each row within 1e-6 of zoo run, zeros past its length.
	long := plain[1]
	m := len(long.Tokens.Data)
	padded := append(append([]int64{}, ref.Tokens.Data...), make([]int64, m-n)...)
	var mask []string
	for j := 0; j < 2*m; j++ {
		mask = append(mask, fmt.Sprint(j >= n && j < m))
	}
	r = infer(fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[2,%d],"data":[%s,%s]},{"name":"key_padding_mask","datatype":"BOOL","shape":[2,%d],"data":[%s]}],"outputs":[{"name":"hidden"},{"name":"embedding"}]}`,
		m, ints(padded), ints(long.Tokens.Data), m, strings.Join(mask, ",")))
	shape, hidden := r.output(t, "hidden")
	if fmt.Sprint(shape) != fmt.Sprintf("[2 %d 64]", m) {
		t.Fatalf("hidden shape %v", shape)
	}
	if err := near(hidden[:n*64], ref.Outputs["hidden"].Data, 1e-6); err != nil {
		t.Errorf("padded row 0: %v", err)
	}
	if err := near(hidden[n*64:m*64], make([]float32, (m-n)*64), 0); err != nil {
		t.Errorf("padded row 0 past its length: %v", err)
	}
	if err := near(hidden[m*64:], long.Outputs["hidden"].Data, 1e-6); err != nil {
		t.Errorf("row 1: %v", err)
	}
	_, emb := r.output(t, "embedding")
	if err := near(emb, append(append([]float32{}, ref.Outputs["embedding"].Data...), long.Outputs["embedding"].Data...), 1e-6); err != nil {
		t.Errorf("embeddings: %v", err)
	}

	// OpenAI and text-embeddings-inference.
	code, body = httpDo(t, "POST", p.url+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":[%q,%q]}`, model, texts[0], texts[1]))
	var oa struct {
		Object string
		Model  string
		Data   []struct {
			Object    string
			Index     int
			Embedding []float32
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(body, &oa); code != 200 || err != nil || len(oa.Data) != 2 {
		t.Fatalf("/v1/embeddings: %d %s", code, body)
	}
	if oa.Object != "list" || oa.Model != model || oa.Data[1].Object != "embedding" || oa.Data[1].Index != 1 || oa.Usage.PromptTokens != n+m || oa.Usage.TotalTokens != n+m {
		t.Errorf("/v1/embeddings shape: %s", body)
	}
	for i := range oa.Data {
		if err := near(oa.Data[i].Embedding, normed[i].Outputs["embedding"].Data, 1e-6); err != nil {
			t.Errorf("/v1/embeddings %d: %v", i, err)
		}
	}
	code, body = httpDo(t, "POST", p.url+"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":%q}`, model, texts[0]))
	if err := json.Unmarshal(body, &oa); code != 200 || err != nil || len(oa.Data) != 1 || near(oa.Data[0].Embedding, normed[0].Outputs["embedding"].Data, 0) != nil {
		t.Errorf("/v1/embeddings with one string: %d %s", code, body)
	}
	for _, c := range []struct {
		body string
		want []runOutputs
	}{{fmt.Sprintf(`{"inputs":%q}`, texts[1]), normed[1:]}, {fmt.Sprintf(`{"inputs":[%q,%q],"normalize":false}`, texts[0], texts[1]), plain}} {
		code, body = httpDo(t, "POST", p.url+"/embed", c.body)
		var tei [][]float32
		if err := json.Unmarshal(body, &tei); code != 200 || err != nil || len(tei) != len(c.want) {
			t.Fatalf("/embed %s: %d %s", c.body, code, body)
		}
		for i := range tei {
			if err := near(tei[i], c.want[i].Outputs["embedding"].Data, 1e-6); err != nil {
				t.Errorf("/embed %s row %d: %v", c.body, i, err)
			}
		}
	}

	// Bad requests, answered as the protocol says; the server keeps serving.
	inferURL := p.url + "/v2/models/" + model + "/infer"
	for _, c := range []struct {
		name, url, body string
		code            int
	}{
		{"malformed JSON", inferURL, `{"inputs": [`, 400},
		{"wrong datatype", inferURL, `{"inputs":[{"name":"tokens","datatype":"INT32","shape":[1,1],"data":[1]}]}`, 400},
		{"wrong shape", inferURL, `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,3],"data":[1]}]}`, 400},
		{"unknown input", inferURL, `{"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,1],"data":[1]}]}`, 400},
		{"token out of range", inferURL, `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1,1],"data":[257]}]}`, 400},
		{"unknown model", p.url + "/v2/models/nope/infer", `{}`, 404},
		{"huge body", inferURL, strings.Repeat(" ", 65*1024), 413},
	} {
		code, body := httpDo(t, "POST", c.url, c.body)
		var e struct{ Error string }
		if code != c.code || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("%s: %d %s, want %d with {\"error\": ...}", c.name, code, body, c.code)
		}
	}
	code, body = httpDo(t, "GET", p.url+"/metrics", "")
	for _, want := range []string{"zoo_requests_total{", "zoo_request_errors_total{", "zoo_request_duration_seconds_bucket{", "zoo_batch_size_bucket{",
		`zoo_queue_depth{model="vanilla.tiny"}`, `zoo_tokens_total{model="vanilla.tiny"}`, "zoo_tokens_per_second{"} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	t.Run("curl", func(t *testing.T) { checkCurl(t, p.url, model, serveRefs{texts: texts, plain: plain, normed: normed}) })
	checkGRPC(t, p.grpc, model, ref)

	// SIGTERM while a request is in flight: it is answered, then zoo exits 0. The request asks
	// for 100 Continue, which the server sends when its handler starts reading the body: only
	// then is the request the server's (Go's http.Server closes a connection whose request it
	// reads after its shutdown began, and on a loaded machine that read can come late).
	host := strings.TrimPrefix(p.url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	full := fmt.Sprintf(`{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":[%q]}]}`, texts[0])
	fmt.Fprintf(conn, "POST /v2/models/%s/infer HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", model, host, len(full))
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("in-flight request: %v, want 100 Continue", respStatus(resp, err))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.log(), `"msg":"draining"`) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := io.WriteString(conn, full); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight request during drain: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("in-flight request during drain: status %d, want 200", resp.StatusCode)
	}
	err = <-p.done
	if code := p.cmd.ProcessState.ExitCode(); err != nil || code != 0 {
		t.Errorf("zoo serve after SIGTERM: exit %d (%v), want 0; stderr %s", code, err, p.log())
	}
}

// respStatus names an HTTP answer's status, or the error that stood in for it.
func respStatus(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// checkGRPC checks the protocol's gRPC service with a client generated from its proto: the
// health and metadata RPCs, ModelInfer from tokens (bit for bit against zoo run) and from
// text, and the status codes of bad requests.
func checkGRPC(t *testing.T, addr, model string, ref runOutputs) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewGRPCInferenceServiceClient(conn)
	ctx := context.Background()
	if r, err := c.ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Fatalf("ServerLive: %v %v", r, err)
	}
	if r, err := c.ServerReady(ctx, &pb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	if r, err := c.ServerMetadata(ctx, &pb.ServerMetadataRequest{}); err != nil || r.Name != "zoo" || r.Version != version {
		t.Fatalf("ServerMetadata: %v %v", r, err)
	}
	if _, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("ModelReady of an unknown model: %v, want NotFound", err)
	}
	if _, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("ModelMetadata of an unknown model: %v, want NotFound", err)
	}
	if r, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: model}); err != nil || !r.Ready {
		t.Fatalf("ModelReady: %v %v", r, err)
	}
	md, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: model})
	if err != nil || len(md.Outputs) != 3 || md.Outputs[0].Name != "hidden" || fmt.Sprint(md.Outputs[0].Shape) != "[-1 -1 64]" {
		t.Fatalf("ModelMetadata: %v %v", md, err)
	}
	n := int64(len(ref.Tokens.Data))
	r, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "tokens", Datatype: "INT64", Shape: []int64{1, n}, Contents: &pb.InferTensorContents{Int64Contents: ref.Tokens.Data}}},
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "hidden"}, {Name: "embedding"}}})
	if err != nil || len(r.Outputs) != 2 {
		t.Fatalf("ModelInfer: %v %v", r, err)
	}
	if err := near(r.Outputs[0].Contents.Fp32Contents, ref.Outputs["hidden"].Data, 0); err != nil || fmt.Sprint(r.Outputs[0].Shape) != fmt.Sprintf("[1 %d 64]", n) {
		t.Errorf("gRPC hidden against zoo run: %v (shape %v)", err, r.Outputs[0].Shape)
	}
	if err := near(r.Outputs[1].Contents.Fp32Contents, ref.Outputs["embedding"].Data, 0); err != nil {
		t.Errorf("gRPC embedding against zoo run: %v", err)
	}
	// Text as raw BYTES: a 4-byte little-endian length, then the bytes.
	text := []byte("hello there")
	raw := binary.LittleEndian.AppendUint32(nil, uint32(len(text)))
	r, err = c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "text", Datatype: "BYTES", Shape: []int64{1}}}, RawInputContents: [][]byte{append(raw, text...)},
		Parameters: map[string]*pb.InferParameter{"pool": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "mean"}}}})
	if err != nil || len(r.Outputs) != 3 || r.Outputs[2].Name != "embedding" {
		t.Fatalf("ModelInfer from raw text: %v %v", r, err)
	}
	if err := near(r.Outputs[2].Contents.Fp32Contents, ref.Outputs["embedding"].Data, 0); err != nil {
		t.Errorf("gRPC text embedding against zoo run: %v", err)
	}
	for _, bad := range []struct {
		req  *pb.ModelInferRequest
		code codes.Code
	}{
		{&pb.ModelInferRequest{ModelName: "nope"}, codes.NotFound},
		{&pb.ModelInferRequest{ModelName: model}, codes.InvalidArgument},
		{&pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "tokens", Datatype: "INT64", Shape: []int64{1, 2}, Contents: &pb.InferTensorContents{Int64Contents: []int64{1, 999}}}}}, codes.InvalidArgument},
	} {
		if _, err := c.ModelInfer(ctx, bad.req); status.Code(err) != bad.code {
			t.Errorf("ModelInfer %v: %v, want %s", bad.req, err, bad.code)
		}
	}
}
