package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/cliargs"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// servePluginArg is the hidden first argument with which zoo re-executes itself to serve a
// built-in variant as a plugin: `zoo __serve-variant NAME`.
const servePluginArg = "__serve-variant"

// inProcessEnv, set to 1, serves built-in variants in the zoo process (through the same
// gRPC server, attached with go-plugin's reattach support) instead of re-executing zoo.
const inProcessEnv = env.PluginInProcess

// verboseEnv, set to 1, is --verbose.
const verboseEnv = env.Verbose

// maybeServeBuiltin serves a built-in variant and exits when args ask for it; otherwise it
// returns false. main and the tests' TestMain call it first, before anything writes to stdout.
func maybeServeBuiltin(args []string) bool {
	if len(args) < 2 || args[1] != servePluginArg {
		return false
	}
	if len(args) != 3 {
		fmt.Fprintf(os.Stderr, "zoo: %s wants one variant name; zoo runs it itself\n", servePluginArg)
		os.Exit(2)
	}
	v, ok := variants.Builtin()[args[2]]
	if !ok {
		fmt.Fprintf(os.Stderr, "zoo: %s: no built-in variant %q\n", servePluginArg, args[2])
		os.Exit(2)
	}
	plugin.Serve(v)
	return true
}

// session is one CLI invocation's plugin host and signal handling. It travels in the
// command's context (c.Context, and so every Build's ctx): plugins start lazily, all of them
// are killed when the command ends, and the first SIGINT or SIGTERM cancels the context,
// kills the plugins' process groups and makes zoo exit 130 or 143 with one line on stderr.
type session struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	verbose bool
	// requirePinned: --require-pinned (accepted anywhere) refuses unpinned plugins.
	requirePinned bool
	stderr        io.Writer

	sigs chan os.Signal
	done chan struct{} // closed by end
	sig  atomic.Value  // the os.Signal that stopped the command
	// drains is set by a command that finishes its work on the first signal and exits 0
	// (zoo serve): the signal cancels the context and nothing else; a second exits at once.
	drains atomic.Bool
	// finishes is set by a command that saves its work on the first signal before it returns
	// (zoo train): the signal cancels the context and kills the plugins, zoo still exits 130
	// or 143, but without the exitGrace deadline; a second signal exits at once.
	finishes atomic.Bool
	line     sync.Once // the one line on stderr that says so

	mu      sync.Mutex
	host    *plugin.Host
	started map[*plugin.Client]bool
}

type sessionKey struct{}

// exitGrace is how long zoo lets a signalled command return by itself (removing its
// temporary files) before it exits regardless. Plugins are killed before the grace begins.
const exitGrace = time.Second

// syncWriter serialises writes to stderr, which plugins' log goroutines (under --verbose),
// the signal handler and the command share.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// newSession starts a session and its signal handling; end stops both. The command must
// write to stderr through s.stderr.
func newSession(stderr io.Writer, verbose bool) *session {
	s := &session{verbose: verbose, stderr: &syncWriter{w: stderr}, sigs: make(chan os.Signal, 2), done: make(chan struct{}), started: map[*plugin.Client]bool{}}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.ctx, s.cancel = context.WithValue(ctx, sessionKey{}, s), cancel
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	go s.watch()
	return s
}

// watch waits for the first signal: it kills the plugins and cancels the command, which
// then has exitGrace to return and clean up (end included) before zoo exits regardless; a
// second signal exits at once.
func (s *session) watch() {
	var sig os.Signal
	select {
	case sig = <-s.sigs:
	case <-s.done:
		return
	}
	if s.drains.Load() {
		s.cancel(fmt.Errorf("%s", signalWord(sig)))
		select {
		case sig = <-s.sigs:
		case <-s.done:
			return
		}
	}
	s.sig.Store(sig)
	// Cancelled first, so that no plugin starts after the kill.
	s.cancel(fmt.Errorf("%s", signalWord(sig)))
	s.kill()
	var deadline <-chan time.Time
	if !s.finishes.Load() {
		t := time.NewTimer(exitGrace)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-s.sigs:
	case <-deadline:
	case <-s.done:
		return
	}
	code, _ := s.interrupted()
	os.Exit(code)
}

