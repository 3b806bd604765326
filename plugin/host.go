package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
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
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Default timeouts; the environment variables StartTimeoutEnv and BuildTimeoutEnv (Go
// durations such as 30s or 10m) override them in HostOptions.FromEnv.
const (
	DefaultStartTimeout = 20 * time.Second
	DefaultBuildTimeout = 10 * time.Minute
	StartTimeoutEnv     = env.PluginStartTimeout
	BuildTimeoutEnv     = env.PluginBuildTimeout
	// RequirePinnedEnv set to 1 sets HostOptions.RequirePinned in FromEnv.
	RequirePinnedEnv = env.RequirePinned
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
	// RequirePinned refuses to start an executable plugin whose Spec has no SHA256 (an
	// ErrNotPinned error that gives the file's digest to pin it with); built-ins always run.
	RequirePinned bool
}

// FromEnv fills zero timeouts from StartTimeoutEnv and BuildTimeoutEnv, then from the
// defaults, and sets RequirePinned when RequirePinnedEnv is 1. A malformed value is an error
// naming the variable.
func (o HostOptions) FromEnv() (HostOptions, error) {
	if pin, err := env.Bool(RequirePinnedEnv); err != nil {
		return o, err
	} else if pin {
		o.RequirePinned = true
	}
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
	opts     HostOptions
	mu       sync.Mutex
	clients  map[string]*Client
	starting map[*Client]bool // processes between exec and the end of Describe
	closed   bool
}

// NewHost returns a host; it starts nothing until Client is called.
func NewHost(opts HostOptions) *Host {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.BuildTimeout <= 0 {
		opts.BuildTimeout = DefaultBuildTimeout
	}
	return &Host{opts: opts, clients: map[string]*Client{}, starting: map[*Client]bool{}}
}

// Client returns the running client for spec, starting the plugin if no live process
// serves it yet; the process is shared by every call with the same spec until Close. The
// start (exec, handshake, Describe) is bounded by HostOptions.StartTimeout and by ctx: when
// ctx ends first, the starting plugin's process group is killed and Client returns an
// ErrStopped error that wraps ctx's cause.
func (h *Host) Client(ctx context.Context, spec Spec) (*Client, error) {
	if ctx.Err() != nil {
		return nil, stopped(spec.Name, "", "start", ctx)
	}
	key := spec.key()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, &Error{Kind: ErrStopped, Plugin: spec.Name, Msg: "the plugin host is closed"}
	}
	var stale *Client
	if c, ok := h.clients[key]; ok {
		if !c.exited() {
			h.mu.Unlock()
			return c, nil
		}
		stale = c
		delete(h.clients, key)
	}
	var c *Client
	var err error
	if spec.Builtin && h.opts.InProcess != nil {
		h.mu.Unlock()
		v, ok := h.opts.InProcess(spec.Name)
		if !ok {
			err = &Error{Kind: ErrNotFound, Plugin: spec.Name, Msg: "no built-in variant of this name", Fix: "see `zoo list`"}
		} else {
			c, err = startInProcess(ctx, spec.Name, v, h.opts)
		}
	} else {
		c, err = newProcClient(spec, h.opts)
		if err == nil {
			h.starting[c] = true
		}
		h.mu.Unlock()
		if err == nil {
			err = c.connect(ctx)
		}
	}
	if stale != nil {
		stale.Close()
	}
	h.mu.Lock()
	delete(h.starting, c)
	var other *Client
	switch {
	case err != nil:
	case h.closed:
		err = c.fail(ErrStopped, nil, "stopped by zoo while it was starting (the host closed)", "")
	default:
		if o, ok := h.clients[key]; ok && !o.exited() {
			other = o // a concurrent call started the same plugin first
		} else {
			h.clients[key] = c
		}
	}
	h.mu.Unlock()
	if c != nil && (err != nil || other != nil) {
		c.Close()
	}
	if err != nil {
		return nil, err
	}
	if other != nil {
		return other, nil
	}
	return c, nil
}

// Kill kills the process group of every plugin the host started or is starting, at once,
// and does not wait; the host refuses new starts. Close still reaps them. It is what a
// signal handler calls before the process exits.
func (h *Host) Kill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, c := range h.clients {
		c.kill()
	}
	for c := range h.starting {
		c.kill()
	}
}

