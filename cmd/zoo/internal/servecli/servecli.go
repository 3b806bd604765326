// Package servecli turns zoo serve's flags into settings: the models and their served names,
// per-model weights, tokenizers and embedding outputs, limits and timeouts, the listeners and
// the access log. Its errors are bad usage.
package servecli

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/serve"
)

// Embedding says where a served model's embeddings come from, for the start-up line.
func Embedding(info serve.Info) string {
	switch {
	case info.Embedding != "":
		return "output " + info.Embedding + " (the model's own)"
	case info.PoolFrom != "":
		return "mean of " + info.PoolFrom
	}
	return "none"
}

// AccessLog opens --access-log: "" for none, - for w (stderr), else FILE appended to.
func AccessLog(path string, w io.Writer) (*slog.Logger, func(), error) {
	switch path {
	case "":
		return nil, func() {}, nil
	case "-":
		return slog.New(slog.NewJSONHandler(w, nil)), func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--access-log %s: %w", path, err)
	}
	return slog.New(slog.NewJSONHandler(f, nil)), func() { f.Close() }, nil
}

// Settings are zoo serve's flags, checked.
type Settings struct {
	Refs, Served                    []string          // the models, and the names they are served under
	Weights, Tokenizers, Embeddings map[string]string // by served name
	MaxTokens                       int
	APIKey, AccessLog               string
	MaxBody                         int64
	ReadTimeout, WriteTimeout       time.Duration
}

// Of checks zoo serve's flags and resolves each model's served name, weights, tokenizer and
// embedding output; every error is bad usage.
func Of(c Flags) (Settings, error) {
	st := Settings{Refs: c.Args().Slice()}
	if len(st.Refs) < 1 {
		return st, fmt.Errorf("serve: want one or more model names (see `zoo list`) or .onnx files")
	}
	names := c.StringSlice("name")
	if len(names) > len(st.Refs) {
		return st, fmt.Errorf("--name given %d times for %d models", len(names), len(st.Refs))
	}
	maxBody, err := memlimit.ParseBytes(c.String("max-body"))
	if err != nil || maxBody < 1 {
		return st, fmt.Errorf("--max-body %q: want a size such as 16MiB or 1000000", c.String("max-body"))
	}
	st.MaxBody = maxBody
	if c.Int("max-batch") < 1 || c.Int("queue") < 1 || c.Int("threads") < 0 || c.Duration("max-delay") < 0 {
		return st, fmt.Errorf("--max-batch and --queue must be at least 1, --threads and --max-delay not negative")
	}
	for _, f := range []string{"max-sequences", "max-request-tokens", "max-answer", "max-streams"} {
		if c.Int(f) < 1 {
			return st, fmt.Errorf("--%s must be at least 1, got %d", f, c.Int(f))
		}
	}
	if st.MaxTokens = c.Int("max-tokens"); st.MaxTokens < 0 {
		return st, fmt.Errorf("--max-tokens must not be negative, got %d", st.MaxTokens)
	}
	st.AccessLog = c.String("access-log")
	if st.APIKey = c.String("api-key"); st.APIKey == "" {
		key, err := env.Get(env.APIKey)
		if err != nil {
			return st, err
		}
		st.APIKey = key
	}
	st.ReadTimeout, st.WriteTimeout = c.Duration("read-timeout"), c.Duration("write-timeout")
	if st.ReadTimeout <= 0 || st.WriteTimeout < st.ReadTimeout {
		return st, fmt.Errorf("--read-timeout %s, --write-timeout %s: want a positive read timeout and a write timeout at least as long", st.ReadTimeout, st.WriteTimeout)
	}
	st.Served = make([]string, len(st.Refs))
	for i, ref := range st.Refs {
		st.Served[i] = ref
		if zooroot.IsONNXPath(ref) {
			st.Served[i] = strings.TrimSuffix(filepath.Base(ref), filepath.Ext(ref))
		}
		if i < len(names) {
			st.Served[i] = names[i]
		}
	}
	if st.Weights, err = perModel("weights", c.StringSlice("weights"), st.Served); err != nil {
		return st, err
	}
	if st.Tokenizers, err = perModel("tokenizer", c.StringSlice("tokenizer"), st.Served); err != nil {
		return st, err
	}
	if st.Embeddings, err = perModel("embedding-output", c.StringSlice("embedding-output"), st.Served); err != nil {
		return st, err
	}
	return st, nil
}

// Flags are the flags zoo serve reads, with its arguments.
type Flags interface {
	String(name string) string
	StringSlice(name string) []string
	Int(name string) int
	Duration(name string) time.Duration
	Args() cli.Args
}

// Listen listens on --addr and, unless it is "off", --grpc-addr (nil then).
func Listen(addr, grpcAddr string) (ln, gln net.Listener, err error) {
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, nil, fmt.Errorf("--addr %s: %w", addr, err)
	}
	if grpcAddr == "off" {
		return ln, nil, nil
	}
	if gln, err = net.Listen("tcp", grpcAddr); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("--grpc-addr %s: %w", grpcAddr, err)
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
