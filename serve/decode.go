package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// httpError is an error with the HTTP status it is answered with.
type httpError struct {
	code  int
	msg   string
	param string // the request field at fault, for OpenAI's error shape ("" when none)
	kind  string // OpenAI's error code, e.g. model_not_found ("" when none)
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{code: 400, msg: fmt.Sprintf(format, args...)}
}

// wireTensor is a tensor of the protocol's JSON request.
type wireTensor struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters map[string]any  `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// wireRequest is the protocol's inference request.
type wireRequest struct {
	ID         string         `json:"id,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Inputs     []wireTensor   `json:"inputs"`
	Outputs    []struct {
		Name string `json:"name"`
	} `json:"outputs,omitempty"`
}

// request is a decoded inference request: its sequences and what to answer with.
type request struct {
	ID   string
	Seqs [][]int64
	// Width is the sequence axis of the answer: the tokens input's n, else the longest
	// sequence.
	Width     int
	Outputs   []string // the outputs answered, in order; OutputPooled among them when pooling
	Pool      string   // "mean" or "cls" when OutputPooled is answered
	Normalize bool
}

// decodeJSON decodes body into v; trailing data after the value is an error.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return badRequest("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed JSON: data after the request")
	}
	return nil
}

// decodeInferRequest decodes and checks a /v2/models/NAME/infer body for m. Every problem
// with the request is an *httpError with code 400 naming the input at fault: malformed JSON,
// an unknown input or output, a wrong datatype or shape, data that does not fill the shape,
// a token id outside m's vocabulary, a mask that is not trailing padding, a sequence longer
// than m's maximum length (413, unless a text and truncate, or the request's parameter
// truncate, cuts it), or a text the tokenizer refuses. More sequences or tokens than a request
// may hold are a 413 before the data is decoded.
func decodeInferRequest(body []byte, m *model, truncate bool) (*request, error) {
	var w wireRequest
	if err := decodeJSON(body, &w); err != nil {
		return nil, err
	}
	return decodeWire(&w, m, truncate)
}

// decodeWire checks a decoded inference request for m, as decodeInferRequest does; the gRPC
// side hands its requests over in this form.
func decodeWire(w *wireRequest, m *model, truncate bool) (*request, error) {
	r := &request{ID: w.ID}
	if v, ok := w.Parameters["truncate"]; ok {
		b, ok := v.(bool)
		if !ok {
			return nil, badRequest("parameter truncate: want true or false, got %v", v)
		}
		truncate = b
	}
	var tokens, mask, text *wireTensor
	for i := range w.Inputs {
		in := &w.Inputs[i]
		var slot **wireTensor
		want := ""
		switch in.Name {
		case InputTokens:
			slot, want = &tokens, "INT64"
		case InputPadding:
			slot, want = &mask, "BOOL"
		case InputText:
			slot, want = &text, "BYTES"
		default:
			return nil, badRequest("unknown input %q (inputs: %s INT64 (B, n) with an optional %s BOOL (B, n), or %s BYTES (B))", in.Name, InputTokens, InputPadding, InputText)
		}
		if *slot != nil {
			return nil, badRequest("input %q given twice", in.Name)
		}
		if in.Datatype != want {
			return nil, badRequest("input %q: datatype %q, want %s", in.Name, in.Datatype, want)
		}
		*slot = in
	}
	switch {
	case text != nil && (tokens != nil || mask != nil):
		return nil, badRequest("give either %s or %s, not both", InputText, InputTokens)
	case text != nil:
		if err := r.decodeText(text, m, truncate); err != nil {
			return nil, err
		}
	case tokens != nil:
		if err := r.decodeTokens(tokens, mask, m); err != nil {
			return nil, err
		}
	case mask != nil:
		return nil, badRequest("input %s without %s", InputPadding, InputTokens)
	default:
		return nil, badRequest("no inputs: give %s INT64 (B, n) or %s BYTES (B)", InputTokens, InputText)
	}
	var names []string
	for _, o := range w.Outputs {
		names = append(names, o.Name)
	}
	if err := r.chooseOutputs(m, names, w.Parameters); err != nil {
		return nil, err
	}
	return r, nil
}

