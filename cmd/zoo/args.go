package main

import (
	"strings"

	"github.com/urfave/cli/v2"
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

// reorderCommandArgs is reorderArgs that also handles commands with subcommands
// (`zoo plugin test PATH --json`): flags are moved before the subcommand's arguments.
func reorderCommandArgs(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i < len(args) {
		if cmd := app.Command(args[i]); cmd != nil && len(cmd.Subcommands) > 0 {
			sub := &cli.App{Commands: cmd.Subcommands}
			return append(append([]string{}, args[:i]...), reorderArgs(sub, args[i:])...)
		}
	}
	return reorderArgs(app, args)
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
