// Package completion completes zoo's command lines for the shells: the scripts `zoo
// completion SHELL` prints (each asks `zoo __complete WORD... CURRENT` for candidates, so
// they follow the binary's commands, flags and registry; where zoo offers nothing, a flag's
// value or a file argument, the shell completes file names), and the candidates themselves,
// from a description of the commands (Command) and what zoo knows beyond them (Source).
package completion

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Scripts are the shell scripts `zoo completion SHELL` prints, by shell.
var Scripts = map[string]string{
	"bash": `# bash completion for zoo; load it with: source <(zoo completion bash)
_zoo_complete() {
    local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\n'
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)" -- "$cur"))
}
complete -o default -o bashdefault -F _zoo_complete zoo
`,
	"zsh": `#compdef zoo
# zsh completion for zoo; load it with: source <(zoo completion zsh), or save it as _zoo in $fpath
_zoo() {
    local -a cands
    cands=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ -n "${cands[1]}" ]]; then
        compadd -a cands
    else
        _files
    fi
}
if [[ "$funcstack[1]" == "_zoo" ]]; then
    _zoo "$@"
else
    compdef _zoo zoo
fi
`,
	"fish": `# fish completion for zoo; load it with: zoo completion fish | source
function __zoo_complete
    set -l words (commandline -opc) (commandline -ct)
    set -l cands ($words[1] __complete $words[2..-1] 2>/dev/null)
    if set -q cands[1]
        printf '%s\n' $cands
    else
        __fish_complete_path (commandline -ct)
    end
end
complete -c zoo -f -a '(__zoo_complete)'
`,
}

// Shells are the shells Scripts has scripts for, sorted.
func Shells() []string {
	shells := make([]string, 0, len(Scripts))
	for s := range Scripts {
		shells = append(shells, s)
	}
	sort.Strings(shells)
	return shells
}

// Command is a command (or the application) as completion sees it.
type Command struct {
	// Names are its name and aliases; a Hidden command is never offered.
	Names  []string
	Hidden bool
	// ArgsUsage says what its arguments are: "NAME[.PRESET]" (a model; "..." after it: several).
	ArgsUsage   string
	Flags       []Flag
	Subcommands []*Command
}

// path is the command's name for Source.FlagValues: "" for none (the program), its first
// name, then the subcommand's after a space.
func (c *Command) path(sub *Command) string {
	switch {
	case c == nil:
		return ""
	case sub == nil:
		return c.Names[0]
	}
	return c.Names[0] + " " + sub.Names[0]
}

// Flag is a flag as completion sees it: its names (without dashes) and whether it takes a
// value.
type Flag struct {
	Names      []string
	TakesValue bool
}

// Source is what completion offers beyond the commands and flags.
type Source struct {
	// Models lists the model names (variants, each also with its presets).
	Models func() []string
	// FlagValues offers the values of a flag (given as typed, "--backend") of a command
	// (its name, "" for the program's own flags; a subcommand's as "plugin test"); nil for a
	// flag whose values the shell completes as file names.
	FlagValues func(command, flag string) []string
	// HelpTopics are the topics of `help` besides the commands.
	HelpTopics []string
}

// Write writes the candidates for the last of words (the words after the program's name;
// the last one is being typed and may be empty), one per line, those that start with it
// only.
func Write(w io.Writer, app *Command, words []string, src Source) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	for _, c := range Candidates(app, before, cur, src) {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(w, c)
		}
	}
}

// Candidates are the words that may follow before, for the word cur being typed (not
// filtered by cur's prefix, except that a cur starting with "-" asks for flags).
func Candidates(app *Command, before []string, cur string, src Source) []string {
	var cmd, sub *Command
	var positional []string
	flags := app.Flags
	for i := 0; i < len(before); i++ {
		a := before[i]
		if strings.HasPrefix(a, "-") {
			if f := FindFlag(flags, a); f != nil && f.TakesValue && !strings.Contains(a, "=") {
				if i == len(before)-1 {
					if src.FlagValues == nil {
						return nil
					}
					return src.FlagValues(cmd.path(sub), a)
				}
				i++
			}
			continue
		}
		switch {
		case cmd == nil:
			if cmd = app.Command(a); cmd == nil {
				return nil
			}
			flags = cmd.Flags
		case sub == nil && len(cmd.Subcommands) > 0:
			if sub = cmd.Command(a); sub == nil {
				return nil
			}
			flags = sub.Flags
		default:
			positional = append(positional, a)
		}
	}
	if strings.HasPrefix(cur, "-") {
		out := []string{"--help"}
		if cmd == nil {
			out = append(out, "--version")
		}
		for _, f := range flags {
			if n := "--" + f.Names[0]; !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	switch {
	case cmd == nil:
		return app.names()
	case len(cmd.Subcommands) > 0 && sub == nil:
		return cmd.names()
	case cmd.Names[0] == "help":
		if len(positional) == 0 {
			return append(app.names(), src.HelpTopics...)
		}
		if c := app.Command(positional[0]); c != nil && len(positional) == 1 {
			return c.names()
		}
	case cmd.Names[0] == "completion" && len(positional) == 0:
		return Shells()
	case strings.HasPrefix(cmd.ArgsUsage, "NAME[.PRESET]"):
		if (len(positional) == 0 || strings.HasSuffix(cmd.ArgsUsage, "...")) && src.Models != nil {
			return src.Models()
		}
	}
	return nil
}

// Command returns c's subcommand named name (or aliased), or nil.
func (c *Command) Command(name string) *Command {
	for _, s := range c.Subcommands {
		if slices.Contains(s.Names, name) {
			return s
		}
	}
	return nil
}

// names are the names and aliases of c's visible subcommands.
func (c *Command) names() []string {
	var out []string
	for _, s := range c.Subcommands {
		if !s.Hidden {
			out = append(out, s.Names...)
		}
	}
	return out
}

// FindFlag returns the flag of flags that arg ("--name" or "--name=value") names, or nil.
func FindFlag(flags []Flag, arg string) *Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	for i, f := range flags {
		if slices.Contains(f.Names, name) {
			return &flags[i]
		}
	}
	return nil
}
