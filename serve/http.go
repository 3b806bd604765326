package serve

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
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
	// MaxStreams is the most concurrent streams one gRPC connection of Server.GRPC may open
	// (0: 100); a client opening more waits for one to end.
	MaxStreams int
	// MaxSequences is the most sequences (texts, rows, pairs) one request may hold (0: 2048,
	// OpenAI's limit of inputs); MaxTokens the most tokens in all (0: 262144). A request over
	// either is answered 413 naming the limit before anything runs.
	MaxSequences, MaxTokens int
	// MaxAnswer is the most float32 values one answer may hold (0: 8Mi, 32 MiB as float32): a
	// request for more (many sequences, every per-token output) is answered 413 before it
	// runs. The answers being computed at once hold at most 4 × MaxAnswer values: a request
	// past that is answered 503 with Retry-After. Once an answer of MaxAnswer/4 values or more
	// is written, the memory it took is returned to the operating system.
	MaxAnswer int64
	// Truncate cuts a text longer than its model's MaxLen to MaxLen tokens when the request
	// does not say ("truncate" of /embed and /rerank); without it such a text is answered 413
	// naming the limit.
	Truncate bool
	// APIKey, when not empty, must come with every request as "Authorization: Bearer KEY"
	// (gRPC: the authorization metadata), except the health and readiness probes; other
	// requests are answered 401.
	APIKey string
	// Logger receives the server's lifecycle lines (draining, stopped) and requests that
	// failed on the server's side (5xx), at levels Info and Error (nil: none).
	Logger *slog.Logger
	// AccessLog receives one line per request, at level Info (nil: none).
	AccessLog *slog.Logger
	// Version is the server's version in GET /v2 and ServerMetadata.
	Version string
}

// The defaults of Config's zero numbers.
const (
	defaultMaxBatch   = 32
	defaultMaxBody    = 16 << 20
	defaultQueue      = 256
	defaultMaxSeqs    = 2048
	defaultMaxTokens  = 1 << 18
	defaultMaxAnswer  = 8 << 20
	defaultMaxStreams = 100
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
	access  *slog.Logger // nil: no access log
	created int64        // Unix time of New, the "created" of /v1/models
	ready   atomic.Bool
	// running counts the requests that have arrived and run; arriving those whose body (or
	// gRPC message) is still on its way. Serve's drain waits for the first, briefly for the
	// second.
	running, arriving atomic.Int64
	// answering counts the values of the answers being computed and written, at most
	// answersInFlight × Config.MaxAnswer.
	answering atomic.Int64
	lastFree  atomic.Int64 // Unix nanoseconds of the last returnMemory
	mu        sync.Mutex   // guards stop
	stop      context.CancelFunc
	stopped   sync.WaitGroup
}

