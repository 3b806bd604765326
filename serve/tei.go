package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
)

// Token is one token of a text, as /tokenize answers it.
type Token struct {
	ID      int64
	Text    string // the vocabulary's string for the token
	Special bool   // a special token the tokenizer added ([CLS], [SEP], <s>, ...)
}

// TokenLister is an Encoder that can say which tokens a text encodes to, with their strings:
// /tokenize answers them (an Encoder without it answers the ids with empty texts). special
// asks for the tokenizer's special tokens around the text.
type TokenLister interface {
	Tokens(text string, special bool) ([]Token, error)
}

// truncation reads a request's truncate and truncation_direction: the server's default when
// truncate is absent; only the right side is cut.
func (s *Server) truncation(truncate *bool, direction string) (bool, error) {
	if direction != "" && direction != "Right" && direction != "right" {
		return false, badRequest("truncation_direction %q: zoo cuts texts on the right (Right)", direction)
	}
	if truncate == nil {
		return s.cfg.Truncate, nil
	}
	return *truncate, nil
}

// tei answers POST /embed as text-embeddings-inference does: inputs a string or a list,
// normalize (default true), truncate (default: the server's), truncation_direction Right,
// dimensions (the first k values); the answer is a list of embeddings.
func (s *Server) tei(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return notReady
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Inputs              json.RawMessage `json:"inputs"`
		Normalize           *bool           `json:"normalize"`
		Truncate            *bool           `json:"truncate"`
		TruncationDirection string          `json:"truncation_direction"`
		Dimensions          *int            `json:"dimensions"`
		PromptName          *string         `json:"prompt_name"`
		Model               string          `json:"model"`
	}
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if req.PromptName != nil {
		return badRequest("prompt_name %q: zoo has no prompts", *req.PromptName)
	}
	truncate, err := s.truncation(req.Truncate, req.TruncationDirection)
	if err != nil {
		return err
	}
	dims := 0
	if req.Dimensions != nil {
		if dims = *req.Dimensions; dims < 1 {
			return badRequest("dimensions %d: want at least 1", dims)
		}
	}
	list, err := texts(req.Inputs, "inputs")
	if err != nil {
		return err
	}
	m, err := s.modelFor(req.Model)
	if err != nil {
		return err
	}
	embs, _, err := s.embedTexts(r.Context(), m, list, req.Normalize == nil || *req.Normalize, truncate, dims)
	if err != nil {
		return err
	}
	return writeJSON(w, 200, embs)
}

// teiHealth answers GET /health: 200 with an empty body when the server is ready, else 503.
func (s *Server) teiHealth(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return &httpError{code: 503, msg: "the server is not ready"}
	}
	w.WriteHeader(200)
	return nil
}

// teiInfo answers GET /info with text-embeddings-inference's fields for the model named by
// ?model= (default: the first served), and zoo's: embedding_output (how embeddings are
// made), score_output and the models served.
func (s *Server) teiInfo(w http.ResponseWriter, r *http.Request) error {
	name := r.URL.Query().Get("model")
	if name == "" {
		name = s.order[0]
	}
	m, err := s.model(name)
	if err != nil {
		return err
	}
	dtype := m.DType
	if dtype == "" {
		dtype = "float32"
	}
	var kind map[string]any
	switch {
	case m.Score != "" && m.pair != nil:
		kind = map[string]any{"reranker": map[string]any{"id2label": map[string]string{"0": "LABEL_0"}, "label2id": map[string]int{"LABEL_0": 0}}}
	default:
		pooling := "mean"
		if m.Embedding != "" {
			pooling = "model"
		}
		kind = map[string]any{"embedding": map[string]string{"pooling": pooling}}
	}
	maxBatch := s.cfg.MaxBatch
	if m.MaxBatch > 0 && m.MaxBatch < maxBatch {
		maxBatch = m.MaxBatch
	}
	info := map[string]any{
		"model_id": m.Name, "model_sha": nil, "model_dtype": dtype, "model_type": kind,
		"max_concurrent_requests": s.cfg.Queue, "max_input_length": m.MaxLen,
		"max_batch_tokens": s.cfg.MaxTokens, "max_batch_requests": maxBatch, "max_client_batch_size": s.cfg.MaxSequences,
		"auto_truncate": s.cfg.Truncate, "tokenization_workers": 1, "version": s.cfg.Version, "sha": nil, "docker_label": nil,
		"embedding_output": m.embedding(), "score_output": nilIfEmpty(m.Score), "models": s.order,
	}
	return writeJSON(w, 200, info)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// teiTokenize answers POST /tokenize: inputs a string or a list, add_special_tokens (default
// true); each text's tokens as {"id", "text", "special", "start", "stop"} (start and stop are
// null: zoo does not keep offsets).
func (s *Server) teiTokenize(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Inputs           json.RawMessage `json:"inputs"`
		AddSpecialTokens *bool           `json:"add_special_tokens"`
		PromptName       *string         `json:"prompt_name"`
		Model            string          `json:"model"`
	}
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if req.PromptName != nil {
		return badRequest("prompt_name %q: zoo has no prompts", *req.PromptName)
	}
	list, err := texts(req.Inputs, "inputs")
	if err != nil {
		return err
	}
	m, err := s.modelFor(req.Model)
	if err != nil {
		return err
	}
	if err := m.checkCount(len(list)); err != nil {
		return err
	}
	special := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	type simpleToken struct {
		ID      int64  `json:"id"`
		Text    string `json:"text"`
		Special bool   `json:"special"`
		Start   *int   `json:"start"`
		Stop    *int   `json:"stop"`
	}
	out := make([][]simpleToken, len(list))
	total := 0
	for i, text := range list {
		var toks []Token
		if tl, ok := m.enc.(TokenLister); ok {
			toks, err = tl.Tokens(text, special)
		} else {
			var ids []int64
			ids, err = m.enc.Tokenize(text)
			for _, id := range ids {
				toks = append(toks, Token{ID: id})
			}
		}
		if err != nil {
			return &httpError{code: 422, msg: fmt.Sprintf("text %d: %v", i, err)}
		}
		total += len(toks)
		if err := m.checkTokens(total); err != nil {
			return err
		}
		out[i] = make([]simpleToken, len(toks))
		for k, t := range toks {
			out[i][k] = simpleToken{ID: t.ID, Text: t.Text, Special: t.Special}
		}
	}
	return writeJSON(w, 200, out)
}

