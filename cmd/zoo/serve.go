package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/servecli"
	"github.com/zoo-dev/zoo/serve"
)

// flagServeWeights is serve's --weights: one FILE for every model, or NAME=FILE per model.
var flagServeWeights = &cli.StringSliceFlag{Name: "weights", Usage: "load a state_dict from `FILE`.safetensors into every model, or NAME=FILE into the model served as NAME (repeatable)"}

// flagServeTokenizer is serve's --tokenizer: run's --tokenizer for every model, or NAME=FILE
// per model.
var flagServeTokenizer = &cli.StringSliceFlag{Name: flagTokenizer.Name, Aliases: flagTokenizer.Aliases,
	Usage: "tokenizer `FILE` (tokenizer.json, SentencePiece .model or vocab.txt) of every model, or NAME=FILE of the model served as NAME (repeatable); default: for an .onnx file the one next to it, else bytes"}

// shutdownGrace is how long in-flight requests may take to finish after SIGTERM or Ctrl-C.
const shutdownGrace = 30 * time.Second

// The connection timeouts. A request's headers must arrive within headerTimeout (or
// --read-timeout when that is shorter), and the whole request, body included, within
// --read-timeout (30s: 16MiB at about 4 Mbit/s); a client dribbling bytes is then cut off
// (408 when the body is late, the connection closed when the headers are) and holds only
// its own goroutine meanwhile, never a batch slot, since nothing is queued before the body
// is read. --write-timeout runs from the end of the headers to the end of the answer
// (Go's http.Server measures it so), so it must cover the read, the queue, the batch and the
// write; a client that stops reading its answer is cut off when it passes. A keep-alive
// connection idle for idleTimeout is closed. The gRPC port applies the same: its HTTP/2
// handshake must be done within the header timeout, and an idle connection is closed.
const (
	headerTimeout = 10 * time.Second
	idleTimeout   = 2 * time.Minute
)

