package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/registry"
)

// completeCommand is the hidden first argument with which the completion scripts ask zoo
// for the candidates of the word being typed: `zoo __complete WORD... CURRENT`.
const completeCommand = "__complete"

// completionScripts are the shell scripts `zoo completion SHELL` prints. Each asks
// `zoo __complete` for candidates, so they follow the binary's commands, flags and registry;
// where zoo offers nothing (a flag's value, a file argument) the shell completes file names.
var completionScripts = map[string]string{
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

func completionCommand() *cli.Command {
	shells := make([]string, 0, len(completionScripts))
	for s := range completionScripts {
		shells = append(shells, s)
	}
	sort.Strings(shells)
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (" + strings.Join(shells, ", ") + ")",
		ArgsUsage: "SHELL",
		Description: "Completes commands, subcommands, flags, variant names (with presets) and backend names." +
			examples("source <(zoo completion bash)", "zoo completion zsh > \"${fpath[1]}/_zoo\"", "zoo completion fish | source"),
		Action: func(c *cli.Context) error {
			sh := c.Args().First()
			script, ok := completionScripts[sh]
			if !ok || c.NArg() != 1 {
				return badInputf("zoo completion wants one shell: %s (got %q)", strings.Join(shells, ", "), strings.Join(c.Args().Slice(), " "))
			}
			_, err := io.WriteString(c.App.Writer, script)
			return err
		},
	}
}

// complete writes the candidates for the last of words (the words after "zoo"; the last one
// is being typed and may be empty), one per line, those that start with it only.
func complete(app *cli.App, words []string, w io.Writer) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	for _, c := range candidates(app, before, cur) {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(w, c)
		}
	}
}

func candidates(app *cli.App, before []string, cur string) []string {
	var cmd, sub *cli.Command
	var positional []string
	flags := app.Flags
	for i := 0; i < len(before); i++ {
		a := before[i]
		if strings.HasPrefix(a, "-") {
			if f := findFlag(flags, a); f != nil && takesValue(f) && !strings.Contains(a, "=") {
				if i == len(before)-1 {
					return flagValues(a)
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
			if n := "--" + f.Names()[0]; !contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	switch {
	case cmd == nil:
		return commandNames(app.Commands)
	case len(cmd.Subcommands) > 0 && sub == nil:
		return commandNames(cmd.Subcommands)
	case cmd.Name == "help":
		if len(positional) == 0 {
			return append(commandNames(app.Commands), envTopic, registryTopic)
		}
		if c := app.Command(positional[0]); c != nil && len(positional) == 1 {
			return commandNames(c.Subcommands)
		}
	case cmd.Name == "completion" && len(positional) == 0:
		return []string{"bash", "fish", "zsh"}
	case strings.HasPrefix(cmd.ArgsUsage, "NAME[.PRESET]"):
		if len(positional) == 0 || strings.HasSuffix(cmd.ArgsUsage, "...") {
			return modelNames()
		}
	}
	return nil
}

func findFlag(flags []cli.Flag, arg string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}

// flagValues offers the values zoo knows for a flag (backend names, precisions); for the
// others the shell completes file names.
func flagValues(flag string) []string {
	switch strings.TrimLeft(flag, "-") {
	case precisionFlagName:
		return precisions
	case "backend":
	default:
		return nil
	}
	out := []string{"auto"}
	for _, b := range backends.All() {
		out = append(out, b.Name())
	}
	return out
}

// modelNames lists the variants of the built-in and user registries, each also with its
// presets (vanilla, vanilla.tiny, ...). Errors leave the list short: completion never fails.
func modelNames() []string {
	base, _ := registry.Parse("registry.yaml (built in)", zooroot.RegistryYAML)
	user, _ := registry.LoadUser()
	var out []string
	for _, e := range registry.Merge(base, user).Entries() {
		out = append(out, e.Name)
		for _, p := range e.PresetNames() {
			out = append(out, e.Name+"."+p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
