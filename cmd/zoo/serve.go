package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/memlimit"
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

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve models over HTTP: the Open Inference Protocol (KServe v2), OpenAI's /v1/embeddings and text-embeddings-inference's /embed",
		ArgsUsage: "MODEL[.PRESET]|FILE.onnx...",
		Description: "Each model is built (or imported), loaded with its weights and compiled once, then served under its name as given\n" +
			"(an .onnx file by its base name; --name renames, in order). Endpoints: GET /v2/health/live, /v2/health/ready,\n" +
			"/v2/models/NAME, /v2/models/NAME/ready; POST /v2/models/NAME/infer (inputs tokens INT64 (B, n) with an optional\n" +
			"key_padding_mask BOOL, or text BYTES (B); parameters pool and normalize; outputs the model's and embedding);\n" +
			"POST /v1/embeddings and /embed (mean-pooled, normalised unless \"normalize\": false); GET /metrics (Prometheus);\n" +
			"the protocol's gRPC service (inference.GRPCInferenceService of grpc_predict_v2.proto) on --grpc-addr.\n" +
			"Concurrent requests are merged into batches of up to --max-batch sequences within --max-delay; a full queue answers\n" +
			"503 with Retry-After. A request must arrive within --read-timeout (headers within 10s) and be answered within\n" +
			"--write-timeout of its headers; slower clients are cut off (on the gRPC port: the HTTP/2 handshake within the header\n" +
			"timeout); connections idle for 2 minutes are closed. zoo run's memory guard (ZOO_MEMORY_LIMIT) applies to each\n" +
			"request (a sequence that would not fit alone: 413) and batch (run in smaller batches when it would not fit).\n" +
			"The address is printed on stderr when the server is ready; SIGTERM or Ctrl-C stops accepting, finishes the requests\n" +
			"in flight and exits 0." +
			examples("zoo serve vanilla.tiny", "zoo serve vanilla.tiny linformer --addr 127.0.0.1:9000 --max-batch 16",
				"zoo serve model.onnx vanilla.tiny --name encoder --tokenizer encoder=tokenizer.json --weights vanilla.tiny=trained.safetensors"),
		Flags: append(variantFlags(), flagServeWeights, flagServeTokenizer,
			&cli.StringSliceFlag{Name: "name", Usage: "serve the models under these names, in order (repeatable)"},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8000", Usage: "listen for HTTP on `HOST:PORT` (port 0: any free port)"},
			&cli.StringFlag{Name: "grpc-addr", Value: "127.0.0.1:8001", Usage: "listen for the protocol's gRPC on `HOST:PORT` (port 0: any free port; off: none)"},
			&cli.IntFlag{Name: "max-batch", Value: 32, Usage: "sequences per batch, at most `N`"},
			&cli.DurationFlag{Name: "max-delay", Value: 5 * time.Millisecond, Usage: "wait at most this long for a batch to fill"},
			&cli.StringFlag{Name: "max-body", Value: "16MiB", Usage: "largest request body (`SIZE`); larger ones get 413"},
			&cli.IntFlag{Name: "queue", Value: 256, Usage: "requests waiting per model before 503"},
			&cli.IntFlag{Name: "threads", Usage: "worker threads (0: every core)"},
			&cli.DurationFlag{Name: "read-timeout", Value: 30 * time.Second, Usage: "a request, headers and body, must arrive within this long (headers within 10s)"},
			&cli.DurationFlag{Name: "write-timeout", Value: 2 * time.Minute, Usage: "from a request's headers to the end of its answer, at most this long (at least --read-timeout)"},
			flagPrecision(), flagBackend,
		),
		Action: serveAction,
	}
}

func serveAction(c *cli.Context) error {
	st, err := serveSettingsOf(c)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(c.App.ErrWriter, nil))
	var models []serve.Encoder
	for i, ref := range st.refs {
		enc, closeModel, err := loadServed(c.Context, c, ref, st.served[i], st.weights[st.served[i]], st.tokenizers[st.served[i]], st.prec)
		if err != nil {
			return err
		}
		defer closeModel()
		models = append(models, enc)
		info := enc.Info()
		log.Info("model", "name", info.Name, "ref", ref, "backend", st.choice.Backend.Name(),
			"precision", reportedPrecision(st.choice.Backend.Name(), st.prec), "max_len", info.MaxLen, "vocab", info.Vocab)
	}
	srv, err := serve.New(serve.Config{MaxBatch: c.Int("max-batch"), MaxDelay: c.Duration("max-delay"), MaxBody: st.maxBody,
		Queue: c.Int("queue"), Logger: log, Version: version}, models)
	if dup := (*serve.DuplicateNameError)(nil); errors.As(err, &dup) {
		err = fmt.Errorf("%w (rename one with --name)", err)
	}
	if err != nil {
		return badInput(err)
	}
	ln, gln, err := serveListeners(c.String("addr"), c.String("grpc-addr"))
	if err != nil {
		return err
	}
	if s, err := sessionOf(c.Context); err == nil {
		s.drainOnSignal()
	}
	where := ""
	if gln != nil {
		where = fmt.Sprintf(" and grpc://%s", gln.Addr())
	}
	fmt.Fprintf(c.App.ErrWriter, "zoo serve: listening on http://%s%s (%s)\n", ln.Addr(), where, strings.Join(st.served, ", "))
	t := serve.Timeouts{Header: headerTimeout, Read: st.readTimeout, Write: st.writeTimeout, Idle: idleTimeout, Grace: shutdownGrace}
	if err := srv.Serve(c.Context, ln, gln, t); err != nil {
		return failed(err)
	}
	return nil
}

