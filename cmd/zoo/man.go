package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/internal/env"
)

func manCommand() *cli.Command {
	return &cli.Command{
		Name:  "man",
		Usage: "print zoo's manual page (roff) on stdout",
		Description: "The page is generated from the commands' definitions, so it matches this binary." +
			examples("zoo man | man -l -", "zoo man > ~/.local/share/man/man1/zoo.1"),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return badInputf("zoo man takes no arguments (got %q)", c.Args().First())
			}
			app := newApp(io.Discard, io.Discard)
			withDescriptions(app.Commands, "zoo")
			app.Description += "\n\n" + env.ManSection()
			page, err := app.ToManWithSection(1)
			if err != nil {
				return failed(fmt.Errorf("man page: %w", err))
			}
			_, err = fmt.Fprint(c.App.Writer, page)
			return err
		},
	}
}

// withDescriptions puts each command's usage line and Description (with its examples) into
// its UsageText, the field urfave/cli's man page prints for a command.
func withDescriptions(cmds []*cli.Command, parent string) {
	for _, c := range cmds {
		path := parent + " " + c.Name
		if c.UsageText == "" && c.Description != "" {
			c.UsageText = strings.TrimSpace(path+" [options] "+c.ArgsUsage) + "\n\n" + c.Description
		}
		withDescriptions(c.Subcommands, path)
	}
}
