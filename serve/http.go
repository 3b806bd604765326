package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Config is how a server batches and what it accepts. The zero Config is usable: a zero
// number takes the default given with it.
type Config struct {
	// MaxBatch is the most sequences per batch (0: 32).
	MaxBatch int
	// MaxDelay is the longest wait for a batch to fill after its first request (0: none;
	// requests already queued still join).
	MaxDelay time.Duration
	// MaxBody is the largest request body in bytes, and the largest gRPC message Server.GRPC
	// takes (0: 16 MiB); a larger one is answered 413.
	MaxBody int64
	// Queue is the most requests waiting per model (0: 256); one more is answered 503 with
	// Retry-After.
	Queue int
	// Logger receives a line per request, at level Info (nil: none).
	Logger *slog.Logger
	// Version is the server's version in GET /v2 and ServerMetadata.
	Version string
}

// The defaults of Config's zero numbers.
const (
	defaultMaxBatch = 32
	defaultMaxBody  = 16 << 20
	defaultQueue    = 256
)

// Server answers the endpoints for a set of encoders. Its life: New returns it not ready
// (inference answers 503); Start runs its batchers and marks it ready; SetReady(false) drains
// (readiness and inference answer 503 while requests in flight finish); once the caller's
// HTTP and gRPC servers have shut down, Stop ends the batchers. Its methods are safe for
// concurrent use.
type Server struct {
	cfg     Config
	models  map[string]*model
	order   []string
	batch   map[string]*batcher
	obs     *metrics
	log     *slog.Logger
	ready   atomic.Bool
	mu      sync.Mutex // guards stop
	stop    context.CancelFunc
	stopped sync.WaitGroup
}

// New returns a server for encoders, served under their Info names in the order given (the
// embeddings endpoints use the only one when a request names none). It returns an error when
// a number of cfg is negative, there are no encoders, an encoder is nil or lacks what the
// server needs (a name, a vocabulary size; a Funcs without TokenizeFunc, RunFunc or
// PoolFunc), or two share a name (a *DuplicateNameError).
func New(cfg Config, encoders []Encoder) (*Server, error) {
	if cfg.MaxBatch < 0 || cfg.Queue < 0 || cfg.MaxBody < 0 || cfg.MaxDelay < 0 {
		return nil, fmt.Errorf("serve: Config.MaxBatch, Queue, MaxBody and MaxDelay must not be negative")
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	if cfg.Queue == 0 {
		cfg.Queue = defaultQueue
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = defaultMaxBody
	}
	if len(encoders) == 0 {
		return nil, fmt.Errorf("serve: no models")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, models: map[string]*model{}, batch: map[string]*batcher{}, obs: newMetrics(), log: log}
	for _, enc := range encoders {
		m, err := newModel(enc)
		if err != nil {
			return nil, err
		}
		if s.models[m.Name] != nil {
			return nil, &DuplicateNameError{Name: m.Name}
		}
		s.models[m.Name] = m
		s.order = append(s.order, m.Name)
		b := newBatcher(m, cfg.MaxBatch, cfg.Queue, cfg.MaxDelay, s.obs)
		s.batch[m.Name] = b
		s.obs.queueDepth(b)
	}
	return s, nil
}

// Start starts the batchers and marks the server ready. Calling it while the server runs
// does nothing.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	for _, b := range s.batch {
		s.stopped.Add(1)
		go func() {
			defer s.stopped.Done()
			b.loop(ctx)
		}()
	}
	s.ready.Store(true)
}

// SetReady marks the server ready or not (draining); readiness and inference answer 503
// while it is not.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// Stop marks the server not ready, stops the batchers and waits for them; requests still
// queued are answered with an error. Call it once the HTTP and gRPC servers have
// finished their requests. Stop on a server not started does nothing.
func (s *Server) Stop() {
	s.ready.Store(false)
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.stopped.Wait()
}

