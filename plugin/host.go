package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Default timeouts; the environment variables StartTimeoutEnv and BuildTimeoutEnv (Go
// durations such as 30s or 10m) override them in HostOptions.FromEnv.
const (
	DefaultStartTimeout = 20 * time.Second
	DefaultBuildTimeout = 10 * time.Minute
	StartTimeoutEnv     = env.PluginStartTimeout
	BuildTimeoutEnv     = env.PluginBuildTimeout
)

// Spec says how to start one plugin.
type Spec struct {
	// Name is the variant name (the registry entry); errors name it.
	Name string
	// Builtin selects the host's own binary (HostOptions.Self) instead of Path.
	Builtin bool
	// Path is the plugin executable; Args and Env are added to its command line and
	// environment.
	Path string
	Args []string
	Env  map[string]string
	// SHA256, when set, pins the executable: lower-case hex of its sha256.
	SHA256 string
	// Source is where the spec came from (e.g. "registry.yaml:12"), for error messages.
	Source string
}

// key identifies a plugin process: specs with the same key share one.
func (s Spec) key() string {
	if s.Builtin {
		return "builtin:" + s.Name
	}
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return strings.Join([]string{s.Path, strings.Join(s.Args, "\x00"), strings.Join(env, "\x00"), s.SHA256}, "\x01")
}

// HostOptions configure a Host.
type HostOptions struct {
	// Self returns the command that serves the built-in variant name: normally the host's own
	// executable re-executed with a hidden argument.
	Self func(name string) (path string, args []string, err error)
	// InProcess, when set, serves built-in variants on goroutines of this process (through the
	// same gRPC server code, attached with go-plugin's reattach support) instead of
	// re-executing the host. It returns false for names it does not know.
	InProcess func(name string) (variant.Variant, bool)
	// Logs receives plugin logs and output (nil: discarded; they still feed error reports).
	Logs io.Writer
	// Verbose raises the plugins' log level to debug.
	Verbose bool
	// StartTimeout bounds start-up and Describe; BuildTimeout bounds one Build.
	StartTimeout, BuildTimeout time.Duration
}

// FromEnv fills zero timeouts from StartTimeoutEnv and BuildTimeoutEnv, then from the
// defaults. A malformed value is an error naming the variable.
func (o HostOptions) FromEnv() (HostOptions, error) {
	for _, t := range []struct {
		env string
		dst *time.Duration
		def time.Duration
	}{{StartTimeoutEnv, &o.StartTimeout, DefaultStartTimeout}, {BuildTimeoutEnv, &o.BuildTimeout, DefaultBuildTimeout}} {
		if *t.dst != 0 {
			continue
		}
		*t.dst = t.def
		d, set, err := env.Duration(t.env)
		if err != nil {
			return o, err
		}
		if set {
			*t.dst = d
		}
	}
	return o, nil
}

// Host launches plugins and keeps one process per plugin until Close.
type Host struct {
	opts    HostOptions
	mu      sync.Mutex
	clients map[string]*Client
	closed  bool
}

// NewHost returns a host; it starts nothing until Variant is called.
func NewHost(opts HostOptions) *Host {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.BuildTimeout <= 0 {
		opts.BuildTimeout = DefaultBuildTimeout
	}
	return &Host{opts: opts, clients: map[string]*Client{}}
}

// Variant returns the variant that spec's plugin serves, starting the plugin if no live
// process serves it yet. The process is shared by every call with the same spec until Close.
func (h *Host) Variant(spec Spec) (variant.Variant, error) {
	c, err := h.Client(spec)
	if err != nil {
		return nil, err
	}
	return c.Variant(), nil
}

// Client returns the running client for spec, starting the plugin if needed.
func (h *Host) Client(spec Spec) (*Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, &Error{Kind: ErrStart, Plugin: spec.Name, Msg: "the plugin host is closed"}
	}
	key := spec.key()
	if c, ok := h.clients[key]; ok {
		if !c.exited() {
			return c, nil
		}
		c.Close()
		delete(h.clients, key)
	}
	var c *Client
	var err error
	if spec.Builtin && h.opts.InProcess != nil {
		v, ok := h.opts.InProcess(spec.Name)
		if !ok {
			return nil, &Error{Kind: ErrNotFound, Plugin: spec.Name, Msg: "no built-in variant of this name", Fix: "see `zoo list`"}
		}
		c, err = startInProcess(spec.Name, v, h.opts)
	} else {
		c, err = start(spec, h.opts)
	}
	if err != nil {
		return nil, err
	}
	h.clients[key] = c
	return c, nil
}

