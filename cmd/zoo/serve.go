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

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// serveCommand is the hidden first argument with which zoo re-executes itself to serve a
// built-in variant as a plugin: `zoo __serve-variant NAME`.
const serveCommand = "__serve-variant"

// inProcessEnv, set to 1, serves built-in variants in the zoo process (through the same
// gRPC server, attached with go-plugin's reattach support) instead of re-executing zoo.
const inProcessEnv = env.PluginInProcess

// verboseEnv, set to 1, is --verbose.
const verboseEnv = env.Verbose

// maybeServeBuiltin serves a built-in variant and exits when args ask for it; otherwise it
// returns false. main and the tests' TestMain call it first, before anything writes to stdout.
func maybeServeBuiltin(args []string) bool {
	if len(args) < 2 || args[1] != serveCommand {
		return false
	}
	if len(args) != 3 {
		fmt.Fprintf(os.Stderr, "zoo: %s wants one variant name; zoo runs it itself\n", serveCommand)
		os.Exit(2)
	}
	v, ok := variants.Builtin()[args[2]]
	if !ok {
		fmt.Fprintf(os.Stderr, "zoo: %s: no built-in variant %q\n", serveCommand, args[2])
		os.Exit(2)
	}
	plugin.Serve(v)
	return true
}

// session is the plugin host of one CLI invocation: plugins start lazily and all of them are
// killed when the command ends (or on Ctrl-C).
type session struct {
	// interrupted holds the signal that stopped the command, if any.
	interrupted atomic.Value
	mu          sync.Mutex
	host        *plugin.Host
	verbose     bool
	stderr      io.Writer
}

var (
	currentMu sync.Mutex
	current   *session
)

// beginSession installs a fresh plugin session for one run() and returns its end function,
// which kills the session's plugins. It also kills them on SIGINT/SIGTERM; if the command
// does not end by itself soon after, zoo exits 130.
func beginSession(stderr io.Writer, verbose bool) (end func()) {
	s := &session{verbose: verbose, stderr: stderr}
	currentMu.Lock()
	current = s
	currentMu.Unlock()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			s.interrupted.Store(sig)
			s.close()
			goplugin.CleanupClients()
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				fmt.Fprintf(stderr, "zoo: interrupted (%v)\n", sig)
				os.Exit(130)
			}
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		s.close()
		currentMu.Lock()
		if current == s {
			current = nil
		}
		currentMu.Unlock()
	}
}

func (s *session) close() {
	s.mu.Lock()
	h := s.host
	s.host = nil
	s.mu.Unlock()
	if h != nil {
		h.Close()
	}
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
			return exe, []string{serveCommand, name}, nil
		},
		Verbose: s.verbose,
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

// builtinVariant serves a built-in variant: its description comes from this binary's own
// table (the plugin process is this binary, so it would answer the same), and the plugin
// process starts at the first Build. `zoo list` thus starts no process.
type builtinVariant struct {
	e    registry.Entry
	desc variant.Description
}

// Describe returns the built-in description.
func (b *builtinVariant) Describe() variant.Description { return b.desc }

// Build starts (or reuses) the plugin process and builds through it.
func (b *builtinVariant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	v, err := pluginVariant(b.e)
	if err != nil {
		return nil, err
	}
	return v.Build(ctx, cfg, seed)
}

// pluginVariant starts (or reuses) the plugin of a registry entry and returns its variant.
func pluginVariant(e registry.Entry) (variant.Variant, error) {
	currentMu.Lock()
	s := current
	currentMu.Unlock()
	if s == nil {
		// Outside run() (a test calling a helper directly): a session of its own would leak
		// processes, so refuse clearly.
		return nil, failed(fmt.Errorf("variant %s: no plugin session (internal error)", e.Name))
	}
	h, err := s.pluginHost()
	if err != nil {
		return nil, err
	}
	spec := plugin.Spec{Name: e.Name, Builtin: e.IsBuiltin(), Args: e.Args, Env: e.Env, SHA256: e.SHA256, Source: e.Source}
	if !spec.Builtin {
		spec.Path = e.Plugin
	}
	t := time.Now()
	c, err := h.Client(spec)
	if err != nil {
		return nil, pluginExit(err)
	}
	if s.verbose {
		if pid := c.Pid(); pid != 0 {
			fmt.Fprintf(s.stderr, "zoo: plugin %s: pid %d, started and described in %s\n", e.Name, pid, time.Since(t).Round(time.Microsecond))
		} else {
			fmt.Fprintf(s.stderr, "zoo: plugin %s: in process, started and described in %s\n", e.Name, time.Since(t).Round(time.Microsecond))
		}
	}
	return &hostedVariant{c: c, s: s}, nil
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

// hostedVariant is a plugin's variant with the CLI's exit codes and --verbose timings.
type hostedVariant struct {
	c *plugin.Client
	s *session
}

// Describe returns the plugin's description.
func (v *hostedVariant) Describe() variant.Description { return v.c.Description() }

// Build builds through the plugin.
func (v *hostedVariant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	g, st, err := v.c.BuildStats(ctx, cfg, seed)
	if err != nil {
		if sig, ok := v.s.interrupted.Load().(os.Signal); ok {
			return nil, &exitError{code: 130, err: fmt.Errorf("interrupted (%v) while plugin %s was building; stopped it", sig, v.c.Name())}
		}
		return nil, pluginExit(err)
	}
	if v.s.verbose {
		fmt.Fprintf(v.s.stderr, "zoo: plugin %s: built %s in %d chunks: %s in the plugin (build, export), transfer %s (%.0f MB/s), import %s\n",
			v.c.Name(), format.HumanBytes(st.Bytes), st.Chunks, (st.Stream - st.Transfer).Round(time.Microsecond),
			st.Transfer.Round(time.Microsecond), float64(st.Bytes)/1e6/st.Transfer.Seconds(), st.Import.Round(time.Microsecond))
	}
	return g, nil
}

// stripVerbose removes --verbose from args (it is accepted anywhere before "--") and
// reports whether it was there or ZOO_VERBOSE=1 is set.
func stripVerbose(args []string) ([]string, bool) {
	verbose, _ := env.Bool(verboseEnv)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		switch {
		case i > 0 && (a == "--verbose" || a == "--verbose=true"):
			verbose = true
			continue
		case i > 0 && a == "--verbose=false":
			verbose = false
			continue
		}
		out = append(out, a)
	}
	return out, verbose
}

// currentVerbose reports whether the running command has --verbose.
func currentVerbose() bool {
	currentMu.Lock()
	defer currentMu.Unlock()
	return current != nil && current.verbose
}