// chooseOutputs sets the answered outputs and the pooling from the requested names (none:
// every output) and the request's parameters pool (mean, cls or none) and normalize.
func (r *request) chooseOutputs(m *model, names []string, params map[string]any) error {
	pool := ""
	if v, ok := params["pool"]; ok {
		s, ok := v.(string)
		if !ok || (s != "mean" && s != "cls" && s != "none") {
			return badRequest("parameter pool: want \"mean\", \"cls\" or \"none\", got %v", v)
		}
		pool = s
	}
	if v, ok := params["normalize"]; ok {
		b, ok := v.(bool)
		if !ok {
			return badRequest("parameter normalize: want true or false, got %v", v)
		}
		r.Normalize = b
	}
	for _, n := range names {
		if _, ok := m.output(n); !ok && n != OutputPooled {
			return badRequest("unknown output %q (outputs: %s)", n, outputNames(m))
		}
		if slices.Contains(r.Outputs, n) {
			return badRequest("output %q requested twice", n)
		}
		r.Outputs = append(r.Outputs, n)
	}
	if len(names) == 0 {
		for _, o := range m.Outputs {
			r.Outputs = append(r.Outputs, o.Name)
		}
		if pool == "mean" || pool == "cls" {
			r.Outputs = append(r.Outputs, OutputPooled)
		}
	}
	if !slices.Contains(r.Outputs, OutputPooled) {
		if r.Normalize {
			return badRequest("parameter normalize applies to the pooled output %s", OutputPooled)
		}
		return nil
	}
	switch {
	case m.PoolFrom == "":
		return badRequest("model %s has no per-token output to pool into %s", m.Name, OutputPooled)
	case pool == "none":
		return badRequest("output %s requested with pool \"none\"", OutputPooled)
	case pool == "":
		pool = "mean"
	}
	r.Pool = pool
	return nil
}

func outputNames(m *model) string {
	s := ""
	for _, o := range m.Outputs {
		s += o.Name + ", "
	}
	if m.PoolFrom != "" {
		s += OutputPooled + ", "
	}
	if s == "" {
		return "none"
	}
	return s[:len(s)-2]
}

// maxElements bounds a tensor's elements (the body limit bounds them first).
const maxElements = 1 << 28

// checkShape returns the element count of shape when it has rank want and positive axes.
func checkShape(t *wireTensor, want int) (int, error) {
	if len(t.Shape) != want {
		return 0, badRequest("input %q: shape %v, want rank %d", t.Name, t.Shape, want)
	}
	n := int64(1)
	for _, d := range t.Shape {
		if d < 1 || d > maxElements {
			return 0, badRequest("input %q: shape %v: every axis must be at least 1", t.Name, t.Shape)
		}
		n *= d
		if n > maxElements {
			return 0, badRequest("input %q: shape %v is too large", t.Name, t.Shape)
		}
	}
	return int(n), nil
}