// interrupted reports the exit code of a command that a signal stopped (130 for SIGINT,
// 143 for SIGTERM: 128 plus the signal number, as shells do) and prints the one line that
// says so, once per session.
func (s *session) interrupted() (int, bool) {
	sig, ok := s.sig.Load().(os.Signal)
	if !ok {
		return 0, false
	}
	s.line.Do(func() { fmt.Fprintf(s.stderr, "zoo: %s\n", signalWord(sig)) })
	if n, ok := sig.(syscall.Signal); ok {
		return 128 + int(n), true
	}
	return 130, true
}

// drainOnSignal makes the first SIGINT or SIGTERM only cancel the command's context, which
// then returns by itself (and zoo exits as it says); a second signal still stops zoo at once.
func (s *session) drainOnSignal() { s.drains.Store(true) }

// finishOnSignal lets the command return by itself after the first SIGINT or SIGTERM, however
// long it takes to save its work (zoo exits 130 or 143 once it has); a second signal still
// stops zoo at once.
func (s *session) finishOnSignal() { s.finishes.Store(true) }

func signalWord(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "terminated"
	}
	return "interrupted"
}

// end kills the session's plugins and stops the signal handling, unless a signal came
// (then watch ends the process); the session cannot start plugins afterwards.
func (s *session) end() {
	if _, ok := s.sig.Load().(os.Signal); !ok {
		signal.Stop(s.sigs)
	}
	close(s.done)
	s.cancel(nil)
	s.mu.Lock()
	h := s.host
	s.mu.Unlock()
	if h != nil {
		h.Close()
	}
}

// kill kills the plugins' process groups at once, without waiting for them.
func (s *session) kill() {
	s.mu.Lock()
	h := s.host
	s.mu.Unlock()
	if h != nil {
		h.Kill()
	}
}

// sessionOf returns the session that ctx (a command's c.Context, or a Build's ctx) carries.
func sessionOf(ctx context.Context) (*session, error) {
	if s, ok := ctx.Value(sessionKey{}).(*session); ok {
		return s, nil
	}
	// Outside run() (a test calling a helper directly): a session of its own would leak
	// processes, so refuse clearly.
	return nil, failed(errors.New("no plugin session in this context (internal error)"))
}

// verboseOf reports whether the command whose context is ctx runs with --verbose.
func verboseOf(ctx context.Context) bool {
	s, err := sessionOf(ctx)
	return err == nil && s.verbose
}

// pluginHost returns the session's host, creating it on first use.
func (s *session) pluginHost() (*plugin.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.host != nil {
		return s.host, nil
	}
	opts := plugin.HostOptions{
		Self: func(name string) (string, []string, error) {
			exe, err := os.Executable()
			if err != nil {
				return "", nil, err
			}
			return exe, []string{servePluginArg, name}, nil
		},
		Verbose:       s.verbose,
		RequirePinned: s.requirePinned, // or ZOO_REQUIRE_PINNED=1, in FromEnv
	}
	if s.verbose {
		opts.Logs = s.stderr
	}
	if in, _ := env.Bool(inProcessEnv); in {
		opts.InProcess = func(name string) (variant.Variant, bool) {
			v, ok := variants.Builtin()[name]
			return v, ok
		}
	}
	opts, err := opts.FromEnv()
	if err != nil {
		return nil, badInput(err)
	}
	s.host = plugin.NewHost(opts)
	return s.host, nil
}

