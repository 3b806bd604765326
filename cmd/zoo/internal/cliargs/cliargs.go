// Package cliargs shapes zoo's command line for urfave/cli/v2: flags on either side of a
// model name, the common flags before the verb, and usage errors users can read. Its errors are
// bad usage; the caller gives them their exit code.
package cliargs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// Reorder moves a command's flags in front of its positional arguments. urfave/cli/v2
// stops parsing flags at the first positional argument, but users type
// `zoo run linformer --input text.txt`; the flag definitions tell which flags take a value.
// Everything after "--" is left alone.
func Reorder(app *cli.App, args []string) []string {
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

// ReorderCommand is Reorder that also handles commands with subcommands
// (`zoo plugin test PATH --json`): flags are moved before the subcommand's arguments.
func ReorderCommand(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i < len(args) {
		if cmd := app.Command(args[i]); cmd != nil && len(cmd.Subcommands) > 0 {
			sub := &cli.App{Commands: cmd.Subcommands}
			return append(append([]string{}, args[:i]...), Reorder(sub, args[i:])...)
		}
	}
	return Reorder(app, args)
}

// Hoist moves the common flags (common: name → whether it takes a value) found before the verb to just after it (after
// the subcommand for verbs that have subcommands). A common flag the verb does not define is
// bad usage. Without a verb, or with an unknown one, args come back unchanged.
func Hoist(app *cli.App, args []string, common map[string]bool) ([]string, error) {
	var front, hoisted, names []string
	i := 1
	for ; i < len(args) && len(args[i]) > 1 && strings.HasPrefix(args[i], "-") && args[i] != "--"; i++ {
		name, _, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		takesValue, common := common[name]
		if !common {
			front = append(front, args[i])
			continue
		}
		hoisted, names = append(hoisted, args[i]), append(names, name)
		if takesValue && !inline {
			if i+1 >= len(args) {
				return nil, usagef("flag --%s needs a value", name)
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
		if !DefinesFlag(cmd, name) {
			return nil, usagef("flag --%s does not apply to `%s`%s", name, path, FlagList(cmd))
		}
	}
	out := append([]string{args[0]}, front...)
	out = append(out, args[i:j]...)
	out = append(out, hoisted...)
	return append(out, args[j:]...), nil
}

// DefinesFlag reports whether cmd has a flag called name (or aliased so).
func DefinesFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// FlagList is " (its flags: --a, --b)" for error messages, or "" for a command without flags.
func FlagList(cmd *cli.Command) string {
	var names []string
	for _, f := range cmd.Flags {
		names = append(names, "--"+f.Names()[0])
	}
	if len(names) == 0 {
		return " (it takes no flags)"
	}
	return " (its flags: " + strings.Join(names, ", ") + ")"
}

// LongNames keeps the names of more than one letter: a one-letter flag is one edit away
// from every other one, so it is never a useful suggestion.
func LongNames(names []string) []string {
	var out []string
	for _, n := range names {
		if len(n) > 1 {
			out = append(out, n)
		}
	}
	return out
}

// Dashed writes a flag name as users type it: --input, -i.
func Dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// RequiredFlags rewrites urfave/cli's `Required flag "input" not set` (or `Required
// flags "weights, input" not set`), which names neither the command nor the flag as typed,
// into `run: --input is required (see zoo help run)`, exit 2. args are the arguments the app
// ran with, which name the command: urfave/cli checks required flags only once the flags
// parsed, so everything before the command is a flag of the app's, without a value (the
// common flags that take one were moved after the command by Hoist). Other
// errors come back unchanged.
func RequiredFlags(app *cli.App, args []string, err error) error {
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
		flags = append(flags, Dashed(n))
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
	return usagef("%s%s %s required (see %s)", prefix, AndList(flags), verb, strings.TrimSpace("zoo help "+path))
}

// AndList joins items as prose: "a", "a and b", "a, b and c".
func AndList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// UsageError is bad usage of the command line: the caller exits 2.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &UsageError{msg: fmt.Sprintf(format, args...)} }

// StripBool removes the boolean flag --name (--name=true, --name=false) from anywhere in args
// before "--" (args[0], the program, is kept) and returns what is left with the flag's value:
// the last one given, or def when none is. zoo accepts --verbose and --require-pinned
// anywhere on the command line, so they are taken out before urfave/cli parses it.
func StripBool(args []string, name string, def bool) ([]string, bool) {
	value := def
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		switch {
		case i > 0 && (a == "--"+name || a == "--"+name+"=true"):
			value = true
			continue
		case i > 0 && a == "--"+name+"=false":
			value = false
			continue
		}
		out = append(out, a)
	}
	return out, value
}
