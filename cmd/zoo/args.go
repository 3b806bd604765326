package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/cliargs"
	"github.com/zoo-dev/zoo/internal/suggest"
)

// commonFlags are the flags accepted before the verb too (`zoo --registry r.yaml list`); the
// value says whether the flag takes a value. --verbose, accepted anywhere, is stripped
// earlier (stripVerbose). They are moved after the verb (or its subcommand), where the verb's
// own definition parses them; a verb that lacks one refuses it.
var commonFlags = map[string]bool{"registry": true, "backend": true, "threads": true, precisionFlagName: true, "json": false}

// globalFlags are commonFlags as `zoo --help` lists them (GLOBAL OPTIONS).
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "registry", Usage: "extra registry `FILE` (for the commands that read the registry)"},
		&cli.StringFlag{Name: "backend", Usage: "backend `NAME` to run on (see zoo backends)"},
		&cli.IntFlag{Name: "threads", Usage: "worker threads (0: the backend's default)"},
		flagPrecision(),
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout"},
		&cli.BoolFlag{Name: "verbose", Usage: "show plugin logs, timings and (zoo run) the backend's compile report: its steps, which fusions applied and why others did not, on stderr (accepted anywhere)"},
		&cli.BoolFlag{Name: "require-pinned", Usage: "refuse to start a third-party plugin that its registry does not pin by sha256 (accepted anywhere; ZOO_REQUIRE_PINNED=1; see zoo help registry)"},
		cli.HelpFlag,
	}
}

// flagUsageError is every command's OnUsageError (the app's too): urfave/cli's complaint about
// the flags becomes zoo's one line, exit 2. An unknown flag ("flag provided but not defined",
// from Go's flag package) is named as users type it, with the closest flag of the command
// that refused it: `run: unknown flag --inptu; did you mean --input?`.
func flagUsageError(c *cli.Context, err error, _ bool) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok || c == nil || c.Command == nil {
		return badInput(err)
	}
	path := commandPath(c.Lineage(), c.App.Name)
	prefix := ""
	if path != "" {
		prefix = path + ": "
	}
	var names []string
	for _, f := range c.Command.Flags {
		names = append(names, f.Names()...)
	}
	if len(name) > 1 {
		if near := suggest.Closest(name, cliargs.LongNames(names)); near != "" {
			return badInputf("%sunknown flag %s; did you mean %s?", prefix, cliargs.Dashed(name), cliargs.Dashed(near))
		}
	}
	return badInputf("%sunknown flag %s (see %s)", prefix, cliargs.Dashed(name), strings.TrimSpace("zoo help "+path))
}

// commandPath is the command c runs, as typed after "zoo" ("run", "plugin new"); "" for
// the app itself.
func commandPath(lineage []*cli.Context, app string) string {
	// lineage is c, its parent, ..., the app's contexts (whose Command is the app, named zoo)
	var names []string
	for i := len(lineage) - 1; i >= 0; i-- {
		if cmd := lineage[i].Command; cmd != nil && cmd.Name != app {
			names = append(names, cmd.Name)
		}
	}
	return strings.Join(names, " ")
}