// drainArrival is how long, after SIGTERM, a request still arriving may take to arrive
// before its connection is cut (running requests get shutdownGrace).
const drainArrival = 2 * time.Second

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve models over HTTP and gRPC: the Open Inference Protocol (KServe v2), OpenAI's embeddings API and text-embeddings-inference's API, rerank included",
		ArgsUsage: "MODEL[.PRESET]|FILE.onnx...",
		Description: "Each model is built (or imported), loaded with its weights and compiled once, then served under its name as given\n" +
			"(an .onnx file by its base name; --name renames, in order). Endpoints:\n" +
			"  Open Inference Protocol: GET /v2/health/live, /v2/health/ready, /v2, /v2/models/NAME, /v2/models/NAME/ready;\n" +
			"    POST /v2/models/NAME/infer (inputs tokens INT64 (B, n) with an optional key_padding_mask BOOL, or text BYTES (B);\n" +
			"    parameters pool, normalize and truncate; outputs the model's and embedding); its gRPC service on --grpc-addr.\n" +
			"  OpenAI: POST /v1/embeddings (encoding_format float or base64, dimensions, usage), GET /v1/models, /v1/models/NAME.\n" +
			"  text-embeddings-inference: GET /health, /info; POST /embed (normalize, truncate), /tokenize, /rerank (a\n" +
			"    cross-encoder: a model with a logits output (batch, 1|2) and a tokenizer with a pair template).\n" +
			"  GET /metrics (Prometheus), GET / (the models and endpoints).\n" +
			"Embeddings are the model's own embedding output when it has one (sentence_embedding, embeddings or embedding),\n" +
			"else the mean of its per-token output, never BERT's pooler_output; --embedding-output chooses another. The start-up\n" +
			"line and GET /info say which. A text over --max-tokens (default: the model's maximum length) is answered 413 naming\n" +
			"the limit, unless the request asks to truncate or the server runs with --truncate. A request of more than\n" +
			"--max-sequences texts or --max-request-tokens tokens, or whose answer would hold more than --max-answer values,\n" +
			"is answered 413 before it runs. With --api-key (or ZOO_API_KEY), every request but the health probes must carry\n" +
			"Authorization: Bearer KEY (401 otherwise). No line is logged per request unless --access-log FILE (- for stderr).\n" +
			"Concurrent requests are merged into batches of up to --max-batch sequences within --max-delay; a full queue answers\n" +
			"503 with Retry-After. A request must arrive within --read-timeout (headers within 10s) and be answered within\n" +
			"--write-timeout of its headers; slower clients are cut off (on the gRPC port: the HTTP/2 handshake within the header\n" +
			"timeout, a call's message within --read-timeout, at most --max-streams streams per connection); connections idle\n" +
			"for 2 minutes are closed. zoo run's memory guard (ZOO_MEMORY_LIMIT) applies to each request (a sequence that would\n" +
			"not fit alone: 413) and batch (run in smaller batches when it would not fit).\n" +
			"The address is printed on stderr when the server is ready; SIGTERM or Ctrl-C stops accepting, lets the requests\n" +
			"that are running finish (30s at most) and those still arriving arrive (2s at most; then their connections are\n" +
			"cut), and exits 0." +
			examples("zoo serve vanilla.tiny linformer --addr 127.0.0.1:9000 --max-batch 16",
				"zoo serve model.onnx vanilla.tiny --name encoder --tokenizer encoder=tokenizer.json --weights vanilla.tiny=trained.safetensors",
				"zoo serve cross.onnx --tokenizer tokenizer.json --api-key $KEY --access-log access.jsonl"),
		Flags: append(variantFlags(), flagServeWeights, flagServeTokenizer,
			&cli.StringSliceFlag{Name: "name", Usage: "serve the models under these names, in order (repeatable)"},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8000", Usage: "listen for HTTP on `HOST:PORT` (port 0: any free port)"},
			&cli.StringFlag{Name: "grpc-addr", Value: "127.0.0.1:8001", Usage: "listen for the protocol's gRPC on `HOST:PORT` (port 0: any free port; off: none)"},
			&cli.StringSliceFlag{Name: "embedding-output", Usage: "answer embeddings from output `NAME` of every model, or MODEL=NAME of one (repeatable; a per-token output is mean-pooled)",
				DefaultText: "the model's own sentence_embedding, embeddings or embedding, else the mean of its per-token output"},
			&cli.IntFlag{Name: "max-tokens", Usage: "tokens per text at most, special tokens included (`N`; longer: 413 unless truncated)", DefaultText: "the model's maximum length"},
			&cli.BoolFlag{Name: "truncate", Usage: "cut texts over --max-tokens when a request does not say (\"truncate\" of /embed and /rerank)"},
			&cli.IntFlag{Name: "max-sequences", Value: 2048, Usage: "texts (or rows, or pairs) per request at most (`N`)"},
			&cli.IntFlag{Name: "max-request-tokens", Value: 1 << 18, Usage: "tokens per request at most, all texts together (`N`)"},
			&cli.IntFlag{Name: "max-answer", Value: 8 << 20, Usage: "values per answer at most (`N` float32s; every per-token output of every text counts); the answers computed at once hold 4 × N at most (then 503)"},
			&cli.StringFlag{Name: "api-key", Usage: "require Authorization: Bearer `KEY` on every request but the health probes (also ZOO_API_KEY)"},
			&cli.StringFlag{Name: "access-log", Usage: "log one JSON line per request to `FILE` (- for stderr)", DefaultText: "none"},
			&cli.IntFlag{Name: "max-batch", Value: 32, Usage: "sequences per batch, at most `N`"},
			&cli.DurationFlag{Name: "max-delay", Value: 5 * time.Millisecond, Usage: "wait at most this long for a batch to fill"},
			&cli.StringFlag{Name: "max-body", Value: "16MiB", Usage: "largest request body (`SIZE`); larger ones get 413"},
			&cli.IntFlag{Name: "queue", Value: 256, Usage: "requests waiting per model before 503"},
			&cli.IntFlag{Name: "max-streams", Value: 100, Usage: "concurrent gRPC streams per connection, at most `N`"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			&cli.DurationFlag{Name: "read-timeout", Value: 30 * time.Second, Usage: "a request, headers and body, must arrive within this long (headers within 10s)"},
			&cli.DurationFlag{Name: "write-timeout", Value: 2 * time.Minute, Usage: "from a request's headers to the end of its answer, at most this long (at least --read-timeout)"},
			flagPrecision(), flagBackend,
		),
		Action: serveAction,
	}
}