// flatData decodes t's data, flat or nested as the protocol allows, into its leaves.
func flatData(t *wireTensor, count int) ([]any, error) {
	if len(t.Data) == 0 {
		return nil, badRequest("input %q: no data", t.Name)
	}
	dec := json.NewDecoder(bytes.NewReader(t.Data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("input %q: data: %v", t.Name, err)
	}
	// Each element takes at least two bytes of data ("1,"): a large shape over a short list
	// allocates nothing before it is refused.
	out := make([]any, 0, min(count, len(t.Data)/2+1))
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		a, ok := v.([]any)
		if !ok {
			if len(out) == count {
				return badRequest("input %q: more data than its shape %v holds", t.Name, t.Shape)
			}
			out = append(out, v)
			return nil
		}
		if depth > len(t.Shape) {
			return badRequest("input %q: data nested deeper than its shape %v", t.Name, t.Shape)
		}
		for _, e := range a {
			if err := walk(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(v, 0); err != nil {
		return nil, err
	}
	if _, isList := v.([]any); !isList {
		return nil, badRequest("input %q: data must be a list", t.Name)
	}
	if len(out) != count {
		return nil, badRequest("input %q: %d data elements, but shape %v holds %d", t.Name, len(out), t.Shape, count)
	}
	return out, nil
}

func (r *request) decodeTokens(tokens, mask *wireTensor, m *model) error {
	count, err := checkShape(tokens, 2)
	if err != nil {
		return err
	}
	b, n := int(tokens.Shape[0]), int(tokens.Shape[1])
	if m.MaxLen > 0 && n > m.MaxLen {
		return m.tooLong(fmt.Sprintf("input %q's row", tokens.Name), n)
	}
	if err := m.checkCount(b); err != nil {
		return err
	}
	if err := m.checkTokens(count); err != nil {
		return err
	}
	data, err := flatData(tokens, count)
	if err != nil {
		return err
	}
	ids := make([]int64, count)
	for i, v := range data {
		num, ok := v.(json.Number)
		if !ok {
			return badRequest("input %q: element %d is %s, want an integer", tokens.Name, i, jsonKind(v))
		}
		id, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			return badRequest("input %q: element %d (%s) is not an INT64", tokens.Name, i, num)
		}
		if id < 0 || id >= int64(m.Vocab) {
			return badRequest("input %q: token id %d at element %d is out of range [0, %d)", tokens.Name, id, i, m.Vocab)
		}
		ids[i] = id
	}
	lengths := make([]int, b)
	for i := range lengths {
		lengths[i] = n
	}
	if mask != nil {
		if !slices.Equal(mask.Shape, tokens.Shape) {
			return badRequest("input %q: shape %v, want the shape of %s, %v", mask.Name, mask.Shape, tokens.Name, tokens.Shape)
		}
		data, err := flatData(mask, count)
		if err != nil {
			return err
		}
		for i := 0; i < b; i++ {
			l := -1
			for j := 0; j < n; j++ {
				pad, ok := data[i*n+j].(bool)
				if !ok {
					return badRequest("input %q: element %d is %s, want true or false", mask.Name, i*n+j, jsonKind(data[i*n+j]))
				}
				switch {
				case pad && l < 0:
					l = j
				case !pad && l >= 0:
					return badRequest("input %q: row %d has a real token at %d after padding at %d; padding must trail", mask.Name, i, j, l)
				}
			}
			if l == 0 {
				return badRequest("input %q: row %d is all padding", mask.Name, i)
			}
			if l > 0 {
				lengths[i] = l
			}
		}
	}
	r.Width = n
	for i := 0; i < b; i++ {
		r.Seqs = append(r.Seqs, ids[i*n:i*n+lengths[i]])
	}
	return nil
}

func (r *request) decodeText(t *wireTensor, m *model, truncate bool) error {
	count, err := checkShape(t, 1)
	if err != nil {
		return err
	}
	if err := m.checkCount(count); err != nil {
		return err
	}
	data, err := flatData(t, count)
	if err != nil {
		return err
	}
	texts := make([]string, count)
	for i, v := range data {
		s, ok := v.(string)
		if !ok {
			return badRequest("input %q: element %d is %s, want a string", t.Name, i, jsonKind(v))
		}
		texts[i] = s
	}
	seqs, err := tokenizeAll(m, texts, truncate)
	if err != nil {
		return err
	}
	r.Seqs = seqs
	for _, s := range seqs {
		r.Width = max(r.Width, len(s))
	}
	return nil
}

// tokenizeAll encodes texts with m's tokenizer; a text longer than m's maximum length is a
// 413 naming the limit unless truncate cuts it there; more texts or tokens than a request may
// hold are a 413.
func tokenizeAll(m *model, texts []string, truncate bool) ([][]int64, error) {
	if len(texts) == 0 {
		return nil, badRequest("no texts")
	}
	if err := m.checkCount(len(texts)); err != nil {
		return nil, err
	}
	seqs := make([][]int64, len(texts))
	total := 0
	for i, s := range texts {
		ids, err := m.enc.Tokenize(s)
		if err != nil {
			var he *httpError
			if errors.As(err, &he) {
				return nil, err
			}
			return nil, badRequest("text %d: %v", i, err)
		}
		if len(ids) == 0 {
			return nil, badRequest("text %d encodes to no tokens", i)
		}
		if m.MaxLen > 0 && len(ids) > m.MaxLen {
			if !truncate {
				return nil, m.tooLong(fmt.Sprintf("text %d", i), len(ids))
			}
			ids = m.truncate(ids, m.MaxLen)
		}
		seqs[i] = ids
		total += len(ids)
		if err := m.checkTokens(total); err != nil {
			return nil, err
		}
	}
	return seqs, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	}
	return "a list"
}
