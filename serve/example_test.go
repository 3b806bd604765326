package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/zoo-dev/zoo/serve"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// toyEncoder is a stand-in for a real model, so that the example runs anywhere and prints
// the same numbers everywhere: each byte of a text is a token, and token t's vector is
// (1, t/100). A program serving a real model implements the same methods on its compiled
// model (zoo serve hands its models over as serve.Funcs).
type toyEncoder struct{}

func (toyEncoder) Info() serve.Info {
	return serve.Info{Name: "toy", Vocab: 256, PoolFrom: "hidden",
		Outputs: []serve.Output{{Name: "hidden", Shape: []int64{-1, -1, 2}, Seq: true}}}
}

func (toyEncoder) Tokenize(text string) ([]int64, error) {
	ids := make([]int64, len(text))
	for i := range len(text) {
		ids[i] = int64(text[i])
	}
	return ids, nil
}

func (toyEncoder) Run(_ context.Context, b *tokenize.Batch) (map[string]*tensor.Tensor, error) {
	h := make([]float32, 2*len(b.Tokens))
	for i, t := range b.Tokens {
		h[2*i], h[2*i+1] = 1, float32(t)/100
	}
	return map[string]*tensor.Tensor{"hidden": {DType: tensor.Float32, Shape: []int{b.B, b.N, 2}, F32: h}}, nil
}

func (toyEncoder) Fits(batch, n int) error { return nil } // no memory bound

func (toyEncoder) Pool(h *tensor.Tensor, mode string, normalize bool) (*tensor.Tensor, error) {
	l, d := h.Shape[1], h.Shape[2]
	if mode == serve.PoolCLS {
		l = 1
	}
	e := make([]float32, d)
	var norm float64
	for k := range d {
		for j := range l {
			e[k] += h.F32[j*d+k] / float32(l)
		}
		norm += float64(e[k] * e[k])
	}
	if normalize {
		for k := range e {
			e[k] /= float32(math.Sqrt(norm))
		}
	}
	return &tensor.Tensor{DType: tensor.Float32, Shape: []int{1, d}, F32: e}, nil
}

// ExampleNew serves an encoder and asks for embeddings in OpenAI's format. srv.Handler can
// as well be mounted in a program's own mux, and srv.RegisterGRPC adds the Open Inference
// Protocol's gRPC service to its own gRPC server.
func ExampleNew() {
	srv, err := serve.New(serve.Config{}, []serve.Encoder{toyEncoder{}})
	if err != nil {
		log.Fatal(err)
	}
	srv.Start()
	defer srv.Stop()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	resp, err := http.Post(hs.URL+"/v1/embeddings", "application/json",
		strings.NewReader(`{"model": "toy", "input": ["hi", "zoo"]}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status)
	for _, d := range out.Data {
		fmt.Printf("%d: %.3f\n", d.Index, d.Embedding)
	}
	fmt.Println("tokens:", out.Usage.TotalTokens)
	// Output:
	// 200 OK
	// 0: [0.691 0.722]
	// 1: [0.657 0.754]
	// tokens: 5
}