// Close kills the process group of every plugin the host started (or is starting) at once,
// then waits a bounded time for each to be reaped. The host cannot be used afterwards; Close
// may be called again, from any goroutine, and then returns at once.
func (h *Host) Close() error {
	h.mu.Lock()
	var all []*Client
	for _, c := range h.clients {
		all = append(all, c)
	}
	for c := range h.starting {
		all = append(all, c)
	}
	h.clients, h.starting, h.closed = map[string]*Client{}, map[*Client]bool{}, true
	// Killed under the lock: whoever sees the host closed knows no plugin of it runs on.
	for _, c := range all {
		c.kill()
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	return nil
}

// Client is one running plugin. It is a variant.Variant: Describe is the plugin's answer and
// Build streams the plugin's model and imports it.
type Client struct {
	name    string
	path    string
	opts    HostOptions
	pc      *goplugin.Client
	rpc     pluginpb.VariantClient
	desc    variant.Description
	proto   *pluginpb.DescribeResponse
	tail    *tailWriter
	stopInP func() // in-process mode: stops the server goroutine
	conn    goplugin.ClientProtocol
	once    sync.Once
	closing atomic.Bool

	procMu sync.Mutex
	proc   *procRunner // nil in process, and until go-plugin builds it
	killed bool
}

var _ variant.Variant = (*Client)(nil)

// Name is the variant name the client was started for (the registry entry).
func (c *Client) Name() string { return c.name }

// Describe returns the plugin's Describe answer (fetched once, at start).
func (c *Client) Describe() variant.Description { return c.desc }

// DescribeResponse is the plugin's raw Describe answer (protocol minor, SDK version, features).
func (c *Client) DescribeResponse() *pluginpb.DescribeResponse { return c.proto }

// Pid is the plugin's process id (0 in process).
func (c *Client) Pid() int {
	if p := c.process(); p != nil {
		return p.Pid
	}
	return 0
}

func (c *Client) process() *os.Process {
	c.procMu.Lock()
	r := c.proc
	c.procMu.Unlock()
	if r == nil {
		return nil
	}
	return r.process()
}

// Close kills the plugin's process group (or stops the in-process server) and waits a
// bounded time for go-plugin to let go of it.
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
		// Killed first: a plugin has nothing to save, and go-plugin's graceful path waits
		// for a hung plugin. go-plugin's Kill then only reaps and cleans up; it waits on
		// locks and pipes, hence the bound.
		c.kill()
		bounded(killWait, c.pc.Kill)
	})
}

// killWait bounds go-plugin's clean-up of a killed plugin: the pipes close within killGrace
// (proc.go), the rest is bookkeeping.
const killWait = killGrace + 3*time.Second

// bounded runs f and waits for it at most d; past d, f is left to finish on its own.
func bounded(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// kill kills the plugin's process group at once, or makes sure it never starts; it does not
// wait. In process it does nothing (Close stops the server).
func (c *Client) kill() {
	c.closing.Store(true) // before the kill: a call it breaks reports ErrStopped, not a crash
	c.procMu.Lock()
	c.killed = true
	r := c.proc
	c.procMu.Unlock()
	if r != nil {
		_ = r.Kill(context.Background())
	}
}

// wasKilled reports whether kill was called.
func (c *Client) wasKilled() bool {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	return c.killed
}

// keep records the runner go-plugin built, unless the client was killed before.
func (c *Client) keep(r *procRunner) error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.killed {
		return errStopped
	}
	c.proc = r
	return nil
}

func (c *Client) exited() bool { return c.stopInP == nil && c.pc.Exited() }

func (c *Client) fail(kind ErrorKind, err error, msg, fix string) *Error {
	return &Error{Kind: kind, Plugin: c.name, Path: c.path, Msg: msg, Fix: fix, Err: err}
}

// stopped is the error of a call that ctx ended: it wraps ctx's cause (context.Canceled
// when the caller cancelled, e.g. on Ctrl-C).
func stopped(name, path, call string, ctx context.Context) *Error {
	return &Error{Kind: ErrStopped, Plugin: name, Path: path, Msg: "stopped by zoo during " + call, Err: context.Cause(ctx)}
}