// rankItem is one text of /rerank's answer.
type rankItem struct {
	Index int     `json:"index"`
	Score float64 `json:"score"`
	Text  *string `json:"text,omitempty"`
}

// teiRerank answers POST /rerank as text-embeddings-inference does: query and texts, each
// text encoded with the query as one pair ([CLS] query [SEP] text [SEP]) and scored by the
// model's Score output; raw_scores (default false: the sigmoid of the logit, a relevance in
// (0, 1)), return_text, truncate (the pair cut to the model's maximum length, the longer
// side first). The answer is [{"index", "score"}] sorted by score, highest first.
func (s *Server) teiRerank(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return notReady
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Query               *string  `json:"query"`
		Texts               []string `json:"texts"`
		RawScores           bool     `json:"raw_scores"`
		ReturnText          bool     `json:"return_text"`
		Truncate            *bool    `json:"truncate"`
		TruncationDirection string   `json:"truncation_direction"`
		Model               string   `json:"model"`
	}
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if req.Query == nil || len(req.Texts) == 0 {
		return badRequest("rerank: want a query and a non-empty list of texts")
	}
	truncate, err := s.truncation(req.Truncate, req.TruncationDirection)
	if err != nil {
		return err
	}
	m, err := s.modelFor(req.Model)
	if err != nil {
		return err
	}
	scores, err := s.rerank(r, m, *req.Query, req.Texts, truncate)
	if err != nil {
		return err
	}
	out := make([]rankItem, len(scores))
	for i, raw := range scores {
		out[i] = rankItem{Index: i, Score: raw}
		if !req.RawScores {
			out[i].Score = 1 / (1 + math.Exp(-raw))
		}
		if req.ReturnText {
			out[i].Text = &req.Texts[i]
		}
	}
	slices.SortStableFunc(out, func(a, b rankItem) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return writeJSON(w, 200, out)
}

// rerank encodes each text with the query as a pair and returns each pair's logit, in the
// texts' order.
func (s *Server) rerank(r *http.Request, m *model, query string, list []string, truncate bool) ([]float64, error) {
	if m.Score == "" || m.pair == nil {
		return nil, badRequest("model %s is not a cross-encoder: it has no score output (one or two logits per pair) or no pair encoding", m.Name)
	}
	if err := m.checkCount(len(list)); err != nil {
		return nil, err
	}
	cut := 0
	if truncate {
		cut = m.MaxLen
	}
	seqs, types := make([][]int64, len(list)), make([][]int64, len(list))
	total := 0
	for i, text := range list {
		ids, tt, err := m.pair.TokenizePair(query, text, cut)
		if err != nil {
			return nil, badRequest("text %d: %v", i, err)
		}
		if len(ids) == 0 || len(tt) != len(ids) {
			return nil, fmt.Errorf("model %s encoded pair %d as %d ids and %d type ids", m.Name, i, len(ids), len(tt))
		}
		for _, id := range ids {
			if id < 0 || id >= int64(m.Vocab) {
				return nil, badRequest("text %d: token id %d is outside model %s's vocabulary of %d", i, id, m.Name, m.Vocab)
			}
		}
		if m.MaxLen > 0 && len(ids) > m.MaxLen {
			return nil, m.tooLong(fmt.Sprintf("the query with text %d", i), len(ids))
		}
		seqs[i], types[i] = ids, tt
		total += len(ids)
		if err := m.checkTokens(total); err != nil {
			return nil, err
		}
	}
	if err := m.fitsAlone(seqs); err != nil {
		return nil, err
	}
	rows, err := s.batch[m.Name].submit(r.Context(), seqs, types, []string{m.Score})
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(rows))
	for i, row := range rows {
		v := row[m.Score]
		switch len(v) {
		case 1:
			out[i] = float64(v[0])
		case 2:
			out[i] = float64(v[1]) - float64(v[0])
		default:
			return nil, fmt.Errorf("model %s's score output %s has %d values per pair, want 1 or 2", m.Name, m.Score, len(v))
		}
	}
	return out, nil
}