// New returns a server for encoders, served under their Info names in the order given (the
// embeddings endpoints use the only one when a request names none). It returns an error when
// a number of cfg is negative, there are no encoders, an encoder is nil or lacks what the
// server needs (a name, a vocabulary size; a Funcs without TokenizeFunc, RunFunc or
// PoolFunc), or two share a name (a *DuplicateNameError).
func New(cfg Config, encoders []Encoder) (*Server, error) {
	if cfg.MaxBatch < 0 || cfg.Queue < 0 || cfg.MaxBody < 0 || cfg.MaxDelay < 0 || cfg.MaxSequences < 0 || cfg.MaxTokens < 0 || cfg.MaxAnswer < 0 || cfg.MaxStreams < 0 {
		return nil, fmt.Errorf("serve: Config.MaxBatch, Queue, MaxBody, MaxDelay, MaxSequences, MaxTokens, MaxAnswer and MaxStreams must not be negative")
	}
	for p, d := range map[*int]int{&cfg.MaxSequences: defaultMaxSeqs, &cfg.MaxTokens: defaultMaxTokens, &cfg.MaxStreams: defaultMaxStreams} {
		if *p == 0 {
			*p = d
		}
	}
	if cfg.MaxAnswer == 0 {
		cfg.MaxAnswer = defaultMaxAnswer
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
	s := &Server{cfg: cfg, models: map[string]*model{}, batch: map[string]*batcher{}, obs: newMetrics(), log: log, access: cfg.AccessLog, created: time.Now().Unix()}
	for _, enc := range encoders {
		m, err := newModel(enc)
		if err != nil {
			return nil, err
		}
		m.lim = limits{seqs: cfg.MaxSequences, tokens: cfg.MaxTokens, answer: cfg.MaxAnswer}
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
// program's own mux (under a prefix with http.StripPrefix). The Open Inference Protocol:
// GET /v2/health/live, /v2/health/ready, /v2, /v2/models/NAME and /v2/models/NAME/ready;
// POST /v2/models/NAME/infer. OpenAI's: POST /v1/embeddings, GET /v1/models and
// /v1/models/NAME. text-embeddings-inference's: GET /health and /info; POST /embed,
// /tokenize and /rerank. GET /metrics (Prometheus) and GET / (the models and endpoints).
// Every other path is answered 404. A bad request is answered with its status (400, 401, 404,
// 408, 413) and an error naming what is wrong, in each API's own shape: {"error": "..."} for
// the protocol, {"error": {"message", "type", "param", "code"}} for OpenAI's endpoints,
// {"error", "error_type"} for text-embeddings-inference's; a full queue or a server not ready
// with 503 and Retry-After; a failed run with 500.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, endpoint string, style errStyle, h func(w http.ResponseWriter, r *http.Request) error) {
		open := endpoint == "live" || endpoint == "ready" || endpoint == "tei_health" || endpoint == "model_ready"
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			t0 := time.Now()
			s.arriving.Add(1)
			rw := &statusWriter{ResponseWriter: w, code: 200, s: s}
			defer rw.done()
			err := s.authorized(r, open)
			if err == nil {
				err = h(rw, r)
			}
			if err != nil {
				writeError(rw, err, style)
				if rw.code >= 500 && rw.code != 503 {
					s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", rw.code, "error", err.Error())
				}
			}
			d := time.Since(t0)
			s.obs.request(endpoint, rw.code, d)
			if s.access != nil {
				s.access.Info("request", "method", r.Method, "path", r.URL.Path, "status", rw.code, "ms", float64(d.Microseconds())/1000, "remote", r.RemoteAddr)
			}
		})
	}
	handle("GET /v2/health/live", "live", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, 200, map[string]bool{"live": true})
	})
	handle("GET /v2/health/ready", "ready", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		if !s.ready.Load() {
			return writeJSON(w, 503, map[string]bool{"ready": false})
		}
		return writeJSON(w, 200, map[string]bool{"ready": true})
	})
	handle("GET /v2", "server_metadata", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, 200, map[string]any{"name": "zoo", "version": s.cfg.Version, "extensions": []string{}})
	})
	handle("GET /v2/models/{name}", "model_metadata", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.model(r.PathValue("name"))
		if err != nil {
			return err
		}
		return writeJSON(w, 200, metadata(m))
	})
	handle("GET /v2/models/{name}/ready", "model_ready", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
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
	handle("POST /v2/models/{name}/infer", "infer", kserveErrors, s.infer)
	handle("POST /v1/embeddings", "openai_embeddings", openAIErrors, s.openAI)
	handle("GET /v1/models", "openai_models", openAIErrors, s.openAIModels)
	handle("GET /v1/models/{id...}", "openai_model", openAIErrors, s.openAIModel)
	handle("GET /health", "tei_health", teiErrors, s.teiHealth)
	handle("GET /info", "tei_info", teiErrors, s.teiInfo)
	handle("POST /embed", "tei_embed", teiErrors, s.tei)
	handle("POST /tokenize", "tei_tokenize", teiErrors, s.teiTokenize)
	handle("POST /rerank", "tei_rerank", teiErrors, s.teiRerank)
	metricsHandler := s.obs.handler()
	handle("GET /metrics", "metrics", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		metricsHandler.ServeHTTP(w, r)
		return nil
	})
	handle("GET /{$}", "index", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, 200, map[string]any{"name": "zoo", "version": s.cfg.Version, "models": s.order, "endpoints": endpoints})
	})
	handle("/", "unknown", kserveErrors, func(w http.ResponseWriter, r *http.Request) error {
		return &httpError{code: 404, msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)}
	})
	return mux
}