// newProcClient checks spec's executable and prepares its go-plugin client; nothing runs
// until connect.
func newProcClient(spec Spec, opts HostOptions) (*Client, error) {
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
		if spec.SHA256 == "" && opts.RequirePinned {
			fix := "pin it in " + where + " with sha256: (sha256sum " + path + ") once you trust this file"
			if sum, err := fileSHA256(path); err == nil {
				fix = fmt.Sprintf("if you trust this file, pin it in %s: sha256: \"%s\"", where, sum)
			}
			return nil, fail(ErrNotPinned, nil, "is not pinned by sha256, and unpinned plugins are refused ("+RequirePinnedEnv+"=1 or --require-pinned)", fix)
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
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	level := "info"
	if opts.Verbose {
		level = "debug"
	}
	env = append(env, LogLevelEnv+"="+level)
	tail := newTail(40)
	c := &Client{name: spec.Name, path: path, opts: opts, tail: tail}
	c.pc = goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(&GRPCPlugin{}, ProtocolVersion),
		RunnerFunc:       runnerFor(path, args, env, c.keep),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		StartTimeout:     opts.StartTimeout,
		Logger:           hostLogger(spec.Name, opts),
		Stderr:           tail,
		SyncStdout:       logsOrDiscard(opts),
		SyncStderr:       io.MultiWriter(tail, logsOrDiscard(opts)),
		GRPCDialOptions:  dialOptions(),
	})
	return c, nil
}

// errStartTimeout and errBuildTimeout are the causes of the host's own deadlines, told apart
// from the caller's.
var (
	errStartTimeout = errors.New("start timeout")
	errBuildTimeout = errors.New("build timeout")
)

// connect performs the handshake, dispenses the service and calls Describe, all bounded by
// StartTimeout and ctx. When ctx ends, the process group is killed at once.
func (c *Client) connect(ctx context.Context) error {
	defer context.AfterFunc(ctx, c.kill)()
	type result struct {
		proto goplugin.ClientProtocol
		err   error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.pc.Client()
		done <- result{p, err}
	}()
	// go-plugin bounds the wait for the handshake line by StartTimeout, but not what comes
	// after it (the dial); the timer here bounds the whole.
	t := time.NewTimer(c.opts.StartTimeout + killGrace + time.Second)
	defer t.Stop()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		c.kill()
		return stopped(c.name, c.path, "start", ctx)
	case <-t.C:
		c.kill()
		return c.fail(ErrTimeout, nil, fmt.Sprintf("did not complete the plugin handshake within %s (is it a zoo plugin? does it hang at start?)", c.opts.StartTimeout),
			"raise "+StartTimeoutEnv+" if it is just slow")
	}
	if ctx.Err() != nil {
		return stopped(c.name, c.path, "start", ctx)
	}
	if r.err != nil && c.wasKilled() {
		return c.fail(ErrStopped, r.err, "stopped by zoo while it was starting", "")
	}
	if r.err != nil {
		return c.classifyStart(r.err)
	}
	c.conn = r.proto
	raw, err := r.proto.Dispense(PluginName)
	if err != nil {
		return c.fail(ErrNotPlugin, err, fmt.Sprintf("does not serve zoo's variant service: %v", err), "build it with zoo's plugin SDK (plugin.Serve)")
	}
	rpc, ok := raw.(pluginpb.VariantClient)
	if !ok {
		return c.fail(ErrNotPlugin, nil, fmt.Sprintf("dispensed %T, not a variant client", raw), "")
	}
	c.rpc = rpc
	dctx, cancel := context.WithTimeoutCause(ctx, c.opts.StartTimeout, errStartTimeout)
	defer cancel()
	resp, err := rpc.Describe(dctx, &pluginpb.DescribeRequest{HostProtocolMinor: ProtocolMinor})
	if err != nil {
		return c.callError("Describe", dctx, err, errStartTimeout, c.opts.StartTimeout, StartTimeoutEnv)
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

// callError turns an RPC error into a plugin error: the host's own deadline (whose cause is
// timeout), the caller's cancellation, a crash or the plugin's own error.
func (c *Client) callError(call string, ctx context.Context, err error, timeout error, limit time.Duration, env string) error {
	st, _ := status.FromError(err)
	switch {
	case errors.Is(context.Cause(ctx), timeout) || (ctx.Err() == nil && st.Code() == codes.DeadlineExceeded):
		c.kill()
		c.Close()
		return c.fail(ErrTimeout, err, fmt.Sprintf("did not finish %s within %s (is it hung?); zoo stopped it", call, limit),
			fmt.Sprintf("if the model is just big, raise %s (e.g. %s=%s)", env, env, 4*limit))
	case ctx.Err() != nil:
		return stopped(c.name, c.path, call, ctx)
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
	c.procMu.Lock()
	r := c.proc
	c.procMu.Unlock()
	if r != nil {
		if st := r.processState(); st != nil {
			return st.String()
		}
	}
	return "process exited"
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