func serveAction(c *cli.Context) error {
	st, err := servecli.Of(c)
	if err != nil {
		return badInput(err)
	}
	prec, choice, err := serveBackend(c)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(c.App.ErrWriter, nil))
	access, closeAccess, err := servecli.AccessLog(st.AccessLog, c.App.ErrWriter)
	if err != nil {
		return badInput(err)
	}
	defer closeAccess()
	var models []serve.Encoder
	for i, ref := range st.Refs {
		name := st.Served[i]
		enc, closeModel, err := loadServed(c.Context, c, ref, name, st.Weights[name], st.Tokenizers[name], prec,
			zooroot.ServeOptions{EmbeddingOutput: st.Embeddings[name], MaxTokens: st.MaxTokens})
		if err != nil {
			return err
		}
		defer closeModel()
		models = append(models, enc)
		info := enc.Info()
		attrs := []any{"name", info.Name, "ref", ref, "backend", choice.Backend.Name(),
			"precision", reportedPrecision(choice.Backend.Name(), prec), "max_tokens", info.MaxLen, "vocab", info.Vocab, "embedding", servecli.Embedding(info)}
		if info.Score != "" {
			attrs = append(attrs, "rerank", info.Score)
		}
		log.Info("model", attrs...)
	}
	srv, err := serve.New(serve.Config{MaxBatch: c.Int("max-batch"), MaxDelay: c.Duration("max-delay"), MaxBody: st.MaxBody,
		Queue: c.Int("queue"), MaxStreams: c.Int("max-streams"), MaxSequences: c.Int("max-sequences"), MaxTokens: c.Int("max-request-tokens"),
		MaxAnswer: int64(c.Int("max-answer")), Truncate: c.Bool("truncate"), APIKey: st.APIKey,
		Logger: log, AccessLog: access, Version: version}, models)
	if dup := (*serve.DuplicateNameError)(nil); errors.As(err, &dup) {
		err = fmt.Errorf("%w (rename one with --name)", err)
	}
	if err != nil {
		return badInput(err)
	}
	ln, gln, err := servecli.Listen(c.String("addr"), c.String("grpc-addr"))
	if err != nil {
		return badInput(err)
	}
	if s, err := sessionOf(c.Context); err == nil {
		s.drainOnSignal()
	}
	where := ""
	if gln != nil {
		where = fmt.Sprintf(" and grpc://%s", gln.Addr())
	}
	fmt.Fprintf(c.App.ErrWriter, "zoo serve: listening on http://%s%s (%s)\n", ln.Addr(), where, strings.Join(st.Served, ", "))
	t := serve.Timeouts{Header: headerTimeout, Read: st.ReadTimeout, Write: st.WriteTimeout, Idle: idleTimeout, Grace: shutdownGrace, Arrival: drainArrival}
	if err := srv.Serve(c.Context, ln, gln, t); err != nil {
		return failed(err)
	}
	return nil
}

// loadServed builds ref with its weights and its tokenizer (as zoo run's --weights and
// --tokenizer: "" for the default), compiles it with --precision prec and --threads, and
// returns it as the server's encoder; the returned func closes the model.
func loadServed(ctx context.Context, c flags, ref, name, weights, tokenizer string, prec string, so zooroot.ServeOptions) (serve.Encoder, func(), error) {
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	opts.Weights, opts.Tokenizer, opts.Precision, opts.Threads = weights, tokenizer, prec, c.Int("threads")
	m, err := loadWith(ctx, c, ref, opts)
	if err != nil {
		return nil, nil, err
	}
	enc, err := m.ServeEncoderWith(ctx, name, so)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return enc, func() { m.Close() }, nil
}

// serveBackend is --precision and the backend the models compile on, checked against each
// other.
func serveBackend(c flags) (string, backends.Choice, error) {
	prec, err := precisionOf(c)
	if err != nil {
		return "", backends.Choice{}, err
	}
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return "", backends.Choice{}, badInput(err)
	}
	return prec, choice, zooroot.CheckPrecision(choice, prec)
}
