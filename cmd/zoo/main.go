// Command zoo runs, inspects, exports and checks Transformer encoder variants.
//
// Exit codes: 0 success, 1 the job failed (a runtime error or a parity mismatch), 2 bad usage
// or bad input, 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM). Every error is one
// line on stderr.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	_ "github.com/zoo-dev/zoo/backends/cpu"
	_ "github.com/zoo-dev/zoo/backends/cuda"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

// commands holds every verb; each verb's file adds its constructor here at init.
var commands []func() *cli.Command

func register(c func() *cli.Command) { commands = append(commands, c) }

// exitError carries an exit code with the error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as bad usage or bad input (exit 2).
func badInput(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 2, err: err}
}

// badInputf formats a bad-input error (exit 2).
func badInputf(format string, args ...any) error { return badInput(fmt.Errorf(format, args...)) }

// failed marks err as a failure of the job (exit 1).
func failed(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 1, err: err}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "zoo",
		Usage:   "run, compare, verify and ship Transformer encoder variants",
		Version: version,
		Description: "Models are named variant[.preset] (see `zoo list`). Flags may come before or after the name.\n" +
			"Environment: ZOO_BACKEND (cpu, ...) forces a backend; ZOO_THREADS caps CPU threads;\n" +
			"ZOO_CPU (avx512, avx2, generic) forces the CPU kernel level.\n" +
			"Variants run as plugin processes (built-ins: zoo itself). --verbose (anywhere) or ZOO_VERBOSE=1\n" +
			"shows plugin logs and timings; ZOO_PLUGIN_START_TIMEOUT and ZOO_PLUGIN_BUILD_TIMEOUT (e.g. 30s, 10m)\n" +
			"bound plugin start-up and builds; ZOO_PLUGIN_INPROCESS=1 serves built-ins in process (debugging).",
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		Flags:                  []cli.Flag{&cli.BoolFlag{Name: "verbose", Usage: "show plugin logs and timings on stderr (accepted after the command too)"}},
		UseShortOptionHandling: true,
		ExitErrHandler:         func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return badInput(err)
		},
	}
	for _, mk := range commands {
		c := mk()
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return badInput(err) }
		}
		app.Commands = append(app.Commands, c)
	}
	return app
}

// run executes the CLI and returns the exit code; main is a thin wrapper so tests can call it.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "zoo: internal error: %v (please report this)\n", r)
			code = 1
		}
	}()
	args, verbose := stripVerbose(args)
	s := newSession(stderr, verbose)
	defer s.end()
	app := newApp(stdout, s.stderr)
	err := app.RunContext(s.ctx, reorderCommandArgs(app, args))
	if code, ok := s.interrupted(); ok {
		return code
	}
	if err == nil {
		return 0
	}
	code = 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	} else if isUsage(err) {
		code = 2
	}
	fmt.Fprintf(s.stderr, "zoo: %s\n", oneLine(err.Error()))
	return code
}

// isUsage recognises urfave/cli's own usage complaints, which do not pass through
// OnUsageError (an unknown command, for instance).
func isUsage(err error) bool {
	msg := err.Error()
	for _, s := range []string{"flag provided but not defined", "Required flag", "No help topic", "command not found", "invalid value"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.ReplaceAll(s, "\n", "; ")
}

func main() {
	if maybeServeBuiltin(os.Args) {
		return
	}
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}
