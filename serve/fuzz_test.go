package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/zoo-dev/zoo/serve/inferencepb"
)

// FuzzModelInfer decodes any bytes as a gRPC ModelInferRequest (the message gRPC hands the
// service) the way ModelInfer does, through wireOf and decodeWire: it must decode to a request
// the model can run or refuse with an *httpError, never panic (FuzzDecodeInferRequest covers
// the REST body only).
func FuzzModelInfer(f *testing.F) {
	raw := func(vals ...int64) []byte {
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	str := func(ss ...string) []byte {
		var b []byte
		for _, s := range ss {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
		return b
	}
	for _, r := range []*pb.ModelInferRequest{
		{ModelName: "fake", Id: "1", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "tokens", Datatype: "INT64", Shape: []int64{2, 3}, Contents: &pb.InferTensorContents{Int64Contents: []int64{1, 2, 3, 4, 0, 0}}},
			{Name: "key_padding_mask", Datatype: "BOOL", Shape: []int64{2, 3}, Contents: &pb.InferTensorContents{BoolContents: []bool{false, false, false, false, true, true}}}},
			Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "hidden"}}},
		{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "tokens", Datatype: "INT64", Shape: []int64{1, 2}}}, RawInputContents: [][]byte{raw(5, 6)}},
		{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "text", Datatype: "BYTES", Shape: []int64{2}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("a"), []byte("bc")}}}},
			Outputs:    []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: OutputPooled}, {Name: "cls"}},
			Parameters: map[string]*pb.InferParameter{"pool": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "mean"}}, "normalize": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}}},
		{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "text", Datatype: "BYTES", Shape: []int64{1}}}, RawInputContents: [][]byte{str("hello")}},
		{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "tokens", Datatype: "FP32", Shape: []int64{1, 1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m, err := newModel((&fakeModel{}).model())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r pb.ModelInferRequest
		if proto.Unmarshal(data, &r) != nil {
			return // gRPC refuses it before the service sees it
		}
		w, err := wireOf(&r)
		var req *request
		if err == nil {
			req, err = decodeWire(w, m, len(data)%2 == 0) // the server's --truncate either way; the request's parameter wins
		}
		if err != nil {
			if _, ok := err.(*httpError); !ok {
				t.Fatalf("error %T %v is not an *httpError", err, err)
			}
			return
		}
		if len(req.Seqs) == 0 || len(req.Outputs) == 0 {
			t.Fatalf("accepted a request with %d sequences and %d outputs", len(req.Seqs), len(req.Outputs))
		}
		for _, s := range req.Seqs {
			if len(s) == 0 || len(s) > m.MaxLen || len(s) > req.Width {
				t.Fatalf("sequence of %d tokens (width %d)", len(s), req.Width)
			}
			for _, id := range s {
				if id < 0 || id >= int64(m.Vocab) {
					t.Fatalf("token id %d accepted", id)
				}
			}
		}
	})
}

// FuzzEmbedBodies posts any body to the embeddings endpoints, POST /v1/embeddings
// (OpenAI's) and POST /embed (text-embeddings-inference's), of a server over a small model:
// the answer is 200 with one embedding per input text, or a 4xx with a JSON error, never a
// 5xx or a panic.
func FuzzEmbedBodies(f *testing.F) {
	for _, s := range []struct {
		path, body string
	}{
		{"/v1/embeddings", `{"input":"hello","model":"fake"}`},
		{"/v1/embeddings", `{"input":["a","bc"],"encoding_format":"float","normalize":false}`},
		{"/v1/embeddings", `{"input":[],"encoding_format":"base64"}`},
		{"/embed", `{"inputs":"hello","normalize":true,"truncate":true}`},
		{"/embed", `{"inputs":["a", "` + strings.Repeat("x", 100) + `"],"truncate":false}`},
		{"/embed", `{"inputs":42}`},
		{"/embed", `{`},
	} {
		f.Add(s.path == "/embed", []byte(s.body))
	}
	s, err := New(Config{MaxBatch: 8, Queue: 64, MaxBody: 1 << 16}, []Encoder{(&fakeModel{}).model()})
	if err != nil {
		f.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	h := s.Handler()
	f.Fuzz(func(t *testing.T, tei bool, body []byte) {
		path := "/v1/embeddings"
		if tei {
			path = "/embed"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code >= 500 || (rec.Code != 200 && rec.Code < 400) {
			t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
		}
		if rec.Code != 200 {
			var e map[string]any
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e["error"] == nil {
				t.Fatalf("%s: status %d with a body that is no JSON error: %q", path, rec.Code, rec.Body)
			}
			return
		}
		var req struct {
			Input, Inputs json.RawMessage
		}
		_ = json.Unmarshal(body, &req)
		in := req.Input
		if tei {
			in = req.Inputs
		}
		list, err := texts(in, "input")
		if err != nil {
			t.Fatalf("%s: 200 for inputs that do not decode: %q", path, body)
		}
		var n int
		if tei {
			var embs [][]float32
			if err := json.Unmarshal(rec.Body.Bytes(), &embs); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			n = len(embs)
		} else {
			var resp struct {
				Data []struct {
					Embedding json.RawMessage `json:"embedding"` // floats, or base64 with encoding_format
				} `json:"data"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			n = len(resp.Data)
		}
		if n != len(list) {
			t.Fatalf("%s: %d embeddings for %d texts", path, n, len(list))
		}
	})
}