// serveSettings are zoo serve's flags, checked.
type serveSettings struct {
	refs, served              []string          // the models, and the names they are served under
	weights, tokenizers       map[string]string // by served name
	maxBody                   int64
	readTimeout, writeTimeout time.Duration
	prec                      string
	choice                    backends.Choice
}

// serveSettingsOf checks zoo serve's flags (bad ones are bad input) and resolves each model's
// served name, weights and tokenizer, the precision and the backend.
func serveSettingsOf(c serveFlags) (serveSettings, error) {
	st := serveSettings{refs: c.Args().Slice()}
	if len(st.refs) < 1 {
		return st, badInputf("serve: want one or more model names (see `zoo list`) or .onnx files")
	}
	names := c.StringSlice("name")
	if len(names) > len(st.refs) {
		return st, badInputf("--name given %d times for %d models", len(names), len(st.refs))
	}
	maxBody, err := memlimit.ParseBytes(c.String("max-body"))
	if err != nil || maxBody < 1 {
		return st, badInputf("--max-body %q: want a size such as 16MiB or 1000000", c.String("max-body"))
	}
	st.maxBody = maxBody
	if c.Int("max-batch") < 1 || c.Int("queue") < 1 || c.Int("threads") < 0 || c.Duration("max-delay") < 0 {
		return st, badInputf("--max-batch and --queue must be at least 1, --threads and --max-delay not negative")
	}
	st.readTimeout, st.writeTimeout = c.Duration("read-timeout"), c.Duration("write-timeout")
	if st.readTimeout <= 0 || st.writeTimeout < st.readTimeout {
		return st, badInputf("--read-timeout %s, --write-timeout %s: want a positive read timeout and a write timeout at least as long", st.readTimeout, st.writeTimeout)
	}
	st.served = make([]string, len(st.refs))
	for i, ref := range st.refs {
		st.served[i] = ref
		if zooroot.IsONNXPath(ref) {
			st.served[i] = strings.TrimSuffix(filepath.Base(ref), filepath.Ext(ref))
		}
		if i < len(names) {
			st.served[i] = names[i]
		}
	}
	if st.weights, err = perModel(flagServeWeights.Name, c.StringSlice(flagServeWeights.Name), st.served); err != nil {
		return st, badInput(err)
	}
	if st.tokenizers, err = perModel(flagServeTokenizer.Name, c.StringSlice(flagServeTokenizer.Name), st.served); err != nil {
		return st, badInput(err)
	}
	if st.prec, err = precisionOf(c); err != nil {
		return st, err
	}
	if st.choice, err = backends.Select(c.String(flagBackend.Name)); err != nil {
		return st, badInput(err)
	}
	return st, zooroot.CheckPrecision(st.choice, st.prec)
}

// serveFlags are the flags zoo serve reads, with its arguments.
type serveFlags interface {
	flags
	Duration(name string) time.Duration
	Args() cli.Args
}

// serveListeners listens on --addr and, unless it is "off", --grpc-addr (nil then).
func serveListeners(addr, grpcAddr string) (ln, gln net.Listener, err error) {
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, nil, badInputf("--addr %s: %w", addr, err)
	}
	if grpcAddr == "off" {
		return ln, nil, nil
	}
	if gln, err = net.Listen("tcp", grpcAddr); err != nil {
		ln.Close()
		return nil, nil, badInputf("--grpc-addr %s: %w", grpcAddr, err)
	}
	return ln, gln, nil
}

// perModel maps each served name to its file from a repeatable flag's values (--weights,
// --tokenizer): a bare FILE applies to every model, NAME=FILE to one (winning over a bare
// FILE wherever given); a NAME that is not served, or no FILE after =, is an error naming
// the flag.
func perModel(flag string, flags, served []string) (map[string]string, error) {
	out, named := map[string]string{}, map[string]string{}
	for _, f := range flags {
		name, path, ok := strings.Cut(f, "=")
		if !ok {
			for _, s := range served {
				out[s] = f
			}
			continue
		}
		if !slices.Contains(served, name) {
			return nil, fmt.Errorf("--%s %s: no model is served as %q (served: %s)", flag, f, name, strings.Join(served, ", "))
		}
		if path == "" {
			return nil, fmt.Errorf("--%s %s: no file after =", flag, f)
		}
		named[name] = path
	}
	maps.Copy(out, named)
	return out, nil
}

// loadServed builds ref with its weights and its tokenizer (as zoo run's --weights and
// --tokenizer: "" for the default), compiles it with --precision prec and --threads, and
// returns it as the server's encoder; the returned func closes the model.
func loadServed(ctx context.Context, c flags, ref, name, weights, tokenizer string, prec string) (serve.Encoder, func(), error) {
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	opts.Weights, opts.Tokenizer, opts.Precision, opts.Threads = weights, tokenizer, prec, c.Int("threads")
	m, err := loadWith(ctx, c, ref, opts)
	if err != nil {
		return nil, nil, err
	}
	enc, err := m.ServeEncoder(ctx, name)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return enc, func() { m.Close() }, nil
}
