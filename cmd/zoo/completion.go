package main

import (
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/completion"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/export"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/registryhelp"
	"github.com/zoo-dev/zoo/zoo/registry"
)

// completeCommand is the hidden first argument with which the completion scripts ask zoo
// for the candidates of the word being typed: `zoo __complete WORD... CURRENT`.
const completeCommand = "__complete"

func completionCommand() *cli.Command {
	shells := completion.Shells()
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (" + strings.Join(shells, ", ") + ")",
		ArgsUsage: "SHELL",
		Description: "Completes commands, subcommands, flags, variant names (with presets) and backend names." +
			examples("source <(zoo completion bash)", "zoo completion zsh > \"${fpath[1]}/_zoo\"", "zoo completion fish | source"),
		Action: func(c *cli.Context) error {
			sh := c.Args().First()
			script, ok := completion.Scripts[sh]
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
	root := &completion.Command{Flags: completionFlags(app.Flags), Subcommands: completionCommands(app.Commands)}
	completion.Write(w, root, words, completion.Source{Models: modelNames, FlagValues: flagValues, HelpTopics: []string{envTopic, registryhelp.Topic}})
}

// completionCommands describes cmds for package complete.
func completionCommands(cmds []*cli.Command) []*completion.Command {
	var out []*completion.Command
	for _, c := range cmds {
		out = append(out, &completion.Command{Names: c.Names(), Hidden: c.Hidden, ArgsUsage: c.ArgsUsage,
			Flags: completionFlags(c.Flags), Subcommands: completionCommands(c.Subcommands)})
	}
	return out
}

// completionFlags describes flags for package complete.
func completionFlags(flags []cli.Flag) []completion.Flag {
	var out []completion.Flag
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		out = append(out, completion.Flag{Names: f.Names(), TakesValue: !isBool})
	}
	return out
}

// flagValues offers the values zoo knows for a flag of a command (backend names,
// precisions: export's are its own); for the others the shell completes file names.
func flagValues(command, flag string) []string {
	switch strings.TrimLeft(flag, "-") {
	case precisionFlagName:
		if command == "export" {
			return export.Precisions
		}
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
