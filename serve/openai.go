package serve

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

// openAI answers POST /v1/embeddings as OpenAI's API does: input a string or a list of
// strings; model (optional when one model is served); encoding_format float (a list of
// numbers) or base64 (the little-endian float32 bytes, what OpenAI's SDKs ask for when their
// caller names no format); dimensions (the first k values of each embedding, renormalised:
// Matryoshka); user (ignored). normalize (default true, as OpenAI's embeddings are unit
// vectors) is zoo's own field. usage counts the tokens run, special tokens included.
func (s *Server) openAI(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return notReady
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Input          json.RawMessage `json:"input"`
		Model          string          `json:"model"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
		User           string          `json:"user"`
		Normalize      *bool           `json:"normalize"`
	}
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return &httpError{code: 400, msg: fmt.Sprintf("encoding_format %q: want float or base64", req.EncodingFormat), param: "encoding_format"}
	}
	dims := 0
	if req.Dimensions != nil {
		if dims = *req.Dimensions; dims < 1 {
			return &httpError{code: 400, msg: fmt.Sprintf("dimensions %d: want at least 1", dims), param: "dimensions"}
		}
	}
	if len(req.Input) == 0 {
		return &httpError{code: 400, msg: "input: missing; want a string or a list of strings", param: "input"}
	}
	list, err := texts(req.Input, "input")
	if err != nil {
		return err
	}
	m, err := s.modelFor(req.Model)
	if err != nil {
		return err
	}
	normalize := req.Normalize == nil || *req.Normalize
	embs, tokens, err := s.embedTexts(r.Context(), m, list, normalize, s.cfg.Truncate, dims)
	if err != nil {
		return err
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(embs))
	for i, e := range embs {
		data[i] = item{"embedding", i, e}
		if b64 {
			data[i].Embedding = base64Floats(e)
		}
	}
	return writeJSON(w, 200, map[string]any{"object": "list", "data": data, "model": m.Name,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// base64Floats encodes e as OpenAI's base64 format: its float32 values, little-endian.
func base64Floats(e []float32) string {
	b := make([]byte, 4*len(e))
	for i, v := range e {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// openAIModel is a model as GET /v1/models lists it.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) openAIModelOf(name string) openAIModel {
	return openAIModel{ID: name, Object: "model", Created: s.created, OwnedBy: "zoo"}
}

// openAIModels answers GET /v1/models: {"object": "list", "data": [model...]}.
func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) error {
	data := make([]openAIModel, len(s.order))
	for i, name := range s.order {
		data[i] = s.openAIModelOf(name)
	}
	return writeJSON(w, 200, map[string]any{"object": "list", "data": data})
}

// openAIModel answers GET /v1/models/{id}: the model, or 404 with code model_not_found.
func (s *Server) openAIModel(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if s.models[id] == nil {
		return &httpError{code: 404, msg: fmt.Sprintf("the model %q does not exist (models: %v)", id, s.order), param: "model", kind: "model_not_found"}
	}
	return writeJSON(w, 200, s.openAIModelOf(id))
}
