package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
)

func listCommand() *cli.Command {
	return &cli.Command{
		Name:        "list",
		Usage:       "list the variants in the registry",
		Description: examples("zoo list", "zoo list --json", "zoo list --registry my-variants.yaml"),
		Flags:       []cli.Flag{flagRegistry, flagJSON},
		Action:      listAction,
	}
}

type listRow struct {
	Name       string   `json:"name"`
	Aliases    []string `json:"aliases,omitempty"`
	Summary    string   `json:"summary"`
	Paper      string   `json:"paper,omitempty"`
	Complexity string   `json:"complexity,omitempty"`
	Plugin     string   `json:"plugin"`
	Presets    []string `json:"presets,omitempty"`
}

func listAction(c *cli.Context) error {
	reg, err := loadRegistry(c)
	if err != nil {
		return err
	}
	var rows []listRow
	for _, e := range reg.Entries() {
		row := listRow{Name: e.Name, Aliases: e.Aliases, Summary: e.Summary, Paper: e.Paper, Plugin: e.Plugin, Presets: e.PresetNames()}
		if v, err := variantFor(e); err == nil {
			d := v.Describe()
			row.Complexity = d.Complexity
			if e.IsBuiltin() { // a built-in entry has no summary: the variant's Describe is its one source
				row.Summary, row.Paper = d.Summary, d.Paper
			}
		}
		rows = append(rows, row)
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rows)
	}
	renderList(c.App.Writer, rows)
	return nil
}

func renderList(w io.Writer, rows []listRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCOST\tPRESETS\tSUMMARY\tPAPER")
	for _, r := range rows {
		name := r.Name
		if len(r.Aliases) > 0 {
			name += " (" + strings.Join(r.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Complexity, strings.Join(r.Presets, ","), r.Summary, r.Paper)
	}
	tw.Flush()
}