// Close kills every plugin process the host started and waits for them to exit. The host
// cannot be used afterwards.
func (h *Host) Close() error {
	h.mu.Lock()
	clients := h.clients
	h.clients = map[string]*Client{}
	h.closed = true
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	return nil
}

// Client is one running plugin.
type Client struct {
	name    string
	path    string
	opts    HostOptions
	pc      *goplugin.Client
	cmd     *exec.Cmd // nil in process
	rpc     pluginpb.VariantClient
	desc    variant.Description
	proto   *pluginpb.DescribeResponse
	tail    *tailWriter
	stopInP func() // in-process mode: stops the server goroutine
	conn    goplugin.ClientProtocol
	once    sync.Once
	closing atomic.Bool
}

// Name is the variant name the client was started for (the registry entry).
func (c *Client) Name() string { return c.name }

// Description is the plugin's Describe answer.
func (c *Client) Description() variant.Description { return c.desc }

// DescribeResponse is the plugin's raw Describe answer (protocol minor, SDK version, features).
func (c *Client) DescribeResponse() *pluginpb.DescribeResponse { return c.proto }

// Pid is the plugin's process id (0 in process).
func (c *Client) Pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Variant returns the plugin as a variant.Variant.
func (c *Client) Variant() variant.Variant { return remote{c} }

// Close kills the plugin process (or stops the in-process server) and waits for it.
func (c *Client) Close() {
	c.closing.Store(true)
	c.once.Do(func() {
		if c.stopInP != nil {
			// go-plugin's Kill does nothing for a test-mode reattachment: close the
			// connection, then stop the server. GRPCClient.Close would first send the
			// controller's Shutdown, whose handler stops the server concurrently with
			// Serve's own Stop (a data race inside go-plugin v1.8.0), so close the
			// gRPC connection alone and let the cancelled Serve stop the server.
			if gc, ok := c.conn.(*goplugin.GRPCClient); ok && gc.Conn != nil {
				_ = gc.Conn.Close()
			} else if c.conn != nil {
				_ = c.conn.Close()
			}
			c.stopInP()
			return
		}
		c.pc.Kill()
	})
}

func (c *Client) exited() bool { return c.stopInP == nil && c.pc.Exited() }

func (c *Client) fail(kind ErrorKind, err error, msg, fix string) *Error {
	return &Error{Kind: kind, Plugin: c.name, Path: c.path, Msg: msg, Fix: fix, Err: err}
}

