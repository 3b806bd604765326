package main

import (
	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/list"
)

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the variants in the registry",
		Description: "A third-party plugin that its registry does not pin by sha256 is marked [unpinned] ([dev] with\n" +
			"dev: true): zoo runs whatever that file holds; see `zoo help registry`." +
			examples("zoo list", "zoo list --json", "zoo list --registry my-variants.yaml"),
		Flags:  []cli.Flag{flagRegistry, flagJSON},
		Action: listAction,
	}
}

// listAction starts no plugin, ever: a plugin that hangs cannot hang `zoo list`.
func listAction(c *cli.Context) error {
	reg, err := loadRegistry(c)
	if err != nil {
		return err
	}
	rows := list.Rows(reg, describeCache())
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rows)
	}
	list.Render(c.App.Writer, rows)
	return nil
}