// answersInFlight is how many answers of Config.MaxAnswer values the server holds at once:
// a request whose answer would take the values in flight past that waits for none, it is
// answered 503 with Retry-After, so that the memory the answers take is bounded per server
// as well as per request.
const answersInFlight = 4

// reserve takes values off the server's answer budget until release is called; a request
// that would go over it is answered 503 (retry later). Releasing a large answer (a quarter
// of MaxAnswer or more) returns the memory it took to the operating system.
func (s *Server) reserve(values int64) (release func(), err error) {
	if n := s.answering.Add(values); n > answersInFlight*s.cfg.MaxAnswer && n != values {
		s.answering.Add(-values)
		return nil, &httpError{code: 503, msg: fmt.Sprintf("the server is computing answers of %d values already; retry later", answersInFlight*s.cfg.MaxAnswer)}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.answering.Add(-values)
			if values >= s.cfg.MaxAnswer/4 {
				s.returnMemory()
			}
		})
	}, nil
}

// returnMemory returns the memory freed since to the operating system (a garbage collection
// and runtime/debug.FreeOSMemory), in the background and at most once every 2 seconds:
// Go's own scavenger returns it over minutes, so a server's resident memory would stay at
// its largest request's for that long.
func (s *Server) returnMemory() {
	now := time.Now().UnixNano()
	last := s.lastFree.Load()
	if now-last < int64(2*time.Second) || !s.lastFree.CompareAndSwap(last, now) {
		return
	}
	go debug.FreeOSMemory()
}

// endpoints lists the endpoints for GET /.
var endpoints = []string{"GET /v2/health/live", "GET /v2/health/ready", "GET /v2", "GET /v2/models/NAME", "GET /v2/models/NAME/ready",
	"POST /v2/models/NAME/infer", "POST /v1/embeddings", "GET /v1/models", "GET /v1/models/NAME", "GET /health", "GET /info",
	"POST /embed", "POST /tokenize", "POST /rerank", "GET /metrics"}

// authorized returns a 401 when the server has an API key and r does not carry it as a
// Bearer token; open endpoints (the probes) need none.
func (s *Server) authorized(r *http.Request, open bool) error {
	if s.cfg.APIKey == "" || open {
		return nil
	}
	if bearerOK(r.Header.Get("Authorization"), s.cfg.APIKey) {
		return nil
	}
	return errUnauthorized
}

// errUnauthorized is the answer to a request without the server's API key.
var errUnauthorized = &httpError{code: 401, msg: "missing or wrong API key: send the header Authorization: Bearer KEY"}

// bearerOK reports whether an Authorization value is "Bearer key", comparing in constant time.
func bearerOK(header, key string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(key)) == 1
}

// statusWriter remembers the status code written, and whether its request has arrived
// (counted in Server.running, else in Server.arriving).
type statusWriter struct {
	http.ResponseWriter
	code    int
	s       *Server
	arrived bool
}

// markArrived moves the request from arriving to running.
func (w *statusWriter) markArrived() {
	if !w.arrived {
		w.arrived = true
		w.s.running.Add(1)
		w.s.arriving.Add(-1)
	}
}