// start launches an executable plugin (or the host itself for a builtin).
func start(spec Spec, opts HostOptions) (*Client, error) {
	path, args := spec.Path, spec.Args
	fail := func(kind ErrorKind, err error, msg, fix string) *Error {
		return &Error{Kind: kind, Plugin: spec.Name, Path: path, Msg: msg, Fix: fix, Err: err}
	}
	where := "the registry"
	if spec.Source != "" {
		where = spec.Source
	}
	if spec.Builtin {
		if opts.Self == nil {
			return nil, fail(ErrNotFound, nil, "this host cannot serve built-in variants", "")
		}
		p, a, err := opts.Self(spec.Name)
		if err != nil {
			return nil, fail(ErrNotFound, err, fmt.Sprintf("cannot find the zoo executable to serve the built-in variant: %v", err), "reinstall zoo (go install ./cmd/zoo)")
		}
		path, args = p, append(a, spec.Args...)
	} else {
		if path == "" {
			return nil, fail(ErrNotFound, nil, "no plugin executable given", "set plugin: PATH in "+where)
		}
		if err := checkExecutable(path); err != nil {
			err.Plugin = spec.Name
			if err.Fix == "" {
				err.Fix = "fix plugin: in " + where
			}
			return nil, err
		}
		if spec.SHA256 != "" {
			got, err := fileSHA256(path)
			if err != nil {
				return nil, fail(ErrNotExecutable, err, fmt.Sprintf("cannot read it to check its sha256: %v", err), "")
			}
			if got != strings.ToLower(spec.SHA256) {
				return nil, fail(ErrChecksum, nil, fmt.Sprintf("sha256 mismatch: the executable's is %s, %s pins %s", got, where, spec.SHA256),
					"if you rebuilt or updated the plugin on purpose, put the new sha256 in "+where+" (sha256sum "+path+"); otherwise do not run it")
			}
		}
	}
	cmd := exec.Command(path, args...)
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+spec.Env[k])
	}
	level := "info"
	if opts.Verbose {
		level = "debug"
	}
	cmd.Env = append(cmd.Env, LogLevelEnv+"="+level)
	setPdeathsig(cmd)
	tail := newTail(40)
	pc := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(&GRPCPlugin{}, ProtocolVersion),
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Managed:          true,
		StartTimeout:     opts.StartTimeout,
		Logger:           hostLogger(spec.Name, opts),
		Stderr:           tail,
		SyncStdout:       logsOrDiscard(opts),
		SyncStderr:       io.MultiWriter(tail, logsOrDiscard(opts)),
		GRPCDialOptions:  dialOptions(),
	})
	c := &Client{name: spec.Name, path: path, opts: opts, pc: pc, cmd: cmd, tail: tail}
	if err := c.connect(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// connect performs the handshake, dispenses the service and calls Describe.
func (c *Client) connect() error {
	proto, err := c.pc.Client()
	if err != nil {
		return c.classifyStart(err)
	}
	c.conn = proto
	raw, err := proto.Dispense(PluginName)
	if err != nil {
		return c.fail(ErrNotPlugin, err, fmt.Sprintf("does not serve zoo's variant service: %v", err), "build it with zoo's plugin SDK (plugin.Serve)")
	}
	rpc, ok := raw.(pluginpb.VariantClient)
	if !ok {
		return c.fail(ErrNotPlugin, nil, fmt.Sprintf("dispensed %T, not a variant client", raw), "")
	}
	c.rpc = rpc
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	resp, err := rpc.Describe(ctx, &pluginpb.DescribeRequest{HostProtocolMinor: ProtocolMinor})
	if err != nil {
		return c.callError("Describe", ctx, err, c.opts.StartTimeout, StartTimeoutEnv)
	}
	d, err := DescriptionFromProto(resp)
	if err != nil {
		return c.fail(ErrProtocolViolation, err, "invalid Describe answer: "+err.Error(), "this is a bug in the plugin; check it with `zoo plugin test "+c.path+"`")
	}
	c.desc, c.proto = d, resp
	return nil
}

// classifyStart turns go-plugin's start-up errors into plugin errors.
func (c *Client) classifyStart(err error) *Error {
	msg := err.Error()
	stderr := c.tail.last(3)
	switch {
	case strings.Contains(msg, "incompatible API version"):
		got := ""
		if i := strings.Index(msg, "Plugin version: "); i >= 0 {
			got = strings.Fields(msg[i+len("Plugin version: "):])[0]
			got = strings.TrimSuffix(got, ",")
		}
		return c.fail(ErrProtocol, err, fmt.Sprintf("speaks plugin protocol version %s, this zoo speaks version %d", got, ProtocolVersion),
			"rebuild the plugin against this zoo's SDK (github.com/zoo-dev/zoo/plugin), or use a zoo release that speaks its version")
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		e := c.fail(ErrTimeout, err, fmt.Sprintf("did not complete the plugin handshake within %s (is it a zoo plugin? does it hang at start?)", c.opts.StartTimeout),
			"check that it calls plugin.Serve first thing in main; raise "+StartTimeoutEnv+" if it is just slow")
		e.Stderr = stderr
		return e
	case strings.Contains(msg, "Unrecognized remote plugin message"), strings.Contains(msg, "plugin exited before we could connect"),
		strings.Contains(msg, "unsupported plugin protocol"), strings.Contains(msg, "incompatible core API version"):
		e := c.fail(ErrNotPlugin, err, "is not a zoo variant plugin: it did not answer the plugin handshake", "point plugin: at an executable built with zoo's plugin SDK (plugin.Serve), and make sure it prints nothing on stdout before serving")
		e.Stderr = stderr
		return e
	case errors.Is(err, os.ErrPermission), strings.Contains(msg, "permission denied"):
		return c.fail(ErrNotExecutable, err, "is not executable", "chmod +x "+c.path)
	case strings.Contains(msg, "exec format error"):
		return c.fail(ErrNotExecutable, err, "is not a program for this machine (exec format error)", "build the plugin for this OS and architecture")
	}
	e := c.fail(ErrStart, err, "failed to start: "+msg, "")
	e.Stderr = stderr
	return e
}

// callError turns an RPC error into a plugin error: timeout, crash or the plugin's own error.
func (c *Client) callError(call string, ctx context.Context, err error, limit time.Duration, env string) error {
	st, _ := status.FromError(err)
	switch {
	case ctx.Err() == context.DeadlineExceeded || st.Code() == codes.DeadlineExceeded:
		c.kill()
		return c.fail(ErrTimeout, err, fmt.Sprintf("did not finish %s within %s (is it hung?); zoo stopped it", call, limit),
			fmt.Sprintf("if the model is just big, raise %s (e.g. %s=%s)", env, env, 4*limit))
	case c.closing.Load():
		return c.fail(ErrStopped, err, fmt.Sprintf("stopped by zoo during %s", call), "")
	case st.Code() == codes.InvalidArgument:
		return &Error{Kind: ErrConfig, Plugin: c.name, Path: c.path, Msg: st.Message(), Err: err}
	case c.waitExited(time.Second):
		e := c.fail(ErrCrashed, err, fmt.Sprintf("crashed during %s (%s)", call, c.exitStatus()),
			"this is a bug in the plugin: report it to its author with the command you ran (run with --verbose for its full log)")
		e.Stderr = c.tail.last(3)
		return e
	case st.Code() == codes.Internal || st.Code() == codes.Unknown:
		return c.fail(ErrInternal, err, fmt.Sprintf("%s failed: %s", call, st.Message()), "this is a bug in the plugin: report it to its author (run with --verbose for its log)")
	}
	return c.fail(ErrCrashed, err, fmt.Sprintf("%s failed: %v", call, err), "run with --verbose for the plugin's log")
}

// waitExited waits up to d for the process to exit and reports whether it did.
func (c *Client) waitExited(d time.Duration) bool {
	if c.stopInP != nil {
		return false
	}
	deadline := time.Now().Add(d)
	for !c.pc.Exited() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// exitStatus describes how the process ended, once it has.
func (c *Client) exitStatus() string {
	if c.cmd != nil && c.cmd.ProcessState != nil {
		return c.cmd.ProcessState.String()
	}
	return "process exited"
}

// kill stops the process at once (a hung plugin will not shut down gracefully).
func (c *Client) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
	c.Close()
}

// checkExecutable explains why path cannot run as a plugin, or returns nil.
func checkExecutable(path string) *Error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fix := "build it (in the plugin's module: go build -o " + path + " .), or fix the path"
		if !filepath.IsAbs(path) {
			fix += "; relative paths are resolved against the registry file's directory"
		}
		return &Error{Kind: ErrNotFound, Path: path, Msg: "the plugin executable does not exist", Fix: fix, Err: err}
	case err != nil:
		return &Error{Kind: ErrNotExecutable, Path: path, Msg: fmt.Sprintf("cannot stat it: %v", err), Err: err}
	case st.IsDir():
		return &Error{Kind: ErrNotExecutable, Path: path, Msg: "is a directory, not an executable", Fix: "point plugin: at the built binary"}
	case st.Mode()&0o111 == 0:
		return &Error{Kind: ErrNotExecutable, Path: path, Msg: "is not executable", Fix: "chmod +x " + path + " (or rebuild it with go build)"}
	}
	return nil
}

