package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/registryhelp"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/suggest"
)

// envTopic is the help topic that prints the environment variables.
const envTopic = "environment"

// examples formats a verb's examples as the end of its Description (help, man page); newApp
// trims the leading blank line where the examples are the whole Description.
func examples(lines ...string) string {
	return "\n\nExamples:\n   " + strings.Join(lines, "\n   ")
}

func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show help for zoo, for a command, for the environment variables or for registries",
		ArgsUsage: "[COMMAND [SUBCOMMAND] | " + envTopic + " | " + registryhelp.Topic + "]",
		Description: "`zoo help COMMAND` is `zoo COMMAND --help`; `zoo help environment` lists every ZOO_* variable\n" +
			"with its values and default; `zoo help registry` explains registry.yaml and whom zoo trusts." +
			examples("zoo help run", "zoo help environment", "zoo help registry"),
		Action: func(c *cli.Context) error {
			switch topic := c.Args().First(); topic {
			case "":
				return cli.ShowAppHelp(c)
			case envTopic, "env":
				return env.WriteText(c.App.Writer)
			case registryhelp.Topic:
				return registryhelp.Write(c.App.Writer)
			default:
				// Known commands never get here: helpArgs turned them into COMMAND --help.
				return unknownCommand(topic, c.App.Commands, "help topic", append(commandNames(c.App.Commands), envTopic, registryhelp.Topic))
			}
		},
	}
}

// helpArgs turns `zoo help COMMAND [SUBCOMMAND]` into `zoo COMMAND [SUBCOMMAND] --help`, so that
// both print the same text.
func helpArgs(app *cli.App, args []string) []string {
	if len(args) == 1 {
		return append(args, "--help") // plain `zoo`
	}
	if len(args) < 3 || args[1] != "help" {
		return args
	}
	cmd := app.Command(args[2])
	if cmd == nil {
		return args
	}
	out := []string{args[0], args[2]}
	if len(args) > 3 && cmd.Command(args[3]) != nil {
		out = append(out, args[3])
	}
	return append(out, "--help")
}

// unknownCommandAction is the Action of the app and of verbs with subcommands: reached with
// an argument, that argument is not a command.
func unknownCommandAction(c *cli.Context) error {
	cmds := c.App.Commands
	if c.Command != nil && len(c.Command.Subcommands) > 0 {
		cmds = c.Command.Subcommands
	}
	if c.NArg() == 0 {
		if c.Command != nil && len(c.Command.Subcommands) > 0 {
			return cli.ShowSubcommandHelp(c)
		}
		return cli.ShowAppHelp(c)
	}
	return unknownCommand(c.Args().First(), cmds, "command", commandNames(cmds))
}

// unknownCommand is the bad-usage error for name, with the closest known name.
func unknownCommand(name string, cmds []*cli.Command, what string, candidates []string) error {
	return badInputf("unknown %s %q%s; see `zoo help`", what, name, suggest.DidYouMean(name, candidates))
}

// commandNames lists the visible commands' names and aliases.
func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	return names
}