// Handler returns an http.Handler of every endpoint, to serve as it is or mount in a
// program's own mux (under a prefix with http.StripPrefix): GET /v2/health/live,
// /v2/health/ready, /v2, /v2/models/NAME and /v2/models/NAME/ready; POST
// /v2/models/NAME/infer, /v1/embeddings and /embed; GET /metrics (Prometheus). Every other
// path is answered 404. A bad request is answered with its status (400, 404, 408, 413) and
// {"error": "..."} naming what is wrong; a full queue or a server not ready with 503 and
// Retry-After; a failed run with 500.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, endpoint string, h func(w http.ResponseWriter, r *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			t0 := time.Now()
			rw := &statusWriter{ResponseWriter: w, code: 200}
			if err := h(rw, r); err != nil {
				writeError(rw, err)
			}
			s.obs.request(endpoint, rw.code, time.Since(t0))
			s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rw.code, "ms", float64(time.Since(t0).Microseconds())/1000)
		})
	}
	handle("GET /v2/health/live", "live", func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, 200, map[string]bool{"live": true})
	})
	handle("GET /v2/health/ready", "ready", func(w http.ResponseWriter, r *http.Request) error {
		if !s.ready.Load() {
			return writeJSON(w, 503, map[string]bool{"ready": false})
		}
		return writeJSON(w, 200, map[string]bool{"ready": true})
	})
	handle("GET /v2", "server_metadata", func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, 200, map[string]any{"name": "zoo", "version": s.cfg.Version, "extensions": []string{}})
	})
	handle("GET /v2/models/{name}", "model_metadata", func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.model(r.PathValue("name"))
		if err != nil {
			return err
		}
		return writeJSON(w, 200, metadata(m))
	})
	handle("GET /v2/models/{name}/ready", "model_ready", func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.model(r.PathValue("name"))
		if err != nil {
			return err
		}
		code := 200
		if !s.ready.Load() {
			code = 503
		}
		return writeJSON(w, code, map[string]any{"name": m.Name, "ready": code == 200})
	})
	handle("POST /v2/models/{name}/infer", "infer", s.infer)
	handle("POST /v1/embeddings", "openai_embeddings", s.openAI)
	handle("POST /embed", "tei_embed", s.tei)
	mux.Handle("GET /metrics", s.obs.handler())
	handle("/", "unknown", func(w http.ResponseWriter, r *http.Request) error {
		return &httpError{code: 404, msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)}
	})
	return mux
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func writeJSON(w http.ResponseWriter, code int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
	return nil
}

// writeError answers err as {"error": "..."} with its status (httpCode); a 503 (a full
// queue, a server not ready or draining) carries Retry-After.
func writeError(w http.ResponseWriter, err error) {
	code := httpCode(err)
	if code == 503 {
		w.Header().Set("Retry-After", "1")
	}
	_ = writeJSON(w, code, map[string]string{"error": err.Error()})
}

func (s *Server) model(name string) (*model, error) {
	if m := s.models[name]; m != nil {
		return m, nil
	}
	return nil, &httpError{code: 404, msg: fmt.Sprintf("unknown model %q (models: %v)", name, s.order)}
}

// readBody reads r's body up to the limit: 413 from Content-Length before reading, and while
// reading when the body runs past it; 408 when the read timeout passes first.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBody {
		return nil, &httpError{code: 413, msg: fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, s.cfg.MaxBody)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return nil, &httpError{code: 413, msg: fmt.Sprintf("request body is over the limit of %d bytes", s.cfg.MaxBody)}
	case errors.As(err, &ne) && ne.Timeout():
		// The server's read timeout passed: a client sending too slowly.
		return nil, &httpError{code: 408, msg: "the request body did not arrive within the server's read timeout"}
	case err != nil:
		return nil, badRequest("read the request body: %v", err)
	}
	return body, nil
}

// notReady is the answer to inference while the server is not ready.
var notReady = &httpError{code: 503, msg: "the server is not ready"}

