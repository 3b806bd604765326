// Command zoo runs, inspects, exports and checks Transformer encoder variants.
//
// Exit codes: 0 success, 1 the job failed (a runtime error or a parity mismatch), 2 bad usage
// or bad input, 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM). Every error is one
// line on stderr.
//
// # Where things go
//
//   - A new verb: a file VERB.go with a func VERBCommand() *cli.Command (Usage, ArgsUsage, a
//     Description ending in examples(...), Flags, Action), added to commands() below in the
//     place `zoo --help` should show it. Handlers stay thin: they parse, call the library and
//     render to an io.Writer. Bad input returns badInput(err) (exit 2), a failed job failed(err)
//     (exit 1). Completion, the man page and `zoo help VERB` follow from the definition.
//   - A new output format of `zoo run --output`: output.go, newSink's switch on the file
//     extension (JSON numbers are formatted by format.go). A new report format of a verb
//     (`zoo bench --format`): that verb's rendering code, next to its Action.
//   - A new environment variable: one entry in internal/env (name, syntax, default, doc, check);
//     read it with env.Get/Int/Duration/Bool, never os.Getenv. `zoo help environment` and the
//     README table come from that entry, and run() below checks its value at start-up.
//   - A flag shared by several verbs: model.go (flagRegistry, flagJSON, ...); the common ones
//     that may also come before the verb are listed in args.go (commonFlags).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends/cpu"
	_ "github.com/zoo-dev/zoo/backends/cuda"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/cliargs"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/memlimit"
)

// commands returns every verb, in the order `zoo --help` lists them.
func commands() []*cli.Command {
	return []*cli.Command{
		listCommand(),
		showCommand(),
		runCommand(),
		embedCommand(),
		rerankCommand(),
		tokenizeCommand(),
		evalCommand(),
		trainCommand(),
		serveCommand(),
		exportCommand(),
		parityCommand(),
		benchCommand(),
		profileCommand(),
		attentionCommand(),
		approxCommand(),
		compareCommand(),
		backendsCommand(),
		pluginCommand(),
		helpCommand(),
		completionCommand(),
		manCommand(),
	}
}

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

// optionFlagNames pairs the libraries' option names with the flags that set them, for
// messages: package zoo names an option as LoadOptions.X or EncoderOptions.X, package train
// as Config.X, Data.X or EvalConfig.X, the CLI by its flag. EvalConfig.X comes before
// Config.X, which its name contains.
var optionFlagNames = []string{
	"LoadOptions.Preset", "--preset", "LoadOptions.Set", "--set", "LoadOptions.Seed", "--seed",
	"LoadOptions.Weights", "--weights", "LoadOptions.Tokenizer", "--tokenizer", "LoadOptions.Backend", "--backend",
	"LoadOptions.Precision", "--precision", "LoadOptions.Threads", "--threads", "LoadOptions.Registries", "--registry",
	"EncoderOptions.Feeds", "--feed", "EncoderOptions.Pool", "--pool", "EncoderOptions.Normalize", "--normalize",
	"EncoderOptions.Window", "--window", "EncoderOptions.Batch", "--batch", "EncoderOptions.Truncate", "--truncate",
	"EncoderOptions.MaxWindows", "--max-windows", "ServeOptions.EmbeddingOutput", "--embedding-output", "ServeOptions.MaxTokens", "--max-tokens",
	"EvalConfig.Objective", "--objective", "EvalConfig.LabelSmoothing", "--label-smoothing", "EvalConfig.Window", "--window",
	"EvalConfig.Batch", "--batch", "EvalConfig.Seed", "--seed", "EvalConfig.Threads", "--threads", "EvalConfig.Precision", "--precision",
	"Config.Steps", "--steps", "Config.Batch", "--batch", "Config.Window", "--window", "Config.Shuffle", "--shuffle",
	"Config.Objective", "--objective", "Config.Optimizer", "--optimizer", "Config.LR", "--lr", "Config.WeightDecay", "--weight-decay",
	"Config.Eps", "--eps", "Config.Betas", "--betas", "Config.Momentum", "--momentum", "Config.Warmup", "--warmup",
	"Config.Schedule", "--schedule", "Config.LabelSmoothing", "--label-smoothing", "Config.Clip", "--clip",
	"Config.Precision", "--precision", "Config.Seed", "--seed", "Config.Threads", "--threads", "Config.EvalEvery", "--eval-every",
	"Config.SaveEvery", "--save-every", "Config.CheckpointActivations", "--checkpoint-activations", "Config.Output", "-o",
	"Config.Resume", "--resume", "Data.Train", "--input", "Data.Held", "--eval",
}