// done takes the request off the counts.
func (w *statusWriter) done() {
	if w.arrived {
		w.s.running.Add(-1)
	} else {
		w.s.arriving.Add(-1)
	}
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

// errStyle is the shape errors are answered in: each API's own.
type errStyle int

const (
	kserveErrors errStyle = iota // {"error": "..."}
	openAIErrors                 // {"error": {"message", "type", "param", "code"}}
	teiErrors                    // {"error": "...", "error_type": "..."}
)

// writeError answers err with its status (httpCode) in style's shape; a 503 (a full queue, a
// server not ready or draining) carries Retry-After, a 401 WWW-Authenticate.
func writeError(w http.ResponseWriter, err error, style errStyle) {
	code := httpCode(err)
	switch code {
	case 503:
		w.Header().Set("Retry-After", "1")
	case 401:
		w.Header().Set("WWW-Authenticate", `Bearer realm="zoo"`)
	}
	var body any
	switch style {
	case openAIErrors:
		e := map[string]any{"message": err.Error(), "type": openAIType(code), "param": nil, "code": nil}
		var he *httpError
		if errors.As(err, &he) && he.param != "" {
			e["param"] = he.param
		}
		if errors.As(err, &he) && he.kind != "" {
			e["code"] = he.kind
		}
		body = map[string]any{"error": e}
	case teiErrors:
		body = map[string]string{"error": err.Error(), "error_type": teiType(code)}
	default:
		body = map[string]string{"error": err.Error()}
	}
	_ = writeJSON(w, code, body)
}

// openAIType is the error type OpenAI's API gives a status.
func openAIType(code int) string {
	switch {
	case code == 401:
		return "authentication_error"
	case code == 404:
		return "not_found_error"
	case code == 503 || code == 429:
		return "rate_limit_error"
	case code >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// teiType is the error_type text-embeddings-inference gives a status.
func teiType(code int) string {
	switch {
	case code == 401:
		return "Unauthorized"
	case code == 503:
		return "Overloaded"
	case code >= 500:
		return "Backend"
	case code == 422:
		return "Tokenizer"
	}
	return "Validation"
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
	if sw, ok := w.(*statusWriter); ok {
		sw.markArrived()
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
	req, err := decodeInferRequest(body, m, s.cfg.Truncate)
	if err != nil {
		return err
	}
	body = nil
	outs, release, err := s.run(r.Context(), m, req)
	if err != nil {
		return err
	}
	defer release()
	return writeInfer(w, m.Name, req.ID, outs)
}

// writeInfer writes the protocol's answer, its data streamed in chunks so that no copy of
// the whole answer as JSON is held; a value JSON cannot hold (NaN, ±Inf) is an error before
// anything is written.
func writeInfer(w http.ResponseWriter, name, id string, outs []wireOutput) error {
	for _, o := range outs {
		for _, v := range o.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("output %s holds %v, which JSON cannot", o.Name, v)
			}
		}
	}
	head := map[string]any{"model_name": name, "model_version": "1"}
	if id != "" {
		head["id"] = id
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(hb[:len(hb)-1])
	bw.WriteString(`,"outputs":[`)
	for i, o := range outs {
		if i > 0 {
			bw.WriteByte(',')
		}
		ob, _ := json.Marshal(struct {
			Name     string `json:"name"`
			Datatype string `json:"datatype"`
			Shape    []int  `json:"shape"`
		}{o.Name, o.Datatype, o.Shape})
		bw.Write(ob[:len(ob)-1])
		bw.WriteString(`,"data":[`)
		const chunk = 4096
		for lo := 0; lo < len(o.Data); lo += chunk {
			b, _ := json.Marshal(o.Data[lo:min(lo+chunk, len(o.Data))])
			if lo > 0 {
				bw.WriteByte(',')
			}
			bw.Write(b[1 : len(b)-1])
		}
		bw.WriteString("]}")
	}
	bw.WriteString("]}")
	return bw.Flush()
}

// run runs a decoded request through m's batcher and lays out the outputs it asks for. The
// answer's size is checked against the limit before anything runs, and only the outputs
// asked for are kept per sequence. The caller calls release once the answer is written.
func (s *Server) run(ctx context.Context, m *model, req *request) (outs []wireOutput, release func(), err error) {
	var values int64
	var want []string
	for _, name := range req.Outputs {
		from := name
		var o Output
		if name == OutputPooled {
			from = m.PoolFrom
			o, _ = m.output(from)
			values += int64(len(req.Seqs)) * max(o.Shape[len(o.Shape)-1], 1)
		} else {
			o, _ = m.output(name)
			per := max(perRow(o), 1)
			if o.Seq {
				per *= int64(req.Width)
			}
			values += int64(len(req.Seqs)) * per
		}
		if !slices.Contains(want, from) {
			want = append(want, from)
		}
	}
	if err := m.checkAnswer(values); err != nil {
		return nil, nil, err
	}
	if err := m.fitsAlone(req.Seqs); err != nil {
		return nil, nil, err
	}
	rel, err := s.reserve(values)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			rel()
		}
	}()
	rows, err := s.batch[m.Name].submit(ctx, req.Seqs, nil, want)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range req.Outputs {
		var o wireOutput
		if name == OutputPooled {
			o, err = pooled(m, req, rows)
		} else {
			o = assemble(m, name, req, rows)
		}
		if err != nil {
			return nil, nil, err
		}
		outs = append(outs, o)
	}
	return outs, rel, nil
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
