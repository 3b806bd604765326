package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
)

// texts decodes a string or a list of strings.
func texts(raw json.RawMessage, field string) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return nil, &httpError{code: 400, msg: fmt.Sprintf("%s: want a string or a non-empty list of strings", field), param: field}
	}
	return many, nil
}

// modelFor returns the model a request names, or the only one when it names none.
func (s *Server) modelFor(name string) (*model, error) {
	if name == "" {
		if len(s.order) != 1 {
			return nil, &httpError{code: 400, msg: fmt.Sprintf("model: name one of %v", s.order), param: "model"}
		}
		name = s.order[0]
	}
	m := s.models[name]
	if m == nil {
		return nil, &httpError{code: 404, msg: fmt.Sprintf("unknown model %q (models: %v)", name, s.order), param: "model", kind: "model_not_found"}
	}
	return m, nil
}

// embedding says how a model's sentence embeddings are made, for /info and errors.
func (m *model) embedding() string {
	switch {
	case m.Embedding != "":
		return "the model's own output " + m.Embedding
	case m.PoolFrom != "":
		return "mean of " + m.PoolFrom
	}
	return ""
}

// embedTexts tokenizes texts for m and returns one embedding each, normalised when asked,
// cut to its first dims values (0: all of them; then renormalised when normalising), and
// the number of tokens run. The model's own embedding output is answered when it has one,
// else the mean of PoolFrom.
func (s *Server) embedTexts(ctx context.Context, m *model, list []string, normalize, truncate bool, dims int) ([][]float32, int, error) {
	if m.Embedding == "" && m.PoolFrom == "" {
		return nil, 0, badRequest("model %s has no embedding output and no per-token output to pool", m.Name)
	}
	width := m.width()
	if dims < 0 || (dims > 0 && width > 0 && dims > width) {
		return nil, 0, &httpError{code: 400, msg: fmt.Sprintf("dimensions %d: model %s's embeddings have %d", dims, m.Name, width), param: "dimensions"}
	}
	seqs, err := tokenizeAll(m, list, truncate)
	if err != nil {
		return nil, 0, err
	}
	tokens := 0
	for _, q := range seqs {
		tokens += len(q)
	}
	values := int64(len(seqs)) * int64(max(width, 1))
	if err := m.checkAnswer(values); err != nil {
		return nil, 0, err
	}
	release, err := s.reserve(values)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	if err := m.fitsAlone(seqs); err != nil {
		return nil, 0, err
	}
	from := m.Embedding
	if from == "" {
		from = m.PoolFrom
	}
	rows, err := s.batch[m.Name].submit(ctx, seqs, nil, []string{from})
	if err != nil {
		return nil, 0, err
	}
	var embs [][]float32
	pooledNormal := false
	if m.Embedding != "" {
		embs = make([][]float32, len(rows))
		for i, r := range rows {
			embs[i] = r[m.Embedding]
		}
	} else {
		// Whole vectors are normalised by the encoder's pooling, as zoo run's are.
		pooledNormal = normalize && dims == 0
		if embs, err = pooledRows(m, seqs, rows, PoolMean, pooledNormal); err != nil {
			return nil, 0, err
		}
	}
	for i, e := range embs {
		if dims > 0 && dims < len(e) {
			e = e[:dims:dims]
		}
		if normalize && !pooledNormal {
			l2normalize(e)
		}
		embs[i] = e
	}
	return embs, tokens, nil
}

// width is the size of m's embeddings from its outputs' static shapes (0: unknown).
func (m *model) width() int {
	name := m.Embedding
	if name == "" {
		name = m.PoolFrom
	}
	o, ok := m.output(name)
	if !ok || len(o.Shape) == 0 || o.Shape[len(o.Shape)-1] < 1 {
		return 0
	}
	return int(o.Shape[len(o.Shape)-1])
}

// l2normalize scales e to unit length in place (a zero vector stays zero), summing in float64.
func l2normalize(e []float32) {
	var norm float64
	for _, v := range e {
		norm += float64(v) * float64(v)
	}
	scale := 1 / math.Max(math.Sqrt(norm), 1e-12)
	for k, v := range e {
		e[k] = float32(float64(v) * scale)
	}
}
