package main

import (
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/internal/suggest"
)

// reorderArgs moves a command's flags in front of its positional arguments. urfave/cli/v2
// stops parsing flags at the first positional argument, but users type
// `zoo run linformer --input text.txt`; the flag definitions tell which flags take a value.
// Everything after "--" is left alone.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	// Global flags (--help, --version) may precede the command.
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, name := range f.Names() {
			takesValue[name] = !isBool
		}
	}
	var flags, positional []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			positional = append(positional, rest[j:]...)
			break
		}
		if len(a) > 1 && strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if takesValue[name] && j+1 < len(rest) {
				flags = append(flags, rest[j+1])
				j++
			}
			continue
		}
		positional = append(positional, a)
	}
	out := append([]string{}, args[:i+1]...)
	out = append(out, flags...)
	return append(out, positional...)
}

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

// hoistCommonFlags moves the common flags found before the verb to just after it (after
// the subcommand for verbs that have subcommands). A common flag the verb does not define is
// bad usage. Without a verb, or with an unknown one, args come back unchanged.
func hoistCommonFlags(app *cli.App, args []string) ([]string, error) {
	var front, hoisted, names []string
	i := 1
	for ; i < len(args) && len(args[i]) > 1 && strings.HasPrefix(args[i], "-") && args[i] != "--"; i++ {
		name, _, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		takesValue, common := commonFlags[name]
		if !common {
			front = append(front, args[i])
			continue
		}
		hoisted, names = append(hoisted, args[i]), append(names, name)
		if takesValue && !inline {
			if i+1 >= len(args) {
				return nil, badInputf("flag --%s needs a value", name)
			}
			i++
			hoisted = append(hoisted, args[i])
		}
	}
	if len(hoisted) == 0 || i >= len(args) {
		return args, nil
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args, nil
	}
	j, path := i+1, "zoo "+cmd.Name
	if len(cmd.Subcommands) > 0 && j < len(args) {
		if sub := cmd.Command(args[j]); sub != nil {
			cmd, path, j = sub, path+" "+sub.Name, j+1
		}
	}
	for _, name := range names {
		if !definesFlag(cmd, name) {
			return nil, badInputf("flag --%s does not apply to `%s`%s", name, path, flagList(cmd))
		}
	}
	out := append([]string{args[0]}, front...)
	out = append(out, args[i:j]...)
	out = append(out, hoisted...)
	return append(out, args[j:]...), nil
}

func definesFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// flagList is " (its flags: --a, --b)" for error messages, or "" for a command without flags.
func flagList(cmd *cli.Command) string {
	var names []string
	for _, f := range cmd.Flags {
		names = append(names, "--"+f.Names()[0])
	}
	if len(names) == 0 {
		return " (it takes no flags)"
	}
	return " (its flags: " + strings.Join(names, ", ") + ")"
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
	path := commandPath(c)
	prefix := ""
	if path != "" {
		prefix = path + ": "
	}
	var names []string
	for _, f := range c.Command.Flags {
		names = append(names, f.Names()...)
	}
	if len(name) > 1 {
		if near := suggest.Closest(name, longNames(names)); near != "" {
			return badInputf("%sunknown flag %s; did you mean %s?", prefix, dashed(name), dashed(near))
		}
	}
	return badInputf("%sunknown flag %s (see %s)", prefix, dashed(name), strings.TrimSpace("zoo help "+path))
}

// commandPath is the command c runs, as typed after "zoo" ("run", "plugin new"); "" for
// the app itself.
func commandPath(c *cli.Context) string {
	lineage := c.Lineage() // c, its parent, ..., the app's contexts (whose Command is the app, named zoo)
	var names []string
	for i := len(lineage) - 1; i >= 0; i-- {
		if cmd := lineage[i].Command; cmd != nil && cmd.Name != c.App.Name {
			names = append(names, cmd.Name)
		}
	}
	return strings.Join(names, " ")
}

// longNames keeps the names of more than one letter: a one-letter flag is one edit away
// from every other one, so it is never a useful suggestion.
func longNames(names []string) []string {
	var out []string
	for _, n := range names {
		if len(n) > 1 {
			out = append(out, n)
		}
	}
	return out
}

// dashed writes a flag name as users type it: --input, -i.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// requiredFlagsError rewrites urfave/cli's `Required flag "input" not set` (or `Required
// flags "weights, input" not set`), which names neither the command nor the flag as typed,
// into `run: --input is required (see zoo help run)`, exit 2. args are the arguments the app
// ran with, which name the command: urfave/cli checks required flags only once the flags
// parsed, so everything before the command is a flag of the app's, without a value (the
// common flags that take one were moved after the command by hoistCommonFlags). Other
// errors come back unchanged.
func requiredFlagsError(app *cli.App, args []string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "Required flag ")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "Required flags "); !ok {
			return err
		}
	}
	quoted, ok := strings.CutSuffix(rest, " not set")
	list, uerr := strconv.Unquote(quoted)
	if !ok || uerr != nil {
		return err
	}
	var flags []string
	for _, n := range strings.Split(list, ", ") {
		flags = append(flags, dashed(n))
	}
	path := ""
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i < len(args) {
		if cmd := app.Command(args[i]); cmd != nil {
			path = cmd.Name
			if i+1 < len(args) {
				if sub := cmd.Command(args[i+1]); sub != nil {
					path += " " + sub.Name
				}
			}
		}
	}
	prefix := ""
	if path != "" {
		prefix = path + ": "
	}
	verb := "is"
	if len(flags) > 1 {
		verb = "are"
	}
	return badInputf("%s%s %s required (see %s)", prefix, andList(flags), verb, strings.TrimSpace("zoo help "+path))
}

// andList joins items as prose: "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