// optionFlags renders the option names in a message as flags.
var optionFlags = strings.NewReplacer(optionFlagNames...)

// flagOf returns the name of the flag that sets a library option ("Config.LR": "lr"), or ""
// for an option no flag sets.
func flagOf(option string) string {
	for i := 0; i < len(optionFlagNames); i += 2 {
		if optionFlagNames[i] == option {
			return strings.TrimLeft(optionFlagNames[i+1], "-")
		}
	}
	return ""
}

// flagNames renders the library's option names in s as the flags that set them.
func flagNames(s string) string { return optionFlags.Replace(s) }

// badInputf formats a bad-input error (exit 2).
func badInputf(format string, args ...any) error { return badInput(fmt.Errorf(format, args...)) }

// failed marks err as a failure of the job (exit 1), unless it is the library's input error
// (exit 2).
func failed(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	if zooroot.IsInput(err) {
		return &exitError{code: 2, err: err}
	}
	return &exitError{code: 1, err: err}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "zoo",
		Usage:   "run, compare, verify and ship Transformer encoder variants",
		Version: version + ", " + runtime.Version(),
		Description: "A model is a variant or variant.preset (see `zoo list`), or an .onnx file. Flags may come before or\n" +
			"after the name; the global options may also come before the command. Variants run as plugin\n" +
			"processes (built-ins: zoo itself). Environment variables: `zoo help environment`." +
			examples("zoo list", "zoo run linformer --input text.txt", "zoo help run"),
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		Flags:                  globalFlags(),
		UseShortOptionHandling: true,
		ExitErrHandler:         func(*cli.Context, error) {},
		OnUsageError:           flagUsageError,
		Commands:               commands(),
		Action:                 unknownCommandAction,
	}
	var setup func(cmds []*cli.Command)
	setup = func(cmds []*cli.Command) {
		for _, c := range cmds {
			if c.OnUsageError == nil {
				c.OnUsageError = flagUsageError
			}
			if len(c.Subcommands) > 0 && c.Action == nil {
				c.Action = unknownCommandAction
			}
			c.HideHelpCommand = true
			c.Description = strings.TrimLeft(c.Description, "\n")
			setup(c.Subcommands)
		}
	}
	setup(app.Commands)
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
	if len(args) > 1 && args[1] == completeCommand {
		complete(newApp(io.Discard, io.Discard), args[2:], stdout)
		return 0
	}
	args, verbose := stripVerbose(args)
	args, requirePinned := cliargs.StripBool(args, "require-pinned", false) // or ZOO_REQUIRE_PINNED, in plugin.FromEnv
	if err := checkEnv(stderr); err != nil {
		return report(stderr, err)
	}
	s := newSession(stderr, verbose)
	s.requirePinned = requirePinned
	defer s.end()
	app := newApp(stdout, s.stderr)
	args, err := cliargs.Hoist(app, helpArgs(app, args), commonFlags)
	if err == nil {
		err = cliargs.RequiredFlags(app, args, app.RunContext(s.ctx, cliargs.ReorderCommand(app, args)))
	}
	if code, ok := s.interrupted(); ok {
		return code
	}
	return report(s.stderr, err)
}

// checkEnv warns about unknown ZOO_* variables, refuses bad values of known ones (exit 2),
// and applies those that configure the process (the CPU kernel level).
func checkEnv(stderr io.Writer) error {
	errs, warnings := env.Problems(os.Environ())
	for _, w := range warnings {
		fmt.Fprintf(stderr, "zoo: warning: %s\n", w)
	}
	if len(errs) > 0 {
		msg := errs[0].Error()
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and %d more bad ZOO_* values)", len(errs)-1)
		}
		return badInputf("%s; see `zoo help environment`", msg)
	}
	if err := cpu.ApplyEnv(); err != nil {
		return badInput(err)
	}
	if v, _ := env.Get(env.MemoryLimit); v != "" {
		if _, _, err := memlimit.ParseLimit(v); err != nil {
			return badInput(err)
		}
	}
	return nil
}

// report prints err on one line and returns its exit code (0 for nil).
func report(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	} else if zooroot.IsInput(err) || isUsage(err) || errors.As(err, new(*cliargs.UsageError)) {
		code = 2
	}
	fmt.Fprintf(stderr, "zoo: %s\n", oneLine(flagNames(err.Error())))
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