// client starts (or reuses) the plugin of a registry entry. A third-party plugin's
// description goes into the Describe cache, for `zoo list`.
func (s *session) client(ctx context.Context, e registry.Entry) (*plugin.Client, error) {
	h, err := s.pluginHost()
	if err != nil {
		return nil, err
	}
	spec := plugin.Spec{Name: e.Name, Builtin: e.IsBuiltin(), Args: e.Args, Env: e.Env, SHA256: e.SHA256, Source: e.Source}
	if !spec.Builtin {
		spec.Path = e.Plugin
	}
	t := time.Now()
	c, err := h.Client(ctx, spec)
	if err != nil {
		return nil, pluginExit(err)
	}
	s.mu.Lock()
	fresh := !s.started[c]
	s.started[c] = true
	s.mu.Unlock()
	if !fresh {
		return c, nil
	}
	if s.verbose {
		if pid := c.Pid(); pid != 0 {
			fmt.Fprintf(s.stderr, "zoo: plugin %s: pid %d, started and described in %s\n", e.Name, pid, time.Since(t).Round(time.Microsecond))
		} else {
			fmt.Fprintf(s.stderr, "zoo: plugin %s: in process, started and described in %s\n", e.Name, time.Since(t).Round(time.Microsecond))
		}
	}
	if !spec.Builtin {
		if err := describeCache().Store(spec.Path, c.Describe()); err != nil && s.verbose {
			fmt.Fprintf(s.stderr, "zoo: plugin %s: %v (zoo list will not show its description)\n", e.Name, err)
		}
	}
	return c, nil
}

// describeCache is the cache of third-party plugins' Describe answers that `zoo list` reads.
// Without a user cache directory it has no file: lookups miss and stores fail.
func describeCache() *plugin.DescribeCache {
	path, _ := plugin.DefaultDescribeCachePath()
	return &plugin.DescribeCache{Path: path}
}

// pluginExit gives a plugin error its exit code: 2 for what the user must fix in the
// registry or the config, 1 for a plugin that failed at its job.
func pluginExit(err error) error {
	var pe *plugin.Error
	if errors.As(err, &pe) && !pe.BadInput() {
		return failed(err)
	}
	return badInput(err)
}

// pluginVariant is a registry entry's variant as the CLI uses it: its description (for a
// built-in, from this binary's own table, since the plugin process is this binary and
// would answer the same; for a third-party plugin, the running plugin's answer) and a Build
// that runs in the entry's plugin process, started at the first Build (a built-in) or when
// the variant was looked up (a third-party plugin, which had to describe itself). It adds
// the CLI's exit codes and --verbose timings to plugin.Client.
type pluginVariant struct {
	s    *session
	e    registry.Entry
	desc variant.Description
}

// Variant returns the variant of a registry entry (the session is the library's
// VariantSource). A third-party plugin starts here (its Describe is needed to resolve the
// config); a built-in starts at its first Build.
func (s *session) Variant(ctx context.Context, e registry.Entry) (variant.Variant, error) {
	if e.IsBuiltin() {
		v, ok := variants.Builtin()[e.Name]
		if !ok {
			return nil, badInputf("registry entry %s says plugin: builtin, but this zoo binary has no built-in variant %q", e.Name, e.Name)
		}
		return &pluginVariant{s: s, e: e, desc: v.Describe()}, nil
	}
	c, err := s.client(ctx, e)
	if err != nil {
		return nil, err
	}
	return &pluginVariant{s: s, e: e, desc: c.Describe()}, nil
}

// Describe returns the variant's description.
func (v *pluginVariant) Describe() variant.Description { return v.desc }

// Build builds through the plugin; ctx (the command's) stops it on Ctrl-C.
func (v *pluginVariant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	c, err := v.s.client(ctx, v.e)
	if err != nil {
		return nil, err
	}
	g, st, err := c.BuildStats(ctx, cfg, seed)
	if err != nil {
		return nil, pluginExit(err)
	}
	if v.s.verbose {
		fmt.Fprintf(v.s.stderr, "zoo: plugin %s: built %s in %d chunks: %s in the plugin (build, export), transfer %s (%.0f MB/s), import %s\n",
			c.Name(), format.HumanBytes(st.Bytes), st.Chunks, (st.Stream - st.Transfer).Round(time.Microsecond),
			st.Transfer.Round(time.Microsecond), float64(st.Bytes)/1e6/st.Transfer.Seconds(), st.Import.Round(time.Microsecond))
	}
	return g, nil
}

// stripVerbose removes --verbose from args (it is accepted anywhere before "--") and
// reports whether it was there or ZOO_VERBOSE=1 is set.
func stripVerbose(args []string) ([]string, bool) {
	verbose, _ := env.Bool(verboseEnv)
	return cliargs.StripBool(args, "verbose", verbose)
}