// ioMeta is a tensor's metadata in /v2/models/NAME.
type ioMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func metadata(m *model) map[string]any {
	n := int64(-1)
	inputs := []ioMeta{{InputTokens, "INT64", []int64{-1, n}}, {InputPadding, "BOOL", []int64{-1, n}}, {InputText, "BYTES", []int64{-1}}}
	var outputs []ioMeta
	for _, o := range m.Outputs {
		outputs = append(outputs, ioMeta{o.Name, "FP32", o.Shape})
	}
	if m.PoolFrom != "" {
		if o, ok := m.output(m.PoolFrom); ok {
			outputs = append(outputs, ioMeta{OutputPooled, "FP32", []int64{-1, o.Shape[len(o.Shape)-1]}})
		}
	}
	return map[string]any{"name": m.Name, "versions": []string{"1"}, "platform": "zoo", "inputs": inputs, "outputs": outputs,
		"parameters": map[string]any{"max_len": m.MaxLen, "vocab": m.Vocab}}
}

// wireOutput is a tensor of the protocol's response.
type wireOutput struct {
	Name     string    `json:"name"`
	Datatype string    `json:"datatype"`
	Shape    []int     `json:"shape"`
	Data     []float32 `json:"data"`
}

func (s *Server) infer(w http.ResponseWriter, r *http.Request) error {
	m, err := s.model(r.PathValue("name"))
	if err != nil {
		return err
	}
	if !s.ready.Load() {
		return notReady
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeInferRequest(body, m)
	if err != nil {
		return err
	}
	outs, err := s.run(r.Context(), m, req)
	if err != nil {
		return err
	}
	resp := map[string]any{"model_name": m.Name, "model_version": "1", "outputs": outs}
	if req.ID != "" {
		resp["id"] = req.ID
	}
	return writeJSON(w, 200, resp)
}

// run runs a decoded request through m's batcher and lays out the outputs it asks for.
func (s *Server) run(ctx context.Context, m *model, req *request) ([]wireOutput, error) {
	if err := m.fitsAlone(req.Seqs); err != nil {
		return nil, err
	}
	rows, err := s.batch[m.Name].submit(ctx, req.Seqs)
	if err != nil {
		return nil, err
	}
	var outs []wireOutput
	for _, name := range req.Outputs {
		var o wireOutput
		if name == OutputPooled {
			o, err = pooled(m, req, rows)
		} else {
			o = assemble(m, name, req, rows)
		}
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// assemble lays one output's rows out as (B, Width, ...) for a per-token output, zeros past
// each sequence's length, or (B, ...) for the others.
func assemble(m *model, name string, req *request, rows []map[string][]float32) wireOutput {
	o, _ := m.output(name)
	b := len(req.Seqs)
	if !o.Seq {
		per := len(rows[0][name])
		data := make([]float32, 0, b*per)
		for _, r := range rows {
			data = append(data, r[name]...)
		}
		return wireOutput{Name: name, Datatype: "FP32", Shape: append([]int{b}, shapeTail(o.Shape[1:], per)...), Data: data}
	}
	per := len(rows[0][name]) / len(req.Seqs[0])
	data := make([]float32, b*req.Width*per)
	for i, r := range rows {
		copy(data[i*req.Width*per:], r[name])
	}
	return wireOutput{Name: name, Datatype: "FP32", Shape: append([]int{b, req.Width}, shapeTail(o.Shape[2:], per)...), Data: data}
}

// shapeTail fills a shape's dynamic axes from the element count per row (one dynamic axis
// at most is told apart).
func shapeTail(shape []int64, per int) []int {
	out := make([]int, len(shape))
	known := 1
	for i, d := range shape {
		if d > 0 {
			out[i] = int(d)
			known *= int(d)
		}
	}
	for i, d := range shape {
		if d <= 0 {
			out[i] = per / max(known, 1)
			break
		}
	}
	return out
}

// pooledRows pools each sequence's per-token rows into one embedding.
func pooledRows(m *model, seqs [][]int64, rows []map[string][]float32, mode string, normalize bool) ([][]float32, error) {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		h := r[m.PoolFrom]
		l := len(seqs[i])
		t := &tensor.Tensor{DType: tensor.Float32, Shape: []int{1, l, len(h) / l}, F32: h}
		e, err := m.enc.Pool(t, mode, normalize)
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", m.Name, err)
		}
		out[i] = e.F32
	}
	return out, nil
}

func pooled(m *model, req *request, rows []map[string][]float32) (wireOutput, error) {
	embs, err := pooledRows(m, req.Seqs, rows, req.Pool, req.Normalize)
	if err != nil {
		return wireOutput{}, err
	}
	d := len(embs[0])
	data := make([]float32, 0, len(embs)*d)
	for _, e := range embs {
		data = append(data, e...)
	}
	return wireOutput{Name: OutputPooled, Datatype: "FP32", Shape: []int{len(embs), d}, Data: data}, nil
}

// texts decodes a string or a list of strings.
func texts(raw json.RawMessage, field string) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return nil, badRequest("%s: want a string or a non-empty list of strings", field)
	}
	return many, nil
}

