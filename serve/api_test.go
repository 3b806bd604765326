package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/zoo-dev/zoo/serve/inferencepb"
)

// TestNewRefuses checks New's errors on bad input: each names what is wrong.
func TestNewRefuses(t *testing.T) {
	fake := func(edit func(f *Funcs)) Encoder {
		f := (&fakeModel{}).model()
		edit(f)
		return f
	}
	var nilFuncs *Funcs
	for _, c := range []struct {
		name string
		cfg  Config
		encs []Encoder
		want string
	}{
		{"negative config", Config{Queue: -1}, []Encoder{fake(func(*Funcs) {})}, "must not be negative"},
		{"no encoders", Config{}, nil, "no models"},
		{"nil encoder", Config{}, []Encoder{nil}, "nil Encoder"},
		{"nil *Funcs", Config{}, []Encoder{nilFuncs}, "nil *Funcs"},
		{"no name", Config{}, []Encoder{fake(func(f *Funcs) { f.Name = "" })}, "without a name"},
		{"no vocab", Config{}, []Encoder{fake(func(f *Funcs) { f.Vocab = 0 })}, "no vocabulary size"},
		{"no RunFunc", Config{}, []Encoder{fake(func(f *Funcs) { f.RunFunc = nil })}, "lacks TokenizeFunc, RunFunc or PoolFunc"},
		{"negative MaxLen", Config{}, []Encoder{fake(func(f *Funcs) { f.MaxLen = -1 })}, "negative MaxLen"},
	} {
		if s, err := New(c.cfg, c.encs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New returned %v, %v; want an error saying %q", c.name, s, err, c.want)
		}
	}
	_, err := New(Config{}, []Encoder{fake(func(*Funcs) {}), fake(func(*Funcs) {})})
	var dup *DuplicateNameError
	if !errors.As(err, &dup) || dup.Name != "fake" || err.Error() != "serve: two models named fake" {
		t.Errorf("two encoders named fake: %v, want a *DuplicateNameError", err)
	}
}

// TestZeroConfig checks that the zero Config takes its defaults, that a Funcs without
// FitsFunc fits everything, and that Start twice and Stop twice are harmless.
func TestZeroConfig(t *testing.T) {
	f := (&fakeModel{}).model()
	f.FitsFunc = nil
	s, err := New(Config{}, []Encoder{f})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.MaxBatch != defaultMaxBatch || s.cfg.Queue != defaultQueue || s.cfg.MaxBody != defaultMaxBody || s.cfg.MaxDelay != 0 {
		t.Errorf("zero Config became %+v", s.cfg)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	if code, _, _ := post(t, hs.Client(), hs.URL+"/v1/embeddings", `{"input":"abc"}`); code != 503 {
		t.Errorf("embeddings before Start: %d, want 503", code)
	}
	s.Start()
	s.Start()
	code, _, body := post(t, hs.Client(), hs.URL+"/v1/embeddings", `{"input":"abc"}`)
	if code != 200 || !strings.Contains(string(body), `"prompt_tokens":4`) {
		t.Errorf("embeddings: %d %s", code, body)
	}
	s.Stop()
	s.Stop()
	if code, _, _ := post(t, hs.Client(), hs.URL+"/v1/embeddings", `{"input":"abc"}`); code != 503 {
		t.Errorf("embeddings after Stop: %d, want 503", code)
	}
}

// TestMounted checks that the handler works mounted under a prefix of a program's own mux.
func TestMounted(t *testing.T) {
	s, err := New(Config{}, []Encoder{(&fakeModel{}).model()})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	mux := http.NewServeMux()
	mux.Handle("/zoo/", http.StripPrefix("/zoo", s.Handler()))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	code, _, body := post(t, hs.Client(), hs.URL+"/zoo/embed", `{"inputs":["abc","de"]}`)
	if code != 200 || !strings.HasPrefix(string(body), "[[") {
		t.Errorf("POST /zoo/embed: %d %s", code, body)
	}
}

// TestRegisterGRPC registers the service on a gRPC server of the test's own and calls it.
func TestRegisterGRPC(t *testing.T) {
	s, err := New(Config{MaxDelay: time.Millisecond}, []Encoder{(&fakeModel{}).model()})
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
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: InputTokens, Datatype: "INT64", Shape: []int64{1, 2}, Contents: &pb.InferTensorContents{Int64Contents: []int64{3, 4}}}},
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "cls"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetOutputs()[0].GetContents().GetFp32Contents(); len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Errorf("cls over gRPC: %v, want [3 2] (first token, length)", got)
	}
	_, err = c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("ModelReady of an unknown model: %v, want NotFound", err)
	}
}