// fileSHA256 returns the lower-case hex sha256 of a file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// FileSHA256 returns the lower-case hex sha256 of a file, as registry.yaml pins it.
func FileSHA256(path string) (string, error) {
	sum, err := fileSHA256(path)
	if err != nil {
		return "", fmt.Errorf("sha256 of %s: %w", path, err)
	}
	return sum, nil
}

func logsOrDiscard(opts HostOptions) io.Writer {
	if opts.Logs == nil {
		return io.Discard
	}
	return opts.Logs
}

// hostLogger re-emits the plugin's logs (and go-plugin's own) on opts.Logs.
func hostLogger(name string, opts HostOptions) hclog.Logger {
	if opts.Logs == nil {
		return hclog.New(&hclog.LoggerOptions{Name: "plugin." + name, Level: hclog.Off, Output: io.Discard})
	}
	level := hclog.Info
	if opts.Verbose {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: "plugin." + name, Level: level, Output: opts.Logs})
}

// remote is a plugin seen as a variant.Variant.
type remote struct{ c *Client }

// Describe returns the plugin's description (fetched once at start).
func (r remote) Describe() variant.Description { return r.c.desc }

// Build asks the plugin for the model and imports it.
func (r remote) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	return r.c.Build(ctx, cfg, seed)
}