// embed reads an embeddings request's texts, runs them and pools them by the mean.
func (s *Server) embed(w http.ResponseWriter, r *http.Request, body []byte, name string, list []string, normalize, truncate bool) (*model, [][]float32, int, error) {
	if name == "" {
		if len(s.order) != 1 {
			return nil, nil, 0, badRequest("model: name one of %v", s.order)
		}
		name = s.order[0]
	}
	m, err := s.model(name)
	if err != nil {
		return nil, nil, 0, err
	}
	if m.PoolFrom == "" {
		return nil, nil, 0, badRequest("model %s has no per-token output to pool", m.Name)
	}
	seqs, err := tokenizeAll(m, list, truncate)
	if err != nil {
		return nil, nil, 0, err
	}
	if err := m.fitsAlone(seqs); err != nil {
		return nil, nil, 0, err
	}
	rows, err := s.batch[m.Name].submit(r.Context(), seqs)
	if err != nil {
		return nil, nil, 0, err
	}
	embs, err := pooledRows(m, seqs, rows, "mean", normalize)
	tokens := 0
	for _, q := range seqs {
		tokens += len(q)
	}
	return m, embs, tokens, err
}

// openAI answers POST /v1/embeddings as OpenAI's API does: input a string or a list of
// strings, model, encoding_format float; normalize (default true, as OpenAI's embeddings
// are unit vectors) is zoo's own field.
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
		Normalize      *bool           `json:"normalize"`
	}
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" {
		return badRequest("encoding_format %q: zoo answers float", req.EncodingFormat)
	}
	list, err := texts(req.Input, "input")
	if err != nil {
		return err
	}
	normalize := req.Normalize == nil || *req.Normalize
	m, embs, tokens, err := s.embed(w, r, body, req.Model, list, normalize, false)
	if err != nil {
		return err
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, len(embs))
	for i, e := range embs {
		data[i] = item{"embedding", i, e}
	}
	return writeJSON(w, 200, map[string]any{"object": "list", "data": data, "model": m.Name,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// tei answers POST /embed as text-embeddings-inference does: inputs a string or a list,
// normalize (default true), truncate (default false); the answer is a list of embeddings.
func (s *Server) tei(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return notReady
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Inputs    json.RawMessage `json:"inputs"`
		Normalize *bool           `json:"normalize"`
		Truncate  bool            `json:"truncate"`
		Model     string          `json:"model"`
	}
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	list, err := texts(req.Inputs, "inputs")
	if err != nil {
		return err
	}
	_, embs, _, err := s.embed(w, r, body, req.Model, list, req.Normalize == nil || *req.Normalize, req.Truncate)
	if err != nil {
		return err
	}
	return writeJSON(w, 200, embs)
}
